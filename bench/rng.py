"""The random ops against NumPy's and PyTorch's own generators (bench/ops.py
compares them with np.zeros, their reference for shape and dtype only):

    PYTHONPATH=python /usr/bin/python3 bench/rng.py [--repeats N]

NumPy draws from a Generator (PCG64; standard_normal is its ziggurat),
PyTorch from its default CPU generator. Each repeat runs a batch (200 calls
at 1K, 5 at 1M) of eagervm, NumPy and PyTorch in turn; eagervm's batch ends
in a sync. One line per case: the medians in microseconds and the ratios
NumPy/eagervm and PyTorch/eagervm (above 1: eagervm is faster). Timings are
printed, never asserted."""
import argparse
import math
import statistics
import time

import eagervm as ev  # first: it sets OPENBLAS_THREAD_TIMEOUT before OpenBLAS loads
import numpy as np  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

SIZES = {"1K": (32, 32), "1M": (1024, 1024)}


def cases(shape):
    """(name, eagervm, NumPy, PyTorch or None) callables for one shape."""
    rng = np.random.default_rng(0)
    n = math.prod(shape)
    xe32 = ev.empty(shape, dtype=ev.float32)
    xe64 = ev.empty(shape, dtype=ev.float64)
    xn32 = np.empty(shape, np.float32)
    xt32 = torch.empty(shape) if torch else None
    t = torch
    out = [
        ("rand float32", lambda: ev.rand(shape),
         lambda: rng.random(shape, np.float32), t and (lambda: t.rand(shape))),
        ("rand float64", lambda: ev.rand(shape, dtype=ev.float64),
         lambda: rng.random(shape), t and (lambda: t.rand(shape, dtype=t.float64))),
        ("randn float32", lambda: ev.randn(shape),
         lambda: rng.standard_normal(shape, np.float32), t and (lambda: t.randn(shape))),
        ("randn float64", lambda: ev.randn(shape, dtype=ev.float64),
         lambda: rng.standard_normal(shape), t and (lambda: t.randn(shape, dtype=t.float64))),
        ("randint int64", lambda: ev.randint(0, 1000, shape),
         lambda: rng.integers(0, 1000, shape), t and (lambda: t.randint(0, 1000, shape))),
        ("randint int32", lambda: ev.randint(0, 1000, shape, dtype=ev.int32),
         lambda: rng.integers(0, 1000, shape, np.int32),
         t and (lambda: t.randint(0, 1000, shape, dtype=t.int32))),
        ("uniform_ float32", lambda: xe32.uniform_(-2.0, 3.0),
         lambda: rng.uniform(-2.0, 3.0, shape).astype(np.float32),
         t and (lambda: xt32.uniform_(-2.0, 3.0))),
        ("normal_ float32", lambda: xe32.normal_(1.0, 2.0),
         lambda: rng.standard_normal(shape, np.float32, out=xn32) * 2 + 1,
         t and (lambda: xt32.normal_(1.0, 2.0))),
        ("normal_ float64", lambda: xe64.normal_(1.0, 2.0),
         lambda: rng.normal(1.0, 2.0, shape), None),
        ("randperm int64", lambda: ev.randperm(n),
         lambda: rng.permutation(n), t and (lambda: t.randperm(n))),
    ]
    return out


def _time(fn, inner, sync=None):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    if sync:
        sync()
    return (time.perf_counter() - t0) / inner


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated case-name prefixes")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    if torch is not None:
        torch.set_num_threads(1)
    print(f"eagervm {ev.__version__}, NumPy {np.__version__}, "
          f"PyTorch {torch.__version__ if torch else 'absent'} (1 thread)")
    print(f"{'case':40s} {'eagervm us':>11s} {'NumPy us':>10s} {'PyTorch us':>11s} "
          f"{'x NumPy':>8s} {'x PyTorch':>9s}")
    for size, shape in SIZES.items():
        inner = 200 if size == "1K" else 5
        for name, run_ev, run_np, run_t in cases(shape):
            if only and not any(name.startswith(o) for o in only):
                continue
            runs = [run_ev, run_np] + ([run_t] if run_t else [])
            for fn in runs:
                fn()
            ev.synchronize()
            times = [[] for _ in runs]
            for _ in range(args.repeats):
                for k, fn in enumerate(runs):
                    times[k].append(_time(fn, inner, ev.synchronize if k == 0 else None))
            med = [statistics.median(ts) * 1e6 for ts in times]
            t_us = f"{med[2]:11.1f}" if run_t else f"{'-':>11s}"
            x_t = f"{med[2] / med[0]:8.2f}x" if run_t else f"{'-':>9s}"
            print(f"{name + ' ' + size:40s} {med[0]:11.1f} {med[1]:10.1f} {t_us} "
                  f"{med[1] / med[0]:7.2f}x {x_t}", flush=True)


if __name__ == "__main__":
    main()
