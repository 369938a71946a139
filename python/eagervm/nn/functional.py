"""nn.functional: the layers and losses of eagervm.nn as functions (PyTorch's names).

Every function is a composition of eagervm's differentiable ops, so autograd
differentiates it with no code of its own here.
"""
import math
import warnings

from .. import _C
from ..autograd import no_grad as _no_grad

__all__ = ["linear", "relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "dropout",
           "layer_norm", "embedding", "cross_entropy", "nll_loss", "mse_loss"]


def _tensor(x, fn, what="input"):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{fn}: {what} must be an eagervm.Tensor, not {type(x).__name__}")
    return x


def _integer_target(target, fn):
    _tensor(target, fn, "target")
    if target.dtype.is_floating_point or target.dtype == _C.bool:
        raise TypeError(f"{fn}: target must be an integer tensor of class indices, "
                        f"not {target.dtype}")


_REDUCTIONS = ("none", "mean", "sum")


def _reduction(reduction, size_average, reduce, fn):
    """The reduction string, from the legacy size_average/reduce flags when given."""
    if size_average is not None or reduce is not None:
        warnings.warn(f"{fn}: size_average and reduce are deprecated, use reduction",
                      DeprecationWarning, stacklevel=3)
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


# --------------------------------------------------------------- layers

def linear(input, weight, bias=None):
    """input @ weight.T + bias: weight is (out_features, in_features), bias (out_features,)."""
    _tensor(input, "linear")
    _tensor(weight, "linear", "weight")
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-d (out_features, in_features), got shape "
                         f"{tuple(weight.shape)}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input of shape {tuple(input.shape)} does not end in "
                         f"in_features={weight.shape[1]} (weight {tuple(weight.shape)})")
    out = input.matmul(weight.T)
    if bias is not None:
        out = out + _tensor(bias, "linear", "bias")
    return out


def relu(input, inplace=False):
    """max(input, 0) (in place on input with inplace=True)."""
    _tensor(input, "relu")
    return input.relu_() if inplace else input.relu()


def gelu(input, approximate="none"):
    """The Gaussian error linear unit: x * Phi(x) (approximate='none', with erf) or
    PyTorch's tanh approximation (approximate='tanh')."""
    _tensor(input, "gelu")
    if approximate == "none":
        return input.gelu()
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (inner.tanh() + 1.0)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def sigmoid(input):
    """The logistic function 1 / (1 + exp(-input))."""
    return _tensor(input, "sigmoid").sigmoid()


def tanh(input):
    """The hyperbolic tangent."""
    return _tensor(input, "tanh").tanh()


def _softmax_dim(name, ndim):
    # PyTorch's legacy choice when dim is not given, with its warning.
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, dtype=None):
    """exp(input) normalised to sum 1 along dim (input cast to dtype first if given)."""
    _tensor(input, "softmax")
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return input.softmax(dim)


def log_softmax(input, dim=None, dtype=None):
    """log(softmax(input, dim)), computed stably."""
    _tensor(input, "log_softmax")
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return input.log_softmax(dim)


def dropout(input, p=0.5, training=True, inplace=False):
    """In training, zeros each element with probability p (a mask from rand_like(input)
    > p) and scales the rest by 1 / (1 - p); the identity otherwise."""
    _tensor(input, "dropout")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    # The mask in input's dtype, built in place in one buffer: 1 / (1 - p) where the
    # draw is > p, else 0. A multiplication (not where()) keeps NaNs NaN, as PyTorch does.
    mask = _C.rand_like(input)
    mask.gt_(p)
    mask.mul_(1.0 / (1.0 - p))
    return input.mul_(mask) if inplace else input * mask


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalises over the trailing dimensions normalized_shape: (x - mean) /
    sqrt(var + eps) with the biased variance, then * weight + bias."""
    _tensor(input, "layer_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) \
        else tuple(normalized_shape)
    n = len(shape)
    if n == 0 or input.ndim < n or tuple(input.shape[input.ndim - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size"
                           f"{list(input.shape)}")
    dims = tuple(range(input.ndim - n, input.ndim))
    mean = input.mean(dim=dims, keepdim=True)
    var = input.var(dim=dims, correction=0, keepdim=True)
    out = (input - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * _tensor(weight, "layer_norm", "weight")
    if bias is not None:
        out = out + _tensor(bias, "layer_norm", "bias")
    return out


def _embedding_renorm_(weight, flat, max_norm, norm_type):
    """PyTorch's embedding_renorm_: each row of weight that flat looks up and whose
    norm exceeds max_norm is scaled in place to norm max_norm (no gradient: it is an
    update of the table, not part of the function)."""
    with _no_grad():
        rows_at = flat.unique()  # once per row, so that the in-place add below is exact
        rows = weight.index_select(0, rows_at)
        if norm_type == math.inf:
            norms = rows.abs().max(dim=1, keepdim=True)
        else:
            norms = rows.abs().pow(norm_type).sum(dim=1, keepdim=True).pow(1.0 / norm_type)
        scale = _C.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        index = rows_at.unsqueeze(1).expand(rows_at.shape[0], weight.shape[1])
        weight.scatter_add_(0, index, rows * (scale - 1.0))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """The rows of weight (num_embeddings, embedding_dim) at the indices input: the
    result has shape input.shape + (embedding_dim,).

    padding_idx: positions holding it pass no gradient to weight. max_norm: the rows
    looked up whose norm_type-norm exceeds it are first scaled down to it, in place in
    weight (a sync point on input). scale_grad_by_freq: each row's gradient is divided
    by how often the mini-batch looks it up.
    """
    _tensor(input, "embedding")
    if input.dtype.is_floating_point or input.dtype == _C.bool:
        raise TypeError(f"embedding: input must be an integer tensor of indices, not "
                        f"{input.dtype}")
    _tensor(weight, "embedding", "weight")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-d (num_embeddings, embedding_dim), "
                         f"got shape {tuple(weight.shape)}")
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported (eagervm "
                                  "has no sparse tensors)")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError("embedding: padding_idx must be within num_embeddings")
        if padding_idx < 0:
            padding_idx += num
    flat = input.reshape(-1)
    if max_norm is not None and flat.numel() > 0:
        _embedding_renorm_(weight, flat, float(max_norm), float(norm_type))
    out = weight.index_select(0, flat).reshape(*input.shape, weight.shape[1])
    if not out.requires_grad:
        return out
    if padding_idx is not None:
        # Same values, but the padding positions read a detached copy: no gradient
        # reaches weight's padding row (cost: the output's size, not weight's).
        pad = (input == padding_idx).unsqueeze(-1)
        out = _C.where(pad, out.detach(), out)
    if scale_grad_by_freq:
        # 1 / (how often each position's index occurs), applied to the gradient only.
        counts = _C.zeros(num, dtype=weight.dtype)
        counts.scatter_add_(0, flat, _C.ones(flat.numel(), dtype=weight.dtype))
        factor = counts.index_select(0, flat).reciprocal().reshape(*input.shape, 1)
        out.register_hook(lambda grad: grad * factor)
    return out


# --------------------------------------------------------------- losses

def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The squared error (input - target) ** 2, reduced by reduction."""
    _tensor(input, "mse_loss")
    _tensor(target, "mse_loss", "target")
    reduction = _reduction(reduction, size_average, reduce, "mse_loss")
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the "
                      f"input size ({tuple(input.shape)}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=2)
    return _reduce((input - target).square(), reduction)


def _class_weights(weight, n_classes, fn):
    _tensor(weight, fn, "weight")
    if tuple(weight.shape) != (n_classes,):
        raise ValueError(f"{fn}: weight must have shape ({n_classes},) (one per class), "
                         f"got {tuple(weight.shape)}")
    return weight


def _check_index_shapes(input, target, fn):
    """PyTorch's shapes: input (C,) with target (), (N, C) with (N,), or
    (N, C, d1, ...) with (N, d1, ...)."""
    if input.ndim == 0:
        raise ValueError(f"{fn}: input must have at least 1 dimension (the classes)")
    want = () if input.ndim == 1 else (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != want:
        if input.ndim >= 2 and target.ndim >= 1 and target.shape[0] != input.shape[0]:
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                             f"batch_size ({target.shape[0]}).")
        raise ValueError(f"{fn}: target of shape {tuple(target.shape)} does not fit input of "
                         f"shape {tuple(input.shape)} (expected {want})")


def _weighted_mean(loss, wt, reduction):
    """Reduces per-sample losses whose sample weights are wt (0 where ignored): mean
    divides by the weights' sum, as PyTorch does."""
    if reduction == "none":
        return loss
    total = loss.sum()
    return total / wt.sum() if reduction == "mean" else total


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """The negative log-likelihood -input[n, target[n]] * weight[target[n]] of log
    probabilities input (N, C[, d...]) at class indices target (N[, d...]); targets equal
    to ignore_index count for nothing (mean divides by the weights of the others)."""
    _tensor(input, "nll_loss")
    _integer_target(target, "nll_loss")
    reduction = _reduction(reduction, size_average, reduce, "nll_loss")
    _check_index_shapes(input, target, "nll_loss")
    if input.ndim == 1:
        out = nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, None, ignore_index,
                       None, reduction)
        return out.squeeze(0) if reduction == "none" else out
    valid = target != ignore_index
    safe = _C.where(valid, target, 0)
    picked = input.gather(1, safe.unsqueeze(1)).squeeze(1)
    if weight is not None:
        wt = _class_weights(weight, input.shape[1], "nll_loss")
        wt = wt.index_select(0, safe.reshape(-1)).reshape(*safe.shape) * valid
    else:
        wt = valid.to(input.dtype)
    return _weighted_mean(-(picked * wt), wt, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Cross-entropy of logits input (N, C[, d...]) or (C,) against class indices
    target (N[, d...]) or class probabilities (input's shape), with PyTorch's weight,
    ignore_index (index targets only) and label_smoothing."""
    _tensor(input, "cross_entropy")
    _tensor(target, "cross_entropy", "target")
    reduction = _reduction(reduction, size_average, reduce, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.ndim == 0:
        raise ValueError("cross_entropy: input must have at least 1 dimension (the classes)")
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    if weight is not None:
        weight = _class_weights(weight, n_classes, "cross_entropy")
    if target.dtype.is_floating_point:
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing,
                                    class_dim, n_classes)
    _integer_target(target, "cross_entropy")
    _check_index_shapes(input, target, "cross_entropy")
    if input.ndim != 2:
        # The fused op takes (M, C) rows: move the classes last and flatten the rest.
        if input.ndim == 1:
            rows, flat_target = input.unsqueeze(0), target.reshape(1)
        else:
            order = (0,) + tuple(range(2, input.ndim)) + (1,)
            rows = input.permute(*order).reshape(-1, n_classes)
            flat_target = target.reshape(-1)
        out = cross_entropy(rows, flat_target, weight, None, ignore_index, None, reduction,
                            label_smoothing)
        return out.reshape(*target.shape) if reduction == "none" else out
    valid = target != ignore_index
    safe = _C.where(valid, target, 0)
    # The fused op gives -log softmax(input)[n, target[n]] per row, stably.
    per_row = _C.cross_entropy(input, safe, reduction="none")
    if weight is not None:
        wt = weight.index_select(0, safe) * valid
    else:
        wt = valid.to(input.dtype)
    loss = per_row * wt
    if label_smoothing == 0:
        return _weighted_mean(loss, wt, reduction)
    # Label smoothing mixes in the uniform distribution: eps / C of -log p for every class.
    logp = input.log_softmax(1)
    smooth = -(logp * weight).sum(1) if weight is not None else -logp.sum(1)
    smooth = smooth * valid
    eps = label_smoothing
    if reduction == "none":
        return loss * (1 - eps) + smooth * (eps / n_classes)
    total = loss.sum() * (1 - eps) + smooth.sum() * (eps / n_classes)
    return total / wt.sum() if reduction == "mean" else total


def _cross_entropy_probs(input, target, weight, reduction, label_smoothing, class_dim,
                         n_classes):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"cross_entropy: class-probability target of shape "
                         f"{tuple(target.shape)} must have input's shape {tuple(input.shape)}")
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    logp = input.log_softmax(class_dim)
    if weight is not None:
        # Broadcast the class weights along the class dimension.
        logp = logp * weight.reshape(n_classes, *([1] * (input.ndim - class_dim - 1)))
    loss = -(logp * target).sum(class_dim)
    if reduction == "mean":
        # PyTorch divides by the number of samples (every position but the classes').
        count = input.numel() // n_classes if n_classes else 0
        return loss.sum() / float(count)
    return _reduce(loss, reduction)
