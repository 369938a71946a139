"""Autograd: every differentiable row of the op table against finite
differences (gradcheck, generated from the table), the hand-written
derivatives, the graph's life, grad mode, hooks, the in-place check, and where
backward runs."""
import gc
import os
import re
import threading

import numpy as np
import pytest

import eagervm as ev
from eagervm import _op_refs as refs
from eagervm.autograd import gradcheck

TABLE = ev._C._op_table()["ops"]


def _rows(family):
    return [r for r in TABLE if r["family"] == family and r["grad"].startswith(("D1", "D2", "DR"))]


def _leaf(a):
    return ev.tensor(np.asarray(a, dtype=np.float64), dtype=ev.float64, requires_grad=True)


# Points where the derivative jumps or is undefined are avoided: finite
# differences across them mean nothing.
KINKS = {"abs": 0.0, "sign": 0.0, "relu": 0.0, "floor": None, "ceil": None, "round": None,
         "trunc": None}


def _draw(rng, row, shape, operand=0):
    v = refs.draw(rng, row["domain"], "float64", shape, operand)
    if row["domain"] in ("nonneg",):
        v = v + 0.1  # sqrt and log1p's derivative at 0 is infinite
    if row["name"] in KINKS:
        v = np.where(np.abs(v - np.round(v)) < 0.05, v + 0.1, v) if KINKS[row["name"]] is None \
            else np.where(np.abs(v) < 0.05, 0.3, v)
    if row["name"] in ("floor_divide", "remainder"):
        v = np.where(np.abs(v) < 0.3, 0.7, v)
    return v


@pytest.mark.parametrize("row", _rows("unary"), ids=lambda r: r["name"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_unary_rows_match_finite_differences(row, layout):
    rng = np.random.default_rng(0)
    x = _leaf(_draw(rng, row, (3, 4)))
    fn = getattr(ev, row["name"])
    if layout == "transposed":
        assert gradcheck(lambda t: fn(t.T), (x,))
    else:
        assert gradcheck(fn, (x,))


@pytest.mark.parametrize("row", _rows("binary"), ids=lambda r: r["name"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((1, 4), (3, 1))],
                         ids=["same", "row", "outer"])
def test_binary_rows_match_finite_differences(row, shapes):
    rng = np.random.default_rng(1)
    a = _draw(rng, row, shapes[0], 0)
    b = _draw(rng, row, shapes[1], 1)
    if row["name"] in ("maximum", "minimum"):
        b = b + 0.25  # no ties
    if row["name"] == "floor_divide":
        pytest.skip("its gradient is zero; finite differences straddle its jumps")
    if row["name"] == "remainder":
        b = np.where(np.abs(b) < 0.5, 1.5, b)
        a = np.floor(a / b) * b + 0.5 * b  # away from the jumps at multiples of b
    fn = getattr(ev, row["name"])
    assert gradcheck(fn, (_leaf(a), _leaf(b)))


@pytest.mark.parametrize("row", _rows("reduce"), ids=lambda r: r["name"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (0, True), ((0, 1), False)])
def test_reduce_rows_match_finite_differences(row, dim, keepdim):
    rng = np.random.default_rng(2)
    x = _leaf(rng.permutation(np.linspace(-2, 2, 12)).reshape(3, 4))  # no ties for max
    fn = getattr(ev, row["name"])
    assert gradcheck(lambda t: fn(t, dim=dim, keepdim=keepdim), (x,))


def test_every_row_says_how_it_differentiates():
    kinds = ("D1(", "D2(", "DR(", "FN(", "VIEW", "NONDIFF", "NOT_YET")
    for row in TABLE:
        assert row["grad"].startswith(kinds), row["name"]
        if row["family"] == "unary" and row["rule"] == "PREDICATE":
            assert row["grad"] == "NONDIFF", row["name"]


def test_prod_gradient_is_exact_with_zeros():
    x = _leaf([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]])
    ev.prod(x, 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 6, 0], [0, 0, 0]])


def test_max_splits_the_gradient_between_ties():
    x = _leaf([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    ev.max(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [0, 0, 0]])


# ------------------------------------------------------ hand-written rows

RNG = np.random.default_rng(3)


def _r(*shape, lo=-2, hi=2):
    return _leaf(RNG.uniform(lo, hi, size=shape))


FUNCS = {
    "matmul 2d": (lambda a, b: a @ b, lambda: (_r(3, 4), _r(4, 2))),
    "matmul batched broadcast": (lambda a, b: ev.matmul(a, b), lambda: (_r(2, 3, 4), _r(4, 5))),
    "matmul vector matrix": (lambda a, b: ev.matmul(a, b), lambda: (_r(4), _r(4, 3))),
    "matmul matrix vector": (lambda a, b: ev.matmul(a, b), lambda: (_r(3, 4), _r(4))),
    "matmul dot": (lambda a, b: ev.matmul(a, b), lambda: (_r(4), _r(4))),
    "matmul transposed": (lambda a, b: a.T @ b.T, lambda: (_r(4, 3), _r(2, 4))),
    "softmax": (lambda x: ev.softmax(x, 1), lambda: (_r(3, 5),)),
    "softmax dim0": (lambda x: ev.softmax(x, 0), lambda: (_r(3, 5),)),
    "log_softmax": (lambda x: ev.log_softmax(x, -1), lambda: (_r(3, 5),)),
    "var": (lambda x: ev.var(x, 1), lambda: (_r(3, 5),)),
    "var all": (lambda x: ev.var(x), lambda: (_r(3, 5),)),
    "std keepdim": (lambda x: ev.std(x, 0, keepdim=True), lambda: (_r(3, 5),)),
    "std correction 0": (lambda x: ev.std(x, 1, correction=0), lambda: (_r(3, 5),)),
    "clamp": (lambda x: ev.clamp(x, -1.0, 1.0), lambda: (_r(3, 5),)),
    "clamp min": (lambda x: x.clamp(min=0.5), lambda: (_r(3, 5),)),
    "where": (lambda x, y: ev.where(x > 0, x, y), lambda: (_r(3, 4), _r(4))),
    "cat": (lambda a, b: ev.cat([a, b], 1), lambda: (_r(2, 3), _r(2, 4))),
    "stack": (lambda a, b: ev.stack([a, b], 1), lambda: (_r(2, 3), _r(2, 3))),
    "index_select": (lambda x: ev.index_select(x, 0, ev.tensor([2, 0, 2])),
                     lambda: (_r(3, 4),)),
    "gather": (lambda x: ev.gather(x, 1, ev.tensor([[0, 0], [3, 1], [2, 2]])),
               lambda: (_r(3, 4),)),
    "cross_entropy": (lambda x: ev.cross_entropy(x, ev.tensor([1, 0, 3])), lambda: (_r(3, 4),)),
    "cross_entropy sum": (lambda x: ev.cross_entropy(x, ev.tensor([1, 0, 3]), reduction="sum"),
                          lambda: (_r(3, 4),)),
    "cross_entropy none": (lambda x: ev.cross_entropy(x, ev.tensor([1, 0, 3]), reduction="none"),
                           lambda: (_r(3, 4),)),
    "view": (lambda x: x.view(4, 3) * 2, lambda: (_r(3, 4),)),
    "reshape transposed": (lambda x: x.T.reshape(12), lambda: (_r(3, 4),)),
    "expand": (lambda x: x.expand(2, 3, 4), lambda: (_r(3, 1),)),
    "permute": (lambda x: x.permute(2, 0, 1), lambda: (_r(2, 3, 4),)),
    "transpose": (lambda x: x.transpose(0, 1), lambda: (_r(3, 4),)),
    "flatten": (lambda x: x.flatten(), lambda: (_r(3, 4),)),
    "squeeze unsqueeze": (lambda x: x.unsqueeze(0).squeeze(), lambda: (_r(3, 1),)),
    "getitem slices": (lambda x: x[1:, ::2], lambda: (_r(3, 4),)),
    "getitem negative step": (lambda x: x[::-1, 1], lambda: (_r(3, 4),)),
    "getitem None ellipsis": (lambda x: x[None, ..., 2], lambda: (_r(3, 4),)),
    "contiguous": (lambda x: x.T.contiguous(), lambda: (_r(3, 4),)),
    "clone": (lambda x: x.clone() * x, lambda: (_r(3, 4),)),
    "to float64": (lambda x: x.to(ev.float64), lambda: (_r(3, 4),)),
    "flip": (lambda x: ev.flip(x, (0, 1)) * x, lambda: (_r(3, 4),)),
    "roll": (lambda x: ev.roll(x, (1, -2), (0, 1)) * x, lambda: (_r(3, 4),)),
    "roll flat": (lambda x: ev.roll(x, 5), lambda: (_r(3, 4),)),
    "tril": (lambda x: ev.tril(x, 1), lambda: (_r(2, 3, 4),)),
    "triu": (lambda x: ev.triu(x, -1), lambda: (_r(3, 4),)),
    "take": (lambda x: ev.take(x, ev.tensor([[0, -1], [5, 5]])), lambda: (_r(3, 4),)),
    "scatter_add": (lambda x, s: ev.scatter_add(x, 1, ev.tensor([[0, 1, 0], [2, 2, 3]]), s),
                    lambda: (_r(2, 4), _r(2, 3))),
    "cumsum": (lambda x: ev.cumsum(x, 1), lambda: (_r(3, 4),)),
    "cumsum dim0": (lambda x: ev.cumsum(x, 0), lambda: (_r(3, 4),)),
    "sort values": (lambda x: ev.sort(x, 1)[0] * ev.arange(4, dtype=ev.float64),
                    lambda: (_r(3, 4),)),
    "topk values": (lambda x: ev.topk(x, 2, 0)[0], lambda: (_r(3, 4),)),
    "prod": (lambda x: ev.prod(x, 1), lambda: (_r(3, 4),)),
    "prod all": (lambda x: ev.prod(x), lambda: (_r(2, 3),)),
    "prod dims keepdim": (lambda x: ev.prod(x, (0, 2), keepdim=True), lambda: (_r(2, 3, 2),)),
    "prod with zeros": (lambda x: ev.prod(x * ev.tensor([1.0, 0.0, 1.0, 0.0],
                                                         dtype=ev.float64), 1),
                        lambda: (_r(3, 4),)),
    "copy_ in place": (lambda x, s: (x * 1).copy_(s) * x, lambda: (_r(3, 4), _r(4))),
    "fill_ in place": (lambda x: (x * 1).fill_(2.0) * x, lambda: (_r(3, 4),)),
    "clamp_ in place": (lambda x: (x * 1).clamp_(-1.0, 1.0), lambda: (_r(3, 4),)),
    "scatter_add_ in place": (lambda x, s: (x * 1).scatter_add_(
        1, ev.tensor([[0, 1, 0], [2, 2, 3]]), s), lambda: (_r(2, 4), _r(2, 3))),
    "tril_ in place": (lambda x: (x * 1).tril_(0), lambda: (_r(3, 4),)),
    "triu_ in place": (lambda x: (x * 1).triu_(1), lambda: (_r(3, 4),)),
    "cumsum_ in place": (lambda x: (x * 1).cumsum_(1), lambda: (_r(3, 4),)),
    "getitem index tensor": (lambda x: x[ev.tensor([2, -1, 0])], lambda: (_r(3, 4),)),
    "getitem index tensor dim1": (lambda x: x[:, ev.tensor([[1, 1], [3, 0]])],
                                  lambda: (_r(3, 4),)),
    "getitem mask": (lambda x: x[x > 0], lambda: (_r(3, 4),)),
    "cumprod": (lambda x: ev.cumprod(x, 1), lambda: (_r(3, 4),)),
    "cumprod with zeros": (lambda x: ev.cumprod(x * ev.tensor([1.0, 0.0, 1.0, 1.0],
                                                             dtype=ev.float64), 1),
                           lambda: (_r(3, 4),)),
    "cumprod dim0": (lambda x: ev.cumprod(x, 0), lambda: (_r(3, 4),)),
    "cumprod_ in place": (lambda x: (x * 1).cumprod_(1), lambda: (_r(3, 4),)),
    "mixed chain": (lambda x, w: ((x @ w).tanh() * x.sum(1, keepdim=True)).mean(),
                    lambda: (_r(3, 4), _r(4, 4))),
}


@pytest.mark.parametrize("name", list(FUNCS))
def test_hand_written_derivatives_match_finite_differences(name):
    fn, make = FUNCS[name]
    assert gradcheck(fn, make())


def test_every_differentiable_row_has_a_derivative():
    assert [r["name"] for r in TABLE if r["grad"] == "NOT_YET"] == []


def test_overwriting_in_place_cuts_the_old_values_off():
    x = _r(3, 4)
    y = x * 2
    y.uniform_()
    (y * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())


def test_integer_and_bool_results_never_require_grad():
    x = _r(3, 4)
    assert not (x > 0).requires_grad
    assert not ev.argmax(x).requires_grad
    assert not x.to(ev.int64).requires_grad
    with pytest.raises(ValueError, match="only float tensors can require grad"):
        ev.tensor([1, 2], requires_grad=True)


# -------------------------------------------------------- the public surface

def test_leaf_state_and_grad_fn():
    x = ev.ones(2, 3, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None and x.grad is None
    y = x * 2  # the line grad_fn.site names
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "mul_backward"
    nxt = y.grad_fn.next_functions
    assert nxt[0][0].name() == "AccumulateGrad" and nxt[1][0] is None
    assert y.grad_fn.site.endswith(f"test_autograd.py:{_line_of('y = x * 2  # the line grad_fn.site names')}")
    z = ev.ones(2)
    assert not z.requires_grad and z.requires_grad_() is z and z.requires_grad
    z.requires_grad = False
    assert not z.requires_grad
    with pytest.raises(ValueError, match="not a leaf"):
        y.requires_grad_(False)
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None


def _line_of(text):
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if line.strip() == text and "_line_of" not in line:
                return i
    raise AssertionError(text)


def test_gradients_accumulate_and_can_be_set():
    x = ev.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5, 7, 9])
    x.grad = None
    assert x.grad is None
    x.grad = ev.zeros(3)
    with pytest.raises(ValueError, match="dtype"):
        x.grad = ev.zeros(4)
    with pytest.raises(TypeError):
        x.grad = 3


def test_backward_gradient_argument_and_errors():
    x = ev.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(ValueError, match="implicitly created only for outputs with one element"):
        y.backward()
    y.backward(ev.tensor([1.0, 10.0]), retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [2, 20])
    with pytest.raises(ValueError, match="another shape"):
        y.backward(ev.ones(3))
    with pytest.raises(ValueError, match="does not require grad"):
        ev.ones(2).sum().backward()
    with pytest.raises(NotImplementedError, match="create_graph"):
        y.sum().backward(create_graph=True)
    with pytest.raises(NotImplementedError, match="create_graph"):
        ev.autograd.grad(y.sum(), x, create_graph=True)


def test_a_freed_graph_raises_on_a_second_backward_and_retain_graph_keeps_it():
    x = ev.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1, 2]) * (1 + np.array([1, 2])))
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        y.backward()


def test_autograd_grad_leaves_dot_grad_alone():
    x = ev.tensor([1.0, 2.0], requires_grad=True)
    w = ev.tensor([3.0, 4.0], requires_grad=True)
    u = ev.tensor([5.0], requires_grad=True)
    y = (x * w).sum()
    gx, gw = ev.autograd.grad(y, (x, w), retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), [3, 4])
    np.testing.assert_allclose(gw.numpy(), [1, 2])
    assert x.grad is None and w.grad is None
    with pytest.raises(ValueError, match="allow_unused"):
        ev.autograd.grad(y, (x, u), retain_graph=True)
    gx, gu = ev.autograd.grad(y, (x, u), allow_unused=True, retain_graph=True)
    assert gu is None
    # A non-leaf input: the gradient arriving at it.
    h = x * 2
    (gh,) = ev.autograd.grad((h * h).sum(), h)
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy())


def test_several_outputs_and_a_shared_subgraph():
    x = ev.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    ev.autograd.backward([h.sum(), (h * 3).sum()])
    np.testing.assert_allclose(x.grad.numpy(), 8 * np.array([1, 2]))


# ------------------------------------------------------------- grad mode

def test_no_grad_enable_grad_and_decorators():
    x = ev.ones(2, requires_grad=True)
    with ev.no_grad():
        assert not ev.is_grad_enabled()
        assert not (x * 2).requires_grad
        with ev.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert ev.is_grad_enabled()

    @ev.no_grad()
    def f():
        return x * 2

    assert not f().requires_grad and ev.is_grad_enabled()
    with ev.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ev.is_grad_enabled()


def test_grad_mode_is_per_thread():
    seen = {}
    entered, release = threading.Event(), threading.Event()

    def other():
        seen["other"] = ev.is_grad_enabled()
        entered.set()
        release.wait(10)

    with ev.no_grad():
        t = threading.Thread(target=other)
        t.start()
        entered.wait(10)
        seen["here"] = ev.is_grad_enabled()
        release.set()
        t.join(10)
    assert seen == {"other": True, "here": False}


# ------------------------------------------------------------------ hooks

def test_tensor_hooks_see_and_replace_gradients():
    x = ev.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    h = x * 3
    h.register_hook(lambda g: g * 10)
    h.sum().backward()
    np.testing.assert_allclose(seen[0], [30, 30])
    np.testing.assert_allclose(x.grad.numpy(), [30, 30])


def test_post_accumulate_grad_hook_runs_after_the_leaf_has_its_grad():
    w = ev.tensor([1.0, 2.0], requires_grad=True)
    got = []
    w.register_post_accumulate_grad_hook(lambda p: got.append(p.grad.numpy().copy()))
    (w * w).sum().backward()
    np.testing.assert_allclose(got[0], [2, 4])
    with pytest.raises(ValueError, match="leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(ValueError, match="does not require grad"):
        ev.ones(2).register_hook(lambda g: None)


def test_an_exception_in_a_hook_propagates_and_the_runtime_stays_usable():
    x = ev.tensor([1.0], requires_grad=True)

    def bad(g):
        raise KeyError("from the hook")

    x.register_hook(bad)
    with pytest.raises(KeyError, match="from the hook"):
        (x * 2).sum().backward()
    y = ev.tensor([2.0], requires_grad=True)
    (y * 2).sum().backward()
    assert y.grad.item() == 2


@pytest.mark.parametrize("on_leaf", [False, True])
@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_a_hook_that_changes_the_gradients_shape_or_dtype_is_refused(on_leaf, bad):
    x = ev.ones(3, requires_grad=True)
    y = x * 2
    target = x if on_leaf else y
    if bad == "shape":
        target.register_hook(lambda g: ev.ones(5))
        expected = r"tensor of \[5\] float32 for a gradient of \[3\] float32"
    else:
        target.register_hook(lambda g: ev.ones(3, dtype=ev.float64))
        expected = r"tensor of \[3\] float64 for a gradient of \[3\] float32"
    with pytest.raises(ValueError, match=expected):
        y.sum().backward()
    assert x.grad is None  # nothing was accumulated
    z = ev.ones(3, requires_grad=True)
    (z * 2).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [2, 2, 2])


def test_wrong_gradients_are_refused_naming_both_shapes():
    x = ev.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"shape and dtype \(\[3\] float32\), got \[4\] float32"):
        x.grad = ev.ones(4)
    with pytest.raises(ValueError, match=r"another shape than its output: \[2\] float32 for an "
                                         r"output of \[3\] float32"):
        (x * 2).backward(ev.ones(2))
    with pytest.raises(ValueError, match="input 0 does not require grad"):
        ev.autograd.grad([(x * 2).sum()], [ev.ones(3)])
    unused = ev.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="input 0 is not used to compute the outputs"):
        ev.autograd.grad([(x * 2).sum()], [unused])
    (g,) = ev.autograd.grad([(x * 2).sum()], [x])
    np.testing.assert_allclose(g.numpy(), [2, 2, 2])


# --------------------------------------------------------- in-place safety

def test_modifying_a_saved_tensor_names_both_ops_and_lines():
    x = ev.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    msg = str(info.value)
    assert re.search(rf"saved by exp_backward at .*test_autograd.py:{_line_of('y = x.exp()')}",
                     msg), msg
    assert re.search(rf"modified in place by add\w* at .*test_autograd.py:{_line_of('y.add_(1)')}",
                     msg), msg


def test_in_place_ops_on_non_leaves_are_differentiated():
    x = _leaf([0.5, 1.5, -1.0])
    y = x * 2
    y.mul_(x)        # y = 2 x^2
    y.sin_()
    y.sum().backward()
    v = np.array([0.5, 1.5, -1.0])
    np.testing.assert_allclose(x.grad.numpy(), np.cos(2 * v * v) * 4 * v, rtol=1e-12)


def test_in_place_on_a_leaf_that_requires_grad_is_refused_but_allowed_under_no_grad():
    w = ev.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.add_(1)
    with ev.no_grad():
        w.add_(1)
    np.testing.assert_allclose(w.detach().numpy(), [2, 2, 2])
    with pytest.raises(RuntimeError, match="requires grad"):
        w[0] = 5.0


def test_in_place_through_views_made_untracked_is_refused_rather_than_losing_gradients():
    w = ev.ones(4, requires_grad=True)
    buf = ev.zeros(4)
    part = buf[:2]  # made while buf did not require grad: it records nothing
    with pytest.raises(RuntimeError, match="views made while it did not require grad"):
        part.add_(w[:2])
    with pytest.raises(RuntimeError, match="views made while it did not require grad"):
        buf.add_(w)
    with pytest.raises(RuntimeError, match="shares its elements with other views"):
        buf[0] = w[0]
    del part
    buf.add_(w)  # no other view now
    buf.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [1, 1, 1, 1])


def test_in_place_on_a_view_of_a_leaf_is_refused():
    w = ev.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad"):
        w[1:3].mul_(2.0)
    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad"):
        w[0] = 5.0


# In-place ops through recorded views (CopySlices): each case changes a
# view of a non-leaf in place, then uses the base, the view or another
# view of it. Written for both libraries (eagervm and torch spell these
# ops alike).
def _slice_mul(A, B):
    x = A * 1
    v = x[1:3]
    v.mul_(B[1:3])
    return (x * x).sum()


def _column_exp(A, B):
    x = A + 0
    x[:, 1].exp_()
    return (x * B).sum()


def _transposed_add(A, B):
    x = A * 2
    x.T.add_(B.T)
    return x.sin().sum()


def _view_of_a_view(A, B):
    x = A * 1
    x[1:][:, ::2].sin_()
    return (x * B).sum()


def _other_view_follows(A, B):
    x = A * 1
    w = x[0]
    x[0:2].mul_(3.0)
    return (w * B[0]).sum() + x.sum()


def _base_in_place_with_a_view(A, B):
    x = A * 1
    w = x[1]
    x.mul_(B)
    return (w * w).sum()


def _twice_and_the_view_itself(A, B):
    x = A * 1
    v = x[:, 0]
    x[0].mul_(2.0)
    v.add_(B[:, 0])
    return (x ** 2).sum() + (v * v).sum()


def _reshaped(A, B):
    x = A * 1
    v = x.reshape(20)
    v[3:7].tanh_()
    return (x * B).sum()


def _setitem(A, B):
    x = A * 1
    x[1:3] = B[1:3] * 2
    x[:, 0] = 5.0
    return (x * x).sum()


def _setitem_into_zeros(A, B):
    z = (A * 0).detach()
    z[2] = B[0]
    z[0, 1:3] = B[3, :2]
    return (z * z * A).sum()


_THROUGH_VIEWS = [_slice_mul, _column_exp, _transposed_add, _view_of_a_view,
                  _other_view_follows, _base_in_place_with_a_view,
                  _twice_and_the_view_itself, _reshaped, _setitem, _setitem_into_zeros]


@pytest.mark.parametrize("fn", _THROUGH_VIEWS, ids=lambda f: f.__name__.strip("_"))
def test_in_place_through_views_gradcheck(fn):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    assert gradcheck(fn, (_leaf(a), _leaf(b)))


@pytest.mark.parametrize("fn", _THROUGH_VIEWS, ids=lambda f: f.__name__.strip("_"))
def test_in_place_through_views_against_torch(fn):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    grads = []
    for lib in (ev, torch):
        A, B = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        out = fn(A, B)
        out.backward()
        grads.append((out.detach().numpy(), A.grad.numpy(), B.grad.numpy()))
    for mine, theirs in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)


def test_in_place_through_a_view_names_its_nodes():
    x = ev.ones(3, 4, requires_grad=True) * 1
    v = x[1]
    v.mul_(2.0)
    assert x.grad_fn.name() == "CopySlices"
    assert v.grad_fn.name() == "as_strided_backward"
    w = x[2]  # a view made after the change takes x's new graph directly
    assert w.grad_fn.name() == "slice_backward" or w.grad_fn.name().endswith("_backward")


def test_a_saved_view_changed_through_another_is_caught():
    x = ev.ones(3, requires_grad=True) * 1
    v = x[0:2]
    y = v.sin()  # saves v
    x[1:3].mul_(2.0)
    with pytest.raises(RuntimeError, match="modified in place by"):
        (y.sum() + x.sum()).backward()


def test_a_leafs_accumulator_runs_as_soon_as_its_gradient_is_complete():
    # Data-parallel training starts a bucket's all-reduce from the
    # post-accumulate hook: it must fire while backward goes on, also when
    # the accumulator was made in an earlier step (kept alive by that
    # step's graph here), not after the rest of the walk.
    x = ev.randn(4, 3)
    w1, w2 = ev.randn(3, 3, requires_grad=True), ev.randn(3, 2, requires_grad=True)
    order = []
    w2.register_post_accumulate_grad_hook(lambda t: order.append("w2 accumulated"))

    def step():
        h1 = x @ w1
        h1.register_hook(lambda g: order.append("h1 gradient"))
        return (h1 @ w2).sum()

    earlier = step()
    earlier.backward(retain_graph=True)
    order.clear()
    step().backward()
    assert order == ["w2 accumulated", "h1 gradient"]
    del earlier


# ------------------------------------------------------ where backward runs

def test_backward_runs_on_the_forward_ops_thread():
    t = ev.asyncs.Thread()
    x = ev.randn(64, 64, requires_grad=True)
    with ev.asyncs.thread(t):
        y = (x @ x).tanh().sum()
    with ev.profiler.profile() as prof:
        y.backward()
        ev.synchronize()
    backward = [e for e in prof.events if (e.function or "").endswith("_backward")]
    # (sum_backward is views only: it issues no instruction.)
    assert {e.function for e in backward} >= {"tanh_backward", "matmul_backward"}
    assert {e.thread_uid for e in backward} == {t.uid}
    # and their line is the forward's
    assert {e.line for e in backward} == {_line_of("y = (x @ x).tanh().sum()")}


def test_backward_never_waits_for_a_kernel():
    # A chain whose forward is still queued: backward only issues work.
    x = ev.randn(256, 256, requires_grad=True)
    y = x
    for _ in range(20):
        y = (y @ x).tanh()
    y.sum().backward()
    assert x.grad is not None
    assert np.isfinite(x.grad.numpy()).all()


# ---------------------------------------------------------- graph lifetime

def test_a_long_chain_backward_and_free_do_not_overflow_the_stack():
    x = ev.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0
    del y
    gc.collect()


def _rss_kb():
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
@pytest.mark.skipif(bool(ev.config()["build"]["sanitizers"]),
                    reason="a sanitizer's quarantine holds freed memory (ASan checks leaks)")
def test_graph_memory_is_freed_rss_stays_flat_over_100000_steps():
    w = ev.randn(8, 4, requires_grad=True)
    x = ev.randn(16, 8)

    def step():
        loss = (x @ w).relu().mean()
        loss.backward()
        with ev.no_grad():
            w.sub_(w.grad * 0.01)
        w.grad = None

    for _ in range(2000):
        step()
    ev.synchronize()
    before = _rss_kb()
    for _ in range(100_000):
        step()
    ev.synchronize()
    grown = _rss_kb() - before
    assert grown < 8 * 1024, f"RSS grew by {grown} KiB over 100,000 steps"


# -------------------------------------------------------------- vs PyTorch

@pytest.mark.parametrize("threads", [False, True], ids=["one thread", "two threads"])
def test_random_compositions_match_torch_autograd(threads):
    import contextlib

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    worker = ev.asyncs.Thread() if threads else None
    for trial in range(20):
        a = rng.uniform(0.5, 1.5, size=(4, 5))
        w = rng.uniform(-1, 1, size=(5, 3))
        b = rng.uniform(-1, 1, size=(3,))
        out = {}
        for lib in ("ev", "torch"):
            if lib == "ev":
                A, W, B = (ev.tensor(v, dtype=ev.float64, requires_grad=True) for v in (a, w, b))
                sm, ls = (lambda t: ev.softmax(t, 1)), (lambda t: ev.log_softmax(t, 1))
            else:
                A, W, B = (torch.tensor(v, requires_grad=True) for v in (a, w, b))
                sm, ls = (lambda t: torch.softmax(t, 1)), (lambda t: torch.log_softmax(t, 1))
            on_worker = ev.asyncs.thread(worker) if (lib == "ev" and threads) \
                else contextlib.nullcontext()
            with on_worker:  # half of the forward (and so its backward) on another worker
                h = (A @ W + B)
            h = [h.tanh(), h.sigmoid(), sm(h), ls(h), h.exp() / (1 + h * h)][trial % 5]
            h = h[:, 1:] * A.T[:3, :2].sum(0)      # views and broadcasting
            h2 = h * 1.0
            h2.mul_(h)                              # in place on a non-leaf
            col = h2[:, trial % 2]
            h2[1:3].add_(h[1:3] * 0.5)              # in place through a view
            h2[0] = W[trial % 5, :2]                # assignment through a view
            loss = (h2.sum(1) ** 2).mean() + A.log().sum() + (col * col).sum()
            loss.backward()
            out[lib] = [t.grad.numpy() for t in (A, W, B)]
        for g_ev, g_t in zip(out["ev"], out["torch"]):
            np.testing.assert_allclose(g_ev, g_t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_float32_gradient_matches_numpy(reduction):
    rng = np.random.default_rng(11)
    logits = rng.normal(size=(37, 10)).astype(np.float32) * 4
    target = rng.integers(0, 10, size=37)
    x = ev.tensor(logits, requires_grad=True)
    loss = ev.cross_entropy(x, ev.tensor(target), reduction=reduction)
    g = rng.uniform(0.5, 2, size=37).astype(np.float32)
    if reduction == "none":
        loss.backward(ev.tensor(g))
    else:
        loss.backward()
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(37), target] -= 1
    scale = {"mean": np.full(37, 1 / 37), "sum": np.ones(37), "none": g}[reduction]
    np.testing.assert_allclose(x.grad.numpy(), p * scale[:, None], rtol=2e-6, atol=1e-7)


def test_linear_weight_gradient_arrives_contiguous():
    # x @ w.T: the weight's gradient is made in w's layout, so .grad takes it as it is.
    x = ev.randn(8, 5)
    w = ev.randn(3, 5, requires_grad=True)
    (x @ w.T).sum().backward()
    assert w.grad.is_contiguous()
    np.testing.assert_allclose(w.grad.numpy(), np.ones((8, 3)).T @ x.numpy(), rtol=1e-5, atol=1e-6)  # float32 sums


def test_grad_never_aliases_another_tensor():
    a = ev.ones(3, requires_grad=True)
    b = ev.ones(3, requires_grad=True)
    (a + b).sum().backward()          # both get the same incoming gradient
    a.grad.add_(1)
    np.testing.assert_array_equal(b.grad.numpy(), [1, 1, 1])
    x = ev.ones(3, requires_grad=True)
    g = ev.ones(3)
    x.backward(g)                     # the caller's gradient stays the caller's
    g.add_(5)
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 1])
    w = ev.ones(2, 3, requires_grad=True)
    seen = []
    w.register_hook(lambda gr: seen.append(gr))
    (w * 2).sum().backward()          # a hook kept the gradient: .grad is a copy
    w.grad.add_(1)
    np.testing.assert_array_equal(seen[0].numpy(), np.full((2, 3), 2.0))


def test_a_failure_inside_a_backward_kernel_names_the_backward_and_the_forward_line():
    x = ev.randn(4, 3, requires_grad=True)
    loss = ev.cross_entropy(x, ev.tensor([0, 1, 7, 2]))  # class 7 of 3: a kernel failure
    loss.backward()  # returns: the backward kernel fails later, on its worker
    with pytest.raises(IndexError) as info:
        x.grad.numpy()
    msg = str(info.value)
    line = _line_of("loss = ev.cross_entropy(x, ev.tensor([0, 1, 7, 2]))  # class 7 of 3: a "
                    "kernel failure")
    assert "cross_entropy_backward" in msg and f"test_autograd.py:{line}" in msg, msg
    assert "target 7 is out of range for 3 classes" in msg
    # the forward's own failure is reported where its result is read
    with pytest.raises(IndexError, match="cross_entropy failed"):
        loss.item()
    ev.synchronize()  # nothing unreported is left for later tests
    # the runtime stays usable
    y = ev.ones(2, requires_grad=True)
    (y * 3).sum().backward()
    assert y.grad.tolist() == [3, 3]
