/* Elementwise binary ops: the per-dtype contiguous loops (plain loops the
 * compiler vectorizes), the op table with its promotion rules, and the
 * checks and shape inference run on the issuing thread. */
/* GCC's -O2 uses the "very cheap" vectorizer cost model, which leaves these
 * loops scalar (it refuses any epilogue); "cheap" vectorizes them without
 * runtime alias checks thanks to restrict. Until the build sets it for
 * src/ops, ask for it here. no-trapping-math lets it blend both sides of a
 * float select (maximum, minimum). Most loops are cloned for AVX2 and
 * AVX-512 (see EV__SIMD_CLONES): even the float +, - and *, memory-bound at
 * 1M elements, are compute-bound at 1K, whose operands sit in L1 (there the
 * baseline's four lanes made a 1K subtract take 8% longer per op, issue
 * included). fp-contract=off keeps them exact. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops-impl.h"
#include "ops/vmath.h"
#include "ops/vmath_avx512.h"

/* ------------------------------------------------------------------ loops */

/* One loop over n contiguous elements: o[i] = EXPR(x = a[i], y = b[i]).
 * Written per aliasing case with restrict pointers, so that GCC vectorizes at
 * -O2 (its cheap cost model does not version loops for aliasing): an output
 * is either distinct from an input or the very same array (in-place ops;
 * partial overlaps were copied away before submission). */
#define BIN_LOOP(fname, T, OT, EXPR) BIN_LOOP_ATTR(, fname, T, OT, EXPR)
#define BIN_LOOP_ATTR(ATTR, fname, T, OT, EXPR)                                        \
    ATTR static void fname(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx) \
    {                                                                                  \
        (void)ctx;                                                                     \
        const void *a_ = in[0], *b_ = in[1];                                           \
        int same_ = sizeof(T) == sizeof(OT);                                           \
        if (out_ != a_ && out_ != b_) {                                                \
            OT *restrict o = out_;                                                     \
            const T *restrict pa = a_;                                                 \
            const T *restrict pb = b_;                                                 \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = pa[i], y = pb[i];                                                \
                o[i] = (OT)(EXPR);                                                     \
            }                                                                          \
        } else if (same_ && out_ != b_) {                                              \
            T *restrict o = out_;                                                      \
            const T *restrict pb = b_;                                                 \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = o[i], y = pb[i];                                                 \
                o[i] = (T)(OT)(EXPR);                                                  \
            }                                                                          \
        } else if (same_ && out_ != a_) {                                              \
            T *restrict o = out_;                                                      \
            const T *restrict pa = a_;                                                 \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = pa[i], y = o[i];                                                 \
                o[i] = (T)(OT)(EXPR);                                                  \
            }                                                                          \
        } else {                                                                       \
            OT *o = out_;                                                              \
            const T *pa = a_, *pb = b_;                                                \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = pa[i], y = pb[i];                                                \
                o[i] = (OT)(EXPR);                                                     \
            }                                                                          \
        }                                                                              \
    }

/* Integer arithmetic in the unsigned type: wraps like NumPy, and is defined
 * behaviour in C (signed overflow is not). */
#define WRAP(T, U, op) ((T)((U)x op (U)y))

/* Python integer semantics without traps: x // 0 and x % 0 are 0 (NumPy), and
 * MIN // -1 wraps to MIN. */
#define INT_HELPERS(SUF, T, U)                                                \
    static inline T floordiv_##SUF(T a, T b)                                  \
    {                                                                         \
        if (b == 0) {                                                         \
            return 0;                                                         \
        }                                                                     \
        if (b == -1) {                                                        \
            return (T)((U)0 - (U)a);                                          \
        }                                                                     \
        T q = a / b;                                                          \
        if (a % b != 0 && ((a < 0) != (b < 0))) {                             \
            q--;                                                              \
        }                                                                     \
        return q;                                                             \
    }                                                                         \
    static inline T mod_##SUF(T a, T b)                                       \
    {                                                                         \
        if (b == 0 || b == -1) {                                              \
            return 0;                                                         \
        }                                                                     \
        T r = a % b;                                                          \
        if (r != 0 && ((r < 0) != (b < 0))) {                                 \
            r += b;                                                           \
        }                                                                     \
        return r;                                                             \
    }                                                                         \
    static inline T ipow_##SUF(T a, T b, int *err)                            \
    {                                                                         \
        if (b < 0) {                                                          \
            *err = EV__LOOP_NEG_INT_POW;                                      \
            return 0;                                                         \
        }                                                                     \
        U r = 1, base = (U)a;                                                 \
        for (U e = (U)b; e; e >>= 1) {                                        \
            if (e & 1) {                                                      \
                r *= base;                                                    \
            }                                                                 \
            base *= base;                                                     \
        }                                                                     \
        return (T)r;                                                          \
    }
INT_HELPERS(i32, int32_t, uint32_t)
INT_HELPERS(i64, int64_t, uint64_t)

/* NumPy's npy_divmod: floor division and a remainder with the divisor's sign,
 * exact at the boundaries where a naive floor(a / b) is off by one. */
#define FLOAT_HELPERS(SUF, T, FMOD, FLOOR, COPYSIGN)                          \
    static inline T fdivmod_##SUF(T a, T b, T *modp)                          \
    {                                                                         \
        T mod = FMOD(a, b);                                                   \
        if (!b) {                                                             \
            *modp = mod;                                                      \
            return a / b;                                                     \
        }                                                                     \
        T div = (a - mod) / b;                                                \
        if (mod) {                                                            \
            if ((b < 0) != (mod < 0)) {                                       \
                mod += b;                                                     \
                div -= 1;                                                     \
            }                                                                 \
        } else {                                                              \
            mod = COPYSIGN((T)0, b);                                          \
        }                                                                     \
        T fl;                                                                 \
        if (div) {                                                            \
            fl = FLOOR(div);                                                  \
            if (div - fl > (T)0.5) {                                          \
                fl += 1;                                                      \
            }                                                                 \
        } else {                                                              \
            fl = COPYSIGN((T)0, a / b);                                       \
        }                                                                     \
        *modp = mod;                                                          \
        return fl;                                                            \
    }                                                                         \
    static inline T ffloordiv_##SUF(T a, T b)                                 \
    {                                                                         \
        T m;                                                                  \
        return fdivmod_##SUF(a, b, &m);                                       \
    }                                                                         \
    static inline T fmod_py_##SUF(T a, T b)                                   \
    {                                                                         \
        T m;                                                                  \
        fdivmod_##SUF(a, b, &m);                                              \
        return m;                                                             \
    }
FLOAT_HELPERS(f32, float, fmodf, floorf, copysignf)
FLOAT_HELPERS(f64, double, fmod, floor, copysign)

/* Loops of one op for every dtype. Each EXPR family is a macro taking the C
 * type (and its unsigned twin for integers). */
#define LOOPS_INT(op, EI)                               \
    BIN_LOOP(op##_int32, int32_t, int32_t, EI(int32_t, uint32_t, i32)) \
    BIN_LOOP(op##_int64, int64_t, int64_t, EI(int64_t, uint64_t, i64))
/* Integer loops whose baseline form is far from the wide ones: SSE2 has no
 * 64-bit multiply (AVX-512 has one instruction), and int64 & and + ran at
 * 0.8-0.9x NumPy's speed on one core. */
#define LOOPS_INT_CLONED(op, EI)                                                         \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_int32, int32_t, int32_t, EI(int32_t, uint32_t, i32)) \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_int64, int64_t, int64_t, EI(int64_t, uint64_t, i64))
/* The float loops in the wide clones: the baseline's 4 lanes left the
 * selects (maximum, minimum: two compares and a blend per vector) and
 * division compute-bound even at 1M elements, and +, - and * at 1K. */
#define LOOPS_FLOAT_CLONED(op, EF)                                             \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_float32, float, float, EF(float, f32)) \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_float64, double, double, EF(double, f64))

#define ADD_I(T, U, S) WRAP(T, U, +)
#define SUB_I(T, U, S) WRAP(T, U, -)
#define MUL_I(T, U, S) WRAP(T, U, *)
#define ADD_F(T, S) x + y
#define SUB_F(T, S) x - y
#define MUL_F(T, S) x * y
#define DIV_F(T, S) x / y
#define FDIV_I(T, U, S) floordiv_##S(x, y)
#define FDIV_F(T, S) ffloordiv_##S(x, y)
#define MOD_I(T, U, S) mod_##S(x, y)
#define MOD_F(T, S) fmod_py_##S(x, y)
#define POW_I(T, U, S) ipow_##S(x, y, &ctx->err)
#define POW_F64(T, S) pow(x, y)
#define MAX_I(T, U, S) (x > y ? x : y)
#define MIN_I(T, U, S) (x < y ? x : y)
/* NaN-propagating, as numpy.maximum: if either is NaN the result is NaN. */
#define MAX_F(T, S) ((x >= y || x != x) ? x : y)
#define MIN_F(T, S) ((x <= y || x != x) ? x : y)

BIN_LOOP(add_bool, uint8_t, uint8_t, x | y)
LOOPS_INT_CLONED(add, ADD_I)
LOOPS_FLOAT_CLONED(add, ADD_F)
LOOPS_INT_CLONED(sub, SUB_I)
LOOPS_FLOAT_CLONED(sub, SUB_F)
BIN_LOOP(mul_bool, uint8_t, uint8_t, x & y)
LOOPS_INT_CLONED(mul, MUL_I)
LOOPS_FLOAT_CLONED(mul, MUL_F)
LOOPS_FLOAT_CLONED(div, DIV_F)
LOOPS_INT(floor_divide, FDIV_I)
BIN_LOOP(floor_divide_float64, double, double, FDIV_F(double, f64))
LOOPS_INT(remainder, MOD_I)
BIN_LOOP(remainder_float64, double, double, MOD_F(double, f64))

/* float32 // and %: fdivmod_f32's results without glibc's fmodf, which
 * takes about 10 ns an element (a loop over the exponent difference).
 * fmodf(a, b) is exact, and so is a - q * b in double with q = trunc(a / b)
 * while |a / b| < 2^28: a / b, when not an integer, lies at least
 * 2^(min(ea, eb) - eb - 24) from one (ea, eb: the exponents of a and b
 * with 24-bit integer significands), more than the double division's
 * rounding error (|a / b| 2^-53), so q is the exact truncated quotient;
 * q * b (28 + 24 bits) and the difference are exact too. Division by zero,
 * an infinite or NaN b, and larger quotients set *slow: those lanes are
 * done again by fdivmod_f32. The rest is fdivmod_f32's float arithmetic
 * with its branches as selects, so results match it bit for bit
 * (tests/python/test_divmod_float32.py). */
/* Whether the fast path is exact for a / b = t: |t| < 2^28, and b finite
 * (an infinite or NaN b makes a - q * b NaN). */
__attribute__((always_inline)) static inline int divmod_fast_ok(double t, double b)
{
    double ab = b < 0 ? -b : b;
    return t < 0x1p28 && t > -0x1p28 && ab <= 0x1.fffffep127;
}

__attribute__((always_inline)) static inline float divmod_fast_f32(float a, float b, float *modp,
                                                                   int *slow)
{
    double da = a, db = b;
    double t = da / db;
    *slow |= !divmod_fast_ok(t, db);
    /* fmodf's value; at zero its sign may differ, which neither result
     * below reads (both replace a zero by a signed zero of their own). */
    float mod = (float)(da - __builtin_trunc(t) * db);
    float div = (a - mod) / b;
    int adj = mod != 0 && ((b < 0) != (mod < 0));
    float m = adj ? mod + b : mod;
    div = adj ? div - 1 : div;
    *modp = mod != 0 ? m : __builtin_copysignf(0.0f, b);
    float fl = __builtin_floorf(div);
    fl = div - fl > 0.5f ? fl + 1 : fl;
    return div != 0 ? fl : __builtin_copysignf(0.0f, a / b);
}

/* o[i] = a[i] // b[i] (want_mod 0) or a[i] % b[i] (1), in chunks: each
 * chunk's fast results go to a buffer, then to o with the slow lanes
 * redone (o may be a or b: a lane's inputs are read before it is written). */
__attribute__((always_inline)) static inline void divmod_loop_f32(float *o, const float *a,
                                                                 const float *b, int64_t n,
                                                                 int want_mod)
{
    enum { CHUNK = 256 };
    float buf[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t len = n - i0 < CHUNK ? n - i0 : CHUNK;
        int slow = 0;
        for (int64_t j = 0; j < len; j++) {
            float m, d = divmod_fast_f32(a[i0 + j], b[i0 + j], &m, &slow);
            buf[j] = want_mod ? m : d;
        }
        if (!slow) {
            memcpy(o + i0, buf, sizeof(float) * (size_t)len);
            continue;
        }
        for (int64_t j = 0; j < len; j++) {
            float x = a[i0 + j], y = b[i0 + j];
            if (divmod_fast_ok((double)x / (double)y, y)) {
                o[i0 + j] = buf[j];
            } else {
                float m, d = fdivmod_f32(x, y, &m);
                o[i0 + j] = want_mod ? m : d;
            }
        }
    }
}

EV__SIMD_CLONES
static void floor_divide_float32(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx)
{
    (void)ctx;
    divmod_loop_f32(out_, in[0], in[1], n, 0);
}

EV__SIMD_CLONES
static void remainder_float32(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx)
{
    (void)ctx;
    divmod_loop_f32(out_, in[0], in[1], n, 1);
}
LOOPS_INT(pow, POW_I)
/* float32 by vmath_avx512.h's pow_f32_n (vectorized, its special cases by
 * libm: glibc's powf, scalar, took 2.7 ns an element), cloned for the
 * portable form's AVX2 build. */
EV__SIMD_CLONES
static void pow_general_float32(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx)
{
    (void)ctx;
    pow_f32_n(out_, in[0], in[1], n);
}
BIN_LOOP(pow_general_float64, double, double, POW_F64(double, f64))

/* x ** c for a run whose exponents are all one c, as a broadcast Python
 * scalar gives: for c = 2, 0.5 and -1, NumPy's and PyTorch's fast paths (a
 * product, a root, a quotient, each correctly rounded, instead of a pow per
 * element: x ** 0.5 and x ** -1 took 1.8x NumPy's time at 1M), and x itself
 * for 1. pow's special values hold: a root of -0 is -0 and of -inf NaN,
 * where x ** 0.5 is +0 and +inf (C99's pow; NumPy's and PyTorch's scalar
 * fast paths give the root's). The exponents are all read before any
 * output is written, so an output that is the exponent array is fine. */
#define POW_CONST_LOOPS(SUF, T, SQRT)                                                   \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, square_##SUF, T, T, ((void)y, x * x))                \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, root_##SUF, T, T,                                    \
                  ((void)y, x == -(T)INFINITY ? (T)INFINITY : SQRT(x) + (T)0))          \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, reciprocal_##SUF, T, T, ((void)y, (T)1 / x))         \
    BIN_LOOP(identity_##SUF, T, T, ((void)y, x))                                        \
    /* Whether b[0..n) all equal b[0]: block by block, each block's test without        \
     * a branch (it vectorizes), so that other exponents show after one block;          \
     * a NaN exponent never equals. Blocks of 1,024: with 64, folding each block's      \
     * flags took half as long as x ** 2's products (memcmp of b against b + 1,         \
     * also half). */                                                                   \
    EV__SIMD_CLONES                                                                     \
    static bool all_same_##SUF(const T *b, int64_t n)                                   \
    {                                                                                   \
        for (int64_t i = 0; i < n; i += 1024) {                                         \
            int64_t end = n - i < 1024 ? n : i + 1024;                                  \
            int other = 0;                                                              \
            for (int64_t j = i; j < end; j++) {                                         \
                other |= b[j] != b[0];                                                  \
            }                                                                           \
            if (other) {                                                                \
                return false;                                                           \
            }                                                                           \
        }                                                                               \
        return true;                                                                    \
    }                                                                                   \
    static void pow_##SUF(void *out_, const void *const *in, int64_t n,                 \
                          ev__loop_ctx *ctx)                                            \
    {                                                                                   \
        const T *b = in[1];                                                             \
        T c = n > 0 ? b[0] : (T)0;                                                      \
        ev__loop_fn fast = c == 2 ? square_##SUF : c == (T)0.5 ? root_##SUF             \
                         : c == -1 ? reciprocal_##SUF : c == 1 ? identity_##SUF : NULL; \
        if (fast && all_same_##SUF(b, n)) {                                             \
            fast(out_, in, n, ctx);                                                     \
        } else {                                                                        \
            pow_general_##SUF(out_, in, n, ctx);                                        \
        }                                                                               \
    }
POW_CONST_LOOPS(float32, float, sqrtf)
POW_CONST_LOOPS(float64, double, sqrt)
BIN_LOOP(maximum_bool, uint8_t, uint8_t, x | y)
LOOPS_INT(maximum, MAX_I)
LOOPS_FLOAT_CLONED(maximum, MAX_F)
BIN_LOOP(minimum_bool, uint8_t, uint8_t, x & y)
LOOPS_INT(minimum, MIN_I)
LOOPS_FLOAT_CLONED(minimum, MIN_F)

/* Float-only rows added through the op table (integers compute in
 * float64 by the FLOAT rule). logaddexp as NumPy's npy_logaddexp: equal
 * inputs (infinities included) give x + log 2, NaN passes through. */
#define LOGADDEXP_HELPER(SUF, T, EXP, LOG1P, LN2)     \
    static inline T logaddexp_##SUF(T x, T y)        \
    {                                                \
        if (x == y) {                                \
            return x + LN2;                          \
        }                                            \
        T d = x - y;                                 \
        if (d > 0) {                                 \
            return x + LOG1P(EXP(-d));               \
        }                                            \
        if (d <= 0) {                                \
            return y + LOG1P(EXP(d));                \
        }                                            \
        return d;                                    \
    }
LOGADDEXP_HELPER(f64, double, exp, log1p, 0.693147180559945309)
/* float32 by vmath.h (vectorized, compute-bound: cloned), float64 by libm. */
EV__SIMD_CLONES BIN_LOOP(atan2_float32, float, float, atan2_f32(x, y))
BIN_LOOP(atan2_float64, double, double, atan2(x, y))
EV__SIMD_CLONES BIN_LOOP(hypot_float32, float, float, hypot_f32(x, y))
BIN_LOOP(hypot_float64, double, double, hypot(x, y))
BIN_LOOP(copysign_float32, float, float, copysignf(x, y))
BIN_LOOP(copysign_float64, double, double, copysign(x, y))
EV__SIMD_CLONES BIN_LOOP(logaddexp_float32, float, float, logaddexp_f32(x, y))
BIN_LOOP(logaddexp_float64, double, double, logaddexp_f64(x, y))

/* Comparisons: every dtype in, bool out. Cloned (but bool's): the
 * baseline compares 4 floats at a time and then packs the 32-bit results
 * down to bytes, where AVX-512 compares 16 into a mask register; float32 ==
 * ran at 0.6x NumPy's speed on one core. */
#define CMP_LOOPS(op, OPR)                                                        \
    BIN_LOOP(op##_bool, uint8_t, uint8_t, x OPR y)                                \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_int32, int32_t, uint8_t, x OPR y)         \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_int64, int64_t, uint8_t, x OPR y)         \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_float32, float, uint8_t, x OPR y)         \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_float64, double, uint8_t, x OPR y)
CMP_LOOPS(eq, ==)
CMP_LOOPS(ne, !=)
CMP_LOOPS(lt, <)
CMP_LOOPS(le, <=)
CMP_LOOPS(gt, >)
CMP_LOOPS(ge, >=)

/* Logical ops see their operands converted to bool (0 or 1) first. */
BIN_LOOP(logical_and_bool, uint8_t, uint8_t, x & y)
BIN_LOOP(logical_or_bool, uint8_t, uint8_t, x | y)
BIN_LOOP(logical_xor_bool, uint8_t, uint8_t, x ^ y)

/* Bitwise ops (bool and integers): NumPy's shifts (npy_lshift, npy_rshift),
 * computed without undefined behaviour: a shift by the width or more (or by a
 * negative amount, which reads as a huge unsigned count) gives 0, or -1 for a
 * right shift of a negative value; left shifts wrap in the unsigned type. */
#define SHL(T, U, BITS) ((uint64_t)(U)y < (BITS) ? (T)((U)x << (U)y) : (T)0)
#define SHR(T, U, BITS) \
    ((uint64_t)(U)y < (BITS) ? (T)(x >> (U)y) : (x < 0 ? (T)-1 : (T)0))
#define BIT_LOOPS(op, OPR)                                                 \
    BIN_LOOP(op##_bool, uint8_t, uint8_t, x OPR y)                        \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_int32, int32_t, int32_t, x OPR y) \
    BIN_LOOP_ATTR(EV__SIMD_CLONES, op##_int64, int64_t, int64_t, x OPR y)
BIT_LOOPS(bitwise_and, &)
BIT_LOOPS(bitwise_or, |)
BIT_LOOPS(bitwise_xor, ^)
/* Cloned: the baseline ISA has no shift by a count per lane (AVX2 adds
 * them, AVX-512 the arithmetic one for int64), so those loops stay scalar,
 * at about 1 ns an element: slower than memory. */
BIN_LOOP_ATTR(EV__SIMD_CLONES, bitwise_left_shift_int32, int32_t, int32_t,
              SHL(int32_t, uint32_t, 32))
BIN_LOOP_ATTR(EV__SIMD_CLONES, bitwise_left_shift_int64, int64_t, int64_t,
              SHL(int64_t, uint64_t, 64))
BIN_LOOP_ATTR(EV__SIMD_CLONES, bitwise_right_shift_int32, int32_t, int32_t,
              SHR(int32_t, uint32_t, 32))
BIN_LOOP_ATTR(EV__SIMD_CLONES, bitwise_right_shift_int64, int64_t, int64_t,
              SHR(int64_t, uint64_t, 64))

/* --------------------------------------------------------------- op table */

/* Each op's loops by compute dtype (NULL: not supported), found by the op
 * table under the op's name. */
#define ALL_LOOPS(op) \
    {[EV_BOOL] = op##_bool, [EV_INT32] = op##_int32, [EV_INT64] = op##_int64, \
     [EV_FLOAT32] = op##_float32, [EV_FLOAT64] = op##_float64}
#define NUM_LOOPS(op) \
    {[EV_INT32] = op##_int32, [EV_INT64] = op##_int64, [EV_FLOAT32] = op##_float32, \
     [EV_FLOAT64] = op##_float64}
#define FLT_LOOPS(op) {[EV_FLOAT32] = op##_float32, [EV_FLOAT64] = op##_float64}
#define INT_LOOPS(op) {[EV_INT32] = op##_int32, [EV_INT64] = op##_int64}
#define BIT_LOOPS_TABLE(op) {[EV_BOOL] = op##_bool, [EV_INT32] = op##_int32, [EV_INT64] = op##_int64}
/* uint8, int8 and int16 compute in int32 (their compute dtype), so their
 * entries stay NULL and are never read. */
_Static_assert(EV_DTYPE_COUNT == 8, "a new compute dtype needs its loops in binary.c");

typedef const ev__loop_fn loop_table[EV_DTYPE_COUNT];
static loop_table add_loops = ALL_LOOPS(add);
static loop_table sub_loops = NUM_LOOPS(sub);
static loop_table mul_loops = ALL_LOOPS(mul);
static loop_table div_loops = FLT_LOOPS(div);
static loop_table floor_divide_loops = NUM_LOOPS(floor_divide);
static loop_table remainder_loops = NUM_LOOPS(remainder);
static loop_table pow_loops = NUM_LOOPS(pow);
static loop_table maximum_loops = ALL_LOOPS(maximum);
static loop_table minimum_loops = ALL_LOOPS(minimum);
static loop_table eq_loops = ALL_LOOPS(eq);
static loop_table ne_loops = ALL_LOOPS(ne);
static loop_table lt_loops = ALL_LOOPS(lt);
static loop_table le_loops = ALL_LOOPS(le);
static loop_table gt_loops = ALL_LOOPS(gt);
static loop_table ge_loops = ALL_LOOPS(ge);
static loop_table logical_and_loops = {[EV_BOOL] = logical_and_bool};
static loop_table logical_or_loops = {[EV_BOOL] = logical_or_bool};
static loop_table logical_xor_loops = {[EV_BOOL] = logical_xor_bool};
static loop_table atan2_loops = FLT_LOOPS(atan2);
static loop_table hypot_loops = FLT_LOOPS(hypot);
static loop_table copysign_loops = FLT_LOOPS(copysign);
static loop_table logaddexp_loops = FLT_LOOPS(logaddexp);
static loop_table bitwise_and_loops = BIT_LOOPS_TABLE(bitwise_and);
static loop_table bitwise_or_loops = BIT_LOOPS_TABLE(bitwise_or);
static loop_table bitwise_xor_loops = BIT_LOOPS_TABLE(bitwise_xor);
static loop_table bitwise_left_shift_loops = INT_LOOPS(bitwise_left_shift);
static loop_table bitwise_right_shift_loops = INT_LOOPS(bitwise_right_shift);

typedef struct binop {
    const char *name, *name_; /* instruction names; name_ NULL: no in-place form */
    ev_op_rule rule;
    const ev__loop_fn *loops;
} binop;

static const binop binops[EV_BINARY_OP_COUNT] = {
#define EV_BINARY(ID, name, rule, inplace, ...) \
    [EV_OP_##ID] = {#name, EV__INPLACE_NAME_##inplace(name), EV_RULE_##rule, name##_loops},
#include "eagervm/ops.def"
};

const char *ev_binary_op_name(int op)
{
    return op >= 0 && op < EV_BINARY_OP_COUNT ? binops[op].name : "invalid";
}

/* The dtypes the loop of op computes in (*loop_in) and returns (*res), and
 * the loop; or EV_ETYPE with a message. */
static int resolve(int op, const char *name, ev_dtype a, ev_dtype b, ev_dtype *loop_in,
                   ev_dtype *res, ev__loop_fn *loop)
{
    const binop *bo = &binops[op];
    ev_dtype r = ev_promote_types(a, b);
    if (r == EV_DTYPE_COUNT) {
        return ev__set_message(EV_ETYPE, "%s: invalid dtype (%d, %d)", name, (int)a, (int)b);
    }
    if ((bo->rule == EV_RULE_BITWISE || bo->rule == EV_RULE_SHIFT) && ev_dtype_is_float(r)) {
        return ev__set_message(EV_ETYPE, "%s: not supported for dtypes %s and %s (bool and "
                               "integer tensors only)", name, ev_dtype_name(a),
                               ev_dtype_name(b));
    }
    ev_dtype c;
    switch (bo->rule) {
    case EV_RULE_INTLIKE:
    case EV_RULE_SHIFT:
        c = r == EV_BOOL ? ev__smallest_int() : r;
        r = c;
        break;
    case EV_RULE_FLOAT:
        c = ev_dtype_is_float(r) ? r : EV_FLOAT64;
        r = c;
        break;
    case EV_RULE_COMPARE:
        c = r;
        r = EV_BOOL;
        break;
    case EV_RULE_LOGICAL:
        c = EV_BOOL;
        r = EV_BOOL;
        break;
    default:
        c = r;
        break;
    }
    /* Kernels run in the compute dtype (float32 for narrow floats, later). */
    c = ev_dtype_get_info(c)->compute;
    if (!bo->loops[c]) {
        if (op == EV_OP_SUB && c == EV_BOOL) {
            return ev__set_message(EV_ETYPE, "%s: subtracting bool tensors is not supported "
                                   "(as in NumPy); use logical_xor instead", name);
        }
        if (bo->rule == EV_RULE_NUMERIC && c == EV_BOOL) {
            return ev__set_message(EV_ETYPE, "%s: not supported for bool tensors", name);
        }
        return ev__set_message(EV_ETYPE, "%s: not supported for dtypes %s and %s", name,
                               ev_dtype_name(a), ev_dtype_name(b));
    }
    *loop_in = c;
    *res = r;
    *loop = bo->loops[c];
    return 0;
}

int ev_binary_result_dtype(int op, ev_dtype a, ev_dtype b, ev_dtype *out)
{
    if (op < 0 || op >= EV_BINARY_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "binary op %d does not exist", op);
    }
    ev_dtype lin;
    ev__loop_fn loop;
    return resolve(op, binops[op].name, a, b, &lin, out, &loop);
}

static int binary(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b, int inplace,
                  ev_tensor **out)
{
    if (op < 0 || op >= EV_BINARY_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "binary op %d does not exist", op);
    }
    if (inplace && !binops[op].name_) {
        return ev__set_message(EV_EINVAL, "%s has no in-place form", binops[op].name);
    }
    const char *name = inplace ? binops[op].name_ : binops[op].name;
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "a", a)) ||
        (rc = ev__check_tensor(name, "b", b))) {
        return rc;
    }
    if (!inplace && !out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    ev_dtype lin, res;
    ev__loop_fn loop;
    rc = resolve(op, name, a->dtype, b->dtype, &lin, &res, &loop);
    if (rc) {
        return rc;
    }
    ev_op_rule rule = binops[op].rule;
    ev_dtype lout = rule == EV_RULE_COMPARE || rule == EV_RULE_LOGICAL ? EV_BOOL : lin;
    return ev__binary_issue(ex, name, a, b, res, lin, lout, loop, inplace, out);
}

int ev_binary(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b, ev_tensor **out)
{
    return binary(ex, op, a, b, 0, out);
}

int ev_binary_(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b)
{
    return binary(ex, op, a, b, 1, NULL);
}

#define EV_BINARY(ID, name, rule, inplace, ...)                                      \
    int ev_##name(const ev_exec *ex, ev_tensor *a, ev_tensor *b, ev_tensor **out)     \
    {                                                                                \
        return binary(ex, EV_OP_##ID, a, b, 0, out);                                 \
    }                                                                                \
    EV__DECL_INPLACE_##inplace(int ev_##name##_(const ev_exec *ex, ev_tensor *a,      \
                                                ev_tensor *b)                         \
                               { return binary(ex, EV_OP_##ID, a, b, 1, NULL); })
#include "eagervm/ops.def"
