"""The random ops from Python: the same seed gives bit-identical tensors
whatever the intra-op thread count (EAGERVM_INTRAOP_THREADS, in
subprocesses), the issuing Python thread, the worker Thread (asyncs), or
the layout written (contiguous or a strided view, so the chunking); loose
distribution checks with fixed seeds; and the edges: uniform values stay in
[lo, hi), normals are finite and bounded, every dtype and odd sizes work."""
import hashlib
import math
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import eagervm as ev
from eagervm import asyncs

# Not a multiple of a block (4 words), a vector or a chunk, and large
# enough to split over helper threads.
N = 1_000_003


def _draws(g, n):
    """One of each op from g, as NumPy arrays, in a fixed order."""
    x32 = ev.zeros(n, dtype=ev.float32)
    x64 = ev.zeros(n, dtype=ev.float64)
    out = [ev.rand(n, generator=g), ev.rand(n, generator=g, dtype=ev.float64),
           ev.randn(n, generator=g), ev.randn(n, generator=g, dtype=ev.float64),
           ev.randint(-7, 1000, (n,), generator=g),
           ev.randint(0, 100, (n,), generator=g, dtype=ev.int8),
           ev.randint(-2**63, 2**63 - 1, (n,), generator=g),
           x32.uniform_(-2.0, 3.0, generator=g), x64.normal_(1.0, 2.0, generator=g),
           ev.randperm(n // 10, generator=g)]
    return [t.numpy() for t in out]


DIGEST = """
    import hashlib
    import eagervm as ev
    g = ev.Generator(seed=20261201)
    n = {n}
    x32 = ev.zeros(n, dtype=ev.float32)
    x64 = ev.zeros(n, dtype=ev.float64)
    out = [ev.rand(n, generator=g), ev.rand(n, generator=g, dtype=ev.float64),
           ev.randn(n, generator=g), ev.randn(n, generator=g, dtype=ev.float64),
           ev.randint(-7, 1000, (n,), generator=g),
           ev.randint(0, 100, (n,), generator=g, dtype=ev.int8),
           ev.randint(-2**63, 2**63 - 1, (n,), generator=g),
           x32.uniform_(-2.0, 3.0, generator=g), x64.normal_(1.0, 2.0, generator=g),
           ev.randperm(n // 10, generator=g)]
    print("digest", hashlib.sha256(b"".join(t.numpy().tobytes() for t in out)).hexdigest())
"""


def _digest(arrays):
    return hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest()


def _run(env_extra):
    e = dict(os.environ)
    e.update(env_extra)
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(ev.__file__)) + os.pathsep + \
        e.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(DIGEST.format(n=N))], env=e,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.split("digest ")[1].strip()


def test_same_bits_for_any_intraop_thread_count():
    here = _digest(_draws(ev.Generator(seed=20261201), N))
    for threads in ("1", "2", "3"):
        assert _run({"EAGERVM_INTRAOP_THREADS": threads}) == here, threads


def test_same_bits_from_any_issuing_thread():
    want = _draws(ev.Generator(seed=99), 70_001)
    got = {}

    def work(k):
        got[k] = _draws(ev.Generator(seed=99), 70_001)

    ths = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    for k in range(3):
        for a, b in zip(want, got[k]):
            assert a.tobytes() == b.tobytes()


def test_same_bits_on_any_worker_thread():
    # eagervm's own worker Threads (asyncs): kernels on other workers, while
    # the default worker is busy with the same kind of work.
    want = _draws(ev.Generator(seed=123), 200_003)
    for _ in range(2):
        t = asyncs.Thread()
        with asyncs.thread(t):
            got = _draws(ev.Generator(seed=123), 200_003)
        for a, b in zip(want, got):
            assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_strided_views_get_the_values_of_their_c_order(dtype):
    # A transposed view is filled in its own C order: the same values as a
    # contiguous fill, laid out transposed; a negative-step view likewise.
    for fill in (lambda t, g: t.uniform_(-1.0, 5.0, generator=g),
                 lambda t, g: t.normal_(0.5, 3.0, generator=g)):
        c = ev.zeros(300, 700, dtype=dtype)
        fill(c, ev.Generator(seed=5))
        base = ev.zeros(700, 300, dtype=dtype)
        fill(base.transpose(0, 1), ev.Generator(seed=5))
        assert base.numpy().T.tobytes() == c.numpy().tobytes()
        flat = ev.zeros(2 * 300 * 700, dtype=dtype)
        fill(flat[::-2], ev.Generator(seed=5))
        assert flat.numpy()[::-2].tobytes() == c.numpy().ravel().tobytes()
        # 4-d with a size-1 dimension, outer and inner dimensions swapped.
        c4 = ev.zeros(70, 1, 50, 60, dtype=dtype)
        fill(c4, ev.Generator(seed=6))
        b4 = ev.zeros(60, 1, 50, 70, dtype=dtype)
        fill(b4.transpose(0, 3), ev.Generator(seed=6))
        assert np.ascontiguousarray(b4.numpy().transpose(3, 1, 2, 0)).tobytes() == \
            c4.numpy().tobytes()


def test_uniform_distribution():
    g = ev.Generator(seed=1)
    for dt in ("float32", "float64"):
        u = ev.rand(N, generator=g, dtype=dt).numpy().astype(np.float64)
        assert u.min() >= 0 and u.max() < 1
        assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
        assert abs(u.var() - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / N)
        # Kolmogorov-Smirnov: sup |F_n - F| well below its 0.1% point 1.95 / sqrt(n).
        s = np.sort(u)
        i = np.arange(1, N + 1)
        d = max(np.max(i / N - s), np.max(s - (i - 1) / N))
        assert d < 1.95 / math.sqrt(N), d


def _normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_distribution(dtype):
    z = ev.randn(N, generator=ev.Generator(seed=2), dtype=dtype).numpy()
    assert np.all(np.isfinite(z))
    z = z.astype(np.float64)
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    assert abs(np.mean(z ** 3)) < 5 * math.sqrt(15 / N)          # skewness
    assert abs(np.mean(z ** 4) - 3) < 5 * math.sqrt(96 / N)      # kurtosis
    # KS against the normal CDF on a sorted sample (a subsample keeps erf cheap).
    s = np.sort(z[:200_000])
    n = len(s)
    f = _normal_cdf(s)
    i = np.arange(1, n + 1)
    d = max(np.max(i / n - f), np.max(f - (i - 1) / n))
    assert d < 1.95 / math.sqrt(n), d
    # The tails: the share beyond 3 sigma (0.0027) within 5 binomial errors.
    p = 0.0026997960632601866
    assert abs(np.mean(np.abs(z) > 3) - p) < 5 * math.sqrt(p * (1 - p) / N)


def test_normal_pairs_are_independent():
    # Elements 2j and 2j+1 are cos and sin of one pair: uncorrelated.
    z = ev.randn(N - 1, generator=ev.Generator(seed=3), dtype=ev.float64).numpy()
    assert abs(np.mean(z[0::2] * z[1::2])) < 5 / math.sqrt(N / 2)
    assert abs(np.mean(z[1:-1:2] * z[2::2])) < 5 / math.sqrt(N / 2)


def test_randint_distribution():
    r = ev.randint(0, 10, (N,), generator=ev.Generator(seed=4)).numpy()
    counts = np.bincount(r, minlength=10)
    assert len(counts) == 10
    chi2 = np.sum((counts - N / 10) ** 2 / (N / 10))
    assert chi2 < 33.7  # 9 degrees of freedom, 0.01% point
    w = ev.randint(-2**63, 2**63 - 1, (N,), generator=ev.Generator(seed=4)).numpy()
    assert (w < 0).mean() == pytest.approx(0.5, abs=5 * 0.5 / math.sqrt(N))
    top = ev.randint(0, 2**32, (N,), generator=ev.Generator(seed=4)).numpy()
    assert top.min() >= 0 and top.max() < 2**32 and top.max() > 2**32 - 2**24


def test_uniform_never_reaches_hi():
    g = ev.Generator(seed=6)
    # Spans where float32 rounding of lo + span u would reach hi.
    for lo, hi in ((1.0, 1.0 + 2**-22), (-1.0, -1.0 + 2**-23), (1e30, 1.0000001e30)):
        t = ev.zeros(100_000, dtype=ev.float32)
        v = t.uniform_(lo, hi, generator=g).numpy()
        assert v.min() >= np.float32(lo) and v.max() < np.float32(hi)
    t = ev.zeros(100_000, dtype=ev.float64)
    v = t.uniform_(3.0, 3.0 + 2**-50, generator=g).numpy()
    assert v.min() >= 3.0 and v.max() < 3.0 + 2**-50
    # rand itself: multiples of 2^-24 (float32) and 2^-53 (float64), never 1.
    u = ev.rand(N, generator=g).numpy().astype(np.float64)
    assert u.max() < 1 and np.all(u * 2**24 == np.floor(u * 2**24))
    u = ev.rand(N, generator=g, dtype=ev.float64).numpy()
    assert u.max() < 1 and np.all(u * 2**53 == np.floor(u * 2**53))


def test_normal_edges():
    g = ev.Generator(seed=7)
    for dt, bound in (("float32", 6.8), ("float64", 8.6)):
        z = ev.randn(N, generator=g, dtype=dt).numpy()
        assert np.all(np.isfinite(z)) and np.abs(z).max() < bound
    t = ev.zeros(1001, dtype=ev.float32)
    assert np.all(t.normal_(5.0, 0.0, generator=g).numpy() == 5.0)
    big = t.normal_(0.0, 1e38, generator=g).numpy()
    assert np.all(np.isfinite(big) | (np.abs(big) == np.inf))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 1023, 1025])
def test_small_and_odd_sizes(n):
    g = ev.Generator(seed=8)
    state = g.get_state()
    for dt in ("float32", "float64"):
        for op in (ev.rand, ev.randn):
            g.set_state(state)
            a = op(n, generator=g, dtype=dt).numpy()
            g.set_state(state)
            b = op(n + 3, generator=g, dtype=dt).numpy()
            # A longer call from the same state starts with the same values.
            assert a.shape == (n,) and a.tobytes() == b[:n].tobytes()
    for dt in ("uint8", "int8", "int16", "int32", "int64"):
        r = ev.randint(0, 50, (n,), generator=g, dtype=dt).numpy()
        assert r.dtype == dt and r.shape == (n,) and (n == 0 or (r.min() >= 0 and r.max() < 50))
    p = ev.randperm(n, generator=g).numpy()
    assert sorted(p.tolist()) == list(range(n))


def test_zero_d_and_empty():
    g = ev.Generator(seed=9)
    for op in (ev.rand, ev.randn):
        assert op((), generator=g).shape == ()
        assert op(0, 5, generator=g).shape == (0, 5)
    x = ev.zeros((), dtype=ev.float64)
    v = float(x.uniform_(2.0, 3.0, generator=g).numpy())
    assert 2.0 <= v < 3.0


def test_randperm_is_a_permutation_and_uniform():
    g = ev.Generator(seed=10)
    p = ev.randperm(N, generator=g).numpy()
    assert np.array_equal(np.sort(p), np.arange(N))
    # Position 0's value over many small permutations: uniform over 0..4.
    first = np.array([ev.randperm(5, generator=g).numpy()[0] for _ in range(5000)])
    counts = np.bincount(first, minlength=5)
    assert np.sum((counts - 1000) ** 2 / 1000) < 23.5  # 4 degrees of freedom, 0.01%
