/* ev_config_get: what this build of the library is (from the generated
 * ev_build_info.h) and what it chose at load (SIMD level, BLAS threads). */
#include <string.h>

#include "eagervm/config.h"
#include "ops/ops-impl.h"

#ifdef EV_HAVE_BLAS
#include <cblas.h>
#endif

/* The CMake build generates it; a build without it (the fuzz harness's own
 * CMake list compiles the sources again) reports "unknown". */
#if defined(__has_include)
#if __has_include("ev_build_info.h")
#include "ev_build_info.h"
#endif
#endif
#ifndef EV_BUILD_TYPE
#define EV_BUILD_TYPE "unknown"
#define EV_BUILD_COMPILER "unknown"
#define EV_BUILD_C_FLAGS "unknown"
#define EV_BUILD_SANITIZERS "unknown"
#define EV_BUILD_BLAS_LIBRARY ""
#define EV_BUILD_BLAS_OFF_ON_PURPOSE 0
#endif

/* The same test the target_clones resolvers make when the library loads
 * (EV__SIMD_CLONES in ops-impl.h), so the answer names the clone in use. */
static const char *simd_level(void)
{
#ifdef EV__SIMD_CLONES_BUILT
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) {
        return "x86-64-v4";
    }
    if (__builtin_cpu_supports("x86-64-v3")) {
        return "x86-64-v3";
    }
    return "baseline";
#else
    return "baseline (no SIMD clones in this build)";
#endif
}

void ev_config_get(ev_config *out)
{
    memset(out, 0, sizeof *out);
    out->version = EAGERVM_VERSION;
    out->build_type = EV_BUILD_TYPE;
    out->compiler = EV_BUILD_COMPILER;
    out->c_flags = EV_BUILD_C_FLAGS;
    out->sanitizers = EV_BUILD_SANITIZERS;
    out->blas_library = "";
    out->blas_runtime = "";
#ifdef EV_HAVE_BLAS
    out->blas = 1;
    out->blas_library = EV_BUILD_BLAS_LIBRARY;
    out->blas_runtime = openblas_get_config();
    out->blas_threads = openblas_get_num_threads();
#else
    out->blas_off_on_purpose = EV_BUILD_BLAS_OFF_ON_PURPOSE;
#endif
    out->simd = simd_level();
    out->intraop_threads = ev__intraop_threads();
}
