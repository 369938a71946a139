"""nn.parallel.DistributedDataParallel: data-parallel training over
eagervm.distributed, with PyTorch's name and meaning.

    import eagervm.distributed as dist
    dist.init_process_group()                     # under mpirun: one process a rank
    model = nn.parallel.DistributedDataParallel(net)
    loss_fn(model(x_shard), t_shard).backward()   # .grad: the mean over the ranks
    opt.step()

At construction the parameters (and buffers) are broadcast from rank 0, so
every rank starts from the same weights. The parameters that require grad
are grouped into buckets of at most bucket_cap_mb megabytes (2**20 bytes),
in reverse registration order (the order backward produces their gradients),
one dtype a bucket; the grouping depends only on the module, so it is the
same on every rank.

A post-accumulate-grad hook on each parameter counts the gradients of its
bucket. When the bucket's last one is accumulated, the bucket is issued at
once, in the middle of backward: its gradients are concatenated into one flat
tensor (eagervm.cat; a bucket of one is reduced where it is), all-reduced in
place with ReduceOp.AVG (on the `ccl` stream, which runs beside compute), and each
parameter's .grad becomes a view of its slice of the flat tensor (no copy
back). Everything is an ordinary instruction: the rest of backward runs while
the all-reduce is in flight, and the optimizer step that reads .grad waits for
it by dependency alone. Nothing here waits on the host.

Buckets are issued in bucket order on every rank (a bucket that fills early
waits for the ones before it), so the collectives match across ranks.

The buckets' concatenations run on a worker of their own: the autograd
walk accumulates the leaves' gradients last once the previous step's graph
is still alive (the leaves' accumulators keep their first step's place in
the walk's order), so these hooks run at the walk's end, and on backward's
stream a concatenation, and its all-reduce with it, would queue behind all
of backward. On a worker of its own it waits only for its gradients.

As PyTorch with find_unused_parameters=False, every parameter that requires
grad must get a gradient in each backward: if a backward leaves a bucket
unfilled, the next forward raises RuntimeError naming the parameters that got
none. `with model.no_sync():` skips the reduction of the backwards whose
forward ran inside it (gradients accumulate locally; the first backward after
it reduces the sum).
"""
import contextlib
import weakref

from ... import _C, asyncs
from ...autograd import no_grad
from ..module import Module

__all__ = ["DistributedDataParallel"]

_MB = 1 << 20


def _dist():
    """eagervm.distributed, or a clear error where it has no MPI."""
    from ... import distributed
    if not distributed.is_available():
        raise RuntimeError("DistributedDataParallel needs eagervm.distributed's MPI backend, "
                           "which this build does not have (rebuild with Open MPI found)")
    return distributed


class _Bucket:
    """A group of parameters reduced by one all-reduce: their indices into
    the DDP's parameter list, and each one's offset, length and shape in the
    flat tensor."""

    __slots__ = ("index", "params", "layout", "numel", "dtype", "pending")

    def __init__(self, index, dtype):
        self.index, self.dtype = index, dtype
        self.params, self.layout = [], []
        self.numel = 0
        self.pending = 0

    def add(self, i, p):
        n = p.numel()
        self.params.append(i)
        self.layout.append((self.numel, n, tuple(p.shape)))
        self.numel += n


def _hook(ddp_ref, i):
    """The post-accumulate-grad hook of parameter i. It holds the DDP weakly:
    hooks cannot be removed, and a dropped DDP must not stay alive through its
    parameters (its hooks then do nothing)."""
    def hook(_param):
        ddp = ddp_ref()
        if ddp is not None:
            ddp._grad_ready(i)
    return hook


class DistributedDataParallel(Module):
    """DistributedDataParallel(module, bucket_cap_mb=25, broadcast_buffers=True,
    find_unused_parameters=False, process_group=None)

    Wraps module for data-parallel training: forward delegates to module; in
    backward each parameter's gradient is averaged over the ranks, bucket by
    bucket while backward goes on. eagervm.distributed must be initialised.
    The wrapped module is `.module`; state_dict has its entries under
    "module." (as PyTorch's).
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=25,
                 find_unused_parameters=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an eagervm.nn.Module, "
                            f"not {type(module).__name__}")
        if device_ids is not None or output_device is not None or dim != 0:
            raise ValueError("DistributedDataParallel: device_ids, output_device and dim are "
                             "for GPUs; on the CPU leave them unset")
        if process_group is not None:
            raise ValueError("DistributedDataParallel: only the default process group "
                             "(process_group=None) is supported")
        if find_unused_parameters:
            raise ValueError("DistributedDataParallel: find_unused_parameters=True is not "
                             "supported: every parameter that requires grad must get a "
                             "gradient in each backward (freeze the others with "
                             "requires_grad_(False) before wrapping)")
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)):
            raise TypeError(f"DistributedDataParallel: bucket_cap_mb must be a number, not "
                            f"{type(bucket_cap_mb).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got "
                             f"{bucket_cap_mb}")
        dist = _dist()
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not "
                               "initialised: call eagervm.distributed.init_process_group() "
                               "first")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel: the module has no parameter that "
                               "requires grad: there is nothing to reduce")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.bucket_cap_mb = bucket_cap_mb
        self._dist_mod = dist
        self._world_size = dist.get_world_size()
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._buckets = self._make_buckets(bucket_cap_mb * _MB)
        self._bucket_of = [0] * len(self._params)
        for b in self._buckets:
            for i in b.params:
                self._bucket_of[i] = b.index
        self._require_sync = True   # no_sync() clears it
        self._sync_now = True       # what the last forward saw
        self._issue_log = None      # a list to record issued buckets in (tests)
        self._copy_thread = None    # the worker of the buckets' concatenations
        self._reset_iteration()
        self._sync_module_states()
        ref = weakref.ref(self)
        for i, p in enumerate(self._params):
            p.register_post_accumulate_grad_hook(_hook(ref, i))

    # ------------------------------------------------------------ setup

    def _make_buckets(self, cap_bytes):
        """Reverse parameter order, a new bucket when the next parameter would
        pass the cap or has another dtype; a parameter larger than the cap has
        a bucket of its own."""
        buckets, cur, cur_bytes = [], None, 0
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            nbytes = p.numel() * p.dtype.itemsize
            if cur is None or cur.dtype != p.dtype or \
                    (cur.params and cur_bytes + nbytes > cap_bytes):
                cur = _Bucket(len(buckets), p.dtype)
                buckets.append(cur)
                cur_bytes = 0
            cur.add(i, p)
            cur_bytes += nbytes
        return buckets

    @no_grad()
    def _sync_module_states(self):
        """Rank 0's parameters and buffers, broadcast in place to every rank
        (module order: the same collectives on every rank)."""
        for p in self.module.parameters():
            self._dist_mod.broadcast(p, src=0)
        self._broadcast_buffers()

    def _broadcast_buffers(self):
        for b in self.module.buffers():
            self._dist_mod.broadcast(b, src=0)

    # ------------------------------------------------------------ per iteration

    def _reset_iteration(self):
        self._ready = [False] * len(self._params)
        self._bucket_ready = [False] * len(self._buckets)
        for b in self._buckets:
            b.pending = len(b.params)
        self._next_bucket = 0
        self._any_ready = False

    def _check_previous_iteration(self):
        """A backward that left a bucket unfilled is an error (PyTorch's
        find_unused_parameters=False): its ranks' gradients were not reduced."""
        if not self._any_ready:
            return
        missing = [self._names[i] for i, r in enumerate(self._ready) if not r]
        self._reset_iteration()
        raise RuntimeError(
            "DistributedDataParallel: the previous backward did not produce a gradient for "
            f"{len(missing)} parameter(s) ({', '.join(missing)}), so its gradient reduction "
            "did not finish (find_unused_parameters=False). Make every parameter that "
            "requires grad take part in the loss, or freeze the unused ones with "
            "requires_grad_(False) before wrapping.")

    def _grad_ready(self, i):
        """Called after parameter i's gradient is accumulated in backward."""
        if not self._sync_now:
            return
        if self._ready[i]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {self._names[i]} got a gradient twice "
                "before its bucket was reduced (a second backward before the first one "
                "gave every parameter a gradient)")
        self._ready[i] = True
        self._any_ready = True
        b = self._buckets[self._bucket_of[i]]
        b.pending -= 1
        if b.pending:
            return
        self._bucket_ready[b.index] = True
        # Issue in bucket order, so every rank issues the same collectives in
        # the same order.
        while self._next_bucket < len(self._buckets) and \
                self._bucket_ready[self._next_bucket]:
            self._issue(self._buckets[self._next_bucket])
            self._next_bucket += 1
        if self._next_bucket == len(self._buckets):
            self._reset_iteration()

    @no_grad()
    def _issue(self, bucket):
        """Flat = the bucket's gradients end to end; all-reduce it (mean over
        the ranks); each .grad becomes a view of its slice. All issued, none
        waited for."""
        params = [self._params[i] for i in bucket.params]
        avg = self._dist_mod.ReduceOp.AVG
        if len(params) == 1 and params[0].grad.is_contiguous():
            # A bucket of one: its gradient is reduced where it is.
            self._dist_mod.all_reduce(params[0].grad, op=avg)
        else:
            # The concatenation runs on a worker of its own: on backward's
            # stream it would queue behind every backward op issued before
            # this hook ran (all of them, when the walk reaches the
            # accumulators last), and the all-reduce with it.
            if self._copy_thread is None:
                self._copy_thread = asyncs.Thread()
            with asyncs.thread(self._copy_thread):
                flat = _C.cat([p.grad.reshape(-1) for p in params])
            self._dist_mod.all_reduce(flat, op=avg)
            for p, (off, n, shape) in zip(params, bucket.layout):
                p.grad = flat[off:off + n].view(shape)
        if self._issue_log is not None:
            self._issue_log.append(bucket.index)

    # ------------------------------------------------------------ the module

    def forward(self, *args, **kwargs):
        if _C.is_grad_enabled():
            self._check_previous_iteration()
            self._sync_now = self._require_sync
            if self.broadcast_buffers and self._sync_now:
                with no_grad():
                    self._broadcast_buffers()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backwards of the forwards run inside do not reduce: the gradients
        accumulate on each rank, and the first synchronised backward after it
        reduces their sum."""
        old = self._require_sync
        self._require_sync = False
        try:
            yield
        finally:
            self._require_sync = old

    def bucket_layout(self):
        """The buckets, in issue order: a list of lists of parameter names."""
        return [[self._names[i] for i in b.params] for b in self._buckets]

    def extra_repr(self):
        return f"bucket_cap_mb={self.bucket_cap_mb}, buckets={len(self._buckets)}"
