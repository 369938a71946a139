/* eagervm build and run-time configuration: what this copy of the library
 * was built with (version, build type, compiler and flags, sanitizers, BLAS)
 * and what it chose when it loaded (the SIMD level of the kernels, the BLAS
 * library's own report, the intra-op thread count). Python's
 * eagervm.config() and eagervm.show_config() read it; C programs can print
 * it to tell which build they run on. */
#ifndef EAGERVM_CONFIG_H
#define EAGERVM_CONFIG_H

#include "eagervm/version.h"
#include "eagervm/vm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ev_config {
    const char *version;       /* "MAJOR.MINOR.PATCH", as EAGERVM_VERSION */
    const char *build_type;    /* CMake build type: Release, RelWithDebInfo, Debug, ... */
    const char *compiler;      /* e.g. "GNU 12.2.0" */
    const char *c_flags;       /* the flags the library's sources were compiled with */
    const char *sanitizers;    /* comma-separated ("address,undefined"), "" for none */
    /* 1 when float32/float64 matmul calls BLAS; 0 when it runs the built-in
     * kernel. */
    int blas;
    /* When blas is 0: 1 if BLAS was turned off on purpose (EAGERVM_NO_BLAS
     * set, or -DEV_WITH_BLAS=OFF, at build time), 0 if it was not found. */
    int blas_off_on_purpose;
    const char *blas_library;  /* the library linked at build time, "" without BLAS */
    /* What the BLAS library loaded at run time says of itself
     * (openblas_get_config(): version, target core, threading), "" without
     * BLAS. */
    const char *blas_runtime;
    /* Threads OpenBLAS is set to use (openblas_get_num_threads()), 0
     * without BLAS. eagervm sets it before each large call to what the core
     * budget grants (intraop_threads divided by the busy kernels, see
     * ev_intraop_stats in tensor.h), so it reads the last call's share. */
    int blas_threads;
    /* The instruction set the elementwise kernels were chosen for when the
     * library loaded: "x86-64-v4" (AVX-512), "x86-64-v3" (AVX2, FMA) or
     * "baseline" (the compiler's default target); SIMD clones are not built
     * under sanitizers or without optimisation, which then reads
     * "baseline (no SIMD clones in this build)". */
    const char *simd;
    /* Threads (the issuing worker included) that one large op running
     * alone may use: to split an elementwise loop or reduction, or for a
     * BLAS call (EAGERVM_INTRAOP_THREADS, default the CPUs this process may
     * use; read once). Busy workers share them. */
    int intraop_threads;
} ev_config;

/* Fills *out with this library's configuration. The strings are static and
 * live as long as the library is loaded. Safe to call from any thread, with
 * or without a runtime; it starts no thread. out must not be NULL. */
EV_API void ev_config_get(ev_config *out);

#ifdef __cplusplus
}
#endif

#endif
