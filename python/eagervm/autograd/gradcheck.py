"""gradcheck: backward's gradients against central finite differences in float64.

It needs NumPy (imported when called: eagervm itself works without it)."""
from .. import _C


def _numpy(t):
    import numpy as np

    return np.array(t.numpy(), dtype=np.float64)


def _as_tuple(x):
    return (x,) if isinstance(x, _C.Tensor) else tuple(x)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks fn's analytic gradients against finite differences (PyTorch's defaults).

    fn takes the inputs (Tensors; those with requires_grad are checked, and must
    be float64) and returns a Tensor or a tuple of Tensors. Each output's
    Jacobian column is computed by backward with a one-hot gradient and
    compared with (fn(x + eps) - fn(x - eps)) / (2 eps) element by element:
    |analytic - numeric| <= atol + rtol * |numeric|. Returns True, or raises
    GradcheckError naming the input, output and element (or returns False when
    raise_exception is False).
    """
    import numpy as _np

    inputs = _as_tuple(inputs)
    checked = [i for i, t in enumerate(inputs)
               if isinstance(t, _C.Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad")
    for i in checked:
        if inputs[i].dtype != _C.float64:
            raise ValueError(f"gradcheck: input {i} is {inputs[i].dtype}, but finite "
                             "differences need float64 inputs")

    def run(args):
        with_grad = _as_tuple(fn(*args))
        return [o for o in with_grad if isinstance(o, _C.Tensor)]

    outputs = run(inputs)
    base = [_numpy(o).ravel() for o in outputs]
    # The analytic Jacobian: one backward per output element.
    analytic = {i: [_np.zeros((inputs[i].numel(), b.size)) for b in base] for i in checked}
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for j in range(base[k].size):
            onehot = _np.zeros(base[k].size)
            onehot[j] = 1.0
            g = _C.tensor(onehot.reshape(out.shape), dtype=out.dtype)
            grads = _C._grad((out,), tuple(inputs[i] for i in checked), (g,), True, True)
            for i, gi in zip(checked, grads):
                if gi is not None:
                    analytic[i][k][:, j] = _numpy(gi).ravel()
    # The numeric Jacobian: perturb each element of each checked input.
    with _no_grad():
        for i in checked:
            x = _numpy(inputs[i])
            flat = x.ravel()
            for e in range(flat.size):
                cols = []
                for sign in (1.0, -1.0):
                    xp = flat.copy()
                    xp[e] += sign * eps
                    args = list(inputs)
                    args[i] = _C.tensor(xp.reshape(x.shape), dtype=_C.float64)
                    cols.append([_numpy(o).ravel() for o in run(args)])
                for k in range(len(base)):
                    numeric = (cols[0][k] - cols[1][k]) / (2 * eps)
                    a = analytic[i][k][e]
                    bad = _np.abs(a - numeric) > atol + rtol * _np.abs(numeric)
                    if bad.any():
                        j = int(_np.argmax(bad))
                        msg = (f"gradcheck: Jacobian mismatch for output {k} with respect to "
                               f"input {i}, at input element {e} and output element {j}: "
                               f"numerical {numeric[j]!r}, analytical {a[j]!r}")
                        if raise_exception:
                            raise GradcheckError(msg)
                        return False
    return True


class GradcheckError(RuntimeError):
    """A gradient from backward disagrees with finite differences."""


class _no_grad:
    def __enter__(self):
        self._prev = _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
