"""What a parked worker costs a program that issues tiny ops in bursts.

Bursts of --ops tiny ops (a 1K add, and contiguous() of a transposed 32x32),
each ended by a sync, with the issuing thread busy in Python for a gap
between bursts. A gap longer than the worker's idle spin (20 µs) lets it
park, and the next burst pays its wake. For each gap the µs per op of
eagervm and of NumPy doing the same ops (NumPy runs them inline, so it has
no wake to pay), in alternating blocks of 5 bursts a side, medians; the
ratio; and how many times per burst the runtime woke its worker (from
eagervm._C._stats()). eagervm runs twice, alternating in the one process:
with cheap ops allowed to run on the issuing thread while the worker is
parked (the default), and with every op sent to the worker.

    PYTHONPATH=python /usr/bin/python3 bench/burst_wake.py [--ops 200] [--bursts 41]
"""
import argparse
import statistics
import time

import eagervm as ev  # first: it tunes OpenBLAS before NumPy loads it
import numpy as np
from eagervm import _C

GAPS_US = (0, 10, 30, 100, 300, 1000)
ROUND = 5


def spin(us):
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--bursts", type=int, default=41)
    args = ap.parse_args()
    if args.ops < 1 or args.bursts < 1:
        ap.error("--ops and --bursts must be at least 1")
    rng = np.random.default_rng(0)
    a = rng.random((32, 32), dtype=np.float32)
    b = rng.random((32, 32), dtype=np.float32)
    at = a.T
    ea, eb = ev.tensor(a), ev.tensor(b)
    eat = ea.transpose(0, 1)
    cases = {
        "add 1K": (lambda: ea + eb, lambda: a + b),
        "contiguous 1K transposed": (lambda: eat.contiguous(), lambda: np.ascontiguousarray(at)),
    }
    ev.synchronize()
    print(f"bursts of {args.ops} ops, {args.bursts} bursts a side per gap, in alternating "
          f"blocks of {ROUND}; medians of µs per op. 'here': cheap ops may run on the "
          f"issuing thread while the worker is parked (the default); 'worker': all go to "
          f"the worker (EAGERVM_RUN_HERE=0)")
    print(f"{'case':26} {'gap µs':>7} {'here':>7} {'worker':>7} {'NumPy':>7} "
          f"{'here/NP':>8} {'wrk/NP':>7} {'wakes/burst':>12} {'ran here':>9}")
    was = _C._set_run_here(True)
    for name, (run_ev, run_np) in cases.items():
        for gap in GAPS_US:
            times = {"here": [], "worker": [], "np": []}
            counts = {"here": [0, 0], "worker": [0, 0]}  # wakes, ran here
            # Blocks of ROUND bursts a side, alternating, so that between
            # two of eagervm's bursts lies only the gap, as in the program
            # this models.
            while len(times["np"]) < args.bursts:
                k = min(ROUND, args.bursts - len(times["np"]))
                for side in ("here", "worker"):
                    _C._set_run_here(side == "here")
                    s0 = _C._stats()
                    spin(gap)
                    for _ in range(k):
                        t0 = time.perf_counter()
                        for _ in range(args.ops):
                            run_ev()
                        ev.synchronize()
                        times[side].append((time.perf_counter() - t0) / args.ops * 1e6)
                        spin(gap)
                    s1 = _C._stats()
                    counts[side][0] += s1["worker_wakes"] - s0["worker_wakes"]
                    counts[side][1] += s1["ran_here"] - s0["ran_here"]
                for _ in range(k):
                    t0 = time.perf_counter()
                    for _ in range(args.ops):
                        run_np()
                    times["np"].append((time.perf_counter() - t0) / args.ops * 1e6)
                    spin(gap)
            h, w, n = (statistics.median(times[s]) for s in ("here", "worker", "np"))
            wakes = "/".join(f"{counts[s][0] / args.bursts:.2f}" for s in ("here", "worker"))
            print(f"{name:26} {gap:7d} {h:7.2f} {w:7.2f} {n:7.2f} {n / h:7.2f}x {n / w:6.2f}x "
                  f"{wakes:>12} {counts['here'][1] / args.bursts / args.ops:8.0%}")
    _C._set_run_here(was)


if __name__ == "__main__":
    main()
