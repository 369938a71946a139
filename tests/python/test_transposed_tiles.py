"""Elementwise ops on inputs that are dense along an outer dimension but not
along the innermost (transposed and permuted views, negative steps): the
kernel copies them tile by tile (src/ops/elementwise.c, ew_run). Every
dtype, shapes that are not multiples of the tile, casts on the way in,
in-place forms and outer dimensions around the tiled two, against NumPy."""
import numpy as np
import pytest

import eagervm as ev

RNG = np.random.default_rng(11)
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
# (shape of the base array, the permutation that makes the view)
LAYOUTS = [((1029, 37), (1, 0)), ((8, 64), (1, 0)), ((2000, 9), (1, 0)),
           ((5, 40, 33), (0, 2, 1)), ((40, 3, 33), (2, 1, 0)), ((33, 40, 3), (1, 0, 2))]


def base(shape, dtype):
    if dtype == "bool":
        return RNG.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("float"):
        return RNG.uniform(0.5, 4.0, size=shape).astype(dtype)
    return RNG.integers(0, 100, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,perm", LAYOUTS)
def test_unary_and_binary(dtype, shape, perm):
    a = base(shape, dtype)
    b = base(shape, dtype)
    xa = ev.tensor(a).permute(*perm)
    xb = ev.tensor(b).permute(*perm)
    na, nb = a.transpose(perm), b.transpose(perm)
    got = ev.add(xa, xb).numpy()
    assert got.dtype == np.add(na, nb).dtype
    assert np.array_equal(got, np.add(na, nb))
    # sqrt computes in float: integer inputs are cast on the way in.
    ref = np.sqrt(na.astype(np.float64) if dtype != "float32" else na)
    np.testing.assert_allclose(ev.sqrt(xa).numpy(), ref, rtol=1e-6)
    # A transposed input against a contiguous one of the view's shape.
    nc = np.ascontiguousarray(nb)
    assert np.array_equal(ev.mul(xa, ev.tensor(nc)).numpy(), np.multiply(na, nc))


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "int8"])
def test_negative_steps_and_in_place(dtype):
    a = base((300, 70), dtype)
    x = ev.tensor(a)
    v = x[::-1, ::-2].T  # dense along no dimension: strides -2 and -rows
    na = a[::-1, ::-2].T
    assert np.array_equal(ev.neg(v).numpy(), -na)
    w = x.T[:, ::-1]  # innermost stride a row, the outer one -1 element
    nw = a.T[:, ::-1]
    assert np.array_equal(ev.abs(w).numpy(), np.abs(nw))
    # In place into a contiguous tensor from a transposed one.
    out = ev.tensor(np.zeros((70, 300), dtype))
    out.add_(x.T)
    assert np.array_equal(out.numpy(), a.T)
    # In place on the transposed view itself (output and input share it).
    x2 = ev.tensor(a.copy())
    t = x2.T
    t.add_(ev.tensor(np.ascontiguousarray(a.T)))
    assert np.array_equal(x2.numpy(), a + a)


def test_large_split_over_the_pool():
    a = RNG.standard_normal((1024, 1024)).astype(np.float32)
    x = ev.tensor(a)
    np.testing.assert_allclose(ev.exp(x.T).numpy(), np.exp(a.T), rtol=2e-7)
    assert np.array_equal(ev.sub(x.T, x).numpy(), a.T - a)


@pytest.mark.parametrize("shape", [(1024, 1024), (1040, 1030), (600, 2048), (2048, 513)])
def test_large_transposing_copy_streams_exact(shape):
    # From 4 MB of output a transposing copy writes past the caches
    # (src/tensor/copy.c, STREAM_MIN_BYTES): every element, the ragged
    # edges too, and the result as the next op (on the worker) reads it.
    a = RNG.standard_normal(shape).astype(np.float32)
    x = ev.tensor(a)
    t = x.T.contiguous()
    assert np.array_equal(t.numpy(), a.T)
    assert np.array_equal(ev.add(t, 1.0).numpy(), a.T + np.float32(1.0))


def test_large_transposing_copy_into_unaligned_rows():
    # Destination rows that do not start on a line: the copy stores them
    # through the cache.
    a = RNG.standard_normal((1100, 1024)).astype(np.float32)
    out = ev.zeros(1024, 1107)
    out[:, 3:1103].copy_(ev.tensor(a).T)
    ref = np.zeros((1024, 1107), np.float32)
    ref[:, 3:1103] = a.T
    assert np.array_equal(out.numpy(), ref)
