"""eagervm.optim: optimizers and learning-rate schedulers with torch.optim's
names and semantics (SGD, Adam, AdamW; lr_scheduler.StepLR and
CosineAnnealingLR).

    import eagervm.optim as optim
    opt = optim.AdamW([w, b], lr=1e-3)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    for x, y in batches:
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        opt.step()          # returns at once; the update runs on the worker
        sched.step()

A step reads each parameter's gradient (``p.grad``) and rewrites the
parameter and its state in one pass: one fused instruction for all the
parameters of a group (foreach=False: one per parameter), in PyTorch's order
of float operations, so the results agree with torch.optim's to rounding. A
step never waits for results.
"""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
