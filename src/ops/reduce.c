/* Reductions (sum, mean, prod, max, min, argmax, argmin, var, std, any, all,
 * logsumexp) over any set of dimensions, and softmax / log_softmax along one
 * dimension: checks and shape inference on the issuing thread, one
 * instruction per op. */
/* As in unary.c: let GCC's cheap cost model vectorize the lane loops at
 * -O2, blend both sides of a float select, and keep a * b + c two
 * roundings in every clone (EV__SIMD_CLONES). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", "fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "ops/extrema.h"
#include "ops/ops-impl.h"
#include "ops/vmath.h"

/* Every reduction the kernel knows; the op table's reduce rows come first,
 * numbered as enum ev_reduce_op (checked below). */
enum {
    R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_ANY, R_ALL, R_LOGSUMEXP, /* the table's rows */
    R_ARGMAX, R_ARGMIN, R_VAR, R_STD, R_COUNT
};
#define EV_REDUCE(ID, name, ...)                             \
    _Static_assert((int)R_##ID == (int)EV_REDUCE_##ID,       \
                   "reduce.c numbers " #name " as ops.def does");
#include "eagervm/ops.def"
_Static_assert((int)EV_REDUCE_OP_COUNT == (int)R_ARGMAX,
               "every reduce row of ops.def has a kernel here");

static const char *const red_names[R_COUNT] = {
    [R_SUM] = "sum",       [R_MEAN] = "mean", [R_PROD] = "prod", [R_MAX] = "max",
    [R_MIN] = "min",       [R_ARGMAX] = "argmax", [R_ARGMIN] = "argmin", [R_VAR] = "var",
    [R_STD] = "std",       [R_ANY] = "any",   [R_ALL] = "all",   [R_LOGSUMEXP] = "logsumexp",
};

const char *ev_reduce_op_name(int op)
{
    return op >= 0 && op < EV_REDUCE_OP_COUNT ? red_names[op] : "invalid";
}

/* ------------------------------------------------------------- reducers */

/* Pairwise summation, as NumPy's but with wider leaves: a leaf of up to
 * SUM_LEAF elements is summed in SUM_LANES running partials (each lane
 * adds at most SUM_LEAF / SUM_LANES elements; the vectorizer maps the lanes
 * to registers, several independent vectors so the adds overlap), the lanes
 * are folded pairwise, and longer runs are halved recursively, so rounding
 * error grows as O(log n). The lanes are written out so that every build
 * (SSE2, AVX2, AVX-512 clone) adds the same numbers in the same order and
 * gets the same bits. */
#define SUM_LANES 64
#define SMAX_BLOCK 1024 /* exp_f32 results held at a time (softmax, logsumexp) */
#define SUM_LEAF 1024

#define PAIRWISE(SUF, T)                                                       \
    EV__SIMD_CLONES                                                            \
    static T sum_leaf_##SUF(const T *restrict x, int64_t n)                    \
    {                                                                          \
        if (n < 2 * SUM_LANES) {                                               \
            T r[8] = {0};                                                      \
            int64_t i = 0;                                                     \
            for (; i + 8 <= n; i += 8) {                                       \
                for (int j = 0; j < 8; j++) {                                  \
                    r[j] += x[i + j];                                          \
                }                                                              \
            }                                                                  \
            T s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
            for (; i < n; i++) {                                               \
                s += x[i];                                                     \
            }                                                                  \
            return s;                                                          \
        }                                                                      \
        T r[SUM_LANES];                                                        \
        for (int j = 0; j < SUM_LANES; j++) {                                  \
            r[j] = x[j];                                                       \
        }                                                                      \
        int64_t i = SUM_LANES;                                                 \
        for (; i + SUM_LANES <= n; i += SUM_LANES) {                           \
            LANE_UNROLL                                                        \
            for (int j = 0; j < SUM_LANES; j++) {                              \
                r[j] += x[i + j];                                              \
            }                                                                  \
        }                                                                      \
        for (int h = SUM_LANES / 2; h > 0; h /= 2) {                           \
            for (int j = 0; j < h; j++) {                                      \
                r[j] += r[j + h];                                              \
            }                                                                  \
        }                                                                      \
        T s = r[0];                                                            \
        for (; i < n; i++) {                                                   \
            s += x[i];                                                         \
        }                                                                      \
        return s;                                                              \
    }                                                                          \
    static T pairwise_##SUF(const T *x, int64_t n)                             \
    {                                                                          \
        if (n <= SUM_LEAF) {                                                   \
            return sum_leaf_##SUF(x, n);                                       \
        }                                                                      \
        int64_t h = n / 2;                                                     \
        h -= h % SUM_LANES;                                                    \
        return pairwise_##SUF(x, h) + pairwise_##SUF(x + h, n - h);            \
    }
PAIRWISE(f32, float)
PAIRWISE(f64, double)

/* Pairwise sums of long rows, split over the intra-op threads. The tree is
 * cut at nodes of at most `leaf` elements; each leaf is summed by the
 * serial code above and the leaves are combined along the same tree, so the
 * result is bit for bit the serial one, whatever the number of threads. */
#define PAR_SUM_MIN ((int64_t)1 << 18)
#define PAR_MAX_LEAVES 2048

typedef struct par_sum {
    const char *x;
    size_t esize;            /* 4 (float) or 8 (double) */
    int64_t leaf;
    int n_leaves;
    int64_t off[PAR_MAX_LEAVES], len[PAR_MAX_LEAVES];
    double sums[PAR_MAX_LEAVES]; /* a float leaf's sum, exactly, in a double */
} par_sum;

static void par_leaves(par_sum *ps, int64_t off, int64_t n)
{
    if (n <= ps->leaf) {
        ps->off[ps->n_leaves] = off;
        ps->len[ps->n_leaves++] = n;
        return;
    }
    int64_t h = n / 2;
    h -= h % SUM_LANES;
    par_leaves(ps, off, h);
    par_leaves(ps, off + h, n - h);
}

static void par_sum_range(int64_t lo, int64_t hi, void *p)
{
    par_sum *ps = p;
    for (int64_t k = lo; k < hi; k++) {
        const char *x = ps->x + ps->off[k] * (int64_t)ps->esize;
        ps->sums[k] = ps->esize == 4 ? (double)pairwise_f32((const float *)x, ps->len[k])
                                     : pairwise_f64((const double *)x, ps->len[k]);
    }
}

#define PAR_COMBINE(SUF, T)                                                    \
    static T par_combine_##SUF(const par_sum *ps, int64_t n, int *k)          \
    {                                                                          \
        if (n <= ps->leaf) {                                                   \
            return (T)ps->sums[(*k)++];                                        \
        }                                                                      \
        int64_t h = n / 2;                                                     \
        h -= h % SUM_LANES;                                                    \
        T left = par_combine_##SUF(ps, h, k);                                  \
        return left + par_combine_##SUF(ps, n - h, k);                         \
    }
PAR_COMBINE(f32, float)
PAR_COMBINE(f64, double)

/* Sets *out to the pairwise sum of n elements (esize 4 or 8 bytes) and
 * returns 1 when n is long enough to split; 0 otherwise (out untouched). */
static int pairwise_parallel(const void *x, size_t esize, int64_t n, double *out)
{
    if (n < PAR_SUM_MIN) {
        return 0;
    }
    par_sum *ps = ev__malloc(sizeof *ps);
    if (!ps) {
        return 0; /* the serial sum needs no memory */
    }
    ps->x = x;
    ps->esize = esize;
    ps->leaf = (int64_t)1 << 15;
    while (n / ps->leaf > PAR_MAX_LEAVES / 2) {
        ps->leaf *= 2;
    }
    ps->n_leaves = 0;
    par_leaves(ps, 0, n);
    ev__parallel_for(ps->n_leaves, 1, par_sum_range, ps);
    int k = 0;
    *out = esize == 4 ? (double)par_combine_f32(ps, n, &k) : par_combine_f64(ps, n, &k);
    ev__free(ps);
    return 1;
}


float ev__extreme_f32(const float *x, int64_t n, int want_max)
{
    return ext_value_f32(x, n, want_max);
}

/* The index of the extreme of n > 0 elements of dtype dt (int32, int64,
 * float32 or float64). */
static int64_t extrema_any(ev_dtype dt, const void *x, int64_t n, int want_max)
{
    switch (dt) {
    case EV_INT32: return ext_index_i32(x, n, want_max);
    case EV_INT64: return ext_index_i64(x, n, want_max);
    case EV_FLOAT32: return ext_index_f32(x, n, want_max);
    default: return ext_index_f64(x, n, want_max);
    }
}

/* Long rows are cut into at most EXT_PARTS parts of a length that depends
 * on n alone, found in parallel and combined in order (the first NaN, else
 * the first part strictly better), so the index is the serial one. */
#define EXT_PARTS 64

typedef struct ext_job {
    ev_dtype dt;
    const char *x;
    int64_t n, part;
    int want_max;
    int64_t at[EXT_PARTS];
} ext_job;

static void ext_parts(int64_t lo, int64_t hi, void *p)
{
    ext_job *j = p;
    int64_t esz = (int64_t)ev__dsize(j->dt);
    for (int64_t k = lo; k < hi; k++) {
        int64_t b = k * j->part, len = j->n - b < j->part ? j->n - b : j->part;
        j->at[k] = b + extrema_any(j->dt, j->x + b * esz, len, j->want_max);
    }
}

/* 1 if element i of x beats element at for the extreme wanted (a NaN beats
 * anything but an earlier NaN). */
static int ext_beats(ev_dtype dt, const char *x, int64_t i, int64_t at, int want_max)
{
    switch (dt) {
#define EXT_BEATS(T)                                                                  \
    {                                                                                 \
        T a = ((const T *)x)[i], b = ((const T *)x)[at];                              \
        return b == b && (a != a || (want_max ? a > b : a < b));                      \
    }
    case EV_INT32: EXT_BEATS(int32_t)
    case EV_INT64: EXT_BEATS(int64_t)
    case EV_FLOAT32: EXT_BEATS(float)
    default: EXT_BEATS(double)
#undef EXT_BEATS
    }
}

/* The extreme value (NaN if there is one) of n > 0 elements of dtype dt
 * into *out, of dt's size; long runs in parts over the pool as
 * extrema_parallel (any NaN gives NaN, so the order of parts only matters
 * for which of two equal zeros comes out). */
typedef struct extval_job {
    ev_dtype dt;
    const char *x;
    int64_t n, part;
    int want_max;
    union {
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
    } v[EXT_PARTS];
} extval_job;

static void extval_run(ev_dtype dt, const char *x, int64_t n, int want_max, void *out)
{
    switch (dt) {
    case EV_INT32: *(int32_t *)out = ext_value_i32((const int32_t *)x, n, want_max); break;
    case EV_INT64: *(int64_t *)out = ext_value_i64((const int64_t *)x, n, want_max); break;
    case EV_FLOAT32: *(float *)out = ext_value_f32((const float *)x, n, want_max); break;
    default: *(double *)out = ext_value_f64((const double *)x, n, want_max); break;
    }
}

static void extval_parts(int64_t lo, int64_t hi, void *p)
{
    extval_job *j = p;
    int64_t esz = (int64_t)ev__dsize(j->dt);
    for (int64_t k = lo; k < hi; k++) {
        int64_t b = k * j->part, len = j->n - b < j->part ? j->n - b : j->part;
        extval_run(j->dt, j->x + b * esz, len, j->want_max, &j->v[k]);
    }
}

static void extval_parallel(ev_dtype dt, const void *x, int64_t n, int want_max, void *out)
{
    if (n < PAR_SUM_MIN) {
        extval_run(dt, x, n, want_max, out);
        return;
    }
    extval_job j = {.dt = dt, .x = x, .n = n, .want_max = want_max};
    j.part = (n + EXT_PARTS - 1) / EXT_PARTS;
    j.part = (j.part + EXT_CHUNK - 1) / EXT_CHUNK * EXT_CHUNK;
    int64_t parts = (n + j.part - 1) / j.part;
    ev__parallel_for(parts, 1, extval_parts, &j);
    /* Combined as ext_beats: a NaN beats anything but an earlier NaN. */
    switch (dt) {
#define EXTVAL_COMBINE(T, F)                                                          \
    {                                                                                 \
        T m = j.v[0].F;                                                               \
        for (int64_t k = 1; k < parts; k++) {                                         \
            T a = j.v[k].F;                                                           \
            m = m == m && (a != a || (want_max ? a > m : a < m)) ? a : m;             \
        }                                                                             \
        memcpy(out, &m, sizeof m);                                                    \
        break;                                                                        \
    }
    case EV_INT32: EXTVAL_COMBINE(int32_t, i32)
    case EV_INT64: EXTVAL_COMBINE(int64_t, i64)
    case EV_FLOAT32: EXTVAL_COMBINE(float, f32)
    default: EXTVAL_COMBINE(double, f64)
#undef EXTVAL_COMBINE
    }
}

static int64_t extrema_parallel(ev_dtype dt, const void *x, int64_t n, int want_max)
{
    if (n < PAR_SUM_MIN) {
        return extrema_any(dt, x, n, want_max);
    }
    ext_job j = {.dt = dt, .x = x, .n = n, .want_max = want_max};
    j.part = (n + EXT_PARTS - 1) / EXT_PARTS;
    j.part = (j.part + EXT_CHUNK - 1) / EXT_CHUNK * EXT_CHUNK;
    int64_t parts = (n + j.part - 1) / j.part;
    ev__parallel_for(parts, 1, ext_parts, &j);
    int64_t at = j.at[0];
    for (int64_t k = 1; k < parts; k++) {
        if (ext_beats(dt, x, j.at[k], at, want_max)) {
            at = j.at[k];
        }
    }
    return at;
}

/* ------------------------------------------- lane kernels of other ops
 *
 * Products, float64 sums and squared deviations of float32 or float64
 * runs, sums of exp, and any/all on raw bits, each written with lanes as
 * the sums above (the same bits from every clone). */
#define LANE_KERNELS(SUF, T)                                                   \
    /* The sum of x[0..n) in float64 lanes. */                                 \
    EV__SIMD_CLONES                                                            \
    static double sum64_##SUF(const T *restrict x, int64_t n)                  \
    {                                                                          \
        double r[32] = {0};                                                    \
        int64_t i = 0;                                                         \
        for (; i + 32 <= n; i += 32) {                                         \
            LANE_UNROLL                                                        \
            for (int j = 0; j < 32; j++) {                                     \
                r[j] += (double)x[i + j];                                      \
            }                                                                  \
        }                                                                      \
        for (int h = 16; h > 0; h /= 2) {                                      \
            for (int j = 0; j < h; j++) {                                      \
                r[j] += r[j + h];                                              \
            }                                                                  \
        }                                                                      \
        for (; i < n; i++) {                                                   \
            r[0] += (double)x[i];                                              \
        }                                                                      \
        return r[0];                                                           \
    }                                                                          \
    /* The sum of (x[i] - mean)^2 in float64 lanes. */                        \
    EV__SIMD_CLONES                                                            \
    static double sqdev_##SUF(const T *restrict x, int64_t n, double mean)     \
    {                                                                          \
        double r[32] = {0};                                                    \
        int64_t i = 0;                                                         \
        for (; i + 32 <= n; i += 32) {                                         \
            LANE_UNROLL                                                        \
            for (int j = 0; j < 32; j++) {                                     \
                double d = (double)x[i + j] - mean;                            \
                r[j] += d * d;                                                 \
            }                                                                  \
        }                                                                      \
        for (int h = 16; h > 0; h /= 2) {                                      \
            for (int j = 0; j < h; j++) {                                      \
                r[j] += r[j + h];                                              \
            }                                                                  \
        }                                                                      \
        for (; i < n; i++) {                                                   \
            double d = (double)x[i] - mean;                                    \
            r[0] += d * d;                                                     \
        }                                                                      \
        return r[0];                                                           \
    }                                                                          \
    /* The product of x[0..n) in lanes of T. */                               \
    EV__SIMD_CLONES                                                            \
    static T prod_##SUF(const T *restrict x, int64_t n)                        \
    {                                                                          \
        T r[32];                                                               \
        for (int j = 0; j < 32; j++) {                                         \
            r[j] = 1;                                                          \
        }                                                                      \
        int64_t i = 0;                                                         \
        for (; i + 32 <= n; i += 32) {                                         \
            LANE_UNROLL                                                        \
            for (int j = 0; j < 32; j++) {                                     \
                r[j] *= x[i + j];                                              \
            }                                                                  \
        }                                                                      \
        for (int h = 16; h > 0; h /= 2) {                                      \
            for (int j = 0; j < h; j++) {                                      \
                r[j] *= r[j + h];                                              \
            }                                                                  \
        }                                                                      \
        for (; i < n; i++) {                                                   \
            r[0] *= x[i];                                                      \
        }                                                                      \
        return r[0];                                                           \
    }
LANE_KERNELS(f32, float)
LANE_KERNELS(f64, double)

/* Integers wrap: the product mod 2^64 (computed unsigned; signed overflow
 * is undefined), in lanes, which wrapping arithmetic leaves exact. */
EV__SIMD_CLONES
static uint64_t prod_u64(const uint64_t *restrict x, int64_t n)
{
    uint64_t r[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        LANE_UNROLL
        for (int j = 0; j < 8; j++) {
            r[j] *= x[i + j];
        }
    }
    for (; i < n; i++) {
        r[0] *= x[i];
    }
    return ((r[0] * r[1]) * (r[2] * r[3])) * ((r[4] * r[5]) * (r[6] * r[7]));
}

/* float64 exp that GCC vectorizes (libm's is a call per element; vmath.h
 * has float32 only, so this one is local; 1 ulp at most against glibc's
 * over 4M values across the range): exp(x) = 2^k exp(r), k = round(x / ln 2) by the
 * 1.5 * 2^52 trick, r = x - k ln 2 in two parts (Cephes' split, exact
 * products), exp(r) by its Taylor series to degree 13 (|r| <= 0.347: the
 * truncation is below 1e-17), 2^k from exponent bits in two halves so
 * that overflow gives inf and results below DBL_MIN come out subnormal.
 * Only double arithmetic, bit copies and 64-bit shifts, which AVX2 and
 * AVX-512 both have. NaN passes through the clamps. */
static inline double exp2_bits_f64(double kf) /* kf integral in [-1022, 1023] */
{
    /* kf + 2^52 + 1023 holds k + 1023 in its low mantissa bits. */
    double t = kf + 4503599627371519.0;
    uint64_t u;
    memcpy(&u, &t, sizeof u);
    u <<= 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline double exp_f64(double x)
{
    double xc = x > 710.0 ? 710.0 : x;
    xc = xc < -746.0 ? -746.0 : xc;
    double kf = (xc * 1.4426950408889634074 + 6755399441055744.0) - 6755399441055744.0;
    double r = xc - kf * 6.93145751953125E-1;
    r = r - kf * 1.42860682030941723212E-6;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r * r + r + 1.0;
    double k1 = (kf * 0.5 + 6755399441055744.0) - 6755399441055744.0;
    double k2 = kf - k1;
    /* NaN: any scale will do, p is NaN. */
    k1 = k1 == k1 ? k1 : 0.0;
    k2 = k2 == k2 ? k2 : 0.0;
    return p * exp2_bits_f64(k1) * exp2_bits_f64(k2);
}

/* The sum, in float64 lanes, of exp(x[i] - m) for float32 x by exp_f32, a
 * block of SMAX_BLOCK at a time, the exps kept in out[0..n) (softmax) or
 * in a scratch block (out NULL). out may be x. */
EV__SIMD_CLONES
static double sumexp_f32(const float *x, int64_t n, float m, float *out)
{
    double r[32] = {0};
    float tmp[SMAX_BLOCK];
    double s = 0;
    for (int64_t b = 0; b < n; b += SMAX_BLOCK) {
        int64_t len = n - b < SMAX_BLOCK ? n - b : SMAX_BLOCK;
        float *e = out ? out + b : tmp;
        for (int64_t k = 0; k < len; k++) {
            e[k] = exp_f32(x[b + k] - m);
        }
        int64_t k = 0;
        for (; k + 32 <= len; k += 32) {
            LANE_UNROLL
            for (int j = 0; j < 32; j++) {
                r[j] += (double)e[k + j];
            }
        }
        for (; k < len; k++) {
            s += (double)e[k];
        }
    }
    for (int j = 0; j < 32; j++) {
        s += r[j];
    }
    return s;
}

/* The same for float64 with exp_f64 (above). */
EV__SIMD_CLONES
static double sumexp_f64(const double *x, int64_t n, double m, double *out)
{
    double r[16] = {0};
    double tmp[SMAX_BLOCK];
    double s = 0;
    for (int64_t b = 0; b < n; b += SMAX_BLOCK) {
        int64_t len = n - b < SMAX_BLOCK ? n - b : SMAX_BLOCK;
        double *e = out ? out + b : tmp;
        for (int64_t k = 0; k < len; k++) {
            e[k] = exp_f64(x[b + k] - m);
        }
        int64_t k = 0;
        for (; k + 16 <= len; k += 16) {
            LANE_UNROLL
            for (int j = 0; j < 16; j++) {
                r[j] += e[k + j];
            }
        }
        for (; k < len; k++) {
            s += e[k];
        }
    }
    for (int j = 0; j < 16; j++) {
        s += r[j];
    }
    return s;
}

/* any / all of n elements of esz bytes read as raw bits: an element is
 * true when a bit other than a float's sign is set (NaN is true, -0.0
 * false), so one loop serves every dtype: any ORs the masked bits, all
 * takes their unsigned minimum; chunk by chunk so that the answer stops
 * the scan early. */
#define TRUTH_CHUNK 4096
#define TRUTH_LOOPS(U)                                                         \
    /* Zero if an element of x[0..n) is false (the least masked value). */    \
    EV__SIMD_CLONES                                                            \
    static U truth_min_##U(const U *restrict x, int64_t n, U mask)             \
    {                                                                          \
        U r = mask;                                                            \
        for (int64_t i = 0; i < n; i++) {                                      \
            U v = x[i] & mask;                                                 \
            r = v < r ? v : r;                                                 \
        }                                                                      \
        return r;                                                              \
    }                                                                          \
    /* Nonzero if an element of x[0..n) is true. */                           \
    EV__SIMD_CLONES                                                            \
    static U truth_or_##U(const U *restrict x, int64_t n, U mask)              \
    {                                                                          \
        U r = 0;                                                               \
        for (int64_t i = 0; i < n; i++) {                                      \
            r |= x[i] & mask;                                                  \
        }                                                                      \
        return r;                                                              \
    }
TRUTH_LOOPS(uint8_t)
TRUTH_LOOPS(uint16_t)
TRUTH_LOOPS(uint32_t)
TRUTH_LOOPS(uint64_t)

/* The mask of the bits that make an element of dt true. */
static uint64_t truth_mask(ev_dtype dt)
{
    switch (dt) {
    case EV_FLOAT32: return 0x7fffffffu;
    case EV_FLOAT64: return 0x7fffffffffffffffu;
    default: return ~(uint64_t)0 >> (64 - 8 * ev__dsize(dt));
    }
}

/* 1 if any (want_all: every) element of the n at x, of dtype dt, is true;
 * chunk by chunk, stopping at the first that decides. */
static int truth_serial(ev_dtype dt, const void *x, int64_t n, int want_all)
{
    uint64_t mask = truth_mask(dt);
    size_t esz = ev__dsize(dt);
    for (int64_t b = 0; b < n; b += TRUTH_CHUNK) {
        int64_t len = n - b < TRUTH_CHUNK ? n - b : TRUTH_CHUNK;
        const char *p = (const char *)x + b * (int64_t)esz;
        uint64_t v;
        if (want_all) {
            switch (esz) {
            case 1: v = truth_min_uint8_t((const uint8_t *)p, len, (uint8_t)mask); break;
            case 2: v = truth_min_uint16_t((const uint16_t *)p, len, (uint16_t)mask); break;
            case 4: v = truth_min_uint32_t((const uint32_t *)p, len, (uint32_t)mask); break;
            default: v = truth_min_uint64_t((const uint64_t *)p, len, mask); break;
            }
        } else {
            switch (esz) {
            case 1: v = truth_or_uint8_t((const uint8_t *)p, len, (uint8_t)mask); break;
            case 2: v = truth_or_uint16_t((const uint16_t *)p, len, (uint16_t)mask); break;
            case 4: v = truth_or_uint32_t((const uint32_t *)p, len, (uint32_t)mask); break;
            default: v = truth_or_uint64_t((const uint64_t *)p, len, mask); break;
            }
        }
        if ((v != 0) != want_all) {
            return !want_all;
        }
    }
    return want_all;
}

/* truth_serial over a long run: the first chunks alone (an answer there
 * costs no hand-off), then the rest in parts over the intra-op threads. */
#define TRUTH_PARTS 64

typedef struct truth_job {
    ev_dtype dt;
    const char *x;
    int64_t n, part;
    int want_all;
    uint8_t res[TRUTH_PARTS];
} truth_job;

static void truth_parts(int64_t lo, int64_t hi, void *p)
{
    truth_job *j = p;
    int64_t esz = (int64_t)ev__dsize(j->dt);
    for (int64_t k = lo; k < hi; k++) {
        int64_t b = k * j->part, len = j->n - b < j->part ? j->n - b : j->part;
        j->res[k] = (uint8_t)truth_serial(j->dt, j->x + b * esz, len, j->want_all);
    }
}

static int truth_run(ev_dtype dt, const void *x, int64_t n, int want_all)
{
    int64_t head = 4 * TRUTH_CHUNK;
    if (n < PAR_SUM_MIN) {
        return truth_serial(dt, x, n, want_all);
    }
    if (truth_serial(dt, x, head, want_all) != want_all) {
        return !want_all;
    }
    int64_t esz = (int64_t)ev__dsize(dt);
    truth_job j = {.dt = dt, .x = (const char *)x + head * esz, .n = n - head,
                   .want_all = want_all};
    j.part = (j.n + TRUTH_PARTS - 1) / TRUTH_PARTS;
    j.part = (j.part + TRUTH_CHUNK - 1) / TRUTH_CHUNK * TRUTH_CHUNK;
    int64_t parts = (j.n + j.part - 1) / j.part;
    ev__parallel_for(parts, 1, truth_parts, &j);
    for (int64_t k = 0; k < parts; k++) {
        if (j.res[k] != want_all) {
            return !want_all;
        }
    }
    return want_all;
}

/* Wrapping sums (mod 2^64) of integers and bools, widened as read; GCC
 * vectorizes integer reductions as they stand (they are associative). */
#define ISUM_LOOP(SUF, T)                                                      \
    EV__SIMD_CLONES                                                            \
    static uint64_t isum_##SUF(const T *restrict x, int64_t n)                 \
    {                                                                          \
        uint64_t s = 0;                                                        \
        for (int64_t i = 0; i < n; i++) {                                      \
            s += (uint64_t)(int64_t)x[i];                                      \
        }                                                                      \
        return s;                                                              \
    }
ISUM_LOOP(i64, int64_t)
ISUM_LOOP(i32, int32_t)
ISUM_LOOP(i16, int16_t)
ISUM_LOOP(i8, int8_t)
ISUM_LOOP(u8, uint8_t)

static uint64_t isum_run(ev_dtype dt, const char *x, int64_t n)
{
    switch (dt) {
    case EV_INT32: return isum_i32((const int32_t *)x, n);
    case EV_INT16: return isum_i16((const int16_t *)x, n);
    case EV_INT8: return isum_i8((const int8_t *)x, n);
    case EV_UINT8:
    case EV_BOOL: return isum_u8((const uint8_t *)x, n);
    default: return isum_i64((const int64_t *)x, n);
    }
}

/* Long runs are cut into at most RED_PARTS parts of a length that depends
 * on n alone, reduced in parallel and combined in order, so the result is
 * the same whatever the number of threads. */
#define RED_PARTS 64
enum { P_SUM64_F32, P_SUM64_F64, P_SQDEV_F32, P_SQDEV_F64, P_SUMEXP_F32, P_SUMEXP_F64,
       P_PROD_F32, P_PROD_F64, P_PROD_U64, P_ISUM };

typedef union part_val {
    double f64;
    float f32;
    uint64_t u64;
} part_val;

static part_val part_eval(int what, ev_dtype dt, const char *x, int64_t n, double arg)
{
    part_val v;
    switch (what) {
    case P_ISUM: v.u64 = isum_run(dt, x, n); break;
    case P_SUM64_F32: v.f64 = sum64_f32((const float *)x, n); break;
    case P_SUM64_F64: v.f64 = sum64_f64((const double *)x, n); break;
    case P_SQDEV_F32: v.f64 = sqdev_f32((const float *)x, n, arg); break;
    case P_SQDEV_F64: v.f64 = sqdev_f64((const double *)x, n, arg); break;
    case P_SUMEXP_F32: v.f64 = sumexp_f32((const float *)x, n, (float)arg, NULL); break;
    case P_SUMEXP_F64: v.f64 = sumexp_f64((const double *)x, n, arg, NULL); break;
    case P_PROD_F32: v.f32 = prod_f32((const float *)x, n); break;
    case P_PROD_F64: v.f64 = prod_f64((const double *)x, n); break;
    default: v.u64 = prod_u64((const uint64_t *)x, n); break;
    }
    return v;
}

typedef struct parts_job {
    int what;
    ev_dtype dt;  /* P_ISUM: the elements' dtype */
    const char *x;
    int64_t n, part, esz;
    double arg;
    part_val out[RED_PARTS];
} parts_job;

static void parts_run(int64_t lo, int64_t hi, void *p)
{
    parts_job *j = p;
    for (int64_t k = lo; k < hi; k++) {
        int64_t b = k * j->part, len = j->n - b < j->part ? j->n - b : j->part;
        j->out[k] = part_eval(j->what, j->dt, j->x + b * j->esz, len, j->arg);
    }
}

/* Reduces n elements of dtype dt at x by what, in parts when long. */
static part_val parts_reduce_dt(int what, ev_dtype dt, const void *x, int64_t n, double arg)
{
    int64_t esz = (int64_t)ev__dsize(dt);
    if (n < PAR_SUM_MIN) {
        return part_eval(what, dt, x, n, arg);
    }
    parts_job j = {.what = what, .dt = dt, .x = x, .n = n, .esz = esz, .arg = arg};
    j.part = (n + RED_PARTS - 1) / RED_PARTS;
    j.part = (j.part + 4095) / 4096 * 4096;
    int64_t parts = (n + j.part - 1) / j.part;
    ev__parallel_for(parts, 1, parts_run, &j);
    part_val r = j.out[0];
    for (int64_t k = 1; k < parts; k++) {
        switch (what) {
        case P_PROD_F32: r.f32 *= j.out[k].f32; break;
        case P_PROD_F64: r.f64 *= j.out[k].f64; break;
        case P_PROD_U64: r.u64 *= j.out[k].u64; break;
        case P_ISUM: r.u64 += j.out[k].u64; break;
        default: r.f64 += j.out[k].f64; break;
        }
    }
    return r;
}

/* parts_reduce_dt for the float kinds, by element size (4: float32). */
static part_val parts_reduce(int what, const void *x, int64_t n, int64_t esz, double arg)
{
    return parts_reduce_dt(what, esz == 4 ? EV_FLOAT32 : EV_FLOAT64, x, n, arg);
}

/* A reduction's result before it is stored in the output's dtype. */
typedef struct red_val {
    ev_dtype dtype;
    union {
        uint8_t b;
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
    } v;
} red_val;

/* Reduces n contiguous elements of dtype src (n > 0 unless the op allows
 * empty input) into a result of dtype loop. src is loop but for the kernels
 * that read x's own dtype (see red_reads_x). */
static red_val reduce_row(int kind, ev_dtype loop, ev_dtype src, const void *row, int64_t n,
                          double correction)
{
    red_val r;
    memset(&r, 0, sizeof r);
    r.dtype = loop;
    switch (kind) {
    case R_SUM:
    case R_MEAN:
        if (loop == EV_INT64) {
            /* Integers wrap (exactly, in any order): src is any integer or
             * bool dtype, widened as read. */
            r.v.i64 = (int64_t)parts_reduce_dt(P_ISUM, src, row, n, 0).u64;
        } else if (loop == EV_FLOAT32) {
            double s;
            r.v.f32 = pairwise_parallel(row, 4, n, &s) ? (float)s : pairwise_f32(row, n);
            if (kind == R_MEAN) {
                r.v.f32 /= (float)n;
            }
        } else {
            double s;
            r.v.f64 = pairwise_parallel(row, 8, n, &s) ? s : pairwise_f64(row, n);
            if (kind == R_MEAN) {
                r.v.f64 /= (double)n;
            }
        }
        break;
    case R_PROD:
        if (loop == EV_INT64) {
            r.v.i64 = (int64_t)parts_reduce(P_PROD_U64, row, n, 8, 0).u64;
        } else if (loop == EV_FLOAT32) {
            r.v.f32 = parts_reduce(P_PROD_F32, row, n, 4, 0).f32;
        } else {
            r.v.f64 = parts_reduce(P_PROD_F64, row, n, 8, 0).f64;
        }
        break;
    case R_MAX:
    case R_MIN:
    case R_ARGMAX:
    case R_ARGMIN: {
        int want_max = kind == R_MAX || kind == R_ARGMAX;
        if (kind == R_MAX || kind == R_MIN) {
            extval_parallel(loop, row, n, want_max, &r.v);
        } else {
            r.dtype = EV_INT64;
            r.v.i64 = extrema_parallel(loop, row, n, want_max);
        }
        break;
    }
    case R_ANY:
    case R_ALL: /* loop is bool; src is x's dtype (read as bits) or bool */
        r.v.b = (uint8_t)truth_run(src, row, n, kind == R_ALL);
        break;
    case R_LOGSUMEXP: { /* loop is float64; src float32 or float64 */
        if (n == 0) {
            r.v.f64 = -INFINITY;
            break;
        }
        int64_t esz = (int64_t)ev__dsize(src);
        int64_t at = extrema_parallel(src, row, n, 1);
        double m = src == EV_FLOAT32 ? (double)((const float *)row)[at]
                                     : ((const double *)row)[at];
        if (m != m || isinf(m)) {
            /* NaN propagates; with no NaN, +inf anywhere gives +inf, and
             * all -inf gives -inf. x - m would be NaN. */
            r.v.f64 = m;
            break;
        }
        double s = parts_reduce(src == EV_FLOAT32 ? P_SUMEXP_F32 : P_SUMEXP_F64, row, n, esz,
                                m).f64;
        r.v.f64 = m + log(s);
        break;
    }
    default: { /* R_VAR, R_STD: loop is float64; src float32 or float64 */
        int f32 = src == EV_FLOAT32;
        int64_t esz = f32 ? 4 : 8;
        double mean = parts_reduce(f32 ? P_SUM64_F32 : P_SUM64_F64, row, n, esz, 0).f64 /
                      (double)n;
        double ss = parts_reduce(f32 ? P_SQDEV_F32 : P_SQDEV_F64, row, n, esz, mean).f64;
        double denom = (double)n - correction;
        double var = n == 0 ? NAN : ss / (denom > 0 ? denom : 0);
        r.v.f64 = kind == R_STD ? sqrt(var) : var;
        break;
    }
    }
    return r;
}

/* Stores a reduction's result as one element of dtype dt: copied when the
 * dtypes agree (the common case, one store per row), converted otherwise. */
static inline void store_val(char *dst, ev_dtype dt, const red_val *r)
{
    if (dt == r->dtype) {
        ev__copy_elem(dst, (const char *)&r->v, ev__dsize(dt));
    } else {
        ev__cast_strided(dst, dt, (int64_t)ev__dsize(dt), &r->v, r->dtype, 0, 1);
    }
}

/* -------------------------------------------------- outer reductions
 *
 * When x's innermost dimension is kept and dense (sum over axis 0 of a
 * matrix, over the batch of an image stack), gathering each output's
 * elements would stride through memory once per output. Instead each output
 * row of that dimension's length accumulates whole input rows, which the
 * compiler vectorizes. Float sums add rows into a partial row, flushed into
 * the result every OUTER_BLOCK rows, so the rounding error grows as
 * O(OUTER_BLOCK + n / OUTER_BLOCK) instead of O(n). The output rows are cut
 * into blocks of OUTER_COLS columns, the tasks split over the intra-op
 * threads; each column is reduced in the same order whatever the split. */
#define OUTER_BLOCK 128
#define OUTER_COLS 1024

typedef struct outer_state {
    int kind;
    int64_t len;   /* columns in this block */
    void *acc;     /* the output block, or (arg*) the extremes so far (loop dtype) */
    int64_t *at;   /* arg*: the output block of indexes */
    void *part;    /* partial sums (loop dtype), for sums */
    int64_t cnt;   /* rows in part */
    int64_t seen;  /* rows accumulated so far */
} outer_state;

#define OUTER_OPS(SUF, T, U)                                                       \
    EV__SIMD_CLONES                                                                \
    static void outer_flush_##SUF(outer_state *st)                                 \
    {                                                                              \
        T *restrict acc = st->acc;                                                 \
        T *restrict part = st->part;                                               \
        for (int64_t j = 0; j < st->len; j++) {                                    \
            acc[j] = (T)((U)acc[j] + (U)part[j]);                                  \
            part[j] = 0;                                                           \
        }                                                                          \
        st->cnt = 0;                                                               \
    }                                                                              \
    /* Accumulates rows input rows, stride bytes apart, from p. */               \
    EV__SIMD_CLONES                                                                \
    static void outer_rows_##SUF(outer_state *st, const char *p, int64_t stride,   \
                                 int64_t rows)                                     \
    {                                                                              \
        int64_t n = st->len;                                                       \
        T *restrict acc = st->acc;                                                 \
        for (int64_t q = 0; q < rows; q++) {                                       \
            const T *restrict x = (const T *)(p + q * stride);                     \
            if (st->kind == R_SUM || st->kind == R_MEAN) {                         \
                T *restrict part = st->part;                                       \
                for (int64_t j = 0; j < n; j++) {                                  \
                    part[j] = (T)((U)part[j] + (U)x[j]);                           \
                }                                                                  \
                if (++st->cnt == OUTER_BLOCK) {                                    \
                    outer_flush_##SUF(st);                                         \
                }                                                                  \
                continue;                                                          \
            }                                                                      \
            int64_t r = st->seen++;                                                \
            if (r == 0) {                                                          \
                memcpy(acc, x, sizeof(T) * (size_t)n);                             \
                if (st->at) {                                                      \
                    memset(st->at, 0, sizeof(int64_t) * (size_t)n);                \
                }                                                                  \
            } else if (st->kind == R_PROD) {                                       \
                for (int64_t j = 0; j < n; j++) {                                  \
                    acc[j] = (T)((U)acc[j] * (U)x[j]);                             \
                }                                                                  \
            } else if (st->kind == R_MAX) {                                        \
                for (int64_t j = 0; j < n; j++) {                                  \
                    acc[j] = x[j] > acc[j] || x[j] != x[j] ? x[j] : acc[j];        \
                }                                                                  \
            } else if (st->kind == R_MIN) {                                        \
                for (int64_t j = 0; j < n; j++) {                                  \
                    acc[j] = x[j] < acc[j] || x[j] != x[j] ? x[j] : acc[j];        \
                }                                                                  \
            } else {                                                               \
                /* arg*: a later row wins when strictly better, or when it is */  \
                /* the first NaN; a NaN kept in acc is beaten by nothing. */      \
                int64_t *restrict at = st->at;                                     \
                int want_max = st->kind == R_ARGMAX;                               \
                for (int64_t j = 0; j < n; j++) {                                  \
                    T v = x[j], m = acc[j];                                        \
                    int c = (want_max ? v > m : v < m) | (v != v && m == m);       \
                    acc[j] = c ? v : m;                                            \
                    at[j] = c ? r : at[j];                                         \
                }                                                                  \
            }                                                                      \
        }                                                                          \
    }
OUTER_OPS(i32, int32_t, uint32_t)
OUTER_OPS(i64, int64_t, uint64_t)
OUTER_OPS(f32, float, float)
OUTER_OPS(f64, double, double)

typedef struct outer_walk {
    outer_state *st;
    ev_dtype dt;
} outer_walk;

static void outer_rows(char **p, const int64_t *s, int64_t n, void *user)
{
    outer_walk *w = user;
    switch (w->dt) {
    case EV_INT32: outer_rows_i32(w->st, p[0], s[0], n); break;
    case EV_INT64: outer_rows_i64(w->st, p[0], s[0], n); break;
    case EV_FLOAT32: outer_rows_f32(w->st, p[0], s[0], n); break;
    default: outer_rows_f64(w->st, p[0], s[0], n); break;
    }
}

/* Finishes one output block (of at least two input rows): flushes partial
 * sums and divides means. */
static void outer_finish(outer_state *st, ev_dtype dt, int64_t nred)
{
    if (st->kind == R_SUM || st->kind == R_MEAN) {
        switch (dt) {
        case EV_INT32: outer_flush_i32(st); break;
        case EV_INT64: outer_flush_i64(st); break;
        case EV_FLOAT32: outer_flush_f32(st); break;
        default: outer_flush_f64(st); break;
        }
    }
    if (st->kind == R_MEAN) {
        for (int64_t j = 0; j < st->len; j++) {
            if (dt == EV_FLOAT32) {
                ((float *)st->acc)[j] /= (float)nred;
            } else {
                ((double *)st->acc)[j] /= (double)nred;
            }
        }
    }
}

/* ------------------------------------------------------------ instruction */

typedef struct red_arg {
    ev_tensor *x, *out;  /* both referenced */
    int kind;
    ev_dtype loop;       /* the dtype the reducer reads; x is converted to it */
    uint32_t rmask;      /* bit d: x's dimension d is reduced */
    double correction;
} red_arg;
_Static_assert(sizeof(red_arg) <= EV_INLINE_ARG_SIZE, "red_arg must travel inline");

static void red_drop(void *p)
{
    red_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->out);
}

typedef struct gather_state {
    char *dst;
    ev_dtype dd, sd;
    int64_t dsize;
} gather_state;

static void gather_row(char **p, const int64_t *s, int64_t n, void *user)
{
    gather_state *g = user;
    ev__cast_strided(g->dst, g->dd, g->dsize, p[0], g->sd, s[0], n);
    g->dst += n * g->dsize;
}

/* Column kernels of the outer path for any/all (on raw bits, into the bool
 * output block) and for the float64 reducers (var, std: sums, then sums of
 * squared deviations; logsumexp: maxima, then sums of exp), each over rows
 * input rows stride bytes apart. */
#define OUTER_TRUTH(U)                                                             \
    EV__SIMD_CLONES                                                                \
    static void outer_truth_##U(uint8_t *restrict acc, const char *p, int64_t stride, \
                                int64_t rows, int64_t n, U mask, int want_all)     \
    {                                                                              \
        for (int64_t q = 0; q < rows; q++) {                                       \
            const U *restrict x = (const U *)(p + q * stride);                     \
            if (want_all) {                                                        \
                for (int64_t j = 0; j < n; j++) {                                  \
                    acc[j] &= (uint8_t)((x[j] & mask) != 0);                       \
                }                                                                  \
            } else {                                                               \
                for (int64_t j = 0; j < n; j++) {                                  \
                    acc[j] |= (uint8_t)((x[j] & mask) != 0);                       \
                }                                                                  \
            }                                                                      \
        }                                                                          \
    }
OUTER_TRUTH(uint8_t)
OUTER_TRUTH(uint16_t)
OUTER_TRUTH(uint32_t)
OUTER_TRUTH(uint64_t)

enum { ST_SUM, ST_SQDEV, ST_MAX, ST_SUMEXP };

#define OUTER_STATS(SUF, T, EXPF)                                                  \
    EV__SIMD_CLONES                                                                \
    static void outer_stats_##SUF(int stage, double *restrict acc, const double *restrict aux, \
                                  const char *p, int64_t stride, int64_t rows, int64_t n) \
    {                                                                              \
        for (int64_t q = 0; q < rows; q++) {                                       \
            const T *restrict x = (const T *)(p + q * stride);                     \
            if (stage == ST_SUM) {                                                 \
                for (int64_t j = 0; j < n; j++) {                                  \
                    acc[j] += (double)x[j];                                        \
                }                                                                  \
            } else if (stage == ST_SQDEV) {                                        \
                for (int64_t j = 0; j < n; j++) {                                  \
                    double d = (double)x[j] - aux[j];                              \
                    acc[j] += d * d;                                               \
                }                                                                  \
            } else if (stage == ST_MAX) {                                          \
                T *restrict m = (T *)acc; /* NaN, once met, stays */               \
                for (int64_t j = 0; j < n; j++) {                                  \
                    m[j] = x[j] > m[j] || x[j] != x[j] ? x[j] : m[j];              \
                }                                                                  \
            } else {                                                               \
                const T *restrict m = (const T *)aux;                              \
                for (int64_t j = 0; j < n; j++) {                                  \
                    acc[j] += (double)EXPF(x[j] - m[j]);                           \
                }                                                                  \
            }                                                                      \
        }                                                                          \
    }
OUTER_STATS(f32, float, exp_f32)
OUTER_STATS(f64, double, exp_f64)

typedef struct stats_walk {
    int stage;
    ev_dtype xd;
    int64_t n;
    double *acc;
    const double *aux;
    uint8_t *truth;   /* any/all: the output block */
    int want_all;
} stats_walk;

static void stats_rows(char **p, const int64_t *s, int64_t rows, void *user)
{
    stats_walk *w = user;
    if (w->truth) {
        uint64_t mask = truth_mask(w->xd);
        uint8_t *t = w->truth;
        int all = w->want_all;
        switch (ev__dsize(w->xd)) {
        case 1: outer_truth_uint8_t(t, p[0], s[0], rows, w->n, (uint8_t)mask, all); break;
        case 2: outer_truth_uint16_t(t, p[0], s[0], rows, w->n, (uint16_t)mask, all); break;
        case 4: outer_truth_uint32_t(t, p[0], s[0], rows, w->n, (uint32_t)mask, all); break;
        default: outer_truth_uint64_t(t, p[0], s[0], rows, w->n, mask, all); break;
        }
    } else if (w->xd == EV_FLOAT32) {
        outer_stats_f32(w->stage, w->acc, w->aux, p[0], s[0], rows, w->n);
    } else {
        outer_stats_f64(w->stage, w->acc, w->aux, p[0], s[0], rows, w->n);
    }
}

/* Runs the outer path's any/all, var/std or logsumexp over one block of
 * cols outputs at ob, the reduced rows walked by it; scratch holds 2 cols
 * doubles. */
static void outer_block_stats(const red_arg *a, ev__iter *it, int64_t cols, int64_t nred,
                              char *ob, double *scratch)
{
    ev_dtype xd = a->x->dtype;
    stats_walk w = {0, xd, cols, scratch, scratch + cols, NULL, a->kind == R_ALL};
    if (a->kind == R_ANY || a->kind == R_ALL) {
        w.truth = (uint8_t *)ob;
        memset(ob, a->kind == R_ALL, (size_t)cols);
        ev__iter_rows(it, stats_rows, &w);
        return;
    }
    double *acc = scratch, *aux = scratch + cols;
    double res[OUTER_COLS];
    if (a->kind == R_VAR || a->kind == R_STD) {
        memset(acc, 0, sizeof(double) * (size_t)cols);
        w.stage = ST_SUM;
        ev__iter_rows(it, stats_rows, &w);
        for (int64_t c = 0; c < cols; c++) {
            aux[c] = acc[c] / (double)nred;
            acc[c] = 0;
        }
        w.stage = ST_SQDEV;
        ev__iter_rows(it, stats_rows, &w);
        double denom = (double)nred - a->correction;
        for (int64_t c = 0; c < cols; c++) {
            double var = acc[c] / (denom > 0 ? denom : 0);
            res[c] = a->kind == R_STD ? sqrt(var) : var;
        }
    } else { /* R_LOGSUMEXP */
        /* Maxima in x's dtype, kept in aux's room. */
        for (int64_t c = 0; c < cols; c++) {
            if (xd == EV_FLOAT32) {
                ((float *)aux)[c] = -INFINITY;
            } else {
                aux[c] = -INFINITY;
            }
        }
        w.stage = ST_MAX;
        w.acc = aux;
        ev__iter_rows(it, stats_rows, &w);
        memset(acc, 0, sizeof(double) * (size_t)cols);
        w.stage = ST_SUMEXP;
        w.acc = acc;
        w.aux = aux;
        ev__iter_rows(it, stats_rows, &w);
        for (int64_t c = 0; c < cols; c++) {
            double m = xd == EV_FLOAT32 ? (double)((const float *)aux)[c] : aux[c];
            /* NaN and infinite maxima are the result (see reduce_row). */
            res[c] = m != m || isinf(m) ? m : m + log(acc[c]);
        }
    }
    ev__cast_strided(ob, a->out->dtype, (int64_t)ev__dsize(a->out->dtype), res, EV_FLOAT64,
                     sizeof(double), cols);
}

/* A reduction whose last kept dimension is x's innermost, dense one: one
 * task per block of OUTER_COLS columns of each output row (the output rows
 * run over the other kept dims). */
typedef struct outer_job {
    const red_arg *a;
    const ev__iter *rit;   /* over the reduced dims */
    int nk;
    const int64_t *kshape, *kstr;
    int64_t len, nblk, nred;
} outer_job;

static void outer_tasks(int64_t lo, int64_t hi, void *p)
{
    const outer_job *j = p;
    const red_arg *a = j->a;
    int64_t xsz = (int64_t)ev__dsize(a->x->dtype), osz = (int64_t)ev__dsize(a->out->dtype);
    char *base = ev__tensor_ptr(a->x), *o = ev__tensor_ptr(a->out);
    int arg = a->kind == R_ARGMAX || a->kind == R_ARGMIN;
    /* 8-byte aligned scratch: arg*'s extremes, partial sums, or the two
     * rows of outer_block_stats. */
    int64_t scratch[2 * OUTER_COLS];
    for (int64_t t = lo; t < hi; t++) {
        int64_t r = t / j->nblk, c0 = (t % j->nblk) * OUTER_COLS;
        int64_t cols = j->len - c0 < OUTER_COLS ? j->len - c0 : OUTER_COLS;
        /* Where output row r starts in x: unravel r over the kept dims but
         * the last. */
        int64_t off = 0, rest = r;
        for (int d = j->nk - 2; d >= 0; d--) {
            off += rest % j->kshape[d] * j->kstr[d];
            rest /= j->kshape[d];
        }
        char *ob = o + (r * j->len + c0) * osz;
        outer_state st = {a->kind, cols, arg ? (void *)scratch : ob, arg ? (int64_t *)ob : NULL,
                          NULL, 0, 0};
        if (a->kind == R_SUM || a->kind == R_MEAN) {
            st.part = scratch;
            memset(scratch, 0, (size_t)(cols * xsz));
            memset(ob, 0, (size_t)(cols * xsz));
        }
        ev__iter it = *j->rit;
        it.data[0] = base + off + c0 * xsz;
        if (a->kind == R_ANY || a->kind == R_ALL || a->kind == R_VAR || a->kind == R_STD ||
            a->kind == R_LOGSUMEXP) {
            outer_block_stats(a, &it, cols, j->nred, ob, (double *)scratch);
            continue;
        }
        outer_walk w = {&st, a->loop};
        ev__iter_rows(&it, outer_rows, &w);
        outer_finish(&st, a->loop, j->nred);
    }
}

/* Few output blocks over many rows (sum over axis 0 of a matrix): the rows
 * are cut into segments of OUTER_SEG (a multiple of OUTER_BLOCK), each
 * reduced into its own partial block by a task, and the partials combined
 * in order. The cut depends on the shape alone, so the result does not
 * depend on the number of threads. */
#define OUTER_SEG 256

#define OUTER_COMBINE(SUF, T, U)                                                   \
    EV__SIMD_CLONES                                                                \
    static void outer_combine_##SUF(int kind, T *restrict out, int64_t *restrict oat, \
                                    const T *restrict seg, const int64_t *restrict sat, \
                                    int64_t n, int64_t row0)                       \
    {                                                                              \
        if (kind == R_SUM || kind == R_MEAN) {                                     \
            for (int64_t j = 0; j < n; j++) {                                      \
                out[j] = (T)((U)out[j] + (U)seg[j]);                               \
            }                                                                      \
        } else if (kind == R_PROD) {                                               \
            for (int64_t j = 0; j < n; j++) {                                      \
                out[j] = (T)((U)out[j] * (U)seg[j]);                               \
            }                                                                      \
        } else if (kind == R_MAX || kind == R_MIN) {                               \
            int want_max = kind == R_MAX;                                          \
            for (int64_t j = 0; j < n; j++) {                                      \
                T v = seg[j], m = out[j];                                          \
                out[j] = (want_max ? v > m : v < m) || v != v ? v : m;             \
            }                                                                      \
        } else {                                                                   \
            int want_max = kind == R_ARGMAX;                                       \
            for (int64_t j = 0; j < n; j++) {                                      \
                T v = seg[j], m = out[j];                                          \
                int c = (want_max ? v > m : v < m) | (v != v && m == m);           \
                out[j] = c ? v : m;                                                \
                oat[j] = c ? sat[j] + row0 : oat[j];                               \
            }                                                                      \
        }                                                                          \
    }
OUTER_COMBINE(i32, int32_t, uint32_t)
OUTER_COMBINE(i64, int64_t, uint64_t)
OUTER_COMBINE(f32, float, float)
OUTER_COMBINE(f64, double, double)

typedef struct seg_job {
    const red_arg *a;
    const ev__iter *rit;   /* one reduced dim: rit->shape[0] rows */
    int64_t len, nseg;
    char *vals;            /* nseg blocks of len values (loop dtype) */
    int64_t *ats;          /* arg*: nseg blocks of len indexes */
} seg_job;

static void seg_tasks(int64_t lo, int64_t hi, void *p)
{
    const seg_job *j = p;
    const red_arg *a = j->a;
    int64_t lsz = (int64_t)ev__dsize(a->loop), xsz = (int64_t)ev__dsize(a->x->dtype);
    int arg = a->kind == R_ARGMAX || a->kind == R_ARGMIN;
    int64_t scratch[OUTER_COLS];
    for (int64_t t = lo; t < hi; t++) {
        int64_t s = t % j->nseg, c0 = t / j->nseg * OUTER_COLS;
        int64_t cols = j->len - c0 < OUTER_COLS ? j->len - c0 : OUTER_COLS;
        int64_t r0 = s * OUTER_SEG, rows = j->rit->shape[0] - r0;
        rows = rows < OUTER_SEG ? rows : OUTER_SEG;
        char *vb = j->vals + (s * j->len + c0) * lsz;
        int sum = a->kind == R_SUM || a->kind == R_MEAN;
        /* Means divide once, after the partials are combined. */
        outer_state st = {sum ? R_SUM : a->kind, cols, vb,
                          arg ? j->ats + s * j->len + c0 : NULL, NULL, 0, 0};
        if (sum) {
            st.part = scratch;
            memset(scratch, 0, (size_t)(cols * lsz));
            memset(vb, 0, (size_t)(cols * lsz));
        }
        char *rowp = j->rit->data[0] + r0 * j->rit->strides[0][0] + c0 * xsz;
        int64_t stride = j->rit->strides[0][0];
        switch (a->loop) {
        case EV_INT32: outer_rows_i32(&st, rowp, stride, rows); break;
        case EV_INT64: outer_rows_i64(&st, rowp, stride, rows); break;
        case EV_FLOAT32: outer_rows_f32(&st, rowp, stride, rows); break;
        default: outer_rows_f64(&st, rowp, stride, rows); break;
        }
        outer_finish(&st, a->loop, rows);
    }
}

/* The segmented path for one output row (x's kept dims are its innermost
 * one alone); returns 1 if it ran, 0 if it does not apply or its buffers
 * are not to be had (the plain path then runs). */
static int red_outer_segments(red_arg *a, int nk, ev__iter *rit, int64_t len, int64_t nred)
{
    if (nk != 1 || rit->ndim != 1 || nred < 2 * OUTER_SEG || a->kind > R_ARGMIN ||
        a->kind == R_ANY || a->kind == R_ALL || a->kind == R_LOGSUMEXP) {
        return 0;
    }
    int arg = a->kind == R_ARGMAX || a->kind == R_ARGMIN;
    int64_t lsz = (int64_t)ev__dsize(a->loop);
    seg_job j = {a, rit, len, (nred + OUTER_SEG - 1) / OUTER_SEG, NULL, NULL};
    j.vals = ev__malloc((size_t)(j.nseg * len * lsz));
    j.ats = arg ? ev__malloc(sizeof(int64_t) * (size_t)(j.nseg * len)) : NULL;
    if (!j.vals || (arg && !j.ats)) {
        ev__free(j.vals);
        ev__free(j.ats);
        return 0;
    }
    int64_t nblk = (len + OUTER_COLS - 1) / OUTER_COLS;
    int64_t per = OUTER_SEG * (len < OUTER_COLS ? len : OUTER_COLS);
    ev__parallel_for(nblk * j.nseg, (PAR_SUM_MIN / 8 + per - 1) / per, seg_tasks, &j);
    char *o = ev__tensor_ptr(a->out);
    char *out = arg ? j.vals : o; /* arg*: values combine in place in segment 0 */
    int64_t *oat = arg ? (int64_t *)o : NULL;
    if (arg) {
        memcpy(oat, j.ats, sizeof(int64_t) * (size_t)len);
    } else {
        memcpy(out, j.vals, (size_t)(len * lsz));
    }
    for (int64_t s = 1; s < j.nseg; s++) {
        const char *sv = j.vals + s * len * lsz;
        const int64_t *sa = arg ? j.ats + s * len : NULL;
        int64_t r0 = s * OUTER_SEG;
        switch (a->loop) {
        case EV_INT32:
            outer_combine_i32(a->kind, (int32_t *)out, oat, (const int32_t *)sv, sa, len, r0);
            break;
        case EV_INT64:
            outer_combine_i64(a->kind, (int64_t *)out, oat, (const int64_t *)sv, sa, len, r0);
            break;
        case EV_FLOAT32:
            outer_combine_f32(a->kind, (float *)out, oat, (const float *)sv, sa, len, r0);
            break;
        default:
            outer_combine_f64(a->kind, (double *)out, oat, (const double *)sv, sa, len, r0);
            break;
        }
    }
    if (a->kind == R_MEAN) {
        for (int64_t c = 0; c < len; c++) {
            if (a->loop == EV_FLOAT32) {
                ((float *)o)[c] /= (float)nred;
            } else {
                ((double *)o)[c] /= (double)nred;
            }
        }
    }
    ev__free(j.vals);
    ev__free(j.ats);
    return 1;
}

static int red_outer(red_arg *a, int nk, const int64_t *kshape, const int64_t *kstr,
                     ev__iter *rit, int64_t nred)
{
    int64_t len = kshape[nk - 1];
    if (red_outer_segments(a, nk, rit, len, nred)) {
        return 0;
    }
    outer_job j = {a, rit, nk, kshape, kstr, len, (len + OUTER_COLS - 1) / OUTER_COLS, nred};
    int64_t tasks = a->out->numel / len * j.nblk;
    int64_t per_task = nred * (len < OUTER_COLS ? len : OUTER_COLS);
    if (tasks > 1 && tasks * per_task >= PAR_SUM_MIN) {
        ev__parallel_for(tasks, (PAR_SUM_MIN / 4 + per_task - 1) / per_task, outer_tasks, &j);
    } else {
        outer_tasks(0, tasks, &j);
    }
    return 0;
}

/* Outputs [lo, hi) of a reduction whose rows are dense in the reducer's
 * dtype (red_kernel's direct path), for ev__parallel_for. */
typedef struct rows_job {
    const red_arg *a;
    const char *base;
    char *o;
    int64_t osz, nred;
    int nk;
    const int64_t *kshape, *kstr;
    ev_dtype src;   /* the dtype the rows hold */
} rows_job;

static void reduce_rows(int64_t lo, int64_t hi, void *p)
{
    const rows_job *j = p;
    /* Where output lo's row starts: unravel lo over the kept dimensions. */
    int64_t idx[EV_MAX_DIMS] = {0}, off = 0, rest = lo;
    for (int d = j->nk - 1; d >= 0; d--) {
        idx[d] = rest % j->kshape[d];
        rest /= j->kshape[d];
        off += idx[d] * j->kstr[d];
    }
    for (int64_t i = lo; i < hi; i++) {
        red_val r = reduce_row(j->a->kind, j->a->loop, j->src, j->base + off, j->nred,
                               j->a->correction);
        store_val(j->o + i * j->osz, j->a->out->dtype, &r);
        for (int d = j->nk - 1; d >= 0; d--) {
            off += j->kstr[d];
            if (++idx[d] < j->kshape[d]) {
                break;
            }
            off -= j->kstr[d] * j->kshape[d];
            idx[d] = 0;
        }
    }
}

/* 1 if reduce_row reads kind's input in dtype xd itself, not converted to
 * the loop dtype: any/all read the bits of every dtype, integer sums widen
 * narrow integers and bools, and the float64 reducers (var, std,
 * logsumexp) read float32. */
static int red_reads_x(int kind, ev_dtype xd)
{
    if (kind == R_ANY || kind == R_ALL) {
        return 1;
    }
    if (kind == R_SUM && !ev_dtype_is_float(xd)) {
        return 1; /* integer and bool sums widen as they read */
    }
    return (kind == R_VAR || kind == R_STD || kind == R_LOGSUMEXP) && ev_dtype_is_float(xd);
}

/* A reduction whose kept innermost dimension is dense, which the outer
 * path does not serve (x converted to another loop dtype on the way: sums
 * of narrow integers, logsumexp of integers, bool max):
 * instead of gathering one output's elements at a time, striding through
 * memory once per output, a block of up to COLS_BLOCK neighbouring outputs
 * is gathered at once, reading rows of the block's width, into one buffer
 * row per output; each row is then reduced as a dense one. One task per
 * block, split over the intra-op threads; each output sees the same
 * elements in the same order as alone. */
#define COLS_BLOCK 64
#define COLS_BUF_BYTES ((int64_t)1 << 19)

typedef struct cols_job {
    const red_arg *a;
    const ev__iter *rit;  /* over the reduced dims */
    int nk;
    const int64_t *kshape, *kstr;
    int64_t len, nblk, width, nred;
    ev_dtype src;         /* the buffer's dtype: loop, or x's where reduce_row reads it */
    _Atomic int nomem;
} cols_job;

typedef struct cols_gather {
    char *buf;            /* the next buffer column to fill */
    int64_t rowbytes;     /* one output's row in the buffer */
    int64_t width, xsz, bsz;
    ev_dtype xd, bd;
} cols_gather;

static void cols_gather_rows(char **p, const int64_t *s, int64_t n, void *user)
{
    cols_gather *g = user;
    for (int64_t i = 0; i < n; i++) {
        ev__cast_strided(g->buf, g->bd, g->rowbytes, p[0] + i * s[0], g->xd, g->xsz, g->width);
        g->buf += g->bsz;
    }
}

static void cols_tasks(int64_t lo, int64_t hi, void *p)
{
    cols_job *j = p;
    const red_arg *a = j->a;
    int64_t xsz = (int64_t)ev__dsize(a->x->dtype), osz = (int64_t)ev__dsize(a->out->dtype);
    int64_t bsz = (int64_t)ev__dsize(j->src);
    /* Buffer rows a cache line longer than needed: at a power-of-two pitch
     * the block's writes would all fall in one cache set. */
    int64_t pitch = (j->nred * bsz + 63) / 64 * 64 + 64;
    char *buf = ev__malloc((size_t)(j->width * pitch));
    if (!buf) {
        atomic_store(&j->nomem, 1);
        return;
    }
    char *base = ev__tensor_ptr(a->x), *o = ev__tensor_ptr(a->out);
    for (int64_t t = lo; t < hi; t++) {
        int64_t r = t / j->nblk, c0 = (t % j->nblk) * j->width;
        int64_t cols = j->len - c0 < j->width ? j->len - c0 : j->width;
        int64_t off = 0, rest = r;
        for (int d = j->nk - 2; d >= 0; d--) {
            off += rest % j->kshape[d] * j->kstr[d];
            rest /= j->kshape[d];
        }
        ev__iter it = *j->rit;
        it.data[0] = base + off + c0 * xsz;
        cols_gather g = {buf, pitch, cols, xsz, bsz, a->x->dtype, j->src};
        ev__iter_rows(&it, cols_gather_rows, &g);
        for (int64_t c = 0; c < cols; c++) {
            red_val v = reduce_row(a->kind, a->loop, j->src, buf + c * pitch, j->nred,
                                   a->correction);
            ev__cast_strided(o + (r * j->len + c0 + c) * osz, a->out->dtype, osz, &v.v, v.dtype,
                             0, 1);
        }
    }
    ev__free(buf);
}

static int red_cols(red_arg *a, ev_kctx *kc, int nk, const int64_t *kshape,
                    const int64_t *kstr, ev__iter *rit, int64_t nred)
{
    int64_t len = kshape[nk - 1];
    ev_dtype src = red_reads_x(a->kind, a->x->dtype) ? a->x->dtype : a->loop;
    int64_t bsz = (int64_t)ev__dsize(src);
    int64_t width = COLS_BUF_BYTES / (nred * bsz);
    width = width < 1 ? 1 : width > COLS_BLOCK ? COLS_BLOCK : width;
    cols_job j = {a, rit, nk, kshape, kstr, len, (len + width - 1) / width, width, nred, src, 0};
    int64_t tasks = a->out->numel / len * j.nblk;
    int64_t per_task = nred * (len < width ? len : width);
    if (tasks > 1 && tasks * per_task >= PAR_SUM_MIN) {
        ev__parallel_for(tasks, (PAR_SUM_MIN / 4 + per_task - 1) / per_task, cols_tasks, &j);
    } else {
        cols_tasks(0, tasks, &j);
    }
    if (atomic_load(&j.nomem)) {
        return ev_kctx_fail(kc, EV_ENOMEM, "%s: cannot allocate a %lld-byte buffer",
                            red_names[a->kind], (long long)(width * nred * bsz));
    }
    return 0;
}

static int red_kernel(void *p, ev_kctx *kc)
{
    red_arg *a = p;
    const ev_tensor *x = a->x;
    int64_t nout = a->out->numel;
    if (nout == 0) {
        return 0;
    }
    int64_t xsz = (int64_t)ev__dsize(x->dtype), lsz = (int64_t)ev__dsize(a->loop);
    int64_t osz = (int64_t)ev__dsize(a->out->dtype);
    /* Split x's dimensions into kept ones (walked by an odometer, one output
     * element per step: the output is contiguous in the same order) and
     * reduced ones (walked by a coalesced iterator per output element). */
    int nk = 0, nr = 0;
    int64_t kshape[EV_MAX_DIMS], kstr[EV_MAX_DIMS], rshape[EV_MAX_DIMS];
    int64_t rstr[1][EV_MAX_DIMS];
    int64_t nred = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (a->rmask & (1u << d)) {
            rshape[nr] = x->shape[d];
            rstr[0][nr++] = x->strides[d] * xsz;
            nred *= x->shape[d];
        } else {
            kshape[nk] = x->shape[d];
            kstr[nk++] = x->strides[d] * xsz;
        }
    }
    char *base = ev__tensor_ptr(x);
    ev__iter rit;
    ev__iter_init_raw(&rit, 1, nr, rshape, &base, (const int64_t(*)[EV_MAX_DIMS])rstr);
    /* Outer path: x's innermost dimension is kept and dense, and the
     * reducer reads x's own dtype and writes the output's (arg*: int64
     * indexes). */
    int last = x->ndim - 1;
    int arg = a->kind == R_ARGMAX || a->kind == R_ARGMIN;
    int stats = a->kind == R_ANY || a->kind == R_ALL ||
                ((a->kind == R_VAR || a->kind == R_STD || a->kind == R_LOGSUMEXP) &&
                 ev_dtype_is_float(x->dtype));
    if (nk > 0 && !(a->rmask & (1u << last)) && x->strides[last] == 1 && nred > 1 &&
        (stats || (x->dtype == a->loop && (a->kind <= R_MIN ? a->out->dtype == a->loop : arg)))) {
        return red_outer(a, nk, kshape, kstr, &rit, nred);
    }
    if (nk > 0 && !(a->rmask & (1u << last)) && x->strides[last] == 1 && nred > 1 &&
        kshape[nk - 1] > 1) {
        return red_cols(a, kc, nk, kshape, kstr, &rit, nred);
    }
    /* Contiguous fast path: the reduced elements of each output are one
     * dense run already in the reducer's dtype, or in one of x's dtypes that
     * the reducer reads itself (e.g. the innermost dims of a contiguous
     * tensor); otherwise gather them into a buffer, converting. */
    int direct = (x->dtype == a->loop || red_reads_x(a->kind, x->dtype)) &&
                 (nred <= 1 || (rit.ndim == 1 && rit.strides[0][0] == xsz));
    ev_dtype src = direct ? x->dtype : a->loop;
    char *buf = NULL;
    if (!direct && nred > 0) {
        buf = ev__malloc((size_t)(nred * lsz));
        if (!buf) {
            return ev_kctx_fail(kc, EV_ENOMEM, "%s: cannot allocate a %lld-byte buffer",
                                red_names[a->kind], (long long)(nred * lsz));
        }
    }
    char *o = ev__tensor_ptr(a->out);
    if (direct && nout > 1 && nred > 0 && nout * nred >= PAR_SUM_MIN) {
        /* Many dense rows: split the outputs over the intra-op threads. */
        rows_job job = {a, base, o, osz, nred, nk, kshape, kstr, src};
        ev__parallel_for(nout, (PAR_SUM_MIN / 4 + nred - 1) / nred, reduce_rows, &job);
        return 0;
    }
    int64_t idx[EV_MAX_DIMS] = {0};
    int64_t off = 0;
    for (int64_t i = 0; i < nout; i++) {
        const void *row = buf;
        if (nred > 0) {
            if (direct) {
                row = base + off;
            } else {
                rit.data[0] = base + off;
                gather_state g = {buf, a->loop, x->dtype, lsz};
                ev__iter_rows(&rit, gather_row, &g);
            }
        }
        red_val r = reduce_row(a->kind, a->loop, src, row, nred, a->correction);
        store_val(o + i * osz, a->out->dtype, &r);
        for (int d = nk - 1; d >= 0; d--) {
            off += kstr[d];
            if (++idx[d] < kshape[d]) {
                break;
            }
            off -= kstr[d] * kshape[d];
            idx[d] = 0;
        }
    }
    ev__free(buf);
    return 0;
}

/* Checks the arguments, works out the reduced dimensions and the output's
 * shape and dtype, allocates it and issues the instruction. dims == NULL with
 * all_dims reduces everything. */
static int reduce(const ev_exec *ex, int kind, ev_tensor *x, int ndims, const int *dims,
                  int keepdim, double correction, ev_tensor **out)
{
    const char *name = red_names[kind];
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    uint32_t mask = 0;
    if (!dims) {
        if (ndims != 0) {
            return ev__set_message(EV_EINVAL, "%s: dims is NULL but ndims is %d", name, ndims);
        }
        mask = x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0;
    } else {
        if (ndims < 0 || ndims > (x->ndim ? x->ndim : 1)) {
            return ev__set_message(EV_EINVAL, "%s: %d dimensions given for a %d-d tensor",
                                   name, ndims, x->ndim);
        }
        for (int i = 0; i < ndims; i++) {
            int d;
            if (x->ndim == 0) {
                /* A 0-d tensor takes dimension 0 or -1, as in PyTorch. */
                if (dims[i] != 0 && dims[i] != -1) {
                    return ev__set_message(EV_EINDEX, "%s: dimension %d is out of range [-1, "
                                           "0] for a 0-d tensor", name, dims[i]);
                }
                continue;
            }
            if ((rc = ev__norm_dim(name, dims[i], x->ndim, &d))) {
                return rc;
            }
            if (mask & (1u << d)) {
                return ev__set_message(EV_EINVAL, "%s: dimension %d appears more than once",
                                       name, d);
            }
            mask |= 1u << d;
        }
    }
    int nd = 0;
    int64_t shape[EV_MAX_DIMS];
    int64_t nred = 1, nout = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) {
            nred *= x->shape[d];
            if (keepdim) {
                shape[nd++] = 1;
            }
        } else {
            nout *= x->shape[d];
            shape[nd++] = x->shape[d];
        }
    }
    /* Result and reducer dtypes (see ops.h). */
    ev_dtype xd = x->dtype, res, loop;
    ev_dtype comp = ev_dtype_get_info(xd)->compute;
    int is_float = ev_dtype_is_float(xd);
    switch (kind) {
    case R_SUM:
    case R_PROD:
        res = is_float ? xd : EV_INT64;
        loop = is_float ? comp : EV_INT64;
        break;
    case R_MEAN:
    case R_VAR:
    case R_STD:
        if (!is_float) {
            return ev__set_message(EV_ETYPE, "%s: input dtype %s is not supported (a floating "
                                   "dtype is required; cast first)", name, ev_dtype_name(xd));
        }
        res = xd;
        loop = kind == R_MEAN ? comp : EV_FLOAT64;
        break;
    case R_ANY:
    case R_ALL:
        res = loop = EV_BOOL;
        break;
    case R_LOGSUMEXP:
        res = ev_dtype_to_float(xd);
        loop = EV_FLOAT64;
        break;
    default:
        res = kind == R_ARGMAX || kind == R_ARGMIN ? EV_INT64 : xd;
        loop = xd == EV_BOOL ? EV_INT64 : comp;
        if (nred == 0 && nout > 0) {
            char s[EV__SHAPE_STR_SIZE];
            return ev__set_message(EV_EVALUE, "%s: cannot reduce over zero elements (input of "
                                   "shape %s) because the operation has no identity", name,
                                   ev__shape_str(x->ndim, x->shape, s, sizeof s));
        }
        break;
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, res, nd, shape, &dst))) {
        return rc;
    }
    red_arg a = {
        .x = ev_tensor_ref(x),
        .out = ev_tensor_ref(dst),
        .kind = kind,
        .loop = loop,
        .rmask = mask,
        .correction = correction,
    };
    rc = ev__submit(ex, name, red_kernel, &a, sizeof a, red_drop, &a.x, 1, &a.out, 1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_reduce(const ev_exec *ex, int op, ev_tensor *x, int ndims, const int *dims, int keepdim,
              ev_tensor **out)
{
    if (op < 0 || op >= EV_REDUCE_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "reduce op %d does not exist", op);
    }
    return reduce(ex, op, x, ndims, dims, keepdim, 0, out);
}

#define EV_REDUCE(ID, name, ...)                                                       \
    int ev_##name(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, int keepdim, \
                  ev_tensor **out)                                                     \
    {                                                                                  \
        return reduce(ex, R_##ID, x, ndims, dims, keepdim, 0, out);                    \
    }
#include "eagervm/ops.def"

int ev_argmax(const ev_exec *ex, ev_tensor *x, const int *dim, int keepdim, ev_tensor **out)
{
    return reduce(ex, R_ARGMAX, x, dim ? 1 : 0, dim, keepdim, 0, out);
}

int ev_argmin(const ev_exec *ex, ev_tensor *x, const int *dim, int keepdim, ev_tensor **out)
{
    return reduce(ex, R_ARGMIN, x, dim ? 1 : 0, dim, keepdim, 0, out);
}

int ev_var(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, double correction,
           int keepdim, ev_tensor **out)
{
    return reduce(ex, R_VAR, x, ndims, dims, keepdim, correction, out);
}

int ev_std(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, double correction,
           int keepdim, ev_tensor **out)
{
    return reduce(ex, R_STD, x, ndims, dims, keepdim, correction, out);
}

/* ---------------------------------------------------------------- softmax */

typedef struct smax_arg {
    ev_tensor *x, *out;  /* both referenced; same shape */
    int dim;             /* normalised; -1 for a 0-d tensor */
    int log;
} smax_arg;
_Static_assert(sizeof(smax_arg) <= EV_INLINE_ARG_SIZE, "smax_arg must travel inline");

static void smax_drop(void *p)
{
    smax_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->out);
}

/* Softmax of one dense float32 line x[0..n) into y (x == y allowed): the
 * max by ext_value_f32 (NaN if the line has one, which then makes the whole
 * line NaN, as the float64 formula gives), exp_f32 of the shifted values,
 * their sum in float64 lanes (so the normaliser carries no float32
 * rounding), and one division (or, for log_softmax, subtraction) per
 * element. */
EV__SIMD_CLONES
static void smax_line_f32(const float *x, float *y, int64_t n, int log_)
{
    float m = ext_value_f32(x, n, 1);
    int64_t i;
    /* The exps into y (softmax) or a scratch block (log_softmax, which
     * reads x again after: x may be y). */
    double s = sumexp_f32(x, n, m, log_ ? NULL : y);
    if (log_) {
        float ls = (float)log(s);
        for (i = 0; i < n; i++) {
            y[i] = (x[i] - m) - ls;
        }
    } else {
        float sf = (float)s;
        for (i = 0; i < n; i++) {
            y[i] = y[i] / sf;
        }
    }
}

/* The same in float64, with exp_f64 (x == y allowed). */
EV__SIMD_CLONES
static void smax_line_f64(const double *x, double *y, int64_t n, int log_)
{
    double m = ext_value_f64(x, n, 1);
    double s = sumexp_f64(x, n, m, log_ ? NULL : y);
    if (log_) {
        double ls = log(s);
        for (int64_t i = 0; i < n; i++) {
            y[i] = x[i] - m - ls;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            y[i] = y[i] / s;
        }
    }
}

/* Softmax of w neighbouring float lines at once, for a dim that is not
 * the innermost (the lines' elements are xs and ys bytes apart, the lines
 * themselves adjacent): the same three passes, vectorized across the
 * lines, so that every read is a run of w elements rather than a stride. */
#define SMAX_COLS 256
#define SMAX_COLS_FN(SUF, T, EXPF)                                             \
    EV__SIMD_CLONES                                                            \
    static void smax_cols_##SUF(const char *x, int64_t xs, char *y, int64_t ys,   \
                                int64_t len, int64_t w, int log_)              \
    {                                                                          \
        T m[SMAX_COLS], f[SMAX_COLS];                                          \
        double s[SMAX_COLS];                                                   \
        for (int64_t j = 0; j < w; j++) {                                      \
            m[j] = -INFINITY;                                                  \
            s[j] = 0;                                                          \
        }                                                                      \
        for (int64_t i = 0; i < len; i++) {                                    \
            const T *restrict xr = (const T *)(x + i * xs);                    \
            for (int64_t j = 0; j < w; j++) {                                  \
                m[j] = xr[j] > m[j] ? xr[j] : m[j];                            \
            }                                                                  \
        }                                                                      \
        for (int64_t i = 0; i < len; i++) {                                    \
            const T *restrict xr = (const T *)(x + i * xs);                    \
            T *restrict yr = (T *)(y + i * ys);                                \
            if (log_) {                                                        \
                for (int64_t j = 0; j < w; j++) {                              \
                    s[j] += (double)EXPF(xr[j] - m[j]);                        \
                }                                                              \
            } else {                                                           \
                for (int64_t j = 0; j < w; j++) {                              \
                    T e = EXPF(xr[j] - m[j]);                                  \
                    s[j] += (double)e;                                         \
                    yr[j] = e;                                                 \
                }                                                              \
            }                                                                  \
        }                                                                      \
        for (int64_t j = 0; j < w; j++) {                                      \
            f[j] = log_ ? (T)log(s[j]) : (T)s[j];                              \
        }                                                                      \
        for (int64_t i = 0; i < len; i++) {                                    \
            const T *restrict xr = (const T *)(x + i * xs);                    \
            T *restrict yr = (T *)(y + i * ys);                                \
            if (log_) {                                                        \
                for (int64_t j = 0; j < w; j++) {                              \
                    yr[j] = (xr[j] - m[j]) - f[j];                             \
                }                                                              \
            } else {                                                           \
                for (int64_t j = 0; j < w; j++) {                              \
                    yr[j] = yr[j] / f[j];                                      \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }
SMAX_COLS_FN(f32, float, exp_f32)
SMAX_COLS_FN(f64, double, exp_f64)

typedef struct smax_job {
    const smax_arg *a;
    ev__lines lines;   /* x, y */
    int dense;         /* both step one element along dim: no buffer */
    int64_t inner;     /* cols path: the innermost dim's size (lines in a row) */
    int64_t nblk;      /* cols path: blocks of SMAX_COLS lines per row */
    _Atomic int nomem; /* a chunk could not get its buffer */
} smax_job;

/* Tasks [lo, hi) of the cols path: task t is block t % nblk of the lines
 * of row t / nblk (the lines at one position of the dims but dim and the
 * innermost). */
static void smax_col_tasks(int64_t lo, int64_t hi, void *p)
{
    smax_job *j = p;
    const ev__lines *l = &j->lines;
    for (int64_t t = lo; t < hi; t++) {
        int64_t c0 = (t % j->nblk) * SMAX_COLS;
        int64_t w = j->inner - c0 < SMAX_COLS ? j->inner - c0 : SMAX_COLS;
        int64_t idx[EV_MAX_DIMS], off[2];
        ev__lines_seek(l, t / j->nblk * j->inner + c0, idx, off);
        if (j->a->x->dtype == EV_FLOAT32) {
            smax_cols_f32(l->data[0] + off[0], l->step[0], l->data[1] + off[1], l->step[1],
                          l->len[0], w, j->a->log);
        } else {
            smax_cols_f64(l->data[0] + off[0], l->step[0], l->data[1] + off[1], l->step[1],
                          l->len[0], w, j->a->log);
        }
    }
}

/* Lines [lo, hi) of a softmax, for ev__parallel_for. A line that is not
 * dense in both operands is copied into a buffer of its float type,
 * computed there and copied out. */
static void smax_lines(int64_t lo, int64_t hi, void *p)
{
    smax_job *j = p;
    const ev__lines *l = &j->lines;
    ev_dtype dt = j->a->x->dtype;
    int64_t len = l->len[0], esz = (int64_t)ev__dsize(dt);
    char *buf = NULL;
    if (!j->dense) {
        buf = ev__malloc((size_t)(len * esz));
        if (!buf) {
            atomic_store(&j->nomem, 1);
            return;
        }
    }
    int64_t idx[EV_MAX_DIMS], off[2];
    ev__lines_seek(l, lo, idx, off);
    for (int64_t k = lo; k < hi; k++) {
        const char *x = l->data[0] + off[0];
        char *y = l->data[1] + off[1];
        if (buf) {
            ev__copy_run(buf, esz, x, l->step[0], len, (size_t)esz);
        }
        const char *src = buf ? buf : x;
        char *dst = buf ? buf : y;
        if (dt == EV_FLOAT32) {
            smax_line_f32((const float *)src, (float *)dst, len, j->a->log);
        } else {
            smax_line_f64((const double *)src, (double *)dst, len, j->a->log);
        }
        if (buf) {
            ev__copy_run(y, l->step[1], buf, esz, len, (size_t)esz);
        }
        ev__lines_next(l, idx, off);
    }
    ev__free(buf);
}

static int smax_kernel(void *p, ev_kctx *kc)
{
    smax_arg *a = p;
    if (a->x->numel == 0) {
        return 0;
    }
    smax_job j = {.a = a, .nomem = 0};
    ev_tensor *ops[2] = {a->x, a->out};
    ev__lines_init(&j.lines, 2, ops, a->dim);
    int64_t esz = (int64_t)ev__dsize(a->x->dtype), len = j.lines.len[0];
    j.dense = (j.lines.step[0] == esz || len == 1) && (j.lines.step[1] == esz || len == 1);
    atomic_init(&j.nomem, 0);
    const ev_tensor *x = a->x, *y = a->out;
    int last = x->ndim - 1;
    if (!j.dense && a->dim >= 0 && a->dim != last &&
        x->shape[last] > 1 && x->strides[last] == 1 && y->strides[last] == 1) {
        /* Lines along an outer dim of a tensor dense in its innermost:
         * blocks of neighbouring lines at once. */
        j.inner = x->shape[last];
        j.nblk = (j.inner + SMAX_COLS - 1) / SMAX_COLS;
        int64_t tasks = j.lines.count / j.inner * j.nblk;
        int64_t per = len * (j.inner < SMAX_COLS ? j.inner : SMAX_COLS);
        ev__parallel_for(tasks, (EV__PARALLEL_GRAIN / 8 + per - 1) / per, smax_col_tasks, &j);
        return 0;
    }
    /* Lines of at least EV__PARALLEL_GRAIN / 8 elements a chunk: exp makes
     * each element several times dearer than a copy. */
    int64_t grain = (EV__PARALLEL_GRAIN / 8 + len - 1) / len;
    ev__parallel_for(j.lines.count, grain, smax_lines, &j);
    if (atomic_load(&j.nomem)) {
        return ev_kctx_fail(kc, EV_ENOMEM, "%s: cannot allocate a buffer",
                            a->log ? "log_softmax" : "softmax");
    }
    return 0;
}

static int softmax(const ev_exec *ex, ev_tensor *x, int dim, int log_, ev_tensor **out)
{
    const char *name = log_ ? "log_softmax" : "softmax";
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    int d = -1;
    if (x->ndim == 0) {
        if (dim != 0 && dim != -1) {
            return ev__set_message(EV_EINDEX, "%s: dimension %d is out of range [-1, 0] for a "
                                   "0-d tensor", name, dim);
        }
    } else if ((rc = ev__norm_dim(name, dim, x->ndim, &d))) {
        return rc;
    }
    if (!ev_dtype_is_float(x->dtype)) {
        return ev__set_message(EV_ETYPE, "%s: input dtype %s is not supported (a floating "
                               "dtype is required; cast first)", name,
                               ev_dtype_name(x->dtype));
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, x->ndim, x->shape, &dst))) {
        return rc;
    }
    smax_arg a = {ev_tensor_ref(x), ev_tensor_ref(dst), d, log_};
    rc = ev__submit(ex, name, smax_kernel, &a, sizeof a, smax_drop, &a.x, 1, &a.out, 1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out)
{
    return softmax(ex, x, dim, 0, out);
}

int ev_log_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out)
{
    return softmax(ex, x, dim, 1, out);
}
