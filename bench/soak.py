"""Soak (issue 6, part 5): millions of tiny ops with tensors created and dropped
all along must leave resident memory flat.

    /usr/bin/python3 bench/soak.py                 # 10,000,000 ops (a documented long run)
    /usr/bin/python3 bench/soak.py --ops 300000    # the short version tests/python/test_soak.py runs

(run from the repository root after `bash scripts/test_python.sh` has built
the module in place, or with eagervm installed.)

The loop keeps a ring of 64 live tensors of 16 elements and replaces one
with each op: elementwise ops of two ring tensors, new tensors (tensor, zeros,
full, arange), views and writes through them, small reductions and matmuls,
casts; a quarter of the ops go through `asyncs.thread` blocks on 3 Threads,
which are dropped and made anew every 50,000 ops; every 1,000 ops one value
is read back (a sync point). Resident memory (/proc/self/statm) is measured
after a warm-up (the first 10% of the ops, at least 100,000) and at the end,
both after synchronize() and a garbage collection. Prints both, the growth
and the runtime's allocator counters; exits 1 if the growth is 5% or more.
"""
import argparse
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import eagervm as ev  # noqa: E402
from eagervm import asyncs  # noqa: E402


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settle():
    ev.synchronize()
    gc.collect()
    ev.synchronize()


def soak(n_ops, warmup, report=print):
    ring = [ev.full((16,), float(i % 7)) for i in range(64)]
    mat = ev.ones(4, 4) * 0.25
    threads = [asyncs.Thread() for _ in range(3)]
    ctxs = [asyncs.thread(t) for t in threads]
    rss_warm = None
    t0 = time.perf_counter()
    seed = 12345
    i = 0
    next_recycle, next_sync = 50_000, 1_000
    while i < n_ops:
        if rss_warm is None and i >= warmup:
            settle()
            rss_warm = rss_bytes()
            report(f"after warm-up ({warmup:,} ops): rss {rss_warm / 2**20:.1f} MiB, "
                   f"stats {ev._C._stats()['alloc_in_use']} B in use")
        if i >= next_recycle:
            next_recycle += 50_000
            threads = [asyncs.Thread() for _ in range(3)]  # the old ones go with their work
            ctxs = [asyncs.thread(t) for t in threads]
        # a small LCG picks the ring slots: the loop is deterministic
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        a, b, c = seed % 64, (seed >> 6) % 64, (seed >> 12) % 13
        x, y = ring[a], ring[b]
        if (seed >> 20) % 4 == 0:
            ctx = ctxs[(seed >> 22) % 3]
            ctx.__enter__()
        else:
            ctx = None
        try:
            if c <= 3:
                ring[a] = x * 0.5 + y * 0.5  # two ops
                i += 1
            elif c == 4:
                ring[a] = ev.tensor([float(i % 5)] * 16)
            elif c == 5:
                ring[a] = ev.zeros(16) + y
                i += 1
            elif c == 6:
                v = ring[a][4:12:2]  # a view, written through
                v += 1.0
                ring[a] = ring[a].clamp(-100.0, 100.0)
                i += 1
            elif c == 7:
                ring[a] = (x.reshape(4, 4) @ mat).flatten()
                i += 1
            elif c == 8:
                ring[a] = x - x.sum() / 16.0
                i += 2
            elif c == 9:
                ring[a] = ev.arange(16).to(ev.float32) * 0.1
                i += 2
            elif c == 10:
                ring[a] = ev.where(x > y, x, y)
                i += 1
            elif c == 11:
                ring[a] = ev.cat([x[:8], y[8:]])
                i += 2
            else:
                ring[a] = (x.to(ev.float64) * 0.5).to(ev.float32)
                i += 2
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        i += 1
        if i >= next_sync:
            next_sync += 1_000
            v = ring[b].numpy()
            assert v.shape == (16,)
    settle()
    rss_end = rss_bytes()
    secs = time.perf_counter() - t0
    growth = 100.0 * (rss_end - rss_warm) / rss_warm
    st = ev._C._stats()
    report(f"at the end ({n_ops:,} ops, {secs:.1f} s, {secs / n_ops * 1e9:.0f} ns/op): "
           f"rss {rss_end / 2**20:.1f} MiB, stats {st['alloc_in_use']} B in use, "
           f"{st['alloc_reserved']} B reserved")
    report(f"rss growth after warm-up: {growth:+.2f}% (limit 5%)")
    return rss_warm, rss_end, growth


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=10_000_000)
    p.add_argument("--warmup", type=int, default=None)
    args = p.parse_args()
    if not os.path.exists("/proc/self/statm"):
        print("soak: /proc/self/statm is missing; cannot measure resident memory")
        return 2
    warmup = args.warmup if args.warmup is not None else max(100_000, args.ops // 10)
    warmup = min(warmup, args.ops // 2)
    _, _, growth = soak(args.ops, warmup)
    return 0 if growth < 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
