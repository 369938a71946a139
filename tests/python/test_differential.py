"""Differential testing: random eagervm programs against NumPy (issue 6, part 1).

A Hypothesis state machine writes a random program one step at a time and runs
every step twice: in eagervm (asynchronously, on 2-3 asyncs.Threads entered and
left at random) and in NumPy (eagerly, the model). Steps cover the op set:
elementwise binary ops with broadcasting, type promotion and Python scalars;
unary ops; reductions with dims and keepdim; matmul; views (basic indexing
with steps of either sign and None, reshape/view/flatten, transpose/permute/T,
expand, unsqueeze/squeeze, contiguous) and writes through them (in-place ops,
setitem, copy_, fill_); where/cat/stack/index_select/gather/take, tensor and
mask indexing; casts; sync points (numpy(), tolist(), __array__, item()) in
the middle; synchronize(); deletions; a Thread dropped and made anew. At the
end every live tensor is compared with its model: exactly for integers, bool
and floats that only went through exactly rounded ops, within a tolerance for
floats that went through transcendental functions, reductions or matmul.

Each step notes the line of Python it ran, so a failure prints the minimal
program Hypothesis shrank it to, ready to paste (`ev` is eagervm, `np` NumPy).

How the generator handles eagervm's intentional differences from NumPy (see
tests/python/test_ops.py and the module docs) -- it never generates what
eagervm refuses on purpose, and models what it does differently:
- max/min(x, dim) return values only (NumPy's max): modelled so;
- Python scalars are weak (NumPy 1.24 value-based casting: an int that an
  integer tensor's dtype cannot hold takes the smallest dtype that holds it,
  so uint8 tensor + -3 is int16), but a float scalar with a bool or integer
  tensor has dtype float32 (so bool tensor + 0.5 is float32, not NumPy's
  float64): modelled by `scalar_dtype`;
- exp/log/... of bool, uint8 and int8 give float32 (NumPy: float16, a dtype
  eagervm does not have): modelled by `float_of`;
- clamp bounds outside an integer dtype's range saturate at it: modelled;
- integer ** negative integer fails in the kernel (as NumPy raises): not made;
- mean/var/std/softmax need a float dtype (TypeError otherwise): not made;
- x.to(x.dtype) always copies, x.contiguous() shares storage when x is
  contiguous; reshape/flatten share storage when x is contiguous and copy
  otherwise (NumPy copies only when it must): a reshape of a non-contiguous
  tensor freezes both storages (no later writes), as the sharing is
  unspecified;
- in-place ops and writes into an expanded tensor are refused: not made;
- float -> int casts of NaN, inf or out-of-range values are undefined: not made.

Floats are tracked per storage as exact or inexact (with a tolerance).
Discontinuous ops (comparisons, floor division, casts to int/bool, argmax,
logical ops) only read exact floats, and inexact values only flow into ops
that keep their error bounded (views, copies, selection, neg/abs/relu,
maximum/minimum/clamp, max/min reductions), so a rounding difference in the
last bit can never turn into a different bool or integer.

Short run: part of the suite (derandomized, no example database). Long run,
random seeds, failures saved in .hypothesis/:
    EAGERVM_HYPOTHESIS_EXAMPLES=20000 bash scripts/test_python.sh -k differential
"""
import math
import os

import numpy as np
import pytest

import eagervm as ev
from eagervm import asyncs

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (RuleBasedStateMachine, initialize, precondition,  # noqa: E402
                                 rule)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

LONG = int(os.environ.get("EAGERVM_HYPOTHESIS_EXAMPLES", "0") or 0)
EXAMPLES = LONG or 200
STEPS = int(os.environ.get("EAGERVM_HYPOTHESIS_STEPS", "30"))
MAX_VARS = 10

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
FLOATS = ("float32", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int64")
R = {"float32": 1e-4, "float64": 1e-10}  # elementwise tolerance (relative)
RED = 10  # reductions and matmul: this much looser

# ------------------------------------------------------------------ dtypes


def promote(a, b):
    return np.result_type(a, b).name


def min_int_dtype(s):
    """The smallest eagervm dtype holding the int s (uint8 for 0..255)."""
    for dt in ("uint8", "int8", "int16", "int32"):
        if np.iinfo(dt).min <= s <= np.iinfo(dt).max:
            return dt
    return "int64"


def scalar_dtype(s, tdt):
    """The dtype eagervm gives a Python scalar next to a tensor of dtype tdt."""
    if isinstance(s, bool):
        return "bool"
    if isinstance(s, int):
        if tdt in INTS:
            info = np.iinfo(tdt)
            return tdt if info.min <= s <= info.max else min_int_dtype(s)
        return "int64" if tdt == "bool" else tdt
    return tdt if tdt in FLOATS else "float32"


def isfloat(dt):
    return dt in FLOATS


def float_of(dt):
    """Result dtype of exp/log/...: bool and the narrow ints -> float32,
    int32 and int64 -> float64."""
    return dt if dt in FLOATS else ("float64" if dt in ("int32", "int64") else "float32")


def literal(x):
    s = repr(x)
    return s.replace("nan", "float('nan')").replace("inf", "float('inf')")


def arr_literal(a):
    if a.ndim == 0:
        return f"np.array({literal(a.item())}, dtype='{a.dtype}')"
    return f"np.array({literal(a.tolist())}, dtype='{a.dtype}').reshape({a.shape})"


# ------------------------------------------------------------- the model


class Grp:
    """One storage: the vars that view it share it. frozen: no more writes
    (its sharing with another storage is unspecified); rtol/atol: 0 while
    every value in it is exact."""
    __slots__ = ("frozen", "rtol", "atol")

    def __init__(self, rtol=0.0, atol=0.0):
        self.frozen = False
        self.rtol = rtol
        self.atol = atol


class V:
    __slots__ = ("name", "t", "a", "grp", "expanded")

    def __init__(self, name, t, a, grp, expanded=False):
        self.name, self.t, self.a, self.grp, self.expanded = name, t, a, grp, expanded

    def __repr__(self):
        return self.name

    @property
    def dt(self):
        return self.a.dtype.name

    @property
    def exact(self):
        return self.grp.rtol == 0.0 or not isfloat(self.dt)

    @property
    def writable(self):
        return not self.grp.frozen and not self.expanded


def finite_bounded(a, bound=1e15):
    if a.dtype.kind != "f":
        return True
    return a.size == 0 or (bool(np.all(np.isfinite(a))) and float(np.max(np.abs(a))) < bound)


def maxabs(a):
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64))))


def compare(v, got, where):
    want = v.a
    assert got.dtype == want.dtype, f"{where}: {v.name} dtype {got.dtype} != model {want.dtype}"
    assert got.shape == want.shape, f"{where}: {v.name} shape {got.shape} != {want.shape}"
    if isfloat(v.dt) and not v.exact:
        np.testing.assert_allclose(got, want, rtol=v.grp.rtol, atol=v.grp.atol, equal_nan=True,
                                   err_msg=f"{where}: {v.name} (inexact)")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{where}: {v.name} (exact)")


# --------------------------------------------------------------- op tables

BINARY = {  # name: (numpy function, kind, operator)
    "add": (np.add, "arith", "+"), "sub": (np.subtract, "arith", "-"),
    "mul": (np.multiply, "arith", "*"), "maximum": (np.maximum, "minmax", None),
    "minimum": (np.minimum, "minmax", None), "div": (np.true_divide, "div", "/"),
    "floor_divide": (np.floor_divide, "fdiv", "//"), "remainder": (np.remainder, "fdiv", "%"),
    "pow": (np.power, "pow", "**"),
    "eq": (np.equal, "cmp", "=="), "ne": (np.not_equal, "cmp", "!="),
    "lt": (np.less, "cmp", "<"), "le": (np.less_equal, "cmp", "<="),
    "gt": (np.greater, "cmp", ">"), "ge": (np.greater_equal, "cmp", ">="),
    "logical_and": (np.logical_and, "logical", None),
    "logical_or": (np.logical_or, "logical", None),
    "logical_xor": (np.logical_xor, "logical", None),
    "bitwise_and": (np.bitwise_and, "bitwise", "&"), "bitwise_or": (np.bitwise_or, "bitwise", "|"),
    "bitwise_xor": (np.bitwise_xor, "bitwise", "^"),
    "bitwise_left_shift": (np.left_shift, "shift", "<<"),
    "bitwise_right_shift": (np.right_shift, "shift", ">>"),
}


def binary_types(op, da, db):
    """(compute dtype, result dtype) of op on dtypes da and db, or None where
    eagervm refuses it (TypeError) and the generator must not go."""
    kind = BINARY[op][1]
    ct = promote(da, db)
    if kind in ("arith", "minmax"):
        if op == "sub" and ct == "bool":
            return None
        return ct, ct
    if kind == "div":
        return ct, ct if isfloat(ct) else "float64"
    if kind in ("fdiv", "pow"):
        ct = "int8" if ct == "bool" else ct  # NumPy's bool // bool
        return ct, ct
    if kind in ("cmp", "logical"):
        return ct, "bool"
    if kind == "bitwise":
        return (ct, ct) if not isfloat(ct) else None
    if kind == "shift":
        return (ct, ct) if da in INTS and db in INTS else None
    raise AssertionError(op)


def binary_ok(op, ct, a, b):
    """Value preconditions: no int ** negative, no float division by zero
    (the sign of a zero would decide inf or -inf), no negative shifts."""
    kind = BINARY[op][1]
    bb = np.asarray(b)
    if kind == "pow":
        if not isfloat(ct):
            return bb.size == 0 or int(bb.min()) >= 0
        aa = np.asarray(a)
        return not (np.any(aa == 0) and np.any(bb < 0))
    if kind in ("div", "fdiv") and isfloat(ct):
        return not np.any(bb == 0)
    if kind == "shift":
        return bb.size == 0 or int(bb.min()) >= 0
    return True


def ref_binary(op, a, b, ct, out):
    fn = BINARY[op][0]
    with np.errstate(all="ignore"):
        r = fn(np.asarray(a).astype(ct), np.asarray(b).astype(ct))
    return np.asarray(r).astype(out)


def gelu_ref(x):
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return x * 0.5 * (1 + erf(x / math.sqrt(2)))


UNARY_FLOAT = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "gelu": gelu_ref,
}
UNARY_SAME = {"neg": np.negative, "abs": np.abs, "relu": lambda x: np.where(x < 0, 0, x).astype(
    x.dtype), "bitwise_not": np.invert, "logical_not": np.logical_not}
UNARY = list(UNARY_FLOAT) + list(UNARY_SAME) + ["clamp"]


def ref_unary_float(op, a):
    out = float_of(a.dtype.name)
    x = a.astype(np.float32 if out == "float32" and a.dtype.name == "float32" else np.float64)
    with np.errstate(all="ignore"):
        return np.asarray(UNARY_FLOAT[op](x)).astype(out)


# --------------------------------------------------------------- strategies

SPECIAL_F = [0.0, 0.5, -1.5, 1e-3, 1e20, -1e20, float("inf"), float("-inf"), float("nan"), 3.25]
SPECIAL_I = {"int32": [0, 1, -1, 2**31 - 1, -2**31, 65536], "int64": [0, -1, 2**62, -2**63,
                                                                       2**63 - 1, 2**32],
             "uint8": [0, 1, 127, 128, 254, 255], "int8": [0, -1, 127, -128, 126, -127],
             "int16": [0, -1, 255, 256, 32767, -32768]}
SCALARS = st.one_of(st.booleans(), st.integers(-4, 4),
                    st.sampled_from([0.5, -1.5, 2.0, 0.25, 3.0, -2.0]))


def shapes(max_dims=3):
    return st.lists(st.integers(0, 4), min_size=0, max_size=max_dims).map(tuple)


def values(dt, n, special):
    if dt == "bool":
        elem = st.booleans()
    elif dt in INTS:
        elem = st.integers(0 if dt == "uint8" else -9, 9)
        if special:
            elem = st.one_of(elem, st.sampled_from(SPECIAL_I[dt]))
    else:
        elem = st.one_of(st.integers(-8, 8).map(float),
                         st.integers(-16, 16).map(lambda k: k / 4))
        if special:
            elem = st.one_of(elem, st.sampled_from(SPECIAL_F))
    return st.lists(elem, min_size=n, max_size=n)


def compatible_shape(data, shape, into):
    """A shape that broadcasts with `shape` (to exactly `shape` when into)."""
    n = len(shape)
    k = data.draw(st.integers(0, n), label="ndim")
    out = [data.draw(st.sampled_from([d, 1])) for d in shape[n - k:]]
    if not into and k == n and data.draw(st.integers(0, 4), label="extra dim") == 0:
        out = [data.draw(st.integers(1, 3))] + out
    return tuple(out)


def factor_shape(data, n):
    """A random shape with n elements (ints up to 3 dims), maybe with a -1."""
    if n == 0:
        dims = data.draw(st.sampled_from([(0,), (0, 2), (3, 0), (1, 0, 2)]))
    else:
        dims, rest = [], n
        for _ in range(data.draw(st.integers(0, 2))):
            divs = [d for d in range(1, rest + 1) if rest % d == 0]
            d = data.draw(st.sampled_from(divs))
            dims.append(d)
            rest //= d
        dims.append(rest)
    dims = list(data.draw(st.permutations(dims)))
    if dims and n > 0 and data.draw(st.booleans()):
        dims[data.draw(st.integers(0, len(dims) - 1))] = -1
    return tuple(dims)


def basic_key(data, shape):
    """A basic index: ints, slices with either sign of step, None, maybe one
    Ellipsis."""
    nd = len(shape)
    k = data.draw(st.integers(0, nd), label="dims indexed")
    before = data.draw(st.integers(0, k), label="before ...") \
        if data.draw(st.booleans(), label="ellipsis") else None
    dims = list(range(k)) if before is None else \
        list(range(before)) + list(range(nd - (k - before), nd))
    key = []
    for pos, i in enumerate(dims):
        if pos == before:
            key.append(Ellipsis)
        if data.draw(st.integers(0, 7), label="None") == 0:
            key.append(None)
        d = shape[i]
        if data.draw(st.integers(0, 2), label="int index") == 0 and d > 0:
            key.append(data.draw(st.integers(-d, d - 1)))
        else:
            lo = data.draw(st.one_of(st.none(), st.integers(-d - 1, d + 1)))
            hi = data.draw(st.one_of(st.none(), st.integers(-d - 1, d + 1)))
            step = data.draw(st.one_of(st.none(), st.integers(1, 3),
                                       st.integers(-3, -1)))
            key.append(slice(lo, hi, step))
    if before is not None and before == len(dims):
        key.append(Ellipsis)
    return tuple(key)


def key_literal(key):
    def one(k):
        if k is Ellipsis:
            return "..."
        if isinstance(k, slice):
            s = ("" if k.start is None else str(k.start)) + ":" + \
                ("" if k.stop is None else str(k.stop))
            return s + (":" + str(k.step) if k.step is not None else "")
        return repr(k)
    return "[" + ", ".join(one(k) for k in key) + ("," if len(key) == 1 and
                                                  key[0] is None else "") + "]" \
        if key else "[()]"


def np_key(key):
    """NumPy returns a scalar for a full integer index; add an Ellipsis so it
    returns a 0-d view, as eagervm does."""
    return key if Ellipsis in key else key + (Ellipsis,)


# ------------------------------------------------------------ the machine


class Program(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.vars = []
        self.n = 0
        self.threads = []
        self.ctx = []  # entered asyncs.thread contexts, innermost last

    # -------------------------------------------------------------- helpers

    def emit(self, line):
        note("    " * len(self.ctx) + line)

    def fresh(self):
        self.n += 1
        return f"v{self.n}"

    def add(self, t, a, grp, line, expanded=False):
        name = line.split(" = ", 1)[0]
        self.emit(line)
        assert isinstance(a, np.ndarray), f"model of {line} is not an array"
        
        assert t.dtype.name == a.dtype.name, f"{line}: dtype {t.dtype.name} != {a.dtype}"
        assert tuple(t.shape) == a.shape, f"{line}: shape {t.shape} != {a.shape}"
        v = V(name, t, a, grp, expanded)
        self.vars.append(v)
        return v

    def pick(self, data, pred=lambda v: True, label="var"):
        c = [v for v in self.vars if pred(v)]
        if not c:
            return None
        return data.draw(st.sampled_from(c), label=label)

    def new_array(self, data, shape=None, dtypes=DTYPES):
        if shape is None:
            shape = data.draw(shapes(), label="shape")
        dt = data.draw(st.sampled_from(list(dtypes)), label="dtype")
        n = int(np.prod(shape, dtype=np.int64))
        special = data.draw(st.integers(0, 5), label="special") == 0
        vals = data.draw(values(dt, n, special), label="values")
        return np.array(vals, dtype=dt).reshape(shape)

    def make(self, data, shape=None, dtypes=DTYPES):
        a = self.new_array(data, shape, dtypes)
        name = self.fresh()
        return self.add(ev.tensor(a), a.copy(), Grp(), f"{name} = ev.tensor({arr_literal(a)})")

    def operand(self, data, shape, into=False, scalar=True, pred=lambda v: True):
        """A second operand for `shape`: a var that broadcasts with it, a
        Python scalar, or a new tensor of a compatible shape."""
        c = data.draw(st.integers(0, 3), label="operand kind")
        if c == 0 and scalar:
            return data.draw(SCALARS, label="scalar")
        if c <= 2:
            def fits(v):
                try:
                    r = np.broadcast_shapes(v.a.shape, shape)
                except ValueError:
                    return False
                return pred(v) and (r == tuple(shape) if into else True)
            v = self.pick(data, fits)
            if v is not None:
                return v
        return self.make(data, compatible_shape(data, shape, into))

    @staticmethod
    def val(x):
        return (x.t, x.a) if isinstance(x, V) else (x, x)

    @staticmethod
    def text(x):
        return x.name if isinstance(x, V) else repr(x)

    @staticmethod
    def dtype_of(x, other_dt):
        return x.dt if isinstance(x, V) else scalar_dtype(x, other_dt)

    @staticmethod
    def err(*xs):
        vs = [x for x in xs if isinstance(x, V)]
        return max((v.grp.rtol for v in vs), default=0.0), max((v.grp.atol for v in vs),
                                                               default=0.0)

    # ---------------------------------------------------------------- rules

    @initialize(n=st.integers(2, 3))
    def make_threads(self, n):
        self.threads = [asyncs.Thread() for _ in range(n)]
        note(f"T = [ev.asyncs.Thread() for _ in range({n})]")

    @precondition(lambda self: len(self.vars) < MAX_VARS)
    @rule(data=st.data())
    def new_tensor(self, data):
        self.make(data)

    @precondition(lambda self: len(self.vars) < MAX_VARS)
    @rule(data=st.data())
    def new_full(self, data):
        shape = data.draw(shapes())
        dt = data.draw(st.sampled_from(DTYPES))
        fill = data.draw(st.sampled_from({"bool": [True, False]}.get(dt, [0, 1, -3, 7])))
        name = self.fresh()
        # -3 into uint8 wraps to 253, as a cast does (NumPy's astype).
        a = np.full(shape, np.array(fill).astype(dt), dtype=dt)
        self.add(ev.full(shape, fill, dtype=getattr(ev, dt)), a, Grp(),
                 f"{name} = ev.full({shape}, {fill!r}, dtype=ev.{dt})")

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS)
    @rule(data=st.data(), op=st.sampled_from(sorted(BINARY)), form=st.integers(0, 3))
    def binary(self, data, op, form):
        a = self.pick(data)
        b = self.operand(data, a.a.shape)
        types = binary_types(op, a.dt, self.dtype_of(b, a.dt))
        if types is None:
            return
        ct, out = types
        kind = BINARY[op][1]
        if kind != "minmax" and not (a.exact and (not isinstance(b, V) or b.exact)):
            return
        swap = not isinstance(b, V) and form == 3 and BINARY[op][2] is not None
        lhs, rhs = (b, a) if swap else (a, b)
        if not binary_ok(op, ct, self.val(lhs)[1], self.val(rhs)[1]):
            return
        want = ref_binary(op, self.val(lhs)[1], self.val(rhs)[1], ct, out)
        name = self.fresh()
        sym = BINARY[op][2]
        if swap or (form == 2 and sym):
            t = eval(f"L {sym} R", {"L": self.val(lhs)[0], "R": self.val(rhs)[0]})
            line = f"{name} = {self.text(lhs)} {sym} {self.text(rhs)}"
        elif form == 1:
            t = getattr(a.t, op)(self.val(b)[0])
            line = f"{name} = {a.name}.{op}({self.text(b)})"
        else:
            t = getattr(ev, op)(a.t, self.val(b)[0])
            line = f"{name} = ev.{op}({a.name}, {self.text(b)})"
        rtol, atol = self.err(a, b)
        if kind == "pow" and isfloat(out):
            rtol, atol = R[out], R[out]
        if rtol and out in FLOATS:
            rtol = max(rtol, R[out])
        self.add(t, want, Grp(rtol, atol), line)

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS)
    @rule(data=st.data(), op=st.sampled_from(UNARY), method=st.booleans())
    def unary(self, data, op, method):
        a = self.pick(data)
        dt = a.dt
        name = self.fresh()
        if op == "clamp":
            if dt == "bool":
                return
            if dt in INTS:
                lo, hi = data.draw(st.one_of(st.none(), st.integers(-5, 5))), \
                    data.draw(st.one_of(st.none(), st.integers(-5, 5)))
                info = np.iinfo(dt)  # bounds past the dtype's range saturate
                mlo = None if lo is None else min(max(lo, info.min), info.max)
                mhi = None if hi is None else min(max(hi, info.min), info.max)
            else:
                lo, hi = data.draw(st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 2.0]))), \
                    data.draw(st.one_of(st.none(), st.sampled_from([-1.0, 1.0, 4.5])))
                mlo, mhi = lo, hi
            if lo is None and hi is None:
                return
            w = a.a
            if mlo is not None:
                w = np.where(w < mlo, np.asarray(mlo, dtype=dt), w)
            if mhi is not None:
                w = np.where(w > mhi, np.asarray(mhi, dtype=dt), w)
            t = ev.clamp(a.t, lo, hi) if not method else a.t.clamp(lo, hi)
            line = f"{name} = ev.clamp({a.name}, {lo!r}, {hi!r})"
            self.add(t, np.asarray(w, dtype=dt), Grp(a.grp.rtol, a.grp.atol), line)
            return
        if op in UNARY_FLOAT:
            if not a.exact or (op == "rsqrt" and np.any(a.a == 0)):
                return
            want = ref_unary_float(op, a.a)
            grp = Grp(R[want.dtype.name], R[want.dtype.name])
        else:
            if dt == "bool" and op in ("neg", "relu"):
                return
            if op == "bitwise_not" and isfloat(dt):
                return
            if op == "logical_not" and not a.exact:
                return
            want = np.asarray(UNARY_SAME[op](a.a))
            grp = Grp(a.grp.rtol, a.grp.atol) if op != "logical_not" else Grp()
        t = getattr(a.t, op)() if method else getattr(ev, op)(a.t)
        line = f"{name} = {a.name}.{op}()" if method else f"{name} = ev.{op}({a.name})"
        self.add(t, want, grp, line)

    # ------------------------------------------------------------ in place

    @precondition(lambda self: any(v.writable for v in self.vars))
    @rule(data=st.data(), op=st.sampled_from(sorted(BINARY)), operator=st.booleans())
    def inplace_binary(self, data, op, operator):
        a = self.pick(data, lambda v: v.writable, "target")
        b = self.operand(data, a.a.shape, into=True)
        types = binary_types(op, a.dt, self.dtype_of(b, a.dt))
        if types is None or not np.can_cast(types[1], a.dt, "same_kind"):
            return
        ct, out = types
        if BINARY[op][1] != "minmax" and not (a.exact and (not isinstance(b, V) or b.exact)):
            return
        if not binary_ok(op, ct, a.a, self.val(b)[1]):
            return
        if BINARY[op][1] == "pow" and isfloat(out):
            return  # an inexact result in a storage views may still read exactly
        want = ref_binary(op, a.a, self.val(b)[1], ct, out)
        sym = BINARY[op][2]
        if operator and sym and BINARY[op][1] not in ("cmp",):
            line = f"{a.name} {sym}= {self.text(b)}"
            t = a.t
            exec(f"t {sym}= B", {"B": self.val(b)[0]}, ns := {"t": t})
            assert ns["t"] is t, f"{line}: the in-place operator returned a new object"
        else:
            line = f"{a.name}.{op}_({self.text(b)})"
            r = getattr(a.t, op + "_")(self.val(b)[0])
            assert r is a.t, f"{line} did not return self"
        self.emit(line)
        a.a[...] = want.astype(a.dt)
        rtol, atol = self.err(b)
        a.grp.rtol, a.grp.atol = max(a.grp.rtol, rtol), max(a.grp.atol, atol)

    @precondition(lambda self: any(v.writable for v in self.vars))
    @rule(data=st.data(), op=st.sampled_from(["abs", "neg", "relu", "exp", "sqrt", "sin",
                                              "tanh", "sigmoid", "logical_not", "bitwise_not",
                                              "clamp"]))
    def inplace_unary(self, data, op):
        a = self.pick(data, lambda v: v.writable, "target")
        dt = a.dt
        if op in UNARY_FLOAT:
            if not isfloat(dt) or not a.exact:
                return
            want = ref_unary_float(op, a.a)
            r = getattr(a.t, op + "_")()
            a.grp.rtol, a.grp.atol = max(a.grp.rtol, R[dt]), max(a.grp.atol, R[dt])
            line = f"{a.name}.{op}_()"
        elif op == "clamp":
            if dt not in FLOATS:
                return
            w = np.where(a.a < -1, np.asarray(-1.0, dt), a.a)
            want = np.where(w > 2, np.asarray(2.0, dt), w)
            r = a.t.clamp_(-1.0, 2.0)
            line = f"{a.name}.clamp_(-1.0, 2.0)"
        else:
            if (dt == "bool" and op in ("neg", "relu")) or (op == "bitwise_not" and isfloat(dt)):
                return
            if op == "logical_not" and not a.exact:
                return
            want = UNARY_SAME[op](a.a)
            r = getattr(a.t, op + "_")()
            line = f"{a.name}.{op}_()"
        assert r is a.t, f"{line} did not return self"
        self.emit(line)
        a.a[...] = np.asarray(want).astype(dt)

    @precondition(lambda self: any(v.writable for v in self.vars))
    @rule(data=st.data(), how=st.integers(0, 4))
    def write(self, data, how):
        """Writes through a view: setitem with a basic key, a tensor index or
        a mask; copy_; fill_."""
        a = self.pick(data, lambda v: v.writable, "target")
        shape = a.a.shape
        if how == 3:
            s = data.draw(SCALARS)
            a.t.fill_(s)
            self.emit(f"{a.name}.fill_({s!r})")
            a.a[...] = np.array(s).astype(a.dt)  # -3 into uint8 wraps, as a cast
            return
        if how == 2:
            key, sub = "copy", shape
        elif how == 1 and a.a.ndim >= 1 and shape[0] > 0:
            rows = data.draw(st.lists(st.integers(0, shape[0] - 1), unique=True, max_size=4))
            if data.draw(st.booleans()):
                key = ev.tensor(np.array(rows, dtype=np.int64))
                nkey, ktext = np.array(rows, dtype=np.int64), f"ev.tensor({rows!r})"
            else:
                m = np.zeros(shape[0], dtype=bool)
                m[rows] = True
                key, nkey, ktext = ev.tensor(m), m, f"ev.tensor({m.tolist()!r})"
            sub = a.a[nkey].shape
        else:
            k = basic_key(data, shape)
            key, nkey, ktext = k, np_key(k), key_literal(k)
            sub = a.a[nkey].shape
        b = self.operand(data, sub, into=True)
        bt, ba = self.val(b)
        if isinstance(b, V):
            ba = ba.copy()  # NumPy reads it before writing, as eagervm does
            if isfloat(b.dt) and not isfloat(a.dt):
                if not b.exact or not finite_bounded(ba, 2.0**31):
                    return
        elif isinstance(b, float) and not isfloat(a.dt):
            b = bt = ba = int(b)
        if not isinstance(b, V):
            ba = np.array(ba).astype(a.dt)  # a Python int wraps as a cast does
        if key == "copy":
            r = a.t.copy_(bt)
            assert r is a.t
            self.emit(f"{a.name}.copy_({self.text(b)})")
            a.a[...] = ba
        else:
            a.t[key] = bt
            self.emit(f"{a.name}{ktext if isinstance(key, tuple) else '[' + ktext + ']'}"
                      f" = {self.text(b)}")
            with np.errstate(all="ignore"):
                a.a[nkey] = ba
        rtol, atol = self.err(b)
        a.grp.rtol, a.grp.atol = max(a.grp.rtol, rtol), max(a.grp.atol, atol)

    # --------------------------------------------------------------- views

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS)
    @rule(data=st.data(), how=st.sampled_from(["index", "index", "reshape", "view", "flatten",
                                               "transpose", "permute", "T", "unsqueeze",
                                               "squeeze", "expand", "contiguous", "clone",
                                               "tindex", "mask", "cast"]))
    def view(self, data, how):
        a = self.pick(data)
        t, x, shape, nd = a.t, a.a, a.a.shape, a.a.ndim
        name = self.fresh()
        grp, expanded = a.grp, a.expanded
        if how == "index":
            key = basic_key(data, shape)
            r, w = t[key], x[np_key(key)]
            line = f"{name} = {a.name}{key_literal(key)}"
        elif how in ("reshape", "view", "flatten"):
            contig = t.is_contiguous()
            if how == "view" and not contig:
                return
            new = (-1,) if how == "flatten" else factor_shape(data, x.size)
            if how == "flatten":
                r, line = t.flatten(), f"{name} = {a.name}.flatten()"
            elif how == "view":
                r, line = t.view(*new), f"{name} = {a.name}.view{new}"
            else:
                r, line = t.reshape(new), f"{name} = {a.name}.reshape({new})"
            w = x.reshape(new)
            if not (contig and (x.size == 0 or np.shares_memory(w, x))):
                # eagervm copies; whether it could have shared is unspecified
                w = w.copy()
                a.grp.frozen = True
                grp = Grp(a.grp.rtol, a.grp.atol)
                grp.frozen = True
                expanded = False
        elif how == "transpose":
            if nd == 0:
                return
            d0, d1 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
            r, w = t.transpose(d0, d1), np.swapaxes(x, d0, d1)
            line = f"{name} = {a.name}.transpose({d0}, {d1})"
        elif how == "permute":
            perm = tuple(data.draw(st.permutations(range(nd))))
            r, w = t.permute(*perm), x.transpose(perm)
            line = f"{name} = {a.name}.permute{perm if nd != 1 else '(' + str(perm[0]) + ')'}"
        elif how == "T":
            r, w = t.T, x.T
            line = f"{name} = {a.name}.T"
        elif how == "unsqueeze":
            d = data.draw(st.integers(-nd - 1, nd))
            r, w = t.unsqueeze(d), np.expand_dims(x, d)
            line = f"{name} = {a.name}.unsqueeze({d})"
        elif how == "squeeze":
            ones = [i for i in range(nd) if shape[i] == 1]
            if ones and data.draw(st.booleans()):
                d = data.draw(st.sampled_from(ones))
                r, w = t.squeeze(d), np.squeeze(x, d)
                line = f"{name} = {a.name}.squeeze({d})"
            else:
                r, w = t.squeeze(), np.squeeze(x)
                line = f"{name} = {a.name}.squeeze()"
        elif how == "expand":
            new = [data.draw(st.integers(1, 3)) for _ in range(data.draw(st.integers(0, 1)))]
            new += [d if d != 1 else data.draw(st.sampled_from([1, 3, -1])) for d in shape]
            new = tuple(new)
            if not new:
                return
            r = t.expand(*new)
            w = np.broadcast_to(x, tuple(n if n != -1 else 1 for n in new))
            line = f"{name} = {a.name}.expand({new})"
            expanded = True
        elif how == "contiguous":
            r = t.contiguous()
            line = f"{name} = {a.name}.contiguous()"
            if t.is_contiguous():
                w = x[...]
            else:
                w, grp, expanded = np.ascontiguousarray(x).copy(), Grp(a.grp.rtol,
                                                                       a.grp.atol), False
        elif how == "clone":
            r, w = t.clone(), x.copy()
            line = f"{name} = {a.name}.clone()"
            grp, expanded = Grp(a.grp.rtol, a.grp.atol), False
        elif how == "tindex":
            if nd == 0 or (shape[0] == 0 and data.draw(st.booleans())):
                return
            ix = self.new_index(data, (2,) if data.draw(st.booleans()) else (), shape[0], True)
            r, w = t[ix.t], np.array(x[ix.a])
            line = f"{name} = {a.name}[{ix.name}]"
            grp, expanded = Grp(a.grp.rtol, a.grp.atol), False
        elif how == "mask":
            if nd == 0:
                return
            m = self.operand(data, shape, into=True, scalar=False,
                             pred=lambda v: v.dt == "bool" and v.a.shape == shape)
            if not isinstance(m, V) or m.dt != "bool" or m.a.shape != shape:
                return
            r, w = t[m.t], np.array(x[m.a])
            line = f"{name} = {a.name}[{m.name}]"
            grp, expanded = Grp(a.grp.rtol, a.grp.atol), False
        else:  # cast
            dt = data.draw(st.sampled_from(DTYPES))
            if isfloat(a.dt) and not isfloat(dt):
                # Within int32 the narrow ints wrap as NumPy's x86 casts do.
                bound = 2.0**62 if dt == "int64" else 2.0**31
                if not a.exact or not finite_bounded(x, bound):
                    return
            r = t.to(getattr(ev, dt)) if data.draw(st.booleans()) else ev.cast(t, getattr(ev, dt))
            w = x.astype(dt)
            line = f"{name} = {a.name}.to(ev.{dt})"
            rtol = max(a.grp.rtol, R[dt]) if a.grp.rtol and isfloat(dt) else 0.0
            grp, expanded = Grp(rtol, a.grp.atol if rtol else 0.0), False
        self.add(r, w, grp, line, expanded)

    def new_index(self, data, shape, size, negative):
        lo = -size if negative else 0
        n = int(np.prod(shape, dtype=np.int64))
        if size == 0 and n:
            shape, n = (0,), 0
        vals = data.draw(st.lists(st.integers(lo, max(size - 1, 0)), min_size=n, max_size=n))
        dts = ["int64", "int32", "int16"] + (["int8"] if size <= 128 else []) + \
            (["uint8"] if size <= 256 and not negative else [])
        dt = data.draw(st.sampled_from(dts))
        a = np.array(vals, dtype=dt).reshape(shape)
        name = self.fresh()
        return self.add(ev.tensor(a), a.copy(), Grp(), f"{name} = ev.tensor({arr_literal(a)})")

    # ---------------------------------------------------------- reductions

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS)
    @rule(data=st.data(), op=st.sampled_from(["sum", "prod", "mean", "max", "min", "argmax",
                                              "argmin", "var", "std", "softmax",
                                              "log_softmax"]), method=st.booleans())
    def reduce(self, data, op, method):
        a = self.pick(data)
        x, nd, dt = a.a, a.a.ndim, a.dt
        if op in ("mean", "var", "std", "softmax", "log_softmax") and not isfloat(dt):
            return
        if op in ("argmax", "argmin") and not a.exact:
            return
        if op not in ("max", "min") and not a.exact:
            return
        if op in ("softmax", "log_softmax"):
            if nd == 0 or x.size == 0 or not finite_bounded(x, 1e3):
                return
            d = data.draw(st.integers(-nd, nd - 1))
            e = np.exp(x.astype(np.float64) - x.max(axis=d, keepdims=True))
            want = e / e.sum(axis=d, keepdims=True)
            if op == "log_softmax":
                want = np.log(want)
            want = want.astype(dt)
            args, kw = (d,), {}
            rtol, atol = R[dt] * RED, R[dt] * RED * max(1.0, maxabs(x))
        else:
            if op in ("argmax", "argmin") or data.draw(st.integers(0, 3)) == 0:
                dim = None if nd == 0 or data.draw(st.booleans()) else \
                    data.draw(st.integers(-nd, nd - 1))
            else:
                dim = tuple(data.draw(st.lists(st.integers(-nd, nd - 1) if nd else st.nothing(),
                                               max_size=nd, unique_by=lambda d: d % nd)))
                if len(dim) == 1 and data.draw(st.booleans()):
                    dim = dim[0]
            keepdim = data.draw(st.booleans())
            axes = range(nd) if dim is None else (dim,) if isinstance(dim, int) else dim
            n = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
            if n == 0 and op in ("max", "min", "argmax", "argmin") and x.size == 0 or \
                    n == 0 and op in ("max", "min", "argmax", "argmin") and dim is None:
                return
            if n == 0 and op in ("max", "min", "argmax", "argmin"):
                return
            if isfloat(dt) and op in ("sum", "prod", "mean", "var", "std") and \
                    not finite_bounded(x, 1e6):
                return
            if op == "prod" and isfloat(dt) and maxabs(x) ** max(n, 1) > 1e30:
                return
            npdim = dim if dim is not None else None
            kw = {"dim": dim, "keepdim": keepdim}
            args = ()
            with np.errstate(all="ignore"):
                if op in ("sum", "prod"):
                    out = "int64" if not isfloat(dt) else dt
                    want = getattr(np, op)(x, axis=npdim, keepdims=keepdim, dtype=out)
                elif op in ("max", "min"):
                    want = getattr(np, op)(x, axis=npdim, keepdims=keepdim)
                elif op in ("argmax", "argmin"):
                    want = getattr(np, op)(x, axis=npdim, keepdims=keepdim and dim is not None)
                    if keepdim and dim is None:
                        want = np.asarray(want).reshape((1,) * nd)
                elif op == "mean":
                    want = np.mean(x.astype(np.float64), axis=npdim, keepdims=keepdim)
                else:
                    corr = data.draw(st.sampled_from([None, 0, 1]))
                    if corr is not None:
                        kw["correction"] = corr
                    want = getattr(np, op)(x.astype(np.float64), axis=npdim, keepdims=keepdim,
                                           ddof=1 if corr is None else corr)
            want = np.asarray(want).astype("int64" if op.startswith("arg") else
                                           want.dtype if op in ("sum", "prod") else dt)
            m = maxabs(x)
            if op in ("max", "min"):
                rtol, atol = a.grp.rtol, a.grp.atol
            elif not isfloat(dt) or op.startswith("arg"):
                rtol = atol = 0.0
            elif op == "sum":
                rtol, atol = R[dt] * RED, R[dt] * RED * max(n, 1) * max(m, 1.0)
            elif op == "prod":
                rtol, atol = R[dt] * RED * max(n, 1), R[dt]
            elif op == "mean":
                rtol, atol = R[dt] * RED, R[dt] * RED * max(m, 1.0)
            elif op == "var":
                rtol, atol = R[dt] * RED, R[dt] * RED * max(m, 1.0) ** 2 * 4
            else:
                rtol, atol = R[dt] * RED, math.sqrt(R[dt] * RED * 4) * max(m, 1.0)
        name = self.fresh()
        kwtext = "".join(f", {k}={v!r}" for k, v in kw.items())
        argtext = "".join(f", {v!r}" for v in args)
        if method:
            r = getattr(a.t, op)(*args, **kw)
            line = f"{name} = {a.name}.{op}({(argtext + kwtext)[2:]})"
        else:
            r = getattr(ev, op)(a.t, *args, **kw)
            line = f"{name} = ev.{op}({a.name}{argtext}{kwtext})"
        self.add(r, np.asarray(want), Grp(rtol, atol), line)

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS - 1)
    @rule(data=st.data(), operator=st.booleans())
    def matmul(self, data, operator):
        a = self.pick(data, lambda v: v.a.ndim >= 1 and v.dt != "bool" and v.exact)
        if a is None:
            return
        k = a.a.shape[-1]
        if a.a.ndim == 1 or data.draw(st.booleans()):
            bshape = (k,) if data.draw(st.booleans()) else (k, data.draw(st.integers(0, 4)))
        else:
            bshape = (k, data.draw(st.integers(0, 4)))
        if a.a.ndim >= 2 and len(bshape) == 2 and data.draw(st.integers(0, 2)) == 0:
            bshape = compatible_shape(data, a.a.shape[:-2], False) + bshape
        b = self.pick(data, lambda v: v.a.shape == bshape and v.dt != "bool" and v.exact)
        if b is None or data.draw(st.booleans()):
            b = self.make(data, bshape, ["uint8", "int8", "int16", "int32", "int64", "float32",
                                         "float64"])
        ct = promote(a.dt, b.dt)
        if isfloat(ct) and not (finite_bounded(a.a, 1e6) and finite_bounded(b.a, 1e6)):
            return
        want = np.matmul(a.a.astype(ct), b.a.astype(ct))
        name = self.fresh()
        if operator:
            r, line = a.t @ b.t, f"{name} = {a.name} @ {b.name}"
        else:
            r, line = ev.matmul(a.t, b.t), f"{name} = ev.matmul({a.name}, {b.name})"
        if isfloat(ct):
            rtol = R[ct] * RED
            atol = rtol * max(k, 1) * max(maxabs(a.a), 1.0) * max(maxabs(b.a), 1.0)
        else:
            rtol = atol = 0.0
        self.add(r, np.asarray(want), Grp(rtol, atol), line)

    # ----------------------------------------------------------- selection

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS - 2)
    @rule(data=st.data())
    def where(self, data):
        c = self.pick(data, lambda v: v.dt == "bool")
        if c is None:
            c = self.make(data, dtypes=["bool"])
        x = self.operand(data, c.a.shape)
        shape = np.broadcast_shapes(c.a.shape, self.val(x)[1].shape if isinstance(x, V) else ())
        y = self.operand(data, shape, scalar=isinstance(x, V))
        if isinstance(x, V) and isinstance(y, V):
            out = promote(x.dt, y.dt)
        elif isinstance(x, V):
            out = promote(x.dt, scalar_dtype(y, x.dt))
        else:
            out = promote(y.dt, scalar_dtype(x, y.dt))
        want = np.where(c.a, np.asarray(self.val(x)[1]).astype(out),
                        np.asarray(self.val(y)[1]).astype(out))
        name = self.fresh()
        if data.draw(st.booleans()) and isinstance(x, V):
            r = x.t.where(c.t, self.val(y)[0])
            line = f"{name} = {x.name}.where({c.name}, {self.text(y)})"
        else:
            r = ev.where(c.t, self.val(x)[0], self.val(y)[0])
            line = f"{name} = ev.where({c.name}, {self.text(x)}, {self.text(y)})"
        self.add(r, np.asarray(want), Grp(*self.err(x, y)), line)

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS - 3)
    @rule(data=st.data(), stack=st.booleans())
    def cat(self, data, stack):
        a = self.pick(data)
        shape, nd = a.a.shape, a.a.ndim
        if nd == 0 and not stack:
            return
        d = data.draw(st.integers(-nd - 1, nd) if stack else st.integers(-nd, nd - 1))
        parts = [a]
        for _ in range(data.draw(st.integers(0, 2))):
            s = list(shape)
            if not stack:
                s[d] = data.draw(st.integers(0, 3))
            s = tuple(s)
            p = self.pick(data, lambda v: v.a.shape == s)
            parts.append(p if p is not None and data.draw(st.booleans()) else self.make(data, s))
        ts, xs = [p.t for p in parts], [p.a for p in parts]
        want = np.stack(xs, d) if stack else np.concatenate(xs, d)
        fn = "stack" if stack else data.draw(st.sampled_from(["cat", "concat", "concatenate"]))
        name = self.fresh()
        r = getattr(ev, fn)(ts, d)
        self.add(r, want, Grp(*self.err(*parts)),
                 f"{name} = ev.{fn}([{', '.join(p.name for p in parts)}], {d})")

    @precondition(lambda self: self.vars and len(self.vars) < MAX_VARS - 1)
    @rule(data=st.data(), op=st.sampled_from(["index_select", "gather", "take"]),
          method=st.booleans())
    def select(self, data, op, method):
        a = self.pick(data)
        x, nd = a.a, a.a.ndim
        if op == "take":
            ishape = data.draw(shapes(2))
            ix = self.new_index(data, ishape, x.size, True)
            want = np.take(x, ix.a) if x.size else np.zeros(ix.a.shape, x.dtype)
            args = (ix.t,)
            text = ix.name
        else:
            if nd == 0:
                return
            d = data.draw(st.integers(-nd, nd - 1))
            if op == "index_select":
                ix = self.new_index(data, (data.draw(st.integers(0, 4)),), x.shape[d], False)
                want = np.take(x, ix.a, axis=d) if x.shape[d] else \
                    np.zeros(x.shape[:d % nd] + (0,) + x.shape[d % nd + 1:], x.dtype)
            else:
                ishape = list(x.shape)
                ishape[d] = data.draw(st.integers(0, 3)) if x.shape[d] else 0
                ix = self.new_index(data, tuple(ishape), x.shape[d], False)
                if x.shape[d] == 0 and ix.a.size:
                    return
                want = np.take_along_axis(x, ix.a.astype(np.int64), d) if ix.a.size else \
                    np.zeros(ix.a.shape, x.dtype)
            args = (d, ix.t)
            text = f"{d}, {ix.name}"
        name = self.fresh()
        if method:
            r, line = getattr(a.t, op)(*args), f"{name} = {a.name}.{op}({text})"
        else:
            r, line = getattr(ev, op)(a.t, *args), f"{name} = ev.{op}({a.name}, {text})"
        self.add(r, np.asarray(want), Grp(a.grp.rtol, a.grp.atol), line)

    # ----------------------------------------- threads, syncs and deletions

    @precondition(lambda self: len(self.ctx) < 3)
    @rule(k=st.integers(0, 2))
    def enter_thread(self, k):
        k %= len(self.threads)
        cm = asyncs.thread(self.threads[k])
        self.emit(f"with ev.asyncs.thread(T[{k}]):")
        assert cm.__enter__() is self.threads[k]
        self.ctx.append((k, cm))

    @precondition(lambda self: self.ctx)
    @rule()
    def exit_thread(self):
        k, cm = self.ctx.pop()
        cm.__exit__(None, None, None)
        self.emit(f"pass  # end of with T[{k}]")

    @rule(k=st.integers(0, 2))
    def recycle_thread(self, k):
        """Drops a Thread whose work may still be queued and makes another."""
        k %= len(self.threads)
        if any(j == k for j, _ in self.ctx):
            return
        self.threads[k] = None
        self.threads[k] = asyncs.Thread()
        self.emit(f"T[{k}] = ev.asyncs.Thread()")

    @precondition(lambda self: self.vars)
    @rule(data=st.data(), how=st.sampled_from(["numpy", "array", "tolist", "item"]))
    def sync_point(self, data, how):
        v = self.pick(data)
        if how == "numpy":
            got = v.t.numpy()
        elif how == "array":
            got = np.asarray(v.t)
        elif how == "tolist":
            got = np.array(v.t.tolist(), dtype=v.dt).reshape(v.a.shape)
        else:
            if v.a.size != 1:
                return
            got = np.array(v.t.item(), dtype=v.dt).reshape(v.a.shape)
        self.emit(f"check({v.name})  # {how}")
        compare(v, got, f"sync point {how}")

    @rule()
    def synchronize(self):
        ev.synchronize()
        self.emit("ev.synchronize()")

    @precondition(lambda self: self.vars)
    @rule(data=st.data())
    def delete(self, data):
        v = self.pick(data)
        self.vars.remove(v)
        self.emit(f"del {v.name}")
        del v

    def teardown(self):
        while self.ctx:
            self.exit_thread()
        try:
            for v in self.vars:
                self.emit(f"check({v.name})")
                compare(v, v.t.numpy(), "end")
        finally:
            self.vars = []
            self.threads = []


Program.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
    derandomize=not LONG, database=None if not LONG else settings.default.database,
    suppress_health_check=list(HealthCheck), print_blob=bool(LONG))
test_differential_programs = Program.TestCase
