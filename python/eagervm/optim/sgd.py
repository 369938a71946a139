"""eagervm.optim.SGD: stochastic gradient descent with momentum, as
torch.optim.SGD (single-tensor path), one fused instruction per parameter."""
from .. import _C
from .._C import Tensor
from .optimizer import Optimizer, _grad_of, _update

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with optional momentum, dampening, Nesterov momentum, weight decay
    (L2, added to the gradient) and maximize, as torch.optim.SGD:

        g = -grad if maximize else grad
        g = g + weight_decay * p                  (weight_decay != 0)
        buf = g (first step) or momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf   (momentum != 0)
        p = p - lr * g

    state[p]["momentum_buffer"] holds buf (only when momentum != 0).
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)

    def step(self, closure=None):
        """One SGD step over every parameter that has a gradient; returns the
        closure's loss (None without a closure)."""
        loss = self._call_closure(closure)
        state_of = self.state._of
        update = _C._sgd_update_
        for group in self.param_groups:
            lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
            wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
            for p in group["params"]:
                g = _grad_of(p)
                if g is None:
                    continue
                if momentum == 0:
                    _update(update, p, g, None, lr, 0, dampening, wd, nesterov, maximize,
                            False)
                    continue
                state = state_of(p)
                buf = state.get("momentum_buffer")
                if buf is not None:
                    if type(g) is Tensor and p.is_contiguous() and g.is_contiguous():
                        update(p, g, buf, lr, momentum, dampening, wd, nesterov, maximize,
                               False)
                    else:
                        _update(update, p, g, buf, lr, momentum, dampening, wd, nesterov,
                                maximize, False)
                    continue
                # Contiguous (see _update); the update fills it from the
                # gradient, and it is kept once that update is issued.
                buf = _C.empty_like(p)
                _update(update, p, g, buf, lr, momentum, dampening, wd, nesterov, maximize,
                        True)
                state["momentum_buffer"] = buf
        return loss
