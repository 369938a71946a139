/* The float32 functions of src/ops/vmath.h, which the unary and binary
 * kernels use, against libm in double: over a dense sample of all float32
 * bit patterns (every STRIDE-th, offset so that every low bit varies) plus
 * special values, each function's largest error in ulp of the float result
 * must stay within the bound its comment in vmath.h documents, and NaN,
 * infinities and signed zeros must come out as the reference has them.
 * The loops here are compiled as the kernels' are (same pragma, same SIMD
 * clones), so the vectorized code is what is checked. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops-impl.h"
#include "ops/vmath.h"
#include "ops/vmath_avx512.h"
#include "test.h"

typedef void (*arr_fn)(float *o, const float *a, int64_t n);

/* An array loop over a scalar function of vmath.h, built like a kernel. */
#define ELEMENTWISE(name, F)                                    \
    EV__SIMD_CLONES                                             \
    static void name(float *o, const float *a, int64_t n)       \
    {                                                           \
        for (int64_t i = 0; i < n; i++) {                       \
            o[i] = F(a[i]);                                     \
        }                                                       \
    }

EV__SIMD_CLONES static void sqrt_arr(float *o, const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        o[i] = sqrtf(a[i]);
    }
}

/* unary.c's rsqrt: two correctly rounded steps, within 1.5 ulp. */
EV__SIMD_CLONES static void rsqrt_arr(float *o, const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        o[i] = 1.0f / sqrtf(a[i]);
    }
}

EV__SIMD_CLONES static void sin_arr(float *o, const float *a, int64_t n)
{
    sin_f32_n(o, a, n);
}

EV__SIMD_CLONES static void cos_arr(float *o, const float *a, int64_t n)
{
    cos_f32_n(o, a, n);
}

EV__SIMD_CLONES static void tan_arr(float *o, const float *a, int64_t n)
{
    tan_f32_n(o, a, n);
}

ELEMENTWISE(exp_arr, exp_f32)
/* log_f32, the table-free form. */
ELEMENTWISE(log_nt_arr, log_f32)
ELEMENTWISE(expm1_arr, expm1_f32)
/* tanh, exp2 and the table forms of log, log2 and log10: as the kernels run them (AVX-512
 * where the CPU has it), and the portable form alone. */
#define ARRAY_FN(name, FN)                                      \
    EV__SIMD_CLONES                                             \
    static void name(float *o, const float *a, int64_t n)       \
    {                                                           \
        FN(o, a, n);                                            \
    }
ARRAY_FN(tanh_arr, tanh_f32_n)
ARRAY_FN(tanh_portable_arr, tanh_f32_n_portable)
ARRAY_FN(log_arr, log_f32_n)
ARRAY_FN(log_portable_arr, log_f32_n_portable)
ARRAY_FN(log2_arr, log2_f32_n)
ARRAY_FN(log2_portable_arr, log2_f32_n_portable)
ARRAY_FN(log10_arr, log10_f32_n)
ARRAY_FN(log10_portable_arr, log10_f32_n_portable)
ARRAY_FN(exp2_arr, exp2_f32_n)
ARRAY_FN(exp2_portable_arr, exp2_f32_n_portable)
ARRAY_FN(log1p_arr, log1p_f32_n)
ARRAY_FN(log1p_portable_arr, log1p_f32_n_portable)
ELEMENTWISE(sinh_arr, sinh_f32)
ELEMENTWISE(cosh_arr, cosh_f32)
ELEMENTWISE(sigmoid_arr, sigmoid_f32)
ELEMENTWISE(erf_arr, erf_f32)
ELEMENTWISE(gelu_arr, gelu_f32)
ELEMENTWISE(atan_arr, atan_f32)
ELEMENTWISE(asin_arr, asin_f32)
ELEMENTWISE(acos_arr, acos_f32)
ARRAY_FN(asinh_arr, asinh_f32_n)
ARRAY_FN(asinh_portable_arr, asinh_f32_n_portable)
ARRAY_FN(acosh_arr, acosh_f32_n)
ARRAY_FN(acosh_portable_arr, acosh_f32_n_portable)
ARRAY_FN(atanh_arr, atanh_f32_n)
ARRAY_FN(atanh_portable_arr, atanh_f32_n_portable)

typedef void (*arr2_fn)(float *o, const float *a, const float *b, int64_t n);

#define ELEMENTWISE2(name, F)                                                \
    EV__SIMD_CLONES                                                          \
    static void name(float *o, const float *a, const float *b, int64_t n)    \
    {                                                                        \
        for (int64_t i = 0; i < n; i++) {                                    \
            o[i] = F(a[i], b[i]);                                            \
        }                                                                    \
    }

ELEMENTWISE2(atan2_arr, atan2_f32)
ELEMENTWISE2(hypot_arr, hypot_f32)
ELEMENTWISE2(logaddexp_arr, logaddexp_f32)

/* pow as binary.c's kernel runs it (the AVX-512 form on a CPU that has
 * it), and the portable form alone, as the AVX2 and baseline builds run it. */
EV__SIMD_CLONES static void pow_arr(float *o, const float *a, const float *b, int64_t n)
{
    pow_f32_n(o, a, b, n);
}

EV__SIMD_CLONES static void pow_portable_arr(float *o, const float *a, const float *b, int64_t n)
{
    pow_f32_n_portable(o, a, b, n);
}

/* ------------------------------------------------------------ the check */

/* The error of got in ulp of the float32 result against ref (exact but for
 * double rounding), or INFINITY where got's class is wrong: NaN for a
 * number or the reverse, a finite value for an overflow, a zero of the
 * wrong sign. */
static double ulp_error(float got, double ref)
{
    if (isnan(ref) || isnan(got)) {
        return isnan(ref) && isnan(got) ? 0.0 : INFINITY;
    }
    float rf = (float)ref;
    if (isinf(rf)) {
        return got == rf ? 0.0 : INFINITY;
    }
    if (ref == 0.0) {
        return got == 0.0f && !signbit(got) == !signbit(ref) ? 0.0 : INFINITY;
    }
    int e;
    frexp(ref, &e); /* |ref| in [2^(e-1), 2^e): ulp 2^(e-24), at least 2^-149 */
    double ulp = ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
    return fabs((double)got - ref) / ulp;
}

typedef struct worst {
    double err;
    float x, y, got;
    double ref;
} worst;

static void note(worst *w, float x, float y, float got, double ref)
{
    double e = ulp_error(got, ref);
    if (e > w->err || (e != e)) {
        w->err = e;
        w->x = x;
        w->y = y;
        w->got = got;
        w->ref = ref;
    }
}

#define CHUNK 8192

static const float specials[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f,
    FLT_MAX, -FLT_MAX, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f, 0x1p18f, -0x1p18f,
    0x1.fffffep17f, -0x1.fffffep17f, 88.72283f, 88.72284f, -87.33654f, -103.97208f,
    -103.97209f, -104.0f, 89.0f, 128.0f, -149.0f, -150.0f, 3.14159274f, 1.57079637f,
    0.785398185f, 1e-8f, -1e-8f, 0.625f, 9.0f, 10.0f, 0.999999940f, 1.00000012f,
    -0.999999940f, -1.00000012f, 3.92f, 4.0f, 0x1p-126f, 0x1p-127f, 0x1p-140f, 1e30f,
    8388608.0f, 16777216.0f, 0x1p24f, 0x1p63f, 0x1p127f,
    /* expm1's and cosh's overflow edges, expm1's -1 clamp, asinh's and
     * acosh's switch to log + log 2, atan2's scaling of huge pairs. */
    88.7228394f, 88.8f, 89.4159851f, 89.4159927f, -30.0f, -17.0f, 16777218.0f, 0x1p126f,
    0x1.8p126f, -0x1p126f,
    /* tan's reduction where |x| - n C1 and n C2 cancel (near 3 pi/2, 24 pi,
     * ...), its worst case near pi/4 and its switch to libm; sinh's and
     * cosh's clamp. */
    4.71238899f, -75.3982239f, 2238.38477f, 210065.734f, 0x1.8a4c4ep-1f, 89.5f, -89.6f,
    0x1p17f, -0x1.fffffep16f,
};
#define N_SPECIALS ((int)(sizeof specials / sizeof specials[0]))

typedef struct ucase {
    const char *name;
    arr_fn fn;
    double (*ref)(double);
    double bound; /* ulp, as vmath.h documents */
} ucase;

static uint32_t g_stride;

static void check_unary(const ucase *c)
{
    static float in[CHUNK], out[CHUNK];
    worst w = {0.0, 0.0f, 0.0f, 0.0f, 0.0};
    int n = 0;
    for (int i = 0; i < N_SPECIALS; i++) {
        in[n++] = specials[i];
    }
    /* The offset moves the sample off multiples of the stride's factors. */
    for (uint64_t b = 12345 % g_stride;; b += g_stride) {
        int last = b > 0xffffffffu;
        if (!last) {
            uint32_t u = (uint32_t)b;
            memcpy(&in[n++], &u, sizeof u);
        }
        if (n == CHUNK || (last && n > 0)) {
            c->fn(out, in, n);
            for (int i = 0; i < n; i++) {
                note(&w, in[i], 0.0f, out[i], c->ref((double)in[i]));
            }
            n = 0;
        }
        if (last) {
            break;
        }
    }
    fprintf(stderr, "   %-10s max %.4f ulp (bound %.3f) at x = %a: got %a, want %a\n", c->name,
            w.err, c->bound, (double)w.x, (double)w.got, w.ref);
    if (!(w.err <= c->bound)) {
        EV_CHECK_FAIL_("%s: error %g ulp above its bound %g", c->name, w.err, c->bound);
    }
}

/* In place (o == a) and at lengths that are not a multiple of any vector
 * width or of the block: the same bits as the out-of-place run. */
static void check_in_place(const ucase *c)
{
    enum { N = 1000 };
    static float a[N], ref[N], tmp[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)((i % 2 ? -1 : 1) * (i * 0.37 + (i % 7 == 0 ? 3e5 : 0.0)));
    }
    for (int n = 0; n <= N; n += 1 + n / 3) {
        c->fn(ref, a, n);
        memcpy(tmp, a, sizeof a);
        c->fn(tmp, tmp, n);
        for (int i = 0; i < n; i++) {
            uint32_t u, v;
            memcpy(&u, &ref[i], 4);
            memcpy(&v, &tmp[i], 4);
            if (u != v && !(isnan(ref[i]) && isnan(tmp[i]))) {
                EV_CHECK_FAIL_("%s in place at n = %d, i = %d: %a vs %a", c->name, n, i,
                               (double)tmp[i], (double)ref[i]);
            }
        }
        for (int i = n; i < N; i++) {
            CHECK(tmp[i] == a[i] || (isnan(tmp[i]) && isnan(a[i]))); /* nothing past n */
        }
    }
}

/* Pairs: every special with every special, then random bit patterns for
 * both, then (the cases random bits rarely give) moderate positive x with
 * moderate y, and negative x with integer y. */
typedef struct bcase {
    const char *name;
    arr2_fn fn;
    double (*ref)(double, double);
    double bound;
} bcase;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t rand32(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_binary(const bcase *c, long pairs)
{
    static float xa[CHUNK], ya[CHUNK], out[CHUNK];
    worst w = {0.0, 0.0f, 0.0f, 0.0f, 0.0};
    long total = (long)N_SPECIALS * N_SPECIALS + 3 * pairs;
    long done = 0;
    while (done < total) {
        int n = 0;
        for (; n < CHUNK && done < total; n++, done++) {
            long k = done;
            if (k < (long)N_SPECIALS * N_SPECIALS) {
                xa[n] = specials[k / N_SPECIALS];
                ya[n] = specials[k % N_SPECIALS];
                continue;
            }
            k -= (long)N_SPECIALS * N_SPECIALS;
            if (k < pairs) {
                xa[n] = bits_float(rand32());
                ya[n] = bits_float(rand32());
            } else if (k < 2 * pairs) {
                xa[n] = bits_float(0x3c000000u + rand32() % 0x06000000u); /* 2^-7 .. 2^5 */
                uint32_t sign = rand32() & 0x80000000u;
                ya[n] = bits_float(sign | (0x34000000u + rand32() % 0x0e000000u));
            } else {
                xa[n] = -bits_float(0x3c000000u + rand32() % 0x06000000u);
                ya[n] = (float)((int)(rand32() % 81) - 40);
            }
        }
        c->fn(out, xa, ya, n);
        for (int i = 0; i < n; i++) {
            note(&w, xa[i], ya[i], out[i], c->ref((double)xa[i], (double)ya[i]));
        }
    }
    fprintf(stderr, "   %-10s max %.4f ulp (bound %.3f) at (%a, %a): got %a, want %a\n", c->name,
            w.err, c->bound, (double)w.x, (double)w.y, (double)w.got, w.ref);
    if (!(w.err <= c->bound)) {
        EV_CHECK_FAIL_("%s: error %g ulp above its bound %g", c->name, w.err, c->bound);
    }
}

/* NumPy's logaddexp in double: equal arguments give x + log 2. */
static double ref_logaddexp(double x, double y)
{
    if (x == y) {
        return x + 0.69314718055994530942;
    }
    double m = x > y ? x : y, d = x > y ? y - x : x - y;
    return d != d ? d : m + log1p(exp(d));
}

/* pow's bound, both forms (vmath.h). */
#define POW_BOUND 0.6

static const bcase binary_cases[] = {
    {"atan2", atan2_arr, atan2, 1.8},
    {"hypot", hypot_arr, hypot, 0.501},
    {"logaddexp", logaddexp_arr, ref_logaddexp, 0.501},
    {"pow", pow_arr, pow, POW_BOUND},
    {"pow (portable)", pow_portable_arr, pow, POW_BOUND},
};

static void test_binary(void)
{
    long pairs = ev_test_scaled(2000000);
    for (size_t i = 0; i < sizeof binary_cases / sizeof binary_cases[0]; i++) {
        check_binary(&binary_cases[i], pairs);
    }
}

/* pow's test pairs: in round 0 every special with every special, then a
 * mix of random bit patterns, small halves to half-integer powers (exact
 * results, overflow and underflow), x of either sign to integer y, x of
 * either sign in [1, 4) to integer y with |y log2 |x|| up to 800 or past
 * 2^47 (the AVX-512 form's saturating scale, signs by parity), and x in
 * [1/4, 4) to |y| in [16, 128): both sides of the fast form's limits (|y|
 * <= 32, y log2 |x| in [-125, 127)). */
enum { POW_N = 5003 }; /* above N_SPECIALS^2, and no multiple of 16 */

static void fill_pow_pairs(float *xa, float *ya, long round)
{
    for (int i = 0; i < POW_N; i++) {
        int kind = i % 5;
        if (round == 0 && i < N_SPECIALS * N_SPECIALS) {
            xa[i] = specials[i / N_SPECIALS];
            ya[i] = specials[i % N_SPECIALS];
        } else if (kind == 0) {
            xa[i] = bits_float(rand32());
            ya[i] = bits_float(rand32());
        } else if (kind == 1) {
            xa[i] = (float)((int)(rand32() % 17) - 8) * 0.5f;
            ya[i] = (float)((int)(rand32() % 301) - 150) * 0.5f;
        } else if (kind == 2) {
            xa[i] = bits_float((rand32() & 0x80000000u) | (0x3c000000u + rand32() % 0x06000000u));
            ya[i] = (float)((int)(rand32() % 81) - 40);
        } else if (kind == 3) {
            xa[i] = bits_float((rand32() & 0x80000000u) | (0x3f800000u + rand32() % 0x01000000u));
            float y = (float)((int)(rand32() % 801) - 400);
            ya[i] = rand32() % 4 ? y : y * 0x1p40f;
        } else {
            xa[i] = bits_float(0x3e800000u + rand32() % 0x02000000u);
            ya[i] = bits_float((rand32() & 0x80000000u) | (0x41800000u + rand32() % 0x01800000u));
        }
    }
}

/* 1 if got is of libm's class: NaN, the same infinity or signed zero, or a
 * nonzero finite number of the same sign. */
static int same_class(float got, float want)
{
    if (isnan(want) || isnan(got)) {
        return isnan(want) && isnan(got);
    }
    if (!signbit(got) != !signbit(want)) {
        return 0;
    }
    if (want == 0.0f || isinf(want)) {
        return got == want;
    }
    return got != 0.0f && !isinf(got);
}

/* pow's AVX-512 form (when this CPU has one) gives the portable form's
 * bits, out of place, in place over either operand and at every tail
 * length; the C99 cases on the fast path (negative x with integer y, 1^y,
 * x^0, overflow, underflow to subnormals and 0) are libm's; and every pair
 * is within pow's bound. */
static void test_pow_forms(void)
{
    static float xa[POW_N], ya[POW_N], r1[POW_N], r2[POW_N], tmp[POW_N];
    long rounds = ev_test_scaled(100);
    worst w = {0.0, 0.0f, 0.0f, 0.0f, 0.0};
    for (long round = 0; round < rounds; round++) {
        fill_pow_pairs(xa, ya, round);
        pow_portable_arr(r1, xa, ya, POW_N);
        pow_arr(r2, xa, ya, POW_N);
        for (int i = 0; i < POW_N; i++) {
            if (memcmp(&r1[i], &r2[i], 4) != 0 && !(isnan(r1[i]) && isnan(r2[i]))) {
                EV_CHECK_FAIL_("pow(%a, %a): %a (AVX-512 form) vs %a (portable)",
                               (double)xa[i], (double)ya[i], (double)r2[i], (double)r1[i]);
            }
            float want = powf(xa[i], ya[i]);
            if (!same_class(r1[i], want)) {
                EV_CHECK_FAIL_("pow(%a, %a) = %a, libm %a", (double)xa[i], (double)ya[i],
                               (double)r1[i], (double)want);
            }
            note(&w, xa[i], ya[i], r1[i], pow((double)xa[i], (double)ya[i]));
        }
    }
    fprintf(stderr, "   pow's test pairs: max %.4f ulp at (%a, %a)\n", w.err, (double)w.x,
            (double)w.y);
    if (!(w.err <= POW_BOUND)) {
        EV_CHECK_FAIL_("pow(%a, %a) = %a: %g ulp from %a, above the bound %g", (double)w.x,
                       (double)w.y, (double)w.got, w.err, w.ref, POW_BOUND);
    }
    for (int n = 0; n <= POW_N; n += 1 + n / 2) {
        memcpy(tmp, xa, sizeof xa);
        pow_arr(tmp, tmp, ya, n); /* o == a */
        for (int i = 0; i < POW_N; i++) {
            float want = i < n ? r1[i] : xa[i];
            CHECK(memcmp(&tmp[i], &want, 4) == 0 || (isnan(tmp[i]) && isnan(want)));
        }
        memcpy(tmp, ya, sizeof ya);
        pow_arr(tmp, xa, tmp, n); /* o == b */
        for (int i = 0; i < POW_N; i++) {
            float want = i < n ? r1[i] : ya[i];
            CHECK(memcmp(&tmp[i], &want, 4) == 0 || (isnan(tmp[i]) && isnan(want)));
        }
    }
}

static double ref_sqrt(double x)
{
    return sqrt(x);
}

static double ref_rsqrt(double x)
{
    return 1.0 / sqrt(x);
}

static double ref_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static double ref_gelu(double x)
{
    return 0.5 * x * erfc(x * -0.7071067811865476);
}

static const ucase unary_cases[] = {
    {"sqrt", sqrt_arr, ref_sqrt, 0.5},
    {"rsqrt", rsqrt_arr, ref_rsqrt, 1.5},
    {"sin", sin_arr, sin, 0.82},
    {"cos", cos_arr, cos, 0.82},
    {"exp", exp_arr, exp, 1.0},
    {"log", log_arr, log, 0.57},
    {"log (portable)", log_portable_arr, log, 0.57},
    {"log (no table)", log_nt_arr, log, 0.85},
    {"tanh", tanh_arr, tanh, 1.5},
    {"tanh (portable)", tanh_portable_arr, tanh, 1.5},
    {"tan", tan_arr, tan, 1.0},
    {"exp2", exp2_arr, exp2, 1.0},
    {"expm1", expm1_arr, expm1, 1.45},
    {"log2", log2_arr, log2, 1.35},
    {"log2 (portable)", log2_portable_arr, log2, 1.35},
    {"log10", log10_arr, log10, 1.3},
    {"log10 (portable)", log10_portable_arr, log10, 1.3},
    {"log1p", log1p_arr, log1p, 1.3},
    {"log1p (portable)", log1p_portable_arr, log1p, 1.3},
    {"sinh", sinh_arr, sinh, 1.3},
    {"cosh", cosh_arr, cosh, 1.3},
    {"sigmoid", sigmoid_arr, ref_sigmoid, 2.5},
    {"erf", erf_arr, erf, 0.501},
    {"gelu", gelu_arr, ref_gelu, 0.501},
    {"atan", atan_arr, atan, 1.6},
    {"asin", asin_arr, asin, 2.0},
    {"acos", acos_arr, acos, 1.2},
    {"asinh", asinh_arr, asinh, 1.35},
    {"asinh (portable)", asinh_portable_arr, asinh, 1.35},
    {"acosh", acosh_arr, acosh, 1.65},
    {"acosh (portable)", acosh_portable_arr, acosh, 1.65},
    {"atanh", atanh_arr, atanh, 1.1},
    {"atanh (portable)", atanh_portable_arr, atanh, 1.1},
};

/* fn and ref give the same bits (NaNs of any payload alike) over the
 * specials and every 997th float32 bit pattern; the names say which is which
 * in a failure. */
static void same_bits(const char *name, arr_fn fn, const char *fn_name, arr_fn ref,
                      const char *ref_name)
{
    static float in[CHUNK], r1[CHUNK], r2[CHUNK];
    int n = 0;
    for (int i = 0; i < N_SPECIALS; i++) {
        in[n++] = specials[i];
    }
    for (uint64_t b = 0;; b += 997) {
        int last = b > 0xffffffffu;
        if (!last) {
            in[n++] = bits_float((uint32_t)b);
        }
        if (n == CHUNK || (last && n > 0)) {
            fn(r1, in, n);
            ref(r2, in, n);
            for (int i = 0; i < n; i++) {
                if (memcmp(&r1[i], &r2[i], 4) != 0 && !(isnan(r1[i]) && isnan(r2[i]))) {
                    EV_CHECK_FAIL_("%s(%a): %a (%s) vs %a (%s)", name, (double)in[i],
                                   (double)r1[i], fn_name, (double)r2[i], ref_name);
                }
            }
            n = 0;
        }
        if (last) {
            break;
        }
    }
}

/* The AVX-512 forms (where this CPU has them) give their portable forms'
 * bits. */
static void test_unary_forms(void)
{
    static const struct {
        const char *name;
        arr_fn fast, portable;
    } pairs[] = {
        {"tanh", tanh_arr, tanh_portable_arr},
        {"log", log_arr, log_portable_arr},
        {"log2", log2_arr, log2_portable_arr},
        {"log10", log10_arr, log10_portable_arr},
        {"exp2", exp2_arr, exp2_portable_arr},
        {"log1p", log1p_arr, log1p_portable_arr},
        {"asinh", asinh_arr, asinh_portable_arr},
        {"atanh", atanh_arr, atanh_portable_arr},
        {"acosh", acosh_arr, acosh_portable_arr},
    };
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        same_bits(pairs[p].name, pairs[p].fast, "AVX-512 form", pairs[p].portable, "portable");
    }
}

/* The float forms in fused steps, built for each ISA the kernels' clones
 * target and called directly: a fused multiply-add rounds once on every
 * one (the baseline's is libm's fmaf), so the three give the same bits and
 * results do not depend on the CPU. Over every 997th float32 bit pattern
 * and the specials, on the ISAs this CPU has. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ISA_LOOP(name, isa, BODY)                                               \
    __attribute__((target(isa))) static void name(float *o, const float *a,    \
                                                  int64_t n)                    \
    {                                                                           \
        BODY;                                                                   \
    }
#define ISA_LOOPS(name, BODY)                                                   \
    ISA_LOOP(name##_v4, "arch=x86-64-v4", BODY)                                 \
    ISA_LOOP(name##_v3, "arch=x86-64-v3", BODY)                                 \
    ISA_LOOP(name##_v1, "arch=x86-64", BODY)
#define EACH(F)                     \
    for (int64_t i = 0; i < n; i++) { \
        o[i] = F(a[i]);             \
    }
ISA_LOOPS(isa_tan, tan_f32_n(o, a, n))
ISA_LOOPS(isa_sin, sin_f32_n(o, a, n))
ISA_LOOPS(isa_cos, cos_f32_n(o, a, n))
ISA_LOOPS(isa_expm1, EACH(expm1_f32))
ISA_LOOPS(isa_exp2, exp2_f32_n_portable(o, a, n))
ISA_LOOPS(isa_sinh, EACH(sinh_f32))
ISA_LOOPS(isa_cosh, EACH(cosh_f32))
ISA_LOOPS(isa_atan, EACH(atan_f32))
ISA_LOOPS(isa_asin, EACH(asin_f32))
ISA_LOOPS(isa_acos, EACH(acos_f32))
ISA_LOOPS(isa_log, log_f32_n_portable(o, a, n))
ISA_LOOPS(isa_log2, log2_f32_n_portable(o, a, n))
ISA_LOOPS(isa_log10, log10_f32_n_portable(o, a, n))
ISA_LOOPS(isa_log1p, log1p_f32_n_portable(o, a, n))
ISA_LOOPS(isa_asinh, asinh_f32_n_portable(o, a, n))
ISA_LOOPS(isa_acosh, acosh_f32_n_portable(o, a, n))
ISA_LOOPS(isa_atanh, atanh_f32_n_portable(o, a, n))

static void test_isa_forms(void)
{
    static const struct {
        const char *name;
        arr_fn v4, v3, v1;
    } fns[] = {
        {"tan", isa_tan_v4, isa_tan_v3, isa_tan_v1},
        {"sin", isa_sin_v4, isa_sin_v3, isa_sin_v1},
        {"cos", isa_cos_v4, isa_cos_v3, isa_cos_v1},
        {"expm1", isa_expm1_v4, isa_expm1_v3, isa_expm1_v1},
        {"exp2", isa_exp2_v4, isa_exp2_v3, isa_exp2_v1},
        {"sinh", isa_sinh_v4, isa_sinh_v3, isa_sinh_v1},
        {"cosh", isa_cosh_v4, isa_cosh_v3, isa_cosh_v1},
        {"atan", isa_atan_v4, isa_atan_v3, isa_atan_v1},
        {"asin", isa_asin_v4, isa_asin_v3, isa_asin_v1},
        {"acos", isa_acos_v4, isa_acos_v3, isa_acos_v1},
        {"log", isa_log_v4, isa_log_v3, isa_log_v1},
        {"log2", isa_log2_v4, isa_log2_v3, isa_log2_v1},
        {"log10", isa_log10_v4, isa_log10_v3, isa_log10_v1},
        {"log1p", isa_log1p_v4, isa_log1p_v3, isa_log1p_v1},
        {"asinh", isa_asinh_v4, isa_asinh_v3, isa_asinh_v1},
        {"acosh", isa_acosh_v4, isa_acosh_v3, isa_acosh_v1},
        {"atanh", isa_atanh_v4, isa_atanh_v3, isa_atanh_v1},
    };
    __builtin_cpu_init();
    int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("bmi2");
    int v4 = v3 && vm_cpu_avx512();
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        if (v3) {
            same_bits(fns[f].name, fns[f].v3, "x86-64-v3", fns[f].v1, "x86-64");
        }
        if (v4) {
            same_bits(fns[f].name, fns[f].v4, "x86-64-v4", fns[f].v1, "x86-64");
        }
    }
}
#else
static void test_isa_forms(void)
{
}
#endif

static void test_unary(void)
{
    for (size_t i = 0; i < sizeof unary_cases / sizeof unary_cases[0]; i++) {
        check_in_place(&unary_cases[i]);
        check_unary(&unary_cases[i]);
    }
}

int main(void)
{
    /* Every 193rd bit pattern (22 million values per function, 43,000 in
     * each binade); fewer under the sanitizers (EV_STRESS_SCALE). */
    long scaled = ev_test_scaled(1000);
    g_stride = (uint32_t)(193 * 1000 / scaled);
    fprintf(stderr, "every %u-th float32 bit pattern\n", g_stride);
    RUN_TEST(test_unary);
    RUN_TEST(test_unary_forms);
    RUN_TEST(test_isa_forms);
    RUN_TEST(test_binary);
    RUN_TEST(test_pow_forms);
    return 0;
}
