"""What this eagervm is: eagervm.config() and eagervm.show_config(), and the
one warning at import when the build has no BLAS."""
import os
import warnings

from . import _C

# Environment variables that change what eagervm (or the BLAS under it) does.
_ENV_PREFIXES = ("EAGERVM_",)
_ENV_NAMES = ("OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT", "OMP_NUM_THREADS")


def config():
    """This build's configuration as a dict of sections: "eagervm" (version,
    where the module was loaded from), "build" (type, compiler, flags,
    sanitizers), "blas" (enabled, why not, library, its own report, threads),
    "simd" (the level the kernels were chosen for at load), "threads" (the
    runtime's limits) and "environment" (the variables in effect)."""
    c = _C._config()
    env = {k: v for k, v in sorted(os.environ.items())
           if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}
    return {
        "eagervm": {"version": c["version"], "module": _C.__file__},
        "build": {
            "type": c["build_type"],
            "compiler": c["compiler"],
            "c_flags": c["c_flags"],
            "sanitizers": [s for s in c["sanitizers"].split(",") if s],
        },
        "blas": {
            "enabled": c["blas"],
            # Why not, when not: off on purpose, or not found at build time.
            "off_on_purpose": c["blas_off_on_purpose"],
            "library": c["blas_library"] or None,
            "runtime": c["blas_runtime"] or None,
            "threads": c["blas_threads"] if c["blas"] else None,
        },
        "simd": {"level": c["simd"]},
        "threads": {
            "worker_thread_limit": c["worker_thread_limit"],
            "intraop_threads": c["intraop_threads"],
            "blas_threads": c["blas_threads"] if c["blas"] else None,
        },
        "environment": env,
    }


def show_config():
    """Prints config() as an indented listing, as numpy.show_config() does."""
    print(_format(config()))


def _format(cfg):
    lines = []
    for section, items in cfg.items():
        lines.append(f"{section}:")
        if not items:
            lines.append("  (none set)")
        for key, value in items.items():
            if isinstance(value, list):
                value = ", ".join(value) if value else "none"
            elif value is None:
                value = "-"
            lines.append(f"  {key}: {value}")
    return "\n".join(lines)


def _warn_if_no_blas():
    c = _C._config()
    if c["blas"] or c["blas_off_on_purpose"] or os.environ.get("EAGERVM_NO_BLAS"):
        return
    warnings.warn(
        "eagervm was built without BLAS (OpenBLAS was not found at build time): float "
        "matmul runs the built-in kernel, an order of magnitude slower on large matrices. "
        "Install libopenblas-dev and rebuild (set EAGERVM_NO_BLAS=1 when building without "
        "BLAS on purpose); eagervm.show_config() tells what was built.",
        RuntimeWarning, stacklevel=2)
