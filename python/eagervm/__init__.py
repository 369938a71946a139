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
from ._C import (  # noqa: F401  (the public API)
    Tensor, dtype, bool, uint8, int8, int16, int32, int64, float32, float64,
    tensor, from_numpy, empty, zeros, ones, full, empty_like, zeros_like, ones_like,
    full_like, arange, linspace, eye,
    add, sub, mul, div, floor_divide, remainder, pow, maximum, minimum,
    eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor,
    subtract, multiply, divide, true_divide, power,
    neg, negative, abs, exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, relu, gelu,
    logical_not, clamp, clip, cast,
    sum, mean, prod, max, min, argmax, argmin, var, std, softmax, log_softmax, matmul,
    view, reshape, expand, permute, flatten, transpose, squeeze, unsqueeze, contiguous,
    clone, synchronize,
    where, cat, concat, concatenate, stack, index_select, gather, take, scatter_add,
    rand, randn, randint, rand_like, randn_like, manual_seed, Generator, default_generator,
    bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_left_shift,
    bitwise_right_shift, from_dlpack, one_hot, cross_entropy, randperm,
)
from . import asyncs  # noqa: F401
from . import _config  # noqa: E402
from ._config import config, show_config  # noqa: E402,F401

__version__ = _C._config()["version"]
from . import profiler  # noqa: F401,E402

_config._warn_if_no_blas()  # once per process: a module is imported once

profiler._start_from_env()  # EAGERVM_PROFILE=path.json: profile the process, write at exit
