"""nn.init: PyTorch's weight initialisations, filling tensors in place.

Each function fills its tensor under no_grad (so it works on parameters) and
returns it. The random ones draw from eagervm's default generator, or from the
generator passed: eagervm.manual_seed(s) makes them reproducible.
"""
import math
import warnings

from .. import _C
from ..autograd import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def _check(tensor, fn):
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"{fn}: expected an eagervm.Tensor, got {type(tensor).__name__}")


def _check_float(tensor, fn):
    _check(tensor, fn)
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{fn}: random values need a float tensor, not {tensor.dtype}")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table): 1 for linear and
    sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope**2)) for leaky_relu
    (slope param, default 0.01), 3/4 for selu."""
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer "
                         "than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower() if isinstance(mode, str) else mode
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty(tensor):
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills tensor with values drawn uniformly from [a, b)."""
    _check_float(tensor, "uniform_")
    if not a <= b:
        raise ValueError(f"uniform_: expected a <= b, got a={a}, b={b}")
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills tensor with values drawn from N(mean, std**2)."""
    _check_float(tensor, "normal_")
    if std < 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}")
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor, val):
    """Fills tensor with val."""
    _check(tensor, "constant_")
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    """Fills tensor with ones."""
    return constant_(tensor, 1)


def zeros_(tensor):
    """Fills tensor with zeros."""
    return constant_(tensor, 0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    _check_float(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if _empty(tensor):
        return tensor
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check_float(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if _empty(tensor):
        return tensor
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(
    nonlinearity, a) and fan the fan_in or fan_out that mode names."""
    _check_float(tensor, "kaiming_uniform_")
    if _empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std**2) with std = gain / sqrt(fan) (see kaiming_uniform_)."""
    _check_float(tensor, "kaiming_normal_")
    if _empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)
