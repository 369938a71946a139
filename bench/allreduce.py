"""All-reduce from Python: eagervm.distributed (MPI on the ccl stream)
against PyTorch's torch.distributed on gloo (its CPU backend; Debian's and
PyPI's PyTorch have no MPI backend), the same float32 buffers, alternating.

    mpirun --allow-run-as-root --oversubscribe -np 2 /usr/bin/python3 bench/allreduce.py \
        [--repeats 21] [--sizes-kb 4,1024,4096,16384,65536]

Each run starts after a barrier of its own library and ends when the result
is ready (eagervm: a Work's wait(); gloo's all_reduce blocks). Rank 0 prints
the slowest rank's median per size in µs and the ratio torch/eagervm (above 1:
eagervm faster). bench_allreduce (C) compares against bare MPI_Allreduce.
Timings are printed, never asserted.
"""
import argparse
import os
import statistics
import time

import eagervm as ev
import eagervm.distributed as dist

try:
    import torch
    import torch.distributed as tdist
except ImportError:  # pragma: no cover
    torch = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--sizes-kb", default="4,1024,4096,16384,65536")
    args = ap.parse_args()
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if torch is not None:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        tdist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 0:
        print(f"all-reduce (sum, float32, in place) on {world} ranks, median of "
              f"{args.repeats}, µs")
        print(f"{'KB':>8} {'eagervm':>12} {'torch gloo':>12} {'ratio':>8}")
    for kb in (int(s) for s in args.sizes_kb.split(",")):
        n = kb * 256
        t_ev = ev.zeros(n)
        t_pt = torch.zeros(n) if torch is not None else None
        times = {"ev": [], "pt": []}
        for rep in range(-2, args.repeats):
            for side in (0, 1):
                use_ev = (side + rep) % 2 == 0
                if use_ev:
                    dist.barrier()
                    t0 = time.perf_counter()
                    dist.all_reduce(t_ev, async_op=True).wait()
                elif t_pt is not None:
                    tdist.barrier()
                    t0 = time.perf_counter()
                    tdist.all_reduce(t_pt)
                else:
                    continue
                dt = time.perf_counter() - t0
                if rep >= 0:
                    times["ev" if use_ev else "pt"].append(dt)
        # The slowest rank's medians: the collective ends there.
        med = ev.tensor([statistics.median(times["ev"]),
                         statistics.median(times["pt"]) if times["pt"] else 0.0],
                        dtype=ev.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        e, p = med.tolist()
        if rank == 0:
            ratio = f"{p / e:8.3f}" if p else "       -"
            print(f"{kb:8d} {e * 1e6:12.1f} {p * 1e6:12.1f} {ratio}", flush=True)
    if torch is not None:
        tdist.destroy_process_group()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
