"""eagervm.optim: optimizers and learning-rate schedulers with torch.optim's
names and semantics (SGD, Adam, AdamW; lr_scheduler.StepLR and
CosineAnnealingLR). Each parameter's update is one fused instruction that
reads its gradient (``p.grad``) and rewrites the parameter and its state in
one pass; a step never waits for results."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
