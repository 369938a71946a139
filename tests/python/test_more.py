"""Ops bound in ops_more.c: where/cat/stack/selection/scatter, random numbers,
bitwise ops and operators, tensor and mask indexing, and the export
protocols (buffer, DLPack). Exact for ints and bool, tolerances for floats."""
import gc

import numpy as np
import pytest

import eagervm as ev

try:
    import torch
except ImportError:  # optional
    torch = None

RNG = np.random.default_rng(7)
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]


def npy(t):
    return t.numpy()


def ints(shape, dtype="int64", lo=-50, hi=50):
    return RNG.integers(lo, hi, size=shape).astype(dtype)


# ----------------------------------------------------------------- bitwise

@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
@pytest.mark.parametrize("name,op", [("bitwise_and", np.bitwise_and),
                                     ("bitwise_or", np.bitwise_or),
                                     ("bitwise_xor", np.bitwise_xor)])
def test_bitwise_binary(dtype, name, op):
    if dtype == "bool":
        a, b = RNG.random((3, 4)) > 0.5, RNG.random((4,)) > 0.5
    else:
        lo, hi = (0, 256) if dtype == "uint8" else (-100, 100) if dtype == "int8" else \
            (-1000, 1000)
        a, b = ints((3, 4), dtype, lo, hi), ints((4,), dtype, lo, hi)
    want = op(a, b)
    for got in (getattr(ev, name)(ev.tensor(a), ev.tensor(b)),
                getattr(ev.tensor(a), name)(ev.tensor(b))):
        assert got.dtype.name == str(want.dtype)
        np.testing.assert_array_equal(npy(got), want)


def test_bitwise_operators_match_numpy():
    a, b = ints((5, 3), "int32"), ints((5, 3), "int64")
    ta, tb = ev.tensor(a), ev.tensor(b)
    np.testing.assert_array_equal(npy(ta & tb), a & b)
    np.testing.assert_array_equal(npy(ta | tb), a | b)
    np.testing.assert_array_equal(npy(ta ^ tb), a ^ b)
    np.testing.assert_array_equal(npy(~ta), ~a)
    assert (ta & tb).dtype == ev.int64
    # scalars on either side (weak, as NumPy)
    np.testing.assert_array_equal(npy(ta & 6), a & np.int32(6))
    np.testing.assert_array_equal(npy(6 | ta), np.int32(6) | a)
    assert (ta & 6).dtype == ev.int32
    # non-contiguous operand
    np.testing.assert_array_equal(npy(ta.T ^ tb.T), (a ^ b).T)
    # bool: the logical results, bool dtype
    p, q = RNG.random(6) > 0.5, RNG.random(6) > 0.5
    tp, tq = ev.tensor(p), ev.tensor(q)
    np.testing.assert_array_equal(npy(tp & tq), p & q)
    np.testing.assert_array_equal(npy(~tp), ~p)
    assert (~tp).dtype == ev.bool


def test_shifts_match_numpy():
    a = ints((4, 5), "int64", -(2 ** 40), 2 ** 40)
    s = ints((5,), "int64", 0, 70)  # includes shifts past the width
    ta, ts = ev.tensor(a), ev.tensor(s)
    np.testing.assert_array_equal(npy(ta << ts), np.left_shift(a, s))
    np.testing.assert_array_equal(npy(ta >> ts), np.right_shift(a, s))
    np.testing.assert_array_equal(npy(ev.bitwise_left_shift(ta, 3)), a << 3)
    np.testing.assert_array_equal(npy(ev.bitwise_right_shift(ta, 3)), a >> 3)
    b = ints((7,), "int32", -100, 100)
    np.testing.assert_array_equal(npy(ev.tensor(b) << 2), b << np.int32(2))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16"])
def test_narrow_shifts_match_numpy(dtype):
    info = np.iinfo(dtype)
    a = ints((4, 6), dtype, info.min, info.max + 1)
    s = ints((6,), dtype, 0, 20)  # past the width of 8 and 16 bits
    ta, ts = ev.tensor(a), ev.tensor(s)
    for got, want in ((ta << ts, np.left_shift(a, s)), (ta >> ts, np.right_shift(a, s)),
                      (~ta, np.invert(a)), (ta << 3, a << np.array(3, dtype))):
        assert got.dtype.name == dtype
        np.testing.assert_array_equal(npy(got), want)
    # mixed: uint8 with int8 computes in int16, as NumPy
    u, i = ints((5,), "uint8", 0, 256), ints((5,), "int8", -128, 128)
    np.testing.assert_array_equal(npy(ev.tensor(u) ^ ev.tensor(i)), u ^ i)
    assert (ev.tensor(u) ^ ev.tensor(i)).dtype == ev.int16


def test_bitwise_inplace_and_zero_size():
    a, b = ints((3, 3)), ints((3,))
    t = ev.tensor(a)
    t &= ev.tensor(b)
    np.testing.assert_array_equal(npy(t), a & b)
    t |= 5
    t ^= 3
    t <<= 1
    t >>= 2
    np.testing.assert_array_equal(npy(t), ((((a & b) | 5) ^ 3) << 1) >> 2)
    t.bitwise_not_()
    np.testing.assert_array_equal(npy(t), ~(((((a & b) | 5) ^ 3) << 1) >> 2))
    e = ev.zeros(0, 3, dtype=ev.int32)
    assert (e & e).shape == (0, 3)
    assert (~ev.tensor(5)).item() == ~5  # 0-d


def test_bitwise_errors():
    f = ev.ones(3)
    i = ev.tensor([1, 2, 3])
    with pytest.raises(TypeError, match="bitwise_and: not supported for dtypes float32 and "
                                        "int64"):
        f & i
    with pytest.raises(TypeError, match="bitwise_not: not supported for dtype float32"):
        ~f
    with pytest.raises(ValueError, match="cannot be broadcast"):
        i | ev.tensor([1, 2])
    b = ev.tensor([True, False, True])
    with pytest.raises(TypeError, match="bitwise_or_: the result dtype int64 cannot be cast"):
        b |= i
    # Like every unary op of the table, it takes what tensor() takes.
    assert ev.bitwise_not([1, 2]).tolist() == [-2, -3]


# ------------------------------------------------------ where, cat, stack

def test_where_matches_numpy():
    c = RNG.random((3, 1, 4)) > 0.5
    x, y = RNG.random((2, 4)).astype("float32"), RNG.random((3, 2, 1))
    got = ev.where(ev.tensor(c), ev.tensor(x), ev.tensor(y))
    want = np.where(c, x, y)
    assert got.dtype.name == str(want.dtype)
    np.testing.assert_allclose(npy(got), want, rtol=1e-6)
    xi = ints((3, 2, 4))
    np.testing.assert_array_equal(npy(ev.where(ev.tensor(c), ev.tensor(xi), 0)),
                                  np.where(c, xi, 0))
    np.testing.assert_array_equal(npy(ev.tensor(xi).where(ev.tensor(c), -1)),
                                  np.where(c, xi, -1))
    with pytest.raises(TypeError, match="one argument"):
        ev.where(ev.tensor(c))
    with pytest.raises(TypeError):
        ev.where(ev.tensor(xi), ev.tensor(xi), ev.tensor(xi))  # condition must be bool


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_stack(dim):
    a, b = ints((2, 3)), ints((2, 3))
    np.testing.assert_array_equal(npy(ev.cat([ev.tensor(a), ev.tensor(b)], dim)),
                                  np.concatenate([a, b], dim))
    np.testing.assert_array_equal(npy(ev.stack((ev.tensor(a), ev.tensor(b)), dim=dim)),
                                  np.stack([a, b], dim))
    f = RNG.random((2, 3)).astype("float32")
    got = ev.cat([ev.tensor(a), ev.tensor(f)], dim=dim)
    np.testing.assert_allclose(npy(got), np.concatenate([a, f], dim), rtol=1e-6)


def test_cat_errors():
    with pytest.raises(ValueError, match="non-empty"):
        ev.cat([])
    with pytest.raises(TypeError, match="sequence of tensors"):
        ev.cat(ev.ones(2))
    with pytest.raises(ValueError):
        ev.cat([ev.ones(2, 3), ev.ones(3, 3)], dim=1)
    with pytest.raises(ValueError):
        ev.stack([ev.ones(2), ev.ones(3)])


@pytest.mark.parametrize("dt", ["uint8", "int8", "int16"])
def test_narrow_where_cat_stack(dt):
    c = RNG.random((3, 4)) > 0.5
    x = ints((3, 4), dt, 0, 100)
    tx = ev.tensor(x)
    got = ev.where(ev.tensor(c), tx, 7)
    assert got.dtype.name == dt
    np.testing.assert_array_equal(npy(got), np.where(c, x, np.array(7, dt)))
    # A scalar the dtype cannot hold widens (NumPy 1.24's value-based rule).
    got = ev.where(ev.tensor(c), tx, -300)
    assert got.dtype == ev.int16
    np.testing.assert_array_equal(npy(got), np.where(c, x, -300))
    for other in ("uint8", "int8", "int16", "int32", "float32"):
        y = ints((3, 4), other, 0, 100)
        want = np.concatenate([x, y], 1)
        got = ev.cat([tx, ev.tensor(y)], 1)
        assert got.dtype.name == want.dtype.name
        np.testing.assert_array_equal(npy(got), want)
        np.testing.assert_array_equal(npy(ev.stack([tx, ev.tensor(y)])), np.stack([x, y]))


# -------------------------------------------------------------- selection

@pytest.mark.parametrize("dt", ["uint8", "int8", "int16"])
def test_narrow_selection_as_data(dt):
    x = ints((4, 5), dt, 0, 100)
    tx = ev.tensor(x)
    idx = np.array([3, 0, 3])
    np.testing.assert_array_equal(npy(ev.index_select(tx, 1, ev.tensor(idx))), x[:, idx])
    g = RNG.integers(0, 5, size=(4, 2))
    np.testing.assert_array_equal(npy(ev.gather(tx, 1, ev.tensor(g))),
                                  np.take_along_axis(x, g, 1))
    np.testing.assert_array_equal(npy(ev.take(tx, ev.tensor([[0, -1], [7, 19]]))),
                                  np.take(x, [[0, -1], [7, 19]]))
    # scatter_add wraps at the width, as NumPy's np.add.at.
    src = np.full((4, 2), 100, dt)
    want = x.copy()
    np.add.at(want, (np.arange(4)[:, None], g), src)
    got = ev.scatter_add(tx, 1, ev.tensor(g), ev.tensor(src))
    assert got.dtype.name == dt
    np.testing.assert_array_equal(npy(got), want)
    # As indices: one_hot of uint8 labels, cross_entropy against them.
    labels = np.array([3, 0, 9, 1], np.uint8) if dt == "uint8" else np.array([3, 0, 9, 1], dt)
    oh = ev.one_hot(ev.tensor(labels), 10)
    np.testing.assert_array_equal(npy(oh), np.eye(10, dtype=np.int64)[labels])
    logits = RNG.standard_normal((4, 10))
    a = ev.cross_entropy(ev.tensor(logits), ev.tensor(labels))
    b = ev.cross_entropy(ev.tensor(logits), ev.tensor(labels.astype(np.int64)))
    assert a.item() == b.item()


def test_index_select_gather_take_scatter():
    x = RNG.random((4, 5))
    tx = ev.tensor(x)
    idx = np.array([3, 0, 3])
    np.testing.assert_array_equal(npy(ev.index_select(tx, 1, ev.tensor(idx))), x[:, idx])
    np.testing.assert_array_equal(npy(tx.index_select(0, ev.tensor(idx))), x[idx])
    g = RNG.integers(0, 5, size=(4, 2))
    np.testing.assert_array_equal(npy(ev.gather(tx, 1, ev.tensor(g))),
                                  np.take_along_axis(x, g, 1))
    t = np.array([[0, -1], [7, 19]])
    np.testing.assert_array_equal(npy(ev.take(tx, ev.tensor(t))), np.take(x, t))
    np.testing.assert_array_equal(npy(tx.take(ev.tensor(t))), np.take(x, t))
    src = RNG.random((4, 2))
    want = x.copy()
    for i in range(4):
        for j in range(2):
            want[i, g[i, j]] += src[i, j]
    got = ev.scatter_add(tx, 1, ev.tensor(g), ev.tensor(src))
    np.testing.assert_allclose(npy(got), want, rtol=1e-12)
    np.testing.assert_array_equal(npy(tx), x)  # out of place
    r = tx.scatter_add_(1, ev.tensor(g), ev.tensor(src))
    assert r is tx
    np.testing.assert_allclose(npy(tx), want, rtol=1e-12)


def test_selection_errors():
    x = ev.ones(3, 4)
    with pytest.raises(TypeError, match="index_select"):
        ev.index_select(x, 0, ev.tensor([0.5]))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        ev.index_select(x, 0, ev.tensor([5])).numpy()
    with pytest.raises(TypeError, match="dim must be an integer"):
        ev.gather(x, "a", ev.tensor([[0]]))
    with pytest.raises(TypeError, match="expected a Tensor"):
        ev.take([1, 2], ev.tensor([0]))


# ----------------------------------------------------------------- random

def test_manual_seed_reproducible():
    g = ev.manual_seed(123)
    assert isinstance(g, ev.Generator)
    a = ev.rand(1000).numpy()
    b = ev.randn(3, 4).numpy()
    ev.manual_seed(123)
    np.testing.assert_array_equal(ev.rand(1000).numpy(), a)
    np.testing.assert_array_equal(ev.randn((3, 4)).numpy(), b)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
    assert ev.rand(2, dtype=ev.float64).dtype == ev.float64


def test_generator_objects():
    g1, g2 = ev.Generator(seed=5), ev.Generator(seed=5)
    np.testing.assert_array_equal(ev.rand(10, generator=g1).numpy(),
                                  ev.rand(10, generator=g2).numpy())
    state = g1.get_state()
    x = ev.randn(8, generator=g1).numpy()
    g1.set_state(state)
    np.testing.assert_array_equal(ev.randn(8, generator=g1).numpy(), x)
    assert g1.manual_seed(9) is g1 and g1.initial_seed() == 9
    with pytest.raises(TypeError, match="generator must be an eagervm.Generator"):
        ev.rand(2, generator=1)
    with pytest.raises(ValueError, match="device must be 'cpu'"):
        ev.Generator("cuda")


def test_randint_and_fills():
    r = ev.randint(10, (2000,)).numpy()
    assert r.dtype == np.int64 and r.min() == 0 and r.max() == 9
    r = ev.randint(-3, 4, size=(50, 40), dtype=ev.int32).numpy()
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 3
    with pytest.raises(ValueError):
        ev.randint(5, 5, (3,))
    for dt in ("uint8", "int8", "int16"):
        info = np.iinfo(dt)
        r = ev.randint(info.min, info.max + 1, (20000,), dtype=dt).numpy()
        assert r.dtype == dt and r.min() >= info.min and r.max() <= info.max
        if dt != "int16":  # 20000 draws see all 256 values
            assert r.min() == info.min and r.max() == info.max
        assert len(np.unique(r)) > min(200, 0.2 * (info.max - info.min))
    with pytest.raises(ValueError, match=r"randint: the range \[0, 300\) does not fit dtype "
                                         "uint8"):
        ev.randint(0, 300, (3,), dtype=ev.uint8)
    with pytest.raises(ValueError, match="does not fit dtype int8"):
        ev.randint(-200, 0, (3,), dtype=ev.int8)
    t = ev.zeros(10000, dtype=ev.float64)
    assert t.uniform_(2, 3) is t
    v = t.numpy()
    assert v.min() >= 2 and v.max() < 3
    t.normal_(10, 2)
    v = t.numpy()
    assert abs(v.mean() - 10) < 0.1 and abs(v.std() - 2) < 0.1
    with pytest.raises(TypeError):
        ev.zeros(3, dtype=ev.int64).uniform_()
    with pytest.raises(TypeError):
        ev.rand(3, dtype=ev.int64)
    assert ev.rand_like(ev.ones(2, 3)).shape == (2, 3)
    assert ev.randn_like(ev.ones(4), dtype=ev.float64).dtype == ev.float64


# --------------------------------------------------------------- indexing

def test_integer_tensor_index():
    x = ints((5, 4, 3))
    tx = ev.tensor(x)
    for idx in (np.array([4, 0, -1, 2, 2]), np.array([[1, -5], [3, 0]]), np.array(3),
                np.array([], dtype=np.int64)):
        np.testing.assert_array_equal(npy(tx[ev.tensor(idx)]), x[idx])
    np.testing.assert_array_equal(npy(tx[[1, 3]]), x[[1, 3]])
    np.testing.assert_array_equal(npy(tx[:, ev.tensor([2, 0])]), x[:, [2, 0]])
    np.testing.assert_array_equal(npy(tx[..., ev.tensor([2, 0])]), x[..., [2, 0]])
    np.testing.assert_array_equal(npy(tx[1:4, None, ev.tensor([0])]), x[1:4, None, [0]])
    i32 = ev.tensor(np.array([1, 0], dtype=np.int32))
    np.testing.assert_array_equal(npy(tx[i32]), x[[1, 0]])
    # Every integer dtype is an integer index (not a mask), negatives as NumPy.
    for dt in ("uint8", "int8", "int16"):
        idx = np.array([4, 0, 2, 3], dtype=dt)
        np.testing.assert_array_equal(npy(tx[ev.tensor(idx)]), x[idx])
        np.testing.assert_array_equal(npy(tx[:, ev.tensor(idx[1:3])]), x[:, idx[1:3]])
    neg = np.array([-1, -5], dtype=np.int8)
    np.testing.assert_array_equal(npy(tx[ev.tensor(neg)]), x[neg])
    big = ev.tensor(ints((300, 2)))  # a uint8 index next to a size past 255
    np.testing.assert_array_equal(npy(big[ev.tensor(np.array([255, 7], np.uint8))]),
                                  npy(big)[[255, 7]])
    t = ev.tensor(x.copy())
    t[ev.tensor(np.array([1, -1], np.int8))] = 5
    x[[1, -1]] = 5
    np.testing.assert_array_equal(npy(t), x)


def test_bool_mask_index():
    x = RNG.random((4, 3))
    tx = ev.tensor(x)
    m = x > 0.5
    np.testing.assert_array_equal(npy(tx[ev.tensor(m)]), x[m])
    np.testing.assert_array_equal(npy(tx[tx > 0.5]), x[m])
    r = m[:, 0]
    np.testing.assert_array_equal(npy(tx[ev.tensor(r)]), x[r])
    c = m[0]
    np.testing.assert_array_equal(npy(tx[:, ev.tensor(c)]), x[:, c])
    np.testing.assert_array_equal(npy(tx.T[ev.tensor(m.T)]), x.T[m.T])  # non-contiguous
    np.testing.assert_array_equal(npy(tx[[True, False, True, True]]),
                                  x[[True, False, True, True]])


def test_index_errors():
    t = ev.ones(3, 4)
    with pytest.raises(IndexError, match="must be integer or bool tensors, not float32"):
        t[ev.ones(2)]
    with pytest.raises(IndexError, match="only one tensor or list index"):
        t[ev.tensor([0]), ev.tensor([0])]
    with pytest.raises(IndexError, match="combining a tensor index with int indices"):
        t[0, ev.tensor([0])]
    with pytest.raises(IndexError, match="the shape of the mask at index 0"):
        t[ev.tensor([True, False])]
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 3"):
        t[ev.tensor([7])].numpy()


def test_setitem_integer_index():
    x = ints((5, 3))
    t = ev.tensor(x)
    t[ev.tensor([4, -5])] = 99
    x[[4, -5]] = 99
    np.testing.assert_array_equal(npy(t), x)
    v = ints((2, 3))
    t[[1, 2]] = ev.tensor(v)
    x[[1, 2]] = v
    np.testing.assert_array_equal(npy(t), x)
    t[:, ev.tensor([2])] = ev.tensor([[7], [8], [9], [10], [11]])
    x[:, [2]] = [[7], [8], [9], [10], [11]]
    np.testing.assert_array_equal(npy(t), x)
    t[ev.tensor([0, 0])] = ev.tensor([[1, 1, 1], [2, 2, 2]])  # the last wins
    x[[0, 0]] = [[1, 1, 1], [2, 2, 2]]
    np.testing.assert_array_equal(npy(t), x)
    f = ev.zeros(4)
    f[ev.tensor([1, 3])] = 2.5
    np.testing.assert_array_equal(npy(f), [0, 2.5, 0, 2.5])
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 4"):
        f[ev.tensor([9])] = 1.0
    with pytest.raises(ValueError):
        t[ev.tensor([0, 1])] = ev.tensor([1, 2])  # shape (2,) does not fit (2, 3)


def test_setitem_index_keeps_other_elements_exact():
    # A float scalar into an int64 tensor: the unmasked elements must not go
    # through float64 (2**62 + 1 is not a float64).
    t = ev.tensor([1, 2**62 + 1, 2**63 - 1])
    t[ev.tensor([True, False, False])] = 0.5
    assert t.tolist() == [0, 2**62 + 1, 2**63 - 1]
    u = ev.tensor(np.array([1, 2, 3], np.uint8))
    u[u > 1] = -1  # converted as a cast: 255, as NumPy 1.24
    assert u.dtype is ev.uint8 and u.tolist() == [1, 255, 255]
    # The same through an integer index.
    t = ev.tensor([1, 2**62 + 1, 2**63 - 1])
    t[ev.tensor([0])] = ev.tensor(np.array(0.0, np.float32))
    assert t.tolist() == [0, 2**62 + 1, 2**63 - 1]
    t[[1]] = 0.5
    assert t.tolist() == [0, 0, 2**63 - 1]


def test_setitem_mask():
    x = RNG.random((4, 5))
    t = ev.tensor(x)
    t[t > 0.5] = 0.0  # asynchronous (a where)
    x[x > 0.5] = 0.0
    np.testing.assert_array_equal(npy(t), x)
    m = x < 0.2
    vals = np.arange(m.sum(), dtype=np.float64)
    t[ev.tensor(m)] = ev.tensor(vals)
    x[m] = vals
    np.testing.assert_array_equal(npy(t), x)
    r = np.array([True, False, True, False])
    t[ev.tensor(r)] = ev.tensor(np.ones(5))
    x[r] = 1
    np.testing.assert_array_equal(npy(t), x)


# ----------------------------------------------------------------- export

@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64",
                                   "float32", "float64"])
def test_buffer_protocol(dtype):
    a = (RNG.random((3, 4)) * 10).astype(dtype)
    t = ev.tensor(a) + 0 if dtype != "bool" else ev.tensor(a)
    mv = memoryview(t)
    assert mv.readonly and mv.shape == (3, 4) and mv.itemsize == a.itemsize
    assert mv.format == {"bool": "?", "uint8": "B", "int8": "b", "int16": "h", "int32": "i",
                         "int64": "q", "float32": "f", "float64": "d"}[dtype]
    np.testing.assert_array_equal(np.asarray(mv), a)
    assert np.asarray(mv).dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(memoryview(t.T)), a.T)  # a contiguous copy
    np.testing.assert_array_equal(np.frombuffer(t, dtype=dtype).reshape(3, 4), a)
    assert memoryview(ev.tensor(a)).tobytes() == a.tobytes()


def test_buffer_keeps_tensor_alive_and_is_read_only():
    t = ev.arange(6)
    mv = memoryview(t)
    del t
    gc.collect()
    assert mv.tolist() == list(range(6))
    with pytest.raises(TypeError, match="read-only"):
        mv[0] = 1
    mv.release()


def test_writable_buffer_request_raises():
    import ctypes
    with pytest.raises((BufferError, TypeError)):
        (ctypes.c_char * 8).from_buffer(ev.arange(1))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "float32",
                                   "float64"])
def test_dlpack_numpy(dtype):
    a = (RNG.random((3, 4)) * 10).astype(dtype)
    t = ev.tensor(a) * 1
    assert t.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    assert np.from_dlpack(t).dtype == a.dtype
    np.testing.assert_array_equal(np.from_dlpack(t.T), a.T)  # strided
    np.testing.assert_array_equal(np.from_dlpack(t[:, 1:3]), a[:, 1:3])
    np.testing.assert_array_equal(np.from_dlpack(ev.tensor(a[0]).expand(2, 4)),
                                  np.broadcast_to(a[0], (2, 4)))
    back = ev.from_dlpack(a[:, ::2])
    assert back.dtype.name == dtype
    np.testing.assert_array_equal(npy(back), a[:, ::2])
    np.testing.assert_array_equal(npy(ev.from_dlpack(t)), a)


def test_dlpack_capsule_semantics():
    t = ev.arange(4)
    cap = t.__dlpack__()
    assert "dltensor" in repr(cap)
    x = ev.from_dlpack(cap)  # consumes it
    assert "used_dltensor" in repr(cap)
    assert x.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="unconsumed DLPack capsule"):
        ev.from_dlpack(cap)
    del cap
    unused = ev.ones(3).__dlpack__()  # never consumed: the destructor frees it
    del unused
    gc.collect()
    with pytest.raises(ValueError, match="stream must be None"):
        t.__dlpack__(stream=1)
    with pytest.raises(TypeError, match="does not support DLPack"):
        ev.from_dlpack([1, 2])


def test_dlpack_waits_for_pending_work():
    x = ev.ones(200000)
    for _ in range(20):
        x = x + 1
    assert np.from_dlpack(x)[-1] == 21


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_dlpack_torch():
    a = RNG.random((3, 5)).astype("float32")
    t = ev.tensor(a)
    np.testing.assert_array_equal(torch.from_dlpack(t).numpy(), a)
    np.testing.assert_array_equal(torch.from_dlpack(t.T).numpy(), a.T)
    np.testing.assert_array_equal(npy(ev.from_dlpack(torch.arange(6).reshape(2, 3).T)),
                                  np.arange(6).reshape(2, 3).T)
