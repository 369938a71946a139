"""eagervm.optim: SGD, Adam, AdamW and the schedulers against a NumPy reference
of PyTorch's single-tensor formulas (the same order of float operations: the
results must agree bit for bit) and, where torch imports, against torch.optim
itself over several steps on the same weights and gradients (to float32
rounding: PyTorch's vectorised loops fuse some multiply-adds, and torch 1.13's
Adam updates exp_avg by mul and add rather than lerp)."""
import math
import warnings

import numpy as np
import pytest

import eagervm as ev
import eagervm.optim as optim
from eagervm.optim import lr_scheduler

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def set_grad(p, g):
    p.grad = g


SHAPES = [(7, 5), (), (33,), (2, 3, 4)]


def make_params(dtype, seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=s).astype(dtype) for s in shapes]


def grads_for(arrays, steps, seed=1):
    rng = np.random.default_rng(seed)
    return [[rng.uniform(-1, 1, size=a.shape).astype(a.dtype) for a in arrays]
            for _ in range(steps)]


def np_value(t):
    return np.asarray(t.numpy())


# --------------------------------------------------------------- references

def ref_sgd(ps, gs_steps, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
            maximize=False):
    """PyTorch's _single_tensor_sgd in NumPy, each op rounded to the dtype."""
    ps = [p.copy() for p in ps]
    bufs = [None] * len(ps)
    for gs in gs_steps:
        for i, (p, g) in enumerate(zip(ps, gs)):
            if g is None:
                continue
            T = p.dtype.type
            g = -g if maximize else g
            if weight_decay != 0:
                g = g + T(weight_decay) * p
            if momentum != 0:
                if bufs[i] is None:
                    bufs[i] = g.copy()
                else:
                    bufs[i] = bufs[i] * T(momentum) + T(1 - dampening) * g
                g = g + T(momentum) * bufs[i] if nesterov else bufs[i]
            ps[i] = p + T(-lr) * g
    return ps, bufs


def ref_adam(ps, gs_steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
             amsgrad=False, maximize=False, decoupled=False):
    """PyTorch's _single_tensor_adam (2.x: exp_avg by lerp) in NumPy."""
    ps = [p.copy() for p in ps]
    n = len(ps)
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    mx = [np.zeros_like(p) for p in ps]
    steps = [0] * n
    beta1, beta2 = betas
    for gs in gs_steps:
        for i, g in enumerate(gs):
            if g is None:
                continue
            p = ps[i]
            T = p.dtype.type
            steps[i] += 1
            t = float(steps[i])
            g = -g if maximize else g
            if weight_decay != 0:
                if decoupled:
                    p = p * T(1 - lr * weight_decay)
                else:
                    g = g + T(weight_decay) * p
            w = T(1 - beta1)
            if abs(w) < 0.5:
                m[i] = m[i] + w * (g - m[i])
            else:
                m[i] = g - (g - m[i]) * (T(1) - w)
            v[i] = v[i] * T(beta2) + T(1 - beta2) * g * g
            bc1 = 1 - beta1 ** t
            bc2 = 1 - beta2 ** t
            step_size = lr / bc1
            bc2_sqrt = bc2 ** 0.5
            src = v[i]
            if amsgrad:
                mx[i] = np.maximum(mx[i], v[i])
                src = mx[i]
            denom = np.sqrt(src) / T(bc2_sqrt) + T(eps)
            ps[i] = p + T(-step_size) * m[i] / denom
    return ps, m, v, mx


def run_ev(opt_cls, arrays, gs_steps, **kw):
    params = [ev.tensor(a) for a in arrays]
    opt = opt_cls(params, **kw)
    for gs in gs_steps:
        for p, g in zip(params, gs):
            set_grad(p, None if g is None else ev.tensor(g))
        opt.step()
    return params, opt


def run_torch(opt_cls, arrays, gs_steps, **kw):
    params = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    opt = opt_cls(params, **kw)
    for gs in gs_steps:
        for p, g in zip(params, gs):
            p.grad = None if g is None else torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params], opt


SGD_CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.05, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=1e-3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True),
    dict(lr=0.0, momentum=0.5),
]

ADAM_CONFIGS = [
    dict(),
    dict(lr=1e-2, weight_decay=0.05),
    dict(lr=1e-2, amsgrad=True),
    dict(lr=1e-2, betas=(0.3, 0.9), eps=1e-6, maximize=True),
    dict(lr=3e-3, betas=(0.5, 0.99), amsgrad=True, weight_decay=0.02),
    dict(lr=1e-2, betas=(0.0, 0.0)),
]

ADAMW_CONFIGS = [
    dict(),
    dict(lr=1e-2, weight_decay=0.1, amsgrad=True),
    dict(lr=1e-2, weight_decay=0.0),
    dict(lr=2e-2, betas=(0.2, 0.95), maximize=True),
]


def with_skips(gs_steps):
    """Param 1 has no gradient at step 2: it is skipped there."""
    gs_steps = [list(gs) for gs in gs_steps]
    gs_steps[2][1] = None
    return gs_steps


# ---------------------------------------------------------------- SGD

@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", SGD_CONFIGS)
def test_sgd_matches_reference(cfg, dtype, foreach):
    arrays = make_params(dtype)
    gs_steps = with_skips(grads_for(arrays, 5))
    params, opt = run_ev(optim.SGD, arrays, gs_steps, foreach=foreach, **cfg)
    want, bufs = ref_sgd(arrays, gs_steps, **cfg)
    for p, w in zip(params, want):
        np.testing.assert_array_equal(np_value(p), w)
        assert p.dtype == ev.float32 if dtype == np.float32 else ev.float64
    for p, b in zip(params, bufs):
        if b is None:
            assert "momentum_buffer" not in opt.state[p]
        else:
            np.testing.assert_array_equal(np_value(opt.state[p]["momentum_buffer"]), b)


@needs_torch
@pytest.mark.parametrize("cfg", SGD_CONFIGS)
def test_sgd_matches_torch(cfg):
    arrays = make_params(np.float32)
    gs_steps = with_skips(grads_for(arrays, 6))
    params, _ = run_ev(optim.SGD, arrays, gs_steps, **cfg)
    want, topt = run_torch(torch.optim.SGD, arrays, gs_steps, **cfg)
    for p, w in zip(params, want):
        np.testing.assert_allclose(np_value(p), w, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------- Adam

@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", ADAM_CONFIGS)
def test_adam_matches_reference(cfg, dtype, foreach):
    arrays = make_params(dtype)
    gs_steps = with_skips(grads_for(arrays, 6))
    params, opt = run_ev(optim.Adam, arrays, gs_steps, foreach=foreach, **cfg)
    want, m, v, mx = ref_adam(arrays, gs_steps, **cfg)
    for i, p in enumerate(params):
        np.testing.assert_array_equal(np_value(p), want[i])
        st = opt.state[p]
        assert st["step"] == (5 if i == 1 else 6)
        np.testing.assert_array_equal(np_value(st["exp_avg"]), m[i])
        np.testing.assert_array_equal(np_value(st["exp_avg_sq"]), v[i])
        if cfg.get("amsgrad"):
            np.testing.assert_array_equal(np_value(st["max_exp_avg_sq"]), mx[i])
        else:
            assert "max_exp_avg_sq" not in st


@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", ADAMW_CONFIGS)
def test_adamw_matches_reference(cfg, dtype, foreach):
    arrays = make_params(dtype)
    gs_steps = grads_for(arrays, 5)
    params, opt = run_ev(optim.AdamW, arrays, gs_steps, foreach=foreach, **cfg)
    full = dict(weight_decay=1e-2)
    full.update(cfg)
    want, m, v, mx = ref_adam(arrays, gs_steps, decoupled=True, **full)
    for i, p in enumerate(params):
        np.testing.assert_array_equal(np_value(p), want[i])
    assert opt.param_groups[0]["decoupled_weight_decay"] is True


def test_adam_decoupled_is_adamw():
    arrays = make_params(np.float32)
    gs_steps = grads_for(arrays, 4)
    a, _ = run_ev(optim.Adam, arrays, gs_steps, lr=1e-2, weight_decay=0.1,
                  decoupled_weight_decay=True)
    b, _ = run_ev(optim.AdamW, arrays, gs_steps, lr=1e-2, weight_decay=0.1)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np_value(x), np_value(y))


@needs_torch
@pytest.mark.parametrize("cfg", ADAM_CONFIGS)
def test_adam_matches_torch(cfg):
    arrays = make_params(np.float32)
    gs_steps = with_skips(grads_for(arrays, 8))
    params, opt = run_ev(optim.Adam, arrays, gs_steps, **cfg)
    want, topt = run_torch(torch.optim.Adam, arrays, gs_steps, **cfg)
    for p, w in zip(params, want):
        np.testing.assert_allclose(np_value(p), w, rtol=2e-6, atol=2e-7)
    for i, (p, tp) in enumerate(zip(params, topt.param_groups[0]["params"])):
        st, tst = opt.state[p], topt.state[tp]
        assert st["step"] == float(tst["step"])
        np.testing.assert_allclose(np_value(st["exp_avg"]), tst["exp_avg"].numpy(),
                                   rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(np_value(st["exp_avg_sq"]), tst["exp_avg_sq"].numpy(),
                                   rtol=1e-5, atol=1e-9)


@needs_torch
@pytest.mark.parametrize("cfg", ADAMW_CONFIGS)
def test_adamw_matches_torch(cfg):
    arrays = make_params(np.float32)
    gs_steps = grads_for(arrays, 8)
    params, _ = run_ev(optim.AdamW, arrays, gs_steps, **cfg)
    want, _ = run_torch(torch.optim.AdamW, arrays, gs_steps, **cfg)
    for p, w in zip(params, want):
        np.testing.assert_allclose(np_value(p), w, rtol=2e-6, atol=2e-7)


# --------------------------------------------------------- layouts, sizes

@pytest.mark.parametrize("opt_cls,kw", [(optim.SGD, dict(lr=0.1, momentum=0.9)),
                                        (optim.Adam, dict(lr=1e-2, amsgrad=True))])
def test_transposed_and_strided_params(opt_cls, kw):
    """Params that are not contiguous (a transpose, a strided slice) update as
    contiguous ones would, in place (the views see the new values)."""
    base = make_params(np.float32, shapes=[(6, 4), (10,)])
    gs_steps = grads_for([base[0].T, base[1][::2]], 3)
    tbase = [ev.tensor(a) for a in base]
    views = [tbase[0].T, tbase[1][::2]]
    assert not views[0].is_contiguous() and not views[1].is_contiguous()
    opt = opt_cls(views, **kw)
    for gs in gs_steps:
        for p, g in zip(views, gs):
            set_grad(p, ev.tensor(g))
        opt.step()
    want, _ = run_ev(opt_cls, [base[0].T.copy(), base[1][::2].copy()], gs_steps, **kw)
    np.testing.assert_array_equal(np_value(tbase[0]).T, np_value(want[0]))
    np.testing.assert_array_equal(np_value(tbase[1])[::2], np_value(want[1]))
    np.testing.assert_array_equal(np_value(tbase[1])[1::2], base[1][1::2])


@pytest.mark.parametrize("foreach", [None, False])
def test_transposed_leaf_that_requires_grad(foreach):
    """A transposed leaf param (updated through a contiguous copy) under
    autograd: the step records nothing (it runs under no_grad, as PyTorch's)."""
    a = make_params(np.float32, shapes=[(3, 4)])[0]
    g = np.random.default_rng(5).uniform(-1, 1, size=(4, 3)).astype(np.float32)
    w = ev.tensor(a).T
    w.requires_grad_(True)
    assert w.is_leaf and not w.is_contiguous()
    opt = optim.Adam([w], lr=1e-2, foreach=foreach)
    w.grad = ev.tensor(g)
    opt.step()
    assert w.is_leaf and w.grad_fn is None
    want, *_ = ref_adam([a.T.copy()], [[g]], lr=1e-2)
    np.testing.assert_array_equal(np_value(w), want[0])


def test_noncontiguous_grad():
    arrays = make_params(np.float32, shapes=[(5, 3)])
    g = np.random.default_rng(3).uniform(-1, 1, size=(3, 5)).astype(np.float32)
    p = ev.tensor(arrays[0])
    opt = optim.SGD([p], lr=0.5, momentum=0.9)
    set_grad(p, ev.tensor(g).T)
    opt.step()
    want, _ = ref_sgd(arrays, [[g.T.copy()]], lr=0.5, momentum=0.9)
    np.testing.assert_array_equal(np_value(p), want[0])


def test_large_param_split_over_threads():
    n = 300_001
    arrays = make_params(np.float32, shapes=[(n,)])
    gs_steps = grads_for(arrays, 3)
    params, _ = run_ev(optim.Adam, arrays, gs_steps, lr=1e-2, amsgrad=True)
    want, *_ = ref_adam(arrays, gs_steps, lr=1e-2, amsgrad=True)
    np.testing.assert_array_equal(np_value(params[0]), want[0])


def test_one_instruction_per_group():
    """A step issues one instruction per group (foreach=False: one per
    parameter), whatever the number of parameters."""
    import eagervm.profiler as prof  # noqa: F401 (the recorder below)
    params = [ev.zeros(5) for _ in range(7)]
    for foreach, want in ((None, 1), (False, 7)):
        opt = optim.Adam(params, foreach=foreach)
        for p in params:
            set_grad(p, ev.ones(5))
        ev.synchronize()
        ev._C._profile_enable(True)
        try:
            opt.step()
            names = [r[0] for r in ev._C._profile_records()]
        finally:
            ev._C._profile_enable(False)
        kind = "adam_update_multi_" if foreach is None else "adam_update_"
        assert names.count(kind) == want, names


def test_mixed_layouts_and_duplicates_in_a_group():
    """Contiguous params go in the group's instruction, others one by one; a
    param listed twice is updated twice, in order (with a warning)."""
    base = ev.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    a, t = ev.zeros(4), base.T
    with pytest.warns(UserWarning, match="duplicate"):
        opt = optim.SGD([a, t, a], lr=0.5, momentum=0.5)
    set_grad(a, ev.ones(4))
    set_grad(t, ev.ones((4, 3)))
    opt.step()
    # a: buf = 1, a = -0.5; then buf = 0.5 + 1 = 1.5, a = -0.5 - 0.75
    np.testing.assert_array_equal(np_value(a), np.full(4, -1.25, np.float32))
    np.testing.assert_array_equal(np_value(base), np.arange(12, dtype=np.float32).reshape(3, 4)
                                  - 0.5)


def test_empty_param():
    p = ev.zeros(0, 3)
    opt = optim.Adam([p])
    set_grad(p, ev.zeros(0, 3))
    opt.step()
    assert p.shape == (0, 3)


def test_step_issues_without_waiting_and_orders_with_later_ops():
    """A step returns before it ran; an op on the param issued after it sees
    the updated values (the runtime orders them)."""
    p = ev.tensor(np.ones(1000, np.float32))
    opt = optim.SGD([p], lr=0.5)
    for _ in range(10):
        set_grad(p, ev.ones(1000))
        opt.step()
    q = p * 2
    np.testing.assert_array_equal(np_value(q), np.full(1000, -8, np.float32))


# ------------------------------------------------------------ the errors

def test_bad_grads_and_params():
    """Tensor.grad takes only a gradient that fits; the fused updates check
    again (what a step would meet through another route)."""
    p = ev.tensor(np.zeros(3, np.float32))
    with pytest.raises(ValueError):
        p.grad = ev.tensor(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="grad has shape"):
        ev._C._sgd_update_(p, ev.zeros(4), None, 0.1, 0, 0, 0, False, False, False)
    with pytest.raises(TypeError, match="grad has dtype float64"):
        ev._C._sgd_update_(p, ev.zeros(3, dtype=ev.float64), None, 0.1, 0, 0, 0, False, False,
                           False)
    q = ev.tensor(np.zeros(3, np.int32))
    with pytest.raises(TypeError, match="float32 or float64"):
        ev._C._adam_update_(q, q.clone(), q.clone(), q.clone(), None, 1, 1e-3, 0.9, 0.999, 1e-8,
                            0, False, False)
    with pytest.raises(TypeError, match="params\\[1\\] must be a Tensor"):
        ev._C._sgd_update_multi_([p, 1.0], [p, p], None, None, 0.1, 0, 0, 0, False, False)
    with pytest.raises(ValueError, match="grads has 1 entries, expected 2"):
        ev._C._sgd_update_multi_([p, p], [p], None, None, 0.1, 0, 0, 0, False, False)
    with pytest.raises(ValueError, match="listed once"):
        ev._C._sgd_update_multi_([p, p], [ev.zeros(3), ev.zeros(3)], None, None, 0.1, 0, 0, 0,
                                 False, False)
    with pytest.raises(ValueError, match=r"\(parameter 1\)"):
        ev._C._adam_update_multi_([p, ev.zeros(2)], [ev.zeros(3), ev.zeros(3)],
                                  [ev.zeros(3), ev.zeros(2)], [ev.zeros(3), ev.zeros(2)], None,
                                  [1, 1], 1e-3, 0.9, 0.999, 1e-8, 0, False, False)


def test_nonleaf_param():
    w = ev.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([w * 2], lr=0.1)


def test_failed_first_step_keeps_no_state():
    for foreach in (None, False):
        p = ev.tensor(np.zeros(3, np.float32))
        opt = optim.SGD([p], lr=0.1, momentum=0.9, foreach=foreach)
        set_grad(p, ev.tensor(np.ones(3, np.float32)))
        opt.param_groups[0]["lr"] = -1.0
        with pytest.raises(ValueError, match="invalid learning rate"):
            opt.step()
        assert "momentum_buffer" not in opt.state[p]
        np.testing.assert_array_equal(np_value(p), np.zeros(3))
        opt.param_groups[0]["lr"] = 0.1
        opt.step()
        np.testing.assert_array_equal(np_value(opt.state[p]["momentum_buffer"]), np.ones(3))


@pytest.mark.parametrize("make,match", [
    (lambda ps: optim.SGD(ps, lr=-1), "Invalid learning rate: -1"),
    (lambda ps: optim.SGD(ps, lr=0.1, momentum=-0.1), "Invalid momentum value"),
    (lambda ps: optim.SGD(ps, lr=0.1, weight_decay=-1), "Invalid weight_decay value"),
    (lambda ps: optim.SGD(ps, lr=0.1, nesterov=True), "Nesterov momentum requires"),
    (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True),
     "Nesterov momentum requires"),
    (lambda ps: optim.Adam(ps, lr=-1e-3), "Invalid learning rate"),
    (lambda ps: optim.Adam(ps, eps=-1), "Invalid epsilon value"),
    (lambda ps: optim.Adam(ps, betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
    (lambda ps: optim.AdamW(ps, betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
    (lambda ps: optim.AdamW(ps, weight_decay=-0.1), "Invalid weight_decay value"),
    (lambda ps: optim.SGD([], lr=0.1), "empty parameter list"),
])
def test_hyperparameter_checks(make, match):
    with pytest.raises(ValueError, match=match):
        make([ev.zeros(2)])


def test_group_lr_checked_at_step():
    p = ev.zeros(2)
    opt = optim.SGD([p], lr=0.1)
    opt.param_groups[0]["lr"] = -1.0
    set_grad(p, ev.ones(2))
    with pytest.raises(ValueError, match="invalid learning rate"):
        opt.step()


def test_param_checks():
    p = ev.zeros(2)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD({1, 2}, lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.SGD([p, 3.0], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        dup = optim.SGD([p, p], lr=0.1)
    set_grad(p, ev.ones(2))
    dup.step()  # updated twice, as PyTorch does
    np.testing.assert_allclose(np_value(p), np.full(2, -0.2, np.float32), rtol=1e-6)
    p = ev.zeros(2)
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([ev.zeros(1)])


# ------------------------------------------------------ groups and state

def test_param_groups_and_defaults():
    a, b, c = ev.zeros(2), ev.zeros(3), ev.zeros(4)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["momentum"] == 0 and opt.param_groups[1]["momentum"] == 0.9
    assert opt.param_groups[1]["params"][0] is b
    opt.add_param_group({"params": [c], "weight_decay": 0.1})
    assert opt.param_groups[2]["lr"] == 0.1 and opt.param_groups[2]["weight_decay"] == 0.1
    for p in (a, b, c):
        set_grad(p, ev.ones(p.shape[0]))
    opt.step()
    np.testing.assert_allclose(np_value(a), np.full(2, -0.1, np.float32))
    np.testing.assert_allclose(np_value(b), np.full(3, -0.5, np.float32))
    np.testing.assert_allclose(np_value(c), np.full(4, -0.1, np.float32))
    assert set(opt.defaults) == {"lr", "momentum", "dampening", "weight_decay", "nesterov",
                                 "maximize", "foreach"}
    text = repr(opt)
    assert text.startswith("SGD (\nParameter Group 0\n") and "    lr: 0.5\n" in text


def test_named_params():
    a, b = ev.zeros(2), ev.zeros(3)
    opt = optim.Adam([("w", a), ("b", b)])
    assert opt.param_groups[0]["param_names"] == ["w", "b"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w", "b"]


def test_zero_grad():
    a, b = ev.ones(2), ev.ones(3)
    opt = optim.SGD([a, b], lr=0.1)
    set_grad(a, ev.ones(2))
    set_grad(b, ev.ones(3))
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(np_value(a.grad), np.zeros(2))
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    opt.step()  # no gradients: nothing changes
    np.testing.assert_array_equal(np_value(a), np.ones(2))


def test_zero_grad_of_a_graph_gradient():
    w = ev.ones(2, requires_grad=True)
    a = ev.ones(2, requires_grad=True)
    w.grad = a * 3  # a gradient with a graph behind it (grad_fn)
    opt = optim.SGD([w], lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert w.grad.grad_fn is None and not w.grad.requires_grad
    np.testing.assert_array_equal(np_value(w.grad), np.zeros(2))
    g = ev.ones(2, requires_grad=True)
    w.grad = g
    opt.zero_grad(set_to_none=False)
    assert not w.grad.requires_grad
    np.testing.assert_array_equal(np_value(w.grad), np.zeros(2))


def test_closure():
    p = ev.ones(2)
    opt = optim.SGD([p], lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        set_grad(p, ev.ones(2))
        return 42.0

    assert opt.step(closure) == 42.0
    assert calls == [1]
    np.testing.assert_allclose(np_value(p), np.full(2, 0.9, np.float32))
    assert opt.step() is None


def train(opt_cls, arrays, gs_steps, kw, split=None):
    """Runs the steps; with split, saves a state dict after `split` steps and
    continues in a new optimizer (and new params) loaded from it."""
    params = [ev.tensor(a) for a in arrays]
    opt = opt_cls(params, **kw)
    for s, gs in enumerate(gs_steps):
        if s == split:
            sd = opt.state_dict()
            params = [ev.tensor(np_value(p)) for p in params]
            opt = opt_cls(params, **kw)
            opt.load_state_dict(sd)
        for p, g in zip(params, gs):
            set_grad(p, ev.tensor(g))
        opt.step()
    return params, opt


@pytest.mark.parametrize("opt_cls,kw", [
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (optim.Adam, dict(lr=1e-2, amsgrad=True)),
    (optim.AdamW, dict(lr=1e-2)),
])
def test_state_dict_round_trip(opt_cls, kw):
    arrays = make_params(np.float32)
    gs_steps = grads_for(arrays, 6)
    whole, _ = train(opt_cls, arrays, gs_steps, kw)
    resumed, opt = train(opt_cls, arrays, gs_steps, kw, split=3)
    for x, y in zip(whole, resumed):
        np.testing.assert_array_equal(np_value(x), np_value(y))
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1, 2, 3]
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert sd["param_groups"][0]["lr"] == kw["lr"]


def test_state_dict_ids_across_groups_and_live_tensors():
    a, b, c = ev.zeros(2), ev.zeros(3), ev.zeros(4)
    opt = optim.Adam([{"params": [a, b]}, {"params": [c], "lr": 0.1}])
    set_grad(c, ev.ones(4))
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert list(sd["state"]) == [2]
    assert sd["state"][2]["exp_avg"] is opt.state[c]["exp_avg"]
    assert sd["state"][2]["step"] == 1


def test_load_state_dict_copies_and_casts():
    a = ev.zeros(3, dtype=ev.float64)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    buf = ev.tensor(np.array([1, 2, 3], np.float32))
    sd = {"state": {0: {"momentum_buffer": buf}},
          "param_groups": [{"lr": 0.2, "momentum": 0.9, "dampening": 0, "weight_decay": 0,
                            "nesterov": False, "maximize": False, "params": [0]}]}
    opt.load_state_dict(sd)
    mb = opt.state[a]["momentum_buffer"]
    assert mb is not buf and mb.dtype == ev.float64
    assert opt.param_groups[0]["lr"] == 0.2 and opt.param_groups[0]["params"][0] is a
    set_grad(a, ev.zeros(3, dtype=ev.float64))
    opt.step()
    np.testing.assert_array_equal(np_value(buf), [1, 2, 3])  # not aliased
    np.testing.assert_allclose(np_value(mb), [0.9, 1.8, 2.7])


def test_load_state_dict_validates_before_changing():
    a, b = ev.zeros(2), ev.zeros(3)
    opt = optim.Adam([a, b], lr=1e-2)
    for p in (a, b):
        set_grad(p, ev.ones(p.shape[0]))
    opt.step()
    good = opt.state_dict()
    before = (opt.param_groups[0]["lr"], opt.state[a]["step"])

    two_groups = {"state": {}, "param_groups": [dict(good["param_groups"][0], params=[0]),
                                                dict(good["param_groups"][0], params=[1])]}
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(two_groups)
    wrong_size = {"state": {}, "param_groups": [dict(good["param_groups"][0], params=[0])]}
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(wrong_size)
    bad_shape = {"state": {0: dict(good["state"][0], exp_avg=ev.zeros(5)),
                           1: good["state"][1]},
                 "param_groups": [dict(good["param_groups"][0], lr=0.5)]}
    with pytest.raises(ValueError, match="shape"):
        opt.load_state_dict(bad_shape)
    with pytest.raises(ValueError, match="state_dict must be a dict"):
        opt.load_state_dict({"state": {}})
    assert (opt.param_groups[0]["lr"], opt.state[a]["step"]) == before


# ------------------------------------------------------------ schedulers

def torch_lrs(sched_factory, steps, lr=0.1, groups=1):
    ps = [torch.zeros(1, requires_grad=True) for _ in range(groups)]
    opt = torch.optim.SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)],
                          lr=lr)
    sched = sched_factory(torch.optim.lr_scheduler, opt)
    out = [sched.get_last_lr()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(steps):
            opt.step()
            sched.step()
            out.append(sched.get_last_lr())
    return out


def ev_lrs(sched_factory, steps, lr=0.1, groups=1):
    ps = [ev.zeros(1) for _ in range(groups)]
    opt = optim.SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)], lr=lr)
    sched = sched_factory(lr_scheduler, opt)
    out = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == out[-1]
    return out


SCHEDULES = [
    lambda m, o: m.StepLR(o, step_size=3),
    lambda m, o: m.StepLR(o, step_size=2, gamma=0.5),
    lambda m, o: m.CosineAnnealingLR(o, T_max=10),
    lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
]


def ref_closed(kind, epoch, base, **kw):
    if kind == "step":
        return base * kw["gamma"] ** (epoch // kw["step_size"])
    eta_min, t_max = kw["eta_min"], kw["T_max"]
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * epoch / t_max)) / 2


def test_step_lr_values():
    lrs = ev_lrs(SCHEDULES[0], 10)
    want = [[ref_closed("step", e, 0.1, gamma=0.1, step_size=3)] for e in range(11)]
    np.testing.assert_allclose(np.array(lrs), np.array(want), rtol=1e-15)


def test_cosine_values_follow_closed_form():
    lrs = ev_lrs(SCHEDULES[3], 30, groups=2)
    for e, got in enumerate(lrs):
        for i, base in enumerate((0.1, 0.2)):
            # Past T_max the schedule goes back up, periodically.
            assert got[i] == pytest.approx(
                ref_closed("cos", e, base, eta_min=0.01, T_max=7), rel=1e-9, abs=1e-12)


@needs_torch
@pytest.mark.parametrize("factory", SCHEDULES)
def test_schedulers_match_torch(factory):
    assert ev_lrs(factory, 25, groups=2) == torch_lrs(factory, 25, groups=2)


def test_scheduler_closed_form_epoch_and_state_dict():
    p = ev.zeros(1)
    opt = optim.SGD([p], lr=0.1)
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(5)
    assert sched.get_last_lr() == [pytest.approx(0.05)]
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 5 and sd["base_lrs"] == [0.1]

    opt2 = optim.SGD([ev.zeros(1)], lr=0.1)
    sched2 = lr_scheduler.CosineAnnealingLR(opt2, T_max=10)
    sched2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = sched2.get_last_lr()[0]
    sched.step()
    sched2.step()
    assert sched.get_last_lr() == sched2.get_last_lr()


def test_scheduler_checks():
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=1)
    opt = optim.SGD([ev.zeros(1)], lr=0.1)
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(opt, step_size=1, last_epoch=3)
    sched = lr_scheduler.StepLR(opt, step_size=1)
    assert opt.param_groups[0]["initial_lr"] == 0.1 and sched.last_epoch == 0
    for bad in (0, -2, "3", None):
        with pytest.raises(ValueError, match="StepLR: step_size must be a positive number"):
            lr_scheduler.StepLR(opt, step_size=bad)
        with pytest.raises(ValueError, match="CosineAnnealingLR: T_max must be a positive number"):
            lr_scheduler.CosineAnnealingLR(opt, T_max=bad)


# --------------------------------------------------- with the autograd layer

def _regression_data():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 5)).astype(np.float32)
    y = rng.standard_normal((16, 3)).astype(np.float32)
    w = (rng.standard_normal((5, 3)) * 0.3).astype(np.float32)
    return x, y, w


def _train_ev(opt_factory, steps=6):
    x, y, w0 = _regression_data()
    x, y = ev.tensor(x), ev.tensor(y)
    w = ev.tensor(w0, requires_grad=True)
    b = ev.zeros(3, requires_grad=True)
    opt = opt_factory(optim, [w, b])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        d = x @ w + b - y
        loss = (d * d).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np_value(w), np_value(b), losses


OPT_FACTORIES = [
    lambda m, ps: m.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda m, ps: m.Adam(ps, lr=0.05, amsgrad=True),
    lambda m, ps: m.AdamW(ps, lr=0.05, weight_decay=0.1),
]


@pytest.mark.parametrize("factory", OPT_FACTORIES)
def test_training_with_backward(factory):
    """zero_grad, backward, step: the loss goes down, and the gradients the
    step used are the ones backward accumulated."""
    w, b, losses = _train_ev(factory)
    assert losses[-1] < losses[0]
    assert np.isfinite(w).all() and np.isfinite(b).all()


@needs_torch
@pytest.mark.parametrize("factory", OPT_FACTORIES)
def test_training_matches_torch(factory):
    w, b, losses = _train_ev(factory)
    x, y, w0 = _regression_data()
    x, y = torch.tensor(x), torch.tensor(y)
    tw = torch.tensor(w0, requires_grad=True)
    tb = torch.zeros(3, requires_grad=True)
    opt = factory(torch.optim, [tw, tb])
    tlosses = []
    for _ in range(6):
        opt.zero_grad()
        d = x @ tw + tb - y
        loss = (d * d).mean()
        loss.backward()
        opt.step()
        tlosses.append(loss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5)
    np.testing.assert_allclose(w, tw.detach().numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(b, tb.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("foreach", [None, False])
def test_step_counts_as_an_in_place_write(foreach):
    """A step changes the params in place: a graph that saved one before the
    step fails its backward, naming the update (autograd's version check)."""
    w = ev.ones(3, requires_grad=True)
    opt = optim.Adam([w], foreach=foreach)
    w.grad = ev.ones(3)
    loss = (w * w).sum()
    opt.step()
    with pytest.raises(RuntimeError, match="modified in place by adam"):
        loss.backward()


def test_step_records_no_graph():
    w = ev.ones(3, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = ev.ones(3)
    opt.step()
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    assert not opt.state[w]["momentum_buffer"].requires_grad


def test_step_on_another_worker_thread():
    """Steps issued under asyncs.thread(t) run on t, ordered with the ops on
    the params issued elsewhere (the runtime's cross-stream dependencies)."""
    arrays = make_params(np.float32, shapes=[(300,), (40, 7)])
    gs_steps = grads_for(arrays, 4)
    params = [ev.tensor(a) for a in arrays]
    opt = optim.Adam(params, lr=1e-2, amsgrad=True)
    t = ev.asyncs.Thread()
    for gs in gs_steps:
        for p, g in zip(params, gs):
            p.grad = ev.tensor(g) * 1.0  # made on the default thread
        with ev.asyncs.thread(t):
            opt.step()
        params[0].add_(0.0)  # a write on the default thread, after the step
    want, *_ = ref_adam(arrays, gs_steps, lr=1e-2, amsgrad=True)
    for p, w in zip(params, want):
        np.testing.assert_array_equal(np_value(p), w)


@pytest.mark.parametrize("opt_cls,kw", [(optim.SGD, dict(lr=0.1, momentum=0.9)),
                                        (optim.AdamW, dict(lr=1e-2, amsgrad=True))])
def test_state_dict_through_a_file(opt_cls, kw, tmp_path):
    """eagervm.save / eagervm.load keep an optimizer's state dict (tensors,
    integer ids, int steps, tuples), so training resumes where it stopped."""
    arrays = make_params(np.float32)
    gs_steps = grads_for(arrays, 5)
    whole, _ = train(opt_cls, arrays, gs_steps, kw)

    params = [ev.tensor(a) for a in arrays]
    opt = opt_cls(params, **kw)
    for gs in gs_steps[:3]:
        for p, g in zip(params, gs):
            p.grad = ev.tensor(g)
        opt.step()
    path = str(tmp_path / "ckpt.safetensors")
    ev.save({"params": params, "optim": opt.state_dict()}, path)
    ckpt = ev.load(path)
    params = list(ckpt["params"])
    opt = opt_cls(params, **kw)
    opt.load_state_dict(ckpt["optim"])
    for gs in gs_steps[3:]:
        for p, g in zip(params, gs):
            p.grad = ev.tensor(g)
        opt.step()
    for x, y in zip(whole, params):
        np.testing.assert_array_equal(np_value(x), np_value(y))
