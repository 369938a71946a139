"""Run by tests/python/test_distributed.py under mpirun: every collective and
op on every dtype against NumPy, argument errors, async Work, collectives
issued from several asyncs.Threads, and the profiler's ccl stream. Writes
rank<r>.json into the folder given as argv[1]: {"failures": [...], "checks": n}."""
import json
import os
import sys
import traceback

import numpy as np

import eagervm as ev
import eagervm.distributed as dist

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
SHAPES = [(), (0,), (7,), (3, 5)]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
       dist.ReduceOp.MAX]

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def data(rank, shape, dtype, salt=0):
    """Rank r's deterministic values: small, so sums and products stay exact."""
    n = int(np.prod(shape, dtype=np.int64))
    base = (np.arange(n, dtype=np.int64) * 3 + rank * 5 + salt) % 7
    if dtype == "bool":
        return (base % 2 == 0).reshape(shape)
    return (base + 1).astype(dtype).reshape(shape)


def reference(stack, op, dtype, world):
    if dtype == "bool":
        return stack.any(0) if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX) else stack.all(0)
    if op == dist.ReduceOp.SUM:
        return stack.sum(0, dtype=dtype)
    if op == dist.ReduceOp.AVG:
        return (stack.sum(0, dtype=dtype) / np.asarray(world, dtype=dtype)).astype(dtype)
    if op == dist.ReduceOp.PRODUCT:
        return stack.prod(0, dtype=dtype)
    if op == dist.ReduceOp.MIN:
        return stack.min(0)
    return stack.max(0)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def raises(exc, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        return str(e)
    except Exception as e:  # noqa: BLE001
        return f"wrong exception {type(e).__name__}: {e}"
    return "did not raise"


def main(out_dir):
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    check(dist.is_initialized() and dist.is_available(), "initialised")
    check(int(os.environ.get("OMPI_COMM_WORLD_RANK", rank)) == rank, "rank from MPI")
    check(int(os.environ.get("OMPI_COMM_WORLD_SIZE", world)) == world, "size from MPI")

    # all_reduce: every dtype, op and shape.
    for dtype in DTYPES:
        for shape in SHAPES:
            stack = np.stack([data(r, shape, dtype) for r in range(world)])
            for op in OPS:
                if op == dist.ReduceOp.AVG and dtype not in ("float32", "float64"):
                    continue
                t = ev.tensor(data(rank, shape, dtype))
                dist.all_reduce(t, op=op)
                want = reference(stack, op, dtype, world)
                check(same(t.numpy(), want), f"all_reduce {op.name} {dtype}{list(shape)}: "
                      f"{t.numpy()!r} != {want!r}")

    # broadcast from each rank; all_gather (list and tensor); reduce_scatter.
    for dtype in DTYPES:
        for shape in SHAPES:
            for src in range(world):
                t = ev.tensor(data(rank, shape, dtype))
                dist.broadcast(t, src=src)
                check(same(t.numpy(), data(src, shape, dtype)),
                      f"broadcast src={src} {dtype}{list(shape)}")
            mine = data(rank, shape, dtype)
            outs = [ev.zeros(*shape, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, ev.tensor(mine))
            for r in range(world):
                check(same(outs[r].numpy(), data(r, shape, dtype)),
                      f"all_gather {dtype}{list(shape)} block {r}")
            stacked = ev.zeros(world, *shape, dtype=dtype)
            dist.all_gather_into_tensor(stacked, ev.tensor(mine))
            check(same(stacked.numpy(), np.stack([data(r, shape, dtype) for r in range(world)])),
                  f"all_gather_into_tensor {dtype}{list(shape)}")
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
                inputs = [data(r, (world,) + shape, dtype, salt=1) for r in range(world)]
                out = ev.zeros(*shape, dtype=dtype)
                dist.reduce_scatter_tensor(out, ev.tensor(inputs[rank]), op=op)
                want = reference(np.stack(inputs), op, dtype, world)[rank]
                check(same(out.numpy(), want),
                      f"reduce_scatter_tensor {op.name} {dtype}{list(shape)}")

    # Concatenated all_gather output and a non-contiguous input (copied first).
    m = ev.tensor(data(rank, (3, 4), "float32"))
    flat = ev.zeros(world * 4 * 3)
    dist.all_gather_into_tensor(flat, m.T)
    want = np.concatenate([data(r, (3, 4), "float32").T.ravel() for r in range(world)])
    check(same(flat.numpy(), want), "all_gather_into_tensor of a transposed view")
    # A view that is contiguous: all_reduce in place writes the base.
    base = ev.tensor(data(rank, (4, 6), "float64"))
    dist.all_reduce(base[1:3])
    want = data(rank, (4, 6), "float64")
    want[1:3] = sum(data(r, (4, 6), "float64")[1:3] for r in range(world))
    check(same(base.numpy(), want), "all_reduce of a contiguous view writes its base")

    # Argument errors raise at the call and queue nothing.
    t = ev.ones(4)
    msg = raises(ValueError, dist.all_reduce, ev.ones(4, 4).T)
    check("contiguous" in msg, f"non-contiguous in place: {msg}")
    msg = raises(ValueError, dist.all_reduce, ev.ones(4, dtype=ev.int32), op=dist.ReduceOp.AVG)
    check("AVG" in msg and "int32" in msg, f"AVG on int: {msg}")
    msg = raises(ValueError, dist.all_reduce, t, op=17)
    check("ReduceOp" in msg, f"bad op: {msg}")
    msg = raises(ValueError, dist.broadcast, t, src=world)
    check("src" in msg and "out of range" in msg, f"src out of range: {msg}")
    msg = raises(ValueError, dist.all_gather_into_tensor, ev.zeros(world * 4 + 1), t)
    check("expected world size" in msg, f"wrong output size: {msg}")
    msg = raises(TypeError, dist.all_gather_into_tensor, ev.zeros(world * 4, dtype=ev.int64), t)
    check("float32" in msg and "int64" in msg, f"dtype mix: {msg}")
    msg = raises(ValueError, dist.reduce_scatter_tensor, ev.zeros(3), ev.zeros(world * 4))
    check("expected world size" in msg, f"reduce_scatter size: {msg}")
    msg = raises(ValueError, dist.all_gather, [ev.zeros(4)] * (world + 1), t)
    check("world" in msg, f"all_gather list length: {msg}")
    msg = raises(TypeError, dist.all_gather, [ev.zeros(4, dtype=ev.int32)] * world, t)
    check("int32" in msg, f"all_gather list dtype: {msg}")
    msg = raises(ValueError, dist.all_reduce, t, group=object())
    check("group" in msg, f"group: {msg}")
    msg = raises(RuntimeError, dist.init_process_group)
    check("already" in msg, f"second init: {msg}")
    msg = raises(TypeError, dist.all_reduce, np.ones(3))
    check("Tensor" in msg, f"not a tensor: {msg}")

    # async_op: a Work; without it, None.
    t = ev.ones(1000) * (rank + 1)
    check(dist.all_reduce(t) is None, "sync returns None")
    w = dist.all_reduce(t, async_op=True)
    check(isinstance(w, dist.Work), "async returns a Work")
    check(w.wait() is True and w.is_completed(), "Work.wait / is_completed")
    s = world * (world + 1) // 2
    check(same(t.numpy(), np.full(1000, s * world, np.float32)), "two all_reduces in a row")
    outs = [ev.zeros(2) for _ in range(world)]
    w = dist.all_gather(outs, ev.ones(2) * rank, async_op=True)
    w.wait()
    check(all(same(outs[r].numpy(), np.full(2, r, np.float32)) for r in range(world)),
          "all_gather async")
    w = dist.barrier(async_op=True)
    w.wait()
    check(w.is_completed(), "barrier async")
    check(dist.barrier() is None, "barrier")

    # Collectives issued from several asyncs.Threads: the inputs come from
    # compute on those threads; every rank issues them in one order.
    threads = [ev.asyncs.Thread() for _ in range(3)]
    results = []
    for i, th in enumerate(threads):
        with ev.asyncs.thread(th):
            a = ev.ones(64, 64) * (rank + i)
            y = a @ ev.ones(64, 64)            # compute on thread i
            dist.all_reduce(y)                  # waits for y by dependency
            results.append(y + 1)               # back on thread i, after the collective
    for i, y in enumerate(results):
        want = np.full((64, 64), 64 * sum(r + i for r in range(world)) + 1, np.float32)
        check(same(y.numpy(), want), f"all_reduce from asyncs.Thread {i}")
    # Many in flight at once, then one sync.
    ts = [ev.full((256,), float(rank + k)) for k in range(20)]
    for k, x in enumerate(ts):
        with ev.asyncs.thread(threads[k % 3]):
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
    for k, x in enumerate(ts):
        check(same(x.numpy(), np.full(256, world - 1 + k, np.float32)), f"in flight {k}")

    # The profiler shows the collectives on the ccl stream.
    with ev.profiler.profile() as prof:
        x = ev.ones(8)
        dist.all_reduce(x)
        dist.broadcast(x, 0)
        x.numpy()
    colls = [e for e in prof.events if e.name in ("all_reduce", "broadcast")]
    check(len(colls) == 2 and all(e.stream_type == "ccl" for e in colls),
          f"profiler: {[(e.name, e.stream_type) for e in colls]}")
    check(all(e.line and e.file == __file__ for e in colls), "profiler sites")

    # A fork child (a data-loader worker) cannot use its parent's group.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        msg = raises(RuntimeError, dist.all_reduce, ev.ones(2))
        os.write(w, f"{dist.is_initialized()}|{msg}".encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = f.read()
    os.waitpid(pid, 0)
    check(got.startswith("False|") and "fork" in got, f"fork child: {got}")
    t = ev.ones(3)
    dist.all_reduce(t)
    check(same(t.numpy(), np.full(3, world, np.float32)), "parent after fork")

    dist.destroy_process_group()
    check(not dist.is_initialized(), "destroyed")
    msg = raises(RuntimeError, dist.all_reduce, ev.ones(2))
    check("not initialised" in msg, f"after destroy: {msg}")
    msg = raises(RuntimeError, dist.init_process_group)
    check("twice" in msg, f"init after destroy: {msg}")
    return rank


if __name__ == "__main__":
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    try:
        rank = main(sys.argv[1])
    except BaseException:  # noqa: BLE001
        failures.append(traceback.format_exc())
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump({"failures": failures, "checks": checks}, f)
