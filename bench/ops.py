"""Every op of the op table (include/eagervm/ops.def) against NumPy and, when
it is installed, PyTorch: the same math on the same data, in one process.

    PYTHONPATH=python /usr/bin/python3 bench/ops.py [--repeats N] [--passes N]
        [--only NAME,...] [--quick]

One run measures this machine's read, copy and triad bandwidth with a plain C
loop (bench_stream, built with the benchmarks) and then runs every case once
per peer environment: Debian's NumPy and PyTorch (/usr/bin/python3), and the
newest ones PyPI serves, in the virtual environment that
scripts/bench_env.sh makes (.venv-bench, or $EAGERVM_BENCH_VENV). Each
environment runs in its own process (a process can hold one NumPy), eagervm
beside its peers in that process.

The cases come from each row's `bench` column: `elementwise` runs the op at
1K and 1M elements, on contiguous inputs, on a transposed view, and (binary
ops) with one operand broadcast along a row; `reduction` reduces 1K and 1M
elements over everything, along rows and along columns. Inputs are drawn from the row's
input domain, in float32 when the row's rule accepts floats, else in int64.
Each repeat runs a batch of the op (200 at 1K, 5 at 1M or more when that
would take under a millisecond) in eagervm and in one peer, one after the
other and first in turn (--repeats of them, three times as many for the
short 1K batches), so a slow minute of a shared machine hits both; one pass
of repeats with NumPy, then one with PyTorch, so that neither peer's
after-effects (PyTorch's OpenMP threads) land on the other's comparison.
The repeats are spread over --passes (3) passes through all the cases, and
each median pools a case's batches from every pass (20-30 s apart on a
2-core machine): a slow spell of the host shorter than a pass then lands
in a third of a case's batches, not in all of them, nor in a run of
neighbouring cases together; a longer one still hits all (--quick: one
pass).
eagervm's batch ends in a sync (synchronize()), so it measures the work,
not only its issue. One line per case: the median time of each (eagervm's
from the NumPy pass), and the ratios NumPy/eagervm and PyTorch/eagervm,
each from its own pass (above 1: eagervm is faster). The summary gives the
geometric mean of the ratios at each size and lists every case below 0.9x
NumPy. The memory-bound cases at 1M (cheap elementwise ops, casts, copies,
cat, where, creation, reductions) also print the bytes they must move per
second and that rate as a share of the C loop's bandwidth: the memory
bandwidth (STREAM's arrays, far larger than the caches: the target) and the
rate on arrays of the cases' own size, which fit in the last-level cache.
Timings are printed, never asserted."""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import eagervm as ev  # first: it sets OPENBLAS_THREAD_TIMEOUT before OpenBLAS loads
import numpy as np  # noqa: E402

from eagervm import _op_refs as refs  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:  # NumPy has no erf; SciPy's is vectorised (np.vectorize(math.erf) is not)
    from scipy.special import erf as _np_erf
except Exception:  # missing, or built for another NumPy
    _np_erf = None

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SIZES = {"1K": (32, 32), "1M": (1024, 1024)}
CASE_KINDS = ("elementwise", "reduction", "clamp", "rowwise", "matmul", "view", "copy",
              "creation", "select", "loss", "random", "interop", "scan", "sort", "reorder",
              "data_dependent")
# The shapes of the EV_FUNC kinds' input x at each size (matmul: 32 and 1024 square).
FUNC_SHAPES = {"1K": (32, 32), "1M": (1024, 1024)}

# Elementwise rows whose cost is arithmetic, not memory traffic: no
# bandwidth target (integer division has no vector instruction).
COMPUTE_BOUND = {"exp", "log", "sin", "cos", "tan", "tanh", "sigmoid", "gelu", "erf", "log1p",
                 "expm1", "log2", "log10", "exp2", "asin", "acos", "atan", "sinh", "cosh",
                 "asinh", "acosh", "atanh", "pow", "atan2", "hypot", "logaddexp",
                 "floor_divide", "remainder", "logsumexp"}
# EV_FUNC rows that stream memory: copies, casts, creation, cat, where.
MEMORY_BOUND_FUNCS = {"clamp", "clamp_", "clip", "argmax", "argmin", "contiguous", "clone",
                      "copy_", "fill_", "to", "cast", "zeros", "ones", "full", "zeros_like",
                      "ones_like", "full_like", "arange", "linspace", "where", "cat", "concat",
                      "concatenate", "stack"}

# The example arguments of some rows are tiny (zeros(3, 4), three indices):
# in the benchmark they take the case's size instead. Evaluated in the
# example namespace plus `shape`, `n` (elements), `rows8` (an eighth of the
# rows, shuffled: index_select takes 128 of 1,024 rows) and `flat` (n flat
# indices, for take).
SIZED_EXAMPLES = {
    "empty": "tuple(shape)", "zeros": "tuple(shape)", "ones": "tuple(shape)",
    "full": "(tuple(shape), 2.5)", "arange": "(0, n)", "linspace": "(0.0, 1.0, n)",
    "eye": "tuple(shape)", "rand": "tuple(shape)", "randn": "tuple(shape)",
    "randint": "(0, 10, tuple(shape))", "randperm": "(n,)", "index_select": "(0, rows8)",
    "take": "(flat,)", "one_hot": "(t, shape[1])",
}


def _rng():
    return np.random.default_rng(0)


# NumPy's side where the op test's reference is not what a NumPy user would
# run: the random references return zeros (the tests compare only shapes),
# erf goes through SciPy, topk through argpartition, cross_entropy in the
# input's dtype, flip copies. Each takes the row's arguments.
def _np_topk(x, k):
    idx = np.argpartition(-x, k - 1, axis=-1)[..., :k]
    vals = np.take_along_axis(x, idx, -1)
    order = np.argsort(-vals, axis=-1, kind="stable")
    return np.take_along_axis(vals, order, -1), np.take_along_axis(idx, order, -1)


def _np_cross_entropy(logits, target):
    return -refs.log_softmax(logits, 1)[np.arange(len(target)), target].mean()


_GEN = _rng()
NUMPY_PEERS = {
    "rand": lambda *size: _GEN.random(size, np.float32),
    "randn": lambda *size: _GEN.standard_normal(size, np.float32),
    "randint": lambda lo, hi, size: _GEN.integers(lo, hi, size, np.int64),
    "randperm": lambda n: _GEN.permutation(n),
    "rand_like": lambda x: _GEN.random(x.shape, np.float32),
    "randn_like": lambda x: _GEN.standard_normal(x.shape, np.float32),
    "uniform_": lambda x: _GEN.random(dtype=np.float32, out=x),
    "normal_": lambda x: _GEN.standard_normal(dtype=np.float32, out=x),
    "topk": _np_topk,
    # np.flip is a view; eagervm's flip (as PyTorch's) makes a new tensor.
    "flip": lambda x, dims: refs.flip(x, dims).copy(),
    "cross_entropy": _np_cross_entropy,
}
if _np_erf is not None:
    NUMPY_PEERS["erf"] = _np_erf
    NUMPY_PEERS["gelu"] = lambda x: 0.5 * x * (1 + _np_erf(x * np.float32(math.sqrt(0.5))))


class Case:
    """One measurement: name, and make() -> (run_ev, run_np or None,
    run_torch or None, bytes moved), each run a no-argument callable doing
    the op once; memory_bound: it has a bandwidth target."""

    def __init__(self, name, size, make, memory_bound=False):
        self.name, self.size, self.make = name, size, make
        self.memory_bound = memory_bound and size == "1M"


def _nbytes(*objs):
    """Bytes of the arrays among objs (nested in lists and tuples)."""
    total = 0
    for o in objs:
        if isinstance(o, np.ndarray):
            total += o.nbytes
        elif isinstance(o, (list, tuple)):
            total += _nbytes(*o)
    return total


def _numpy_fn(row):
    """The NumPy side of a row: its peer above, else its test reference;
    None where the reference is not a vectorised NumPy computation."""
    if row["name"] in NUMPY_PEERS:
        return NUMPY_PEERS[row["name"]]
    if row["name"] in ("erf", "gelu"):
        return None  # np.vectorize(math.erf) is a Python loop: not a peer
    return refs.reference(row)


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
                a = refs.draw(_rng(), row["domain"], dt, shape)
                ea = ev.tensor(a)
                ta = torch.from_numpy(a) if t_fn is not None else None
                run_t = None
                if t_fn is not None:
                    # torch.max(x, dim) also returns indices: use amax/amin there.
                    tf = {"max": torch.amax, "min": torch.amin}.get(row["name"], t_fn)
                    if dim is not None:
                        run_t = lambda: tf(ta, dim)  # noqa: E731
                    elif row["name"] == "logsumexp":  # PyTorch's needs the dims
                        run_t = lambda: tf(ta, tuple(range(ta.ndim)))  # noqa: E731
                    else:
                        run_t = lambda: tf(ta)  # noqa: E731
                return ((lambda: ev_fn(ea, dim)), (lambda: np_fn(a, dim)), run_t,
                        _nbytes(a, np_fn(a, dim)))
            out.append(Case(f"{row['name']} {dt} {size} {what}", size, make,
                            row["name"] not in COMPUTE_BOUND))
    return out


def _namespace(x, xn, lib, tensor, shape):
    """The example namespace of the benchmark: the op tests' names, and
    the case's size (see SIZED_EXAMPLES)."""
    ns = refs.example_namespace(x, xn, lib, tensor)
    rows, cols = shape
    rng = _rng()
    ns.update(shape=shape, n=rows * cols,
              rows8=tensor(rng.permutation(rows)[:max(rows // 8, 1)].astype(np.int64)),
              flat=tensor(rng.integers(0, rows * cols, rows * cols).astype(np.int64)))
    return ns


def func_cases(row):
    """An EV_FUNC row called with its example arguments (SIZED_EXAMPLES
    where they are tiny) on a float32 x of 1K and 1M elements, as function
    (or method), beside NumPy's and the PyTorch function of the same name
    when one takes the same arguments. The copy rows also run on a
    transposed x (a transposing copy)."""
    name, bound = row["name"], row["bound"]
    np_fn = _numpy_fn(row)
    example = SIZED_EXAMPLES.get(name, row["example"])
    layouts = ["contiguous", "transposed"] if row["bench"] == "copy" else ["contiguous"]
    out = []
    for size, shape in FUNC_SHAPES.items():
        for layout in layouts:
            def make(shape=shape, layout=layout):
                xn = _rng().uniform(-3, 3, shape).astype(np.float32)
                x = ev.tensor(xn)
                if layout == "transposed":
                    xn, x = xn.T, x.transpose(0, 1)
                a_ev = eval(example, _namespace(x, xn, ev, ev.tensor, shape))
                a_np = eval(example, _namespace(xn, xn, ev, np.asarray, shape))
                if bound == "FN":
                    call_ev = (getattr(ev, name),) + tuple(a_ev)
                    call_np = (np_fn,) + tuple(a_np)
                elif bound == "BOTH":
                    call_ev = (getattr(ev, name), x) + tuple(a_ev)
                    call_np = (np_fn, xn) + tuple(a_np)
                else:
                    call_ev = (getattr(x, name),) + tuple(a_ev)
                    call_np = (np_fn, xn) + tuple(a_np)
                run_ev = lambda: call_ev[0](*call_ev[1:])  # noqa: E731
                run_np = None
                moved = 0
                if np_fn is not None:
                    run_np = lambda: call_np[0](*call_np[1:])  # noqa: E731
                    res = run_np()
                    shared = isinstance(res, np.ndarray) and any(
                        isinstance(a, np.ndarray) and np.shares_memory(a, res)
                        for a in call_np[1:])
                    moved = 0 if shared else _nbytes(call_np[1:], res)  # a view moves nothing
                return run_ev, run_np, _torch_func(row, xn, example, shape), moved
            out.append(Case(f"{name} float32 {size}"
                            + (f" {layout}" if len(layouts) > 1 else ""), size, make,
                            name in MEMORY_BOUND_FUNCS))
    return out


# PyTorch's functions of other names than ours.
TORCH_FUNCS = {}
if torch is not None:
    TORCH_FUNCS = {"cross_entropy": torch.nn.functional.cross_entropy,
                   "cast": lambda t, dtype: t.to(dtype),
                   "one_hot": torch.nn.functional.one_hot}


def _torch_func(row, xn, example, shape):
    """PyTorch's function (or method) of the row's name on the same arguments,
    or None when it has none that takes them."""
    if torch is None:
        return None
    t = torch.from_numpy(np.ascontiguousarray(xn.T)).T if not xn.flags.c_contiguous \
        else torch.from_numpy(xn.copy())
    try:
        args = eval(example, _namespace(t, xn, torch, torch.as_tensor, shape))
        name = row["name"]
        if name in TORCH_FUNCS:
            fn = TORCH_FUNCS[name]
            call = (lambda: fn(*args)) if row["bound"] == "FN" else (lambda: fn(t, *args))
            call()
            return call
        if row["bound"] == "METHOD" or not hasattr(torch, name):
            fn = getattr(t, name)  # a method only (contiguous, clone)
            fn(*args)
            return lambda: fn(*args)
        fn = getattr(torch, name)
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
    np_fn = _numpy_fn(row)
    t_fn = _torch_fn(row)
    binary = row["family"] == "binary"
    out = []
    for size, shape in SIZES.items():
        layouts = ["contiguous", "transposed"] + (["broadcast"] if binary else [])
        for layout in layouts:
            def make(shape=shape, layout=layout):
                rng = _rng()
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
                    return ev_fn(*args_ev)

                def run_np():
                    return np_fn(*args_np)
                run_t = (lambda: t_fn(*args_t)) if t_fn is not None else None
                moved = _nbytes(args_np, run_np()) if np_fn is not None else 0
                return run_ev, (run_np if np_fn is not None else None), run_t, moved
            out.append(Case(f"{row['name']} {dt} {size} {layout}", size, make,
                            row["name"] not in COMPUTE_BOUND and layout != "transposed"))
    return out


def _time(fn, inner, sync=None):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    if sync:
        sync()  # eagervm: the work, not only its issue, is in the time
    return (time.perf_counter() - t0) / inner


_warmed_up = False


def measure(case, repeats):
    """One pass of a case: lists of seconds per op of eagervm beside NumPy,
    of NumPy, of PyTorch and of eagervm beside PyTorch (empty: no such
    peer), and the bytes the op moves."""
    global _warmed_up
    run_ev, run_np, run_t, moved = case.make()
    runs = [r for r in (run_ev, run_np, run_t) if r is not None]
    warm = []
    for fn in runs:
        sync = ev.synchronize if fn is run_ev else None
        warm.append(_time(fn, 2, sync))  # warm-up: allocator caches, lazy imports, page faults
        # The process's first case also warms the process: for 0.2 s each
        # peer (the first case of a run used to measure 50x slow).
        t0 = time.perf_counter()
        while not _warmed_up and time.perf_counter() - t0 < 0.2:
            _time(fn, 20, sync)
    _warmed_up = True
    inner = 200 if case.size == "1K" else 5
    # A 1M case's batch lasts at least about a millisecond for every peer: a
    # no-op there (contiguous() of a contiguous tensor) would otherwise time
    # 5 calls of 0.1 us, below the timer's and the final sync's grain. (1K
    # batches keep 200: longer ones would measure a deeper queue, not the op.)
    if case.size != "1K":
        fastest = max(min(warm), 1e-9)
        inner = max(inner, min(20000, int(1e-3 / fastest)))
    if case.size == "1K":
        # A 1K batch lasts about 0.1 ms: three times the repeats cost a
        # fraction of a 1M case's time, and keep a burst of another
        # process's load (which moves a 1K median by 20% here) out of the
        # median, for every peer alike.
        repeats *= 3
    # One pass per peer, eagervm alternating with that peer alone, first
    # and second in turn. With all three in one loop, PyTorch's batch (its
    # OpenMP threads woken and put to sleep 200 times) left the vCPUs in a
    # state that slowed the next batch: eagervm's 1K ops, whose worker
    # thread runs on the other vCPU, took 0.8-1.0 us there against
    # 0.45-0.5 us beside NumPy alone, while NumPy, on one thread, lost less.
    # Each ratio now compares two runtimes under the same conditions.
    if run_np is None and run_t is None:
        t_ev = [_time(run_ev, inner, ev.synchronize) for _ in range(repeats)]
        return t_ev, [], [], [], moved
    out = []
    for peer in (run_np, run_t):
        t_ev, t_peer = [], []
        for k in range(repeats if peer is not None else 0):
            if k % 2:
                t_peer.append(_time(peer, inner))
            t_ev.append(_time(run_ev, inner, ev.synchronize))  # the work, not only its issue
            if not k % 2:
                t_peer.append(_time(peer, inner))
        out.append((t_ev, t_peer))
    (ev_np, t_np), (ev_t, t_t) = out
    return ev_np, t_np, t_t, ev_t, moved


# ------------------------------------------------------------- bandwidth

def stream_exe():
    """bench_stream of the build whose module is imported, else of build/."""
    here = os.environ.get("EAGERVM_BENCH_STREAM")
    if here:
        return here
    for d in ("build", "build-wheel"):
        p = os.path.join(ROOT, d, "bench", "bench_stream")
        if os.path.exists(p):
            return p
    return None


def _stream(n, repeats):
    """bench_stream's read, copy and triad GB/s on float32 arrays of n
    elements, the best over one thread and all cores."""
    best = {}
    for threads in (1, os.cpu_count() or 1):
        out = subprocess.run([stream_exe(), str(n), str(threads), str(repeats)],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        r = json.loads(out)
        for k in ("read_gbs", "copy_gbs", "triad_gbs"):
            best[k] = max(best.get(k, 0.0), r[k])
    return best


# STREAM's rule: each array at least four times the last-level cache, so
# the loop measures memory, not a cache. 2^25 floats = 128 MiB per array.
MEMORY_N = 1 << 25


def measure_bandwidth():
    """{"memory": the C loop on arrays far larger than the caches (STREAM's
    figure: the bandwidth target), "same_size": on arrays of the 1M cases'
    size, which live in the last-level cache (a stricter reference)}, or
    None without bench_stream."""
    if stream_exe() is None:
        return None
    return {"memory": _stream(MEMORY_N, 10), "same_size": _stream(1 << 20, 50)}


def limit_for(case_name, bw):
    """The C loop figure a memory-bound case is held to: read for
    reductions, else copy."""
    if any(w in case_name for w in (" all", " dim=")) or case_name.split()[0] in (
            "argmax", "argmin"):
        return bw["read_gbs"]
    return bw["copy_gbs"]


# ----------------------------------------------------------------- runs

def peer_envs():
    """(label, python) of each peer environment present: Debian's
    packages, and the virtual environment of scripts/bench_env.sh."""
    envs = [("Debian", "/usr/bin/python3")]
    venv = os.environ.get("EAGERVM_BENCH_VENV", os.path.join(ROOT, ".venv-bench"))
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py):
        envs.append(("PyPI", py))
    return envs


def run_cases(args, bw):
    """Runs the cases in this process; returns the summary as a dict."""
    only = set(filter(None, args.only.split(",")))
    repeats = 3 if args.quick else args.repeats
    # Once for the run, not around each timed call: an errstate block costs
    # NumPy 0.8-1.9 us a call, more than a 1K op itself, and eagervm's side
    # has nothing like it (with one per call, the 1K ratios read 2-5x high).
    np.seterr(all="ignore")
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)  # Debian's defaults to 1
    print(f"[{args.label}] eagervm {ev.__version__} ({ev.config()['build']['type']}, BLAS "
          f"{'on' if ev.config()['blas']['enabled'] else 'off'}, SIMD "
          f"{ev.config()['simd']['level']}), NumPy {np.__version__}, PyTorch "
          f"{torch.__version__ + ' (' + str(torch.get_num_threads()) + ' threads)' if torch else 'not installed'}"
          f", SciPy erf {'yes' if _np_erf is not None else 'no'}, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    ratios = {size: ([], []) for size in SIZES}
    slow, under_bw = [], []
    cases = [case for row in ev._C._op_table()["ops"] if not only or row["name"] in only
             for case in cases_for(row)
             if not args.quick or case.name.endswith(("contiguous", "all", "1K", "1M"))]
    # The repeats spread over passes, the times pooled (see the docstring).
    passes = 1 if args.quick else args.passes
    per_pass = math.ceil(repeats / passes)
    samples = [[[], [], [], []] for _ in cases]
    moved_by_case = [0] * len(cases)
    for p in range(passes):
        t0 = time.perf_counter()
        for i, case in enumerate(cases):
            *times, moved_by_case[i] = measure(case, per_pass)
            for pooled, new in zip(samples[i], times):
                pooled.extend(new)
        if passes > 1:
            print(f"[{args.label}] pass {p + 1} of {passes}: {len(cases)} cases, "
                  f"{per_pass} repeats each, {time.perf_counter() - t0:.0f} s", flush=True)

    def median_or_none(xs):
        return statistics.median(xs) if xs else None
    print(f"{'case':<44} {'eagervm us':>11} {'NumPy us':>10} {'PyTorch us':>11} "
          f"{'x NumPy':>8} {'x PyTorch':>9} {'GB/s':>7} {'of mem':>6} {'of L3':>6}")
    for case, got, moved in zip(cases, samples, moved_by_case):
        t_ev, t_np, t_t, t_ev_t = map(median_or_none, got)
        if t_ev is None:  # no NumPy figure: the time beside PyTorch
            t_ev = t_ev_t
        r_np = t_np / t_ev if t_np else None
        r_t = t_t / t_ev_t if t_t else None
        if r_np:
            ratios[case.size][0].append(r_np)
            if r_np < 0.9:
                slow.append((case.name, r_np))
        if r_t:
            ratios[case.size][1].append(r_t)
        gbs = moved / t_ev / 1e9 if moved and case.size == "1M" else None
        frac = frac_l3 = None
        if gbs and bw and case.memory_bound:
            frac = gbs / limit_for(case.name, bw["memory"])
            frac_l3 = gbs / limit_for(case.name, bw["same_size"])
            if frac < 0.8:
                under_bw.append((case.name, frac))
        print(f"{case.name:<44} {t_ev * 1e6:>11.1f} "
              f"{(t_np * 1e6 if t_np else float('nan')):>10.1f} "
              f"{(t_t * 1e6 if t_t else float('nan')):>11.1f} "
              f"{(f'{r_np:.2f}x' if r_np else '-'):>8} {(f'{r_t:.2f}x' if r_t else '-'):>9} "
              f"{(f'{gbs:.1f}' if gbs else ''):>7} {(f'{frac:.0%}' if frac else ''):>6} "
              f"{(f'{frac_l3:.0%}' if frac_l3 else ''):>6}",
              flush=True)

    def gmean(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    summary = {"label": args.label, "numpy": np.__version__,
               "torch": torch.__version__ if torch else None, "slow": slow,
               "under_bandwidth": under_bw, "sizes": {}}
    print()
    for size, (rn, rt) in ratios.items():
        if rn:
            summary["sizes"][size] = {"numpy": gmean(rn), "torch": gmean(rt) if rt else None,
                                      "cases": len(rn)}
            print(f"[{args.label}] geometric mean, {size}: {gmean(rn):.2f}x NumPy over "
                  f"{len(rn)} cases" + (f", {gmean(rt):.2f}x PyTorch over {len(rt)}" if rt else ""))
    print(f"[{args.label}] cases below 0.9x NumPy: {len(slow)}")
    for name, r in sorted(slow, key=lambda kv: kv[1]):
        print(f"  {name:<44} {r:.2f}x")
    if bw:
        print(f"[{args.label}] memory-bound cases below 80% of the C loop's memory "
              f"bandwidth: {len(under_bw)}")
        for name, f in sorted(under_bw, key=lambda kv: kv[1]):
            print(f"  {name:<44} {f:.0%}")
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7,
                    help="repeats a case, over all passes (1K cases: three times as many)")
    ap.add_argument("--passes", type=int, default=3,
                    help="passes through every case, the repeats spread over them")
    ap.add_argument("--only", default="", help="comma-separated op names")
    ap.add_argument("--quick", action="store_true",
                    help="3 repeats in one pass, 1K and 1M contiguous only")
    ap.add_argument("--here", action="store_true",
                    help="only this interpreter's NumPy and PyTorch, not every peer environment")
    ap.add_argument("--label", default="this Python", help=argparse.SUPPRESS)
    ap.add_argument("--bandwidth", default=None, help=argparse.SUPPRESS)  # JSON, from the parent
    ap.add_argument("--summary-fd", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.passes < 1:
        ap.error(f"--passes must be at least 1, got {args.passes}")
    if args.bandwidth is not None or args.here:
        bw = json.loads(args.bandwidth) if args.bandwidth else measure_bandwidth()
        summary = run_cases(args, bw)
        if args.summary_fd is not None:
            with os.fdopen(args.summary_fd, "w") as f:
                json.dump(summary, f)
        return 0

    bw = measure_bandwidth()
    if bw:
        for key, what in (("memory", f"arrays of {MEMORY_N >> 20}M floats (memory; the target)"),
                          ("same_size", "arrays of 1M floats (in the last-level cache)")):
            b = bw[key]
            print(f"C loop (bench_stream), best of 1 and {os.cpu_count()} threads, {what}: "
                  f"read {b['read_gbs']:.1f}, copy {b['copy_gbs']:.1f}, triad "
                  f"{b['triad_gbs']:.1f} GB/s")
        print("  memory-bound cases: GB/s they move, and as a share of each figure "
              "(columns 'of mem' and 'of L3')")
    else:
        print("bench_stream not built (cmake --build build): no bandwidth figures")
    summaries = []
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:])]
    for label, py in peer_envs():
        r, w = os.pipe()
        cmd = [py, os.path.abspath(__file__), *passthrough, "--label", label,
               "--bandwidth", json.dumps(bw or {}), "--summary-fd", str(w)]
        print(flush=True)
        env = dict(os.environ)
        # PyTorch's OpenMP threads spin for a while after each of its calls,
        # on the cores the next peer's batch then runs on: that would time
        # the interference, not the libraries. Idle threads sleep instead.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        proc = subprocess.Popen(cmd, pass_fds=(w,), env=env)
        os.close(w)
        with os.fdopen(r) as f:
            text = f.read()
        if proc.wait() != 0 or not text:
            print(f"[{label}] {py} failed (exit {proc.returncode})")
            continue
        summaries.append(json.loads(text))
    bw_after = measure_bandwidth()
    print()
    if bw_after:
        for key in ("memory", "same_size"):
            b = bw_after[key]
            print(f"C loop again at the end ({key}): read {b['read_gbs']:.1f}, copy "
                  f"{b['copy_gbs']:.1f}, triad {b['triad_gbs']:.1f} GB/s")
    print("summary (targets: every case >= 0.9x NumPy; large cases >= 1.5x NumPy and "
          ">= 1.0x PyTorch; memory-bound cases >= 80% of the C loop)")
    for s in summaries:
        for size, g in s["sizes"].items():
            print(f"  {s['label']:<7} NumPy {s['numpy']:<8} PyTorch {str(s['torch']):<14} {size}: "
                  f"{g['numpy']:.2f}x NumPy, "
                  + (f"{g['torch']:.2f}x PyTorch" if g["torch"] else "no PyTorch")
                  + f" ({g['cases']} cases)")
        print(f"  {s['label']:<7} below 0.9x NumPy: {len(s['slow'])}; memory-bound below 80%: "
              f"{len(s['under_bandwidth'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
