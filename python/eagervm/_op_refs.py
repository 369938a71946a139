"""NumPy references, input domains and dtype rules of the rows of the op
table (include/eagervm/ops.def): its `ref` column names np.<f> or refs.<f>
(a helper here), `domain` one of DOMAINS, `rule` a rule mirrored by
binary_result and unary_result. Used by the op tests and bench/ops.py; it
needs NumPy, which eagervm itself does not."""
import math

import numpy as np

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
SMALLEST_INT = "int8"  # what bool computes as where a rule wants an integer
FLOATS = ("float32", "float64")


# ------------------------------------------------------------- references

def rsqrt(x):
    return 1 / np.sqrt(x)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def relu(x):
    return np.where(x < 0, np.zeros_like(x), x)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    return _erf(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def reciprocal(x):
    return 1 / x


def gelu(x):
    return (0.5 * x * (1 + _erf(x / math.sqrt(2)))).astype(x.dtype)


# References of the EV_FUNC rows, taking the arguments eagervm takes.

def clamp(x, lo=None, hi=None):
    return np.clip(x, lo, hi).astype(x.dtype)


def argmax(x, dim=None, keepdim=False):
    return np.argmax(x, axis=dim, keepdims=keepdim)


def argmin(x, dim=None, keepdim=False):
    return np.argmin(x, axis=dim, keepdims=keepdim)


def var(x, dim=None, correction=1, keepdim=False):
    return np.var(x, axis=dim, ddof=correction, keepdims=keepdim)


def std(x, dim=None, correction=1, keepdim=False):
    return np.std(x, axis=dim, ddof=correction, keepdims=keepdim)


def softmax(x, dim):
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def log_softmax(x, dim):
    m = np.max(x, axis=dim, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True))


def reshape(x, *shape):
    return np.reshape(x, shape)


def expand(x, *shape):
    return np.broadcast_to(x, shape)


def permute(x, *dims):
    return np.transpose(x, dims)


def squeeze(x, dim=None):
    return np.squeeze(x, axis=dim)


def copy_into(x, src):
    return np.broadcast_to(src, x.shape).astype(x.dtype)


def fill(x, value):
    return np.full_like(x, value)


def _np_dtype(dtype):
    return np.dtype(getattr(dtype, "name", dtype))


def cast(x, dtype):
    return x.astype(_np_dtype(dtype))


def tensor(data, dtype=None):
    return np.array(data, dtype=None if dtype is None else _np_dtype(dtype))


def _size(size):
    return tuple(size[0]) if len(size) == 1 and not np.isscalar(size[0]) else size


def empty(*size, dtype=None):
    return np.empty(_size(size), np.float32 if dtype is None else _np_dtype(dtype))


def zeros(*size, dtype=None):
    return np.zeros(_size(size), np.float32 if dtype is None else _np_dtype(dtype))


def ones(*size, dtype=None):
    return np.ones(_size(size), np.float32 if dtype is None else _np_dtype(dtype))


def full(size, value, dtype=None):
    dt = _np_dtype(dtype) if dtype is not None else (np.float32 if isinstance(value, float)
                                                     else np.int64)
    return np.full(size, value, dt)


def arange(start, end=None, step=1, dtype=None):
    r = np.arange(start, end, step) if end is not None else np.arange(start)
    return r.astype(np.int64 if r.dtype.kind == "i" else np.float32)


def linspace(start, end, steps, dtype=None):
    return np.linspace(start, end, steps, dtype=np.float32 if dtype is None else
                       _np_dtype(dtype))


def eye(n, m=None, dtype=None):
    return np.eye(n, m, dtype=np.float32 if dtype is None else _np_dtype(dtype))


def where_method(x, condition, other):
    return np.where(condition, x, other)


def index_select(x, dim, index):
    return np.take(x, index, axis=dim)


def gather(x, dim, index):
    return np.take_along_axis(x, index, axis=dim)


def take(x, index):
    return np.take(x.reshape(-1), index)


def scatter_add(x, dim, index, src):
    out = x.copy()
    idx = list(np.indices(index.shape))
    idx[dim] = index
    np.add.at(out, tuple(idx), src[tuple(slice(0, n) for n in index.shape)])
    return out


def one_hot(index, num_classes=-1):
    n = int(index.max()) + 1 if num_classes < 0 else num_classes
    return (index[..., None] == np.arange(n)).astype(np.int64)


def cross_entropy(logits, target, reduction="mean"):
    loss = -log_softmax(logits.astype(np.float64), 1)[np.arange(len(target)), target]
    loss = loss.astype(logits.dtype)
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def rand(*size, generator=None, dtype=None):
    return np.zeros(_size(size), np.float32 if dtype is None else _np_dtype(dtype))


def randint(*args, generator=None, dtype=None):
    return np.zeros(args[-1], np.int64 if dtype is None else _np_dtype(dtype))


def rand_like(x, *args, dtype=None, generator=None):
    return np.zeros_like(x)


def randperm(n, generator=None, dtype=None):
    return np.arange(n, dtype=np.int64 if dtype is None else _np_dtype(dtype))


def _scan_dtype(x, dtype):
    if dtype is not None:
        return _np_dtype(dtype)
    return x.dtype if x.dtype.kind == "f" else np.int64


def cumsum(x, dim, dtype=None):
    return np.cumsum(x, axis=dim, dtype=_scan_dtype(x, dtype))


def cumprod(x, dim, dtype=None):
    return np.cumprod(x, axis=dim, dtype=_scan_dtype(x, dtype))


def argsort(x, dim=-1, descending=False, stable=False):
    if descending:
        # A stable sort of the negated keys keeps equal elements in order.
        return np.argsort(-x if x.dtype.kind == "f" else ~x, axis=dim, kind="stable")
    return np.argsort(x, axis=dim, kind="stable")


def sort(x, dim=-1, descending=False, stable=False):
    idx = argsort(x, dim, descending, stable)
    return np.take_along_axis(x, idx, axis=dim), idx


def topk(x, k, dim=-1, largest=True, sorted=True):
    values, idx = sort(x, dim, descending=largest)
    sl = [slice(None)] * x.ndim
    sl[dim] = slice(0, k)
    return values[tuple(sl)], idx[tuple(sl)]


def flip(x, dims):
    return np.flip(x, axis=tuple(dims) if not np.isscalar(dims) else dims)


def roll(x, shifts, dims=None):
    return np.roll(x, shifts, axis=dims)


def unique(x, sorted=True, return_inverse=False, return_counts=False):
    res = np.unique(x.reshape(-1), return_inverse=return_inverse, return_counts=return_counts)
    if not isinstance(res, tuple):
        return res
    res = [res[0]] + [r.astype(np.int64) for r in res[1:]]
    if return_inverse:  # in input's shape, as torch.unique
        res[1] = res[1].reshape(x.shape)
    return tuple(res)


def logsumexp(x, axis=None, keepdims=False):
    # Over no elements: -inf, as PyTorch (the max's initial value).
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def example_namespace(x, xn, ev, tensor):
    """The names an EV_FUNC row's example arguments use: x (the input, on
    the side being called), xn (its NumPy array), ev, and small index
    tensors made by tensor() (ev.tensor, or np.asarray for NumPy)."""
    rows, cols = xn.shape
    g = (np.arange(rows * cols).reshape(rows, cols) * 7 % cols).astype(np.int64)
    return {"x": x, "xn": xn, "ev": ev, "i": tensor(np.array([2, 0, 1], np.int64)),
            "g": tensor(g), "t": tensor((np.arange(rows) * 5 % cols).astype(np.int64))}


# Ops whose values are unset or random (only shape and dtype are compared).
UNSET_VALUES = ("empty", "empty_like", "rand", "randn", "randint", "rand_like", "randn_like",
                "randperm", "uniform_", "normal_")
# Ops that refuse an input whose strides do not allow a view (as PyTorch's
# view; NumPy's reshape copies instead).
NEEDS_VIEWABLE_STRIDES = ("view",)


def reference(row):
    """The callable a row's `ref` names (np.<f> or refs.<f>)."""
    import sys
    return eval(row["ref"], {"np": np, "refs": sys.modules[__name__]})


# ---------------------------------------------------------------- domains

DOMAINS = ("any", "pos", "nonneg", "unit", "open_unit", "ge1", "pow", "shift", "special")


def draw(rng, domain, dtype, shape, operand=0):
    """Random values of dtype in domain (operand 1: the right-hand side of a
    binary op, which pow and shift constrain)."""
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype in FLOATS and domain == "special":
        v = rng.uniform(-4, 4, size=shape)
        pick = rng.integers(0, 5, size=shape)
        v = np.where(pick == 0, np.nan, np.where(pick == 1, np.inf, np.where(
            pick == 2, -np.inf, v)))
        return v.astype(dtype)
    if dtype in FLOATS:
        lo, hi = {"any": (-4, 4), "pos": (0.05, 5), "nonneg": (0, 5), "unit": (-1, 1),
                  "open_unit": (-0.95, 0.95), "ge1": (1, 6),
                  "pow": ((0.1, 3), (-2, 2))[operand], "shift": (-4, 4)}[domain]
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    bits = np.iinfo(dtype).bits
    lo, hi = {"any": (-50, 50), "pos": (1, 50), "nonneg": (0, 50), "unit": (-1, 2),
              "open_unit": (0, 1), "ge1": (1, 50), "pow": ((-6, 7), (0, 6))[operand],
              "shift": ((-1000, 1000), (0, bits))[operand], "special": (-50, 50)}[domain]
    return rng.integers(lo, hi, size=shape).astype(dtype)


# ------------------------------------------------------------ dtype rules

def binary_result(rule, a, b):
    """The result dtype name of a binary op of `rule` on dtypes a and b, or
    None when the rule refuses them (mirrors ops.h)."""
    r = np.result_type(a, b).name
    if rule in ("BITWISE", "SHIFT") and r in FLOATS:
        return None
    if rule == "NUMERIC" and r == "bool":
        return None
    if rule in ("INTLIKE", "SHIFT"):
        return SMALLEST_INT if r == "bool" else r
    if rule == "FLOAT":
        return r if r in FLOATS else "float64"
    if rule in ("COMPARE", "LOGICAL"):
        return "bool"
    return r


def unary_result(rule, x):
    """The result dtype name of a unary op of `rule` on dtype x, or None."""
    if rule == "FLOAT":
        # bool and the narrow integers give float32, int32 and int64 float64.
        return x if x in FLOATS else ("float64" if x in ("int32", "int64") else "float32")
    if rule in ("LOGICAL", "PREDICATE"):
        return "bool"
    if rule == "NUMERIC" and x == "bool":
        return None
    if rule == "BITWISE" and x in FLOATS:
        return None
    return x


def reduce_result(rule, x):
    """The result dtype name of a reduction of `rule` on dtype x, or None."""
    if rule == "LOGICAL":
        return "bool"
    if rule == "FLOAT":
        return unary_result("FLOAT", x)
    if rule == "ACCUMULATE":
        return x if x in FLOATS else "int64"
    if rule == "FLOAT_ONLY":
        return x if x in FLOATS else None
    return x
