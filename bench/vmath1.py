"""Single-core float32 timing of some unary ops against NumPy (medians, us;
both allocate their output, as bench/ops.py has them).

Run with EAGERVM_INTRAOP_THREADS=1 so that eagervm uses one core as NumPy does:
    EAGERVM_INTRAOP_THREADS=1 PYTHONPATH=python /work/venv-bench/bin/python bench/vmath1.py tan,acos
"""
import os
import sys
import time

import numpy as np

import eagervm as ev

N = 1 << 20
REPS = int(os.environ.get("REPS", "15"))
names = sys.argv[1].split(",") if len(sys.argv) > 1 else [
    "tan", "arccos", "arcsin", "arctan", "sinh", "cosh", "expm1"]
EV = {"arccos": "acos", "arcsin": "asin", "arctan": "atan"}
DOM = {"arccos": (-1, 1), "arcsin": (-1, 1), "sinh": (-10, 10), "cosh": (-10, 10),
       "expm1": (-10, 10), "tan": (-10, 10), "arctan": (-10, 10)}
rng = np.random.default_rng(0)


def med(f):
    ts = []
    for _ in range(REPS):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e6


for name in names:
    lo, hi = DOM.get(name, (-10, 10))
    a = rng.uniform(lo, hi, N).astype(np.float32)
    ea = ev.tensor(a)
    evf = getattr(ev, EV.get(name, name))
    npf = getattr(np, name)
    evf(ea)
    ev.synchronize()

    def run_ev():
        evf(ea)
        ev.synchronize()

    ours = med(run_ev)
    theirs = med(lambda: npf(a))
    ours2 = med(run_ev)
    theirs2 = med(lambda: npf(a))
    o, t = min(ours, ours2), min(theirs, theirs2)
    print(f"{name:8s} ours {o:7.1f}  numpy {t:7.1f}  ratio {t / o:5.2f}")
