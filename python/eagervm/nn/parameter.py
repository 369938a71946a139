"""nn.Parameter: a leaf Tensor that requires grad, which Modules register.

eagervm's Tensor is a final C type, so there is no Parameter subclass:
Parameter(data) returns an ordinary Tensor detached from any graph with
requires_grad set, and isinstance(x, Parameter) is true for every leaf Tensor
that requires grad. Module.__setattr__ registers exactly those as parameters,
as PyTorch registers Parameter instances.

One difference follows: Parameter(data, requires_grad=False) is a detached
Tensor like any other (isinstance says False, and assigning it to a new
attribute keeps it a plain attribute); register it with
Module.register_parameter, which accepts any leaf Tensor.
"""
from .. import _C


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.Tensor) and obj.is_leaf and obj.requires_grad

    def __subclasscheck__(cls, sub):
        return isinstance(sub, type) and (sub is cls or type.__subclasscheck__(cls, sub))


class Parameter(metaclass=_ParameterMeta):
    """Parameter(data=None, requires_grad=True) -> Tensor.

    A Tensor sharing data's elements, detached from data's graph, with
    requires_grad set (data must then be a float tensor). data=None gives an
    empty float32 tensor of shape (0,).
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty(0)
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Parameter: data must be an eagervm.Tensor, not "
                            f"{type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
