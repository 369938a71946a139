"""eagervm.optim.SGD: stochastic gradient descent with momentum, as
torch.optim.SGD, each step one fused instruction for all the parameters of a
group (or one per parameter with foreach=False: the same results)."""
from .. import _C
from .optimizer import Optimizer, _MULTI_CHUNK, _split_group, _update

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with optional momentum, dampening, Nesterov momentum, weight decay
    (L2, added to the gradient) and maximize, as torch.optim.SGD (its
    single-tensor formulas, in their order of float operations):

        g = -grad if maximize else grad
        g = g + weight_decay * p                  (weight_decay != 0)
        buf = g (first step) or momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf   (momentum != 0)
        p = p - lr * g

    state[p]["momentum_buffer"] holds buf (only when momentum != 0).
    foreach=None or True updates a group's parameters in one instruction,
    False in one per parameter; the results are the same.
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)

    def _step(self):
        state_of = self.state._of
        for group in self.param_groups:
            hyper = (group["lr"], group["momentum"], group["dampening"],
                     group["weight_decay"], group["nesterov"], group["maximize"])
            momentum = hyper[1]
            fast, slow = _split_group(group)
            for lo in range(0, len(fast), _MULTI_CHUNK):
                chunk = fast[lo:lo + _MULTI_CHUNK]
                params = [p for p, _ in chunk]
                grads = [g for _, g in chunk]
                if momentum == 0:
                    _C._sgd_update_multi_(params, grads, None, None, *hyper)
                    continue
                bufs = [state_of(p).get("momentum_buffer") for p in params]
                firsts = [b is None for b in bufs]
                # New buffers are contiguous (see _update); the update fills
                # them from the gradients, and they are kept once it is issued.
                bufs = [_C.empty_like(p) if b is None else b for p, b in zip(params, bufs)]
                _C._sgd_update_multi_(params, grads, bufs, firsts, *hyper)
                for p, b, first in zip(params, bufs, firsts):
                    if first:
                        state_of(p)["momentum_buffer"] = b
            for p, g in slow:
                buf = state_of(p).get("momentum_buffer") if momentum != 0 else None
                first = momentum != 0 and buf is None
                if first:
                    buf = _C.empty_like(p)
                _update(_C._sgd_update_, p, g, buf, *hyper, first)
                if first:
                    state_of(p)["momentum_buffer"] = buf
