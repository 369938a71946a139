"""float32 // and % give NumPy's bits (its npy_divmod), on the inputs where
the fast path in src/ops/binary.c could go wrong: quotients next to an
integer, near 2^28 (where it hands over to fmodf), signed zeros, infinities,
NaN, subnormals, and random bit patterns."""
import numpy as np
import pytest

import eagervm as ev


def assert_same_bits(a, b):
    ea, eb = ev.tensor(a), ev.tensor(b)
    with np.errstate(all="ignore"):
        want = {"%": np.remainder(a, b), "//": np.floor_divide(a, b)}
    got = {"%": (ea % eb).numpy(), "//": (ea // eb).numpy()}
    for op in ("%", "//"):
        g, w = got[op], want[op]
        same = (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))
        bad = np.flatnonzero(~same)[:5]
        assert not bad.size, [(op, a[k], b[k], g[k], w[k]) for k in bad]


@pytest.mark.parametrize("scale_a", [1e-30, 1e-3, 1.0, 1e3, 1e9, 1e20, 1e38])
@pytest.mark.parametrize("scale_b", [1e-30, 1e-3, 1.0, 7.0, 1e6, 1e20])
def test_random_magnitudes(scale_a, scale_b):
    rng = np.random.default_rng(0)
    with np.errstate(over="ignore"):
        a = (rng.standard_normal(4000) * scale_a).astype(np.float32)
        b = (rng.standard_normal(4000) * scale_b).astype(np.float32)
    assert_same_bits(a, b)


def test_quotients_next_to_integers():
    rng = np.random.default_rng(1)
    b = rng.uniform(0.1, 10, 50000).astype(np.float32)
    k = np.concatenate([rng.integers(-2**27, 2**27, 40000),
                        rng.integers(2**27, 2**29, 10000)]).astype(np.float64)
    a = (k * b).astype(np.float32)
    for x in (a, np.nextafter(a, np.float32(np.inf)), np.nextafter(a, np.float32(-np.inf))):
        assert_same_bits(x, b)
        assert_same_bits(x, -b)


def test_special_values():
    sp = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 3, -3, 1e-45, -1e-45, 3.4e38,
                   -3.4e38, 2.0**28, -2.0**28], np.float32)
    a, b = np.meshgrid(sp, sp)
    assert_same_bits(a.ravel().copy(), b.ravel().copy())


def test_random_bit_patterns():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    b = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    assert_same_bits(a, b)


def test_in_place_and_scalars():
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(1000) * 100).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    x = ev.tensor(a)
    x %= ev.tensor(b)
    assert (x.numpy() == np.remainder(a, b)).all()
    y = ev.tensor(b)
    y = ev.tensor(a) // y
    assert (y.numpy() == np.floor_divide(a, b)).all()
    assert ((ev.tensor(a) % 1.5).numpy() == np.remainder(a, np.float32(1.5))).all()
