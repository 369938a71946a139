"""eagervm: an asynchronous eager tensor runtime.

Every op returns at once; the runtime orders the work by what it reads and
writes and runs it on worker threads. Sync points (numpy(), tolist(), item(),
repr(), synchronize()) wait for the values they hand over. Choose where work
runs with eagervm.asyncs.Thread and eagervm.asyncs.thread.

eagervm.show_config() prints what this build is (version, flags, BLAS, the
SIMD level chosen at load, sanitizers, thread limits, the environment).

Set EAGERVM_SYNC=1 to make every op wait for its result before returning, so
that a failure inside a kernel raises at the line that issued it (debugging).
"""
import os as _os

# OpenBLAS's helper threads busy-wait after each multi-threaded call for up
# to 2**28 cycles by default, taking a core from our workers for a good
# fraction of a second (tiny ops ran 3x slower after a large matmul). Ask
# them to sleep soon instead. OpenBLAS reads this when it loads, so it
# takes effect only if nothing (NumPy) loaded OpenBLAS before us; a value
# the user set is kept.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from . import _C  # noqa: E402

# The names that are not ops: types, dtypes, the runtime's sync point and the
# default generator. Every op of the table (include/eagervm/ops.def) and its
# aliases join them below, from the table.
_HAND_WRITTEN = (
    "Tensor", "dtype", "bool", "uint8", "int8", "int16", "int32", "int64", "float32",
    "float64", "synchronize", "manual_seed", "Generator", "default_generator",
)
_OP_TABLE = _C._op_table()
# The table's functions (its METHOD rows are Tensor methods only).
_FROM_TABLE = tuple(dict.fromkeys(
    [row["name"] for row in _OP_TABLE["ops"] if row["bound"] != "METHOD"] +
    [alias for alias, _ in _OP_TABLE["aliases"]]))
globals().update({_name: getattr(_C, _name) for _name in _HAND_WRITTEN + _FROM_TABLE})

from . import asyncs  # noqa: F401
from . import autograd  # noqa: E402
from .autograd import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: E402
from . import _config  # noqa: E402
from ._config import config, show_config  # noqa: E402,F401

__version__ = _C._config()["version"]
from . import profiler  # noqa: F401,E402
from .serialization import load, save  # noqa: E402,F401
from . import nn  # noqa: E402,F401  (as torch imports torch.nn)
from . import optim  # noqa: E402,F401  (and torch.optim)

__all__ = list(_HAND_WRITTEN + _FROM_TABLE) + [
    "asyncs", "profiler", "config", "show_config", "autograd", "no_grad", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "save", "load", "nn", "optim"]

_config._warn_if_no_blas()  # once per process: a module is imported once

profiler._start_from_env()  # EAGERVM_PROFILE=path.json: profile the process, write at exit
