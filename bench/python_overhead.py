"""Python-level overhead of eagervm next to NumPy and PyTorch (issue 4).

    PYTHONPATH=python /usr/bin/python3 bench/python_overhead.py [--repeats N] [--quick]

Each figure is the median of several repeats; every eagervm run ends in one
sync (synchronize()), so it measures the work, not only its issue. PyTorch
is imported only if it is installed. Timings are printed, never asserted.

Cases (issue 4, "Benchmark"):
  tiny chain     100,000 x `y = y + x` on 16-element float32
  1M chain       200 x `y = y + x` on 1,000,000-element float32
  matmul 1024    one 1024x1024 float32 matmul
  2 x 2000 mm    two independent loops of 2,000 128x128 float32 matmuls: eagervm
                 on one asyncs.Thread, then on two; NumPy/PyTorch one loop after
                 the other
"""
import argparse
import statistics
import time

import eagervm as ev  # first: it sets OPENBLAS_THREAD_TIMEOUT before OpenBLAS loads
import numpy as np  # noqa: E402


try:
    import torch
except ImportError:
    torch = None


def median_time(fn, repeats):
    fn()  # warm-up (allocator caches, BLAS threads, lazy imports)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chain(make, n, iters, sync):
    def run():
        x = make(n)
        y = make(n)
        for _ in range(iters):
            y = y + x
        sync(y)
    return run


def ev_sync(y):
    ev.synchronize()


def no_sync(y):
    pass


def mm_loops(a, b, iters):
    def run():
        for _ in range(iters):
            a @ b
    return run


def ev_two_loops(threads, a, b, iters):
    def run():
        for th in threads:
            with ev.asyncs.thread(th):
                for _ in range(iters):
                    a @ b
        ev.synchronize()
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a tenth of the iterations")
    args = ap.parse_args()
    r = args.repeats
    q = 10 if args.quick else 1
    rows = []  # (case, unit, eagervm, numpy, torch, target)

    # tiny chain
    n_tiny = 100_000 // q
    e = median_time(chain(lambda n: ev.ones(n), 16, n_tiny, ev_sync), r) / n_tiny
    npv = median_time(chain(lambda n: np.ones(n, np.float32), 16, n_tiny, no_sync), r) / n_tiny
    tv = (median_time(chain(lambda n: torch.ones(n), 16, n_tiny, no_sync), r) / n_tiny
          if torch else None)
    rows.append(("tiny add chain (16 el.)", "ns/op", e * 1e9, npv * 1e9,
                 tv * 1e9 if tv else None, "<= NumPy (~3.5x faster than PyTorch)"))

    # 1M chain
    n_big = 200 // q
    e = median_time(chain(lambda n: ev.ones(n), 1_000_000, n_big, ev_sync), r) / n_big
    npv = median_time(chain(lambda n: np.ones(n, np.float32), 1_000_000, n_big, no_sync),
                      r) / n_big
    tv = (median_time(chain(lambda n: torch.ones(n), 1_000_000, n_big, no_sync), r) / n_big
          if torch else None)
    rows.append(("1M add chain", "us/op", e * 1e6, npv * 1e6, tv * 1e6 if tv else None,
                 "NumPy/eagervm >= 1.5"))

    # matmul 1024
    a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
    ea = ev.tensor(a)

    def ev_mm():
        ea @ ea
        ev.synchronize()

    e = median_time(ev_mm, r)
    npv = median_time(lambda: a @ a, r)
    ta = torch.from_numpy(a) if torch else None
    tv = median_time(lambda: ta @ ta, r) if torch else None
    rows.append(("matmul 1024x1024 f32", "ms", e * 1e3, npv * 1e3, tv * 1e3 if tv else None,
                 "NumPy/eagervm >= 0.95"))

    # two independent loops of small matmuls
    iters = 2000 // q
    s = np.random.default_rng(1).random((128, 128), dtype=np.float32)
    es = ev.tensor(s)
    t1 = ev.asyncs.Thread()
    t2 = ev.asyncs.Thread()
    one = median_time(ev_two_loops([t1, t1], es, es, iters), r)
    two = median_time(ev_two_loops([t1, t2], es, es, iters), r)
    npv = median_time(mm_loops(s, s, 2 * iters), r)
    ts = torch.from_numpy(s) if torch else None
    tv = median_time(mm_loops(ts, ts, 2 * iters), r) if torch else None
    rows.append(("2x2000 mm 128, one Thread", "ms", one * 1e3, npv * 1e3,
                 tv * 1e3 if tv else None, ""))
    rows.append(("2x2000 mm 128, two Threads", "ms", two * 1e3, npv * 1e3,
                 tv * 1e3 if tv else None, "one/two Threads >= 1.7"))

    hdr = (f"{'case':<28} {'unit':>5} {'eagervm':>10} {'NumPy':>10} {'PyTorch':>10} "
           f"{'NumPy/ev':>9} {'torch/ev':>9}  target")
    print(hdr)
    print("-" * len(hdr))
    for case, unit, e, n, t, target in rows:
        ts_ = f"{t:10.3f}" if t is not None else f"{'-':>10}"
        tr = f"{t / e:9.2f}" if t is not None else f"{'-':>9}"
        print(f"{case:<28} {unit:>5} {e:10.3f} {n:10.3f} {ts_} {n / e:9.2f} {tr}  {target}")
    print(f"\ntwo Threads vs one Thread: {one / two:.2f}x (target >= 1.7 on 2 cores)")
    print(f"repeats: {r} (median); numpy {np.__version__}"
          + (f"; torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else
             "; torch not installed"))


if __name__ == "__main__":
    main()
