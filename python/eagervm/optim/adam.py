"""eagervm.optim.Adam and AdamW, as torch.optim.Adam and AdamW (their
single-tensor, non-capturable formulas), each step one fused instruction for
all the parameters of a group (or one per parameter with foreach=False: the
same results)."""
from .. import _C
from .optimizer import Optimizer, _MULTI_CHUNK, _split_group, _update, _zeros_for

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
                 amsgrad=False, *, maximize=False, foreach=None, decoupled_weight_decay=False):
        _check_hyper(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("foreach", None)

    def _step(self):
        state_of = self.state._of
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            amsgrad = group["amsgrad"]
            hyper = (group["lr"], beta1, beta2, group["eps"], group["weight_decay"],
                     group["decoupled_weight_decay"], group["maximize"])
            fast, slow = _split_group(group)
            states = [self._state_for(state_of, p, amsgrad) for p, _ in fast]
            for lo in range(0, len(fast), _MULTI_CHUNK):
                chunk, sts = fast[lo:lo + _MULTI_CHUNK], states[lo:lo + _MULTI_CHUNK]
                steps = [st["step"] + 1 for st in sts]
                _C._adam_update_multi_(
                    [p for p, _ in chunk], [g for _, g in chunk], [st["exp_avg"] for st in sts],
                    [st["exp_avg_sq"] for st in sts],
                    [st["max_exp_avg_sq"] for st in sts] if amsgrad else None, steps, *hyper)
                for st, step in zip(sts, steps):  # counted once the update is issued
                    st["step"] = step
            for p, g in slow:
                st = self._state_for(state_of, p, amsgrad)
                step = st["step"] + 1
                _update(_C._adam_update_, p, g, st["exp_avg"], st["exp_avg_sq"],
                        st["max_exp_avg_sq"] if amsgrad else None, step, *hyper)
                st["step"] = step

    @staticmethod
    def _state_for(state_of, p, amsgrad):
        state = state_of(p)
        if not state:
            state["step"] = 0
            state["exp_avg"] = _zeros_for(p)
            state["exp_avg_sq"] = _zeros_for(p)
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = _zeros_for(p)
        return state


class AdamW(Adam):
    """AdamW (Loshchilov and Hutter): Adam with decoupled weight decay, as
    torch.optim.AdamW (weight_decay defaults to 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
