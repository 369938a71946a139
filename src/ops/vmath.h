/* Float32 elementary functions written so that GCC vectorizes the loops
 * that call them (libm's are one call per element): static inline, no
 * branches, special cases chosen by selects. Include after the vectorizing
 * pragma of src/ops/unary.c so that its options apply to them too (the
 * functions need no-trapping-math to blend both sides of a select, and
 * fp-contract=off so that every SIMD clone rounds the same way).
 *
 * Most functions compute in double from the float argument: a short
 * polynomial there (relative error near 1e-12) rounded once to float is
 * correctly rounded but for results within about 1e-4 ulp of a tie, with no
 * cancellation or overflow to guard against in the float range. exp,
 * log, tanh, sigmoid, exp2, expm1, log2, log10, log1p, sinh, cosh, asinh,
 * acosh, atanh, atan, asin and acos, where NumPy's SIMD forms are fastest,
 * work in float (16 lanes on AVX-512, not 8) within 0.57 to 2.5 ulp. Each function's comment
 * gives its error bound in ulp of the float result against the exact value
 * (0.5 is correctly rounded); tests/tensor/test_vmath.c checks every bound
 * over a dense sample of all float32 bit patterns (the float forms' bounds were
 * also checked once over every float; sigmoid's over (-104, 20)). Special
 * values (NaN, infinities, signed zeros, subnormals) give what glibc's
 * float functions give.
 *
 * Where a function writes __builtin_fma (sin, cos, tan, tanh, pow, and the
 * float forms of expm1, sinh, cosh, atan, asin and acos), its polynomials
 * take one fused step per term: up to half the time there, and as exact on
 * every clone, since a fused multiply-add rounds once wherever it runs (a
 * CPU without FMA, on the default clone only, pays a libm call per step). */
#ifndef EV_OPS_VMATH_H
#define EV_OPS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VM_HAVE_AVX2_ROWS 1
#endif

/* Always inlined: into each SIMD clone of the caller (so the clone's ISA
 * applies) and into loops GCC would otherwise leave calling them (a call
 * stops vectorization). */
#if defined(__GNUC__)
#define VM_INLINE static inline __attribute__((always_inline))
#else
#define VM_INLINE static inline
#endif

/* float32 exp that GCC vectorizes (expf is a call per element, which left
 * ours behind NumPy's SIMD exp): exp(x) = 2^k exp(r) with k = round(x /
 * ln 2), r = x - k ln 2 in two parts, exp(r) by Cephes' degree-6
 * polynomial (within 1.0 ulp: float arithmetic, which is twice as fast as
 * the double cores below). 2^k is made from exponent bits in two halves so
 * that overflow gives inf and results below FLT_MIN come out subnormal. NaN
 * passes through the clamps (comparisons with NaN are false). */
VM_INLINE float pow2i_f32(int32_t k) /* k in [-126, 127] */
{
    uint32_t bits = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* r with its sign flipped where x is negative (-0 and NaNs by their sign
 * bit): an odd function's result from its value at |x|. NaN stays NaN. */
VM_INLINE float vm_xor_sign(float r, float x)
{
    uint32_t rb, xb;
    memcpy(&rb, &r, sizeof rb);
    memcpy(&xb, &x, sizeof xb);
    rb ^= xb & 0x80000000u;
    memcpy(&r, &rb, sizeof r);
    return r;
}

/* x = k ln 2 + r (x within [-104, 90], or NaN): returns e^r - 1 = r + r^2
 * P(r) in full relative precision, k in *kf (as a float, NaN for NaN). */
VM_INLINE float vm_expm1_reduced_f32(float xc, float *kf_out)
{
    /* Round to nearest by the 1.5 * 2^23 trick (no call to rintf). */
    float kf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float z = r * r;
    float y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
    *kf_out = kf;
    return y * z + r;
}

VM_INLINE int32_t vm_kf_int(float kf)
{
    /* NaN would make the conversion undefined; its result is NaN anyway. */
    return (int32_t)(kf == kf ? kf : 0.0f);
}

VM_INLINE float exp_f32(float x)
{
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    float kf;
    float y = vm_expm1_reduced_f32(xc, &kf) + 1.0f;
    int32_t k = vm_kf_int(kf);
    int32_t k1 = k >> 1;
    return y * pow2i_f32(k1) * pow2i_f32(k - k1);
}

/* float32 log that vectorizes, as exp_f32 (within 0.85 ulp; the kernels
 * run log_f32_n below, on a table): x = m 2^e, m
 * in [sqrt(1/2), sqrt(2)), log(m) by Cephes' polynomial in m - 1, and the
 * special cases (negative, zero, inf, NaN; subnormals are scaled first)
 * chosen by selects at the end. */
/* The log family's special cases by selects: 0 gives -inf, negative and
 * NaN give NaN, +inf gives inf. */
VM_INLINE float vm_log_specials_f32(float x, float r)
{
    r = x == 0.0f ? -INFINITY : r;
    r = x == INFINITY ? INFINITY : r;
    return x < 0.0f || x != x ? NAN : r;
}

/* x = m 2^e as log_f32 needs it: t = m - 1 with m in [sqrt(1/2), sqrt(2))
 * (x scaled into the normal range first), e in *ef, t^2 in *z; returns
 * Cephes' polynomial, log(1 + t) - t + t^2 / 2. */
VM_INLINE float vm_log_reduce_f32(float x, float *t_out, float *z_out, float *ef_out)
{
    int sub = x < 1.17549435e-38f; /* FLT_MIN: scale subnormals into range */
    float xs = sub ? x * 8388608.0f : x;
    uint32_t bits;
    memcpy(&bits, &xs, sizeof bits);
    int32_t e = (int32_t)((bits >> 23) & 0xff) - 126 - (sub ? 23 : 0);
    bits = (bits & 0x807fffffu) | 0x3f000000u; /* m in [0.5, 1) */
    float m;
    memcpy(&m, &bits, sizeof m);
    int small = m < 0.707106781186547524f;
    *ef_out = (float)(small ? e - 1 : e);
    float t = small ? m + m - 1.0f : m - 1.0f;
    float z = t * t;
    float y = ((((((((7.0376836292e-2f * t - 1.1514610310e-1f) * t + 1.1676998740e-1f) * t -
                    1.2420140846e-1f) * t + 1.4249322787e-1f) * t - 1.6668057665e-1f) * t +
                 2.0000714765e-1f) * t - 2.4999993993e-1f) * t + 3.3333331174e-1f) * t * z;
    *t_out = t;
    *z_out = z;
    return y;
}

VM_INLINE float log_f32(float x)
{
    float t, z, ef;
    float y = vm_log_reduce_f32(x, &t, &z, &ef);
    y += -2.12194440e-4f * ef;
    y += -0.5f * z;
    float r = t + y;
    r += 0.693359375f * ef;
    return vm_log_specials_f32(x, r);
}

/* float32 tanh that vectorizes: Cephes' odd polynomial below |x| = 0.625,
 * 1 - 2 / (exp(2|x|) + 1) above (inf makes it exactly 1), both computed
 * on |x| and one selected, x's sign bit set last (as selects on x's sign
 * and on -0 these took 15% longer). Within 1.5 ulp, in float: a double
 * form (em / (em + 2) with em = e^(2x) - 1) is correctly rounded but 70%
 * slower, which left tanh behind NumPy's. */
VM_INLINE float tanh_f32(float x)
{
    float ax = fabsf(x);
    float z = ax * ax;
    float q = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  -5.70498872745e-3f, z, 2.06390887954e-2f), z, -5.37397155531e-2f), z,
                  1.33314422036e-1f), z, -3.33332819422e-1f);
    float p = __builtin_fmaf(q * z, ax, ax); /* +0 at +-0, NaN for NaN */
    /* tanh is 1 in float from 9.01: clamped at 10, e^(2|x|) needs no
     * overflow guard and 2^k no split (NaN goes to p below). */
    float ac = ax < 10.0f ? ax : 10.0f;
    float xc = ac + ac;
    float kf = __builtin_fmaf(xc, 1.44269504088896341f, 12582912.0f) - 12582912.0f;
    float r = __builtin_fmaf(kf, -0.693359375f, xc);
    r = __builtin_fmaf(kf, 2.12194440e-4f, r);
    float y = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  1.9875691500e-4f, r, 1.3981999507e-3f), r, 8.3334519073e-3f), r,
                  4.1665795894e-2f), r, 1.6666665459e-1f), r, 5.0000001201e-1f);
    /* ac is a number (the clamp turns NaN into 10), so kf converts as it
     * is: vm_kf_int's NaN select made GCC compute the quotient below
     * twice, once per side (15% of tanh's time). */
    float e = (__builtin_fmaf(y, r * r, r) + 1.0f) * pow2i_f32((int32_t)kf);
    float big = 1.0f - 2.0f / (e + 1.0f);
    float t = ax >= 0.625f ? big : p;
    uint32_t tb, xb;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&xb, &x, sizeof xb);
    tb |= xb & 0x80000000u;
    memcpy(&t, &tb, sizeof t);
    return t;
}

/* tanh over n float32 (o may be a), for the CPUs without vmath_avx512.h's
 * form. */
VM_INLINE void tanh_f32_n_portable(float *o, const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        o[i] = tanh_f32(a[i]);
    }
}

/* ------------------------------------------------------------- sin, cos
 *
 * sin, cos and tan (below) in float for |x| < 2^17, infinities and NaN;
 * sin_f32_n, cos_f32_n and tan_f32_n recompute the other finite lanes with
 * libm in double. |x| = n pi/2 + r with |r| <= pi/4, pi/2 = C1 + C2 + C3 in
 * floats and r = rh + rl: |x| - n C1 is exact (fused), rh = that + n C2
 * with n C2 rounded first, so that the rounding error of the sum
 * (Fast2Sum: |x| - n C1 is a multiple of the ulp of n C2) and that of the
 * product are rl by one fused step, plus n C3. r keeps its relative
 * precision next to a multiple of pi/2 (|r| >= 4.2e-9 below 2^17). Returns
 * n's integer bits (its low two bits pick the quadrant). */
VM_INLINE uint32_t vm_trig_reduce(float ax, float *rh, float *rl)
{
    float t = __builtin_fmaf(ax, 0.636619747f, 12582912.0f);
    uint32_t nb;
    memcpy(&nb, &t, sizeof nb);
    float n = t - 12582912.0f;
    float r1 = __builtin_fmaf(n, -1.570796371e+00f, ax);
    float ph = n * 4.371138829e-08f;
    *rh = r1 + ph;
    float lo = __builtin_fmaf(n, 4.371138829e-08f, r1 - *rh);
    *rl = __builtin_fmaf(n, 1.715124510e-15f, lo);
    return nb;
}

/* The lanes the float forms leave to libm: finite |x| >= 2^17 (whose bits
 * less the sign are VM_TRIG_LIBM_BITS or more), by integer steps on the
 * bits (cheaper than two float comparisons). Above, n's rounding (x 2/pi
 * in float) leaves |r| up to pi/4 + 0.013, where tan's odd branch's
 * results fall below 1 and its bound no longer held. */
#define VM_TRIG_LIBM_BITS 0x48000000u
VM_INLINE int vm_trig_needs_libm(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return (b & 0x7fffffffu) - VM_TRIG_LIBM_BITS < 0x7f800000u - VM_TRIG_LIBM_BITS;
}

/* sin |x| (quad 0) or cos |x| (quad 1) from the reduction: sin r = rh +
 * (rh z S(z) + rl cos r) and cos r = w + ((1 - w) - z/2 + z^2 C(z) - rh rl)
 * with z = rh^2 and w = 1 - z/2 rounded (its rounding error joins the
 * tail), cos r taken as w in rl's term (rl is below an ulp of rh); S and C
 * degree-2 fits on [-pi/4, pi/4] (relative errors 8e-9 and 2e-10 with the
 * coefficients rounded). Both are computed and one kept per lane, so that
 * the loop vectorizes without branches. Within 0.82 ulp (0.808 for sin,
 * 0.817 for cos, over every float), in float at twice the speed of the
 * double form they replaced (0.501 ulp). */
VM_INLINE float vm_sincos_f32(float x, uint32_t quad)
{
    float rh, rl;
    uint32_t j = vm_trig_reduce(fabsf(x), &rh, &rl) + quad;
    float z = rh * rh;
    float hz = 0.5f * z;
    float w = 1.0f - hz;
    float s = __builtin_fmaf(__builtin_fmaf(-0x1.9943c8p-13f, z, 0x1.11073ap-7f), z,
                             -0x1.555546p-3f);
    s = rh + __builtin_fmaf(s * z, rh, rl * w);
    float c = __builtin_fmaf(__builtin_fmaf(0x1.99eb7ap-16f, z, -0x1.6c0c34p-10f), z,
                             0x1.55554ap-5f);
    float tail = __builtin_fmaf(-rh, rl, (1.0f - w) - hz);
    c = w + __builtin_fmaf(c * z, z, tail);
    float res = (j & 1u) ? c : s;
    return (j & 2u) ? -res : res;
}

VM_INLINE float sin_f32_bounded(float x)
{
    return vm_xor_sign(vm_sincos_f32(x, 0), x); /* sin -x = -sin x; keeps -0 */
}

VM_INLINE float cos_f32_bounded(float x)
{
    return vm_sincos_f32(x, 1); /* cos |x| = sin(|x| + pi/2) */
}

/* o[i] = f(a[i]) over n elements by blocks: each block goes through the
 * vectorized bounded form while keeping its largest |x| (one vector max a
 * step, cheaper than OR-ing vm_trig_needs_libm per lane); only a block that
 * reaches 2^17 (or holds inf or NaN) takes the slow pass, which recomputes
 * vm_trig_needs_libm's lanes by libm in double. In place (o == a), the
 * block is copied first, so that the slow pass still reads the input and
 * the loop vectorizes without alias checks (restrict: the two arrays are
 * distinct otherwise). */
#define VM_BLOCK 256
#define VM_TRIG_ARRAY(name, FAST, SLOW)                                        \
    VM_INLINE void name##_block(float *restrict o, const float *restrict a,   \
                                int m)                                         \
    {                                                                          \
        uint32_t top = 0;                                                      \
        for (int j = 0; j < m; j++) {                                          \
            uint32_t b;                                                        \
            memcpy(&b, &a[j], sizeof b);                                       \
            b &= 0x7fffffffu;                                                  \
            top = b > top ? b : top;                                           \
            o[j] = FAST(a[j]);                                                 \
        }                                                                      \
        if (top >= VM_TRIG_LIBM_BITS) {                                        \
            for (int j = 0; j < m; j++) {                                      \
                if (vm_trig_needs_libm(a[j])) {                                \
                    o[j] = SLOW(a[j]);                                         \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    VM_INLINE void name(float *o, const float *a, int64_t n)                   \
    {                                                                          \
        float buf[VM_BLOCK];                                                   \
        for (int64_t i0 = 0; i0 < n; i0 += VM_BLOCK) {                         \
            int m = n - i0 < VM_BLOCK ? (int)(n - i0) : VM_BLOCK;              \
            const float *src = a + i0;                                         \
            if (o == a) {                                                      \
                memcpy(buf, src, (size_t)m * sizeof(float));                   \
                src = buf;                                                     \
            }                                                                  \
            name##_block(o + i0, src, m);                                      \
        }                                                                      \
    }

VM_INLINE float vm_sin_libm(float x)
{
    return (float)sin((double)x);
}

VM_INLINE float vm_cos_libm(float x)
{
    return (float)cos((double)x);
}

/* sin and cos of every float32 (0.82 ulp; libm's, 0.501, for |x| >= 2^17). */
VM_TRIG_ARRAY(sin_f32_n, sin_f32_bounded, vm_sin_libm)
VM_TRIG_ARRAY(cos_f32_n, cos_f32_bounded, vm_cos_libm)

/* ------------------------------------------------- double-internal cores
 *
 * The helpers below take and return double; the float functions after them
 * convert once at each end. */

/* rint(t) for |t| < 2^51 and the low bits of the integer (in *lo), by the
 * 1.5 * 2^52 trick: no conversion, so NaN and inf need no guard. */
VM_INLINE double vm_rint_bits(double t, uint64_t *lo)
{
    double big = t + 0x1.8p52;
    memcpy(lo, &big, sizeof *lo);
    return big - 0x1.8p52;
}

/* 2^k from the integer bits kb of k + 1.5 * 2^52 (vm_rint_bits), for k in
 * [-1022, 1023]: built from exponent bits, no conversion. */
VM_INLINE double vm_pow2_from_bits(uint64_t kb)
{
    uint64_t b = (kb - 0x4338000000000000ull + 1023u) << 52;
    double f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* e^r - 1 for |r| <= 0.35 by Taylor to r^11 (relative error 2e-14). */
VM_INLINE double vm_expm1_small(double r)
{
    double p = ((((((((2.505210838544172e-08 * r + 2.755731922398589e-07) * r +
                       2.7557319223985893e-06) * r + 2.48015873015873e-05) * r +
                     0.0001984126984126984) * r + 0.001388888888888889) * r +
                   0.008333333333333333) * r + 0.041666666666666664) * r +
                 0.16666666666666666) * r + 0.5;
    return r + r * (r * p);
}

/* e^t = s (1 + q) with s = 2^k, k = rint(t / ln 2), q = e^r - 1 and r = t -
 * k ln 2 (ln 2 in two parts, the first exact in k ln2_hi); |t| <= 700, NaN
 * gives NaN in q. */
VM_INLINE void vm_exp_split(double t, double *s, double *q)
{
    uint64_t kb;
    double k = vm_rint_bits(t * 1.4426950408889634, &kb);
    double r = t - k * 0x1.62e42fee00000p-1;
    r = r - k * 1.90821492927058770002e-10;
    *s = vm_pow2_from_bits(kb);
    *q = vm_expm1_small(r);
}

VM_INLINE double vm_exp_d(double t) /* |t| <= 700 */
{
    double s, q;
    vm_exp_split(t, &s, &q);
    return s + s * q;
}

/* e^t - 1 with full relative precision near 0: s q + (s - 1). */
VM_INLINE double vm_expm1_d(double t) /* |t| <= 700 */
{
    double s, q;
    vm_exp_split(t, &s, &q);
    return s * q + (s - 1.0);
}

/* log u for a positive finite normal double: u = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m - 1) / (m + 1) by its
 * series to s^13 (|s| <= 0.172: relative error 2e-12), e ln 2 in two
 * parts. */
VM_INLINE double vm_log_reduce(double u, double *e_out)
{
    uint64_t b;
    memcpy(&b, &u, sizeof b);
    uint64_t mb = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    uint64_t eb = (b >> 52) | 0x4330000000000000ull; /* 2^52 + the exponent field */
    double m, e;
    memcpy(&m, &mb, sizeof m);
    memcpy(&e, &eb, sizeof e);
    e = (e - 0x1p52) - 1023.0;
    int big = m > 1.4142135623730951;
    m = big ? m * 0.5 : m;
    *e_out = big ? e + 1.0 : e;
    double f = m - 1.0;
    return f / (2.0 + f);
}

VM_INLINE double vm_log_d(double u)
{
    double e;
    double sv = vm_log_reduce(u, &e);
    double z = sv * sv;
    double p = ((((0.07692307692307693 * z + 0.09090909090909091) * z +
                  0.1111111111111111) * z + 0.14285714285714285) * z + 0.2) * z +
               0.3333333333333333;
    double logm = 2.0 * sv + 2.0 * sv * (z * p);
    return e * 0x1.62e42fee00000p-1 + (logm + e * 1.90821492927058770002e-10);
}

/* log(1 + t) for t > -1 finite: u = 1 + t rounded, and the rounding's
 * first-order correction (t - (u - 1)) / u. */
VM_INLINE double vm_log1p_d(double t)
{
    double u = 1.0 + t;
    double c = (t - (u - 1.0)) / u;
    return vm_log_d(u) + c;
}

/* atan t for t >= 0 (inf and NaN included): t's nearest of tan(j pi/8), j =
 * 0..4 (tan(pi/2) by -1/t), moves the argument to |v| <= tan(pi/16) =
 * 0.199, where the series to v^17 has relative error 4e-13. */
VM_INLINE double vm_atan_d(double t)
{
    double j = t >= 0.198912367379658 ? 1.0 : 0.0;
    j += t >= 0.6681786379192989 ? 1.0 : 0.0;
    j += t >= 1.496605762665489 ? 1.0 : 0.0;
    j += t >= 5.027339492125848 ? 1.0 : 0.0;
    double c = j == 1.0 ? 0.41421356237309503 : j == 2.0 ? 1.0 : 2.414213562373095;
    c = j == 0.0 ? 0.0 : c;
    double num = j == 4.0 ? -1.0 : t - c;
    double den = j == 4.0 ? t : 1.0 + t * c;
    double v = num / den;
    double z = v * v;
    double p = (((((((0.058823529411764705 * z - 0.06666666666666667) * z +
                     0.07692307692307693) * z - 0.09090909090909091) * z +
                   0.1111111111111111) * z - 0.14285714285714285) * z + 0.2) * z -
                0.3333333333333333);
    return j * 0.39269908169872414 + (v + v * (z * p));
}

/* erfc z = e^(-z^2) g(z) for z in [0.5, 12], g = erfcx by a degree-15 fit in
 * u = (z - 2) / (z + 2) (relative error 8e-13). */
VM_INLINE double vm_erfc_big(double z)
{
    double u = (z - 2.0) / (z + 2.0);
    double g = ((((((((((((((-1.6345646288463508e-07 * u + 3.1086656068871475e-06) * u +
                             2.76689945603934e-06) * u - 1.3607847794534113e-05) * u -
                           2.826296720238485e-05) * u + 2.742520912311855e-05) * u +
                         0.00017454577524125364) * u + 4.357145242255573e-05) * u -
                       0.0009820045771432894) * u - 0.0008471446925940909) * u +
                     0.0069974638851663835) * u + 0.003732892475512644) * u -
                   0.0789785810900978) * u + 0.2416581942409449) * u -
                 0.4271858474132101) * u + 0.2553956763105121;
    return vm_exp_d(-(z * z)) * g;
}

/* erf z for |z| <= 0.5 by its series to z^21 (relative error 1e-14). */
VM_INLINE double vm_erf_small(double z)
{
    double w = z * z;
    double p = (((((((((1.4807192815879218e-08 * w - 1.6365844691234924e-07) * w +
                       1.6462114365889248e-06) * w - 1.492565035840625e-05) * w +
                     0.00012055332981789664) * w - 0.0008548327023450853) * w +
                   0.005223977625442188) * w - 0.026866170645131252) * w +
                 0.11283791670955126) * w - 0.37612638903183754) * w;
    return z * 1.1283791670955126 + z * p;
}

/* erfc z for any z (NaN gives NaN): |z| < 0.5 by 1 - erf, else e^(-z^2) g,
 * reflected (2 - erfc |z|) for negative z. */
VM_INLINE double vm_erfc_d(double z)
{
    double a = z < 0.0 ? -z : z;
    double ac = a > 12.0 ? 12.0 : a;
    ac = ac < 0.5 ? 0.5 : ac; /* the unused side stays in g's range */
    double big = vm_erfc_big(ac);
    big = a > 11.0 ? 0.0 : big; /* below 1e-54: exactly 0, so -inf x 0 is NaN */
    big = z < 0.0 ? 2.0 - big : big;
    double small = 1.0 - vm_erf_small(z);
    return a < 0.5 ? small : big;
}

/* --------------------------------------------- float32 from the cores */

/* e^x (about 1 ulp) is exp_f32 above, in float; these go through double
 * and are within 0.501 ulp unless said otherwise. */

/* 2^x in float (within 1.0 ulp: 0.95 over every float): k = rint(x), r =
 * x - k exact in [-1/2, 1/2], 2^r = 1 + r P(r) with P a degree-5 fit
 * (relative error 2e-9) in fused steps, 2^k from exponent bits in two
 * halves as exp_f32 (inf above 128, subnormals below -126): p 2^k1 is
 * exact, so the one rounding is p 2^k's, as AVX-512's scalef gives it.
 * The AVX-512 form takes 37% of the time of the degree-7 unfused form
 * (1.07 ulp) it replaced, which left exp2 behind NumPy's (bench/
 * vmath_kernels.c: 0.107 against 0.288 ns an element at 1M). */
VM_INLINE float exp2_f32(float x)
{
    float xc = x > 128.0f ? 128.0f : x; /* NaN passes the clamps */
    xc = xc < -151.0f ? -151.0f : xc;
    float kf = (xc + 12582912.0f) - 12582912.0f;
    float r = xc - kf;
    float p = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  1.5353361959569156e-04f, r, 1.3398875016719103e-03f), r,
                  9.6184369176626205e-03f), r, 5.5503323674201965e-02f), r,
                  2.4022647738456726e-01f), r, 6.9314718246459961e-01f);
    p = __builtin_fmaf(r, p, 1.0f);
    int32_t k = (int32_t)(kf == kf ? kf : 0.0f);
    int32_t k1 = k >> 1;
    return p * pow2i_f32(k1) * pow2i_f32(k - k1);
}

VM_INLINE void exp2_f32_n_portable(float *o, const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        o[i] = exp2_f32(a[i]);
    }
}

/* x = k ln 2 + r with |r| <= ln(2) / 2 by fused steps (x within [-104,
 * 128], or NaN): returns r, and in *kb the bits of k + 1.5 * 2^23, whose
 * low bits are k's (for 2^k from exponent bits without a conversion). */
VM_INLINE float vm_exp_reduce_fma_f32(float x, uint32_t *kb)
{
    float t = __builtin_fmaf(x, 1.44269504088896341f, 12582912.0f);
    memcpy(kb, &t, sizeof *kb);
    float kf = t - 12582912.0f;
    float r = __builtin_fmaf(kf, -0.693359375f, x);
    return __builtin_fmaf(kf, 2.12194440e-4f, r);
}

/* 2^(k + d) from the bits kb of vm_exp_reduce_fma_f32, for k + d in [-126,
 * 127] (the shift drops 1.5 * 2^23's bits). */
VM_INLINE float vm_pow2_kb_f32(uint32_t kb, int32_t d)
{
    uint32_t b = (kb << 23) + ((uint32_t)(127 + d) << 23);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* expm1 in float: e^x - 1 = 2 (s q + (s - 1/2)) with s = 2^(k-1) exact
 * and q = e^r - 1 = r + r^2 P(r) by Cephes' polynomial (the difference
 * cancels little: |r| <= ln(2) / 2), one fused step per term. 2^(k-1) and
 * the doubling (exact) let k reach 128 (x up to 88.8, which overflows to
 * inf) without forming 2^128; below -30 the result is -1; below 2^-60 it
 * is x (which keeps -0 and the subnormals the halving would round). Within
 * 1.45 ulp (1.443 over every float; where k = 1 and r < 0 the sum
 * cancels by 2.4), in 57% of the time of the unfused form (1.6 ulp). */
VM_INLINE float expm1_f32(float x)
{
    float xc = x > 88.8f ? 88.8f : x; /* k <= 128: overflows to inf */
    xc = xc < -30.0f ? -30.0f : xc;
    uint32_t kb;
    float r = vm_exp_reduce_fma_f32(xc, &kb);
    float p = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  1.9875691500e-4f, r, 1.3981999507e-3f), r, 8.3334519073e-3f), r,
                  4.1665795894e-2f), r, 1.6666665459e-1f), r, 5.0000001201e-1f);
    float q = __builtin_fmaf(p, r * r, r);
    float s = vm_pow2_kb_f32(kb, -1);
    float y = __builtin_fmaf(s, q, s - 0.5f);
    return fabsf(x) < 0x1p-60f ? x : y + y;
}

/* log2 and log10 in float by a table, so that the polynomial is short: x =
 * 2^e m with m in [0.75, 1.5) (exact; AVX-512's getexp and getmant give
 * the same), m's top mantissa bits pick one of 16 subintervals and its c
 * (c = 1 for the three in [0.9375, 1.0625), so that r is exact there and
 * nothing cancels), r = (m - c) / c as (m - c) invc (m - c exact by
 * Sterbenz; |r| <= 1/16), log(m) = log c + r Q(r). log c = thi + tlo
 * with thi a multiple of 2^-16, so that S = e log(2)_hi + thi is exact,
 * and the sum is S + (small terms). Within 1.35 ulp (log2: 1.342 over
 * every float, next to 1.0625 where S and the small terms cancel by 1.5)
 * and 1.3 (log10: 1.260 over every float), in AVX-512 at 40% of the cost
 * of the degree-9 form this replaced (1.0 and 0.9 ulp). log2
 * is exact at powers of 2. Special values (0, negative, inf, NaN) by
 * vm_log_specials_f32. vmath_avx512.h reads the tables by permutes; the
 * portable form reads them in a loop of their own (GCC 12 does not
 * vectorize table reads: its tuning turns gathers off). */
typedef struct vm_logt_row {
    float c, invc, thi, tlo;
} vm_logt_row;

static const vm_logt_row vm_log2t_tab[16] = {
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.093750000e+00f, 9.142857194e-01f, 0x1.08c8p-3f, -4.702781553e-06f},
    {1.156250000e+00f, 8.648648858e-01f, 0x1.acf8p-3f, -4.031831850e-06f},
    {1.218750000e+00f, 8.205128312e-01f, 0x1.244p-2f, 1.828237259e-06f},
    {1.281250000e+00f, 7.804877758e-01f, 0x1.6e24p-2f, -7.199483662e-06f},
    {1.343750000e+00f, 7.441860437e-01f, 0x1.b48p-2f, -4.776547939e-06f},
    {1.406250000e+00f, 7.111111283e-01f, 0x1.f7a8p-2f, 1.289689067e-06f},
    {1.468750000e+00f, 6.808510423e-01f, 0x1.1bf4p-1f, -7.095587989e-06f},
    {7.656250000e-01f, 1.306122422e+00f, -0x1.8a88p-2f, -5.732056707e-06f},
    {7.968750000e-01f, 1.254902005e+00f, -0x1.4f7p-2f, 1.025565211e-06f},
    {8.281250000e-01f, 1.207547188e+00f, -0x1.169cp-2f, -7.766336552e-08f},
    {8.593750000e-01f, 1.163636327e+00f, -0x1.bfc8p-3f, 2.902001143e-06f},
    {8.906250000e-01f, 1.122807026e+00f, -0x1.564p-3f, 4.271977105e-06f},
    {9.218750000e-01f, 1.084745765e+00f, -0x1.e0bp-4f, -1.603958481e-06f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
};

static const vm_logt_row vm_log10t_tab[16] = {
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.093750000e+00f, 9.142857194e-01f, 0x1.3ee0p-5f, -7.104868018e-06f},
    {1.156250000e+00f, 8.648648858e-01f, 0x1.0240p-4f, 2.429340839e-06f},
    {1.218750000e+00f, 8.205128312e-01f, 0x1.5ff0p-4f, -7.612504305e-06f},
    {1.281250000e+00f, 7.804877758e-01f, 0x1.b8e0p-4f, -1.619647037e-06f},
    {1.343750000e+00f, 7.441860437e-01f, 0x1.06c8p-3f, 7.320033092e-06f},
    {1.406250000e+00f, 7.111111283e-01f, 0x1.2f38p-3f, 6.505182228e-06f},
    {1.468750000e+00f, 6.808510423e-01f, 0x1.55e8p-3f, 1.468482992e-06f},
    {7.656250000e-01f, 1.306122422e+00f, -0x1.db10p-4f, -1.838291269e-06f},
    {7.968750000e-01f, 1.254902005e+00f, -0x1.93e0p-4f, -7.502963854e-06f},
    {8.281250000e-01f, 1.207547188e+00f, -0x1.4f80p-4f, 5.075304216e-06f},
    {8.593750000e-01f, 1.163636327e+00f, -0x1.0d90p-4f, -6.127263077e-06f},
    {8.906250000e-01f, 1.122807026e+00f, -0x1.9c20p-5f, 3.109227691e-06f},
    {9.218750000e-01f, 1.084745765e+00f, -0x1.2160p-5f, -3.865662165e-06f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
};

/* Q = a0 + r Q1(r) for log2 and for log10, a0 in two parts, the first of
 * 5 bits: r has at most 19 (|r| < 1/16 and a multiple of 2^-24 next to
 * 1), so that r a0_hi is exact there and the result is one rounding of
 * r a0_hi + small terms. log10(2) = 0x1.344p-2 + 4.6050391e-6: the first
 * part times e is exact. Q1 and r a0_lo's term in fused steps (half the
 * steps of separate ones: log2 and log10 took 15% less time). */
#define VM_LOG2T_Q1(r)                                                                     \
    __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(                           \
                       -2.414033860e-01f, (r), 2.896698117e-01f), (r), -3.606727123e-01f), \
                   (r), 4.808969796e-01f),                                                 \
    (r), -7.213475108e-01f)
#define VM_LOG2T_A0_HI 1.5f
#define VM_LOG2T_A0_LO -5.730495974e-02f
#define VM_LOG10T_Q1(r)                                                                    \
    __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(                           \
                       -7.266966254e-02f, (r), 8.719930798e-02f), (r), -1.085733101e-01f), \
                   (r), 1.447644085e-01f),                                                 \
    (r), -2.171472460e-01f)
#define VM_LOG10T_A0_HI 0.4375f
#define VM_LOG10T_A0_LO -3.205518005e-03f
#define VM_LOG10_2_HI 0x1.344p-2f
#define VM_LOG10_2_LO 4.6050391e-06f

/* x = 2^e m as above (e in *ef); returns the subinterval. Garbage, but no
 * undefined behaviour, for x <= 0, inf and NaN. */
VM_INLINE uint32_t vm_logt_reduce(float x, float *m, float *ef)
{
    int sub = x < 1.17549435e-38f; /* FLT_MIN: scale subnormals into range */
    float xs = sub ? x * 8388608.0f : x;
    uint32_t b;
    memcpy(&b, &xs, sizeof b);
    uint32_t tmp = b - 0x3f400000u; /* 0.75 */
    uint32_t top = tmp & 0xff800000u;
    uint32_t mb = b - top;
    memcpy(m, &mb, sizeof *m);
    *ef = (float)(((int32_t)top >> 23) - (sub ? 23 : 0));
    return (mb >> 19) & 15u;
}

/* The rows of tab's subintervals ia[0..m) (m <= VM_BLOCK), a column each:
 * c[j] = tab[ia[j]].c, and so on. With AVX2 a 16-row column is two
 * registers, read by two permutes and a blend; GCC copies the rows one at a
 * time or gathers them (1.2 ns an element on Zen 4). The same values either
 * way, so every form keeps its bits. */
/* The columns of a 16-row table: cols[0] its c, cols[1] invc, and so on. */
VM_INLINE void vm_logt_columns(const vm_logt_row *tab, float cols[4][16])
{
    for (int r = 0; r < 16; r++) {
        cols[0][r] = tab[r].c;
        cols[1][r] = tab[r].invc;
        cols[2][r] = tab[r].thi;
        cols[3][r] = tab[r].tlo;
    }
}

#ifdef VM_HAVE_AVX2_ROWS
__attribute__((target("avx2"))) static void vm_logt_rows_avx2(const vm_logt_row *tab,
                                                              const uint32_t *ia, int m,
                                                              float *const *out)
{
    float cols[4][16];
    vm_logt_columns(tab, cols);
    __m256 lo[4], hi[4];
    for (int f = 0; f < 4; f++) {
        lo[f] = _mm256_loadu_ps(cols[f]);
        hi[f] = _mm256_loadu_ps(cols[f] + 8);
    }
    int j = 0;
    for (; j + 8 <= m; j += 8) {
        __m256i idx = _mm256_loadu_si256((const __m256i *)(const void *)(ia + j));
        /* Rows 8..15 are in hi: bit 3 of the index, moved to the sign. */
        __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
        for (int f = 0; f < 4; f++) {
            __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo[f], idx),
                                        _mm256_permutevar8x32_ps(hi[f], idx), upper);
            _mm256_storeu_ps(out[f] + j, v);
        }
    }
    for (; j < m; j++) {
        for (int f = 0; f < 4; f++) {
            out[f][j] = cols[f][ia[j]];
        }
    }
}
#endif

VM_INLINE void vm_logt_rows(const vm_logt_row *tab, const uint32_t *ia, int m, float *c,
                            float *invc, float *thi, float *tlo)
{
#ifdef VM_HAVE_AVX2_ROWS
    if (__builtin_cpu_supports("avx2")) {
        float *const out[4] = {c, invc, thi, tlo};
        vm_logt_rows_avx2(tab, ia, m, out);
        return;
    }
#endif
    for (int j = 0; j < m; j++) {
        const vm_logt_row *t = &tab[ia[j]];
        c[j] = t->c;
        invc[j] = t->invc;
        thi[j] = t->thi;
        tlo[j] = t->tlo;
    }
}

VM_INLINE float vm_log2t_finish(float x, float m, float ef, const vm_logt_row *t)
{
    float r = (m - t->c) * t->invc;
    float p = __builtin_fmaf(r, VM_LOG2T_A0_LO, r * (r * VM_LOG2T_Q1(r)));
    float lo = t->tlo + (r * VM_LOG2T_A0_HI + p);
    return vm_log_specials_f32(x, (ef + t->thi) + lo);
}

VM_INLINE float vm_log10t_finish(float x, float m, float ef, const vm_logt_row *t)
{
    float r = (m - t->c) * t->invc;
    float p = __builtin_fmaf(r, VM_LOG10T_A0_LO, r * (r * VM_LOG10T_Q1(r)));
    float lo = (t->tlo + ef * VM_LOG10_2_LO) + (r * VM_LOG10T_A0_HI + p);
    return vm_log_specials_f32(x, (ef * VM_LOG10_2_HI + t->thi) + lo);
}

/* o[i] = log2 or log10 of a[i] by blocks (o may be a): the reduction, the
 * table rows of the elements (vm_logt_rows), then the rest. */
#define VM_LOGT_ARRAY(name, TAB, FINISH)                                       \
    VM_INLINE void name(float *o, const float *a, int64_t n)                   \
    {                                                                          \
        float xa[VM_BLOCK], ma[VM_BLOCK], ea[VM_BLOCK];                        \
        float ca[VM_BLOCK], inva[VM_BLOCK], tha[VM_BLOCK], tla[VM_BLOCK];      \
        uint32_t ia[VM_BLOCK];                                                 \
        for (int64_t i0 = 0; i0 < n; i0 += VM_BLOCK) {                         \
            int m = n - i0 < VM_BLOCK ? (int)(n - i0) : VM_BLOCK;              \
            memcpy(xa, a + i0, (size_t)m * sizeof(float));                    \
            for (int j = 0; j < m; j++) {                                      \
                ia[j] = vm_logt_reduce(xa[j], &ma[j], &ea[j]);                 \
            }                                                                  \
            vm_logt_rows(TAB, ia, m, ca, inva, tha, tla);                      \
            float *ob = o + i0;                                                \
            for (int j = 0; j < m; j++) {                                      \
                vm_logt_row t = {ca[j], inva[j], tha[j], tla[j]};              \
                ob[j] = FINISH(xa[j], ma[j], ea[j], &t);                       \
            }                                                                  \
        }                                                                      \
    }
VM_LOGT_ARRAY(log2_f32_n_portable, vm_log2t_tab, vm_log2t_finish)
VM_LOGT_ARRAY(log10_f32_n_portable, vm_log10t_tab, vm_log10t_finish)

/* log1p by the table of log2 and log10 (natural logarithms of the same c):
 * u = 1 + x rounded and log1p(x) = log(u) + (x - (u - 1)) / u, the
 * rounding's first-order correction, added to the small terms; where |x| <
 * 1/16 (u in c = 1's subintervals), r = x itself (exact) and the
 * correction is not needed. Q1 of degree 4 (Q's relative error 4e-10),
 * a0 = 1. Within 1.3 ulp (1.278 over every float), in
 * AVX-512 at 45% of the cost of the table-free form (0.9 ulp) it replaced.
 * asinh, acosh and atanh go through this core too (vm_log1pt_core, below):
 * within 1.35 ulp (1.306 over every float; 1.251 before), 1.65 (1.607;
 * 1.817 before) and 1.1 (0.962), at 75%, about 80% and 65% of their cost
 * through the table-free core; with Q1 and atanh's series in fused steps
 * and the blends for rare lanes (|x| > 2^24, |x| >= 1 in atanh) skipped
 * where no lane has one, the AVX-512 forms take a quarter to a third less
 * again (bench/vmath_kernels.c at 1M: asinh 0.54 against 0.79 ns an
 * element, acosh 0.49 against 0.71, atanh 0.49 against 0.66). */
static const vm_logt_row vm_lnt_tab[16] = {
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.093750000e+00f, 9.142857194e-01f, 0x1.6f1p-4f, -2.709474302e-06f},
    {1.156250000e+00f, 8.648648858e-01f, 0x1.2958p-3f, -5.368085112e-06f},
    {1.218750000e+00f, 8.205128312e-01f, 0x1.9528p-3f, -4.456865554e-06f},
    {1.281250000e+00f, 7.804877758e-01f, 0x1.fb9p-3f, 2.911951469e-06f},
    {1.343750000e+00f, 7.441860437e-01f, 0x1.2e9p-2f, -6.978512374e-06f},
    {1.406250000e+00f, 7.111111283e-01f, 0x1.5d1cp-2f, -5.370528697e-07f},
    {1.468750000e+00f, 6.808510423e-01f, 0x1.89a4p-2f, -2.973941264e-06f},
    {7.656250000e-01f, 1.306122422e+00f, -0x1.1178p-2f, -3.459077107e-06f},
    {7.968750000e-01f, 1.254902005e+00f, -0x1.d10p-3f, -6.669385129e-06f},
    {8.281250000e-01f, 1.207547188e+00f, -0x1.824p-3f, 7.463004749e-06f},
    {8.593750000e-01f, 1.163636327e+00f, -0x1.366p-3f, 3.948415497e-07f},
    {8.906250000e-01f, 1.122807026e+00f, -0x1.da7p-4f, -2.347751661e-06f},
    {9.218750000e-01f, 1.084745765e+00f, -0x1.4d3p-4f, -1.034961770e-06f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
};
/* In fused steps: unfused, log1p's chain of dependent steps was the
 * longest part of asinh's, acosh's and atanh's (a tenth of their time). */
#define VM_LNT_Q1(r)                                                                   \
    __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(-1.673280746e-01f, (r), \
                                                                2.007838190e-01f),     \
                                                 (r), -2.499992847e-01f),              \
                                  (r), 3.333323896e-01f),                              \
                   (r), -5.000000000e-01f)
#define VM_LN2_HI 0x1.62ep-1f /* times e: exact */
#define VM_LN2_LO 3.194618330e-05f

/* log on a table of its own (log_f32 above, 0.85 ulp, is the table-free
 * form): x = 2^e m as log2's reduction gives
 * it; invc is 1/c rounded up for m > 1 and down for m < 1, c the
 * subinterval's end nearest 1 (invc = 1 where m is within 1/16 of 1), and
 * thi + tlo = -log(invc), so that r = m invc - 1 has the sign of thi and
 * log x = S + r + log1p's tail never cancels (S = e ln2_hi + thi, exact).
 * m invc = ph + pl exactly (one fused step), r = ph - 1 exact, S + r by
 * Fast2Sum: every rounding but the last is on terms below 2^-12 of the
 * result. Q1 is log1p's (|r| < 1/16), in fused steps (with separate ones
 * it took a third longer). Within 0.57 ulp (0.562 over every float), at
 * 45% of log_f32's cost in AVX-512, which left log behind NumPy's. c is
 * not read. */
static const vm_logt_row vm_lnf_tab[16] = {
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.062500000e+00f, 9.411764741e-01f, 0x1.f0ap-5f, 1.449145884e-06f},
    {1.125000000e+00f, 8.888888955e-01f, 0x1.e27p-4f, 4.354323551e-07f},
    {1.187500000e+00f, 8.421052694e-01f, 0x1.5ffp-3f, 5.767054063e-06f},
    {1.250000000e+00f, 8.000000119e-01f, 0x1.c90p-3f, -9.948369097e-07f},
    {1.312500000e+00f, 7.619047761e-01f, 0x1.1674p-2f, 6.816974292e-06f},
    {1.375000000e+00f, 7.272727489e-01f, 0x1.4618p-2f, 2.773581855e-06f},
    {1.437500000e+00f, 6.956521869e-01f, 0x1.739cp-2f, 5.694789706e-06f},
    {7.812500000e-01f, 1.279999971e+00f, -0x1.f99p-3f, -3.366126748e-06f},
    {8.125000000e-01f, 1.230769157e+00f, -0x1.a94p-3f, 2.296388857e-06f},
    {8.437500000e-01f, 1.185185075e+00f, -0x1.5bfp-3f, -7.586241281e-06f},
    {8.750000000e-01f, 1.142857075e+00f, -0x1.1178p-3f, -1.669933908e-06f},
    {9.062500000e-01f, 1.103448272e+00f, -0x1.933p-4f, -5.620845968e-06f},
    {9.375000000e-01f, 1.066666603e+00f, -0x1.086p-4f, 6.216201655e-06f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
    {1.000000000e+00f, 1.000000000e+00f, 0x0.0p+0f, 0.0f},
};

VM_INLINE float vm_lnf_finish(float x, float m, float ef, const vm_logt_row *t)
{
    float ph = m * t->invc;
    float pl = __builtin_fmaf(m, t->invc, -ph); /* exact: m invc = ph + pl */
    float r = ph - 1.0f;                        /* exact (Sterbenz) */
    float q = VM_LNT_Q1(r);
    float p = r * (r * q);
    float s = __builtin_fmaf(ef, VM_LN2_HI, t->thi); /* exact */
    float hi = s + r;
    float err = r - (hi - s); /* exact (Fast2Sum: |s| >= |r| or s = 0) */
    /* log1p(r + pl) = log1p(r) + pl (1 - r) to within pl r^2 */
    float lo = (__builtin_fmaf(ef, VM_LN2_LO, t->tlo) + __builtin_fmaf(-r, pl, pl)) + (p + err);
    return vm_log_specials_f32(x, hi + lo);
}
VM_LOGT_ARRAY(log_f32_n_portable, vm_lnf_tab, vm_lnf_finish)

/* Special values: -1 gives -inf, below -1 and NaN NaN, +inf inf, +-0 x. */
VM_INLINE float vm_log1p_specials_f32(float x, float r)
{
    r = x == -1.0f ? -INFINITY : r;
    r = x == INFINITY ? INFINITY : r;
    r = x < -1.0f || x != x ? NAN : r;
    return x == 0.0f ? x : r;
}

/* log1p(xc + lo) (no special values) from u = 1 + xc's reduction and
 * table row: lo, a sum's rounding error that formed xc, joins the
 * correction (or, where r = xc, the small terms). */
VM_INLINE float vm_log1pt_core(float xc, float lo, float u, float m, float ef, float c,
                               float invc, float thi, float tlo)
{
    int small = fabsf(xc) < 0.0625f;
    float r = small ? xc : (m - c) * invc;
    float corr = ((xc - (u - 1.0f)) + lo) / u;
    float s = small ? 0.0f : ef * VM_LN2_HI + thi;
    float tl = small ? lo : (tlo + ef * VM_LN2_LO) + corr;
    float p = r * (r * VM_LNT_Q1(r));
    return s + (tl + (r + p));
}

/* The functions on vm_log1pt_core: PRE gives its argument xc (and lo),
 * POST the result from x and log1p(xc + lo). */
VM_INLINE float vm_log1p_pre(float x, float *lo)
{
    *lo = 0.0f;
    return x;
}

/* asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), the sum's rounding
 * error passed on as lo (the argument enters with a condition number of
 * at most 1); above 2^24 log1p(|x|) + log 2, so that x^2 need not
 * overflow. */
VM_INLINE float vm_asinh_pre(float x, float *lo)
{
    float a = fabsf(x);
    int big = a > 0x1p24f; /* inf included */
    float ac = big ? 1.0f : a;
    float a2 = ac * ac;
    float q = a2 / (1.0f + sqrtf(1.0f + a2));
    float u = ac + q, l = (ac - u) + q; /* q <= ac: l is u's rounding error */
    *lo = big ? 0.0f : l;
    return big ? (a > 3.40282347e38f ? 1.0f : a) : u;
}

VM_INLINE float vm_asinh_post(float x, float r)
{
    float a = fabsf(x);
    r = a > 0x1p24f ? r + 0.693147182f : r;
    r = a > 3.40282347e38f ? INFINITY : r;
    return vm_xor_sign(r, x); /* r is +0 at 0, and NaN for NaN */
}

/* atanh |x| = log1p(2|x| / (1 - |x|)) / 2 for |x| >= 1/2 (1 - |x| exact),
 * Cephes' odd polynomial below. */
VM_INLINE float vm_atanh_pre(float x, float *lo)
{
    float a = fabsf(x);
    float ac = a < 1.0f ? a : 0.5f;
    *lo = 0.0f;
    return (ac + ac) / (1.0f - ac);
}

VM_INLINE float vm_atanh_post(float x, float l)
{
    float a = fabsf(x);
    float big = 0.5f * l;
    big = a == 1.0f ? INFINITY : big;
    big = x < 0.0f ? -big : big;
    float z = x * x;
    float p = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  1.81740078349e-1f, z, 8.24370301058e-2f), z, 1.46691431730e-1f), z,
                  1.99782164500e-1f), z, 3.33337300303e-1f) * z;
    float small = __builtin_fmaf(x, p, x); /* keeps -0 and NaN */
    return a > 1.0f ? NAN : a >= 0.5f ? big : small;
}

/* acosh x = log1p((x - 1) + sqrt((x - 1)(x + 1))) for x >= 1 (x - 1 exact
 * below 2; the root's argument in one fused step, so that the roundings
 * that count are the root's and its argument's, in full near 1), the sum's
 * rounding error passed on as lo; above 2^24 log1p(x) + log 2. */
VM_INLINE float vm_acosh_pre(float x, float *lo)
{
    int big = x > 0x1p24f; /* inf included */
    float d = x >= 1.0f && !big ? x : 1.0f;
    float xm = d - 1.0f;
    float sq = sqrtf(__builtin_fmaf(xm, xm, xm + xm));
    float u = sq + xm, l = (sq - u) + xm; /* xm <= sq: l is u's rounding error */
    *lo = big ? 0.0f : l;
    return big ? (x > 3.40282347e38f ? 1.0f : x) : u;
}

VM_INLINE float vm_acosh_post(float x, float r)
{
    r = x > 0x1p24f ? r + 0.693147182f : r;
    r = x > 3.40282347e38f ? INFINITY : r;
    return x < 1.0f || x != x ? NAN : r;
}

/* o[i] = f(a[i]) for the functions above by blocks (o may be a): PRE and
 * the reduction, the table entries (into one array per column: GCC 12
 * leaves the last loop scalar if it reads rows), then the rest. */
#define VM_LOG1PT_ARRAY(name, PRE, POST)                                       \
    VM_INLINE void name(float *o, const float *a, int64_t n)                   \
    {                                                                          \
        float xa[VM_BLOCK], xc[VM_BLOCK], la[VM_BLOCK], ua[VM_BLOCK];          \
        float ma[VM_BLOCK], ea[VM_BLOCK];                                      \
        float ca[VM_BLOCK], inva[VM_BLOCK], tha[VM_BLOCK], tla[VM_BLOCK];      \
        uint32_t ia[VM_BLOCK];                                                 \
        for (int64_t i0 = 0; i0 < n; i0 += VM_BLOCK) {                         \
            int m = n - i0 < VM_BLOCK ? (int)(n - i0) : VM_BLOCK;              \
            memcpy(xa, a + i0, (size_t)m * sizeof(float));                    \
            for (int j = 0; j < m; j++) {                                      \
                xc[j] = PRE(xa[j], &la[j]);                                    \
                ua[j] = 1.0f + xc[j];                                          \
                ia[j] = vm_logt_reduce(ua[j], &ma[j], &ea[j]);                 \
            }                                                                  \
            vm_logt_rows(vm_lnt_tab, ia, m, ca, inva, tha, tla);               \
            float *ob = o + i0;                                                \
            for (int j = 0; j < m; j++) {                                      \
                ob[j] = POST(xa[j], vm_log1pt_core(xc[j], la[j], ua[j], ma[j], \
                                                   ea[j], ca[j], inva[j],      \
                                                   tha[j], tla[j]));           \
            }                                                                  \
        }                                                                      \
    }
VM_LOG1PT_ARRAY(log1p_f32_n_portable, vm_log1p_pre, vm_log1p_specials_f32)
VM_LOG1PT_ARRAY(asinh_f32_n_portable, vm_asinh_pre, vm_asinh_post)
VM_LOG1PT_ARRAY(atanh_f32_n_portable, vm_atanh_pre, vm_atanh_post)
VM_LOG1PT_ARRAY(acosh_f32_n_portable, vm_acosh_pre, vm_acosh_post)

/* sinh and cosh in float from |x| = k ln 2 + r (vm_exp_reduce_fma_f32,
 * |r| <= ln(2) / 2): with w = e^r - 1 and v = e^-r, both from the even
 * and odd parts of e^r (Taylor to r^6 and r^7) in one fused step each,
 * cosh x = 2 (u + u w + d v) and sinh |x| = 2 (u + u w - d v) with u =
 * 2^(k-2) and d = 2^(-k-2) exact (the halves, so that k = 129, up to the
 * clamp at 89.5, needs no 2^128; the doubling is exact or overflows to
 * inf as the result does). From |x| = 0.5625 on, k >= 1 and r > -0.131
 * for k = 1, so that sinh cancels by at most 2; below, where its form
 * would lose the small values, sinh is x + x^3 P(x^2), P a degree-2 fit
 * (relative error 3e-10). No division and no second exponential. The sum
 * rounds twice: u + (u w +- d v), which keeps the rounding of the term in
 * parentheses a fraction of the result's ulp. Within 1.3 ulp (1.282 and
 * 1.285 over every float), in about 55% and 60% of the time of the form
 * this replaced (h +- 1 / 4h with h = e^|x| / 2: 1.7 and 1.5 ulp). */
VM_INLINE void vm_sinhcosh_parts(float x, float *w, float *v, float *up, float *dn)
{
    float ax = fabsf(x);
    ax = 89.5f < ax ? 89.5f : ax; /* minps: NaN passes */
    uint32_t kb;
    float r = vm_exp_reduce_fma_f32(ax, &kb);
    float z = r * r;
    /* e^r = 1 + z pe(z) + r (1 + z po(z)) */
    float pe = __builtin_fmaf(__builtin_fmaf(1.3888888889e-3f, z, 4.1666666667e-2f), z, 0.5f);
    float po = __builtin_fmaf(__builtin_fmaf(1.9841269841e-4f, z, 8.3333333333e-3f), z,
                              1.6666666667e-1f);
    *w = __builtin_fmaf(z, __builtin_fmaf(r, po, pe), r);
    *v = __builtin_fmaf(z, __builtin_fmaf(-r, po, pe), 1.0f - r);
    /* 2^(-k-2) from exponent bits, 2^-126 for k > 124 (where it no
     * longer counts) so that they stay a normal float's. */
    int32_t en = 125 - (int32_t)(kb - 0x4b400000u);
    en = en < 1 ? 1 : en;
    uint32_t dnb = (uint32_t)en << 23;
    memcpy(dn, &dnb, sizeof *dn);
    *up = vm_pow2_kb_f32(kb, -2);
}

VM_INLINE float sinh_f32(float x)
{
    float w, v, up, dn;
    vm_sinhcosh_parts(x, &w, &v, &up, &dn);
    float y = up + __builtin_fmaf(up, w, -(dn * v));
    y = y + y;
    y = vm_xor_sign(y, x);
    float z = x * x;
    float p = __builtin_fmaf(__builtin_fmaf(2.0022066019e-04f, z, 8.3329770714e-03f), z,
                             1.6666668653e-01f);
    float small = __builtin_fmaf(x * z, p, x); /* keeps -0 */
    return fabsf(x) < 0.5625f ? small : y;
}

VM_INLINE float cosh_f32(float x)
{
    float w, v, up, dn;
    vm_sinhcosh_parts(x, &w, &v, &up, &dn);
    float y = up + __builtin_fmaf(up, w, dn * v);
    return y + y;
}

/* sigmoid in float from e = e^(-|x|), which never overflows: 1 / (1 + e)
 * for x >= 0, e / (1 + e) below (down to the subnormal results). Within
 * 2.5 ulp (2.40 over every float in (-104, 20)): a quotient in double
 * would cut that to 1.5 but take 50% longer, and a double form (0.5 ulp)
 * twice as long, which left sigmoid behind PyTorch's. */
VM_INLINE float sigmoid_f32(float x)
{
    float e = exp_f32(x < 0.0f ? x : -x);
    float r = (x < 0.0f ? e : 1.0f) / (1.0f + e);
    return x != x ? x : r;
}

VM_INLINE float erf_f32(float x)
{
    double d = x;
    double a = d < 0.0 ? -d : d;
    double ac = a > 12.0 ? 12.0 : a;
    ac = ac < 0.5 ? 0.5 : ac;
    double big = 1.0 - vm_erfc_big(ac);
    big = d < 0.0 ? -big : big;
    double r = a < 0.5 ? vm_erf_small(d) : big;
    return x == 0.0f ? x : (float)r;
}

/* gelu x = x/2 erfc(-x / sqrt 2), which keeps its relative precision where
 * 1 + erf would cancel (negative x). */
VM_INLINE float gelu_f32(float x)
{
    double d = x;
    return (float)(0.5 * d * vm_erfc_d(d * -0.7071067811865476));
}

/* a > b for a >= 0 (or NaN, which compares above) and b > 0, on the bits:
 * for a second select on a condition that a float comparison chose
 * first. With the same condition twice, GCC 12's jump threading puts the
 * code between them on both paths, and the vectorized loop computes it
 * twice (the polynomial of atan and asin: a third of their time). */
VM_INLINE int vm_above_bits(float a, float b)
{
    uint32_t ab, bb;
    memcpy(&ab, &a, sizeof ab);
    memcpy(&bb, &b, sizeof bb);
    return ab > bb;
}

/* atan in float: |x| > 1 by pi/2 + atan(-1/|x|) (pi/2 in two parts, the
 * small one added first), then |v| <= 1 by v + v^3 P(v^2), P a degree-7
 * fit in fused steps (relative error 2e-8), and x's sign bit put back
 * (which keeps -0; inf gives pi/2, NaN NaN). One division and two selects:
 * within 1.6 ulp (1.567 over every float), in 40% of the time of the
 * three-interval form this replaced (1.7 ulp, four more selects and a
 * shorter polynomial). These loops are bound by the number of floating-
 * point operations (two a cycle), not by their dependency chains: Horner's
 * scheme beat Estrin's here. */
VM_INLINE float atan_f32(float x)
{
    float t = fabsf(x);
    int big = t > 1.0f;
    float v = big ? -1.0f / t : t;
    float z = v * v;
    float p = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  __builtin_fmaf(__builtin_fmaf(
                  2.9206860345e-03f, z, -1.6367904842e-02f), z, 4.3211825192e-02f), z,
                  -7.5522117317e-02f), z, 1.0666003823e-01f), z, -1.4211055636e-01f), z,
                  1.9993773103e-01f), z, -3.3333152533e-01f);
    float r = __builtin_fmaf(v * z, p, v);
    r = vm_above_bits(t, 1.0f) ? (r + -4.3711390001862426e-08f) + 1.5707963705062866f : r;
    r = vm_xor_sign(r, x);
    return r;
}

/* asin s for s in [0, 1/2] in float: s + s^3 P(s^2), P a degree-5 fit
 * (relative error 3e-9) in fused steps. */
VM_INLINE float vm_asin_core_f32(float s)
{
    float z = s * s;
    float p = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  0.03369084745645523f, z, 0.017149237915873528f), z, 0.031100662425160408f),
                  z, 0.04459940269589424f), z, 0.07500094175338745f), z, 0.1666666567325592f);
    return __builtin_fmaf(s * z, p, s);
}

/* The core's argument for |x| = a: a itself up to 1/2, above
 * sqrt((1 - a) / 2) (0.5 - 0.5 a is exact there: one rounding, the
 * root's; NaN for a > 1). */
VM_INLINE float vm_asin_arg_f32(float a, int big)
{
    return big ? sqrtf(__builtin_fmaf(-0.5f, a, 0.5f)) : a;
}

/* asin and acos as Cephes' asinf: |x| <= 1/2 by the core directly, above
 * by asin |x| = pi/2 - 2 asin(sqrt((1 - |x|) / 2)); x's sign bit put back
 * (which keeps -0). acos x = K + m c with c = asin of |x| or of the root,
 * (K, m) = (pi/2, -+1) for |x| <= 1/2 and x >= 0 or < 0, (0, 2) and (pi,
 * -2) above; K in two parts, the small one times m c added first: one
 * rounding that counts where the sum cancels (pi/2 - 2c). Within 2.0 ulp
 * (asin: 1.854 over every float) and 1.2 (acos: 1.134), in 38% and 27%
 * of the time of the forms this replaced (Fast2Sum and selects; acos's sum
 * in double), which had the same bounds. */
VM_INLINE float asin_f32(float x)
{
    float a = fabsf(x);
    int big = a > 0.5f;
    float c = vm_asin_core_f32(vm_asin_arg_f32(a, big));
    float r = vm_above_bits(a, 0.5f) ? __builtin_fmaf(-2.0f, c, 0x1.921fb6p+0f) + -4.371139000e-08f
                                     : c;
    r = vm_xor_sign(r, x);
    return r;
}

VM_INLINE float acos_f32(float x)
{
    float a = fabsf(x);
    int big = a > 0.5f;
    float c = vm_asin_core_f32(vm_asin_arg_f32(a, big));
    /* m = 2 or -1, negated for negative x; K = k pi/2 with k = 1 - m/2
     * (0 or 2) or 1 */
    int bigb = vm_above_bits(a, 0.5f);
    float m = bigb ? 2.0f : -1.0f;
    m = vm_xor_sign(m, x);
    float k = bigb ? __builtin_fmaf(-0.5f, m, 1.0f) : 1.0f;
    return __builtin_fmaf(k, 0x1.921fb6p+0f, __builtin_fmaf(m, c, k * -4.371139000e-08f));
}

/* tan in float for |x| < 2^17, infinities and NaN (see vm_trig_reduce):
 * tan r = r + r^3 P(r^2), P a degree-6 fit (relative error 1.3e-9 of
 * tan r), r^3 as rh (z + zl) with z = rh^2 and zl its rounding error, rl
 * joining the tail times 1 + tan^2 r (the derivative, within 12%: rl is
 * below an ulp of rh). Even n gives T = rh + tail, odd n -1 / (rh + tail)
 * = q (1 + e) with q = -1/T rounded and e = 1 + q rh + q tail (near 1 + q
 * T, a few ulps of 1: its absolute error is what counts): one division and
 * no second polynomial. |x|'s result takes x's sign bit back (which keeps
 * -0). Within 1.0 ulp (0.968 over every float below 2^17), in float at
 * twice the speed of the double form it replaced (0.501 ulp: sin r / cos r
 * in double, whose division alone took a third of the time). */
VM_INLINE float tan_f32_bounded(float x)
{
    float rh, rl;
    uint32_t nb = vm_trig_reduce(fabsf(x), &rh, &rl);
    float z = rh * rh;
    float zl = __builtin_fmaf(rh, rh, -z); /* z's rounding error */
    float rz = __builtin_fmaf(rh, z, rh * zl); /* rh^3 with one rounding */
    float p = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  __builtin_fmaf(4.3725441210e-03f, z, 9.8504962807e-05f), z,
                  1.0827285238e-02f), z, 2.1286249161e-02f), z, 5.4058909416e-02f), z,
                  1.3332675397e-01f), z, 3.3333349228e-01f);
    /* rl (1 + tan^2 r), 1 + tan^2 r within 6% (rl is below an ulp of rh) */
    float tail = __builtin_fmaf(rz, p, rl * __builtin_fmaf(1.5f, z, 1.0f));
    float th = rh + tail;
    float q = -1.0f / th;
    /* e = 1 + q (rh + tail), a few ulps of 1 at most: 1 + q rh (near
     * tail / th) rounds by 2^-27 at most, which e keeps as its absolute
     * error */
    float e = __builtin_fmaf(q, tail, __builtin_fmaf(q, rh, 1.0f));
    float y = __builtin_fmaf(q, e, q);
    float res = (nb & 1u) ? y : th;
    res = vm_xor_sign(res, x);
    return res;
}

VM_INLINE float vm_tan_libm(float x)
{
    return (float)tan((double)x);
}

/* tan of every float32 (1.0 ulp; libm's, 0.501, for |x| >= 2^17). */
VM_TRIG_ARRAY(tan_f32_n, tan_f32_bounded, vm_tan_libm)

/* ------------------------------------------------------------ binary */

VM_INLINE float hypot_f32(float x, float y)
{
    double dx = x, dy = y;
    float r = (float)sqrt(dx * dx + dy * dy); /* squares exact, one rounding */
    return x == INFINITY || x == -INFINITY || y == INFINITY || y == -INFINITY ? INFINITY : r;
}

/* atan2 as C99 in float: with n = min(|x|, |y|) and d = max, atan(n / d)
 * by a degree-5 odd polynomial (v = n / d, or (n - d) / (n + d) = tan(a
 * - pi/4) from n >= d/2, where n - d is exact: one division), then the
 * angle k pi/4 +- w of the octant, k pi/4 in two parts, the first exact
 * times k (in float: 8% faster than the sum in double was, and as
 * accurate), in fused steps (15% faster than separate ones, which
 * fp-contract=off keeps apart): within 1.8 ulp (1.70 over the 6 million
 * pairs of test_vmath.c), twice as fast as the double form. Equal (infinite)
 * arguments give pi/4 and both zero 0 before the quadrant; d above 2^126
 * scales both by 1/4 so that n + d stays finite. */
VM_INLINE float atan2_f32(float y, float x)
{
    float ay = fabsf(y);
    float ax = fabsf(x);
    int swap = ay > ax;
    float num = swap ? ax : ay, den = swap ? ay : ax;
    float sc = den > 0x1p126f ? 0.25f : 1.0f;
    num *= sc;
    den *= sc;
    int mid = num + num >= den && den != 0.0f; /* 2n exact: n <= 2^126 */
    float v = (mid ? num - den : num) / (mid ? num + den : den);
    v = num == den ? 0.0f : v; /* both infinite, or both zero */
    float z = v * v;
    float p = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  0.042256858199834824f, z, -0.0823550596833229f), z, 0.11006880551576614f), z,
                  -0.14279800653457642f), z, 0.19999875128269196f), z, -0.3333333432674408f);
    float w = __builtin_fmaf(v, z * p, v);
    /* angle = k pi/4 + sw w (>= +0): mid adds pi/4, swap takes pi/2 minus
     * it, x negative (or -0) pi minus that; y's sign bit is the result's.
     * The signs from the bits: signbit() in a condition left GCC moving
     * masks through general registers, at twice the cost. */
    uint32_t xb, yb;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&yb, &y, sizeof yb);
    int xneg = (int32_t)xb < 0;
    float k = mid ? 1.0f : 0.0f;
    float sw = 1.0f;
    k = swap ? 2.0f - k : k;
    sw = swap ? -sw : sw;
    k = xneg ? 4.0f - k : k;
    sw = xneg ? -sw : sw;
    /* pi/4 = 0x1.921fb4p-1 (22 bits: k times it is exact) + 3.7748951e-8 */
    float a = __builtin_fmaf(k, 0x1.921fb4p-1f, __builtin_fmaf(sw, w, k * 3.774895063e-08f));
    uint32_t ab;
    memcpy(&ab, &a, sizeof ab);
    ab ^= yb & 0x80000000u;
    memcpy(&a, &ab, sizeof a);
    return x != x || y != y ? x + y : a;
}

/* log(e^x + e^y) = max + log1p(e^(-|x - y|)), equal arguments (infinities
 * included) x + log 2, as NumPy. Within 0.501 ulp but where the two terms
 * cancel (results within 1e-7 of 0, from arguments near -log 2): there
 * the error is up to 3e-16 absolute. */
VM_INLINE float logaddexp_f32(float x, float y)
{
    double dx = x, dy = y;
    double m = dx > dy ? dx : dy;
    double d = dx > dy ? dy - dx : dx - dy; /* <= 0, or NaN */
    d = d < -200.0 ? -200.0 : d;
    double r = m + vm_log1p_d(vm_exp_d(d));
    r = x == y ? (dx + 0x1.62e42fee00000p-1) + 1.90821492927058770002e-10 : r;
    return x != x || y != y ? x + y : (float)r;
}

/* ------------------------------------------------------------------ pow
 *
 * x^y = 2^(y log2 |x|), in float with the extra precision carried as
 * double-float pairs (the fast form), or in double (the double form).
 *
 * Both reduce alike: |x| = 2^k z with z in [0.699, 1.398) (exact, from the
 * bits), split into 16 subintervals by z's top mantissa bits, with r = z
 * invc - 1 (|r| < 0.03); the interval around 1 has invc = 1, so that r is
 * exact there and log2 |x| keeps its relative precision near 1.
 *
 * The fast form, for |y| <= 32 and t = y log2 |x| in [-125, 127) (results
 * normal or overflowing; log2 |x|'s error, about 2^-34, then moves t by
 * at most 2^-29, and y up to 64 gave 0.616 ulp): z invc = p + pe exactly (one fused step) and
 * r = p - 1 exactly; log2 |x| = hi + lo with hi = k + log2 c + r C1 (the
 * table's log2 c has 16 fraction bits, so the sum with k is exact; Fast2Sum
 * keeps hi's rounding), and lo the rest: C1's low part, pe's term, log2 c's
 * low part and the tail r^2 P(r), P a degree-3 fit of (log2(1 + r) - r C1)
 * / r^2 (absolute error 2^-36). t = th + tl, each product's rounding kept by
 * a fused step. exp2: m = t rounded to 1/16 (m from th + tl, as tl can pass
 * 1/32; th - m is exact), f = th - m + tl, 2^t = 2^(m/16) (1 + f Q(f)) with
 * 2^(i/16) as a pair from a table and Q a degree-2 fit (relative error
 * 2^-29), the product's last rounding the only large one. 16 lanes a step
 * in AVX-512 against the double form's 8: a fifth to a quarter less time
 * (bench/vmath_kernels.c at 4K, alternating: 0.83-0.99 against 1.05-1.27
 * ns an element, on a loaded host).
 *
 * The double form, for the other lanes, is glibc's powf (Szabolcs Nagy's)
 * in outline, vectorized: log2 z = log2 c + r Q(r), Q a degree-5 fit
 * (relative error 3e-12); exp2: t = m/16 + f with |f| <= 1/32, 2^t =
 * 2^(m/16) (1 + f P(f)), P a degree-3 fit (relative error 2.5e-12),
 * 2^(m/16) from a table and exponent bits: a degree more in each than
 * glibc's, as it takes the large |y| (with degree-4 and -2 fits, 0.74 ulp
 * at y = 386). t is clamped to [-200, 200] so that 2^t
 * stays a normal double; the one conversion to float then gives overflow
 * (inf), the subnormal results and underflow (0) correctly rounded (the
 * AVX-512 form needs no clamp: its scalef saturates to inf or 0).
 *
 * Within 0.6 ulp: 0.578 measured where the fast form answers, 0.501 where
 * the double form does (a billion pairs of test_vmath's kinds and of x
 * near 1, of either sign to integer y and of any normal x to |y| between
 * 2^-31 and 2^6). Finite nonzero normal x and finite y take these
 * forms; negative x gives NaN unless y is an integer, which sets the sign
 * by its parity. Zero, subnormal, infinite and NaN x and infinite and NaN y
 * (C99's special cases, rare in practice) go to libm's powf, lane by lane,
 * so they are exactly glibc's. vmath_avx512.h does the same operations in
 * AVX-512 intrinsics (tables by permutes, not gathers): the same bits. */
static const double vm_pow_invc[16] = {
    0x1.661ec6a5122f9p+0, 0x1.571ed3c506b3ap+0, 0x1.49539e3b2d067p+0, 0x1.3c995a47babe7p+0,
    0x1.30d190130d190p+0, 0x1.25e22708092f1p+0, 0x1.1bb4a4046ed29p+0, 0x1.12358e75d3033p+0,
    0x1.0953f39010954p+0, 0x1.0000000000000p+0, 0x1.e573ac901e574p-1, 0x1.ca4b3055ee191p-1,
    0x1.b2036406c80d9p-1, 0x1.9c2d14ee4a102p-1, 0x1.886e5f0abb04ap-1, 0x1.767dce434a9b1p-1,
};
/* -log2(invc), to double precision. */
static const double vm_pow_logc[16] = {
    -0x1.efec61b011f85p-2, -0x1.b0b67f4f46812p-2, -0x1.7418acebbf18fp-2, -0x1.39de8e1559f6ep-2,
    -0x1.01d9bbcfa61d4p-2, -0x1.97c1cb13c7ec0p-3, -0x1.2f9e32d5bfdd1p-3, -0x1.960caf9abb7c1p-4,
    -0x1.a6f9c377dd31dp-5, 0x0.0p+0, 0x1.3aa2fdd27f1bfp-4, 0x1.476a9f983f74dp-3,
    0x1.e840be74e6a4dp-3, 0x1.406463b1b0448p-2, 0x1.88e9c72e0b224p-2, 0x1.ce0a4923a587dp-2,
};
/* The bits of 2^(i/16) less i << 48, so that adding m << 48 (m = 16 j + i)
 * gives 2^(m/16). */
static const uint64_t vm_pow_exp2_tab[16] = {
    0x3ff0000000000000ull, 0x3fefb5586cf9890full, 0x3fef72b83c7d517bull, 0x3fef387a6e756238ull,
    0x3fef06fe0a31b715ull, 0x3feedea64c123422ull, 0x3feebfdad5362a27ull, 0x3feeab07dd485429ull,
    0x3feea09e667f3bcdull, 0x3feea11473eb0187ull, 0x3feeace5422aa0dbull, 0x3feec49182a3f090ull,
    0x3feee89f995ad3adull, 0x3fef199bdd85529cull, 0x3fef5818dcfba487ull, 0x3fefa4afa2a490daull,
};
#define VM_POW_OFF 0x3f330000u
#define VM_POW_C0 0x1.71547652bd0dap+0
#define VM_POW_C1 -0x1.71547652d2ee0p-1
#define VM_POW_C2 0x1.ec7097b443756p-2
#define VM_POW_C3 -0x1.71546e7f83b67p-2
#define VM_POW_C4 0x1.27be5034eae9ep-2
#define VM_POW_C5 -0x1.ecffaf41f281bp-3
#define VM_POW_E1 0x1.62e42fec3c29fp-1
#define VM_POW_E2 0x1.ebfbdffda5935p-3
#define VM_POW_E3 0x1.c6b3f6a253c78p-5
#define VM_POW_E4 0x1.3b2a300bf9ec7p-7
#define VM_POW_SHIFT 0x1.8p48 /* adding it rounds to a multiple of 1/16 */

/* The fast form's tables: invc in float; -log2(invc) as a part of 16
 * fraction bits and the rest; 2^(i/16) as a float and the rest. */
static const float vm_powf_invc[16] = {
    0x1.661ec6p+0f, 0x1.571ed4p+0f, 0x1.49539ep+0f, 0x1.3c995ap+0f,
    0x1.30d19p+0f, 0x1.25e228p+0f, 0x1.1bb4a4p+0f, 0x1.12358ep+0f,
    0x1.0953f4p+0f, 0x1.p+0f, 0x1.e573acp-1f, 0x1.ca4b3p-1f,
    0x1.b20364p-1f, 0x1.9c2d14p-1f, 0x1.886e6p-1f, 0x1.767dcep-1f,
};
static const float vm_powf_logc_hi[16] = {
    -0x1.efecp-2f, -0x1.b0b8p-2f, -0x1.7418p-2f, -0x1.39ep-2f,
    -0x1.01d8p-2f, -0x1.97cp-3f, -0x1.2fap-3f, -0x1.961p-4f,
    -0x1.a7p-5f, 0.0f, 0x1.3aap-4f, 0x1.4768p-3f,
    0x1.e84p-3f, 0x1.4064p-2f, 0x1.88e8p-2f, 0x1.ce0cp-2f,
};
static const float vm_powf_logc_lo[16] = {
    -0x1.7c1c78p-20f, 0x1.7fb2dp-18f, -0x1.57c494p-19f, 0x1.73395ap-18f,
    -0x1.bb735p-18f, -0x1.d4d0c2p-19f, 0x1.cd586ap-19f, 0x1.ad2834p-19f,
    0x1.8a438cp-19f, 0.0f, 0x1.825668p-19f, 0x1.50e12p-18f,
    0x1.7d4622p-20f, 0x1.9c1f0ep-20f, 0x1.c392b8p-18f, -0x1.b5d2e6p-18f,
};
static const float vm_powf_exp2_hi[16] = {
    0x1.p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f,
    0x1.306fep+0f, 0x1.3dea64p+0f, 0x1.4bfdaep+0f, 0x1.5ab07ep+0f,
    0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f, 0x1.9c4918p+0f,
    0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f,
};
static const float vm_powf_exp2_lo[16] = {
    0.0f, 0x1.9f3122p-25f, -0x1.c15742p-27f, 0x1.ceac48p-25f,
    0x1.4636e2p-25f, 0x1.824684p-25f, -0x1.593abcp-25f, -0x1.5bd5ecp-27f,
    0x1.9fcef4p-26f, -0x1.829fdp-25f, 0x1.15506ep-27f, 0x1.51f848p-27f,
    -0x1.a94b14p-26f, -0x1.3d56b2p-27f, -0x1.822dbcp-27f, 0x1.52486cp-27f,
};
#define VM_POWF_C1H 0x1.715476p+0f /* C1 = 1/ln 2 = C1H + C1L */
#define VM_POWF_C1L 0x1.4ae0cp-26f
#define VM_POWF_P2 -0x1.715474p-1f
#define VM_POWF_P3 0x1.ec7096p-2f
#define VM_POWF_P4 -0x1.71a1dep-2f
#define VM_POWF_P5 0x1.27c3f4p-2f
#define VM_POWF_E1 0x1.62e43p-1f
#define VM_POWF_E2 0x1.ebfff8p-3f
#define VM_POWF_E3 0x1.c6b46ep-5f
#define VM_POWF_SHIFT 0x1.8p19f /* adding it rounds to a multiple of 1/16 */
#define VM_POWF_YMAX_BITS 0x42000000u /* 32.0f */

/* 1 where the fast form cannot answer: x zero, subnormal, infinite or NaN,
 * y infinite or NaN. */
VM_INLINE int vm_pow_needs_slow(float x, float y)
{
    uint32_t ix, iy;
    memcpy(&ix, &x, sizeof ix);
    memcpy(&iy, &y, sizeof iy);
    return ((ix & 0x7fffffffu) - 0x00800000u >= 0x7f000000u) |
           ((iy & 0x7fffffffu) >= 0x7f800000u);
}

/* y's class for a negative x: *isint (y an integer), *odd (an odd one).
 * Above 2^23 every float is an integer, above 2^24 an even one; below,
 * adding 2^23 rounds to the integer and leaves it in the low mantissa
 * bits. */
VM_INLINE void vm_pow_yclass(float y, int *isint, int *odd)
{
    float ay = fabsf(y);
    float sh = ay < 0x1p23f ? ay + 0x1p23f : ay;
    uint32_t sb;
    memcpy(&sb, &sh, sizeof sb);
    *isint = ay >= 0x1p23f || sh - 0x1p23f == ay;
    *odd = *isint && ay < 0x1p24f && (sb & 1u);
}

/* The steps of x^y for the lanes vm_pow_needs_slow leaves (garbage, but no
 * undefined behaviour, for the others), split where a table is read: a
 * loop of table reads does not vectorize (GCC 12 tunes gathers off) and
 * holds up the arithmetic around it if they share a loop.
 *
 * |x| = 2^k z: returns the subinterval of z. */
VM_INLINE uint32_t vm_pow_reduce(float x, float *z, int32_t *k)
{
    uint32_t ix;
    memcpy(&ix, &x, sizeof ix);
    uint32_t ax = ix & 0x7fffffffu;
    uint32_t tmp = ax - VM_POW_OFF;
    uint32_t top = tmp & 0xff800000u;
    uint32_t iz = ax - top;
    memcpy(z, &iz, sizeof *z);
    *k = (int32_t)top >> 23; /* arithmetic shift (GCC, clang) */
    return (tmp >> 19) & 15u;
}

/* t = y log2 |x|, clamped; f = t - m/16 with the integer bits of m in *ki. */
VM_INLINE double vm_pow_t(float z, int32_t k, float y, double invc, double logc, uint64_t *ki)
{
    double r = __builtin_fma((double)z, invc, -1.0);
    double y0 = logc + (double)k;
    double q = __builtin_fma(__builtin_fma(__builtin_fma(__builtin_fma(__builtin_fma(
                   VM_POW_C5, r, VM_POW_C4), r, VM_POW_C3), r, VM_POW_C2), r, VM_POW_C1),
                   r, VM_POW_C0);
    double l2 = __builtin_fma(r, q, y0);
    double t = (double)y * l2;
    t = t > 200.0 ? 200.0 : t;
    t = t < -200.0 ? -200.0 : t;
    double kd = t + VM_POW_SHIFT;
    memcpy(ki, &kd, sizeof *ki);
    kd -= VM_POW_SHIFT;
    return t - kd;
}

/* r = |x|^y given the sign x^y takes: y's parity for a negative x, NaN
 * if y is not an integer there. */
VM_INLINE float vm_pow_sign(float r, float x, float y)
{
    int isint, odd;
    vm_pow_yclass(y, &isint, &odd);
    float neg = isint ? (odd ? -r : r) : NAN;
    return x < 0.0f ? neg : r;
}

/* |x|^y by the double form from f, m's bits and the table entry of m & 15. */
VM_INLINE float vm_pow_finish(double f, uint64_t ki, uint64_t tab)
{
    uint64_t sbits = tab + (ki << 48);
    double s;
    memcpy(&s, &sbits, sizeof s);
    double p = __builtin_fma(__builtin_fma(__builtin_fma(VM_POW_E4, f, VM_POW_E3), f,
                                           VM_POW_E2), f, VM_POW_E1);
    p = __builtin_fma(p, f, 1.0);
    return (float)(p * s);
}

/* |x|^y by the double form, for the lanes the fast form leaves. */
VM_INLINE float vm_pow_double_abs(float x, float y)
{
    float z;
    int32_t k;
    uint32_t i = vm_pow_reduce(x, &z, &k);
    uint64_t ki;
    double f = vm_pow_t(z, k, y, vm_pow_invc[i], vm_pow_logc[i], &ki);
    return vm_pow_finish(f, ki, vm_pow_exp2_tab[ki & 15u]);
}

/* The fast form's t = th + tl = y log2 |x| from the reduction and the
 * table entries of its subinterval; *ok: whether the fast form answers
 * (|y| <= 32, t in [-125, 127)). Returns f, with m's bits in *kb. */
VM_INLINE float vm_powf_t(float z, int32_t k, float y, float invc, float lh, float ll,
                          uint32_t *kb, int *ok)
{
    float p = z * invc;
    float pe = __builtin_fmaf(z, invc, -p); /* exact: z invc = p + pe */
    float r = p - 1.0f;                     /* exact (Sterbenz) */
    float s = (float)k + lh;                /* exact: lh has 16 fraction bits */
    float ph = r * VM_POWF_C1H;
    float pl = __builtin_fmaf(r, VM_POWF_C1H, -ph);
    float q = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(
                  VM_POWF_P5, r, VM_POWF_P4), r, VM_POWF_P3), r, VM_POWF_P2), r, VM_POWF_C1L);
    float hi = s + ph;
    float err = (s - hi) + ph; /* exact (Fast2Sum: |s| >= |ph| or s = 0) */
    /* log2(1 + r + pe) = log2(1 + r) + pe C1 (1 - r) to within pe r^2 */
    float w = __builtin_fmaf(-r, VM_POWF_C1H, VM_POWF_C1H);
    float lo = __builtin_fmaf(pe, w, ll);
    lo = lo + pl;
    lo = __builtin_fmaf(r, q, lo);
    lo = lo + err;
    float th = y * hi;
    float tl = __builtin_fmaf(y, hi, -th);
    tl = __builtin_fmaf(y, lo, tl);
    float ts = th + tl;
    uint32_t ay;
    memcpy(&ay, &y, sizeof ay);
    *ok = (ay & 0x7fffffffu) <= VM_POWF_YMAX_BITS && ts >= -125.0f && ts < 127.0f;
    float kd = ts + VM_POWF_SHIFT;
    memcpy(kb, &kd, sizeof *kb);
    float m = kd - VM_POWF_SHIFT;
    return (th - m) + tl;
}

/* |x|^y by the fast form from f, m's bits and the table entries of m & 15. */
VM_INLINE float vm_powf_finish(float f, uint32_t kb, float eh, float el)
{
    float q = __builtin_fmaf(__builtin_fmaf(VM_POWF_E3, f, VM_POWF_E2), f, VM_POWF_E1) * f;
    float res = eh + __builtin_fmaf(eh, q, el);
    uint32_t sb;
    float shift = VM_POWF_SHIFT;
    memcpy(&sb, &shift, sizeof sb);
    /* m's integer part: the bits above the 4 of m & 15 (arithmetic
     * shift), in [-125, 127] where the fast form answers. */
    int32_t j = (int32_t)(kb - sb) >> 4;
    j = j < -126 ? -126 : j > 127 ? 127 : j; /* elsewhere: no overflow below */
    return res * pow2i_f32(j);
}

/* x^y of every float32 pair by blocks, each step a loop over the block
 * (the table reads on their own), then the lanes the fast form cannot do
 * by the double form, and those neither can by libm. The inputs are copied
 * first: o may be a or b. */
VM_INLINE void pow_f32_n_portable(float *o, const float *a, const float *b, int64_t n)
{
    float xa[VM_BLOCK], ya[VM_BLOCK], za[VM_BLOCK];
    int32_t ka[VM_BLOCK];
    uint32_t ia[VM_BLOCK], kba[VM_BLOCK];
    float inv[VM_BLOCK], lha[VM_BLOCK], lla[VM_BLOCK], fa[VM_BLOCK], eha[VM_BLOCK], ela[VM_BLOCK];
    int oka[VM_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += VM_BLOCK) {
        int m = n - i0 < VM_BLOCK ? (int)(n - i0) : VM_BLOCK;
        memcpy(xa, a + i0, (size_t)m * sizeof(float));
        memcpy(ya, b + i0, (size_t)m * sizeof(float));
        float *ob = o + i0;
        int slow = 0;
        for (int j = 0; j < m; j++) {
            slow |= vm_pow_needs_slow(xa[j], ya[j]);
            ia[j] = vm_pow_reduce(xa[j], &za[j], &ka[j]);
        }
        for (int j = 0; j < m; j++) {
            inv[j] = vm_powf_invc[ia[j]];
            lha[j] = vm_powf_logc_hi[ia[j]];
            lla[j] = vm_powf_logc_lo[ia[j]];
        }
        int all_ok = 1;
        for (int j = 0; j < m; j++) {
            fa[j] = vm_powf_t(za[j], ka[j], ya[j], inv[j], lha[j], lla[j], &kba[j], &oka[j]);
            all_ok &= oka[j];
        }
        for (int j = 0; j < m; j++) {
            eha[j] = vm_powf_exp2_hi[kba[j] & 15u];
            ela[j] = vm_powf_exp2_lo[kba[j] & 15u];
        }
        for (int j = 0; j < m; j++) {
            ob[j] = vm_pow_sign(vm_powf_finish(fa[j], kba[j], eha[j], ela[j]), xa[j], ya[j]);
        }
        if (!all_ok) {
            for (int j = 0; j < m; j++) {
                if (!oka[j]) {
                    ob[j] = vm_pow_sign(vm_pow_double_abs(xa[j], ya[j]), xa[j], ya[j]);
                }
            }
        }
        if (slow) {
            for (int j = 0; j < m; j++) {
                if (vm_pow_needs_slow(xa[j], ya[j])) {
                    ob[j] = powf(xa[j], ya[j]);
                }
            }
        }
    }
}

#endif
