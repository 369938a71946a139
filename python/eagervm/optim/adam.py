"""eagervm.optim.Adam and AdamW, as torch.optim.Adam and AdamW (single-tensor,
non-capturable path), one fused instruction per parameter."""
from .. import _C
from .._C import Tensor
from .optimizer import Optimizer, _grad_of, _update, _zeros_for

__all__ = ["Adam", "AdamW"]


def _check_hyper(lr, betas, eps, weight_decay):
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps < 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if weight_decay < 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    """Adam (Kingma and Ba), with amsgrad, maximize and weight decay, as
    torch.optim.Adam: L2 weight decay added to the gradient, or, with
    decoupled_weight_decay=True, AdamW's decay of the parameter itself.

    Per step t (counted per parameter in state[p]["step"], an int):

        g = -grad if maximize else grad
        g = g + weight_decay * p     or     p = p * (1 - lr * weight_decay)
        exp_avg = lerp(exp_avg, g, 1 - beta1)
        exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
        max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)      (amsgrad)
        denom = sqrt(exp_avg_sq or max_exp_avg_sq) / sqrt(1 - beta2^t) + eps
        p = p - lr / (1 - beta1^t) * exp_avg / denom
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False, decoupled_weight_decay=False):
        _check_hyper(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)

    def step(self, closure=None):
        """One Adam step over every parameter that has a gradient; returns the
        closure's loss (None without a closure)."""
        loss = self._call_closure(closure)
        state_of = self.state._of
        update = _C._adam_update_
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd, amsgrad = group["lr"], group["eps"], group["weight_decay"], \
                group["amsgrad"]
            decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
            for p in group["params"]:
                g = _grad_of(p)
                if g is None:
                    continue
                state = state_of(p)
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = _zeros_for(p)
                    state["exp_avg_sq"] = _zeros_for(p)
                if amsgrad:
                    mx = state.get("max_exp_avg_sq")
                    if mx is None:
                        mx = state["max_exp_avg_sq"] = _zeros_for(p)
                else:
                    mx = None
                step = state["step"] + 1
                if type(g) is Tensor and p.is_contiguous() and g.is_contiguous():
                    update(p, g, state["exp_avg"], state["exp_avg_sq"], mx, step, lr, beta1,
                           beta2, eps, wd, decoupled, maximize)
                else:
                    _update(update, p, g, state["exp_avg"], state["exp_avg_sq"], mx, step, lr,
                            beta1, beta2, eps, wd, decoupled, maximize)
                state["step"] = step  # counted once the update is issued
        return loss


class AdamW(Adam):
    """AdamW (Loshchilov and Hutter): Adam with decoupled weight decay, as
    torch.optim.AdamW (weight_decay defaults to 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
