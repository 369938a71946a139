"""One rank of test_ddp.py's data-parallel runs, started by mpirun:

    mpirun -np 2 python3 ddp_worker.py OUT_DIR BUCKET_CAP_MB

Each rank trains the same small MLP with DistributedDataParallel on its
shard (DistributedSampler) of each global batch, and, beside it, a plain
copy of the model on the whole global batch (no communication: the
one-process reference). It writes OUT_DIR/rank<r>.json with the largest
parameter difference between the two, the order its buckets were issued in,
the bucket layout, and the profile's facts about overlap.
"""
import json
import os
import sys

import numpy as np

import eagervm as ev
import eagervm.distributed as dist
from eagervm import nn, optim
from eagervm.datasets import DistributedSampler

IN, HIDDEN, OUT = 4096, 256, 10
GLOBAL_BATCH, STEPS = 128, 6


def make_net(seed):
    rng = np.random.default_rng(seed)
    net = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                        nn.Linear(HIDDEN, OUT))
    with ev.no_grad():
        for p in net.parameters():
            p.copy_(ev.from_numpy(rng.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))
    return net


def lower_priority(name, nice):
    """Lowers the priority of this process's OS threads called name."""
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            if f.read().strip() == name:
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)


def main():
    out_dir = sys.argv[1]
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    # Ranks start from different weights: the construction's broadcast
    # makes them rank 0's.
    net = make_net(seed=rank)
    ddp = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=float(sys.argv[2]))
    ddp._issue_log = []
    ref = make_net(seed=0)
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    ref_opt = optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    rng = np.random.default_rng(123)  # the same data on every rank
    n = GLOBAL_BATCH * STEPS
    data = ev.from_numpy(rng.standard_normal((n, IN)).astype(np.float32))
    labels = ev.from_numpy(rng.integers(0, OUT, n).astype(np.int64))
    sampler = DistributedSampler(n, world, rank, seed=7)
    full = DistributedSampler(n, 1, 0, seed=7)
    mine, order = sampler.indices(), full.indices()
    local = GLOBAL_BATCH // world

    if os.environ.get("DDP_WORKER_NICE"):
        # The training worker below the ccl stream's thread.
        lower_priority("ev-worker-0", int(os.environ["DDP_WORKER_NICE"]))
    prof = ev.profiler.profile()
    for step in range(STEPS):
        if step == STEPS - 1:   # the last DDP step alone
            prof.start()
        idx = mine[step * local:(step + 1) * local]
        opt.zero_grad()
        loss = loss_fn(ddp(ev.index_select(data, 0, idx)), ev.index_select(labels, 0, idx))
        loss.backward()
        opt.step()
        if step == STEPS - 1:
            prof.stop()
        # The reference: one process on the whole global batch.
        gidx = order[step * GLOBAL_BATCH:(step + 1) * GLOBAL_BATCH]
        ref_opt.zero_grad()
        loss_fn(ref(ev.index_select(data, 0, gidx)), ev.index_select(labels, 0, gidx)).backward()
        ref_opt.step()

    diff = max(float(np.max(np.abs(p.numpy() - q.numpy())))
               for p, q in zip(net.parameters(), ref.parameters()))
    ccl = sorted((e.start_ns, e.end_ns, e.name) for e in prof.events
                 if e.stream_type == "ccl" and "all_reduce" in e.name)
    # Backward's instructions carry the name of their node's function.
    back = [e for e in prof.events if e.stream_type == "compute" and e.function and
            e.function.endswith("_backward")]
    result = {
        "rank": rank, "world": world, "steps": STEPS, "max_param_diff": diff,
        "issue_log": ddp._issue_log, "buckets": ddp.bucket_layout(),
        "all_reduce_starts_ns": [s for s, _, _ in ccl],
        "all_reduce_names": sorted({name for _, _, name in ccl}),
        "backward_ops": len(back),
        "backward_end_ns": max((e.end_ns for e in back), default=None),
        "indices": mine.tolist(),
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
