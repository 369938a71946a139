"""eagervm.nn.parallel: data-parallel training over eagervm.distributed
(PyTorch's name: DistributedDataParallel)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
