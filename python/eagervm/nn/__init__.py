"""eagervm.nn: neural-network layers, with PyTorch's names and meanings.

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    loss = nn.CrossEntropyLoss()(model(x), target)
    loss.backward()                  # each parameter's .grad

Layers are Modules holding parameters (leaf Tensors that require grad, see
nn.Parameter) and compose eagervm's differentiable ops; nn.functional has
them as functions and nn.init PyTorch's initialisations; nn.parallel has
DistributedDataParallel (over eagervm.distributed).
"""
from . import functional, init, parallel
from .container import ModuleList, Sequential
from .layers import GELU, Dropout, Embedding, LayerNorm, Linear, ReLU, Sigmoid, Softmax, Tanh
from .loss import CrossEntropyLoss, MSELoss, NLLLoss
from .module import Module
from .parameter import Parameter

__all__ = ["Module", "Parameter", "Linear", "ReLU", "GELU", "Sigmoid", "Tanh", "Softmax",
           "Dropout", "LayerNorm", "Embedding", "Sequential", "ModuleList", "CrossEntropyLoss",
           "MSELoss", "NLLLoss", "functional", "init", "parallel"]
