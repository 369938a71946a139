"""one_hot, cross_entropy and randperm against NumPy references (and
PyTorch's where it is installed): values for both index dtypes, strided
inputs, every reduction, large logits, indices out of range failing at the
next sync with IndexError, argument errors, and randperm being a
permutation that depends only on the generator's state, not on the worker."""
import numpy as np
import pytest

import eagervm as ev
from eagervm import asyncs

try:
    import torch
except ImportError:  # optional
    torch = None

RNG = np.random.default_rng(11)


def np_one_hot(index, c):
    return (np.asarray(index)[..., None] == np.arange(c)).astype(np.int64)


def np_cross_entropy(x, t, reduction="mean"):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    loss = lse - x[np.arange(len(t)), t]
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


# ----------------------------------------------------------------- one_hot

@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_one_hot_values(dtype):
    idx = RNG.integers(0, 7, size=(3, 4)).astype(dtype)
    got = ev.one_hot(ev.tensor(idx), 7)
    assert got.dtype == ev.int64 and got.shape == (3, 4, 7)
    np.testing.assert_array_equal(got.numpy(), np_one_hot(idx, 7))
    # A transposed view follows its logical order.
    t = ev.tensor(idx).transpose(0, 1)
    np.testing.assert_array_equal(ev.one_hot(t, num_classes=9).numpy(), np_one_hot(idx.T, 9))
    if torch is not None:
        want = torch.nn.functional.one_hot(torch.from_numpy(idx.astype(np.int64)), 7)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_one_hot_infers_num_classes():
    idx = np.array([[2, 0], [5, 1]])
    got = ev.one_hot(ev.tensor(idx))  # -1: max + 1 = 6, a sync point
    assert got.shape == (2, 2, 6)
    np.testing.assert_array_equal(got.numpy(), np_one_hot(idx, 6))
    np.testing.assert_array_equal(ev.one_hot([1, 0]).numpy(), [[0, 1], [1, 0]])
    # 0-d index.
    np.testing.assert_array_equal(ev.one_hot(ev.tensor(3), 4).numpy(), [0, 0, 0, 1])
    with pytest.raises(ValueError, match="empty index"):
        ev.one_hot(ev.zeros(0, dtype=ev.int64))
    assert ev.one_hot(ev.zeros(0, dtype=ev.int64), 3).shape == (0, 3)
    with pytest.raises(IndexError, match="index -1 is out of range"):
        ev.one_hot(ev.tensor([-1, -3]))


def test_one_hot_errors():
    # The call returns at once; the sync reports (at the call under EAGERVM_SYNC=1).
    with pytest.raises(IndexError, match="one_hot: index 4 is out of range for num_classes 4"):
        ev.one_hot(ev.tensor([0, 4, 1]), 4).numpy()
    with pytest.raises(IndexError, match="index -2 is out of range for num_classes 5"):
        ev.one_hot(ev.tensor([1, -2]), 5).numpy()
    # Still usable.
    np.testing.assert_array_equal(ev.one_hot(ev.tensor([1]), 2).numpy(), [[0, 1]])
    with pytest.raises(ValueError, match="num_classes must be > 0"):
        ev.one_hot(ev.tensor([0]), 0)
    with pytest.raises(TypeError, match="one_hot: index must have an integer dtype, not float32"):
        ev.one_hot(ev.tensor([0.5]), 2)
    with pytest.raises(TypeError, match="index must have an integer dtype, not bool"):
        ev.one_hot(ev.tensor([True]), 2)
    with pytest.raises(TypeError, match="num_classes must be an integer"):
        ev.one_hot(ev.tensor([0]), 2.0)


# ----------------------------------------------------------- cross_entropy

@pytest.mark.parametrize("fdtype,rtol", [("float32", 2e-6), ("float64", 1e-12)])
@pytest.mark.parametrize("tdtype", ["uint8", "int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_values(fdtype, rtol, tdtype, reduction):
    x = (RNG.standard_normal((17, 10)) * 4).astype(fdtype)
    t = RNG.integers(0, 10, size=17).astype(tdtype)
    got = ev.cross_entropy(ev.tensor(x), ev.tensor(t), reduction=reduction)
    want = np_cross_entropy(x, t, reduction)
    assert got.dtype == getattr(ev, fdtype)
    assert got.shape == ((17,) if reduction == "none" else ())
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol)
    if torch is not None:
        tw = torch.nn.functional.cross_entropy(torch.from_numpy(x),
                                               torch.from_numpy(t.astype(np.int64)),
                                               reduction=reduction)
        np.testing.assert_allclose(got.numpy(), tw.numpy(), rtol=1e-5, atol=1e-6)


def test_cross_entropy_default_is_mean_and_stable():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1005.0]], dtype=np.float32)
    t = np.array([1, 2])
    got = ev.cross_entropy(ev.tensor(x), ev.tensor(t))
    assert np.isfinite(got.item())
    np.testing.assert_allclose(got.item(), np_cross_entropy(x, t), rtol=1e-6)
    # Plain lists work for the target; a NaN logit gives NaN for its row.
    y = ev.cross_entropy(ev.tensor([[0.0, np.nan], [1.0, 2.0]]), [0, 1], reduction="none")
    r = y.numpy()
    assert np.isnan(r[0]) and np.isclose(r[1], np_cross_entropy([[1.0, 2.0]], [1], "none")[0])


def test_cross_entropy_strided_and_empty():
    base = RNG.standard_normal((6, 8))
    x = ev.tensor(base).transpose(0, 1)  # (8, 6), non-contiguous
    t = ev.tensor(np.arange(16) % 6)[::2]  # strided target of 8
    np.testing.assert_allclose(ev.cross_entropy(x, t, reduction="none").numpy(),
                               np_cross_entropy(base.T, (np.arange(16) % 6)[::2], "none"),
                               rtol=1e-12)
    e = ev.zeros(0, 5)
    et = ev.zeros(0, dtype=ev.int64)
    assert ev.cross_entropy(e, et, reduction="none").shape == (0,)
    assert ev.cross_entropy(e, et, reduction="sum").item() == 0.0
    assert np.isnan(ev.cross_entropy(e, et).item())


def test_cross_entropy_errors():
    x = ev.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    with pytest.raises(IndexError,
                       match=r"target 4 is out of range for 4 classes \(sample 1\)"):
        ev.cross_entropy(x, ev.tensor([0, 4, 1])).item()
    with pytest.raises(IndexError, match="target -1 is out of range for 4 classes"):
        ev.cross_entropy(x, ev.tensor([0, 1, -1]), reduction="none").numpy()
    assert np.isfinite(ev.cross_entropy(x, ev.tensor([0, 1, 2])).item())  # still usable
    with pytest.raises(ValueError, match="reduction must be 'none', 'mean' or 'sum'"):
        ev.cross_entropy(x, ev.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match="reduction must be"):
        ev.cross_entropy(x, ev.tensor([0, 1, 2]), reduction=None)
    with pytest.raises(ValueError, match=r"logits \(N, C\) and target \(N,\)"):
        ev.cross_entropy(x, ev.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"got logits \[4\]"):
        ev.cross_entropy(ev.tensor([0.0, 1.0, 2.0, 3.0]), ev.tensor([0]))
    with pytest.raises(TypeError, match="logits must be float32 or float64"):
        ev.cross_entropy(ev.tensor([[1, 2]]), ev.tensor([0]))
    with pytest.raises(TypeError, match="target must have an integer dtype, not float32"):
        ev.cross_entropy(x, ev.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(TypeError, match="expected a Tensor"):
        ev.cross_entropy([[1.0, 2.0]], ev.tensor([0]))


# ---------------------------------------------------------------- randperm

@pytest.mark.parametrize("n", [0, 1, 2, 5, 1000, 60000])
def test_randperm_is_permutation(n):
    p = ev.randperm(n)
    assert p.dtype == ev.int64 and p.shape == (n,)
    np.testing.assert_array_equal(np.sort(p.numpy()), np.arange(n))
    for dt in (ev.int32, ev.int16, ev.int8, ev.uint8):
        if n - 1 > np.iinfo(dt.name).max:
            with pytest.raises(ValueError, match=f"n = {n} does not fit dtype {dt.name}"):
                ev.randperm(n, dtype=dt)
            continue
        p32 = ev.randperm(n, dtype=dt)
        assert p32.dtype == dt
        np.testing.assert_array_equal(np.sort(p32.numpy()), np.arange(n))


def test_randperm_same_state_same_result():
    g = ev.Generator(seed=42)
    s = g.get_state()
    a = ev.randperm(5000, generator=g).numpy()
    assert g.get_state() == (42, s[1] + 10000)  # 2 words per element
    b = ev.randperm(5000, generator=g).numpy()
    assert not np.array_equal(a, b)
    g.set_state(s)
    np.testing.assert_array_equal(ev.randperm(5000, generator=g).numpy(), a)
    # A fresh generator with the same seed agrees; another seed does not.
    np.testing.assert_array_equal(ev.randperm(5000, generator=ev.Generator(seed=42)).numpy(),
                                  a)
    assert not np.array_equal(ev.randperm(5000, generator=ev.Generator(seed=43)).numpy(), a)
    # The default generator follows manual_seed.
    ev.manual_seed(7)
    c = ev.randperm(100).numpy()
    ev.manual_seed(7)
    np.testing.assert_array_equal(ev.randperm(100).numpy(), c)


def test_randperm_worker_independent():
    g = ev.Generator(seed=9)
    s = g.get_state()
    want = ev.randperm(3001, generator=g).numpy()
    for _ in range(2):
        t = asyncs.Thread()
        g.set_state(s)
        with asyncs.thread(t):
            got = ev.randperm(3001, generator=g)
        np.testing.assert_array_equal(got.numpy(), want)


def test_randperm_roughly_uniform():
    g = ev.Generator(seed=1)
    firsts = np.array([ev.randperm(4, generator=g)[0].item() for _ in range(800)])
    counts = np.bincount(firsts, minlength=4)
    assert counts.min() > 140 and counts.max() < 260  # 200 each expected


def test_randperm_errors():
    with pytest.raises(ValueError, match="n must be >= 0"):
        ev.randperm(-1)
    with pytest.raises(TypeError, match="expected an integer dtype"):
        ev.randperm(3, dtype=ev.float32)
    with pytest.raises(TypeError, match="n must be an integer"):
        ev.randperm(3.0)
    with pytest.raises(TypeError, match="generator must be an eagervm.Generator"):
        ev.randperm(3, generator=5)
    with pytest.raises(TypeError):
        ev.randperm(3, None)  # generator is keyword-only
