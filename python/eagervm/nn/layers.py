"""The layers of eagervm.nn: Linear, the activations, Dropout, LayerNorm, Embedding.

Each holds its parameters and calls the function of the same name in
nn.functional; initialisation follows PyTorch's defaults (nn.init).
"""
import math

from .. import _C
from ..autograd import no_grad
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _dtype(dtype):
    dtype = _C.float32 if dtype is None else dtype
    if not isinstance(dtype, _C.dtype) or not dtype.is_floating_point:
        raise TypeError(f"parameters need a float dtype, not {dtype!r}")
    return dtype


def _size(value, name, layer):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{layer}: {name} must be a non-negative int, got {value!r}")
    return value


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features); weight from
    kaiming_uniform_(a=sqrt(5)) and bias from U(-1/sqrt(in_features), 1/sqrt(in_features)),
    PyTorch's defaults."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = _size(in_features, "in_features", "Linear")
        self.out_features = _size(out_features, "out_features", "Linear")
        dtype = _dtype(dtype)
        self.weight = Parameter(_C.empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(_C.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    """max(x, 0), elementwise."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """x * Phi(x) (approximate='none') or its tanh approximation ('tanh')."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    """1 / (1 + exp(-x)), elementwise."""

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """tanh(x), elementwise."""

    def forward(self, input):
        return F.tanh(input)


class Softmax(Module):
    """Softmax along dim (PyTorch's legacy choice, with a warning, when dim is None)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Dropout(Module):
    """In training mode, zeros each element with probability p and scales the others
    by 1 / (1 - p); the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class LayerNorm(Module):
    """Normalises over the trailing normalized_shape dimensions, then (with
    elementwise_affine) scales by weight (ones at first) and shifts by bias (zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        for s in shape:
            _size(s, "normalized_shape", "LayerNorm")
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        dtype = _dtype(dtype)
        if elementwise_affine:
            self.weight = Parameter(_C.empty(*shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(_C.empty(*shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(Module):
    """A lookup table: row i of weight (num_embeddings, embedding_dim) for index i;
    weight from N(0, 1), with the padding_idx row zeroed and given no gradient."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = _size(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = _size(embedding_dim, "embedding_dim", "Embedding")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("Padding_idx must be within num_embeddings")
            if padding_idx < 0:
                padding_idx += num_embeddings
        if sparse:
            raise NotImplementedError("Embedding: sparse gradients are not supported (eagervm "
                                      "has no sparse tensors)")
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            # register_parameter: a frozen weight is no nn.Parameter to __setattr__.
            self.register_parameter("weight", Parameter(
                _C.empty(num_embeddings, embedding_dim, dtype=_dtype(dtype), device=device),
                requires_grad=not _freeze))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError("Shape of weight does not match num_embeddings and "
                                 "embedding_dim")
            self.register_parameter("weight", Parameter(_weight, requires_grad=not _freeze))

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None):
        """An Embedding whose weight is embeddings (2-d; frozen unless freeze=False)."""
        if not isinstance(embeddings, _C.Tensor) or embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        return s
