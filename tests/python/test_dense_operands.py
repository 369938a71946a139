"""Dense elementwise instructions whose inputs are not all in the loop's
dtype: a broadcast scalar (x * 0.05, a 0-d tensor) and a dense input of
another dtype (floats times a bool mask, int32 plus float64) run the fast
path block by block. Values against NumPy at sizes around the block
(1,024) and past the split over the intra-op threads, in place too."""
import numpy as np
import pytest

import eagervm as ev

SIZES = [1, 1023, 1025, 4096, 300001]
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
