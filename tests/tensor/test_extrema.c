/* Every form of src/ops/extrema.h this CPU runs (16-byte lanes; 32 with
 * AVX2; 64 with AVX-512) against a scalar reference: the index of the first NaN,
 * else of the first occurrence of the extreme; the value, NaN if there is
 * one. Runs of every length up to a few vectors, around the NaN-check
 * chunks, with NaNs, infinities, ties and the integer limits planted at
 * the edges and inside. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/extrema.h"
#include "test.h"

typedef struct form {
    const char *name;
    int64_t (*index_f32)(const float *, int64_t, int);
    float (*value_f32)(const float *, int64_t, int);
    int64_t (*index_f64)(const double *, int64_t, int);
    double (*value_f64)(const double *, int64_t, int);
    int64_t (*index_i32)(const int32_t *, int64_t, int);
    int32_t (*value_i32)(const int32_t *, int64_t, int);
    int64_t (*index_i64)(const int64_t *, int64_t, int);
    int64_t (*value_i64)(const int64_t *, int64_t, int);
} form;

#define FORM(label, S)                                                                     \
    {label,          extrema_f32##S, extval_f32##S, extrema_f64##S, extval_f64##S,          \
     extrema_i32##S, extval_i32##S,  extrema_i64##S, extval_i64##S}

/* Whether this CPU runs forms[i] (the forms are in order of width). */
static int cpu_runs(size_t i)
{
#ifdef EV__SIMD_CLONES_BUILT
    return i == 0 || (i == 1 && __builtin_cpu_supports("x86-64-v3")) ||
           (i == 2 && __builtin_cpu_supports("x86-64-v4"));
#else
    return i == 0;
#endif
}

static const form forms[] = {
    FORM("16-byte lanes", ),
#ifdef EV__SIMD_CLONES_BUILT
    FORM("32-byte lanes (AVX2)", _avx2),
    FORM("64-byte lanes (AVX-512)", _avx512),
#endif
};

#define REF_INDEX(T, ISNAN)                                                      \
    static int64_t ref_index_##T(const T *x, int64_t n, int want_max)            \
    {                                                                            \
        int64_t at = 0;                                                          \
        for (int64_t i = 0; i < n; i++) {                                        \
            if (ISNAN(x[i])) {                                                   \
                return i;                                                        \
            }                                                                    \
            if (want_max ? x[i] > x[at] : x[i] < x[at]) {                       \
                at = i;                                                          \
            }                                                                    \
        }                                                                        \
        return at;                                                               \
    }
#define NO_NAN(v) 0
REF_INDEX(float, isnan)
REF_INDEX(double, isnan)
REF_INDEX(int32_t, NO_NAN)
REF_INDEX(int64_t, NO_NAN)

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* What is planted in a run: nothing, NaNs, infinities, ties of the
 * extreme, or the same value everywhere. */
enum { PLANT_NONE, PLANT_NAN, PLANT_INF, PLANT_TIES, PLANT_FLAT, PLANT_COUNT };

static int64_t pick_at(int64_t n, int where)
{
    switch (where) {
    case 0: return 0;
    case 1: return n - 1;
    case 2: return n / 2;
    default: return (int64_t)(next_u64() % (uint64_t)n);
    }
}

static void fill_float(double *v, int64_t n, int plant)
{
    for (int64_t i = 0; i < n; i++) {
        /* Few distinct values, so that ties happen on their own too. */
        v[i] = plant == PLANT_FLAT ? 1.5 : (double)(int64_t)(next_u64() % 2001) / 8.0 - 125.0;
    }
    for (int k = 0; k < 3 && plant != PLANT_NONE && plant != PLANT_FLAT; k++) {
        int64_t at = pick_at(n, (int)(next_u64() % 4));
        v[at] = plant == PLANT_NAN ? NAN
              : plant == PLANT_INF ? (k & 1 ? -INFINITY : INFINITY)
                                   : 1000.0 * (next_u64() & 1 ? 1 : -1);
    }
}

static void check_run(const form *f, const double *v, int64_t n, int plant)
{
    float *xf = malloc((size_t)n * sizeof *xf);
    double *xd = malloc((size_t)n * sizeof *xd);
    int32_t *xi = malloc((size_t)n * sizeof *xi);
    int64_t *xl = malloc((size_t)n * sizeof *xl);
    CHECK(xf && xd && xi && xl);
    for (int64_t i = 0; i < n; i++) {
        xf[i] = (float)v[i];
        xd[i] = v[i];
        /* The integers: the same order, infinities as the limits. */
        double c = isnan(v[i]) ? 0.0 : v[i] > 2e9 ? 2e9 : v[i] < -2e9 ? -2e9 : v[i] * 8.0;
        xi[i] = isinf(v[i]) ? (v[i] > 0 ? INT32_MAX : INT32_MIN) : (int32_t)c;
        xl[i] = isinf(v[i]) ? (v[i] > 0 ? INT64_MAX : INT64_MIN) : (int64_t)c * 4294967311ll;
    }
    for (int want_max = 0; want_max < 2; want_max++) {
        int64_t want = ref_index_float(xf, n, want_max);
        int64_t got = f->index_f32(xf, n, want_max);
        if (got != want) {
            fprintf(stderr, "%s float32 n=%lld plant=%d max=%d: index %lld, want %lld\n", f->name,
                    (long long)n, plant, want_max, (long long)got, (long long)want);
        }
        CHECK_EQ(got, want);
        float fv = f->value_f32(xf, n, want_max);
        CHECK(isnan(xf[want]) ? isnan(fv) : fv == xf[want]);

        want = ref_index_double(xd, n, want_max);
        CHECK_EQ(f->index_f64(xd, n, want_max), want);
        double dv = f->value_f64(xd, n, want_max);
        CHECK(isnan(xd[want]) ? isnan(dv) : dv == xd[want]);

        want = ref_index_int32_t(xi, n, want_max);
        CHECK_EQ(f->index_i32(xi, n, want_max), want);
        CHECK_EQ(f->value_i32(xi, n, want_max), xi[want]);

        want = ref_index_int64_t(xl, n, want_max);
        CHECK_EQ(f->index_i64(xl, n, want_max), want);
        CHECK_EQ(f->value_i64(xl, n, want_max), xl[want]);
    }
    free(xf);
    free(xd);
    free(xi);
    free(xl);
}

static void test_forms_match_the_scalar_reference(void)
{
    static const int64_t long_runs[] = {1000, 4095, 4096, 4097, 8192 + 5, 3 * 4096 - 1, 20011};
    double *v = malloc(20011 * sizeof *v);
    CHECK(v != NULL);
    for (size_t fi = 0; fi < sizeof forms / sizeof forms[0]; fi++) {
        const form *f = &forms[fi];
        if (!cpu_runs(fi)) {
            fprintf(stderr, "%s: not on this CPU\n", f->name);
            continue;
        }
        for (int64_t n = 1; n <= 300; n++) {
            for (int plant = 0; plant < PLANT_COUNT; plant++) {
                fill_float(v, n, plant);
                check_run(f, v, n, plant);
            }
        }
        for (size_t k = 0; k < sizeof long_runs / sizeof long_runs[0]; k++) {
            for (int plant = 0; plant < PLANT_COUNT; plant++) {
                for (int rep = 0; rep < 4; rep++) {
                    fill_float(v, long_runs[k], plant);
                    check_run(f, v, long_runs[k], plant);
                }
            }
        }
    }
    free(v);
}

/* The pick runs the widest form this CPU has and agrees with the others. */
static void test_pick_agrees(void)
{
    float x[777];
    for (int i = 0; i < 777; i++) {
        x[i] = (float)(int)(next_u64() % 97);
    }
    x[500] = 200.0f;
    x[600] = 200.0f;
    x[100] = -5.0f;
    CHECK_EQ(ext_index_f32(x, 777, 1), 500);
    CHECK_EQ(ext_index_f32(x, 777, 0), 100);
    CHECK(ext_value_f32(x, 777, 1) == 200.0f);
    x[650] = NAN;
    CHECK_EQ(ext_index_f32(x, 777, 1), 650);
    CHECK(isnan(ext_value_f32(x, 777, 0)));
}

int main(void)
{
    fprintf(stderr, "%zu forms\n", sizeof forms / sizeof forms[0]);
    RUN_TEST(test_forms_match_the_scalar_reference);
    RUN_TEST(test_pick_agrees);
    return 0;
}
