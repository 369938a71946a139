"""eagervm.distributed: collectives over MPI, with PyTorch's names.

    mpirun -np 4 python3 train.py

    import eagervm as ev
    import eagervm.distributed as dist
    dist.init_process_group("mpi")            # rank and world size come from MPI
    t = ev.ones(4) * dist.get_rank()
    dist.all_reduce(t)                         # returns at once; on the `ccl` stream
    print(t.numpy())                           # a sync point: waits for the collective

Each collective is an instruction on the `ccl` stream of thread 0 and returns
at once; its tensors take part in dependency analysis like any op's, so
reading a result waits by itself and compute overlaps communication. Every
rank must issue the same collectives in the same order (from any
asyncs.Thread: they start in the order the process issued them). With
async_op=True a collective returns a Work with wait() and is_completed();
otherwise None. Tensors must be contiguous (inputs that are only read are
copied when they are not).

Environment:
  EAGERVM_DISTRIBUTED_DEBUG=1     ranks compare each collective (kind, op,
                                  dtype, shape) before running it; a mismatch
                                  raises RuntimeError on every rank naming
                                  each rank's collective and line.
  EAGERVM_COLLECTIVE_TIMEOUT=sec  a collective waiting longer (default 300)
                                  prints which ranks have not joined it and
                                  the last collective each started, then
                                  fails: the next sync point raises.

Importing this module initialises nothing; init_process_group() does.
"""
import atexit as _atexit
import enum as _enum

from .. import _C

__all__ = [
    "is_available", "init_process_group", "is_initialized", "get_rank", "get_world_size",
    "destroy_process_group", "ReduceOp", "Work", "all_reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "reduce_scatter_tensor", "barrier", "get_backend",
]


class ReduceOp(_enum.IntEnum):
    """The reductions of all_reduce and reduce_scatter_tensor. On bool tensors
    SUM and MAX are a logical or, PRODUCT and MIN a logical and; AVG takes
    float tensors only."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4


# Whether this build has MPI (a module attribute, so a test can take the
# path of a build without it, which needs no C).
_available = bool(_C._dist_available())

_NOT_BUILT = ("eagervm.distributed: MPI was not found at build time, so this eagervm has no "
              "distributed backend (install Open MPI's libopenmpi-dev, e.g. with "
              "scripts/setup.sh, and rebuild)")


def is_available():
    """True if this build of eagervm has the MPI backend."""
    return _available


def init_process_group(backend="mpi", init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None):
    """Initialises MPI and the default process group (collective: every rank
    calls it). Rank and world size come from MPI (mpirun sets them); a
    world_size or rank given must match. timeout (seconds, or a
    datetime.timedelta) overrides EAGERVM_COLLECTIVE_TIMEOUT."""
    if not _available:
        raise RuntimeError(_NOT_BUILT)
    if backend is not None and str(backend).lower() != "mpi":
        raise ValueError(f"init_process_group(): backend {backend!r} is not supported "
                         "(eagervm has 'mpi')")
    if init_method not in (None, "env://") or store is not None:
        raise ValueError("init_process_group(): init_method and store are not used: MPI "
                         "(mpirun) starts the ranks")
    seconds = 0.0
    if timeout is not None:
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        seconds = float(seconds)
        if not seconds > 0:
            raise ValueError(f"init_process_group(): timeout must be positive, not {timeout!r}")
    got_rank, got_size = _C._dist_init(seconds)
    for name, want, got in (("world_size", world_size, got_size), ("rank", rank, got_rank)):
        if want is not None and want >= 0 and want != got:
            _C._dist_destroy()
            raise ValueError(f"init_process_group(): {name}={want} but MPI says {got}")
    _register_exit()


def is_initialized():
    """True while the default process group exists."""
    return _available and bool(_C._dist_is_initialized())


def get_rank(group=None):
    """This process's rank in the default group."""
    _need_default(group, "get_rank")
    return _C._dist_rank()


def get_world_size(group=None):
    """The number of ranks of the default group."""
    _need_default(group, "get_world_size")
    return _C._dist_world_size()


def get_backend(group=None):
    """'mpi' (the only backend)."""
    _need_default(group, "get_backend")
    _C._dist_rank()  # raises if not initialised
    return "mpi"


def destroy_process_group(group=None):
    """Waits for all work, then finalises MPI (collective). MPI cannot be
    initialised again in this process afterwards."""
    _need_default(group, "destroy_process_group")
    _C._dist_destroy()


def _need_default(group, fn):
    if group is not None:
        raise ValueError(f"{fn}(): only the default group (group=None) is supported")


_exit_registered = False


def _at_exit():
    # Before the runtime's own exit handler (atexit runs in reverse order):
    # finalise MPI while the ccl stream still runs.
    if is_initialized():
        _C._dist_destroy()


def _register_exit():
    global _exit_registered
    if not _exit_registered:
        _atexit.register(_at_exit)
        _exit_registered = True


# The collectives are C functions bound as they are, so the site each one
# records is the caller's line, not a line of this file.
if _available:
    all_reduce = _C._dist_all_reduce
    broadcast = _C._dist_broadcast
    all_gather = _C._dist_all_gather
    all_gather_into_tensor = _C._dist_all_gather_into_tensor
    reduce_scatter_tensor = _C._dist_reduce_scatter_tensor
    barrier = _C._dist_barrier
else:
    def _unavailable(*args, **kwargs):
        raise RuntimeError(_NOT_BUILT)
    all_reduce = broadcast = all_gather = all_gather_into_tensor = _unavailable
    reduce_scatter_tensor = barrier = _unavailable
# What async_op=True returns: wait() and is_completed().
Work = _C._DistWork
