"""repr() of tensors, like NumPy's with the dtype (a sync point)."""


def _fmt_plain(values, depth, indent):
    # Nested lists without NumPy: one row per line, like NumPy's layout.
    if not isinstance(values, list):
        return repr(values)
    if values and isinstance(values[0], list):
        sep = ",\n" + "\n" * (depth_of(values) - 2) + " " * (indent + 1)
        return "[" + sep.join(_fmt_plain(v, depth + 1, indent + 1) for v in values) + "]"
    return "[" + ", ".join(repr(v) for v in values) + "]"


def depth_of(values):
    d = 0
    while isinstance(values, list) and values:
        values = values[0]
        d += 1
    return d


def format_tensor(t):
    prefix = "tensor("
    suffix = ", dtype=" + t.dtype.name + ")"
    if t.numel() == 0 and t.ndim != 1:
        # As NumPy: an empty array shows its shape, since "[]" does not.
        suffix = ", shape=" + repr(t.shape) + suffix
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None:
        a = t.numpy()
        body = numpy.array2string(a, separator=", ", prefix=prefix, suffix=suffix)
    else:
        body = _fmt_plain(t.tolist(), 0, len(prefix))
    return prefix + body + suffix
