"""Every op of the op table (include/eagervm/ops.def) against NumPy and, when
it is installed, PyTorch: the same math on the same data, in one process.

    PYTHONPATH=python /usr/bin/python3 bench/ops.py [--repeats N] [--only NAME,...] [--quick]

The cases come from each row's `bench` column: `elementwise` runs the op at
1K and 1M elements, on contiguous inputs, on a transposed view, and (binary
ops) with one operand broadcast along a row; `reduction` reduces 1K and 1M
elements over everything, along rows and along columns. Inputs are drawn from the row's
input domain, in float32 when the row's rule accepts floats, else in int64.
Each repeat runs a batch of the op (200 at 1K, 5 at 1M) in eagervm, NumPy
and PyTorch, one after the other, so a slow minute of a shared machine hits
all three; eagervm's batch ends in a sync (synchronize()), so it measures
the work, not only its issue. One line
per case: the median time of each, and the ratios NumPy/eagervm and
PyTorch/eagervm (above 1: eagervm is faster). The summary gives the
geometric mean of the ratios at each size and lists every case below 0.9x
NumPy. Timings are printed, never asserted."""
import argparse
import math
import statistics
import sys
import time

import eagervm as ev  # first: it sets OPENBLAS_THREAD_TIMEOUT before OpenBLAS loads
import numpy as np  # noqa: E402

from eagervm import _op_refs as refs  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

SIZES = {"1K": (32, 32), "1M": (1024, 1024)}
CASE_KINDS = ("elementwise", "reduction", "clamp", "rowwise", "matmul", "view", "copy",
              "creation", "select", "loss", "random", "interop", "scan", "sort", "reorder",
              "data_dependent")
# The shapes of the EV_FUNC kinds' input x at each size (matmul: 32 and 1024 square).
FUNC_SHAPES = {"1K": (32, 32), "1M": (1024, 1024)}


class Case:
    """One measurement: name, and make() -> (run_ev, run_np, run_torch or None),
    each a no-argument callable doing the op once."""

    def __init__(self, name, size, make):
        self.name, self.size, self.make = name, size, make


def _dtype_for(row):
    if row["family"] == "unary":
        ok = refs.unary_result(row["rule"], "float32") is not None
    else:
        ok = refs.binary_result(row["rule"], "float32", "float32") is not None
    return "float32" if ok else "int64"


def _torch_fn(row):
    """PyTorch's function of the row's name, where it differs from ours."""
    if torch is None:
        return None
    if row["name"] == "gelu":
        return torch.nn.functional.gelu
    return getattr(torch, {"div": "true_divide"}.get(row["name"], row["name"]), None)


def reduction_cases(row):
    """A reduction at 1K and 1M elements: over everything, along rows
    (dim=1, contiguous) and along columns (dim=0)."""
    dt = "float32"
    ev_fn = getattr(ev, row["name"])
    np_fn = refs.reference(row)
    t_fn = getattr(torch, row["name"], None) if torch is not None else None
    out = []
    for size, shape in SIZES.items():
        for what, dim in (("all", None), ("dim=1", 1), ("dim=0", 0)):
            def make(shape=shape, dim=dim):
                a = refs.draw(np.random.default_rng(0), row["domain"], dt, shape)
                ea = ev.tensor(a)
                ta = torch.from_numpy(a) if t_fn is not None else None
                run_t = None
                if t_fn is not None:
                    # torch.max(x, dim) also returns indices: use amax/amin there.
                    tf = {"max": torch.amax, "min": torch.amin}.get(row["name"], t_fn)
                    run_t = (lambda: tf(ta)) if dim is None else (lambda: tf(ta, dim))
                return (lambda: ev_fn(ea, dim)), (lambda: np_fn(a, dim)), run_t
            out.append(Case(f"{row['name']} {dt} {size} {what}", size, make))
    return out


def func_cases(row):
    """An EV_FUNC row called with its example arguments on a float32 x of 1K
    and 1M elements, as function (or method), beside its NumPy reference and
    the PyTorch function of the same name when one takes the same arguments."""
    name, bound = row["name"], row["bound"]
    np_fn = refs.reference(row)
    out = []
    for size, shape in FUNC_SHAPES.items():
        def make(shape=shape):
            xn = np.random.default_rng(0).uniform(-3, 3, shape).astype(np.float32)
            x = ev.tensor(xn)
            a_ev = eval(row["example"], refs.example_namespace(x, xn, ev, ev.tensor))
            a_np = eval(row["example"], refs.example_namespace(xn, xn, ev, np.asarray))
            if bound == "FN":
                run_ev = lambda: getattr(ev, name)(*a_ev)  # noqa: E731
                run_np = lambda: np_fn(*a_np)  # noqa: E731
            elif bound == "BOTH":
                run_ev = lambda: getattr(ev, name)(x, *a_ev)  # noqa: E731
                run_np = lambda: np_fn(xn, *a_np)  # noqa: E731
            else:
                run_ev = lambda: getattr(x, name)(*a_ev)  # noqa: E731
                run_np = lambda: np_fn(xn, *a_np)  # noqa: E731
            return run_ev, run_np, _torch_func(row, xn)
        out.append(Case(f"{name} float32 {size}", size, make))
    return out


def _torch_func(row, xn):
    """PyTorch's function (or method) of the row's name on the same arguments,
    or None when it has none that takes them."""
    if torch is None:
        return None
    t = torch.from_numpy(xn.copy())
    try:
        args = eval(row["example"], refs.example_namespace(t, xn, torch, torch.as_tensor))
        if row["bound"] == "METHOD":
            fn = getattr(t, row["name"])
            fn(*args)
            return lambda: fn(*args)
        fn = getattr(torch, row["name"])
        call = (lambda: fn(*args)) if row["bound"] == "FN" else (lambda: fn(t, *args))
        call()
        return call
    except Exception:  # no such function, or other arguments: no PyTorch figure
        return None


def cases_for(row):
    """The benchmark cases of one table row."""
    if row["family"] == "func":
        return func_cases(row)
    if row["bench"] == "reduction":
        return reduction_cases(row)
    if row["bench"] != "elementwise":
        return []
    dt = _dtype_for(row)
    ev_fn = getattr(ev, row["name"])
    np_fn = refs.reference(row)
    t_fn = _torch_fn(row)
    binary = row["family"] == "binary"
    out = []
    for size, shape in SIZES.items():
        layouts = ["contiguous", "transposed"] + (["broadcast"] if binary else [])
        for layout in layouts:
            def make(shape=shape, layout=layout):
                rng = np.random.default_rng(0)
                a = refs.draw(rng, row["domain"], dt, shape, 0)
                b = refs.draw(rng, row["domain"], dt, shape, 1)
                if layout == "broadcast":
                    b = b[:1]  # one row, broadcast down the columns
                ea, eb = ev.tensor(a), ev.tensor(b)
                ta = torch.from_numpy(a) if torch is not None else None
                tb = torch.from_numpy(b) if torch is not None else None
                if layout == "transposed":
                    a, b = a.T, b.T
                    ea, eb = ea.transpose(0, 1), eb.transpose(0, 1)
                    if ta is not None:
                        ta, tb = ta.T, tb.T
                args_np = (a, b) if binary else (a,)
                args_ev = (ea, eb) if binary else (ea,)
                args_t = (ta, tb) if binary else (ta,)

                def run_ev():
                    ev_fn(*args_ev)

                def run_np():
                    with np.errstate(all="ignore"):
                        np_fn(*args_np)
                run_t = (lambda: t_fn(*args_t)) if t_fn is not None else None
                return run_ev, run_np, run_t
            out.append(Case(f"{row['name']} {dt} {size} {layout}", size, make))
    return out


def _time(fn, inner, sync=None):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    if sync:
        sync()  # eagervm: the work, not only its issue, is in the time
    return (time.perf_counter() - t0) / inner


def measure(case, repeats):
    run_ev, run_np, run_t = case.make()
    runs = [run_ev, run_np] + ([run_t] if run_t else [])
    syncs = [ev.synchronize] + [None] * (len(runs) - 1)
    for fn, sync in zip(runs, syncs):
        _time(fn, 2, sync)  # warm-up: allocator caches, lazy imports, page faults
    inner = 200 if case.size == "1K" else 5
    times = [[] for _ in runs]
    for _ in range(repeats):
        for k, fn in enumerate(runs):  # alternate the peers within each repeat
            times[k].append(_time(fn, inner, syncs[k]))
    med = [statistics.median(t) for t in times]
    return med + ([None] if run_t is None else [])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated op names")
    ap.add_argument("--quick", action="store_true", help="3 repeats, 1K and 1M contiguous only")
    args = ap.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    repeats = 3 if args.quick else args.repeats
    print(f"eagervm {ev.__version__} ({ev.config()['build']['type']}, BLAS "
          f"{'on' if ev.config()['blas']['enabled'] else 'off'}, SIMD "
          f"{ev.config()['simd']['level']}), NumPy {np.__version__}, PyTorch "
          f"{torch.__version__ + ' (' + str(torch.get_num_threads()) + ' threads)' if torch else 'not installed'}")
    print(f"{'case':<44} {'eagervm us':>11} {'NumPy us':>10} {'PyTorch us':>11} "
          f"{'x NumPy':>8} {'x PyTorch':>9}")
    ratios = {size: ([], []) for size in SIZES}
    slow = []
    for row in ev._C._op_table()["ops"]:
        if only and row["name"] not in only:
            continue
        for case in cases_for(row):
            if args.quick and not case.name.endswith(("contiguous", "all", "1K", "1M")):
                continue
            t_ev, t_np, t_t = measure(case, repeats)
            r_np = t_np / t_ev
            r_t = t_t / t_ev if t_t else None
            ratios[case.size][0].append(r_np)
            if r_t:
                ratios[case.size][1].append(r_t)
            if r_np < 0.9:
                slow.append((case.name, r_np))
            print(f"{case.name:<44} {t_ev * 1e6:>11.1f} {t_np * 1e6:>10.1f} "
                  f"{(t_t * 1e6 if t_t else float('nan')):>11.1f} {r_np:>7.2f}x "
                  f"{(f'{r_t:.2f}x' if r_t else '-'):>9}", flush=True)

    def gmean(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    print()
    for size, (rn, rt) in ratios.items():
        if rn:
            print(f"geometric mean, {size}: {gmean(rn):.2f}x NumPy over {len(rn)} cases"
                  + (f", {gmean(rt):.2f}x PyTorch" if rt else ""))
    print(f"cases below 0.9x NumPy: {len(slow)}")
    for name, r in sorted(slow, key=lambda kv: kv[1]):
        print(f"  {name:<44} {r:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
