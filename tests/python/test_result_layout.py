"""Results of elementwise ops, where and casts take their operands' memory
layout when every operand of the result's shape is a dense block in one
permuted order (as NumPy's K order and PyTorch's preserve_format): a.T + b.T
is transposed too, and walks memory instead of transposing. Mixed layouts,
views with gaps and only broadcast operands give C order. Values are always
NumPy's."""
import numpy as np
import pytest

import eagervm as ev

RNG = np.random.default_rng(7)


def arrays(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(5, 7), (300, 257), (1024, 1024)])
def test_transposed_operands_give_a_transposed_result(shape):
    an, bn = arrays(*shape), arrays(*shape)
    a, b = ev.tensor(an), ev.tensor(bn)
    cases = [
        (a.T + b.T, an.T + bn.T),
        (ev.exp(a.T), np.exp(an.T)),
        (-a.T, -an.T),
        (a.T * 2, an.T * 2),
        (ev.where(a.T > 0, a.T, b.T), np.where(an.T > 0, an.T, bn.T)),
        (ev.cast(a.T, ev.int64), an.T.astype(np.int64)),
        (a.T.to(ev.float64), an.T.astype(np.float64)),
        (ev.clone(a.T), an.T.copy()),
    ]
    for got, want in cases:
        assert not got.is_contiguous() and got.T.is_contiguous()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    # contiguous() is C order whatever the layout.
    c = ev.contiguous(a.T + b.T)
    assert c.is_contiguous()
    np.testing.assert_allclose(c.numpy(), an.T + bn.T, rtol=1e-6)


def test_permuted_3d_operands_keep_their_order():
    xn = arrays(4, 5, 6)
    x = ev.tensor(xn).permute(2, 0, 1)
    y = ev.sin(x) + x
    assert not y.is_contiguous() and y.permute(1, 2, 0).is_contiguous()
    np.testing.assert_allclose(y.numpy(), np.sin(xn.transpose(2, 0, 1)) + xn.transpose(2, 0, 1),
                               rtol=1e-5)


def test_mixed_and_gapped_layouts_are_c_order():
    an, bn = arrays(6, 6), arrays(6, 6)
    a, b = ev.tensor(an), ev.tensor(bn)
    assert (a + b.T).is_contiguous()
    assert (a.T[::2] + b.T[::2]).is_contiguous()
    # A broadcast row or a scalar says nothing of the layout: the
    # transposed operand decides.
    for r, want in ((a.T + b[:1], an.T + bn[:1]), (a.T + 1.0, an.T + 1)):
        assert r.T.is_contiguous()
        np.testing.assert_allclose(r.numpy(), want, rtol=1e-6)


def test_in_place_ops_on_transposed_views_write_through():
    an = arrays(8, 9)
    a = ev.tensor(an)
    t = a.T
    t.add_(1.0)
    np.testing.assert_allclose(a.numpy(), an + 1, rtol=1e-6)


def test_transposed_results_reuse_memory_while_queued():
    """An op on a transposed tensor gives a transposed result by the dense
    path (pointers only), so its dropped results leave their blocks to the
    next op of the stream, as contiguous ones do."""
    x = ev.ones(1024, 1024).T
    ev.synchronize()
    m = ev.ones(2048, 2048)
    busy = m @ m
    s0 = ev._C._stats()
    for _ in range(50):
        r = -x
        c = ev.cast(x, ev.float64)
    s1 = ev._C._stats()
    assert s1["alloc_stream_reuses"] - s0["alloc_stream_reuses"] >= 50
    del busy
    assert np.all(r.numpy() == -1) and np.all(c.numpy() == 1)
