/* Elementwise bitwise ops on bool and integer tensors: and, or, xor, left and
 * right shift, and not. Checks and shape inference run on the calling thread;
 * the work is one elementwise instruction (ev__elementwise), which takes the
 * dense fast path when every operand is contiguous and of the loop's dtype. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

#include <string.h>

#include "ops/ops-impl.h"

/* o[i] = EXPR(x = a[i], y = b[i]); in-place callers pass out == a (the
 * elementwise instruction copies partial overlaps away first). */
#define BIT_LOOP(fname, T, EXPR)                                                       \
    static void fname(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx) \
    {                                                                                  \
        (void)ctx;                                                                     \
        const void *a_ = in[0], *b_ = in[1];                                           \
        if (out_ != a_ && out_ != b_) {                                                \
            T *restrict o = out_;                                                      \
            const T *restrict pa = a_;                                                 \
            const T *restrict pb = b_;                                                 \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = pa[i], y = pb[i];                                                \
                o[i] = (T)(EXPR);                                                      \
            }                                                                          \
        } else {                                                                       \
            T *o = out_;                                                               \
            const T *pa = a_, *pb = b_;                                                \
            for (int64_t i = 0; i < n; i++) {                                          \
                T x = pa[i], y = pb[i];                                                \
                o[i] = (T)(EXPR);                                                      \
            }                                                                          \
        }                                                                              \
    }

/* NumPy's shifts (npy_lshift, npy_rshift), computed without undefined
 * behaviour: a shift by the width or more (or by a negative amount, which
 * reads as a huge unsigned count) gives 0, or -1 for a right shift of a
 * negative value; left shifts wrap in the unsigned type. */
#define SHL(T, U, BITS) ((uint64_t)(U)y < (BITS) ? (T)((U)x << (U)y) : (T)0)
#define SHR(T, U, BITS) \
    ((uint64_t)(U)y < (BITS) ? (T)(x >> (U)y) : (x < 0 ? (T)-1 : (T)0))

BIT_LOOP(and_bool, uint8_t, x & y)
BIT_LOOP(and_int32, int32_t, x & y)
BIT_LOOP(and_int64, int64_t, x & y)
BIT_LOOP(or_bool, uint8_t, x | y)
BIT_LOOP(or_int32, int32_t, x | y)
BIT_LOOP(or_int64, int64_t, x | y)
BIT_LOOP(xor_bool, uint8_t, x ^ y)
BIT_LOOP(xor_int32, int32_t, x ^ y)
BIT_LOOP(xor_int64, int64_t, x ^ y)
BIT_LOOP(shl_int32, int32_t, SHL(int32_t, uint32_t, 32))
BIT_LOOP(shl_int64, int64_t, SHL(int64_t, uint64_t, 64))
BIT_LOOP(shr_int32, int32_t, SHR(int32_t, uint32_t, 32))
BIT_LOOP(shr_int64, int64_t, SHR(int64_t, uint64_t, 64))

static void not_bool(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx)
{
    (void)ctx;
    uint8_t *o = out_;
    const uint8_t *p = in[0];
    for (int64_t i = 0; i < n; i++) {
        o[i] = (uint8_t)(p[i] ^ 1u);
    }
}

#define NOT_LOOP(fname, T)                                                             \
    static void fname(void *out_, const void *const *in, int64_t n, ev__loop_ctx *ctx) \
    {                                                                                  \
        (void)ctx;                                                                     \
        T *o = out_;                                                                   \
        const T *p = in[0];                                                            \
        for (int64_t i = 0; i < n; i++) {                                              \
            o[i] = (T)~p[i];                                                           \
        }                                                                              \
    }
NOT_LOOP(not_int32, int32_t)
NOT_LOOP(not_int64, int64_t)

/* By compute dtype: uint8, int8 and int16 run the int32 loops, which give
 * their results exactly once wrapped to the narrow width (NumPy's shifts of
 * a narrow type by its width or more give 0 or -1, and so does the int32
 * loop after the wrap). */
_Static_assert(EV_DTYPE_COUNT == 8, "a new compute dtype needs its loops in bitwise.c");

typedef struct bitop {
    const char *name, *name_;
    ev__loop_fn loops[EV_DTYPE_COUNT]; /* by compute dtype; NULL: unsupported */
} bitop;

static const bitop bitops[EV_BITWISE_OP_COUNT] = {
    [EV_BITWISE_AND] = {"bitwise_and", "bitwise_and_", {and_bool, and_int32, and_int64}},
    [EV_BITWISE_OR] = {"bitwise_or", "bitwise_or_", {or_bool, or_int32, or_int64}},
    [EV_BITWISE_XOR] = {"bitwise_xor", "bitwise_xor_", {xor_bool, xor_int32, xor_int64}},
    [EV_BITWISE_LEFT_SHIFT] = {"bitwise_left_shift", "bitwise_left_shift_",
                               {NULL, shl_int32, shl_int64}},
    [EV_BITWISE_RIGHT_SHIFT] = {"bitwise_right_shift", "bitwise_right_shift_",
                                {NULL, shr_int32, shr_int64}},
};

const char *ev_bitwise_op_name(int op)
{
    return op >= 0 && op < EV_BITWISE_OP_COUNT ? bitops[op].name : "invalid";
}

static int resolve(int op, const char *name, ev_dtype a, ev_dtype b, ev_dtype *res,
                   ev_dtype *loop_dt, ev__loop_fn *loop)
{
    ev_dtype r = ev_promote_types(a, b);
    if (r == EV_DTYPE_COUNT) {
        return ev__set_message(EV_ETYPE, "%s: invalid dtype (%d, %d)", name, (int)a, (int)b);
    }
    if (ev_dtype_is_float(r)) {
        return ev__set_message(EV_ETYPE, "%s: not supported for dtypes %s and %s (bool and "
                               "integer tensors only)", name, ev_dtype_name(a),
                               ev_dtype_name(b));
    }
    if (r == EV_BOOL && !bitops[op].loops[EV_BOOL]) {
        /* Shifts of bools compute in the smallest integer dtype (as NumPy). */
        r = ev__smallest_int();
    }
    *res = r;
    *loop_dt = ev_dtype_get_info(r)->compute;
    *loop = bitops[op].loops[*loop_dt];
    return 0;
}

int ev_bitwise_result_dtype(int op, ev_dtype a, ev_dtype b, ev_dtype *out)
{
    if (op < 0 || op >= EV_BITWISE_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "bitwise op %d does not exist", op);
    }
    ev_dtype loop_dt;
    ev__loop_fn loop;
    return resolve(op, bitops[op].name, a, b, out, &loop_dt, &loop);
}

static int bitwise(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b, int inplace,
                   ev_tensor **out)
{
    if (op < 0 || op >= EV_BITWISE_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "bitwise op %d does not exist", op);
    }
    const char *name = inplace ? bitops[op].name_ : bitops[op].name;
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "a", a)) ||
        (rc = ev__check_tensor(name, "b", b))) {
        return rc;
    }
    if (!inplace && !out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    ev_dtype res, loop_dt;
    ev__loop_fn loop;
    if ((rc = resolve(op, name, a->dtype, b->dtype, &res, &loop_dt, &loop)) != 0) {
        return rc;
    }
    return ev__binary_issue(ex, name, a, b, res, loop_dt, loop_dt, loop, inplace, out);
}

int ev_bitwise(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b, ev_tensor **out)
{
    return bitwise(ex, op, a, b, 0, out);
}

int ev_bitwise_(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b)
{
    return bitwise(ex, op, a, b, 1, NULL);
}

#define EV_BITWISE_DEF(id, name)                                                   \
    int ev_bitwise_##name(const ev_exec *ex, ev_tensor *a, ev_tensor *b,           \
                          ev_tensor **out)                                         \
    {                                                                              \
        return bitwise(ex, EV_BITWISE_##id, a, b, 0, out);                         \
    }                                                                              \
    int ev_bitwise_##name##_(const ev_exec *ex, ev_tensor *a, ev_tensor *b)        \
    {                                                                              \
        return bitwise(ex, EV_BITWISE_##id, a, b, 1, NULL);                        \
    }
EV_BITWISE_OP_MAP(EV_BITWISE_DEF)
#undef EV_BITWISE_DEF

static int bitwise_not(const ev_exec *ex, ev_tensor *x, int inplace, ev_tensor **out)
{
    const char *name = inplace ? "bitwise_not_" : "bitwise_not";
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!inplace && !out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    static const ev__loop_fn loops[EV_DTYPE_COUNT] = {not_bool, not_int32, not_int64};
    ev_dtype d = x->dtype;
    ev_dtype c = (unsigned)d < EV_DTYPE_COUNT ? ev_dtype_get_info(d)->compute : d;
    if ((unsigned)d >= EV_DTYPE_COUNT || !loops[c]) {
        return ev__set_message(EV_ETYPE, "%s: not supported for dtype %s (bool and integer "
                               "tensors only)", name, ev_dtype_name(d));
    }
    ev_tensor *dst;
    if (inplace) {
        if (ev__has_internal_overlap(x)) {
            return ev__set_message(EV_EINVAL, "%s: the in-place operand is an expanded tensor "
                                   "(some elements share memory)", name);
        }
        dst = ev_tensor_ref(x);
    } else if ((rc = ev__tensor_new(name, ex, d, x->ndim, x->shape, &dst)) != 0) {
        return rc;
    }
    ev__loop_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rc = ev__elementwise(ex, name, dst, &x, 1, c, c, loops[c], &ctx);
    if (rc || inplace) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_bitwise_not(const ev_exec *ex, ev_tensor *x, ev_tensor **out)
{
    return bitwise_not(ex, x, 0, out);
}

int ev_bitwise_not_(const ev_exec *ex, ev_tensor *x)
{
    return bitwise_not(ex, x, 1, NULL);
}
