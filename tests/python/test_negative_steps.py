"""Negative slice steps: x[::-1] and x[5:1:-2] are views with negative strides,
as in NumPy. Every result is checked against NumPy (or Python lists for the
slice rules): reads, writes through the views, each op family on them
(including in-place ops whose input overlaps the reversed output), the NumPy,
DLPack and buffer conversions, and the errors."""
import itertools

import numpy as np
import pytest

import eagervm as ev

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

RNG = np.random.default_rng(7)
BIG = [-(2**63), -(10**30), 2**63 - 1, 10**30]


def npy(t):
    return t.numpy()


def vals(shape, dtype="float64"):
    """Distinct, exactly representable values, so argmax and max are
    unambiguous and float32 sums of a few of them are exact."""
    n = int(np.prod(shape))
    a = RNG.permutation(n).astype(dtype).reshape(shape)
    if dtype in ("float32", "float64"):
        a = a - n / 2 + 0.25
    return a


def pair(shape, dtype="float64"):
    a = vals(shape, dtype)
    return a, ev.tensor(a)


# -------------------------------------------------------------- slice rules


def test_slice_rules_match_python_exhaustively():
    """Every start/stop/step of a small 1-d tensor, extreme and huge bounds
    and steps included, against Python's list slicing."""
    bounds = [None] + list(range(-8, 9)) + BIG
    steps = [None] + [s for s in range(-6, 7) if s] + BIG
    for n in range(0, 6):
        lst = list(range(n))
        t = ev.arange(n)
        a = np.arange(n)
        for start, stop, step in itertools.product(bounds, bounds, steps):
            s = slice(start, stop, step)
            v = t[s]
            assert v.tolist() == lst[s], (n, s)
            assert v.shape == a[s].shape


def test_basic_cases_and_sharing():
    t = ev.arange(10)
    assert t[::-1].tolist() == list(range(9, -1, -1))
    assert t[5:1:-2].tolist() == [5, 3]
    assert t[-1:-11:-3].tolist() == [9, 6, 3, 0]
    assert t[::-1].is_contiguous() is False
    assert t[3:2:-1].is_contiguous() is True  # one element
    assert t[2:8:-1].tolist() == []
    r = t[::-1]
    r[0] = 100  # a view: writes reach t
    assert t.tolist()[9] == 100
    m = ev.tensor(np.arange(12).reshape(3, 4))
    assert m[::-2, 1:].tolist() == [[9, 10, 11], [1, 2, 3]]
    assert m[::-1, ::-1][0].tolist() == [11, 10, 9, 8]
    assert m[::-1][..., None, ::-3].shape == (3, 1, 2)


def test_step_zero_is_an_error():
    t = ev.zeros(3, 4)
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        t[::0]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        t[1, 3:0:0]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        t[::0] = 1
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0][::-1]


# ------------------------------------------------- random keys (hypothesis)


@st.composite
def shapes(draw):
    return tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=4)))


@st.composite
def basic_keys(draw, shape):
    """A basic index over shape: ints, slices of any step sign, None, maybe
    one Ellipsis."""
    nd = len(shape)
    k = draw(st.integers(0, nd))
    ell = draw(st.none() | st.integers(0, k))
    dims = list(range(k)) if ell is None else list(range(ell)) + list(range(nd - (k - ell), nd))
    key = []
    for pos, i in enumerate(dims):
        if pos == ell:
            key.append(Ellipsis)
        if draw(st.integers(0, 5)) == 0:
            key.append(None)
        d = shape[i]
        if d > 0 and draw(st.integers(0, 3)) == 0:
            key.append(draw(st.integers(-d, d - 1)))
        else:
            b = st.none() | st.integers(-d - 2, d + 2)
            step = draw(st.none() | st.integers(-3, -1) | st.integers(1, 3))
            key.append(slice(draw(b), draw(b), step))
    if ell is not None and ell == len(dims):
        key.append(Ellipsis)
    return tuple(key)


def as_view_key(key):
    """NumPy gives a scalar for a full integer index; with an Ellipsis it
    gives a 0-d view, as eagervm does."""
    return key if Ellipsis in key else key + (Ellipsis,)


SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(data=st.data())
def test_random_views_read_and_write(data):
    shape = data.draw(shapes(), label="shape")
    dtype = data.draw(st.sampled_from(["int32", "int64", "float32", "float64"]))
    a = vals(shape, dtype) if shape else np.array(3, dtype=dtype)
    t = ev.tensor(a)
    key = data.draw(basic_keys(shape), label="key")
    v, av = t[key], a[as_view_key(key)]
    # A second key on the view: slices of slices compose.
    if av.ndim and data.draw(st.booleans()):
        key2 = data.draw(basic_keys(av.shape), label="key2")
        v, av = v[key2], av[as_view_key(key2)]
    note(f"view shape {av.shape} strides {av.strides}")
    assert v.shape == av.shape
    np.testing.assert_array_equal(npy(v), av)
    assert v.tolist() == av.tolist()
    np.testing.assert_array_equal(npy(v.contiguous()), av)
    # Writes through the view: a setitem, then an in-place op, reach the base.
    how = data.draw(st.sampled_from(["scalar", "array", "inplace", "copy_"]))
    if how == "scalar":
        v[...] = 7
        av[...] = 7
    elif how == "array":
        w = vals(av.shape, dtype) if av.shape else np.array(5, dtype=dtype)
        v[...] = ev.tensor(w)
        av[...] = w
    elif how == "inplace":
        v += 2
        av += 2
    else:
        w = vals(av.shape[-1:], dtype) if av.ndim else np.array(1, dtype=dtype)
        v.copy_(ev.tensor(w))
        av[...] = w
    np.testing.assert_array_equal(npy(t), a)


@SETTINGS
@given(data=st.data())
def test_random_views_through_ops(data):
    shape = data.draw(shapes().filter(lambda s: len(s) >= 1), label="shape")
    a, t = pair(shape)
    key = data.draw(basic_keys(shape), label="key")
    v, av = t[key], a[as_view_key(key)]
    np.testing.assert_allclose(npy(v * 2 - 1), av * 2 - 1)
    np.testing.assert_allclose(npy(v.exp()), np.exp(av), rtol=1e-12)
    np.testing.assert_allclose(npy(ev.sum(v)), av.sum(), rtol=1e-12, atol=1e-12)
    for d in range(av.ndim):
        np.testing.assert_allclose(npy(ev.sum(v, d)), av.sum(d), rtol=1e-12, atol=1e-12)
        if av.shape[d] > 0:
            np.testing.assert_array_equal(npy(ev.argmax(v, d)), av.argmax(d))
    np.testing.assert_array_equal(npy(v.reshape(-1)), av.reshape(-1))
    np.testing.assert_array_equal(npy(v.to(ev.int64)), av.astype("int64"))


# ------------------------------------------------------------ op families


def rev(a):
    """a reversed in every dimension, with a step of -1 or -2 in the last."""
    return a[(slice(None, None, -1),) * (a.ndim - 1) + (slice(None, None, -2),)]


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_unary_binary_broadcast(dtype):
    a, t = pair((3, 4, 6), dtype)
    ra, rt = rev(a), rev(t)
    np.testing.assert_array_equal(npy(-rt), -ra)
    np.testing.assert_array_equal(npy(abs(rt)), np.abs(ra))
    np.testing.assert_array_equal(npy(rt.relu()), np.maximum(ra, 0))
    if dtype.startswith("float"):
        np.testing.assert_allclose(npy(rt.tanh()), np.tanh(ra), rtol=1e-6)
        np.testing.assert_allclose(npy(abs(rt).sqrt()), np.sqrt(np.abs(ra)), rtol=1e-6)
    row = np.arange(3, dtype=dtype)  # broadcast along the last dimension
    np.testing.assert_array_equal(npy(rt + ev.tensor(row)[::-1]), ra + row[::-1])
    np.testing.assert_array_equal(npy(rt * rt[:, ::-1]), ra * ra[:, ::-1])
    np.testing.assert_array_equal(npy(rt > rt[::-1]), ra > ra[::-1])
    col = vals((3, 1, 1), dtype)
    np.testing.assert_array_equal(npy(ev.tensor(col)[::-1] - rt), col[::-1] - ra)
    np.testing.assert_array_equal(npy(ev.maximum(rt, 0)), np.maximum(ra, 0))
    np.testing.assert_array_equal(npy(rt.to(ev.float64)), ra.astype("float64"))
    np.testing.assert_array_equal(npy(ev.cast(rt, ev.bool)), ra.astype(bool))
    np.testing.assert_array_equal(npy(rt.clamp(-2, 5)), np.clip(ra, -2, 5))


@pytest.mark.parametrize("case", range(8))
def test_inplace_on_overlapping_reversed_views(case):
    """In-place ops and assignments whose input overlaps the (reversed)
    output read the whole input first, as NumPy does."""
    a, t = pair((12,))
    m, mt = pair((5, 5))
    if case == 0:
        t[::-1] += t
        a[::-1] += a
    elif case == 1:
        t += t[::-1]
        a += a[::-1]
    elif case == 2:
        t[1:][::-1] -= t[:-1]
        a[1:][::-1] -= a[:-1]
    elif case == 3:
        t[::-2] *= t[::2]
        a[::-2] *= a[::2]
    elif case == 4:
        t[::-1] = t
        a[::-1] = a.copy()
    elif case == 5:
        t[2::-1] = t[1:4]
        a[2::-1] = a[1:4].copy()
    elif case == 6:
        mt[::-1, :] += mt.T
        m[::-1, :] += m.T
    else:
        mt[:, ::-1].copy_(mt[::-1])
        m[:, ::-1] = m[::-1].copy()
    np.testing.assert_array_equal(npy(t), a)
    np.testing.assert_array_equal(npy(mt), m)


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "max", "min", "argmax", "argmin",
                                "var", "std"])
def test_reductions_along_each_axis(op):
    a, t = pair((3, 4, 5))
    a = a / 8  # keeps prod finite
    t = ev.tensor(a)
    ra, rt = a[::-1, ::-2, ::-1], t[::-1, ::-2, ::-1]
    ref = getattr(np, op)
    fn = getattr(ev, op)
    kw = {"ddof": 1} if op in ("var", "std") else {}
    np.testing.assert_allclose(npy(fn(rt)), ref(ra, **kw), rtol=1e-12)
    for d in range(3):
        np.testing.assert_allclose(npy(fn(rt, d)), ref(ra, axis=d, **kw), rtol=1e-12)
        if op not in ("argmax", "argmin"):
            np.testing.assert_allclose(npy(fn(rt, d, keepdim=True)),
                                       ref(ra, axis=d, keepdims=True, **kw), rtol=1e-12)
    if op not in ("argmax", "argmin"):
        np.testing.assert_allclose(npy(fn(rt, (0, 2))), ref(ra, axis=(0, 2), **kw), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_matmul_of_reversed(dtype):
    a, t = pair((5, 4), dtype)
    b, u = pair((4, 3), dtype)
    tol = {"rtol": 1e-5} if dtype == "float32" else {"rtol": 1e-12}
    np.testing.assert_allclose(npy(t[::-1, ::-1] @ u[::-1]), a[::-1, ::-1] @ b[::-1], **tol)
    np.testing.assert_allclose(npy(t[::-2] @ u[:, ::-1]), a[::-2] @ b[:, ::-1], **tol)
    np.testing.assert_allclose(npy(t.T[::-1] @ t[::-1]), a.T[::-1] @ a[::-1], **tol)
    v, vt = pair((4,), dtype)
    np.testing.assert_allclose(npy(vt[::-1] @ u), v[::-1] @ b, **tol)
    np.testing.assert_allclose(npy(t @ vt[::-1]), a @ v[::-1], **tol)
    np.testing.assert_allclose(npy(vt[::-1] @ vt), v[::-1] @ v, **tol)
    c, w = pair((3, 5, 4), dtype)  # batched, batch dimension reversed
    np.testing.assert_allclose(npy(w[::-1, ::-1] @ u[::-1]), c[::-1, ::-1] @ b[::-1], **tol)


def test_index_and_join_ops():
    a, t = pair((4, 5))
    ra, rt = a[::-1, ::-2], t[::-1, ::-2]
    idx = np.array([2, 0, 2, 1])
    it = ev.tensor(idx)
    np.testing.assert_array_equal(npy(rt.index_select(0, it)), ra[idx])
    np.testing.assert_array_equal(npy(rt.index_select(1, it[:3][::-1])), ra[:, idx[:3][::-1]])
    gi = np.array([[0, 1, 2], [2, 2, 0], [1, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(npy(rt.gather(1, ev.tensor(gi)[::-1])),
                                  np.take_along_axis(ra, gi[::-1], 1))
    np.testing.assert_array_equal(npy(rt.take(ev.tensor([0, -1, 5]))), ra.flatten()[[0, -1, 5]])
    np.testing.assert_array_equal(npy(ev.cat([rt, t[:, :3]], 0)),
                                  np.concatenate([ra, a[:, :3]], 0))
    np.testing.assert_array_equal(npy(ev.cat([rt, rt[::-1]], 1)),
                                  np.concatenate([ra, ra[::-1]], 1))
    np.testing.assert_array_equal(npy(ev.stack([rt, rt], 1)), np.stack([ra, ra], 1))
    np.testing.assert_array_equal(npy(ev.where(rt > 0, rt, rt[::-1])),
                                  np.where(ra > 0, ra, ra[::-1]))
    np.testing.assert_array_equal(npy(ev.where(rt[0] > 0, 1.5, rt)),
                                  np.where(ra[0] > 0, 1.5, ra))
    out = t.clone()
    o = a.copy()
    out[::-1].scatter_add_(0, ev.tensor([[3, 0, 1, 1, 2]]), ev.ones(1, 5, dtype=ev.float64))
    np.add.at(o[::-1], ([3, 0, 1, 1, 2], [0, 1, 2, 3, 4]), 1)
    np.testing.assert_array_equal(npy(out), o)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_softmax_along_each_dim(dim):
    a, t = pair((3, 4, 5))
    ra, rt = a[::-1, ::-1, ::-2] / 4, t[::-1, ::-1, ::-2] / 4
    e = np.exp(ra - ra.max(dim, keepdims=True))
    sm = e / e.sum(dim, keepdims=True)
    np.testing.assert_allclose(npy(rt.softmax(dim)), sm, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(npy(rt.log_softmax(dim)), np.log(sm), rtol=1e-10, atol=1e-13)


def test_view_reshape_permute_expand():
    a, t = pair((12,))
    r = t[::-1]
    v = r.view(3, 4)  # strides compatible: a view with strides (-4, -1)
    np.testing.assert_array_equal(npy(v), a[::-1].reshape(3, 4))
    v[0, 0] = 99
    assert npy(t)[11] == 99
    a[11] = 99
    m = t.view(3, 4)[::-1]  # rows reversed: not flat-viewable
    with pytest.raises(ValueError, match="use reshape"):
        m.view(12)
    f = m.reshape(12)  # a copy
    np.testing.assert_array_equal(npy(f), a.reshape(3, 4)[::-1].reshape(12))
    f[0] = -1
    assert npy(t)[8] == a[8]
    np.testing.assert_array_equal(npy(m.flatten()), a.reshape(3, 4)[::-1].flatten())
    np.testing.assert_array_equal(npy(m.view(3, 2, 2)), a.reshape(3, 4)[::-1].reshape(3, 2, 2))
    np.testing.assert_array_equal(npy(m.T), a.reshape(3, 4)[::-1].T)
    np.testing.assert_array_equal(npy(m.permute(1, 0)[::-1]), a.reshape(3, 4)[::-1].T[::-1])
    np.testing.assert_array_equal(npy(m.transpose(0, 1).unsqueeze(1).squeeze(1)),
                                  a.reshape(3, 4)[::-1].T)
    np.testing.assert_array_equal(npy(t[:4][::-1].expand(2, 4)),
                                  np.broadcast_to(a[:4][::-1], (2, 4)))
    np.testing.assert_array_equal(npy(m[:, None, ::-1].expand(3, 2, 4)),
                                  np.broadcast_to(a.reshape(3, 4)[::-1, None, ::-1], (3, 2, 4)))
    with pytest.raises(ValueError, match="expanded"):
        t[:4][::-1].expand(2, 4).add_(1)


# --------------------------------------------------------- conversions


@pytest.mark.parametrize("make", [
    lambda: np.arange(10)[::-1],
    lambda: np.arange(24.0).reshape(4, 6)[::-1, ::2],
    lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::-1].T,
    lambda: np.arange(24, dtype=np.int32).reshape(2, 3, 4)[::-1, ::-2, ::-3],
    lambda: np.arange(10)[4:4:-1],
    lambda: np.arange(10, dtype=np.int16)[::-3],  # widened on the host
    lambda: np.array([True, False, False])[::-1],
])
def test_from_numpy_tensor_and_dlpack_of_negative_strides(make):
    """NumPy arrays with negative strides are accepted, as a copy."""
    a = make()
    want = a.astype(np.int64) if a.dtype == np.int16 else a
    for t in (ev.from_numpy(a), ev.tensor(a)):
        assert t.shape == a.shape
        np.testing.assert_array_equal(npy(t), want)
        assert t.is_contiguous()
    if a.dtype not in (np.int16, np.bool_):  # NumPy 1.24 exports neither
        np.testing.assert_array_equal(npy(ev.from_dlpack(a)), a)
    base = a.base if a.base is not None else a
    before = base.copy()
    t = ev.from_numpy(a)
    t.fill_(1)  # a copy: the array is untouched
    ev.synchronize()
    np.testing.assert_array_equal(base, before)


def test_numpy_tolist_repr_item_of_reversed():
    a, t = pair((3, 4))
    r, ra = t[::-1, ::-3], a[::-1, ::-3]
    n = r.numpy()
    np.testing.assert_array_equal(n, ra)
    assert n.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(np.asarray(r), ra)
    np.testing.assert_array_equal(np.asarray(r, dtype=np.float32), ra.astype(np.float32))
    assert r.tolist() == ra.tolist()
    assert repr(r) == repr(r.contiguous())
    assert r[1, 0].item() == ra[1, 0]
    assert float(t[::-1][0, ::-1][0]) == a[2, 3]


def test_buffer_protocol_of_reversed():
    a, t = pair((3, 4))
    r, ra = t[::-1, ::-1], a[::-1, ::-1]
    mv = memoryview(r)
    assert mv.shape == (3, 4) and mv.readonly
    assert mv.tolist() == ra.tolist()
    assert bytes(r) == ra.tobytes()
    np.testing.assert_array_equal(np.frombuffer(r, dtype=np.float64).reshape(3, 4), ra)
    mv.release()


def test_dlpack_export_of_reversed_is_a_contiguous_copy():
    a, t = pair((3, 4))
    c = np.from_dlpack(t)  # contiguous: shares t's memory
    r = np.from_dlpack(t[::-1, ::-2])
    np.testing.assert_array_equal(r, a[::-1, ::-2])
    assert all(s > 0 for s in r.strides)  # consumers need not handle negative strides
    assert not np.shares_memory(r, c)
    e = np.from_dlpack(ev.tensor(a[0])[::-1][:, None].expand(4, 3))
    np.testing.assert_array_equal(e, np.broadcast_to(a[0][::-1][:, None], (4, 3)))
    one = np.from_dlpack(t[2:1:-1, ::-1][:, :1])  # size-1 dimensions: any stride
    np.testing.assert_array_equal(one, a[2:1:-1, ::-1][:, :1])


# ---------------------------------------------------- advanced indexing


def test_advanced_indexing_with_negative_slices():
    a, t = pair((4, 5, 3))
    idx = [0, 2, -1]
    np.testing.assert_array_equal(npy(t[::-1, idx]), a[::-1, idx])
    np.testing.assert_array_equal(npy(t[idx, ::-2]), a[idx, ::-2])
    np.testing.assert_array_equal(npy(t[..., ::-1][ev.tensor(idx)]), a[..., ::-1][idx])
    np.testing.assert_array_equal(npy(t[::-1, None, ev.tensor([1, 0])]), a[::-1, None, [1, 0]])
    mask = a[::-1, :, 0] > 0
    np.testing.assert_array_equal(npy(t[::-1][ev.tensor(mask)]), a[::-1][mask])
    np.testing.assert_array_equal(npy(t[::-1, ::-1][ev.tensor(mask[:, ::-1])]),
                                  a[::-1, ::-1][mask[:, ::-1]])
    t[::-1, [1, 3]] = 7.0
    a[::-1, [1, 3]] = 7.0
    np.testing.assert_array_equal(npy(t), a)
    t[:, ::-1][ev.tensor(mask)] = -5.0
    a[:, ::-1][mask] = -5.0
    np.testing.assert_array_equal(npy(t), a)
    w = vals((4, 2, 3))
    t[::-1, [0, 4]] = ev.tensor(w)
    a[::-1, [0, 4]] = w
    np.testing.assert_array_equal(npy(t), a)


def test_losses_random_fills_and_setitem_from_reversed_numpy():
    a, t = pair((5, 4))
    logits, la = t[::-1, ::-1] / 8, a[::-1, ::-1] / 8
    target = np.array([3, 0, 1, 2, 2, 1])
    tt = ev.tensor(target)[::-1][1:]  # [1, 2, 2, 1, 0], negative stride
    tgt = target[::-1][1:]
    lse = np.log(np.exp(la).sum(1))
    want = lse - la[np.arange(5), tgt]
    np.testing.assert_allclose(npy(ev.cross_entropy(logits, tt, reduction="none")), want,
                               rtol=1e-12)
    np.testing.assert_allclose(npy(ev.cross_entropy(logits, tt)), want.mean(), rtol=1e-12)
    np.testing.assert_array_equal(npy(ev.one_hot(tt, 4)), np.eye(4, dtype=np.int64)[tgt])
    # Random fills through a reversed view write exactly its elements.
    z = ev.zeros(6, 5, dtype=ev.float64)
    z[::-2, ::-1].uniform_(1, 2)
    zn = npy(z)
    assert ((zn[1::2] >= 1) & (zn[1::2] < 2)).all() and (zn[::2] == 0).all()
    z[::-1].normal_()
    assert np.isfinite(npy(z)).all() and (npy(z) != 0).all()
    # setitem from NumPy arrays with negative strides.
    t[...] = a[::-1, ::-1]
    np.testing.assert_array_equal(npy(t), a[::-1, ::-1])
    t[::-1, 1] = np.arange(5.0)[::-1]
    b = a[::-1, ::-1].copy()
    b[::-1, 1] = np.arange(5.0)[::-1]
    np.testing.assert_array_equal(npy(t), b)
