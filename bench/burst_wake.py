"""What a parked worker costs a program that issues tiny ops in bursts.

Bursts of --ops tiny ops (a 1K add, and contiguous() of a transposed 32x32),
each ended by a sync, with the issuing thread busy in Python for a gap
between bursts. A gap longer than the worker's idle spin (20 µs) lets it
park, and the next burst pays its wake. For each gap the µs per op of
eagervm and of NumPy doing the same ops (NumPy runs them inline, so it has
no wake to pay), in alternating blocks of 5 bursts a side, medians; the
ratio; and how many times per burst the runtime woke its worker (from
eagervm._C._stats()).

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
          f"blocks of {ROUND}; medians of µs per op")
    print(f"{'case':26} {'gap µs':>7} {'eagervm':>8} {'NumPy':>8} {'x NumPy':>8} "
          f"{'wakes/burst':>12}")
    for name, (run_ev, run_np) in cases.items():
        for gap in GAPS_US:
            t_ev, t_np = [], []
            wakes = 0
            # Blocks of ROUND bursts a side, alternating, so that between
            # two of eagervm's bursts lies only the gap, as in the program
            # this models.
            while len(t_ev) < args.bursts:
                s0 = _C._stats()["worker_wakes"]
                spin(gap)
                for _ in range(min(ROUND, args.bursts - len(t_ev))):
                    t0 = time.perf_counter()
                    for _ in range(args.ops):
                        run_ev()
                    ev.synchronize()
                    t_ev.append((time.perf_counter() - t0) / args.ops * 1e6)
                    spin(gap)
                wakes += _C._stats()["worker_wakes"] - s0
                for _ in range(min(ROUND, args.bursts - len(t_np))):
                    t0 = time.perf_counter()
                    for _ in range(args.ops):
                        run_np()
                    t_np.append((time.perf_counter() - t0) / args.ops * 1e6)
                    spin(gap)
            wakes /= args.bursts
            e, n = statistics.median(t_ev), statistics.median(t_np)
            print(f"{name:26} {gap:7d} {e:8.2f} {n:8.2f} {n / e:7.2f}x {wakes:12.2f}")


if __name__ == "__main__":
    main()
