"""eagervm.nn: each layer and loss against NumPy references (always) and PyTorch
on the same weights and inputs (forward values and the gradients of the input
and the parameters; skipped without torch), gradcheck in float64 on each
functional, the Module API (registration, names, state dicts, modes), and the
init functions' distributions."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import eagervm as ev
from eagervm import nn
from eagervm.autograd import gradcheck
from eagervm.nn import functional as F
from eagervm.nn import init

try:
    import torch
except ImportError:  # the PyTorch comparisons are skipped, the rest runs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

RNG = np.random.default_rng(1234)


def _f32(*shape, scale=1.0):
    return np.asarray(RNG.standard_normal(shape) * scale, dtype=np.float32)


def _ev(a, requires_grad=False, dtype=None):
    a = np.asarray(a)
    return ev.tensor(a, dtype=dtype, requires_grad=requires_grad)


def _close(a, b, rtol=1e-5, atol=1e-5):
    a = a.numpy() if isinstance(a, ev.Tensor) else a
    b = b.detach().numpy() if torch is not None and isinstance(b, torch.Tensor) else b
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                               rtol=rtol, atol=atol)


def _to_torch(module_ev, module_t):
    """Gives the torch module the eagervm module's parameters and buffers."""
    with torch.no_grad():
        names = dict(module_t.named_parameters())
        names.update(dict(module_t.named_buffers()))
        for name, value in module_ev.state_dict().items():
            names[name].copy_(torch.from_numpy(value.numpy().copy()))


def _compare_module(module_ev, module_t, x, rtol=1e-5, atol=1e-5, grad_x=True):
    """Forward and backward of both modules on x (NumPy) with the same random output
    gradient; compares the output, x's gradient and every parameter's gradient."""
    _to_torch(module_ev, module_t)
    xe = _ev(x, requires_grad=grad_x)
    xt = torch.tensor(x, requires_grad=grad_x)
    ye, yt = module_ev(xe), module_t(xt)
    _close(ye, yt, rtol, atol)
    g = _f32(*yt.shape)
    (ye * _ev(g)).sum().backward()
    (yt * torch.from_numpy(g)).sum().backward()
    if grad_x:
        _close(xe.grad, xt.grad, rtol, atol)
    tparams = dict(module_t.named_parameters())
    for name, p in module_ev.named_parameters():
        assert p.grad is not None, name
        _close(p.grad, tparams[name].grad, rtol, atol)
    return ye


# ---------------------------------------------------------------- layers vs NumPy

def _np_layer_norm(x, shape, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def _np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _np_gelu(x):
    from math import erf
    return x * 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def test_linear_forward_matches_numpy_for_batched_inputs():
    lin = nn.Linear(4, 3)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    for shape in [(4,), (5, 4), (2, 5, 4), (0, 4)]:
        x = _f32(*shape)
        _close(lin(_ev(x)), x @ w.T + b)
    # PyTorch's device and dtype keywords (eagervm has the CPU only)
    lin64 = nn.Linear(4, 3, device="cpu", dtype=ev.float64)
    assert lin64.weight.dtype == ev.float64 and lin64(_ev(_f32(2, 4))).dtype == ev.float64
    assert nn.LayerNorm(3, device="cpu", dtype=ev.float64).bias.dtype == ev.float64
    assert nn.Embedding(3, 2, device="cpu", dtype=ev.float64).weight.dtype == ev.float64
    with pytest.raises(TypeError, match="float dtype"):
        nn.Linear(2, 2, dtype=ev.int64)
    with pytest.raises(ValueError, match="non-negative int"):
        nn.Linear(-1, 2)
    nob = nn.Linear(4, 3, bias=False)
    assert nob.bias is None and [n for n, _ in nob.named_parameters()] == ["weight"]
    x = _f32(2, 4)
    _close(nob(_ev(x)), x @ nob.weight.numpy().T)


def test_activations_match_numpy():
    x = _f32(3, 5)
    xe = _ev(x)
    _close(nn.ReLU()(xe), np.maximum(x, 0))
    _close(nn.Sigmoid()(xe), 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    _close(nn.Tanh()(xe), np.tanh(x), rtol=1e-5, atol=1e-6)
    _close(nn.GELU()(xe), _np_gelu(x), rtol=1e-5, atol=1e-6)
    tanh_ref = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    _close(nn.GELU("tanh")(xe), tanh_ref, rtol=1e-5, atol=1e-6)
    _close(nn.Softmax(dim=1)(xe), np.exp(_np_log_softmax(x, 1)), atol=1e-6)
    _close(nn.Softmax(dim=0)(xe), np.exp(_np_log_softmax(x, 0)), atol=1e-6)
    _close(F.log_softmax(xe, dim=1), _np_log_softmax(x, 1), atol=1e-5)
    as64 = F.softmax(xe, dim=1, dtype=ev.float64)
    assert as64.dtype == ev.float64
    _close(as64, np.exp(_np_log_softmax(x.astype(np.float64), 1)), rtol=1e-6, atol=1e-7)
    # strided input (a transposed view) and a 0-d tensor
    _close(nn.ReLU()(xe.T), np.maximum(x.T, 0))
    _close(nn.Tanh()(_ev(np.float32(0.5))), np.tanh(np.float32(0.5)))


def test_relu_inplace_writes_its_input():
    x = _ev(_f32(4))
    y = nn.ReLU(inplace=True)(x)
    assert y is x or (y.numpy() == x.numpy()).all()
    assert (x.numpy() >= 0).all()


def test_softmax_without_dim_warns_and_takes_pytorchs_choice():
    x = _ev(_f32(2, 3))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = nn.Softmax()(x)
    _close(y, np.exp(_np_log_softmax(x.numpy(), 1)), atol=1e-6)


def test_layer_norm_matches_numpy():
    x = _f32(2, 3, 4, scale=3.0) + 1.0
    ln = nn.LayerNorm(4)
    assert (ln.weight.numpy() == 1).all() and (ln.bias.numpy() == 0).all()
    _close(ln(_ev(x)), _np_layer_norm(x, (4,)), atol=1e-5)
    ln2 = nn.LayerNorm((3, 4), eps=1e-3)
    with ev.no_grad():
        ln2.weight.copy_(_ev(_f32(3, 4)))
        ln2.bias.copy_(_ev(_f32(3, 4)))
    _close(ln2(_ev(x)), _np_layer_norm(x, (3, 4), ln2.weight.numpy(), ln2.bias.numpy(), 1e-3),
           atol=1e-5)
    plain = nn.LayerNorm(4, elementwise_affine=False)
    assert list(plain.parameters()) == []
    _close(plain(_ev(x)), _np_layer_norm(x, (4,)), atol=1e-5)
    with pytest.raises(RuntimeError, match=r"normalized_shape=\[4\].*size\[2, 5\]"):
        ln(_ev(_f32(2, 5)))


def test_embedding_matches_numpy_and_zeroes_the_padding_row():
    emb = nn.Embedding(10, 3)
    idx = np.array([[1, 2, 9], [0, 1, 1]])
    _close(emb(_ev(idx)), emb.weight.numpy()[idx])
    _close(emb(_ev(np.int64(4))), emb.weight.numpy()[4])
    pad = nn.Embedding(6, 2, padding_idx=-1)
    assert pad.padding_idx == 5 and (pad.weight.numpy()[5] == 0).all()
    with pytest.raises(TypeError, match="integer"):
        emb(_ev(_f32(2)))
    with pytest.raises(ValueError, match="Padding_idx"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.Embedding(4, 2, sparse=True)


def test_embedding_max_norm_and_scale_grad_by_freq():
    emb = nn.Embedding(4, 2, max_norm=1.0)
    with ev.no_grad():
        emb.weight.copy_(_ev(np.array([[3, 4], [0.3, 0.4], [6, 8], [1, 0]], np.float32)))
    out = emb(_ev(np.array([0, 1, 0])))
    want = np.array([[0.6, 0.8], [0.3, 0.4], [0.6, 0.8]])
    _close(out, want, atol=1e-6)
    _close(emb.weight.numpy()[2], [6, 8])  # not looked up: unchanged
    freq = nn.Embedding(3, 2, scale_grad_by_freq=True)
    freq(_ev(np.array([0, 0, 0, 2]))).sum().backward()
    _close(freq.weight.grad, [[1, 1], [0, 0], [1, 1]])  # three hits of row 0 count as one


def test_embedding_padding_index_gets_no_gradient():
    emb = nn.Embedding(5, 3, padding_idx=0)
    with ev.no_grad():
        emb.weight.copy_(_ev(_f32(5, 3)))  # a nonzero padding row still reads as itself
    idx = _ev(np.array([0, 2, 0, 4, 2]))
    out = emb(idx)
    _close(out, emb.weight.numpy()[idx.numpy()])
    out.sum().backward()
    want = np.zeros((5, 3), np.float32)
    for i in (2, 4, 2):
        want[i] += 1
    _close(emb.weight.grad, want)


def test_embedding_from_pretrained_shares_and_freezes():
    w = _ev(_f32(4, 2))
    emb = nn.Embedding.from_pretrained(w)
    assert not emb.weight.requires_grad and [n for n, _ in emb.named_parameters()] == ["weight"]
    _close(emb(_ev(np.array([3]))), w.numpy()[[3]])
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad


def test_dropout_masks_scales_and_is_the_identity_in_eval():
    ev.manual_seed(7)
    drop = nn.Dropout(0.25)
    x = _ev(np.ones((200, 100), np.float32) * 2, requires_grad=True)
    y = drop(x)
    yn = y.numpy()
    kept = yn != 0
    np.testing.assert_allclose(yn[kept], 2 / 0.75, rtol=1e-6)
    assert abs(1 - kept.mean() - 0.25) < 0.02  # 20,000 draws: 4 standard deviations
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.75, rtol=1e-6)
    drop.eval()
    assert drop(x) is x
    assert F.dropout(x, 0.5, training=False) is x
    assert (F.dropout(x, 1.0).numpy() == 0).all()
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, -0.1)
    # the mask is in the input's dtype (float64 stays exact) and NaNs stay NaN
    x64 = ev.ones(1000, dtype=ev.float64)
    y64 = F.dropout(x64, 0.3)
    assert y64.dtype == ev.float64
    assert set(np.unique(y64.numpy())) <= {0.0, 1 / 0.7}
    assert np.isnan(F.dropout(ev.full((16,), float("nan")), 0.5).numpy()).all()
    # inplace writes the input
    z = ev.ones(100)
    assert F.dropout(z, 0.5, inplace=True) is z and (z.numpy() == 0).any()


def test_dropout_is_reproducible_under_manual_seed():
    x = ev.ones(50, 20)
    ev.manual_seed(3)
    a = F.dropout(x, 0.5).numpy()
    ev.manual_seed(3)
    b = F.dropout(x, 0.5).numpy()
    assert (a == b).all()


def test_layers_on_views_and_empty_tensors():
    x = _f32(6, 4)
    xe = _ev(x)
    lin = nn.Linear(6, 3)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    _close(lin(xe.T), x.T @ w.T + b)  # transposed input
    ln = nn.LayerNorm(2)
    _close(ln(xe[::-1, ::-2]), _np_layer_norm(x[::-1, ::-2], (2,)), atol=1e-5)  # negative steps
    _close(nn.GELU()(xe[:1].expand(3, 4)), _np_gelu(np.broadcast_to(x[:1], (3, 4))), atol=1e-6)
    emb = nn.Embedding(5, 2)
    idx = np.array([[0, 1, 2], [3, 4, 0]])
    _close(emb(_ev(idx).T), emb.weight.numpy()[idx.T])  # a strided index
    t = np.array([0, 1, 2, 3])
    _close(F.cross_entropy(xe[:4].T.T, _ev(t)), _np_nll(_np_log_softmax(x[:4], 1), t),
           atol=1e-5)
    # empty batches: shapes kept; a mean over nothing is NaN, as in PyTorch
    assert lin(ev.zeros(0, 6)).shape == (0, 3)
    assert ln(ev.zeros(0, 2)).shape == (0, 2)
    assert emb(ev.tensor(np.zeros((0, 3), np.int64))).shape == (0, 3, 2)
    empty_t = ev.tensor(np.zeros(0, np.int64))
    assert math.isnan(F.cross_entropy(ev.zeros(0, 3), empty_t).item())
    assert F.cross_entropy(ev.zeros(0, 3), empty_t, reduction="sum").item() == 0
    assert F.nll_loss(ev.zeros(0, 3), empty_t, reduction="none").shape == (0,)
    # integer class indices of any integer dtype
    t32 = ev.tensor(t, dtype=ev.int32)
    _close(F.cross_entropy(xe[:4], t32), F.cross_entropy(xe[:4], _ev(t)))
    _close(F.nll_loss(xe[:4], t32), F.nll_loss(xe[:4], _ev(t)))


# ---------------------------------------------------------------- losses vs NumPy

def _np_nll(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    n = logp.shape[0]
    w = np.ones(logp.shape[1]) if weight is None else weight
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    picked = logp[np.arange(n), safe]
    wt = w[safe] * valid
    loss = -picked * wt
    if reduction == "none":
        return loss
    return loss.sum() / wt.sum() if reduction == "mean" else loss.sum()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_losses_match_numpy(reduction):
    x = _f32(6, 4)
    t = np.array([0, 3, 1, 1, 2, 3])
    w = np.abs(_f32(4)) + 0.5
    logp = _np_log_softmax(x.astype(np.float64), 1)
    ce = nn.CrossEntropyLoss(reduction=reduction)
    _close(ce(_ev(x), _ev(t)), _np_nll(logp, t, reduction=reduction), atol=1e-5)
    wce = nn.CrossEntropyLoss(weight=_ev(w), reduction=reduction)
    _close(wce(_ev(x), _ev(t)), _np_nll(logp, t, w, reduction=reduction), atol=1e-5)
    ti = t.copy()
    ti[[1, 4]] = -100
    _close(ce(_ev(x), _ev(ti)), _np_nll(logp, ti, reduction=reduction), atol=1e-5)
    nll = nn.NLLLoss(weight=_ev(w), ignore_index=1, reduction=reduction)
    _close(nll(_ev(logp.astype(np.float32)), _ev(t)),
           _np_nll(logp, t, w, ignore_index=1, reduction=reduction), atol=1e-5)
    y = _f32(6, 4)
    sq = (x - y) ** 2
    want = {"none": sq, "mean": sq.mean(), "sum": sq.sum()}[reduction]
    _close(nn.MSELoss(reduction=reduction)(_ev(x), _ev(y)), want, atol=1e-5)


def test_loss_arguments_are_checked():
    x, t = _ev(_f32(3, 4)), _ev(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.cross_entropy(x, t, reduction="max")
    with pytest.raises(TypeError, match="integer tensor of class indices"):
        F.nll_loss(x, _ev(_f32(3)))
    with pytest.raises(ValueError, match="batch_size"):
        F.nll_loss(x, _ev(np.array([0, 1])))
    with pytest.raises(ValueError, match="weight must have shape"):
        F.cross_entropy(x, t, weight=ev.ones(3))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        F.nll_loss(ev.tensor(1.0), ev.tensor(0))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(ValueError, match="does not end in in_features"):
        F.linear(x, ev.ones(2, 3))
    with pytest.warns(DeprecationWarning, match="size_average"):
        legacy = nn.MSELoss(size_average=False)
    assert legacy.reduction == "sum"
    with pytest.warns(DeprecationWarning):
        assert F.nll_loss(x, t, reduce=False).shape == (3,)
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(x, ev.ones(4))


# ---------------------------------------------------------------- against PyTorch

@needs_torch
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(shape, bias):
    lin = nn.Linear(4, 3, bias=bias)
    _compare_module(lin, torch.nn.Linear(4, 3, bias=bias), _f32(*shape))


@needs_torch
@pytest.mark.parametrize("name,args", [("ReLU", ()), ("GELU", ()), ("GELU", ("tanh",)),
                                       ("Sigmoid", ()), ("Tanh", ()), ("Softmax", (1,)),
                                       ("Softmax", (-1,))])
def test_activations_match_torch(name, args):
    x = _f32(3, 5, scale=2.0)
    _compare_module(getattr(nn, name)(*args), getattr(torch.nn, name)(*args), x, atol=2e-6)


@needs_torch
@pytest.mark.parametrize("shape,affine", [((4,), True), ((3, 4), True), ((4,), False)])
def test_layer_norm_matches_torch(shape, affine):
    ln = nn.LayerNorm(shape, elementwise_affine=affine)
    if affine:  # not the ones and zeros of a fresh layer: the gradients differ per element
        with ev.no_grad():
            ln.weight.copy_(_ev(_f32(*shape)))
            ln.bias.copy_(_ev(_f32(*shape)))
    x = _f32(2, 3, 4, scale=2.0) + 0.5
    _compare_module(ln, torch.nn.LayerNorm(shape, elementwise_affine=affine), x, atol=2e-5)


@needs_torch
@pytest.mark.parametrize("kw", [{"padding_idx": 2}, {"max_norm": 1.0},
                                {"max_norm": 2.0, "norm_type": 1.0},
                                {"max_norm": 1.5, "norm_type": math.inf},
                                {"scale_grad_by_freq": True},
                                {"scale_grad_by_freq": True, "padding_idx": 2}],
                         ids=lambda kw: ",".join(kw))
def test_embedding_matches_torch(kw):
    emb = nn.Embedding(7, 3, **kw)
    temb = torch.nn.Embedding(7, 3, **kw)
    with ev.no_grad():  # rows of norm about 5: max_norm renormalises some
        emb.weight.copy_(_ev(_f32(7, 3, scale=3.0)))
    _to_torch(emb, temb)
    assert repr(emb) == repr(temb)
    idx = np.array([[0, 2, 6], [2, 1, 0]])
    ye, yt = emb(_ev(idx)), temb(torch.from_numpy(idx))
    _close(ye, yt)
    _close(emb.weight, temb.weight)  # max_norm changed the same rows in place
    g = _f32(2, 3, 3)
    (ye * _ev(g)).sum().backward()
    (yt * torch.from_numpy(g)).sum().backward()
    _close(emb.weight.grad, temb.weight.grad)


@needs_torch
def test_sequential_mlp_matches_torch():
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Dropout(0.3),
                          nn.Linear(8, 3), nn.Tanh())
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8),
                                 torch.nn.Dropout(0.3), torch.nn.Linear(8, 3), torch.nn.Tanh())
    model.eval()
    tmodel.eval()
    _compare_module(model, tmodel, _f32(5, 4), atol=2e-5)
    assert repr(model) == repr(tmodel)


def _compare_loss(loss_ev, loss_t, x, target, grad_x=True, atol=1e-5):
    xe, xt = _ev(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    te = _ev(target)
    tt = torch.from_numpy(target)
    le, lt = loss_ev(xe, te), loss_t(xt, tt)
    _close(le, lt, atol=atol)
    g = _f32(*lt.shape)
    (le * _ev(g)).sum().backward()
    (lt * torch.from_numpy(g)).sum().backward()
    _close(xe.grad, xt.grad, atol=atol)


@needs_torch
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", ["plain", "weight", "ignore", "smoothing", "weight_smoothing",
                                  "spatial", "single", "probs", "probs_smoothing"])
def test_cross_entropy_matches_torch(reduction, case):
    x = _f32(6, 5, scale=2.0)
    t = np.array([0, 4, 1, 1, 2, 3])
    kw = {}
    w = np.abs(_f32(5)) + 0.5
    if "weight" in case:
        kw["weight"] = w
    if "smoothing" in case:
        kw["label_smoothing"] = 0.2
    if case == "ignore":
        t[[0, 3]] = -100
    if case == "spatial":
        x, t = _f32(2, 5, 3, 2), RNG.integers(0, 5, (2, 3, 2))
        t[0, 1, 1] = -100
    if case == "single":
        x, t = _f32(5), np.array(3)
    if case.startswith("probs"):
        t = np.exp(_np_log_softmax(_f32(6, 5), 1)).astype(np.float32)
    ev_kw = {k: _ev(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    t_kw = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    _compare_loss(nn.CrossEntropyLoss(reduction=reduction, **ev_kw),
                  torch.nn.CrossEntropyLoss(reduction=reduction, **t_kw), x, t)


@needs_torch
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", ["plain", "weight", "ignore", "spatial", "single"])
def test_nll_loss_matches_torch(reduction, case):
    logp = _np_log_softmax(_f32(6, 5), 1).astype(np.float32)
    t = np.array([0, 4, 1, 1, 2, 3])
    kw = {}
    if case == "weight":
        kw["weight"] = np.abs(_f32(5)) + 0.5
    if case == "ignore":
        kw["ignore_index"] = 1
    if case == "spatial":
        logp = _np_log_softmax(_f32(2, 5, 3), 1).astype(np.float32)
        t = RNG.integers(0, 5, (2, 3))
    if case == "single":
        logp, t = logp[0], np.array(2)
    ev_kw = {k: _ev(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    t_kw = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    _compare_loss(nn.NLLLoss(reduction=reduction, **ev_kw),
                  torch.nn.NLLLoss(reduction=reduction, **t_kw), logp, t)


@needs_torch
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss_matches_torch(reduction):
    x, y = _f32(4, 3), _f32(4, 3)
    _compare_loss(nn.MSELoss(reduction=reduction), torch.nn.MSELoss(reduction=reduction), x, y)


@needs_torch
def test_reprs_match_torch():
    pairs = [
        (nn.Linear(3, 4), torch.nn.Linear(3, 4)),
        (nn.Linear(3, 4, bias=False), torch.nn.Linear(3, 4, bias=False)),
        (nn.ReLU(), torch.nn.ReLU()), (nn.ReLU(True), torch.nn.ReLU(True)),
        (nn.GELU(), torch.nn.GELU()), (nn.GELU("tanh"), torch.nn.GELU("tanh")),
        (nn.Sigmoid(), torch.nn.Sigmoid()), (nn.Softmax(1), torch.nn.Softmax(1)),
        (nn.Dropout(0.2), torch.nn.Dropout(0.2)),
        (nn.LayerNorm(5), torch.nn.LayerNorm(5)),
        (nn.LayerNorm((2, 3), eps=1e-3, elementwise_affine=False),
         torch.nn.LayerNorm((2, 3), eps=1e-3, elementwise_affine=False)),
        (nn.Embedding(5, 2), torch.nn.Embedding(5, 2)),
        (nn.Embedding(5, 2, padding_idx=1), torch.nn.Embedding(5, 2, padding_idx=1)),
        (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()),
        (nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1))),
         torch.nn.Sequential(torch.nn.Linear(2, 3),
                             torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(3, 1)))),
    ]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)


# ---------------------------------------------------------------- gradcheck (float64)

def _g64(*shape, scale=1.0, shift=0.0):
    return ev.tensor(RNG.standard_normal(shape) * scale + shift, dtype=ev.float64,
                     requires_grad=True)


def test_gradcheck_layers():
    x, w, b = _g64(3, 4), _g64(2, 4), _g64(2)
    assert gradcheck(F.linear, (x, w, b))
    assert gradcheck(lambda t: F.linear(t, w), (_g64(2, 3, 4),))
    away = ev.tensor(np.array([[-1.3, 0.4, 2.1], [0.7, -0.2, -2.2]]), dtype=ev.float64,
                     requires_grad=True)  # no element near relu's kink
    assert gradcheck(F.relu, (away,))
    assert gradcheck(F.gelu, (x,))
    assert gradcheck(lambda t: F.gelu(t, approximate="tanh"), (x,))
    assert gradcheck(F.sigmoid, (x,))
    assert gradcheck(F.tanh, (x,))
    assert gradcheck(lambda t: F.softmax(t, 1), (x,))
    assert gradcheck(lambda t: F.log_softmax(t, 0), (x,))
    lw, lb = _g64(4), _g64(4)
    assert gradcheck(lambda t, g, h: F.layer_norm(t, (4,), g, h), (_g64(3, 4, scale=2.0), lw, lb))
    assert gradcheck(lambda t: F.layer_norm(t, (2, 4)), (_g64(3, 2, 4),))
    table = _g64(5, 3)
    idx = ev.tensor([[0, 4], [4, 2]])
    assert gradcheck(lambda t: F.embedding(idx, t), (table,))
    # (padding_idx is no gradcheck case: its row's gradient is zero by design, see
    # test_embedding_padding_index_gets_no_gradient)
    mask_seed = 11

    def dropped(t):  # the same mask on every call
        ev.manual_seed(mask_seed)
        return F.dropout(t, 0.4)

    assert gradcheck(dropped, (x,))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_gradcheck_losses(reduction):
    x = _g64(4, 3)
    t = ev.tensor([2, 0, 1, 2])
    w = ev.tensor([0.5, 2.0, 1.0], dtype=ev.float64)
    assert gradcheck(lambda a: F.cross_entropy(a, t, reduction=reduction), (x,))
    assert gradcheck(lambda a: F.cross_entropy(a, t, weight=w, reduction=reduction,
                                               label_smoothing=0.1), (x,))
    ti = ev.tensor([2, -100, 1, 2])
    assert gradcheck(lambda a: F.cross_entropy(a, ti, reduction=reduction), (x,))
    probs = ev.tensor(np.full((4, 3), 1 / 3), dtype=ev.float64)
    assert gradcheck(lambda a: F.cross_entropy(a, probs, reduction=reduction), (x,))
    assert gradcheck(lambda a: F.nll_loss(a, t, weight=w, reduction=reduction), (x,))
    y = _g64(4, 3)
    assert gradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), (x, y))


# ---------------------------------------------------------------- Parameter

def test_parameter_is_a_detached_leaf_that_requires_grad():
    src = ev.randn(3, requires_grad=True) * 2  # not a leaf
    p = nn.Parameter(src)
    assert isinstance(p, ev.Tensor) and isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    _close(p, src.detach())
    assert not isinstance(src, nn.Parameter)  # not a leaf
    assert not isinstance(ev.ones(2), nn.Parameter)  # does not require grad
    assert isinstance(ev.ones(2, requires_grad=True), nn.Parameter)
    assert not isinstance("weight", nn.Parameter)
    frozen = nn.Parameter(ev.ones(2), requires_grad=False)
    assert not frozen.requires_grad
    assert nn.Parameter().shape == (0,)
    with pytest.raises(TypeError, match="eagervm.Tensor"):
        nn.Parameter([1.0, 2.0])
    with pytest.raises(ValueError, match="float"):
        nn.Parameter(ev.tensor([1, 2]))


def test_parameter_shares_its_source_elements():
    src = ev.zeros(3)
    p = nn.Parameter(src)
    with ev.no_grad():
        p.fill_(2.0)
    assert (src.numpy() == 2).all()


# ---------------------------------------------------------------- Module API

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.scale = nn.Parameter(ev.ones(2))
        self.register_buffer("running", ev.zeros(2))
        self.register_buffer("scratch", ev.zeros(1), persistent=False)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale + self.running


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.head = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
        self.offset = nn.Parameter(ev.zeros(1))

    def forward(self, x):
        return self.head(self.first(x)) + self.offset


def test_registration_order_and_dotted_names():
    net = Net()
    # a module's own parameters come before its children's, as in PyTorch
    assert [n for n, _ in net.named_parameters()] == [
        "offset", "first.scale", "first.fc.weight", "first.fc.bias", "head.0.weight",
        "head.0.bias", "head.2.weight", "head.2.bias"]
    assert [n for n, _ in net.named_parameters(prefix="model")][0] == "model.offset"
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["offset"]
    assert [n for n, _ in net.named_buffers()] == ["first.running", "first.scratch"]
    assert [n for n, _ in net.named_children()] == ["first", "head"]
    assert [n for n, _ in net.named_modules()] == [
        "", "first", "first.fc", "first.act", "head", "head.0", "head.1", "head.2"]
    assert len(list(net.modules())) == 8 and list(net.children())[1] is net.head
    assert len(list(net.parameters())) == 8 and len(list(net.buffers())) == 2
    assert net.get_submodule("head.2") is net.head[2]
    assert list(net.state_dict()) == [
        "offset", "first.scale", "first.running", "first.fc.weight", "first.fc.bias",
        "head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias"]  # no scratch


def test_shared_modules_and_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_setattr_routes_and_refuses_like_pytorch():
    m = nn.Module()
    m.w = ev.randn(2, requires_grad=True)
    m.child = nn.Linear(1, 1)
    m.plain = ev.ones(2)  # no grad: a plain attribute, as a torch.Tensor is
    m.count = 3
    assert list(m._parameters) == ["w"] and list(m._modules) == ["child"]
    assert "plain" not in m._parameters and m.count == 3
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'w'"):
        m.w = ev.ones(2)
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'w'"):
        m.w = ev.randn(2, requires_grad=True) * 2  # not a leaf
    with pytest.raises(TypeError, match="as child module 'child'"):
        m.child = 3
    m.child = None
    assert m.child is None and "child" in m._modules
    m.w = None
    assert m.w is None and list(m.parameters()) == []
    m.register_buffer("buf", ev.zeros(1))
    m.buf = ev.ones(1)
    assert m._buffers["buf"].item() == 1.0
    with pytest.raises(TypeError, match="as buffer 'buf'"):
        m.buf = [1.0]
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("count", ev.zeros(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(KeyError, match="empty string"):
        m.add_module("", nn.ReLU())
    with pytest.raises(TypeError, match="should be a string"):
        m.register_buffer(1, None)
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(TypeError, match="object to parameter"):
        m.register_parameter("x", 1.0)
    with pytest.raises(ValueError, match="non-leaf"):
        m.register_parameter("x", ev.randn(2, requires_grad=True) * 2)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope
    del m.buf
    assert "buf" not in m._buffers
    # a parameter or module replaces whatever had its name, as in PyTorch
    m.count = nn.Parameter(ev.ones(1))
    assert "count" in m._parameters and "count" not in m.__dict__
    with pytest.raises(TypeError, match="as parameter 'count'"):
        m.count = nn.ReLU()  # PyTorch refuses it too: del the parameter first
    del m.count
    m.count = nn.ReLU()
    assert "count" in m._modules and "count" not in m._parameters
    m.count = nn.Parameter(ev.ones(1))
    assert "count" in m._parameters and "count" not in m._modules


def test_assigning_before_init_is_refused():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ev.ones(1))

    class BrokenChild(nn.Module):
        def __init__(self):
            self.c = nn.ReLU()

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Broken()
    with pytest.raises(AttributeError, match="before Module.__init__"):
        BrokenChild()


def test_register_parameter_accepts_a_frozen_leaf():
    m = nn.Module()
    m.register_parameter("frozen", nn.Parameter(ev.ones(2), requires_grad=False))
    assert [n for n, _ in m.named_parameters()] == ["frozen"]
    assert not m.frozen.requires_grad
    m.frozen = m.frozen  # its own name again: fine
    lin = nn.Linear(2, 2).requires_grad_(False)
    lin.weight = lin.weight
    assert "weight" in lin._parameters


def test_train_eval_propagate_and_return_self():
    net = Net()
    assert all(mod.training for mod in net.modules())
    assert net.eval() is net
    assert not any(mod.training for mod in net.modules())
    assert net.train() is net and all(mod.training for mod in net.modules())
    net.head.eval()
    assert net.training and not net.head[1].training
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")


def test_zero_grad_and_requires_grad():
    net = Net()
    net(ev.randn(4, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and (p.grad.numpy() == 0).all() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    assert len(list(net.parameters())) == 8  # still registered while frozen
    assert not net(ev.randn(2, 3)).requires_grad
    net.requires_grad_()
    assert all(p.requires_grad for p in net.parameters())


def test_apply_visits_children_first():
    seen = []
    net = Net()
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "ReLU", "Block", "Linear", "Tanh", "Linear", "Sequential", "Net"]


def test_forward_missing_and_call():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)
    block = Block()
    x = ev.randn(2, 3)
    _close(block(x), block.forward(x))


def test_repr_nests_like_pytorch():
    assert repr(Net()) == (
        "Net(\n"
        "  (first): Block(\n"
        "    (fc): Linear(in_features=3, out_features=2, bias=True)\n"
        "    (act): ReLU()\n"
        "  )\n"
        "  (head): Sequential(\n"
        "    (0): Linear(in_features=2, out_features=4, bias=True)\n"
        "    (1): Tanh()\n"
        "    (2): Linear(in_features=4, out_features=1, bias=True)\n"
        "  )\n"
        ")")


# ---------------------------------------------------------------- containers

def test_sequential_indexing_len_iteration_append():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    assert seq.append(c) is seq and len(seq) == 3 and seq[2] is c
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c]
    assert list(sub._modules) == ["1", "2"]  # a slice keeps the names
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    x = ev.randn(4, 2)
    _close(seq(x), c(b(a(x))))
    named = nn.Sequential(OrderedDict([("enc", a), ("act", b)]))
    assert [n for n, _ in named.named_children()] == ["enc", "act"]
    assert list(named.state_dict()) == ["enc.weight", "enc.bias"]
    seq[1] = nn.Tanh()
    assert isinstance(seq[1], nn.Tanh)
    del seq[0]
    assert list(seq._modules) == ["0", "1"] and isinstance(seq[0], nn.Tanh)
    seq.insert(0, a)
    assert seq[0] is a and len(seq) == 3


def test_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and [n for n, _ in layers.named_children()] == ["0", "1", "2"]
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    layers += [nn.Sigmoid()]
    assert len(layers) == 6 and isinstance(layers[-1], nn.Sigmoid)
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    assert len(list(layers.parameters())) == 6
    del layers[0]
    assert [n for n, _ in layers.named_children()] == ["0", "1", "2", "3", "4"]
    layers.insert(1, nn.GELU())
    assert isinstance(layers[1], nn.GELU)

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])

    assert list(Stack().state_dict()) == ["layers.0.weight", "layers.0.bias",
                                          "layers.1.weight", "layers.1.bias"]


# ---------------------------------------------------------------- state dicts

def _values(module):
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


def test_state_dict_shares_and_is_detached():
    lin = nn.Linear(2, 2)
    sd = lin.state_dict()
    assert not sd["weight"].requires_grad
    with ev.no_grad():
        lin.weight.fill_(3.0)
    assert (sd["weight"].numpy() == 3).all()
    assert lin.state_dict(keep_vars=True)["weight"].requires_grad


def test_load_state_dict_copies_in_place():
    src, dst = Net(), Net()
    weight = dst.first.fc.weight  # what an optimizer holds
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert dst.first.fc.weight is weight and weight.requires_grad and weight.is_leaf
    for k, v in _values(src).items():
        np.testing.assert_array_equal(_values(dst)[k], v)
    # dtypes are converted on copy
    lin = nn.Linear(2, 2)
    lin.load_state_dict({"weight": ev.ones(2, 2, dtype=ev.float64), "bias": ev.zeros(2)})
    assert lin.weight.dtype == ev.float32 and (lin.weight.numpy() == 1).all()


def test_load_state_dict_strict_raises_before_changing_anything():
    net = Net()
    before = _values(net)
    sd = Net().state_dict()
    del sd["head.0.bias"]
    sd["head.9.weight"] = ev.ones(1)
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    msg = str(err.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "head.0.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "head.9.weight"' in msg
    assert msg.index("Missing") < msg.index("Unexpected")
    for k, v in _values(net).items():
        np.testing.assert_array_equal(v, before[k])
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["head.0.bias"]
    assert result.unexpected_keys == ["head.9.weight"]
    np.testing.assert_array_equal(_values(net)["head.0.weight"], sd["head.0.weight"].numpy())
    np.testing.assert_array_equal(_values(net)["head.0.bias"], before["head.0.bias"])


def test_load_state_dict_shape_mismatch_names_key_and_shapes():
    net = Net()
    before = _values(net)
    sd = Net().state_dict()
    sd["first.fc.weight"] = ev.ones(3, 2)
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for first\.fc\.weight: copying a "
                           r"param with shape \(3, 2\) from checkpoint, the shape in current "
                           r"model is \(2, 3\)"):
            net.load_state_dict(sd, strict=strict)
        for k, v in _values(net).items():
            np.testing.assert_array_equal(v, before[k])
    sd["first.fc.weight"] = [[1.0]]
    with pytest.raises(RuntimeError, match="expected eagervm.Tensor"):
        net.load_state_dict(sd)
    with pytest.raises(TypeError, match="dict-like"):
        net.load_state_dict([1, 2])


def test_state_dict_round_trips_through_save_and_load(tmp_path):
    net = Net()
    path = tmp_path / "net.safetensors"
    ev.save(net.state_dict(), str(path))
    loaded = ev.load(str(path))
    assert list(loaded) == list(net.state_dict())
    other = Net()
    other.load_state_dict(loaded)
    for k, v in _values(net).items():
        np.testing.assert_array_equal(_values(other)[k], v)
    x = ev.randn(3, 3)
    _close(other(x), net(x))
    ev.save(nn.CrossEntropyLoss(weight=ev.ones(3)).state_dict(), str(path))
    assert list(ev.load(str(path))) == ["weight"]  # a loss's weight is a buffer


@needs_torch
def test_a_torch_state_dict_loads_and_gives_torchs_outputs():
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.GELU(), torch.nn.LayerNorm(5),
                                 torch.nn.Linear(5, 2))
    ours = nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.LayerNorm(5), nn.Linear(5, 2))
    ours.load_state_dict({k: _ev(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _f32(4, 3)
    _close(ours(_ev(x)), theirs(torch.from_numpy(x)), atol=1e-5)


@needs_torch
def test_state_dict_keys_match_torch():
    ours = nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3), nn.Embedding(4, 3))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.LayerNorm(3),
                                 torch.nn.Embedding(4, 3))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        assert tuple(ours.state_dict()[k].shape) == tuple(v.shape)


# ---------------------------------------------------------------- training

def test_a_small_model_learns():
    ev.manual_seed(0)
    x = ev.randn(64, 4)
    t = (x.sum(1) > 0).to(ev.int64)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    loss_fn = nn.CrossEntropyLoss()
    first = None
    for _ in range(60):
        loss = loss_fn(model(x), t)
        first = loss.item() if first is None else first
        model.zero_grad()
        loss.backward()
        with ev.no_grad():
            for p in model.parameters():
                p.sub_(p.grad * 0.5)
    assert loss.item() < first * 0.5


# ---------------------------------------------------------------- init

def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    if torch is not None:
        for name in ("linear", "tanh", "relu", "leaky_relu", "selu"):
            assert init.calculate_gain(name) == pytest.approx(torch.nn.init.calculate_gain(name))


def _stats(t):
    a = t.numpy().astype(np.float64)
    return a.min(), a.max(), a.mean(), a.std()


def test_uniform_and_normal_distributions():
    ev.manual_seed(5)
    t = ev.empty(200, 500)
    assert init.uniform_(t, -2.0, 3.0) is t
    lo, hi, mean, std = _stats(t)
    assert -2 <= lo and hi < 3 and abs(mean - 0.5) < 0.02 and abs(std - 5 / math.sqrt(12)) < 0.02
    init.normal_(t, 1.0, 2.0)
    _, _, mean, std = _stats(t)
    assert abs(mean - 1.0) < 0.02 and abs(std - 2.0) < 0.02
    init.constant_(t, 0.25)
    assert (t.numpy() == 0.25).all()
    init.ones_(t)
    assert (t.numpy() == 1).all()
    init.zeros_(t)
    assert (t.numpy() == 0).all()


@pytest.mark.parametrize("fn,kw,bound,std", [
    ("xavier_uniform_", {}, math.sqrt(6 / (300 + 200)), None),
    ("xavier_uniform_", {"gain": 2.0}, 2 * math.sqrt(6 / (300 + 200)), None),
    ("xavier_normal_", {}, None, math.sqrt(2 / (300 + 200))),
    ("kaiming_uniform_", {}, math.sqrt(2) * math.sqrt(3 / 200), None),  # a=0: slope 0
    ("kaiming_uniform_", {"a": math.sqrt(5)}, 1 / math.sqrt(200), None),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"},
     math.sqrt(2) * math.sqrt(3 / 300), None),
    ("kaiming_normal_", {"nonlinearity": "relu"}, None, math.sqrt(2 / 200)),
])
def test_fan_based_initialisations(fn, kw, bound, std):
    ev.manual_seed(5)
    t = ev.empty(300, 200)  # fan_in 200, fan_out 300
    assert getattr(init, fn)(t, **kw) is t
    lo, hi, mean, got_std = _stats(t)
    if bound is not None:
        edge = bound * (1 + 1e-6)  # the bound rounded to float32
        assert -edge <= lo and hi <= edge and lo < -0.95 * bound and hi > 0.95 * bound
        assert abs(got_std - bound / math.sqrt(3)) < 0.02 * bound
    else:
        assert abs(mean) < 0.02 * std * 10 and abs(got_std - std) < 0.02 * std
    conv = ev.empty(8, 4, 3, 3)  # fan_in = 4 * 9
    init.kaiming_uniform_(conv, a=math.sqrt(5))
    assert abs(conv.numpy()).max() <= 1 / math.sqrt(36)


def test_init_errors_and_empty_tensors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(ev.empty(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(ev.empty(2, 2), mode="fan_avg")
    with pytest.raises(TypeError, match="float tensor"):
        init.normal_(ev.zeros(3, dtype=ev.int64))
    with pytest.raises(TypeError, match="eagervm.Tensor"):
        init.zeros_(np.zeros(3))
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(ev.empty(0, 3))


def test_init_is_reproducible_and_works_on_parameters():
    ev.manual_seed(42)
    a = nn.Linear(5, 4)
    ev.manual_seed(42)
    b = nn.Linear(5, 4)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())
    assert a.weight.requires_grad and a.weight.is_leaf  # filled under no_grad
    assert abs(a.weight.numpy()).max() <= 1 / math.sqrt(5)
    assert abs(a.bias.numpy()).max() <= 1 / math.sqrt(5)
    x = init.normal_(ev.empty(10), generator=ev.Generator().manual_seed(9)).numpy()
    y = init.normal_(ev.empty(10), generator=ev.Generator().manual_seed(9)).numpy()
    np.testing.assert_array_equal(x, y)


def test_default_initialisations_follow_pytorch():
    ev.manual_seed(0)
    lin = nn.Linear(400, 300)
    lo, hi, _, std = _stats(lin.weight)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) gives 1/sqrt(fan_in)
    assert -bound <= lo and hi <= bound and abs(std - bound / math.sqrt(3)) < 0.02 * bound
    emb = nn.Embedding(300, 200)
    _, _, mean, std = _stats(emb.weight)
    assert abs(mean) < 0.01 and abs(std - 1) < 0.01
