"""Dense elementwise instructions whose inputs are not all in the loop's
dtype: a broadcast scalar (x * 0.05, a 0-d tensor) and a dense input of
another dtype (floats times a bool mask, int32 plus float64) run the fast
path block by block. Values against NumPy at sizes around the block
(8 KiB: 1,024 float64, 2,048 float32) and past the split over the intra-op
threads, in place too."""
import numpy as np
import pytest

import eagervm as ev

SIZES = [1, 1023, 1025, 2047, 2049, 4096, 300001]
RNG = np.random.default_rng(3)


@pytest.mark.parametrize("n", SIZES)
def test_scalar_operands(n):
    xn = RNG.standard_normal(n).astype(np.float32)
    x = ev.tensor(xn)
    s64 = ev.tensor(np.float64(0.25))
    cases = [
        (x * 0.05, xn * np.float32(0.05)),
        (0.5 - x, np.float32(0.5) - xn),
        (x * s64, (xn * 0.25)),
        (x > 0.1, xn > np.float32(0.1)),
        (ev.maximum(x, 0.0), np.maximum(xn, 0)),
    ]
    for got, want in cases:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    y = ev.tensor(xn)
    y.mul_(0.9)
    np.testing.assert_allclose(y.numpy(), xn * np.float32(0.9), rtol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_inputs_of_another_dtype(n):
    xn = RNG.standard_normal(n).astype(np.float32)
    mn = RNG.random(n) < 0.5
    kn = RNG.integers(-50, 50, n).astype(np.int32)
    dn = RNG.standard_normal(n)
    x, m, k, d = ev.tensor(xn), ev.tensor(mn), ev.tensor(kn), ev.tensor(dn)
    np.testing.assert_array_equal((x * m).numpy(), xn * mn)
    np.testing.assert_allclose((k + d).numpy(), kn + dn, rtol=1e-12)
    np.testing.assert_allclose((x * (x > 0)).numpy(), xn * (xn > 0), rtol=1e-6)
    np.testing.assert_array_equal((k * 2).numpy(), kn * 2)


def test_scalar_results_reuse_memory_while_queued():
    """x * 0.05 on a large x no longer keeps its operands' tensors until
    it runs: its dropped results leave their blocks to the next op."""
    x = ev.ones(1 << 20)
    ev.synchronize()
    m = ev.ones(2048, 2048)
    busy = m @ m
    s0 = ev._C._stats()
    for _ in range(50):
        r = x * 0.5
    s1 = ev._C._stats()
    assert s1["alloc_stream_reuses"] - s0["alloc_stream_reuses"] >= 25
    del busy
    assert np.all(r.numpy() == 0.5)


# ------------------------------------------------------------ row broadcast
#
# An operand repeated along the leading dimensions of a C-contiguous result
# (a bias row: x @ w + b) runs the dense path too, read in place when its
# row is long, repeated in a buffer when short. Rows around the buffer's
# half and whole (512 and 1,024 float64, 1,024 and 2,048 float32), results
# split over the intra-op threads.

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
ROW_SHAPES = [
    ((128, 256), (256,)),      # the MLP's bias add
    ((128, 10), (10,)),
    ((5, 3), (1, 3)),
    ((7, 512), (512,)),
    ((6, 513), (513,)),
    ((3, 1024), (1024,)),
    ((5, 1025), (1025,)),      # float32: read in place
    ((3, 2048), (2048,)),
    ((2, 3000), (3000,)),
    ((4, 5, 6), (5, 6)),       # a row of two dimensions
    ((4, 5, 6), (1, 5, 6)),
    ((3, 1, 5, 6), (1, 6)),
    ((400, 700), (700,)),      # split over the threads (280,000 elements)
    ((70000, 3), (3,)),
]


def _values(shape, dtype):
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if dtype in ("float32", "float64"):
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-20 if dtype != "uint8" else 0, 20, shape).astype(dtype)


def _check(got, want):
    got = got.numpy()
    assert got.dtype == want.dtype
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6 if want.dtype == np.float32 else 1e-12)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("db", DTYPES)
def test_row_operands_every_dtype_pair(da, db):
    for sa, sb in [((128, 256), (256,)), ((6, 513), (513,)), ((4, 1025), (1025,)),
                   ((70, 3), (3,))]:
        an, bn = _values(sa, da), _values(sb, db)
        a, b = ev.tensor(an), ev.tensor(bn)
        _check(ev.maximum(a, b), np.maximum(an, bn))
        _check(ev.maximum(b, a), np.maximum(bn, an))
        _check(a > b, an > bn)
        if "bool" not in (da, db):
            _check(a - b, an - bn)
            _check(b - a, bn - an)


@pytest.mark.parametrize("sa,sb", ROW_SHAPES)
def test_row_operand_shapes(sa, sb):
    an = RNG.standard_normal(sa).astype(np.float32)
    bn = RNG.standard_normal(sb).astype(np.float32)
    a, b = ev.tensor(an), ev.tensor(bn)
    _check(a + b, an + bn)
    _check(b * a, bn * an)
    _check(a + ev.tensor(bn.astype(np.float64)), an + bn.astype(np.float64))  # converted
    _check(a * ev.tensor(bn > 0), an * (bn > 0))                               # bool row
    _check(ev.where(ev.tensor(bn > 0), a, 0.5), np.where(bn > 0, an, np.float32(0.5)))
    c = ev.tensor(an)
    c += b                                                                     # in place
    _check(c, an + bn)
    c = ev.tensor(an)
    c.mul_(ev.tensor(bn.astype(np.float64)))
    _check(c, (an * bn.astype(np.float64)).astype(np.float32))


def test_row_operands_of_views():
    """Rows that are views (a strided slice, a reversed row, a column of a
    transposed matrix) and results that are not C-contiguous give the same
    values, whichever path they take."""
    an = RNG.standard_normal((64, 300)).astype(np.float32)
    bn = RNG.standard_normal(600).astype(np.float32)
    a, b = ev.tensor(an), ev.tensor(bn)
    _check(a + b[::2], an + bn[::2])                 # strided row: iterator path
    _check(a + b[300:][::-1], an + bn[300:][::-1])   # negative step
    _check(a + b[:300], an + bn[:300])               # an offset row
    m = ev.tensor(RNG.standard_normal((300, 5)).astype(np.float32))
    mn = m.numpy()
    _check(a + m[:, 2], an + mn[:, 2])               # a column as the row
    _check(a.T + b[:64], an.T + bn[:64])             # transposed a, row over its rows
    _check(a[:, ::3] + b[:100], an[:, ::3] + bn[:100])
    _check(a[::-1] + b[:300], an[::-1] + bn[:300])
    _check(a[:, :1] + b[:300], an[:, :1] + bn[:300])  # a column broadcast against a row
    t = ev.tensor(an.T.copy()).T                     # a transposed destination in place
    t += b[:300]
    _check(t, an + bn[:300])
    s = ev.tensor(an)
    s[:, 10:20] += b[:10]                            # a strided destination
    want = an.copy()
    want[:, 10:20] += bn[:10]
    _check(s, want)


def test_row_operand_overlapping_output():
    """A row that is part of the output (x[1:] += x[0]) is read before it
    is written."""
    xn = RNG.standard_normal((50, 40)).astype(np.float32)
    x = ev.tensor(xn)
    x += x[0]
    _check(x, xn + xn[0])
    x = ev.tensor(xn)
    x[1:] += x[0]
    want = xn.copy()
    want[1:] += xn[0]
    _check(x, want)


@pytest.mark.parametrize("sa,sb", [((0, 5), (5,)), ((5, 0), (0,)), ((0, 3, 4), (3, 4)),
                                   ((3, 0, 4), (1, 4))])
def test_row_operands_empty(sa, sb):
    an = np.ones(sa, np.float32)
    bn = np.full(sb, 2, np.int32)
    got = ev.tensor(an) + ev.tensor(bn)
    assert tuple(got.shape) == np.broadcast_shapes(sa, sb)
    _check(got, an + bn)


def test_row_results_reuse_memory_while_queued():
    """x + b (a bias row) no longer keeps its operands' tensors until it
    runs: its dropped results leave their blocks to the next op."""
    x = ev.ones(1024, 1024)
    b = ev.ones(1024)
    ev.synchronize()
    m = ev.ones(2048, 2048)
    busy = m @ m
    s0 = ev._C._stats()
    for _ in range(50):
        r = x + b
    s1 = ev._C._stats()
    assert s1["alloc_stream_reuses"] - s0["alloc_stream_reuses"] >= 25
    del busy
    assert np.all(r.numpy() == 2)
