/* Float32 elementary functions written so that GCC vectorizes the loops
 * that call them (libm's are one call per element): static inline, no
 * branches, special cases chosen by selects. Include after the vectorizing
 * pragma of src/ops/unary.c so that its options apply to them too. */
#ifndef EV_OPS_VMATH_H
#define EV_OPS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* float32 exp that GCC vectorizes (expf is a call per element, which left
 * ours behind NumPy's SIMD exp): exp(x) = 2^k exp(r) with k = round(x /
 * ln 2), r = x - k ln 2 in two parts, exp(r) by Cephes' degree-6
 * polynomial (about 1 ulp). 2^k is made from exponent bits in two halves so
 * that overflow gives inf and results below FLT_MIN come out subnormal. NaN
 * passes through the clamps (comparisons with NaN are false). */
static inline float pow2i_f32(int32_t k) /* k in [-126, 127] */
{
    uint32_t bits = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float exp_f32(float x)
{
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    /* Round to nearest by the 1.5 * 2^23 trick (no call to rintf). */
    float kf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float z = r * r;
    float y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
    y = y * z + r + 1.0f;
    /* NaN would make the conversion undefined; its result is NaN anyway. */
    int32_t k = (int32_t)(kf == kf ? kf : 0.0f);
    int32_t k1 = k >> 1;
    return y * pow2i_f32(k1) * pow2i_f32(k - k1);
}

/* float32 log that vectorizes, as exp_f32 (about 1 ulp): x = m 2^e with m
 * in [sqrt(1/2), sqrt(2)), log(m) by Cephes' polynomial in m - 1, and the
 * special cases (negative, zero, inf, NaN; subnormals are scaled first)
 * chosen by selects at the end. */
static inline float log_f32(float x)
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
    float ef = (float)(small ? e - 1 : e);
    float t = small ? m + m - 1.0f : m - 1.0f;
    float z = t * t;
    float y = ((((((((7.0376836292e-2f * t - 1.1514610310e-1f) * t + 1.1676998740e-1f) * t -
                    1.2420140846e-1f) * t + 1.4249322787e-1f) * t - 1.6668057665e-1f) * t +
                 2.0000714765e-1f) * t - 2.4999993993e-1f) * t + 3.3333331174e-1f) * t * z;
    y += -2.12194440e-4f * ef;
    y += -0.5f * z;
    float r = t + y;
    r += 0.693359375f * ef;
    r = x == 0.0f ? -INFINITY : r;
    r = x == INFINITY ? INFINITY : r;
    r = x < 0.0f || x != x ? NAN : r;
    return r;
}

/* float32 tanh that vectorizes: Cephes' odd polynomial below |x| = 0.625,
 * 1 - 2 / (exp(2|x|) + 1) above (inf makes it exactly 1), both computed
 * and one selected. */
static inline float tanh_f32(float x)
{
    float ax = x < 0.0f ? -x : x;
    float z = x * x;
    float p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float big = 1.0f - 2.0f / (exp_f32(ax + ax) + 1.0f);
    big = x < 0.0f ? -big : big;
    p = x == 0.0f ? x : p; /* keeps the sign of -0 */
    return ax >= 0.625f ? big : p;
}

#endif
