/* Elementwise unary ops, clamp and cast: per-dtype contiguous loops, result
 * dtype rules, and the checks run on the issuing thread. */
/* GCC's -O2 uses the "very cheap" vectorizer cost model, which leaves these
 * loops scalar (it refuses any epilogue); "cheap" vectorizes them without
 * runtime alias checks thanks to restrict. Until the build sets it for
 * src/ops, ask for it here. no-trapping-math lets it compute both sides of
 * a float select (clamps, relu, exp's range limits) and blend them: only
 * floating-point exception flags could differ, and nothing reads them.
 * The build adds -fno-math-errno (the pragma's would be ignored): sqrt is
 * then the instruction, not a call that could set errno.
 * fp-contract=off: see EV__SIMD_CLONES. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "ops/ops-impl.h"
#include "ops/vmath.h"
#include "ops/vmath_avx512.h"

/* ------------------------------------------------------------------ loops */


/* o[i] = EXPR(x = a[i]), with restrict pointers for the two cases that occur
 * (distinct arrays, or the same array in place) so GCC vectorizes at -O2. */
#define UN_LOOP(fname, T, OT, EXPR)                                                    \
    EV__SIMD_CLONES                                                                    \
    static void fname(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx) \
    {                                                                                  \
        (void)ctx;                                                                     \
        if (out_ != in[0]) {                                                           \
            OT *restrict o = out_;                                                     \
            const T *restrict pa = in[0];                                              \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = pa[i];                                                           \
                o[i] = (OT)(EXPR);                                                     \
            }                                                                          \
        } else {                                                                       \
            OT *o = out_;                                                              \
            const T *pa = in[0];                                                       \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = pa[i];                                                           \
                o[i] = (OT)(EXPR);                                                     \
            }                                                                          \
        }                                                                              \
    }

/* A float32 loop that hands the whole run to an array function of vmath.h
 * (those that recompute rare lanes with libm). */
#define UN_ARRAY_F32(fname, FN)                                                        \
    EV__SIMD_CLONES                                                                    \
    static void fname(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx) \
    {                                                                                  \
        (void)ctx;                                                                     \
        FN((float *)out_, (const float *)in[0], n);                                    \
    }

#define UN_INT(op, EI)                                      \
    UN_LOOP(op##_int32, int32_t, int32_t, EI(int32_t, uint32_t)) \
    UN_LOOP(op##_int64, int64_t, int64_t, EI(int64_t, uint64_t))
/* Float loops name the float and double libm functions explicitly. */
#define UN_FLOAT(op, EF32, EF64)                \
    UN_LOOP(op##_float32, float, float, EF32)   \
    UN_LOOP(op##_float64, double, double, EF64)

/* Negation in the unsigned type: -MIN wraps to MIN as in NumPy, defined in C. */
#define NEG_I(T, U) ((T)((U)0 - (U)x))
#define ABS_I(T, U) (x < 0 ? (T)((U)0 - (U)x) : x)
#define RELU_I(T, U) (x > 0 ? x : 0)

UN_INT(neg, NEG_I)
UN_FLOAT(neg, -x, -x)
UN_LOOP(abs_bool, uint8_t, uint8_t, x)
UN_INT(abs, ABS_I)
UN_FLOAT(abs, fabsf(x), fabs(x))
UN_FLOAT(exp, exp_f32(x), exp(x))

UN_ARRAY_F32(log_float32, log_f32_n)
UN_LOOP(log_float64, double, double, log(x))
UN_FLOAT(sqrt, sqrtf(x), sqrt(x))
/* Two rounded steps, within 1.5 ulp (test_vmath.c): in double it would be
 * correctly rounded but no longer memory-bound. */
UN_FLOAT(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
UN_ARRAY_F32(sin_float32, sin_f32_n)
UN_LOOP(sin_float64, double, double, sin(x))
UN_ARRAY_F32(cos_float32, cos_f32_n)
UN_LOOP(cos_float64, double, double, cos(x))
UN_ARRAY_F32(tanh_float32, tanh_f32_n)
UN_LOOP(tanh_float64, double, double, tanh(x))
UN_FLOAT(sigmoid, sigmoid_f32(x), 1.0 / (1.0 + exp(-x)))
UN_INT(relu, RELU_I)
/* x < 0 ? 0 : x keeps NaN, as PyTorch's relu does. */
UN_FLOAT(relu, x < 0 ? 0.0f : x, x < 0 ? 0.0 : x)
UN_FLOAT(gelu, gelu_f32(x), 0.5 * x * (1.0 + erf(x * M_SQRT1_2)))
/* The input was converted to bool (0 or 1) on the way in. */
UN_LOOP(logical_not_bool, uint8_t, uint8_t, x ^ 1)
/* Bitwise not: ~x for integers, logical not for bool (0 or 1 stored). */
UN_LOOP(bitwise_not_bool, uint8_t, uint8_t, x ^ 1u)
UN_LOOP(bitwise_not_int32, int32_t, int32_t, ~x)
UN_LOOP(bitwise_not_int64, int64_t, int64_t, ~x)

/* The rows added through the op table: float32 by vmath.h, float64 by
 * libm (one call per element), exact integer forms where the rule keeps
 * integers. */
UN_ARRAY_F32(log1p_float32, log1p_f32_n)
UN_LOOP(log1p_float64, double, double, log1p(x))
UN_FLOAT(expm1, expm1_f32(x), expm1(x))
UN_ARRAY_F32(log2_float32, log2_f32_n)
UN_LOOP(log2_float64, double, double, log2(x))
UN_ARRAY_F32(log10_float32, log10_f32_n)
UN_LOOP(log10_float64, double, double, log10(x))
UN_ARRAY_F32(exp2_float32, exp2_f32_n)
UN_LOOP(exp2_float64, double, double, exp2(x))
UN_ARRAY_F32(tan_float32, tan_f32_n)
UN_LOOP(tan_float64, double, double, tan(x))
UN_FLOAT(asin, asin_f32(x), asin(x))
UN_FLOAT(acos, acos_f32(x), acos(x))
UN_FLOAT(atan, atan_f32(x), atan(x))
UN_FLOAT(sinh, sinh_f32(x), sinh(x))
UN_FLOAT(cosh, cosh_f32(x), cosh(x))
UN_ARRAY_F32(asinh_float32, asinh_f32_n)
UN_LOOP(asinh_float64, double, double, asinh(x))
UN_ARRAY_F32(acosh_float32, acosh_f32_n)
UN_LOOP(acosh_float64, double, double, acosh(x))
UN_ARRAY_F32(atanh_float32, atanh_f32_n)
UN_LOOP(atanh_float64, double, double, atanh(x))
UN_FLOAT(erf, erf_f32(x), erf(x))
UN_FLOAT(reciprocal, 1.0f / x, 1.0 / x)
/* Rounding keeps integers as they are (as PyTorch and the Array API). */
#define SAME_I(T, U) x
UN_INT(floor, SAME_I)
UN_FLOAT(floor, floorf(x), floor(x))
UN_INT(ceil, SAME_I)
UN_FLOAT(ceil, ceilf(x), ceil(x))
UN_INT(trunc, SAME_I)
UN_FLOAT(trunc, truncf(x), trunc(x))
/* Half to even, as NumPy's and PyTorch's round (rint in the default mode). */
UN_INT(round, SAME_I)
UN_FLOAT(round, rintf(x), rint(x))
#define SIGN_I(T, U) (T)((x > 0) - (x < 0))
UN_INT(sign, SIGN_I)
/* NaN passes through and both zeros give +0, as NumPy's sign. */
UN_FLOAT(sign, x > 0 ? 1.0f : x < 0 ? -1.0f : x == 0 ? 0.0f : x,
         x > 0 ? 1.0 : x < 0 ? -1.0 : x == 0 ? 0.0 : x)
#define SQUARE_I(T, U) ((T)((U)x * (U)x))
UN_INT(square, SQUARE_I)
UN_FLOAT(square, x * x, x * x)
/* Predicates: bool out, tested in the input's dtype. */
#define PRED_LOOPS(op, EI, EF)                                  \
    UN_LOOP(op##_bool, uint8_t, uint8_t, EI)                    \
    UN_LOOP(op##_int32, int32_t, uint8_t, EI)                   \
    UN_LOOP(op##_int64, int64_t, uint8_t, EI)                   \
    UN_LOOP(op##_float32, float, uint8_t, EF)                   \
    UN_LOOP(op##_float64, double, uint8_t, EF)
PRED_LOOPS(isnan, ((void)x, 0), x != x)
PRED_LOOPS(isinf, ((void)x, 0), x == INFINITY || x == -INFINITY)
PRED_LOOPS(isfinite, ((void)x, 1), x - x == 0)

/* Clamp: bounds in ctx (f0/f1 for floats, i0/i1 for integers). Lower bound
 * first, then upper, so min > max gives max as numpy.clip; NaN compares
 * false and passes through. */
UN_LOOP(clamp_int32, int32_t, int32_t,
        (x < ctx->i0 ? ctx->i0 : x) > ctx->i1 ? ctx->i1 : (x < ctx->i0 ? ctx->i0 : x))
UN_LOOP(clamp_int64, int64_t, int64_t,
        (x < ctx->i0 ? ctx->i0 : x) > ctx->i1 ? ctx->i1 : (x < ctx->i0 ? ctx->i0 : x))
UN_LOOP(clamp_float32, float, float,
        (x < (float)ctx->f0 ? (float)ctx->f0 : x) > (float)ctx->f1
            ? (float)ctx->f1
            : (x < (float)ctx->f0 ? (float)ctx->f0 : x))
UN_LOOP(clamp_float64, double, double,
        (x < ctx->f0 ? ctx->f0 : x) > ctx->f1 ? ctx->f1 : (x < ctx->f0 ? ctx->f0 : x))

/* --------------------------------------------------------------- op table */

/* Each op's loops by compute dtype (NULL: not supported), found by the op
 * table under the op's name. */
#define NUM(op) \
    {[EV_INT32] = op##_int32, [EV_INT64] = op##_int64, [EV_FLOAT32] = op##_float32, \
     [EV_FLOAT64] = op##_float64}
#define FLT(op) {[EV_FLOAT32] = op##_float32, [EV_FLOAT64] = op##_float64}
/* By compute dtype: uint8, int8 and int16 run the int32 loops. */
_Static_assert(EV_DTYPE_COUNT == 8, "a new compute dtype needs its loops in unary.c");

typedef const ev__loop_fn loop_table[EV_DTYPE_COUNT];
static loop_table neg_loops = NUM(neg);
static loop_table abs_loops = {[EV_BOOL] = abs_bool, [EV_INT32] = abs_int32,
                               [EV_INT64] = abs_int64, [EV_FLOAT32] = abs_float32,
                               [EV_FLOAT64] = abs_float64};
static loop_table exp_loops = FLT(exp);
static loop_table log_loops = FLT(log);
static loop_table sqrt_loops = FLT(sqrt);
static loop_table rsqrt_loops = FLT(rsqrt);
static loop_table sin_loops = FLT(sin);
static loop_table cos_loops = FLT(cos);
static loop_table tanh_loops = FLT(tanh);
static loop_table sigmoid_loops = FLT(sigmoid);
static loop_table relu_loops = NUM(relu);
static loop_table gelu_loops = FLT(gelu);
static loop_table logical_not_loops = {[EV_BOOL] = logical_not_bool};
static loop_table log1p_loops = FLT(log1p);
static loop_table expm1_loops = FLT(expm1);
static loop_table log2_loops = FLT(log2);
static loop_table log10_loops = FLT(log10);
static loop_table exp2_loops = FLT(exp2);
static loop_table tan_loops = FLT(tan);
static loop_table asin_loops = FLT(asin);
static loop_table acos_loops = FLT(acos);
static loop_table atan_loops = FLT(atan);
static loop_table sinh_loops = FLT(sinh);
static loop_table cosh_loops = FLT(cosh);
static loop_table asinh_loops = FLT(asinh);
static loop_table acosh_loops = FLT(acosh);
static loop_table atanh_loops = FLT(atanh);
static loop_table erf_loops = FLT(erf);
static loop_table reciprocal_loops = FLT(reciprocal);
static loop_table floor_loops = NUM(floor);
static loop_table ceil_loops = NUM(ceil);
static loop_table trunc_loops = NUM(trunc);
static loop_table round_loops = NUM(round);
static loop_table sign_loops = NUM(sign);
static loop_table square_loops = NUM(square);
#define PRED(op) \
    {[EV_BOOL] = op##_bool, [EV_INT32] = op##_int32, [EV_INT64] = op##_int64, \
     [EV_FLOAT32] = op##_float32, [EV_FLOAT64] = op##_float64}
static loop_table isnan_loops = PRED(isnan);
static loop_table isinf_loops = PRED(isinf);
static loop_table isfinite_loops = PRED(isfinite);
static loop_table bitwise_not_loops = {[EV_BOOL] = bitwise_not_bool,
                                       [EV_INT32] = bitwise_not_int32,
                                       [EV_INT64] = bitwise_not_int64};

typedef struct unop {
    const char *name, *name_; /* instruction names; name_ NULL: no in-place form */
    ev_op_rule rule;
    const ev__loop_fn *loops;
} unop;

static const unop unops[EV_UNARY_OP_COUNT] = {
#define EV_UNARY(ID, name, rule, inplace, ...) \
    [EV_OP_##ID] = {#name, EV__INPLACE_NAME_##inplace(name), EV_RULE_##rule, name##_loops},
#include "eagervm/ops.def"
};

const char *ev_unary_op_name(int op)
{
    return op >= 0 && op < EV_UNARY_OP_COUNT ? unops[op].name : "invalid";
}

static int resolve(int op, const char *name, ev_dtype x, ev_dtype *loop_dt, ev_dtype *res,
                   ev__loop_fn *loop)
{
    const unop *uo = &unops[op];
    if (!ev_dtype_get_info(x)) {
        return ev__set_message(EV_ETYPE, "%s: invalid dtype %d", name, (int)x);
    }
    ev_dtype r = uo->rule == EV_RULE_FLOAT                                  ? ev_dtype_to_float(x)
                 : uo->rule == EV_RULE_LOGICAL || uo->rule == EV_RULE_PREDICATE ? EV_BOOL
                                                                           : x;
    /* A predicate tests the input in its own dtype and returns bool. */
    ev_dtype c = uo->rule == EV_RULE_LOGICAL     ? EV_BOOL
                 : uo->rule == EV_RULE_PREDICATE ? ev_dtype_get_info(x)->compute
                                                 : ev_dtype_get_info(r)->compute;
    if (!uo->loops[c]) {
        if (uo->rule == EV_RULE_BITWISE) {
            return ev__set_message(EV_ETYPE, "%s: not supported for dtype %s (bool and integer "
                                   "tensors only)", name, ev_dtype_name(x));
        }
        return ev__set_message(EV_ETYPE, "%s: not supported for dtype %s", name,
                               ev_dtype_name(x));
    }
    *loop_dt = c;
    *res = r;
    *loop = uo->loops[c];
    return 0;
}

int ev_unary_result_dtype(int op, ev_dtype x, ev_dtype *out)
{
    if (op < 0 || op >= EV_UNARY_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "unary op %d does not exist", op);
    }
    ev_dtype c;
    ev__loop_fn loop;
    return resolve(op, unops[op].name, x, &c, out, &loop);
}

/* Shared tail of every unary op: checks, output, one instruction. */
static int run_unary(const ev_exec *ex, const char *name, ev_tensor *x, int inplace,
                     ev_dtype loop_dt, ev_dtype loop_out, ev_dtype res, ev__loop_fn loop, const ev__loop_ctx *ctx,
                     ev_tensor **out)
{
    ev_tensor *dst;
    int rc;
    if (inplace) {
        if (!ev__can_cast_same_kind(res, x->dtype)) {
            return ev__set_message(EV_ETYPE, "%s: the result dtype %s cannot be cast to the "
                                   "in-place operand's dtype %s", name, ev_dtype_name(res),
                                   ev_dtype_name(x->dtype));
        }
        if (ev__has_internal_overlap(x)) {
            return ev__set_message(EV_EINVAL, "%s: the in-place operand is an expanded tensor "
                                   "(some elements share memory)", name);
        }
        dst = ev_tensor_ref(x);
    } else {
        if (!out) {
            return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
        }
        rc = ev__tensor_new_like(name, ex, res, x->ndim, x->shape, &x, 1, &dst);
        if (rc) {
            return rc;
        }
    }
    rc = ev__elementwise(ex, name, dst, &x, 1, loop_dt, loop_out, loop, ctx);
    if (rc || inplace) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

static int unary(const ev_exec *ex, int op, ev_tensor *x, int inplace, ev_tensor **out)
{
    if (op < 0 || op >= EV_UNARY_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "unary op %d does not exist", op);
    }
    if (inplace && !unops[op].name_) {
        return ev__set_message(EV_EINVAL, "%s has no in-place form", unops[op].name);
    }
    const char *name = inplace ? unops[op].name_ : unops[op].name;
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    ev_dtype c, res;
    ev__loop_fn loop;
    rc = resolve(op, name, x->dtype, &c, &res, &loop);
    if (rc) {
        return rc;
    }
    ev__loop_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ev_dtype lout = unops[op].rule == EV_RULE_PREDICATE ? EV_BOOL : c;
    return run_unary(ex, name, x, inplace, c, lout, res, loop, &ctx, out);
}

int ev_unary(const ev_exec *ex, int op, ev_tensor *x, ev_tensor **out)
{
    return unary(ex, op, x, 0, out);
}

int ev_unary_(const ev_exec *ex, int op, ev_tensor *x)
{
    return unary(ex, op, x, 1, NULL);
}

#define EV_UNARY(ID, name, rule, inplace, ...)                                   \
    int ev_##name(const ev_exec *ex, ev_tensor *x, ev_tensor **out)              \
    {                                                                            \
        return unary(ex, EV_OP_##ID, x, 0, out);                                 \
    }                                                                            \
    EV__DECL_INPLACE_##inplace(int ev_##name##_(const ev_exec *ex, ev_tensor *x) \
                               { return unary(ex, EV_OP_##ID, x, 1, NULL); })
#include "eagervm/ops.def"

/* ------------------------------------------------------------------ clamp */

static loop_table clamp_loops = NUM(clamp);

static int clamp(const ev_exec *ex, ev_tensor *x, const ev_scalar *lo, const ev_scalar *hi,
                 int inplace, ev_tensor **out)
{
    const char *name = inplace ? "clamp_" : "clamp";
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!lo && !hi) {
        return ev__set_message(EV_EINVAL, "%s: at least one of min and max must be given",
                               name);
    }
    ev_dtype c = ev_dtype_get_info(x->dtype)->compute;
    if (!clamp_loops[c]) {
        return ev__set_message(EV_ETYPE, "%s: not supported for dtype %s", name,
                               ev_dtype_name(x->dtype));
    }
    const ev_scalar *b[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        if (b[i] && !ev_dtype_get_info(b[i]->dtype)) {
            return ev__set_message(EV_EINVAL, "%s: %s has an invalid dtype", name,
                                   i ? "max" : "min");
        }
        if (b[i] && !ev_dtype_is_float(x->dtype) && ev_dtype_is_float(b[i]->dtype)) {
            return ev__set_message(EV_ETYPE, "%s: a float %s for a tensor of dtype %s; cast "
                                   "the tensor to a float dtype first", name,
                                   i ? "max" : "min", ev_dtype_name(x->dtype));
        }
    }
    ev__loop_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    if (ev_dtype_is_float(x->dtype)) {
        ctx.f0 = lo ? (ev_dtype_is_float(lo->dtype) ? lo->v.f : (double)lo->v.i) : -INFINITY;
        ctx.f1 = hi ? (ev_dtype_is_float(hi->dtype) ? hi->v.f : (double)hi->v.i) : INFINITY;
    } else {
        /* Integer bounds beyond the dtype's range saturate at it (the loop
         * runs in the compute dtype, which holds that range). */
        int64_t mn, mx;
        ev_dtype_int_range(x->dtype, &mn, &mx);
        ctx.i0 = lo ? (lo->v.i < mn ? mn : lo->v.i > mx ? mx : lo->v.i) : mn;
        ctx.i1 = hi ? (hi->v.i < mn ? mn : hi->v.i > mx ? mx : hi->v.i) : mx;
    }
    return run_unary(ex, name, x, inplace, c, c, x->dtype, clamp_loops[c], &ctx, out);
}

int ev_clamp(const ev_exec *ex, ev_tensor *x, const ev_scalar *min, const ev_scalar *max,
             ev_tensor **out)
{
    return clamp(ex, x, min, max, 0, out);
}

int ev_clamp_(const ev_exec *ex, ev_tensor *x, const ev_scalar *min, const ev_scalar *max)
{
    return clamp(ex, x, min, max, 1, NULL);
}

/* ------------------------------------------------------------------- cast */

int ev_cast(const ev_exec *ex, ev_tensor *x, ev_dtype dtype, ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec("cast", ex)) || (rc = ev__check_tensor("cast", "x", x))) {
        return rc;
    }
    if (!ev_dtype_get_info(dtype)) {
        return ev__set_message(EV_ETYPE, "cast: invalid target dtype %d", (int)dtype);
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "cast: out is NULL");
    }
    ev_tensor *dst;
    /* In x's layout when x is a permuted dense block (as astype and to()). */
    rc = ev__tensor_new_like("cast", ex, dtype, x->ndim, x->shape, &x, 1, &dst);
    if (rc) {
        return rc;
    }
    rc = ev__copy(ex, "cast", dst, x);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}
