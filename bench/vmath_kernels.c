/* The float32 kernels of src/ops/vmath.h and vmath_avx512.h alone, in ns per
 * element, without the runtime around them (allocation, dispatch, sync):
 * 1M elements (the bench/ops.py size, in the last-level cache) and 4K (in
 * L1/L2, the arithmetic alone). Built as the kernels are (same pragma and
 * SIMD clones); one thread. Build by hand:
 *   gcc -O2 -std=c11 -fno-math-errno -fvect-cost-model=cheap -Iinclude -Isrc \
 *       bench/vmath_kernels.c -o /tmp/vmath_kernels -lm
 *   /tmp/vmath_kernels [NAME...] */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/ops-impl.h"
#include "ops/vmath.h"
#include "ops/vmath_avx512.h"

#define ELEMENTWISE(name, F)                                    \
    EV__SIMD_CLONES                                             \
    static void name(float *o, const float *a, int64_t n)       \
    {                                                           \
        for (int64_t i = 0; i < n; i++) {                       \
            o[i] = F(a[i]);                                     \
        }                                                       \
    }
ELEMENTWISE(exp_k, exp_f32)
ELEMENTWISE(log_nt_k, log_f32)
ELEMENTWISE(tanh_portable_k, tanh_f32)
ELEMENTWISE(tan_bounded_k, tan_f32_bounded)
ELEMENTWISE(acos_k, acos_f32)
ELEMENTWISE(asin_k, asin_f32)
ELEMENTWISE(atan_k, atan_f32)
ELEMENTWISE(sinh_k, sinh_f32)
ELEMENTWISE(cosh_k, cosh_f32)
ELEMENTWISE(expm1_k, expm1_f32)

EV__SIMD_CLONES static void tan_k(float *o, const float *a, int64_t n)
{
    tan_f32_n(o, a, n);
}

EV__SIMD_CLONES static void sin_k(float *o, const float *a, int64_t n)
{
    sin_f32_n(o, a, n);
}

EV__SIMD_CLONES static void tanh_k(float *o, const float *a, int64_t n)
{
    tanh_f32_n(o, a, n);
}

EV__SIMD_CLONES static void log_k(float *o, const float *a, int64_t n)
{
    log_f32_n(o, a, n);
}

EV__SIMD_CLONES static void atanh_k(float *o, const float *a, int64_t n)
{
    atanh_f32_n(o, a, n);
}

EV__SIMD_CLONES static void log2_k(float *o, const float *a, int64_t n)
{
    log2_f32_n(o, a, n);
}

EV__SIMD_CLONES static void log10_k(float *o, const float *a, int64_t n)
{
    log10_f32_n(o, a, n);
}

EV__SIMD_CLONES static void log1p_k(float *o, const float *a, int64_t n)
{
    log1p_f32_n(o, a, n);
}

EV__SIMD_CLONES static void asinh_k(float *o, const float *a, int64_t n)
{
    asinh_f32_n(o, a, n);
}

EV__SIMD_CLONES static void acosh_k(float *o, const float *a, int64_t n)
{
    acosh_f32_n(o, a, n);
}

EV__SIMD_CLONES static void cos_k(float *o, const float *a, int64_t n)
{
    cos_f32_n(o, a, n);
}

EV__SIMD_CLONES static void exp2_k(float *o, const float *a, int64_t n)
{
    exp2_f32_n(o, a, n);
}

EV__SIMD_CLONES static void exp2_portable_k(float *o, const float *a, int64_t n)
{
    exp2_f32_n_portable(o, a, n);
}

/* 32 calls of 32 elements: the calls a transposed 32x32 input makes. */
EV__SIMD_CLONES static void atanh_rows_k(float *o, const float *a, int64_t n)
{
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        atanh_f32_n(o + i, a + i, 32);
    }
}

EV__SIMD_CLONES static void log_rows_k(float *o, const float *a, int64_t n)
{
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        log_f32_n(o + i, a + i, 32);
    }
}

EV__SIMD_CLONES static void pow_k(float *o, const float *a, const float *b, int64_t n)
{
    pow_f32_n(o, a, b, n);
}

/* As binary.c's atan2 loop: atan2_f32 element by element, vectorized. */
EV__SIMD_CLONES static void atan2_k(float *o, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        o[i] = atan2_f32(a[i], b[i]);
    }
}

EV__SIMD_CLONES static void pow_portable_k(float *o, const float *a, const float *b, int64_t n)
{
    pow_f32_n_portable(o, a, b, n);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *p, const void *q)
{
    double a = *(const double *)p, b = *(const double *)q;
    return (a > b) - (a < b);
}

typedef void (*un_fn)(float *, const float *, int64_t);
typedef void (*bin_fn)(float *, const float *, const float *, int64_t);

/* Median ns per element of fn over n elements (reps calls a sample). */
static double time_it(un_fn u, bin_fn b, float *o, const float *x, const float *y, int64_t n)
{
    enum { SAMPLES = 21 };
    double t[SAMPLES];
    int reps = (int)(4000000 / n) + 1;
    for (int s = 0; s < SAMPLES; s++) {
        double t0 = now();
        for (int r = 0; r < reps; r++) {
            if (u) {
                u(o, x, n);
            } else {
                b(o, x, y, n);
            }
        }
        t[s] = (now() - t0) / reps / (double)n * 1e9;
    }
    qsort(t, SAMPLES, sizeof t[0], cmp_d);
    return t[SAMPLES / 2];
}

static float urand(uint64_t *s, float lo, float hi)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((*s >> 40) * 0x1p-24);
}

int main(int argc, char **argv)
{
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x), *q = malloc(N * sizeof *q), *o = malloc(N * sizeof *o);
    uint64_t s = 1;
    for (int i = 0; i < N; i++) {
        q[i] = urand(&s, 0.0f, 2.0f); /* pow's exponent */
    }
    /* Inputs drawn from [lo, hi): the ranges bench/ops.py uses, or a
     * normal sample's for tanh and exp. */
    static const struct {
        const char *name;
        un_fn u;
        bin_fn b;
        float lo, hi;
    } cases[] = {
        {"exp", exp_k, NULL, -3, 3},          {"log", log_k, NULL, 0.5f, 1.5f},
        {"log_nt", log_nt_k, NULL, 0.5f, 1.5f}, {"tanh", tanh_k, NULL, -3, 3},
        {"tanh_portable", tanh_portable_k, NULL, -3, 3},
        {"atanh", atanh_k, NULL, -0.99f, 0.99f}, {"atanh_rows32", atanh_rows_k, NULL, -0.99f, 0.99f},
        {"log_rows32", log_rows_k, NULL, 0.5f, 1.5f},
        {"pow", NULL, pow_k, 0.5f, 1.5f},     {"pow_portable", NULL, pow_portable_k, 0.5f, 1.5f},
        {"atan2", NULL, atan2_k, -10, 10},
        {"tan", tan_k, NULL, -10, 10},        {"tan_bounded", tan_bounded_k, NULL, -10, 10},
        {"sin", sin_k, NULL, -10, 10},        {"acos", acos_k, NULL, -1, 1},
        {"asin", asin_k, NULL, -1, 1},        {"atan", atan_k, NULL, -10, 10},
        {"sinh", sinh_k, NULL, -10, 10},      {"cosh", cosh_k, NULL, -10, 10},
        {"expm1", expm1_k, NULL, -10, 10},    {"log2", log2_k, NULL, 0.01f, 100},
        {"log10", log10_k, NULL, 0.01f, 100}, {"log1p", log1p_k, NULL, 0, 100},
        {"asinh", asinh_k, NULL, -100, 100},  {"acosh", acosh_k, NULL, 1, 100},
        {"cos", cos_k, NULL, -10, 10},       {"exp2", exp2_k, NULL, -10, 10},
        {"exp2_portable", exp2_portable_k, NULL, -10, 10},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int want = argc < 2;
        for (int k = 1; k < argc; k++) {
            want |= strcmp(argv[k], cases[c].name) == 0;
        }
        if (!want) {
            continue;
        }
        for (int i = 0; i < N; i++) {
            x[i] = urand(&s, cases[c].lo, cases[c].hi);
        }
        double big = time_it(cases[c].u, cases[c].b, o, x, q, N);
        double small = time_it(cases[c].u, cases[c].b, o, x, q, 4096);
        printf("%-13s 1M %.3f ns/elem (%.0f us)   4K %.3f ns/elem\n", cases[c].name, big,
               big * N * 1e-3, small);
    }
    free(x);
    free(q);
    free(o);
    return 0;
}
