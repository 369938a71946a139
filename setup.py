"""Builds the eagervm._C extension: the module's own C files plus every source
of the C library (src/core, src/tensor, src/ops, globbed so new files join by
themselves), with OpenBLAS when it is found (as cmake/blas.cmake decides).

Offline install:  /usr/bin/python3 -m pip install --no-build-isolation .
In-place build:   /usr/bin/python3 setup.py build_ext --inplace   (into python/)
"""
import glob
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def rel(*parts):
    return os.path.join(*parts)


def sources():
    # Relative paths: setuptools wants them relative to setup.py's folder.
    files = sorted(glob.glob(rel("python", "eagervm", "_C", "*.c")))
    for layer in ("core", "tensor", "ops"):
        files += sorted(glob.glob(rel("src", layer, "*.c")))
    return files


def find_openblas():
    """(include_dirs, library_dirs) of OpenBLAS, or None. Like cmake/blas.cmake:
    we need OpenBLAS's own cblas.h (it sits next to openblas_config.h), since
    matmul.c calls openblas_set_num_threads."""
    if shutil.which("pkg-config"):
        try:
            out = subprocess.run(["pkg-config", "--cflags", "--libs", "openblas"],
                                 capture_output=True, text=True, check=True).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            out = None
        if out is not None:
            incs = [f[2:] for f in out if f.startswith("-I")]
            libs = [f[2:] for f in out if f.startswith("-L")]
            if any(os.path.exists(os.path.join(i, "openblas_config.h")) for i in incs) or (
                    not incs and os.path.exists("/usr/include/openblas_config.h")):
                return incs, libs
    for arch in ("x86_64-linux-gnu", "aarch64-linux-gnu"):
        for variant in ("openblas-pthread", "openblas-openmp", "openblas"):
            inc = os.path.join("/usr/include", arch, variant)
            if os.path.exists(os.path.join(inc, "openblas_config.h")) and os.path.exists(
                    os.path.join(inc, "cblas.h")):
                return [inc], [os.path.join("/usr/lib", arch, variant)]
        inc = os.path.join("/usr/include", arch)
        if os.path.exists(os.path.join(inc, "cblas.h")) and os.path.exists(
                os.path.join(inc, "openblas_config.h")):
            return [inc], []
    return None


class ParallelBuildExt(build_ext):
    """Compiles the sources of one extension in parallel (one job per core)."""

    def build_extension(self, ext):
        compiler = self.compiler
        orig = compiler.compile

        def compile_parallel(srcs, *args, **kwargs):
            jobs = max(1, os.cpu_count() or 1)
            if jobs == 1 or len(srcs) < 2:
                return orig(srcs, *args, **kwargs)
            with ThreadPoolExecutor(jobs) as pool:
                parts = pool.map(lambda s: orig([s], *args, **kwargs), srcs)
                return [o for objs in parts for o in objs]

        compiler.compile = compile_parallel
        try:
            super().build_extension(ext)
        finally:
            compiler.compile = orig


define_macros = [("_GNU_SOURCE", None), ("EV_BUILDING_LIBRARY", None)]
include_dirs = ["include", "src"]
library_dirs = []
libraries = ["pthread", "m"]
blas = None if os.environ.get("EAGERVM_NO_BLAS") else find_openblas()
if blas:
    include_dirs += blas[0]
    library_dirs += blas[1]
    libraries.append("openblas")
    define_macros.append(("EV_HAVE_BLAS", None))

extra_compile_args = ["-std=c11", "-O2", "-fvect-cost-model=cheap", "-fvisibility=hidden",
                      "-Wall", "-Wextra", "-Wshadow", "-Wno-unused-parameter",
                      "-Wno-missing-field-initializers", "-Wno-cast-function-type"]
if os.environ.get("EAGERVM_DEBUG"):
    extra_compile_args += ["-O0", "-g", "-UNDEBUG"]
san = os.environ.get("EAGERVM_SANITIZE")  # e.g. "address,undefined"
extra_link_args = []
if san:
    extra_compile_args += ["-fsanitize=" + san, "-fno-omit-frame-pointer"]
    extra_link_args += ["-fsanitize=" + san]

setup(
    ext_modules=[
        Extension(
            "eagervm._C",
            sources=sources(),
            depends=sorted(glob.glob(rel("include", "eagervm", "*.h")) +
                           glob.glob(rel("src", "*", "*.h")) +
                           glob.glob(rel("python", "eagervm", "_C", "*.h"))),
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=libraries,
            define_macros=define_macros,
            extra_compile_args=extra_compile_args,
            extra_link_args=extra_link_args,
        )
    ],
    cmdclass={"build_ext": ParallelBuildExt},
    options={"build": {"build_base": "build-py"}},
)
