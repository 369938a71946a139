"""Data movement cases beside NumPy and PyTorch (index ops, cat, casts,
transposing copies, creation), at the sizes the issue-12 measurements used.

    PYTHONPATH=python /usr/bin/python3 bench/movement.py [--repeats N] [--only SUBSTR]

Each line: the best (--stat min, the default: least disturbed by other load
on a shared machine) or median µs of eagervm (batches of 5 ending in a
sync), NumPy and PyTorch, and the ratios NumPy/eagervm and PyTorch/eagervm
(above 1: eagervm faster)."""
import argparse
import statistics
import time

import eagervm as ev
import numpy as np

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None


def cases():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    train = rng.standard_normal((60000, 784)).astype(np.float32)
    rows = rng.integers(0, 1024, 128).astype(np.int64)
    batch = rng.integers(0, 60000, 128).astype(np.int64)
    flat = rng.integers(0, a.size, a.size).astype(np.int64)
    g = rng.integers(0, 1024, (1024, 1024)).astype(np.int64)
    e, et = ev.tensor(a), ev.tensor(train)
    er, eb, ef, eg = ev.tensor(rows), ev.tensor(batch), ev.tensor(flat), ev.tensor(g)
    t = torch.from_numpy(a) if torch else None
    tt = torch.from_numpy(train) if torch else None
    tr = torch.from_numpy(rows) if torch else None
    tb = torch.from_numpy(batch) if torch else None
    tf = torch.from_numpy(flat) if torch else None
    tg = torch.from_numpy(g) if torch else None
    ai = a.astype(np.int64)
    ei = ev.tensor(ai)
    ti = torch.from_numpy(ai) if torch else None
    yield ("index_select 128 of 1024 rows", lambda: ev.index_select(e, 0, er),
           lambda: a[rows], torch and (lambda: torch.index_select(t, 0, tr)))
    yield ("index_select 128x784 of 60000", lambda: ev.index_select(et, 0, eb),
           lambda: train[batch], torch and (lambda: torch.index_select(tt, 0, tb)))
    yield ("index_select dim=1 128 of 1024", lambda: ev.index_select(e, 1, er),
           lambda: a[:, rows], torch and (lambda: torch.index_select(t, 1, tr)))
    yield ("take 1M", lambda: ev.take(e, ef), lambda: np.take(a, flat),
           torch and (lambda: torch.take(t, tf)))
    yield ("gather dim=1 1M", lambda: ev.gather(e, 1, eg),
           lambda: np.take_along_axis(a, g, 1), torch and (lambda: torch.gather(t, 1, tg)))
    yield ("scatter_add dim=1 1M", lambda: ev.scatter_add(e, 1, eg, e),
           None, torch and (lambda: torch.scatter_add(t, 1, tg, t)))
    yield ("cat of two 1M", lambda: ev.cat([e, e], 0), lambda: np.concatenate([a, a], 0),
           torch and (lambda: torch.cat([t, t], 0)))
    yield ("cat of two 1M dim=1", lambda: ev.cat([e, e], 1), lambda: np.concatenate([a, a], 1),
           torch and (lambda: torch.cat([t, t], 1)))
    yield ("stack of two 1M", lambda: ev.stack([e, e], 0), lambda: np.stack([a, a], 0),
           torch and (lambda: torch.stack([t, t], 0)))
    yield ("cast f32->i64 1M", lambda: ev.cast(e, ev.int64), lambda: a.astype(np.int64),
           torch and (lambda: t.to(torch.int64)))
    yield ("cast i64->f32 1M", lambda: ev.cast(ei, ev.float32), lambda: ai.astype(np.float32),
           torch and (lambda: ti.to(torch.float32)))
    yield ("cast f32->f64 1M", lambda: ev.cast(e, ev.float64), lambda: a.astype(np.float64),
           torch and (lambda: t.to(torch.float64)))
    yield ("cast f32->bool 1M", lambda: ev.cast(e, ev.bool), lambda: a.astype(np.bool_),
           torch and (lambda: t.to(torch.bool)))
    yield ("clone 1M", lambda: ev.clone(e), lambda: a.copy(), torch and (lambda: t.clone()))
    yield ("transpose.contiguous 1M", lambda: e.transpose(0, 1).contiguous(),
           lambda: np.ascontiguousarray(a.T), torch and (lambda: t.T.contiguous()))
    yield ("zeros 1M", lambda: ev.zeros(1024, 1024), lambda: np.zeros((1024, 1024), np.float32),
           torch and (lambda: torch.zeros(1024, 1024)))
    yield ("ones 1M", lambda: ev.ones(1024, 1024), lambda: np.ones((1024, 1024), np.float32),
           torch and (lambda: torch.ones(1024, 1024)))
    yield ("full 1M", lambda: ev.full((1024, 1024), 2.5),
           lambda: np.full((1024, 1024), 2.5, np.float32),
           torch and (lambda: torch.full((1024, 1024), 2.5)))
    yield ("arange 1M", lambda: ev.arange(0, 1 << 20), lambda: np.arange(0, 1 << 20),
           torch and (lambda: torch.arange(0, 1 << 20)))
    yield ("where 1M", lambda: ev.where(ec, e, e2), lambda: np.where(c, a, a2),
           torch and (lambda: torch.where(tc, t, t2)))


def _time(fn, inner, sync=None):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    if sync:
        sync()
    return (time.perf_counter() - t0) / inner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", default="")
    ap.add_argument("--stat", choices=("min", "median"), default="min")
    args = ap.parse_args()
    global ec, e2, c, a2, tc, t2
    rng = np.random.default_rng(1)
    c = rng.standard_normal((1024, 1024)) > 0
    a2 = rng.standard_normal((1024, 1024)).astype(np.float32)
    ec, e2 = ev.tensor(c), ev.tensor(a2)
    tc = torch.from_numpy(c) if torch else None
    t2 = torch.from_numpy(a2) if torch else None
    print(f"{'case':34} {'eagervm':>9} {'NumPy':>9} {'PyTorch':>9} {'xNumPy':>7} {'xTorch':>7}")
    for name, fe, fn, ft in cases():
        if args.only and args.only not in name:
            continue
        runs = [(fe, ev.synchronize), (fn, None), (ft, None)]
        times = [[] for _ in runs]
        for k, (f, s) in enumerate(runs):
            if f:
                _time(f, 2, s)
        for _ in range(args.repeats):
            for k, (f, s) in enumerate(runs):
                if f:
                    times[k].append(_time(f, 5, s))
        stat = min if args.stat == "min" else statistics.median
        med = [stat(x) * 1e6 if x else float("nan") for x in times]
        print(f"{name:34} {med[0]:9.1f} {med[1]:9.1f} {med[2]:9.1f} "
              f"{med[1] / med[0]:6.2f}x {med[2] / med[0]:6.2f}x", flush=True)


if __name__ == "__main__":
    main()
