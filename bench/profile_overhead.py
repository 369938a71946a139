#!/usr/bin/env python3
"""What profiling costs per instruction: a chain of tiny ops (y = y + x on
16 float32 elements, then one sync), timed with profiling off and on, median
of several repeats. Prints ns per op for both and the difference per
instruction (an op may issue more than one instruction: the runtime's own
"release" instructions that free storage are recorded too). Profiling off
costs one relaxed atomic load per submitted instruction.

    python3 bench/profile_overhead.py [--ops 100000] [--repeats 7]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "..", "python")))
import eagervm as ev  # noqa: E402
from eagervm import profiler  # noqa: E402


def chain(n):
    x = ev.ones(16)
    y = ev.zeros(16)
    ev.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        y = y + x
    y.numpy()
    return (time.perf_counter_ns() - t0) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    chain(args.ops // 10)  # warm up the caches and the allocator
    off, on, records = [], [], 0
    for _ in range(args.repeats):  # interleaved, so drifts of the machine hit both
        off.append(chain(args.ops))
        with profiler.profile() as prof:
            on.append(chain(args.ops))
        records += len(prof.events)
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"chain of {args.ops:,} tiny adds, median of {args.repeats}:")
    print(f"  profiling off: {m_off:8.1f} ns/op")
    print(f"  profiling on:  {m_on:8.1f} ns/op   ({records:,} records)")
    per_op = records / (args.repeats * args.ops)  # instructions per add (+ releases)
    print(f"  cost of recording: {m_on - m_off:+.1f} ns per op, {per_op:.2f} instructions "
          f"per op: {(m_on - m_off) / per_op:+.1f} ns per instruction")


if __name__ == "__main__":
    main()
