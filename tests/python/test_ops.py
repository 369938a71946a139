"""Every op against NumPy: random shapes with broadcasting, non-contiguous
views, zero-size and 0-d tensors, every dtype; scalars mixing as NumPy's weak
scalars; reductions, softmax and matmul."""
import math

import numpy as np
import pytest

import eagervm as ev

NP = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float32": np.float32,
      "float64": np.float64}
DTYPES = list(NP)
RNG = np.random.default_rng(1234)

# (shape a, shape b): broadcasting, 0-d, zero-size
SHAPES = [((3, 4), (3, 4)), ((2, 1, 4), (3, 1)), ((), (5,)), ((0, 3), (1, 3)), ((4,), ()),
          ((), ()), ((2, 3, 1), (1, 1, 5))]


def rand(shape, dtype, positive=False, nonzero=False):
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.startswith("int"):
        lo = 1 if positive or nonzero else -9
        a = RNG.integers(lo, 10, shape).astype(NP[dtype])
        if nonzero:
            a *= np.where(RNG.integers(0, 2, shape) == 0, -1, 1).astype(NP[dtype])
        return a
    a = RNG.standard_normal(shape) * 4
    if positive:
        a = np.abs(a) + 0.5
    elif nonzero:
        a = np.where(np.abs(a) < 0.1, 1.0, a)
    return a.astype(NP[dtype])


def as_ev(a, strided):
    """An eagervm tensor equal to a: contiguous, or a non-contiguous view."""
    if not strided or a.ndim == 0:
        return ev.tensor(a)
    big = np.repeat(a, 2, axis=-1)  # every other column is a
    t = ev.tensor(big)
    return t[..., ::2]


def check(got, want, rtol=1e-5, atol=1e-6):
    got_np = got.numpy()
    assert got_np.dtype == want.dtype, (got_np.dtype, want.dtype)
    assert got_np.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got_np, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got_np, want)


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floor_divide": np.floor_divide, "remainder": np.remainder, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("db", ["bool", "int32", "float32", "float64"])
def test_binary_dtypes(op, da, db):
    if op == "sub" and da == db == "bool":
        with pytest.raises(TypeError):
            ev.sub(ev.tensor([True]), ev.tensor([False]))
        return
    if op in ("floor_divide", "remainder", "pow") and "bool" in (da, db):
        return  # NumPy gives int8 here, a dtype eagervm does not have
    pos = op == "pow"
    a = rand((3, 4), da, positive=pos)
    b = rand((3, 4), db, nonzero=op in ("div", "floor_divide", "remainder"))
    if op == "pow":
        b = (np.abs(b) % 3).astype(b.dtype)
    with np.errstate(all="ignore"):
        want = BINARY[op](a, b)
    check(getattr(ev, op)(ev.tensor(a), ev.tensor(b)), want, rtol=1e-4)


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("strided", [False, True])
def test_binary_shapes(op, shapes, strided):
    dt = "float64" if op != "pow" else "float32"
    a = rand(shapes[0], dt, positive=op == "pow")
    b = rand(shapes[1], dt, nonzero=True)
    with np.errstate(all="ignore"):
        want = BINARY[op](a, b)
    check(getattr(ev, op)(as_ev(a, strided), as_ev(b, strided)), want, rtol=1e-5)


OPERATORS = [
    (lambda x, y: x + y), (lambda x, y: x - y), (lambda x, y: x * y), (lambda x, y: x / y),
    (lambda x, y: x // y), (lambda x, y: x % y), (lambda x, y: x ** y),
    (lambda x, y: x < y), (lambda x, y: x <= y), (lambda x, y: x == y),
    (lambda x, y: x != y), (lambda x, y: x > y), (lambda x, y: x >= y),
]


@pytest.mark.parametrize("k", range(len(OPERATORS)))
@pytest.mark.parametrize("dt", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("scalar", [2, 3.5, True])
def test_operators_with_weak_scalars(k, dt, scalar):
    f = OPERATORS[k]
    a = rand((2, 3), dt, positive=True)
    t = ev.tensor(a)
    # NumPy 1.24's value-based casting, which equals NEP 50's weak scalars here
    # (all values are small), except float scalars with integer arrays where
    # eagervm uses its default float (float32) as the scalar's dtype.
    sa = np.array(scalar, dtype=a.dtype) if not isinstance(scalar, float) or \
        a.dtype.kind == "f" else np.float32(scalar)
    with np.errstate(all="ignore"):
        want = np.asarray(f(a, sa))
        rwant = np.asarray(f(sa, a))
    check(f(t, scalar), want, rtol=1e-5)
    check(f(scalar, t), rwant, rtol=1e-5)


def test_unary_operators_and_inplace():
    a = rand((3, 3), "float32")
    t = ev.tensor(a)
    check(-t, -a)
    check(abs(t), np.abs(a))
    check(+t, a)
    b = np.array([True, False])
    check(~ev.tensor(b), ~b)
    check(ev.tensor(b) & ev.tensor([True, True]), b & True)
    check(ev.tensor(b) | False, b | False)
    check(ev.tensor(b) ^ ev.tensor([True, True]), b ^ True)
    with pytest.raises(TypeError, match="bool and integer tensors only"):
        ev.tensor([1.0, 2.0]) & ev.tensor([1, 2])
    u = t.clone()
    u += 1
    u -= ev.tensor(a)
    u *= 4
    u /= 2
    np.testing.assert_allclose(u.numpy(), np.full((3, 3), 2.0, np.float32), rtol=1e-6)
    assert np.array_equal((ev.ones(2, 3) @ ev.ones(3)).numpy(), np.full(2, 3.0, np.float32))


UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: x * 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2))),
    "logical_not": np.logical_not,
}
FLOAT_OUT = {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "gelu"}


@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,strided", [((3, 5), False), ((2, 6), True), ((), False),
                                           ((0, 4), False)])
def test_unary(op, dt, shape, strided):
    if dt == "bool" and op in ("neg", "relu"):
        with pytest.raises(TypeError):
            getattr(ev, op)(ev.tensor([True]))
        return
    a = rand(shape, dt, positive=op in ("log", "sqrt", "rsqrt"))
    with np.errstate(all="ignore"):
        want = np.asarray(UNARY[op](a.astype(np.float64) if op in FLOAT_OUT else a))
    if op in FLOAT_OUT:
        want = want.astype({"bool": np.float32, "int32": np.float64, "int64": np.float64,
                            "float32": np.float32, "float64": np.float64}[dt])
    else:
        want = want.astype(a.dtype) if op != "logical_not" else want
    t = as_ev(a, strided)
    check(getattr(ev, op)(t), want, rtol=1e-5, atol=1e-6)
    check(getattr(t, op)(), want, rtol=1e-5, atol=1e-6)


def test_clamp_and_cast():
    a = rand((4, 4), "float32")
    check(ev.clamp(ev.tensor(a), -1, 1), np.clip(a, -1, 1))
    check(ev.tensor(a).clamp(min=0), np.clip(a, 0, None))
    with pytest.raises(ValueError):
        ev.clamp(ev.tensor(a))
    for dt in DTYPES:
        check(ev.tensor(a).to(dt), a.astype(NP[dt]))


REDUCE = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min}


@pytest.mark.parametrize("op", list(REDUCE))
@pytest.mark.parametrize("dt", ["int32", "int64", "float32", "float64", "bool"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 2), False),
                                         (-1, True)])
def test_reductions(op, dt, dim, keepdim):
    a = rand((3, 4, 5), dt)
    if op == "prod" and dt != "bool":
        a = (a % 3).astype(a.dtype)
    t = ev.tensor(a)
    if op == "mean" and dt in ("bool", "int32", "int64"):
        with pytest.raises(TypeError):
            ev.mean(t)
        return
    want = np.asarray(REDUCE[op](a, axis=dim, keepdims=keepdim))
    if op in ("sum", "prod") and dt in ("bool", "int32"):
        want = want.astype(np.int64)
    check(getattr(ev, op)(t, dim=dim, keepdim=keepdim), want, rtol=1e-5)
    check(getattr(t[:, ::2], op)(dim, keepdim), np.asarray(REDUCE[op](
        a[:, ::2], axis=dim, keepdims=keepdim)).astype(want.dtype), rtol=1e-5)


def test_arg_var_softmax():
    a = rand((4, 6), "float64")
    t = ev.tensor(a)
    check(ev.argmax(t), np.asarray(np.argmax(a)))
    check(t.argmin(dim=1), np.argmin(a, axis=1))
    check(ev.var(t, dim=0), np.var(a, axis=0, ddof=1))
    check(ev.std(t, correction=0), np.asarray(np.std(a)))
    e = np.exp(a - a.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    check(ev.softmax(t, 1), sm)
    check(t.log_softmax(dim=-1), np.log(sm))
    with pytest.raises(ValueError):
        ev.max(ev.zeros(0, 3), dim=0)
    assert ev.sum(ev.zeros(0)).item() == 0


@pytest.mark.parametrize("sa,sb", [((4, 5), (5, 3)), ((5,), (5,)), ((5,), (5, 2)),
                                   ((2, 4, 5), (5, 3)), ((3, 1, 2, 4), (2, 4, 3)),
                                   ((0, 5), (5, 3))])
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_matmul(sa, sb, dt):
    a, b = rand(sa, dt), rand(sb, dt)
    want = np.asarray(np.matmul(a, b))
    check(ev.matmul(ev.tensor(a), ev.tensor(b)), want, rtol=1e-4, atol=1e-4)
    check(ev.tensor(a) @ ev.tensor(b), want, rtol=1e-4, atol=1e-4)


def test_matmul_transposed_and_errors():
    a = rand((6, 4), "float32")
    t = ev.tensor(a)
    check(t.T @ t, a.T @ a, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        ev.ones(2, 3) @ ev.ones(2, 3)
    with pytest.raises(TypeError):
        ev.tensor([True]) @ ev.tensor([True])


def test_views_ops():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = ev.tensor(a)
    check(t.reshape(4, 6), a.reshape(4, 6))
    check(ev.reshape(t.transpose(0, 2), (-1,)), a.transpose(2, 1, 0).reshape(-1))
    check(t.permute(2, 0, 1), a.transpose(2, 0, 1))
    check(t[:, :1].expand(2, 3, 4), np.broadcast_to(a[:, :1], (2, 3, 4)))
    check(t.unsqueeze(0).squeeze(0), a)
    check(ev.flatten(t), a.ravel())
    check(t.view(6, 4), a.reshape(6, 4))
    check(t.T.contiguous(), np.ascontiguousarray(a.T))
    u = ev.zeros(2, 3)
    u.copy_(ev.tensor([1, 2, 3]))
    u[0].fill_(7)
    check(u, np.array([[7, 7, 7], [1, 2, 3]], np.float32))
