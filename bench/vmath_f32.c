/* Single-core time per element of some float32 functions of src/ops/vmath.h,
 * built as the kernels are (unary.c's pragma, the same SIMD clones), over
 * 1M floats (uniform in the ranges below; the same array each repeat, so
 * it stays in the caches: eagervm's op adds its dispatch and a new output,
 * bench/vmath1.py times that). Not built by CMake:
 *   gcc -O2 -fno-math-errno -Isrc -Iinclude bench/vmath_f32.c -lm -o /tmp/vmath_f32
 *   /tmp/vmath_f32 [name...]
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/vmath.h"
#include "ops/vmath_avx512.h"

#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

#define ELEMENTWISE(name, F)                                    \
    CLONES static void name(float *o, const float *a, int64_t n) \
    {                                                           \
        for (int64_t i = 0; i < n; i++) {                       \
            o[i] = F(a[i]);                                     \
        }                                                       \
    }
#define ARRAY_FN(name, FN)                                      \
    CLONES static void name(float *o, const float *a, int64_t n) \
    {                                                           \
        FN(o, a, n);                                            \
    }

ARRAY_FN(tan_arr, tan_f32_n)
ELEMENTWISE(tanb_arr, tan_f32_bounded)
ELEMENTWISE(acos_arr, acos_f32)
ELEMENTWISE(asin_arr, asin_f32)
ELEMENTWISE(atan_arr, atan_f32)
ELEMENTWISE(sinh_arr, sinh_f32)
ELEMENTWISE(cosh_arr, cosh_f32)
ELEMENTWISE(expm1_arr, expm1_f32)
ELEMENTWISE(exp_arr, exp_f32)
ARRAY_FN(sin_arr, sin_f32_n)

static const struct {
    const char *name;
    void (*fn)(float *, const float *, int64_t);
    float lo, hi;
} cases[] = {
    {"tan", tan_arr, -10, 10},     {"tanb", tanb_arr, -10, 10}, /* tan_f32_bounded alone */
    {"acos", acos_arr, -1, 1},     {"asin", asin_arr, -1, 1},   {"atan", atan_arr, -10, 10},
    {"sinh", sinh_arr, -10, 10},   {"cosh", cosh_arr, -10, 10}, {"expm1", expm1_arr, -10, 10},
    {"exp", exp_arr, -10, 10},     {"sin", sin_arr, -10, 10},
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    enum { N = 1 << 20, REPS = 31 };
    float *a = malloc(N * sizeof(float)), *o = malloc(N * sizeof(float));
    uint64_t s = 1;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int want = argc < 2;
        for (int i = 1; i < argc; i++) {
            want |= strcmp(argv[i], cases[c].name) == 0;
        }
        if (!want) {
            continue;
        }
        for (int i = 0; i < N; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)(s >> 40) / 16777216.0f;
            a[i] = cases[c].lo + (cases[c].hi - cases[c].lo) * u;
        }
        double t[REPS];
        for (int r = 0; r < REPS; r++) {
            double t0 = now();
            cases[c].fn(o, a, N);
            t[r] = now() - t0;
        }
        qsort(t, REPS, sizeof t[0], cmp);
        printf("%-6s %7.1f us per 1M (min %7.1f)\n", cases[c].name, t[REPS / 2] * 1e6, t[0] * 1e6);
    }
    free(a);
    free(o);
    return 0;
}
