/* AVX-512 forms of some vmath.h functions, chosen at run time: GCC's
 * vectorization of the portable forms reads their small tables by gathers
 * (slow on the CPUs we run on) where a permute of two registers does. Each
 * does the same floating-point operations in the same order as its
 * portable form (conversions, permutes and integer steps are exact), so
 * the bits do not depend on the CPU; test_vmath.c compares the two. */
#ifndef EV_OPS_VMATH_AVX512_H
#define EV_OPS_VMATH_AVX512_H

#include "ops/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VM_HAVE_AVX512 1
#define VM_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
/* The 16-lane helpers are always inlined: called out of line (GCC left
 * some so), a call's chain of dependent steps cannot overlap the next
 * call's, and a runtime base or coefficient count stays unfolded; log10
 * then ran at 2.5x its inlined time on Zen 4. */
#define VM_AVX512_INLINE VM_TARGET_AVX512 __attribute__((always_inline)) static inline

/* |x| (the sign bit cleared). */
VM_AVX512_INLINE __m512 vm_abs_ps(__m512 x)
{
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

/* c0 x^4 + c1 x^3 + ... + c4 by Horner's rule in fused steps, as the
 * portable forms' __builtin_fmaf chains. Coefficients as arguments, not an
 * array: GCC kept an array's loop (and the array, on the stack) even
 * inlined, which made log10 latency-bound. */
VM_AVX512_INLINE __m512 vm_horner5_fma_ps(__m512 x, float c0, float c1, float c2, float c3,
                                          float c4)
{
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(c0), x, _mm512_set1_ps(c1));
    q = _mm512_fmadd_ps(q, x, _mm512_set1_ps(c2));
    q = _mm512_fmadd_ps(q, x, _mm512_set1_ps(c3));
    return _mm512_fmadd_ps(q, x, _mm512_set1_ps(c4));
}

/* 1 if this CPU runs the AVX-512 forms. */
static inline int vm_cpu_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

/* vm_pow_t and vm_pow_finish's double part for 8 lanes: z (exact), k, the
 * subinterval and y, widened; the table reads by permutes. */
VM_AVX512_INLINE __m256 vm_pow_abs_pd8(__m256 z8, __m256i k8, __m256i i8,
                                       __m256 y8, const __m512d *tabs)
{
    __m512d z = _mm512_cvtps_pd(z8);
    __m512i idx = _mm512_cvtepu32_epi64(i8);
    __m512d invc = _mm512_permutex2var_pd(tabs[0], idx, tabs[1]);
    __m512d logc = _mm512_permutex2var_pd(tabs[2], idx, tabs[3]);
    __m512d r = _mm512_fmsub_pd(z, invc, _mm512_set1_pd(1.0));
    __m512d y0 = _mm512_add_pd(logc, _mm512_cvtepi32_pd(k8));
    __m512d q = _mm512_fmadd_pd(_mm512_set1_pd(VM_POW_C5), r, _mm512_set1_pd(VM_POW_C4));
    q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(VM_POW_C3));
    q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(VM_POW_C2));
    q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(VM_POW_C1));
    q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(VM_POW_C0));
    __m512d l2 = _mm512_fmadd_pd(r, q, y0);
    __m512d t = _mm512_mul_pd(_mm512_cvtps_pd(y8), l2);
    /* m/16, t to the nearest 1/16 (ties to even, as adding the portable
     * form's shift rounds), also where |t| >= 2^47 and the shift would
     * not; the shift then gives m's low bits. */
    __m512d kd = _mm512_roundscale_pd(t, (4 << 4) | _MM_FROUND_TO_NEAREST_INT |
                                             _MM_FROUND_NO_EXC);
    __m512i ki = _mm512_castpd_si512(_mm512_add_pd(kd, _mm512_set1_pd(VM_POW_SHIFT)));
    __m512d f = _mm512_sub_pd(t, kd);
    /* 2^(m/16) = 2^(i/16) 2^floor(m/16), i = m & 15 (the permute reads the
     * index's low 4 bits). scalef saturates to inf or 0 where 2^t leaves
     * the doubles, so t needs no clamp, unlike the portable form, whose
     * exponent bits would wrap: one step for the clamp's two and the
     * exponent's two, 7% of the time (bench/vmath_kernels.c). For
     * |t| <= 200 both make the same 2^(m/16); past it both give inf or 0. */
    __m512d s = _mm512_scalef_pd(_mm512_permutex2var_pd(tabs[4], ki, tabs[5]), kd);
    __m512d p = _mm512_fmadd_pd(_mm512_set1_pd(VM_POW_E4), f, _mm512_set1_pd(VM_POW_E3));
    p = _mm512_fmadd_pd(p, f, _mm512_set1_pd(VM_POW_E2));
    p = _mm512_fmadd_pd(p, f, _mm512_set1_pd(VM_POW_E1));
    p = _mm512_fmadd_pd(p, f, _mm512_set1_pd(1.0));
    return _mm512_cvtpd_ps(_mm512_mul_pd(p, s));
}

/* vm_pow_reduce for 16 lanes from |x|'s bits: returns the subinterval in
 * each lane's low 4 bits (all the permutes read), z and k. */
VM_AVX512_INLINE __m512i vm_pow_reduce_ps16(__m512i ax, __m512 *z, __m512i *k)
{
    __m512i tmp = _mm512_sub_epi32(ax, _mm512_set1_epi32((int)VM_POW_OFF));
    __m512i top = _mm512_and_si512(tmp, _mm512_set1_epi32((int)0xff800000u));
    *z = _mm512_castsi512_ps(_mm512_sub_epi32(ax, top));
    *k = _mm512_srai_epi32(top, 23);
    return _mm512_srli_epi32(tmp, 19);
}

/* |x|^y by the double form for 16 lanes, from |x|'s bits. */
VM_AVX512_INLINE __m512 vm_pow_double_abs_ps16(__m512i ax, __m512 y, const __m512d *tabs)
{
    __m512 z;
    __m512i k;
    __m512i i = vm_pow_reduce_ps16(ax, &z, &k);
    __m256 lo = vm_pow_abs_pd8(_mm512_castps512_ps256(z), _mm512_castsi512_si256(k),
                               _mm512_castsi512_si256(i), _mm512_castps512_ps256(y), tabs);
    __m256 hi = vm_pow_abs_pd8(_mm512_extractf32x8_ps(z, 1), _mm512_extracti32x8_epi32(k, 1),
                               _mm512_extracti32x8_epi32(i, 1), _mm512_extractf32x8_ps(y, 1),
                               tabs);
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

/* |x|^y by the fast form for 16 lanes (vm_powf_t and vm_powf_finish: the
 * same steps), from |x|'s and |y|'s bits; *ok gets the lanes it answers.
 * The tables T: invc, log2 c's two parts, 2^(i/16)'s two parts. */
VM_AVX512_INLINE __m512 vm_powf_abs_ps16(__m512i ax, __m512i ay_bits, __m512 y,
                                         const __m512 *T, __mmask16 *ok)
{
    const __m512 c1h = _mm512_set1_ps(VM_POWF_C1H);
    __m512 z;
    __m512i k;
    __m512i i = vm_pow_reduce_ps16(ax, &z, &k);
    __m512 kf = _mm512_cvtepi32_ps(k);
    __m512 invc = _mm512_permutexvar_ps(i, T[0]);
    __m512 p = _mm512_mul_ps(z, invc);
    __m512 pe = _mm512_fmsub_ps(z, invc, p);
    __m512 r = _mm512_sub_ps(p, _mm512_set1_ps(1.0f));
    __m512 s = _mm512_add_ps(kf, _mm512_permutexvar_ps(i, T[1]));
    __m512 ph = _mm512_mul_ps(r, c1h);
    __m512 pl = _mm512_fmsub_ps(r, c1h, ph);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(VM_POWF_P5), r, _mm512_set1_ps(VM_POWF_P4));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(VM_POWF_P3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(VM_POWF_P2));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(VM_POWF_C1L));
    __m512 hi = _mm512_add_ps(s, ph);
    __m512 err = _mm512_add_ps(_mm512_sub_ps(s, hi), ph);
    __m512 w = _mm512_fnmadd_ps(r, c1h, c1h);
    __m512 lo = _mm512_fmadd_ps(pe, w, _mm512_permutexvar_ps(i, T[2]));
    lo = _mm512_add_ps(lo, pl);
    lo = _mm512_fmadd_ps(r, q, lo);
    lo = _mm512_add_ps(lo, err);
    __m512 th = _mm512_mul_ps(y, hi);
    __m512 tl = _mm512_fmsub_ps(y, hi, th);
    tl = _mm512_fmadd_ps(y, lo, tl);
    __m512 ts = _mm512_add_ps(th, tl);
    *ok = _mm512_cmple_epu32_mask(ay_bits, _mm512_set1_epi32((int)VM_POWF_YMAX_BITS));
    *ok = _mm512_mask_cmp_ps_mask(*ok, ts, _mm512_set1_ps(-125.0f), _CMP_GE_OQ);
    *ok = _mm512_mask_cmp_ps_mask(*ok, ts, _mm512_set1_ps(127.0f), _CMP_LT_OQ);
    const __m512 shift = _mm512_set1_ps(VM_POWF_SHIFT);
    __m512 kd = _mm512_add_ps(ts, shift);
    __m512 m = _mm512_sub_ps(kd, shift);
    __m512 f = _mm512_add_ps(_mm512_sub_ps(th, m), tl);
    __m512i kb = _mm512_castps_si512(kd);
    __m512 eh = _mm512_permutexvar_ps(kb, T[3]);
    __m512 e = _mm512_fmadd_ps(_mm512_set1_ps(VM_POWF_E3), f, _mm512_set1_ps(VM_POWF_E2));
    e = _mm512_mul_ps(_mm512_fmadd_ps(e, f, _mm512_set1_ps(VM_POWF_E1)), f);
    __m512 res = _mm512_add_ps(eh, _mm512_fmadd_ps(eh, e, _mm512_permutexvar_ps(kb, T[4])));
    /* res 2^floor(m): exact where the form answers (m in [-125, 127]) */
    return _mm512_scalef_ps(res, m);
}

/* vm_pow_sign for 16 lanes, xneg the lanes where x < 0 (vm_pow_yclass:
 * the same float steps). */
VM_AVX512_INLINE __m512 vm_pow_sign_ps16(__m512 r, __m512 y, __mmask16 xneg)
{
    __m512 ay = vm_abs_ps(y);
    const __m512 two23 = _mm512_set1_ps(0x1p23f);
    __mmask16 below23 = _mm512_cmp_ps_mask(ay, two23, _CMP_LT_OQ);
    __m512 sh = _mm512_mask_add_ps(ay, below23, ay, two23);
    __mmask16 isint = (__mmask16)~below23 |
                      _mm512_cmp_ps_mask(_mm512_sub_ps(sh, two23), ay, _CMP_EQ_OQ);
    __mmask16 odd = isint & _mm512_cmp_ps_mask(ay, _mm512_set1_ps(0x1p24f), _CMP_LT_OQ) &
                    _mm512_test_epi32_mask(_mm512_castps_si512(sh), _mm512_set1_epi32(1));
    r = _mm512_castsi512_ps(_mm512_mask_xor_epi32(_mm512_castps_si512(r), xneg & odd,
                                                  _mm512_castps_si512(r),
                                                  _mm512_set1_epi32((int)0x80000000u)));
    return _mm512_mask_mov_ps(r, xneg & (__mmask16)~isint, _mm512_set1_ps(NAN));
}

/* The rest of x^y for 16 lanes (m: those to store) after the fast form
 * gave r and ok: the double form's lanes, the signs, the store, and libm's
 * lanes (from x and y, not from memory: o may be a or b). */
VM_AVX512_INLINE void vm_pow_rest_ps16(float *o, __mmask16 m, __m512 x, __m512 y, __m512i ax,
                                       __m512i ay_bits, __mmask16 ok, __m512 r,
                                       const __m512d *tabs)
{
    /* vm_pow_needs_slow */
    __mmask16 slow = _mm512_cmpge_epu32_mask(_mm512_sub_epi32(ax, _mm512_set1_epi32(0x00800000)),
                                             _mm512_set1_epi32(0x7f000000)) |
                     _mm512_cmpge_epu32_mask(ay_bits, _mm512_set1_epi32(0x7f800000));
    __mmask16 dbl = (__mmask16)~ok & (__mmask16)~slow & m;
    if (dbl) {
        r = _mm512_mask_mov_ps(r, dbl, vm_pow_double_abs_ps16(ax, y, tabs));
    }
    __mmask16 xneg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    if (xneg) { /* the sign rules change only negative bases */
        r = vm_pow_sign_ps16(r, y, xneg);
    }
    _mm512_mask_storeu_ps(o, m, r);
    slow &= m;
    if (slow) {
        float xs[16], ys[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(ys, y);
        for (int j = 0; j < 16; j++) {
            if (slow & (1u << j)) {
                o[j] = powf(xs[j], ys[j]);
            }
        }
    }
}

/* pow_f32_n_portable's results, 16 lanes a step; o may be a or b. Two
 * steps at a time, their fast forms side by side: each is one long chain
 * of dependent steps, and the pair kept the FP pipes busier (a tenth less
 * time, bench/vmath_kernels.c at 4K). */
VM_TARGET_AVX512 static void pow_f32_n_avx512(float *o, const float *a, const float *b,
                                              int64_t n)
{
    __m512 T[5] = {_mm512_loadu_ps(vm_powf_invc), _mm512_loadu_ps(vm_powf_logc_hi),
                   _mm512_loadu_ps(vm_powf_logc_lo), _mm512_loadu_ps(vm_powf_exp2_hi),
                   _mm512_loadu_ps(vm_powf_exp2_lo)};
    __m512d tabs[6];
    for (int h = 0; h < 2; h++) {
        tabs[h] = _mm512_loadu_pd(vm_pow_invc + 8 * h);
        tabs[2 + h] = _mm512_loadu_pd(vm_pow_logc + 8 * h);
        /* 2^(i/16) itself: the table's bits plus i << 48. */
        __m512i i48 = _mm512_slli_epi64(
            _mm512_add_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(8 * h)),
            48);
        tabs[4 + h] = _mm512_castsi512_pd(
            _mm512_add_epi64(_mm512_loadu_si512(vm_pow_exp2_tab + 8 * h), i48));
    }
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 x0 = _mm512_loadu_ps(a + i), x1 = _mm512_loadu_ps(a + i + 16);
        __m512 y0 = _mm512_loadu_ps(b + i), y1 = _mm512_loadu_ps(b + i + 16);
        __m512i ax0 = _mm512_and_si512(_mm512_castps_si512(x0), abs_mask);
        __m512i ax1 = _mm512_and_si512(_mm512_castps_si512(x1), abs_mask);
        __m512i ay0 = _mm512_and_si512(_mm512_castps_si512(y0), abs_mask);
        __m512i ay1 = _mm512_and_si512(_mm512_castps_si512(y1), abs_mask);
        __mmask16 ok0, ok1;
        __m512 r0 = vm_powf_abs_ps16(ax0, ay0, y0, T, &ok0);
        __m512 r1 = vm_powf_abs_ps16(ax1, ay1, y1, T, &ok1);
        vm_pow_rest_ps16(o + i, 0xffff, x0, y0, ax0, ay0, ok0, r0, tabs);
        vm_pow_rest_ps16(o + i + 16, 0xffff, x1, y1, ax1, ay1, ok1, r1, tabs);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 x = _mm512_maskz_loadu_ps(m, a + i);
        __m512 y = _mm512_maskz_loadu_ps(m, b + i);
        __m512i ax = _mm512_and_si512(_mm512_castps_si512(x), abs_mask);
        __m512i ay_bits = _mm512_and_si512(_mm512_castps_si512(y), abs_mask);
        __mmask16 ok;
        __m512 r = vm_powf_abs_ps16(ax, ay_bits, y, T, &ok);
        vm_pow_rest_ps16(o + i, m, x, y, ax, ay_bits, ok, r, tabs);
    }
}

/* tanh_f32 for 16 lanes: its operations, with 2^k applied by scalef (exact
 * here, as the multiplication: e is normal and k <= 29) and the sign by
 * one ternary logic step; 13% faster than GCC's vectorization of the
 * portable form (0.214 against 0.246 ns an element). */
VM_AVX512_INLINE __m512 vm_tanh_ps16(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 ax = vm_abs_ps(x);
    __m512 z = _mm512_mul_ps(ax, ax);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(-5.70498872745e-3f), z,
                               _mm512_set1_ps(2.06390887954e-2f));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(-5.37397155531e-2f));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(1.33314422036e-1f));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(-3.33332819422e-1f));
    __m512 p = _mm512_fmadd_ps(_mm512_mul_ps(q, z), ax, ax);
    /* min returns its second operand for NaN: 10, as the portable select */
    __m512 ac = _mm512_min_ps(ax, _mm512_set1_ps(10.0f));
    __m512 xc = _mm512_add_ps(ac, ac);
    const __m512 sh = _mm512_set1_ps(12582912.0f);
    __m512 kf = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), sh), sh);
    __m512 r = _mm512_fmadd_ps(kf, _mm512_set1_ps(-0.693359375f), xc);
    r = _mm512_fmadd_ps(kf, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r,
                               _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 e = _mm512_scalef_ps(_mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), one), kf);
    __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
    __m512 t = _mm512_mask_mov_ps(
        p, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_GE_OQ), big);
    /* t | (x & sign): 0xf8 is A | (B & C) */
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(t),
                                                         _mm512_castps_si512(x),
                                                         _mm512_set1_epi32((int)0x80000000u),
                                                         0xf8));
}

/* o[i] = F(a[i]) over n floats (o may be a), 16 lanes a step; the tail's
 * absent lanes read 0. */
#define VM_UNARY_AVX512(name, F)                                                   \
    VM_TARGET_AVX512 static void name(float *o, const float *a, int64_t n)         \
    {                                                                              \
        int64_t i = 0;                                                             \
        for (; i + 16 <= n; i += 16) {                                             \
            _mm512_storeu_ps(o + i, F(_mm512_loadu_ps(a + i)));                    \
        }                                                                          \
        if (i < n) {                                                               \
            __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);                       \
            _mm512_mask_storeu_ps(o + i, m, F(_mm512_maskz_loadu_ps(m, a + i)));   \
        }                                                                          \
    }
VM_UNARY_AVX512(tanh_f32_n_avx512, vm_tanh_ps16)

/* The four columns (c, invc, thi, tlo) of a 16-row table as registers, by
 * permutes of the rows as loaded: building them through a stack array cost
 * 13 ns a call here (16 scalar stores read back as one vector; the table
 * is a parameter, so GCC cannot fold them as it does in
 * VM_LOG1PT_AVX512), which a transposed 32x32 input, 32 calls of 32
 * elements, pays 32 times. */
_Static_assert(sizeof(vm_logt_row) == 4 * sizeof(float), "vm_logt_row: four floats, no padding");
VM_AVX512_INLINE void vm_logt_cols(const vm_logt_row *rows, __m512 *tab)
{
    const float *f = &rows[0].c;
    __m512 r0 = _mm512_loadu_ps(f), r1 = _mm512_loadu_ps(f + 16);
    __m512 r2 = _mm512_loadu_ps(f + 32), r3 = _mm512_loadu_ps(f + 48);
    for (int k = 0; k < 4; k++) {
        /* lanes 0-7: column k of the 8 rows in a pair of registers */
        __m512i idx = _mm512_add_epi32(
            _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28),
            _mm512_set1_epi32(k));
        __m512 lo = _mm512_permutex2var_ps(r0, idx, r1);
        __m512 hi = _mm512_permutex2var_ps(r2, idx, r3);
        tab[k] = _mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    }
}

/* The logarithms on a table of vm_logt_row: vm_logt_ps16's base. */
enum { VM_LOGT_2, VM_LOGT_10, VM_LOGT_E };

/* log2, log10 or log of 16 lanes as vm_log2t_finish, vm_log10t_finish and
 * vm_lnf_finish compute them; tab: the rows' c, invc, thi and tlo as four
 * registers. The special values are blended in only where a lane holds
 * one. */
VM_AVX512_INLINE __m512 vm_logt_ps16(__m512 x, const __m512 *tab, int base)
{
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_zero);
    __m512 e = _mm512_getexp_ps(x);
    const __m512 one = _mm512_set1_ps(1.0f);
    e = _mm512_mask_add_ps(e, _mm512_cmp_ps_mask(m, one, _CMP_LT_OQ), e, one);
    __m512i idx = _mm512_srli_epi32(_mm512_castps_si512(m), 19); /* the permutes read 4 bits */
    __m512 invc = _mm512_permutexvar_ps(idx, tab[1]);
    __m512 thi = _mm512_permutexvar_ps(idx, tab[2]);
    __m512 tlo = _mm512_permutexvar_ps(idx, tab[3]);
    __m512 q, s, lo, res;
    if (base == VM_LOGT_E) {
        __m512 ph = _mm512_mul_ps(m, invc);
        __m512 pl = _mm512_fmsub_ps(m, invc, ph);
        __m512 r = _mm512_sub_ps(ph, one);
        q = _mm512_fmadd_ps(_mm512_set1_ps(-1.673280746e-01f), r, _mm512_set1_ps(2.007838190e-01f));
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(-2.499992847e-01f));
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(3.333323896e-01f));
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(-5.000000000e-01f));
        __m512 p = _mm512_mul_ps(r, _mm512_mul_ps(r, q));
        s = _mm512_fmadd_ps(e, _mm512_set1_ps(VM_LN2_HI), thi);
        __m512 hi = _mm512_add_ps(s, r);
        __m512 err = _mm512_sub_ps(r, _mm512_sub_ps(hi, s));
        lo = _mm512_add_ps(_mm512_add_ps(_mm512_fmadd_ps(e, _mm512_set1_ps(VM_LN2_LO), tlo),
                                         _mm512_fnmadd_ps(r, pl, pl)),
                           _mm512_add_ps(p, err));
        res = _mm512_add_ps(hi, lo);
    } else {
        __m512 c = _mm512_permutexvar_ps(idx, tab[0]);
        __m512 r = _mm512_mul_ps(_mm512_sub_ps(m, c), invc);
        __m512 a0lo, a0hi;
        if (base == VM_LOGT_10) {
            q = vm_horner5_fma_ps(r, -7.266966254e-02f, 8.719930798e-02f,
                                  -1.085733101e-01f, 1.447644085e-01f, -2.171472460e-01f);
            a0lo = _mm512_set1_ps(VM_LOG10T_A0_LO);
            a0hi = _mm512_set1_ps(VM_LOG10T_A0_HI);
            s = _mm512_add_ps(_mm512_mul_ps(e, _mm512_set1_ps(VM_LOG10_2_HI)), thi);
            tlo = _mm512_add_ps(tlo, _mm512_mul_ps(e, _mm512_set1_ps(VM_LOG10_2_LO)));
        } else {
            q = vm_horner5_fma_ps(r, -2.414033860e-01f, 2.896698117e-01f,
                                  -3.606727123e-01f, 4.808969796e-01f, -7.213475108e-01f);
            a0lo = _mm512_set1_ps(VM_LOG2T_A0_LO);
            a0hi = _mm512_set1_ps(VM_LOG2T_A0_HI);
            s = _mm512_add_ps(e, thi);
        }
        __m512 p = _mm512_fmadd_ps(r, a0lo, _mm512_mul_ps(r, _mm512_mul_ps(r, q)));
        lo = _mm512_add_ps(tlo, _mm512_add_ps(_mm512_mul_ps(r, a0hi), p));
        res = _mm512_add_ps(s, lo);
    }
    /* +-0, negative, inf and NaN: the bits less 1 are at least FLT_MAX's. */
    __mmask16 sp = _mm512_cmpge_epu32_mask(
        _mm512_sub_epi32(_mm512_castps_si512(x), _mm512_set1_epi32(1)),
        _mm512_set1_epi32(0x7f7fffff));
    if (sp) {
        __m512 zero = _mm512_setzero_ps();
        res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ),
                                 _mm512_set1_ps(-INFINITY));
        res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ),
                                 _mm512_set1_ps(INFINITY));
        res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, zero, _CMP_NGE_UQ),
                                 _mm512_set1_ps(NAN));
    }
    return res;
}

VM_AVX512_INLINE void vm_logt_n_avx512(float *o, const float *a, int64_t n,
                                       const vm_logt_row *rows, int base)
{
    __m512 tab[4];
    vm_logt_cols(rows, tab);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(o + i, vm_logt_ps16(_mm512_loadu_ps(a + i), tab, base));
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        /* The absent lanes read 1, which takes no special path. */
        __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, a + i);
        _mm512_mask_storeu_ps(o + i, m, vm_logt_ps16(x, tab, base));
    }
}

VM_TARGET_AVX512 static void log2_f32_n_avx512(float *o, const float *a, int64_t n)
{
    vm_logt_n_avx512(o, a, n, vm_log2t_tab, VM_LOGT_2);
}

VM_TARGET_AVX512 static void log10_f32_n_avx512(float *o, const float *a, int64_t n)
{
    vm_logt_n_avx512(o, a, n, vm_log10t_tab, VM_LOGT_10);
}

VM_TARGET_AVX512 static void log_f32_n_avx512(float *o, const float *a, int64_t n)
{
    vm_logt_n_avx512(o, a, n, vm_lnf_tab, VM_LOGT_E);
}

/* exp2_f32 for 16 lanes: the clamps keep NaN (min and max return their
 * second operand when either is NaN), roundscale is the 1.5 * 2^23
 * rounding, and scalef rounds p 2^k once, as the two exact halves and one
 * rounding do. */
VM_AVX512_INLINE __m512 vm_exp2_ps16(__m512 x)
{
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(128.0f), x);
    xc = _mm512_max_ps(_mm512_set1_ps(-151.0f), xc);
    __m512 kf = _mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(xc, kf);
    __m512 p = vm_horner5_fma_ps(r, 1.5353361959569156e-04f, 1.3398875016719103e-03f,
                                 9.6184369176626205e-03f, 5.5503323674201965e-02f,
                                 2.4022647738456726e-01f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.9314718246459961e-01f));
    p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, kf);
}

VM_UNARY_AVX512(exp2_f32_n_avx512, vm_exp2_ps16)

/* vm_log1pt_core for 16 lanes; tab as for vm_logt_ps16. any_small (a
 * constant where inlined): whether a lane may have |xc| < 1/16 or lo may
 * be nonzero; atanh's lanes that use the result have xc >= 2 and no lo,
 * and skip those steps, with the same results (0.65 against 0.75 ns an
 * element, bench/vmath_kernels.c at 4K). */
VM_AVX512_INLINE __m512 vm_log1pt_core_any_ps16(__m512 xc, __m512 lo, const __m512 *tab,
                                                int any_small)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 zero = _mm512_setzero_ps();
    __m512 u = _mm512_add_ps(one, xc);
    __m512 m = _mm512_getmant_ps(u, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_zero);
    __m512 e = _mm512_getexp_ps(u);
    e = _mm512_mask_add_ps(e, _mm512_cmp_ps_mask(m, one, _CMP_LT_OQ), e, one);
    __m512i idx = _mm512_srli_epi32(_mm512_castps_si512(m), 19);
    __m512 c = _mm512_permutexvar_ps(idx, tab[0]);
    __m512 invc = _mm512_permutexvar_ps(idx, tab[1]);
    __m512 thi = _mm512_permutexvar_ps(idx, tab[2]);
    __m512 tlo = _mm512_permutexvar_ps(idx, tab[3]);
    __m512 r = _mm512_mul_ps(_mm512_sub_ps(m, c), invc);
    __m512 corr = _mm512_sub_ps(xc, _mm512_sub_ps(u, one));
    if (any_small) {
        corr = _mm512_add_ps(corr, lo);
    }
    corr = _mm512_div_ps(corr, u);
    __m512 s = _mm512_add_ps(_mm512_mul_ps(e, _mm512_set1_ps(VM_LN2_HI)), thi);
    __m512 tl = _mm512_add_ps(tlo, _mm512_mul_ps(e, _mm512_set1_ps(VM_LN2_LO)));
    tl = _mm512_add_ps(tl, corr);
    if (any_small) {
        __mmask16 small = _mm512_cmp_ps_mask(vm_abs_ps(xc), _mm512_set1_ps(0.0625f), _CMP_LT_OQ);
        r = _mm512_mask_mov_ps(r, small, xc);
        s = _mm512_mask_mov_ps(s, small, zero);
        tl = _mm512_mask_mov_ps(tl, small, lo);
    }
    /* VM_LNT_Q1 */
    __m512 q = vm_horner5_fma_ps(r, -1.673280746e-01f, 2.007838190e-01f,
                                 -2.499992847e-01f, 3.333323896e-01f, -5.000000000e-01f);
    __m512 p = _mm512_mul_ps(r, _mm512_mul_ps(r, q));
    return _mm512_add_ps(s, _mm512_add_ps(tl, _mm512_add_ps(r, p)));
}

VM_AVX512_INLINE __m512 vm_log1pt_core_ps16(__m512 xc, __m512 lo, const __m512 *tab)
{
    return vm_log1pt_core_any_ps16(xc, lo, tab, 1);
}

/* log1p, asinh and atanh of 16 lanes as their portable forms. */
VM_AVX512_INLINE __m512 vm_log1p_ps16(__m512 x, const __m512 *tab)
{
    const __m512 zero = _mm512_setzero_ps();
    __m512 res = vm_log1pt_core_ps16(x, zero, tab);
    /* -1 and below, NaN, +inf, +-0: vm_log1p_specials_f32. */
    __mmask16 sp = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-1.0f), _CMP_NGT_UQ) |
                   _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ) |
                   _mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ);
    if (sp) {
        res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-1.0f), _CMP_EQ_OQ),
                                 _mm512_set1_ps(-INFINITY));
        res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ),
                                 _mm512_set1_ps(INFINITY));
        res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-1.0f), _CMP_NGE_UQ),
                                 _mm512_set1_ps(NAN));
        res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ), x);
    }
    return res;
}

/* The tail asinh and acosh share: log1p(u + l) on the lanes up to 2^24,
 * log1p(a) + log 2 on those above (big), inf on inf. */
VM_AVX512_INLINE __m512 vm_log1p_or_big_ps16(__m512 u, __m512 l, __m512 a,
                                             __mmask16 big, __mmask16 inf,
                                             const __m512 *tab)
{
    __m512 lo = _mm512_mask_mov_ps(l, big, _mm512_setzero_ps());
    __m512 xc = _mm512_mask_mov_ps(u, big, _mm512_mask_mov_ps(a, inf, _mm512_set1_ps(1.0f)));
    __m512 r = vm_log1pt_core_ps16(xc, lo, tab);
    r = _mm512_mask_add_ps(r, big, r, _mm512_set1_ps(0.693147182f));
    return _mm512_mask_mov_ps(r, inf, _mm512_set1_ps(INFINITY));
}

/* asinh |x| from a = |x|; any_big (a constant where inlined) says whether
 * a lane of big (a > 2^24) is there: most blocks have none, and skip the
 * blends of vm_log1p_or_big_ps16 (the AVX-512 forms spend their time in
 * the FP pipes, so each step left out counts). */
VM_AVX512_INLINE __m512 vm_asinh_abs_ps16(__m512 a, __mmask16 big, int any_big,
                                          const __m512 *tab)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 ac = any_big ? _mm512_mask_mov_ps(a, big, one) : a;
    __m512 a2 = _mm512_mul_ps(ac, ac);
    __m512 q = _mm512_div_ps(a2, _mm512_add_ps(one, _mm512_sqrt_ps(_mm512_add_ps(one, a2))));
    __m512 u = _mm512_add_ps(ac, q);
    __m512 l = _mm512_add_ps(_mm512_sub_ps(ac, u), q);
    if (!any_big) {
        return vm_log1pt_core_ps16(u, l, tab);
    }
    __mmask16 inf = _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.40282347e38f), _CMP_GT_OQ);
    return vm_log1p_or_big_ps16(u, l, a, big, inf, tab);
}

/* r with x's sign bit xored in (vm_xor_sign): one ternary-logic step. */
VM_AVX512_INLINE __m512 vm_xor_sign_ps(__m512 r, __m512 x)
{
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_castps_si512(r), _mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u),
        0x78)); /* r ^ (x & sign) */
}

VM_AVX512_INLINE __m512 vm_asinh_ps16(__m512 x, const __m512 *tab)
{
    __m512 a = vm_abs_ps(x);
    __mmask16 big = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p24f), _CMP_GT_OQ);
    __m512 r = big ? vm_asinh_abs_ps16(a, big, 1, tab) : vm_asinh_abs_ps16(a, 0, 0, tab);
    return vm_xor_sign_ps(r, x);
}

/* atanh; the blends for |x| >= 1 (and NaN) only where a lane needs them. */
VM_AVX512_INLINE __m512 vm_atanh_ps16(__m512 x, const __m512 *tab)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 a = vm_abs_ps(x);
    __mmask16 out = _mm512_cmp_ps_mask(a, one, _CMP_NLT_UQ);
    __m512 ac = out ? _mm512_mask_mov_ps(a, out, _mm512_set1_ps(0.5f)) : a;
    __m512 xc = _mm512_div_ps(_mm512_add_ps(ac, ac), _mm512_sub_ps(one, ac));
    __m512 big = _mm512_mul_ps(_mm512_set1_ps(0.5f),
                               vm_log1pt_core_any_ps16(xc, _mm512_setzero_ps(), tab, 0));
    if (out) {
        big = _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(a, one, _CMP_EQ_OQ),
                                 _mm512_set1_ps(INFINITY));
    }
    big = vm_xor_sign_ps(big, x); /* x is not 0 where big is taken */
    __m512 z = _mm512_mul_ps(x, x);
    __m512 p = vm_horner5_fma_ps(z, 1.81740078349e-1f, 8.24370301058e-2f,
                                 1.46691431730e-1f, 1.99782164500e-1f, 3.33337300303e-1f);
    p = _mm512_mul_ps(p, z);
    __m512 small = _mm512_fmadd_ps(x, p, x);
    __m512 r = _mm512_mask_mov_ps(small, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.5f), _CMP_GE_OQ),
                                  big);
    if (out) {
        r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, one, _CMP_GT_OQ), _mm512_set1_ps(NAN));
    }
    return r;
}

/* acosh x for x up to 2^24 (any_big as for vm_asinh_abs_ps16). Where no
 * lane is big, x below 1 enters as it is (its root may be NaN): the result
 * there is NaN whatever it computes. */
VM_AVX512_INLINE __m512 vm_acosh_some_ps16(__m512 x, __mmask16 big, int any_big,
                                           const __m512 *tab)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 d = x;
    if (any_big) {
        __mmask16 in = _mm512_cmp_ps_mask(x, one, _CMP_GE_OQ) & (__mmask16)~big;
        d = _mm512_mask_mov_ps(one, in, x);
    }
    __m512 xm = _mm512_sub_ps(d, one);
    __m512 sq = _mm512_sqrt_ps(_mm512_fmadd_ps(xm, xm, _mm512_add_ps(xm, xm)));
    __m512 u = _mm512_add_ps(sq, xm);
    __m512 l = _mm512_add_ps(_mm512_sub_ps(sq, u), xm);
    if (!any_big) {
        return vm_log1pt_core_ps16(u, l, tab);
    }
    __mmask16 inf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(3.40282347e38f), _CMP_GT_OQ);
    return vm_log1p_or_big_ps16(u, l, x, big, inf, tab);
}

VM_AVX512_INLINE __m512 vm_acosh_ps16(__m512 x, const __m512 *tab)
{
    __mmask16 big = _mm512_cmp_ps_mask(x, _mm512_set1_ps(0x1p24f), _CMP_GT_OQ);
    __m512 r = big ? vm_acosh_some_ps16(x, big, 1, tab) : vm_acosh_some_ps16(x, 0, 0, tab);
    /* below 1, and NaN */
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_set1_ps(1.0f), _CMP_NGE_UQ),
                              _mm512_set1_ps(NAN));
}

/* o[i] = F(a[i]) over n floats for the 16-lane forms on the log table. */
#define VM_LOG1PT_AVX512(name, F)                                                  \
    VM_TARGET_AVX512 static void name(float *o, const float *a, int64_t n)         \
    {                                                                              \
        float cols[4][16];                                                         \
        vm_logt_columns(vm_lnt_tab, cols);                                         \
        __m512 tab[4];                                                             \
        for (int k = 0; k < 4; k++) {                                              \
            tab[k] = _mm512_loadu_ps(cols[k]);                                     \
        }                                                                          \
        int64_t i = 0;                                                             \
        for (; i + 16 <= n; i += 16) {                                             \
            _mm512_storeu_ps(o + i, F(_mm512_loadu_ps(a + i), tab));               \
        }                                                                          \
        if (i < n) {                                                               \
            __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);                       \
            __m512 x = _mm512_maskz_loadu_ps(m, a + i);                            \
            _mm512_mask_storeu_ps(o + i, m, F(x, tab));                            \
        }                                                                          \
    }
VM_LOG1PT_AVX512(log1p_f32_n_avx512, vm_log1p_ps16)
VM_LOG1PT_AVX512(asinh_f32_n_avx512, vm_asinh_ps16)
VM_LOG1PT_AVX512(atanh_f32_n_avx512, vm_atanh_ps16)
VM_LOG1PT_AVX512(acosh_f32_n_avx512, vm_acosh_ps16)
#endif

/* x^y over n float32 pairs (o may be a or b): the AVX-512 form where the
 * CPU has it, else the portable one (which the callers' SIMD clones
 * vectorize for AVX2). */
VM_INLINE void pow_f32_n(float *o, const float *a, const float *b, int64_t n)
{
#ifdef VM_HAVE_AVX512
    if (vm_cpu_avx512()) {
        pow_f32_n_avx512(o, a, b, n);
        return;
    }
#endif
    pow_f32_n_portable(o, a, b, n);
}

/* log2 and log10 over n float32 (o may be a), by the AVX-512 form where
 * the CPU has it. */
VM_INLINE void log2_f32_n(float *o, const float *a, int64_t n)
{
#ifdef VM_HAVE_AVX512
    if (vm_cpu_avx512()) {
        log2_f32_n_avx512(o, a, n);
        return;
    }
#endif
    log2_f32_n_portable(o, a, n);
}

VM_INLINE void log10_f32_n(float *o, const float *a, int64_t n)
{
#ifdef VM_HAVE_AVX512
    if (vm_cpu_avx512()) {
        log10_f32_n_avx512(o, a, n);
        return;
    }
#endif
    log10_f32_n_portable(o, a, n);
}

/* tanh, log, exp2, log1p, asinh, acosh and atanh over n float32 (o may be
 * a). */
#ifdef VM_HAVE_AVX512
#define VM_DISPATCH(name)                  \
    if (vm_cpu_avx512()) {                 \
        name##_avx512(o, a, n);            \
        return;                            \
    }                                      \
    name##_portable(o, a, n)
#else
#define VM_DISPATCH(name) name##_portable(o, a, n)
#endif
VM_INLINE void tanh_f32_n(float *o, const float *a, int64_t n)
{
    VM_DISPATCH(tanh_f32_n);
}

VM_INLINE void log_f32_n(float *o, const float *a, int64_t n)
{
    VM_DISPATCH(log_f32_n);
}

VM_INLINE void exp2_f32_n(float *o, const float *a, int64_t n)
{
    VM_DISPATCH(exp2_f32_n);
}

VM_INLINE void log1p_f32_n(float *o, const float *a, int64_t n)
{
    VM_DISPATCH(log1p_f32_n);
}

VM_INLINE void asinh_f32_n(float *o, const float *a, int64_t n)
{
    VM_DISPATCH(asinh_f32_n);
}

VM_INLINE void atanh_f32_n(float *o, const float *a, int64_t n)
{
    VM_DISPATCH(atanh_f32_n);
}

VM_INLINE void acosh_f32_n(float *o, const float *a, int64_t n)
{
    VM_DISPATCH(acosh_f32_n);
}

#endif
