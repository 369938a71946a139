"""Reverse-mode automatic differentiation, with PyTorch's names and meanings.

    w = eagervm.randn(3, 2, requires_grad=True)
    loss = (x @ w).relu().sum()
    loss.backward()          # w.grad now holds d loss / d w

The graph lives in the C autograd layer (include/eagervm/autograd.h). The
backward walk runs on the calling thread and never waits for a kernel: each
backward op is issued as an ordinary instruction on the worker thread of its
forward op (a forward under asyncs.thread(t) gets its backward on t), with the
forward op's line, so a failure inside it names both.
"""
import functools as _functools

from .. import _C
from .gradcheck import gradcheck

__all__ = ["backward", "grad", "gradcheck", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "Node"]

Node = _C.Node
is_grad_enabled = _C.is_grad_enabled


def _as_tuple(x):
    if x is None or isinstance(x, _C.Tensor):
        return (x,)
    return tuple(x)


def _no_create_graph(create_graph):
    if create_graph:
        raise NotImplementedError(
            "create_graph=True: higher-order gradients are not supported yet")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of tensors into the .grad of their graph's leaves.

    grad_tensors: one gradient per tensor (None for a one-element tensor means 1).
    retain_graph: keep the saved tensors for another backward (default: False).
    """
    _no_create_graph(create_graph)
    if inputs is not None:
        raise NotImplementedError("backward(inputs=...) is not supported yet; use grad()")
    tensors = _as_tuple(tensors)
    grads = (None,) * len(tensors) if grad_tensors is None else _as_tuple(grad_tensors)
    _C._backward(tensors, grads, bool(retain_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of outputs with respect to inputs, as a tuple; no .grad changes.

    allow_unused: give None for an input the outputs do not depend on (else an error).
    """
    _no_create_graph(create_graph)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grads = (None,) * len(outputs) if grad_outputs is None else _as_tuple(grad_outputs)
    return _C._grad(outputs, inputs, grads, bool(retain_graph), bool(allow_unused))


class _GradMode:
    """A context manager and decorator that sets grad mode for the calling thread."""

    _mode = True

    def __enter__(self):
        self._prev = _C._set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        mode = self._mode

        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _C._set_grad_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _C._set_grad_enabled(prev)

        return wrapper


class no_grad(_GradMode):
    """Ops issued inside are not recorded (results do not require grad).

    Thread-local, like asyncs.thread: other Python threads keep their mode.
    Use as `with eagervm.no_grad():` or as a decorator `@eagervm.no_grad()`.
    """

    _mode = False


class enable_grad(_GradMode):
    """Turns recording back on inside a no_grad block (context manager or decorator)."""

    _mode = True


class set_grad_enabled(_GradMode):
    """Sets grad mode to `mode` at once; also a context manager that restores it."""

    def __init__(self, mode):
        self._mode = bool(mode)
        self._prev = _C._set_grad_enabled(self._mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        _C._set_grad_enabled(self._prev)
        return super().__call__(fn)
