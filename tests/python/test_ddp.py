"""nn.parallel.DistributedDataParallel and datasets.DistributedSampler.

The bucket logic, the hooks, no_sync, the errors and the sampler are tested
in this process against a stand-in for eagervm.distributed that records the
collectives (a world of one: the reductions are the identity). The real
thing runs under `mpirun -np 2` (tests/python/ddp_worker.py and the main
job's --distributed run), skipped where mpirun or eagervm.distributed is
missing.
"""
import json
import os
import shutil
import subprocess
import sys
import types

import pytest

import eagervm as ev
from eagervm import nn, optim
from eagervm.datasets import DistributedSampler

np = pytest.importorskip("numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DDP = nn.parallel.DistributedDataParallel


# ------------------------------------------------------------ a stand-in

class FakeDist(types.ModuleType):
    """eagervm.distributed's surface for a world of one, recording each
    collective as (kind, shape, op)."""

    class ReduceOp:
        SUM, AVG, MAX, MIN, PRODUCT = "SUM", "AVG", "MAX", "MIN", "PRODUCT"

    def __init__(self, initialized=True):
        super().__init__("eagervm.distributed")
        self.initialized = initialized
        self.log = []

    def is_available(self):
        return True

    def is_initialized(self):
        return self.initialized

    def get_world_size(self):
        return 1

    def get_rank(self):
        return 0

    def all_reduce(self, t, op=ReduceOp.SUM):
        self.log.append(("all_reduce", tuple(t.shape), op))

    def broadcast(self, t, src=0):
        self.log.append(("broadcast", tuple(t.shape), src))


@pytest.fixture
def fake(monkeypatch):
    d = FakeDist()
    monkeypatch.setitem(sys.modules, "eagervm.distributed", d)
    monkeypatch.setattr(ev, "distributed", d, raising=False)
    return d


def mlp(seed=0):
    rng = np.random.default_rng(seed)
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    with ev.no_grad():
        for p in net.parameters():
            p.copy_(ev.from_numpy(rng.uniform(-0.05, 0.05, tuple(p.shape)).astype(np.float32)))
    return net


def batch(n=8, seed=1):
    rng = np.random.default_rng(seed)
    return (ev.from_numpy(rng.standard_normal((n, 784)).astype(np.float32)),
            ev.from_numpy(rng.integers(0, 10, n).astype(np.int64)))


# ------------------------------------------------------------ buckets and hooks

def test_buckets_are_in_reverse_parameter_order_and_capped(fake):
    net = mlp()
    assert DDP(net).bucket_layout() == [["2.bias", "2.weight", "0.bias", "0.weight"]]
    # 0.1 MB: layer 2 and layer 1's bias (11 KB) fit, layer 1's weight (784 KB) does not.
    assert DDP(net, bucket_cap_mb=0.1).bucket_layout() == [
        ["2.bias", "2.weight", "0.bias"], ["0.weight"]]
    # A parameter larger than the cap gets a bucket of its own.
    assert DDP(net, bucket_cap_mb=1e-6).bucket_layout() == [
        ["2.bias"], ["2.weight"], ["0.bias"], ["0.weight"]]


def test_construction_broadcasts_every_parameter_from_rank_0(fake):
    DDP(mlp())
    assert fake.log == [("broadcast", (256, 784), 0), ("broadcast", (256,), 0),
                        ("broadcast", (10, 256), 0), ("broadcast", (10,), 0)]


def test_backward_reduces_each_bucket_once_and_grads_stay_right(fake):
    net, ref = mlp(), mlp()
    ddp = DDP(net, bucket_cap_mb=0.1)
    ddp._issue_log = []
    fake.log.clear()
    x, t = batch()
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(2):   # the state resets after each backward
        net.zero_grad()
        ref.zero_grad()
        loss_fn(ddp(x), t).backward()
        loss_fn(ref(x), t).backward()
        for p, q in zip(net.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)
    assert ddp._issue_log == [0, 1, 0, 1]
    # The flat bucket (10 + 2560 + 256 elements), then the weight alone.
    assert fake.log == [("all_reduce", (2826,), "AVG"), ("all_reduce", (256, 784), "AVG")] * 2


def test_grads_of_a_flat_bucket_feed_the_optimizer(fake):
    net, ref = mlp(), mlp()
    ddp = DDP(net, bucket_cap_mb=0.1)
    opts = [optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (net, ref)]
    loss_fn = nn.CrossEntropyLoss()
    for step in range(3):
        x, t = batch(seed=step)
        for model, m, opt in ((ddp, net, opts[0]), (ref, ref, opts[1])):
            opt.zero_grad()
            loss_fn(model(x), t).backward()
            opt.step()
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-7)


class Crossed(nn.Module):
    """Registers `second` before `first` but applies first, so backward
    reaches `second`'s parameters (the later bucket) first."""

    def __init__(self):
        super().__init__()
        self.second = nn.Linear(16, 4)
        self.first = nn.Linear(8, 16)

    def forward(self, x):
        return self.second(self.first(x))


def test_buckets_are_issued_in_bucket_order_even_when_a_later_one_fills_first(fake):
    ddp = DDP(Crossed(), bucket_cap_mb=1e-6)
    assert ddp.bucket_layout() == [["first.bias"], ["first.weight"], ["second.bias"],
                                   ["second.weight"]]
    ddp._issue_log = []
    fake.log.clear()
    ddp(ev.ones(2, 8)).sum().backward()
    assert ddp._issue_log == [0, 1, 2, 3]
    assert [shape for _, shape, _ in fake.log] == [(16,), (16, 8), (4,), (4, 16)]


class Mixed(nn.Module):
    """A float64 layer, then a float32 one."""

    def __init__(self):
        super().__init__()
        self.wide = nn.Linear(4, 4, dtype=ev.float64)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(self.wide(x).to(ev.float32))


def test_dtypes_get_buckets_of_their_own(fake):
    net, ref = Mixed(), Mixed()
    ref.load_state_dict(net.state_dict())
    ddp = DDP(net)
    assert ddp.bucket_layout() == [["out.bias", "out.weight"], ["wide.bias", "wide.weight"]]
    fake.log.clear()
    x = ev.ones(3, 4, dtype=ev.float64)
    ddp(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(net.parameters(), ref.parameters()):
        assert p.grad.dtype == p.dtype
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)
    assert [k[1] for k in fake.log if k[0] == "all_reduce"] == [(10,), (20,)]


def test_a_dropped_wrapper_leaves_its_hooks_idle(fake):
    import gc
    net = mlp()
    DDP(net)
    gc.collect()
    fake.log.clear()
    x, t = batch()
    nn.CrossEntropyLoss()(net(x), t).backward()   # the hooks find no DDP: nothing issued
    assert fake.log == []


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(3, 3)
        self.unused = nn.Linear(3, 3)

    def forward(self, x):
        return self.used(x)


def test_a_parameter_without_grad_is_a_clear_error_at_the_next_forward(fake):
    ddp = DDP(Unused())
    ddp(ev.ones(2, 3)).sum().backward()
    assert not [k for k in fake.log if k[0] == "all_reduce"]   # the bucket never filled
    with pytest.raises(RuntimeError, match=r"unused\.weight, unused\.bias.*"
                                           r"find_unused_parameters=False"):
        ddp(ev.ones(2, 3))
    # Frozen parameters are left out of the buckets: then it works.
    m = Unused()
    m.unused.requires_grad_(False)
    ddp = DDP(m)
    for _ in range(2):
        ddp(ev.ones(2, 3)).sum().backward()
    assert [k[0] for k in fake.log].count("all_reduce") == 2


def test_no_sync_accumulates_locally_then_reduces_the_sum(fake):
    net = mlp()
    ddp = DDP(net, bucket_cap_mb=0.1)
    fake.log.clear()
    x, t = batch()
    loss_fn = nn.CrossEntropyLoss()
    with ddp.no_sync():
        loss_fn(ddp(x), t).backward()
    assert fake.log == []
    once = [p.grad.numpy().copy() for p in net.parameters()]
    loss_fn(ddp(x), t).backward()
    assert [k[0] for k in fake.log] == ["all_reduce", "all_reduce"]
    for p, g in zip(net.parameters(), once):
        np.testing.assert_allclose(p.grad.numpy(), 2 * g, rtol=1e-5, atol=1e-7)


def test_forward_delegates_and_state_dict_passes_through(fake):
    net = mlp()
    ddp = DDP(net)
    x, _ = batch()
    assert ddp.module is net
    np.testing.assert_array_equal(ddp(x).numpy(), net(x).numpy())
    assert list(ddp.state_dict()) == ["module." + k for k in net.state_dict()]
    ddp.load_state_dict(DDP(mlp(seed=3)).state_dict())
    np.testing.assert_array_equal(net[0].weight.numpy(), mlp(seed=3)[0].weight.numpy())
    with ev.no_grad():                 # evaluation: no reduction state touched
        ddp(x)


def test_bad_arguments_raise_clear_errors(fake):
    for cap in (0, -1, 0.0):
        with pytest.raises(ValueError, match="bucket_cap_mb must be > 0"):
            DDP(mlp(), bucket_cap_mb=cap)
    with pytest.raises(TypeError, match="bucket_cap_mb must be a number"):
        DDP(mlp(), bucket_cap_mb="25")
    with pytest.raises(RuntimeError, match="no parameter that requires grad"):
        DDP(nn.ReLU())
    with pytest.raises(RuntimeError, match="no parameter that requires grad"):
        DDP(mlp().requires_grad_(False))
    with pytest.raises(TypeError, match="must be an eagervm.nn.Module"):
        DDP(lambda x: x)
    with pytest.raises(ValueError, match="find_unused_parameters=True is not supported"):
        DDP(mlp(), find_unused_parameters=True)
    with pytest.raises(ValueError, match="for GPUs"):
        DDP(mlp(), device_ids=[0])
    fake.initialized = False
    with pytest.raises(RuntimeError, match="init_process_group"):
        DDP(mlp())


def test_not_initialised_with_the_real_module():
    import eagervm.distributed as dist
    if not dist.is_available():
        pytest.skip("eagervm.distributed has no MPI in this build")
    if dist.is_initialized():
        pytest.skip("a process group is open in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        DDP(mlp())


# ------------------------------------------------------------ the sampler

@pytest.mark.parametrize("n, world, drop_last", [(100, 2, False), (101, 2, False),
                                                 (101, 2, True), (10, 3, False),
                                                 (10, 3, True), (2, 4, False)])
def test_sampler_shards_are_disjoint_equal_and_cover_the_data(n, world, drop_last):
    shards = [DistributedSampler(n, world, r, seed=4, drop_last=drop_last)
              for r in range(world)]
    got = [list(s) for s in shards]
    size = len(shards[0])
    assert all(len(g) == size == len(s) for g, s in zip(got, shards))
    flat = [i for g in got for i in g]
    assert all(0 <= i < n for i in flat)
    if drop_last:
        assert size == n // world and len(set(flat)) == len(flat)   # disjoint
    else:
        assert set(flat) == set(range(n))                          # covers
        assert len(flat) == size * world == -(-n // world) * world
        assert len(flat) - len(set(flat)) == size * world - n      # only the padding repeats
    if n % world == 0:
        assert sorted(flat) == list(range(n))


def test_sampler_draws_the_same_permutation_on_every_rank_and_a_new_one_each_epoch():
    a, b = DistributedSampler(60, 2, 0, seed=9), DistributedSampler(60, 2, 1, seed=9)
    whole = DistributedSampler(60, 1, 0, seed=9).permutation().tolist()
    assert list(a) == whole[0::2] and list(b) == whole[1::2]
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first and sorted(list(a) + (b.set_epoch(1) or list(b))) == list(range(60))
    assert list(DistributedSampler(6, 2, 1, shuffle=False)) == [1, 3, 5]
    # indices() is a tensor, issued without a wait: the k-th batches of the
    # ranks together are the k-th batch of the one-process order.
    idx = [DistributedSampler(60, 2, r, generator=ev.Generator(seed=1)).indices()
           for r in range(2)]
    one = ev.randperm(60, generator=ev.Generator(seed=1)).tolist()
    assert idx[0].dtype == ev.int64 and idx[0].is_contiguous()
    for k in range(6):
        assert sorted(idx[0][5 * k:5 * k + 5].tolist() + idx[1][5 * k:5 * k + 5].tolist()) == \
            sorted(one[10 * k:10 * k + 10])


def test_sampler_bad_arguments():
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(10, 2, 2)
    with pytest.raises(ValueError, match="num_replicas must be >= 1"):
        DistributedSampler(10, 0, 0)
    with pytest.raises(TypeError, match="rank must be an int"):
        DistributedSampler(10, 2, 0.5)
    with pytest.raises(TypeError, match="a length, a Tensor or a sized"):
        DistributedSampler(object(), 2, 0)
    with pytest.raises(TypeError, match="generator must be an eagervm.Generator"):
        DistributedSampler(10, 2, 0, generator=3)
    assert len(DistributedSampler(ev.zeros(7, 2), 2, 0)) == 4
    assert len(DistributedSampler(range(7), 2, 1, drop_last=True)) == 3


def test_sampler_defaults_need_an_initialised_group(fake):
    fake.initialized = False
    with pytest.raises(RuntimeError, match="pass num_replicas and rank"):
        DistributedSampler(10)
    fake.initialized = True
    s = DistributedSampler(10)
    assert (s.num_replicas, s.rank) == (1, 0)


# ------------------------------------------------------------ under mpirun

def _mpi_or_skip():
    if not shutil.which("mpirun"):
        pytest.skip("mpirun not found")
    import eagervm.distributed as dist
    if not dist.is_available():
        pytest.skip("eagervm.distributed has no MPI in this build")


def mpirun(args, timeout=60, env=None):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), EAGERVM_INTRAOP_THREADS="1",
             OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **(env or {}))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
           sys.executable] + args
    r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    return r


def run_worker(tmp_path, cap, env=None):
    mpirun([os.path.join(HERE, "ddp_worker.py"), str(tmp_path), str(cap)], env=env)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("cap", [0.05, 1e-6])
def test_two_ranks_train_like_one_process_on_the_whole_batch(tmp_path, cap):
    _mpi_or_skip()
    res = run_worker(tmp_path, cap)
    for r in res:
        assert r["world"] == 2
        # SGD with momentum, 6 steps: the same weights as one process on the
        # whole global batch (from rank 0's weights: rank 1 started elsewhere).
        assert r["max_param_diff"] < 1e-5, r["max_param_diff"]
        assert len(r["buckets"]) > 1                     # each step: every bucket, in order
        assert r["issue_log"] == list(range(len(r["buckets"]))) * r["steps"]
    if cap == 0.05:   # flat buckets of several parameters, and one of one
        assert [len(b) for b in res[0]["buckets"]] == [3, 1, 1, 1]
    assert res[0]["issue_log"] == res[1]["issue_log"]
    assert res[0]["buckets"] == res[1]["buckets"]
    a, b = res[0]["indices"], res[1]["indices"]
    assert len(a) == len(b) and not set(a) & set(b)


def test_all_reduce_starts_while_backward_runs(tmp_path):
    """The profile of a step: an all-reduce started on the ccl stream before
    backward's last instruction (the 4096-wide first layer's weight
    gradient, a few ms) ended. Whether the ccl stream's OS thread gets a
    core in that window is the OS scheduler's call on a machine where both
    ranks compute on every core (and other work may run): the training
    worker runs at a lower priority (nice 10), and each rank must show it
    in one of up to five runs."""
    _mpi_or_skip()
    tries = []
    for _ in range(5):
        res = run_worker(tmp_path, 1e-6, env={"DDP_WORKER_NICE": "10"})
        for r in res:
            assert r["backward_ops"] > 0 and r["all_reduce_starts_ns"], r
        tries.append([(min(r["all_reduce_starts_ns"]) - r["backward_end_ns"]) / 1e3
                      for r in res])
        if all(any(t[rank] < 0 for t in tries) for rank in range(2)):
            return
    pytest.fail(f"first all-reduce start minus backward end, us, per try and rank: {tries}")


def test_main_job_distributed_matches_one_process(tmp_path):
    _mpi_or_skip()
    sys.path.insert(0, HERE)
    try:
        from test_mnist import synthetic, write_split
    finally:
        sys.path.remove(HERE)
    for split, n, seed in (("train", 1024, 1), ("test", 256, 2)):
        images, labels = synthetic(n, seed=seed)
        write_split(tmp_path, images, labels, split)
    example = os.path.join(ROOT, "examples", "fashion_mnist.py")
    common = ["--epochs", "2", "--batch-size", "64", "--data", str(tmp_path),
              "--profile-epoch", "0"]
    one = subprocess.run([sys.executable, example] + common, capture_output=True, text=True,
                         timeout=60, env=dict(os.environ,
                                              PYTHONPATH=os.path.join(ROOT, "python")))
    assert one.returncode == 0, one.stderr
    two = mpirun([example, "--distributed"] + common)
    assert "data-parallel on 2 ranks: 32 images a rank a batch" in two.stdout
    acc = [float(line.split()[2]) for r in (one, two) for line in r.stdout.splitlines()
           if line.startswith("test accuracy:")]
    assert len(acc) == 2, (one.stdout, two.stdout)   # rank 0 alone prints
    assert acc[1] == pytest.approx(acc[0], abs=0.02)
    assert "samples/s" in two.stdout
