"""The op table (include/eagervm/ops.def) drives these tests: every row is
complete (doc, NumPy reference, domain, benchmark case), is bound as the
table says (function, method, in-place method, aliases, operators, __all__,
docstring), and computes what its NumPy reference computes, for every dtype,
on random shapes, views (transposed, broadcast), zero-size and 0-d tensors;
the dtypes its rule refuses raise TypeError naming the op."""
import importlib.util
import operator
import os
import warnings

import numpy as np
import pytest

import eagervm as ev
from eagervm import _op_refs as op_refs

TABLE = ev._C._op_table()
ROWS = TABLE["ops"]
BINARY = [r for r in ROWS if r["family"] == "binary"]
UNARY = [r for r in ROWS if r["family"] == "unary"]
REDUCE = [r for r in ROWS if r["family"] == "reduce"]
FUNC = [r for r in ROWS if r["family"] == "func"]
ELEMENTWISE = BINARY + UNARY
HERE = os.path.dirname(os.path.abspath(__file__))


def _load_bench():
    """bench/ops.py, whose cases come from the table too."""
    path = os.path.join(HERE, "..", "..", "bench", "ops.py")
    spec = importlib.util.spec_from_file_location("bench_ops", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench_ops = _load_bench()


def ids(rows):
    return [r["name"] for r in rows]


# ------------------------------------------------------------ the rows

@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_row_is_complete(row):
    assert row["doc"] and row["doc"][0].isupper() and row["doc"].endswith("."), row["doc"]
    assert callable(op_refs.reference(row)), row["ref"]
    if row["family"] == "func":
        assert row["bound"] in ("BOTH", "FN", "METHOD")
        x = np.zeros((4, 6), np.float32)
        ns = op_refs.example_namespace(x, x, ev, np.asarray)
        assert isinstance(eval(row["example"], ns), tuple)
    else:
        assert row["domain"] in op_refs.DOMAINS
    assert row["bench"] in bench_ops.CASE_KINDS, "no benchmark case for " + row["name"]
    assert bench_ops.cases_for(row), "bench/ops.py makes no case of " + row["name"]
    assert isinstance(row["grad"], str)


def _as_numpy(r):
    if isinstance(r, (tuple, list)):
        return [_as_numpy(v) for v in r]
    return np.asarray(r.numpy() if hasattr(r, "numpy") else r)


def _close(a, b, what):
    if isinstance(a, list):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), what
        for u, v in zip(a, b):
            _close(u, _as_numpy(v), what)
        return
    b = np.asarray(b)
    assert a.shape == b.shape, what
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=2e-4,
                                   atol=2e-5, err_msg=what)
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_bench_cases_do_the_same_work(row):
    """Each 1K case of bench/ops.py computes the same result on eagervm's
    side as on NumPy's (and PyTorch's, when it has one): the benchmark
    compares the same math."""
    for case in bench_ops.cases_for(row):
        if case.size != "1K":
            continue
        run_ev, run_np, run_t, moved = case.make()
        got = run_ev()
        if row["name"] in op_refs.UNSET_VALUES or row["family"] == "func" and \
                row["name"].endswith("_") and row["name"] not in ("copy_", "fill_"):
            continue  # random values, or in place: the bench repeats it on its input
        mine = _as_numpy(got)
        if run_np is not None:
            _close(mine, _as_numpy(run_np()), case.name + " vs NumPy")
        if run_t is not None:
            _close(mine, _as_numpy(run_t()), case.name + " vs PyTorch")


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_row_is_bound_as_the_table_says(row):
    name = row["name"]
    if row["family"] == "func":
        if row["bound"] != "METHOD":
            fn = getattr(ev, name)
            assert fn is getattr(ev._C, name) and name in ev.__all__
            assert row["doc"] in fn.__doc__ and "Result dtype:" in fn.__doc__
        elif not any(r["name"] == name and r["bound"] != "METHOD" for r in FUNC):
            assert name not in ev.__all__ and not hasattr(ev._C, name)
        if row["bound"] != "FN":
            assert row["doc"] in getattr(ev.Tensor, name).__doc__
            assert "Result dtype:" in getattr(ev.Tensor, name).__doc__
        return
    fn = getattr(ev, name)
    assert fn is getattr(ev._C, name) and name in ev.__all__
    assert row["doc"] in fn.__doc__ and "Result dtype:" in fn.__doc__
    assert hasattr(ev.Tensor, name)
    assert hasattr(ev.Tensor, name + "_") == row["inplace"]
    if row["inplace"]:
        assert f"Tensor.{name}_(" in fn.__doc__


def test_aliases_and_operators():
    names = {r["name"] for r in ROWS}
    for alias, name in TABLE["aliases"]:
        assert name in names and alias in ev.__all__
        a = ev.tensor([1.0, -2.0, 3.0])
        args = (a,) if any(r["name"] == name and r["family"] == "unary" for r in ROWS) \
            else (a, a)
        np.testing.assert_array_equal(getattr(ev, alias)(*args).numpy(),
                                      getattr(ev, name)(*args).numpy())
    binary_syms = {"+": operator.add, "-": operator.sub, "*": operator.mul,
                   "/": operator.truediv, "//": operator.floordiv, "%": operator.mod,
                   "**": operator.pow, "&": operator.and_, "|": operator.or_,
                   "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
                   "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
                   ">": operator.gt, ">=": operator.ge}
    unary_syms = {"-": operator.neg, "abs": abs, "~": operator.invert}
    x = ev.tensor([3, 5, 6])
    y = ev.tensor([1, 2, 3])
    seen = set()
    for sym, name in TABLE["operators"]:
        row = next(r for r in ROWS if r["name"] == name)
        if row["family"] == "unary":
            assert unary_syms[sym](x).tolist() == getattr(ev, name)(x).tolist()
        else:
            assert binary_syms[sym](x, y).tolist() == getattr(ev, name)(x, y).tolist()
        seen.add((row["family"], sym))
    assert len(seen) == len(TABLE["operators"])


# ------------------------------------------------- against NumPy

RNG_SEED = 1234


def layouts(nd_shape):
    """(name, make) pairs: make(np_array) -> (ev tensor, the NumPy values it holds)."""
    def contiguous(a):
        return ev.tensor(a), a

    def transposed(a):
        t = ev.tensor(np.ascontiguousarray(a.T))
        return t.transpose(0, 1), a
    out = [("contiguous", contiguous)]
    if len(nd_shape) == 2:
        out.append(("transposed", transposed))
    return out


SHAPES = [(), (0,), (7,), (3, 5), (4, 0), (2, 3, 4)]


def check_values(got, want, dtype):
    got = got.numpy()
    want = np.asarray(want)
    assert got.shape == want.shape
    if dtype in op_refs.FLOATS:
        tol = 2e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(got, want.astype(dtype), rtol=tol, atol=tol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want.astype(dtype))


def numpy_ref(row, *arrays):
    ref = op_refs.reference(row)
    with np.errstate(all="ignore"):
        return ref(*arrays)


@pytest.mark.parametrize("dt", op_refs.DTYPES)
@pytest.mark.parametrize("row", UNARY, ids=ids(UNARY))
def test_unary_against_numpy(row, dt):
    rng = np.random.default_rng(RNG_SEED)
    want_dt = op_refs.unary_result(row["rule"], dt)
    fn = getattr(ev, row["name"])
    if want_dt is None:
        with pytest.raises(TypeError, match=row["name"]):
            fn(ev.zeros(3, dtype=getattr(ev, dt)))
        return
    for shape in SHAPES:
        a = op_refs.draw(rng, row["domain"], dt, shape)
        for layout, make in layouts(shape):
            x, xv = make(a)
            got = fn(x)
            assert got.dtype == getattr(ev, want_dt), (row["name"], dt, layout)
            # NumPy computes in the result dtype (as the kernels do).
            src = xv.astype(want_dt) if want_dt in op_refs.FLOATS else xv
            check_values(got, numpy_ref(row, src), want_dt)
            if row["inplace"] and want_dt == dt and layout == "contiguous":
                y = ev.tensor(a)
                assert getattr(y, row["name"] + "_")() is y
                check_values(y, numpy_ref(row, src), want_dt)


@pytest.mark.parametrize("db", op_refs.DTYPES)
@pytest.mark.parametrize("da", op_refs.DTYPES)
@pytest.mark.parametrize("row", BINARY, ids=ids(BINARY))
def test_binary_against_numpy(row, da, db):
    rng = np.random.default_rng(RNG_SEED)
    want_dt = op_refs.binary_result(row["rule"], da, db)
    fn = getattr(ev, row["name"])
    if want_dt is None:
        with pytest.raises(TypeError, match=row["name"]):
            fn(ev.zeros(3, dtype=getattr(ev, da)), ev.zeros(3, dtype=getattr(ev, db)))
        return
    cases = [((), ()), ((0,), (0,)), ((7,), (7,)), ((3, 5), (3, 5)), ((3, 1), (1, 4)),
             ((2, 3, 4), (4,)), ((4, 0), (1,))]
    for sa, sb in cases:
        a = op_refs.draw(rng, row["domain"], da, sa, 0)
        b = op_refs.draw(rng, row["domain"], db, sb, 1)
        for layout, make in layouts(sa):
            x, xv = make(a)
            got = fn(x, ev.tensor(b))
            assert got.dtype == getattr(ev, want_dt), (row["name"], da, db, layout)
            # NumPy computes in the dtype the rule computes in.
            comp = np.result_type(da, db).name
            if row["rule"] in ("INTLIKE", "SHIFT") and comp == "bool":
                comp = op_refs.SMALLEST_INT
            if row["rule"] == "FLOAT":
                comp = want_dt
            if row["rule"] == "LOGICAL":
                comp = "bool"
            want = numpy_ref(row, xv.astype(comp), b.astype(comp))
            check_values(got, want, want_dt)
        if row["inplace"] and want_dt == da and sa == np.broadcast_shapes(sa, sb):
            y = ev.tensor(a)
            assert getattr(y, row["name"] + "_")(ev.tensor(b)) is y
            check_values(y, want, want_dt)


@pytest.mark.parametrize("dt", op_refs.DTYPES)
@pytest.mark.parametrize("row", REDUCE, ids=ids(REDUCE))
def test_reduce_against_numpy(row, dt):
    """Every dim choice (None, each axis, negative, a tuple, ()) with and
    without keepdim, on shapes with zero-size and 0-d cases, against NumPy;
    reductions without an identity (max, min) over zero elements raise
    ValueError at the call, as NumPy does."""
    rng = np.random.default_rng(RNG_SEED)
    want_dt = op_refs.reduce_result(row["rule"], dt)
    fn = getattr(ev, row["name"])
    if want_dt is None:
        with pytest.raises(TypeError, match=row["name"]):
            fn(ev.zeros(3, dtype=getattr(ev, dt)))
        return
    for shape in [(), (0,), (7,), (3, 5), (4, 0), (2, 3, 4)]:
        a = op_refs.draw(rng, row["domain"], dt, shape)
        dims = [None, ()] + [d for d in range(-len(shape), len(shape))] + \
            ([(0, len(shape) - 1)] if len(shape) >= 2 else [])
        if shape == ():
            dims = [None, 0, -1]
        for layout, make in layouts(shape):
            x, xv = make(a)
            for dim in dims:
                for keepdim in (False, True):
                    axis = dim if shape != () else None
                    src = xv.astype(want_dt) if want_dt in op_refs.FLOATS else xv
                    try:
                        with np.errstate(all="ignore"), warnings.catch_warnings():
                            warnings.simplefilter("ignore", RuntimeWarning)  # empty means
                            want = op_refs.reference(row)(src, axis=axis, keepdims=keepdim)
                    except ValueError:  # NumPy: zero elements and no identity
                        with pytest.raises(ValueError, match="zero elements"):
                            fn(x, dim, keepdim)
                        continue
                    got = fn(x, dim, keepdim)
                    assert got.dtype == getattr(ev, want_dt), (row["name"], dt, dim)
                    check_values(got, want, want_dt)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("row", FUNC, ids=ids(FUNC))
def test_func_against_numpy(row, transposed):
    """Each EV_FUNC row called with its example arguments (on a contiguous and
    a transposed input), as function and as method where it is both, against
    its NumPy reference called with the same arguments."""
    rng = np.random.default_rng(RNG_SEED)
    xn = rng.uniform(-3, 3, (4, 6)).astype(np.float32)
    if transposed:
        xn = np.ascontiguousarray(xn.T).T  # the same values, Fortran order
        x = ev.tensor(np.ascontiguousarray(xn.T)).transpose(0, 1)
    else:
        x = ev.tensor(xn)
    args_ev = eval(row["example"], op_refs.example_namespace(x, xn, ev, ev.tensor))
    args_np = eval(row["example"], op_refs.example_namespace(xn.copy(), xn, ev, np.asarray))
    ref = op_refs.reference(row)
    name, bound = row["name"], row["bound"]
    if bound == "FN":
        results = [getattr(ev, name)(*args_ev)]
        want = ref(*args_np)
    elif bound == "BOTH":
        if transposed and name in op_refs.NEEDS_VIEWABLE_STRIDES:
            with pytest.raises(ValueError, match="reshape"):
                getattr(ev, name)(x, *args_ev)
            return
        results = [getattr(ev, name)(x, *args_ev), getattr(x, name)(*args_ev)]
        want = ref(xn.copy(), *args_np)
    else:  # a method, maybe in place: run it on a copy
        y = ev.tensor(np.ascontiguousarray(xn))
        got = getattr(y, name)(*args_ev)
        if name.endswith("_"):
            assert got is y
        results = [got]
        want = ref(xn.copy(), *args_np)
    wants = want if isinstance(want, tuple) else (want,)
    for got in results:
        gots = got if isinstance(got, tuple) else (got,)
        assert len(gots) == len(wants), name
        for g, w in zip(gots, wants):
            g, w = g.numpy(), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype, g.shape,
                                                               w.shape)
            if name not in op_refs.UNSET_VALUES:
                np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("row", [r for r in ROWS if r["inplace"]], ids=ids(
    [r for r in ROWS if r["inplace"]]))
def test_inplace_refuses_a_result_it_cannot_hold(row):
    """An in-place op whose result dtype is of a higher kind than the operand
    (an int32 tensor and a float result) raises TypeError, changing nothing."""
    x = ev.tensor([1, 2, 3], dtype=ev.int32)
    if row["family"] == "unary":
        res = op_refs.unary_result(row["rule"], "int32")
        call = lambda: getattr(x, row["name"] + "_")()  # noqa: E731
    else:
        res = op_refs.binary_result(row["rule"], "int32", "float32")
        call = lambda: getattr(x, row["name"] + "_")(ev.tensor([1.5, 2.5, 3.5]))  # noqa: E731
    if res is None or res in ("int32", "bool", "int64"):
        pytest.skip("the result fits, or the rule refuses the dtypes (tested above)")
    with pytest.raises(TypeError, match=row["name"] + "_"):
        call()
    assert x.tolist() == [1, 2, 3]


EDGES = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan,
         0.999, -0.999, 1.0, -1.0, 3.0]


@pytest.mark.parametrize("dt", op_refs.FLOATS)
@pytest.mark.parametrize("row", ELEMENTWISE, ids=ids(ELEMENTWISE))
def test_edge_values_against_numpy(row, dt):
    """Halves (rounding), signed zeros, huge values, infinities and NaN, in
    every pair for binary ops, against NumPy (NaN's sign is not compared)."""
    fn = getattr(ev, row["name"])
    if row["family"] == "unary":
        if op_refs.unary_result(row["rule"], dt) is None:
            pytest.skip("the rule refuses floats")
        a = np.array(EDGES, dtype=dt)
        got, want = fn(ev.tensor(a)), numpy_ref(row, a)
    else:
        if op_refs.binary_result(row["rule"], dt, dt) is None:
            pytest.skip("the rule refuses floats")
        a, b = (np.array(v, dtype=dt) for v in zip(*[(x, y) for x in EDGES for y in EDGES]))
        got, want = fn(ev.tensor(a), ev.tensor(b)), numpy_ref(row, a, b)
    g = got.numpy()
    want = np.asarray(want).astype(g.dtype)
    np.testing.assert_allclose(g, want, rtol=2e-6 if dt == "float32" else 1e-13, atol=0,
                               equal_nan=True)
    # Signed zeros too, where NumPy gives a zero (but for the zero maximum
    # and minimum pick between +0 and -0: IEEE 754 leaves it open).
    zero = (want == 0) & ~np.isnan(want)
    if row["name"] in ("maximum", "minimum"):
        zero &= (a != 0) | (b != 0)
    np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(want[zero]))


# The ops along lines take every dtype: check each on a random and on a
# zero-size input (the float32 examples above cover views and NaN-free data).
LINE_OPS = [r for r in FUNC if r["bench"] in ("scan", "sort", "reorder", "data_dependent")]


@pytest.mark.parametrize("shape", [(4, 6), (0, 6), (3, 1)])
@pytest.mark.parametrize("dt", op_refs.DTYPES)
@pytest.mark.parametrize("row", LINE_OPS, ids=ids(LINE_OPS))
def test_line_ops_every_dtype(row, dt, shape):
    rng = np.random.default_rng(RNG_SEED)
    # Distinct values, so that sorts have one answer whatever the tie rule.
    vals = rng.permutation(max(1, int(np.prod(shape))))[:int(np.prod(shape))]
    if dt == "bool":
        xn = (vals % 2).astype(bool).reshape(shape)
    elif dt in ("uint8", "int8"):
        xn = (vals % 100).astype(dt).reshape(shape)
    else:
        xn = (vals - 10).astype(dt).reshape(shape)
    if row["bench"] == "sort" and dt == "bool" and xn.size > 2:
        pytest.skip("bool has ties: the order of equal keys is tested in C (stable sort)")
    if row["name"] == "topk" and shape[-1] < 3:
        with pytest.raises(ValueError):
            ev.topk(ev.tensor(xn), 3)
        return
    x = ev.tensor(xn)
    ns_ev = op_refs.example_namespace(x, xn if xn.size else np.zeros((4, 6), np.float32), ev,
                                      ev.tensor)
    ns_np = op_refs.example_namespace(xn.copy(), xn if xn.size else np.zeros((4, 6),
                                                                           np.float32),
                                      ev, np.asarray)
    ns_ev["x"], ns_np["x"] = x, xn.copy()
    args_ev, args_np = eval(row["example"], ns_ev), eval(row["example"], ns_np)
    ref = op_refs.reference(row)
    if row["bound"] == "METHOD":
        y = ev.tensor(xn.copy())
        try:
            want = ref(xn.copy(), *args_np)
        except (TypeError, ValueError):
            with pytest.raises((TypeError, ValueError)):
                getattr(y, row["name"])(*args_ev)
            return
        try:
            got = getattr(y, row["name"])(*args_ev)
        except TypeError as e:
            # In place, a result that does not fit self's dtype is refused.
            assert row["name"] in ("cumsum_", "cumprod_") and "cast" in str(e), e
            return
    else:
        want = ref(xn.copy(), *args_np)
        got = getattr(ev, row["name"])(x, *args_ev)
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(got, tuple) else (got,)
    for g, w in zip(gots, wants):
        g, w = g.numpy(), np.asarray(w)
        assert g.shape == w.shape, (row["name"], dt, g.shape, w.shape)
        np.testing.assert_array_equal(g, w.astype(g.dtype))


# 0-d inputs and bad arguments of the ops along lines, as PyTorch has them:
# a 0-d tensor is a line of one element along dim 0 or -1 (tril and triu
# need a matrix); every error names the op and what was expected.
ZERO_D = {"cumsum": (0,), "cumprod": (-1,), "sort": (), "argsort": (), "topk": (1,),
          "flip": ([0],), "roll": (1, 0), "nonzero": (), "unique": ()}
BAD_CALLS = [("cumsum", (5,), IndexError, "dimension 5 is out of range"),
             ("cumprod", (-3,), IndexError, "out of range"),
             ("sort", (5,), IndexError, "out of range"),
             ("argsort", (2,), IndexError, "out of range"),
             ("topk", (9,), ValueError, r"k = 9 is out of range \[0, 4\]"),
             ("topk", (-1,), ValueError, "out of range"),
             ("topk", (1, 5), IndexError, "out of range"),
             ("flip", ([5],), IndexError, "out of range"),
             ("flip", ([0, 0],), ValueError, "appears more than once"),
             ("roll", (1, 5), IndexError, "out of range")]


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_line_ops_on_0d(name):
    x = ev.tensor(3.5)
    got = getattr(ev, name)(x, *ZERO_D[name])
    gots = got if isinstance(got, tuple) else (got,)
    if name == "nonzero":
        assert gots[0].shape == (1, 0)
    elif name == "unique":
        assert gots[0].tolist() == [3.5]
    elif name == "argsort":
        assert gots[0].shape == () and gots[0].item() == 0
    else:  # the value itself, and index 0 for the sorts
        assert gots[0].shape == () and gots[0].item() == 3.5
        assert all(g.shape == () and g.item() == 0 for g in gots[1:])
    for tri in ("tril", "triu"):
        with pytest.raises(ValueError, match=tri + r": x of shape \[\] has 0 dimensions"):
            getattr(ev, tri)(x)


@pytest.mark.parametrize("name,args,exc,match", BAD_CALLS)
def test_line_ops_refuse_bad_arguments(name, args, exc, match):
    y = ev.ones(3, 4)
    before = y.tolist()
    with pytest.raises(exc, match=match):
        getattr(ev, name)(y, *args)
    assert y.tolist() == before  # nothing was written
    with pytest.raises(exc):  # the method form refuses the same way
        getattr(y, name)(*args)
