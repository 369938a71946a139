/* Max, min and the index of either over a run of int32, int64, float32 or
 * float64 elements, in vectors of lanes: one form per vector width (16, 32
 * and 64 bytes), each built for the CPUs that have it, and the pick of the
 * widest one the CPU runs (ext_index_SUF, ext_value_SUF). Static functions:
 * reduce.c and the test of every form (tests/tensor/test_extrema.c)
 * include it. */
#ifndef EV_OPS_EXTREMA_H
#define EV_OPS_EXTREMA_H

#include <stdint.h>
#include <string.h>

#include "ops/ops-impl.h"

/* A form's two lane loops carry its target (nothing for the base form);
 * the scalar loops and the drivers around them need none. */
#define EXT_BASE

/* Max/min and their indices. Floats propagate NaN: the index of the first
 * NaN wins (NumPy), and otherwise the first occurrence of the extreme
 * value. The elements are reduced in four vectors of lanes (GCC's generic
 * vectors, one register each: a vector wider than the CPU's is not split
 * well, GCC moved 64-byte ones lane by lane in the AVX2 and SSE2 builds, at
 * 2.5 ns an element), each lane keeping its extreme and the index where it first
 * saw it (a strict comparison, which no NaN passes). Beside them runs a sum
 * of x - x, 0 until a NaN or an infinity comes by (a compare would be
 * cheaper, but GCC does not vectorize a NaN test); after each chunk of
 * EXT_CHUNK elements a nonzero sum sends the scalar loop over the chunk
 * to look for a NaN, the first of which ends the search. At the end the
 * lanes give the extreme and, among the lanes that hold it, the smallest
 * index: the first occurrence, as the scalar loop finds. */
#define EXT_CHUNK 4096
/* o = the vector whose lane j is lane m[j] of v (VL lanes): one permute
 * under GCC, a loop of lanes elsewhere. */
#if defined(__GNUC__) && !defined(__clang__)
#define LANE_PERMUTE(o, v, m, VL) ((o) = __builtin_shuffle(v, m))
#else
#define LANE_PERMUTE(o, v, m, VL)                                              \
    do {                                                                       \
        for (int q_ = 0; q_ < (VL); q_++) {                                    \
            (o)[q_] = (v)[(m)[q_]];                                            \
        }                                                                      \
    } while (0)
#endif
#define EXT_MAX_RUN ((int64_t)1 << 30) /* lane indexes are 32-bit for 32-bit types */

#define EXT_STEP(CMP, VL, IT)                                                  \
    for (; i + 4 * VL <= end; i += 4 * VL) {                                   \
        LANE_UNROLL                                                            \
        for (int k = 0; k < 4; k++) {                                          \
            V v;                                                               \
            memcpy(&v, x + i + k * VL, sizeof v);                              \
            VI c = v CMP acc[k];                                               \
            acc[k] = (V)(((VI)v & c) | ((VI)acc[k] & ~c));                     \
            VI here = iota + (IT)(i + k * VL);                                 \
            at[k] = (here & c) | (at[k] & ~c);                                 \
            chk[k] += v - v;                                                   \
        }                                                                      \
    }

#define EXTREMA(SUF, T, IT, VL, ISNAN, TARGET)                                 \
    typedef T v_##SUF __attribute__((vector_size(VL * sizeof(T))));           \
    typedef IT vi_##SUF __attribute__((vector_size(VL * sizeof(T))));         \
    static int64_t extrema_scalar_##SUF(const T *x, int64_t n, int want_max)   \
    {                                                                          \
        T m = x[0];                                                            \
        int64_t at = 0;                                                        \
        for (int64_t i = 1; i < n && !ISNAN(m); i++) {                         \
            T v = x[i];                                                        \
            if ((want_max ? v > m : v < m) || ISNAN(v)) {                      \
                m = v;                                                         \
                at = i;                                                        \
            }                                                                  \
        }                                                                      \
        return at;                                                             \
    }                                                                          \
    /* The index of the first NaN of x[0..n), or -1. */                       \
    static int64_t first_nan_##SUF(const T *x, int64_t n)                      \
    {                                                                          \
        (void)x; /* integers have none */                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            if (ISNAN(x[i])) {                                                 \
                return i;                                                      \
            }                                                                  \
        }                                                                      \
        return -1;                                                             \
    }                                                                          \
    /* 1 if a lane of an x - x sum is not 0 (saw a NaN or an infinity). */     \
    static inline int ext_dirty1_##SUF(v_##SUF chk)                            \
    {                                                                          \
        vi_##SUF bits = (vi_##SUF)chk;                                         \
        IT any = 0;                                                            \
        LANE_UNROLL                                                            \
        for (int j = 0; j < VL; j++) {                                         \
            any |= bits[j];                                                    \
        }                                                                      \
        return any != 0;                                                       \
    }                                                                          \
    /* ext_dirty1 of four sums. */                                             \
    static inline int ext_dirty_##SUF(const v_##SUF *chk)                      \
    {                                                                          \
        return ext_dirty1_##SUF((chk[0] + chk[1]) + (chk[2] + chk[3]));        \
    }                                                                          \
    /* The extreme of *v's lanes, into every lane: butterflies of shuffles,    \
     * each a compare feeding a select (GCC vectorizes that form, but          \
     * scalarizes masks combined with & and |). By pointer, as ext_dirty:      \
     * a vector by value changes the ABI between the forms. */                 \
    static inline void lanes_extreme_##SUF(v_##SUF *vp, int want_max)          \
    {                                                                          \
        v_##SUF v = *vp;                                                       \
        vi_##SUF iota;                                                         \
        for (int j = 0; j < VL; j++) {                                         \
            iota[j] = (IT)j;                                                   \
        }                                                                      \
        LANE_UNROLL                                                            \
        for (int h = VL / 2; h > 0; h /= 2) {                                  \
            v_##SUF o;                                                         \
            LANE_PERMUTE(o, v, iota ^ (IT)h, VL);                              \
            vi_##SUF c = want_max ? o > v : o < v;                             \
            v = (v_##SUF)(((vi_##SUF)o & c) | ((vi_##SUF)v & ~c));             \
        }                                                                      \
        *vp = v;                                                               \
    }                                                                          \
    /* The smallest of *cp's lanes (an index), by the same butterflies. */     \
    static inline int64_t lanes_min_##SUF(const vi_##SUF *cp)                  \
    {                                                                          \
        vi_##SUF cand = *cp;                                                   \
        vi_##SUF iota;                                                         \
        for (int j = 0; j < VL; j++) {                                         \
            iota[j] = (IT)j;                                                   \
        }                                                                      \
        LANE_UNROLL                                                            \
        for (int h = VL / 2; h > 0; h /= 2) {                                  \
            vi_##SUF o;                                                        \
            LANE_PERMUTE(o, cand, iota ^ (IT)h, VL);                           \
            vi_##SUF c = o < cand;                                             \
            cand = (o & c) | (cand & ~c);                                      \
        }                                                                      \
        return cand[0];                                                        \
    }                                                                          \
    /* The index of the extreme of x[0..n), VL <= n <= EXT_MAX_RUN. */        \
    TARGET                                                                     \
    static int64_t extrema_lanes_##SUF(const T *x, int64_t n, int want_max)    \
    {                                                                          \
        typedef v_##SUF V;                                                     \
        typedef vi_##SUF VI;                                                   \
        V acc[4], chk[4];                                                      \
        VI at[4], iota;                                                        \
        for (int j = 0; j < VL; j++) {                                         \
            iota[j] = (IT)j;                                                   \
        }                                                                      \
        /* Short inputs start the spare vectors as copies of the first. */    \
        int64_t nv = n / VL < 4 ? n / VL : 4;                                  \
        for (int k = 0; k < 4; k++) {                                          \
            int64_t kk = k < nv ? k : 0;                                       \
            memcpy(&acc[k], x + kk * VL, sizeof acc[k]);                       \
            at[k] = iota + (IT)(kk * VL);                                      \
            chk[k] = acc[k] - acc[k];                                          \
        }                                                                      \
        int64_t i = nv * VL, from = 0;                                         \
        while (i + 4 * VL <= n) {                                              \
            int64_t end = from + EXT_CHUNK < n ? from + EXT_CHUNK : n;         \
            if (want_max) {                                                    \
                EXT_STEP(>, VL, IT)                                            \
            } else {                                                           \
                EXT_STEP(<, VL, IT)                                            \
            }                                                                  \
            if (ext_dirty_##SUF(chk)) {                                        \
                int64_t k = first_nan_##SUF(x + from, i - from);               \
                if (k >= 0) {                                                  \
                    return from + k;                                           \
                }                                                              \
                for (int q = 0; q < 4; q++) {                                  \
                    chk[q] = (V){0}; /* infinities only: start again */        \
                }                                                              \
            }                                                                  \
            from = i;                                                          \
        }                                                                      \
        /* The last whole vectors go into the first lanes. */                 \
        for (; i + VL <= n; i += VL) {                                         \
            V v;                                                               \
            memcpy(&v, x + i, sizeof v);                                       \
            VI c = want_max ? v > acc[0] : v < acc[0];                         \
            acc[0] = (V)(((VI)v & c) | ((VI)acc[0] & ~c));                     \
            at[0] = ((iota + (IT)i) & c) | (at[0] & ~c);                       \
            chk[0] += v - v;                                                   \
        }                                                                      \
        /* The unchecked rest: since from if the sums saw something, else    \
         * only the scalar tail. */                                           \
        int64_t rest = ext_dirty_##SUF(chk) ? from : i;                        \
        int64_t k = first_nan_##SUF(x + rest, n - rest);                       \
        if (k >= 0) {                                                          \
            return rest + k;                                                   \
        }                                                                      \
        /* The extreme per lane over the four vectors, then per lane the    \
         * smallest index holding it, then the same across the lanes. Each   \
         * step is a compare feeding a select: GCC vectorizes that form, but  \
         * scalarizes masks combined with & and |. */                         \
        V mv = acc[0];                                                         \
        for (int q = 1; q < 4; q++) {                                          \
            VI c = want_max ? acc[q] > mv : acc[q] < mv;                       \
            mv = (V)(((VI)acc[q] & c) | ((VI)mv & ~c));                        \
        }                                                                      \
        VI big = iota * 0 + (IT)n;                                             \
        VI bi = big;                                                           \
        for (int q = 0; q < 4; q++) {                                          \
            VI e = acc[q] == mv;                                               \
            VI cand = (at[q] & e) | (big & ~e);                                \
            VI c = cand < bi;                                                  \
            bi = (cand & c) | (bi & ~c);                                       \
        }                                                                      \
        /* Across the lanes: the extreme, then the smallest index of a lane    \
         * that holds it. */                                                   \
        V mall = mv;                                                           \
        lanes_extreme_##SUF(&mall, want_max);                                  \
        VI e = mv == mall;                                                     \
        VI cand = (bi & e) | (big & ~e);                                       \
        T m = mall[0];                                                         \
        int64_t best = lanes_min_##SUF(&cand);                                 \
        for (; i < n; i++) {                                                   \
            if (want_max ? x[i] > m : x[i] < m) {                              \
                m = x[i];                                                      \
                best = i;                                                      \
            }                                                                  \
        }                                                                      \
        return best;                                                           \
    }                                                                          \
    /* The extreme value alone of x[0..n), VL <= n (max/min need no        \
     * index): lanes without indexes, NaN as soon as a chunk holds one. */     \
    TARGET                                                                     \
    static T extval_lanes_##SUF(const T *x, int64_t n, int want_max)           \
    {                                                                          \
        typedef v_##SUF V;                                                     \
        typedef vi_##SUF VI;                                                   \
        V acc[4], chk[4];                                                      \
        int64_t nv = n / VL < 4 ? n / VL : 4;                                  \
        for (int k = 0; k < 4; k++) {                                          \
            memcpy(&acc[k], x + (k < nv ? k : 0) * VL, sizeof acc[k]);         \
            chk[k] = acc[k] - acc[k];                                          \
        }                                                                      \
        int64_t i = nv * VL, from = 0;                                         \
        while (i + 4 * VL <= n) {                                              \
            int64_t end = from + EXT_CHUNK < n ? from + EXT_CHUNK : n;         \
            for (; i + 4 * VL <= end; i += 4 * VL) {                           \
                LANE_UNROLL                                                    \
                for (int k = 0; k < 4; k++) {                                  \
                    V v;                                                       \
                    memcpy(&v, x + i + k * VL, sizeof v);                      \
                    VI c = want_max ? v > acc[k] : v < acc[k];                 \
                    acc[k] = (V)(((VI)v & c) | ((VI)acc[k] & ~c));             \
                    chk[k] += v - v;                                           \
                }                                                              \
            }                                                                  \
            if (ext_dirty_##SUF(chk)) {                                        \
                int64_t k = first_nan_##SUF(x + from, i - from);               \
                if (k >= 0) {                                                  \
                    return x[from + k];                                        \
                }                                                              \
                for (int q = 0; q < 4; q++) {                                  \
                    chk[q] = (V){0};                                           \
                }                                                              \
            }                                                                  \
            from = i;                                                          \
        }                                                                      \
        for (; i + VL <= n; i += VL) {                                         \
            V v;                                                               \
            memcpy(&v, x + i, sizeof v);                                       \
            VI c = want_max ? v > acc[0] : v < acc[0];                         \
            acc[0] = (V)(((VI)v & c) | ((VI)acc[0] & ~c));                     \
            chk[0] += v - v;                                                   \
        }                                                                      \
        int64_t rest = ext_dirty_##SUF(chk) ? from : i;                        \
        int64_t k = first_nan_##SUF(x + rest, n - rest);                       \
        if (k >= 0) {                                                          \
            return x[rest + k];                                                \
        }                                                                      \
        for (int q = 1; q < 4; q++) {                                          \
            VI c = want_max ? acc[q] > acc[0] : acc[q] < acc[0];               \
            acc[0] = (V)(((VI)acc[q] & c) | ((VI)acc[0] & ~c));                \
        }                                                                      \
        lanes_extreme_##SUF(&acc[0], want_max);                                \
        T m = acc[0][0];                                                       \
        for (; i < n; i++) {                                                   \
            m = (want_max ? x[i] > m : x[i] < m) ? x[i] : m;                   \
        }                                                                      \
        return m;                                                              \
    }                                                                          \
    /* The extreme value of a short run, VL <= n < 16 * VL (rows of a      \
     * reduction along a short dimension): one vector of lanes in a         \
     * register, the last one overlapping the one before (a max counts an   \
     * element twice at no cost) instead of a scalar tail. */               \
    TARGET                                                                     \
    static T extval_short_##SUF(const T *x, int64_t n, int want_max)           \
    {                                                                          \
        typedef v_##SUF V;                                                     \
        typedef vi_##SUF VI;                                                   \
        V acc, chk, v;                                                         \
        memcpy(&acc, x, sizeof acc);                                           \
        chk = acc - acc;                                                       \
        for (int64_t i = VL; i < n; i += VL) {                                 \
            memcpy(&v, x + (i + VL <= n ? i : n - VL), sizeof v);              \
            VI c = want_max ? v > acc : v < acc;                               \
            acc = (V)(((VI)v & c) | ((VI)acc & ~c));                           \
            chk += v - v;                                                      \
        }                                                                      \
        if (ext_dirty1_##SUF(chk)) {                                           \
            int64_t k = first_nan_##SUF(x, n);                                 \
            if (k >= 0) {                                                      \
                return x[k];                                                   \
            }                                                                  \
        }                                                                      \
        lanes_extreme_##SUF(&acc, want_max);                                   \
        return acc[0];                                                         \
    }                                                                          \
    /* The index of the extreme of a short run, as extval_short: each lane  \
     * keeps the index where it first saw its extreme (the overlapping      \
     * vector sees some elements again, at their own indexes). */          \
    TARGET                                                                     \
    static int64_t extrema_short_##SUF(const T *x, int64_t n, int want_max)    \
    {                                                                          \
        typedef v_##SUF V;                                                     \
        typedef vi_##SUF VI;                                                   \
        V acc, chk, v;                                                         \
        VI iota, at;                                                           \
        for (int j = 0; j < VL; j++) {                                         \
            iota[j] = (IT)j;                                                   \
        }                                                                      \
        memcpy(&acc, x, sizeof acc);                                           \
        chk = acc - acc;                                                       \
        at = iota;                                                             \
        for (int64_t i = VL; i < n; i += VL) {                                 \
            int64_t b = i + VL <= n ? i : n - VL;                              \
            memcpy(&v, x + b, sizeof v);                                       \
            VI c = want_max ? v > acc : v < acc;                               \
            acc = (V)(((VI)v & c) | ((VI)acc & ~c));                           \
            at = ((iota + (IT)b) & c) | (at & ~c);                             \
            chk += v - v;                                                      \
        }                                                                      \
        if (ext_dirty1_##SUF(chk)) {                                           \
            int64_t k = first_nan_##SUF(x, n);                                 \
            if (k >= 0) {                                                      \
                return k;                                                      \
            }                                                                  \
        }                                                                      \
        V mall = acc;                                                          \
        lanes_extreme_##SUF(&mall, want_max);                                  \
        VI e = acc == mall;                                                    \
        VI cand = (at & e) | ((iota * 0 + (IT)n) & ~e);                        \
        return lanes_min_##SUF(&cand);                                         \
    }                                                                          \
    static T extval_##SUF(const T *x, int64_t n, int want_max)                 \
    {                                                                          \
        if (n < VL) {                                                          \
            return x[extrema_scalar_##SUF(x, n, want_max)];                    \
        }                                                                      \
        return n < 16 * VL ? extval_short_##SUF(x, n, want_max)                \
                           : extval_lanes_##SUF(x, n, want_max);               \
    }                                                                          \
    static int64_t extrema_##SUF(const T *x, int64_t n, int want_max)          \
    {                                                                          \
        if (n < VL) {                                                          \
            return extrema_scalar_##SUF(x, n, want_max);                       \
        }                                                                      \
        if (n < 16 * VL) {                                                     \
            return extrema_short_##SUF(x, n, want_max);                        \
        }                                                                      \
        int64_t at = 0;                                                        \
        for (int64_t b = 0; b < n; b += EXT_MAX_RUN) {                         \
            int64_t len = n - b < EXT_MAX_RUN ? n - b : EXT_MAX_RUN;           \
            int64_t k = b + (len < VL ? extrema_scalar_##SUF(x + b, len, want_max) \
                                      : extrema_lanes_##SUF(x + b, len, want_max)); \
            if (ISNAN(x[k])) {                                                 \
                return k;                                                      \
            }                                                                  \
            if (want_max ? x[k] > x[at] : x[k] < x[at]) {                      \
                at = k;                                                        \
            }                                                                  \
        }                                                                      \
        return at;                                                             \
    }
#define NOT_NAN(v) 0
#define IS_NAN(v) ((v) != (v))
/* Lanes of 16 bytes: the vectors of every x86-64 (SSE2), and of NEON. */
EXTREMA(i32, int32_t, int32_t, 4, NOT_NAN, EXT_BASE)
EXTREMA(i64, int64_t, int64_t, 2, NOT_NAN, EXT_BASE)
EXTREMA(f32, float, int32_t, 4, IS_NAN, EXT_BASE)
EXTREMA(f64, double, int64_t, 2, IS_NAN, EXT_BASE)

/* ext_index_SUF(x, n, want_max): the index of the extreme of x[0..n)
 * (n > 0); ext_value_SUF: its value. Each picks the widest form the CPU
 * runs. */
#ifdef EV__SIMD_CLONES_BUILT
/* Lanes of 32 bytes for CPUs with AVX2 and of 64 for those with AVX-512:
 * the widest registers, also on Zen 4, which splits a 64-byte operation in
 * two but decodes it once. The 64-byte form is built as SIMD clones and
 * only its AVX-512 clone runs (the pick sends other CPUs to the forms
 * above): GCC 12 compiles that clone's selects as merge-masked moves, where
 * a target attribute gets zero-masking and an or, 20% slower. */
#define EXT_AVX2 __attribute__((target("arch=x86-64-v3")))
#define EXT_AVX512 EV__SIMD_CLONES
EXTREMA(i32_avx2, int32_t, int32_t, 8, NOT_NAN, EXT_AVX2)
EXTREMA(i64_avx2, int64_t, int64_t, 4, NOT_NAN, EXT_AVX2)
EXTREMA(f32_avx2, float, int32_t, 8, IS_NAN, EXT_AVX2)
EXTREMA(f64_avx2, double, int64_t, 4, IS_NAN, EXT_AVX2)
EXTREMA(i32_avx512, int32_t, int32_t, 16, NOT_NAN, EXT_AVX512)
EXTREMA(i64_avx512, int64_t, int64_t, 8, NOT_NAN, EXT_AVX512)
EXTREMA(f32_avx512, float, int32_t, 16, IS_NAN, EXT_AVX512)
EXTREMA(f64_avx512, double, int64_t, 8, IS_NAN, EXT_AVX512)
#define EXT_PICK(SUF, T)                                                       \
    static inline int64_t ext_index_##SUF(const T *x, int64_t n, int want_max) \
    {                                                                          \
        if (__builtin_cpu_supports("x86-64-v4")) {                             \
            return extrema_##SUF##_avx512(x, n, want_max);                     \
        }                                                                      \
        return __builtin_cpu_supports("x86-64-v3") ? extrema_##SUF##_avx2(x, n, want_max) \
                                                   : extrema_##SUF(x, n, want_max);      \
    }                                                                          \
    static inline T ext_value_##SUF(const T *x, int64_t n, int want_max)       \
    {                                                                          \
        if (__builtin_cpu_supports("x86-64-v4")) {                             \
            return extval_##SUF##_avx512(x, n, want_max);                      \
        }                                                                      \
        return __builtin_cpu_supports("x86-64-v3") ? extval_##SUF##_avx2(x, n, want_max) \
                                                   : extval_##SUF(x, n, want_max);       \
    }
#else
#define EXT_PICK(SUF, T)                                                       \
    static inline int64_t ext_index_##SUF(const T *x, int64_t n, int want_max) \
    {                                                                          \
        return extrema_##SUF(x, n, want_max);                                  \
    }                                                                          \
    static inline T ext_value_##SUF(const T *x, int64_t n, int want_max)       \
    {                                                                          \
        return extval_##SUF(x, n, want_max);                                   \
    }
#endif
EXT_PICK(i32, int32_t)
EXT_PICK(i64, int64_t)
EXT_PICK(f32, float)
EXT_PICK(f64, double)

#endif
