/* Elementwise unary ops, clamp and cast: per-dtype contiguous loops, result
 * dtype rules, and the checks run on the issuing thread. */
/* GCC's -O2 uses the "very cheap" vectorizer cost model, which leaves these
 * loops scalar (it refuses any epilogue); "cheap" vectorizes them without
 * runtime alias checks thanks to restrict. Until the build sets it for
 * src/ops, ask for it here. no-trapping-math lets it compute both sides of
 * a float select (clamps, relu, exp's range limits) and blend them: only
 * floating-point exception flags could differ, and nothing reads them.
 * fp-contract=off: see EV__SIMD_CLONES. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math", "fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "ops/ops-impl.h"

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

UN_FLOAT(exp, exp_f32(x), exp(x))

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

UN_FLOAT(log, log_f32(x), log(x))
UN_FLOAT(sqrt, sqrtf(x), sqrt(x))
UN_FLOAT(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
UN_FLOAT(sin, sinf(x), sin(x))
UN_FLOAT(cos, cosf(x), cos(x))
UN_FLOAT(tanh, tanh_f32(x), tanh(x))
UN_FLOAT(sigmoid, 1.0f / (1.0f + exp_f32(-x)), 1.0 / (1.0 + exp(-x)))
UN_INT(relu, RELU_I)
/* x < 0 ? 0 : x keeps NaN, as PyTorch's relu does. */
UN_FLOAT(relu, x < 0 ? 0.0f : x, x < 0 ? 0.0 : x)
UN_FLOAT(gelu, 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)),
         0.5 * x * (1.0 + erf(x * M_SQRT1_2)))
/* The input was converted to bool (0 or 1) on the way in. */
UN_LOOP(logical_not_bool, uint8_t, uint8_t, x ^ 1)

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

enum {
    K_SAME,    /* result and compute in the input's dtype */
    K_FLOAT,   /* result and compute in ev_dtype_to_float(input) */
    K_LOGICAL, /* compute in bool, return bool */
};

typedef struct unop {
    const char *name, *name_;
    int kind;
    ev__loop_fn loops[EV_DTYPE_COUNT]; /* by compute dtype; NULL: unsupported */
} unop;

#define NUM(op) {NULL, op##_int32, op##_int64, op##_float32, op##_float64}
#define FLT(op) {NULL, NULL, NULL, op##_float32, op##_float64}
/* By compute dtype: uint8, int8 and int16 run the int32 loops. */
_Static_assert(EV_DTYPE_COUNT == 8, "a new compute dtype needs its loops in unary.c");

static const unop unops[EV_UNARY_OP_COUNT] = {
    [EV_OP_NEG] = {"neg", "neg_", K_SAME, NUM(neg)},
    [EV_OP_ABS] = {"abs", "abs_", K_SAME, {abs_bool, abs_int32, abs_int64, abs_float32,
                                           abs_float64}},
    [EV_OP_EXP] = {"exp", "exp_", K_FLOAT, FLT(exp)},
    [EV_OP_LOG] = {"log", "log_", K_FLOAT, FLT(log)},
    [EV_OP_SQRT] = {"sqrt", "sqrt_", K_FLOAT, FLT(sqrt)},
    [EV_OP_RSQRT] = {"rsqrt", "rsqrt_", K_FLOAT, FLT(rsqrt)},
    [EV_OP_SIN] = {"sin", "sin_", K_FLOAT, FLT(sin)},
    [EV_OP_COS] = {"cos", "cos_", K_FLOAT, FLT(cos)},
    [EV_OP_TANH] = {"tanh", "tanh_", K_FLOAT, FLT(tanh)},
    [EV_OP_SIGMOID] = {"sigmoid", "sigmoid_", K_FLOAT, FLT(sigmoid)},
    [EV_OP_RELU] = {"relu", "relu_", K_SAME, NUM(relu)},
    [EV_OP_GELU] = {"gelu", "gelu_", K_FLOAT, FLT(gelu)},
    [EV_OP_LOGICAL_NOT] = {"logical_not", "logical_not_", K_LOGICAL, {logical_not_bool}},
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
    ev_dtype r = uo->kind == K_FLOAT ? ev_dtype_to_float(x) : uo->kind == K_LOGICAL ? EV_BOOL : x;
    ev_dtype c = uo->kind == K_LOGICAL ? EV_BOOL : ev_dtype_get_info(r)->compute;
    if (!uo->loops[c]) {
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
                     ev_dtype loop_dt, ev_dtype res, ev__loop_fn loop, const ev__loop_ctx *ctx,
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
        rc = ev__tensor_new(name, ex, res, x->ndim, x->shape, &dst);
        if (rc) {
            return rc;
        }
    }
    rc = ev__elementwise(ex, name, dst, &x, 1, loop_dt, loop_dt, loop, ctx);
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
    return run_unary(ex, name, x, inplace, c, res, loop, &ctx, out);
}

int ev_unary(const ev_exec *ex, int op, ev_tensor *x, ev_tensor **out)
{
    return unary(ex, op, x, 0, out);
}

int ev_unary_(const ev_exec *ex, int op, ev_tensor *x)
{
    return unary(ex, op, x, 1, NULL);
}

#define EV_UNARY_DEF(id, name)                                          \
    int ev_##name(const ev_exec *ex, ev_tensor *x, ev_tensor **out)     \
    {                                                                   \
        return unary(ex, EV_OP_##id, x, 0, out);                        \
    }                                                                   \
    int ev_##name##_(const ev_exec *ex, ev_tensor *x)                   \
    {                                                                   \
        return unary(ex, EV_OP_##id, x, 1, NULL);                       \
    }
EV_UNARY_OP_MAP(EV_UNARY_DEF)
#undef EV_UNARY_DEF

/* ------------------------------------------------------------------ clamp */

static const ev__loop_fn clamp_loops[EV_DTYPE_COUNT] = {
    NULL, clamp_int32, clamp_int64, clamp_float32, clamp_float64,
};

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
    return run_unary(ex, name, x, inplace, c, x->dtype, clamp_loops[c], &ctx, out);
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
    rc = ev__tensor_new("cast", ex, dtype, x->ndim, x->shape, &dst);
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
