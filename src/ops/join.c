/* where, cat and stack: where is one elementwise instruction over three
 * broadcast operands; cat and stack issue one copy per input into a slice of
 * the new output (a few instructions, ordered by the engine as writes to
 * disjoint parts of one storage). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "no-trapping-math")
#endif

#include <string.h>

#include "ops/ops-impl.h"

/* ------------------------------------------------------------------ where */

/* o[i] = c[i] ? x[i] : y[i], every operand in the loop's dtype (the
 * condition, a bool, arrives converted to 0 or 1). Both sides are loaded
 * and the select made on the loaded values, which vectorizes into a blend;
 * written as a choice between loads, GCC branched, and a random condition
 * mispredicted half the time (5 ms for 1M float32, now 0.3 ms). */
#define WHERE_LOOP(SUF, T)                                                          \
    EV__SIMD_CLONES                                                                 \
    static void where_##SUF(void *out, const void *const *in, int64_t n,            \
                            ev__loop_ctx *ctx)                                      \
    {                                                                               \
        (void)ctx;                                                                  \
        T *restrict o = out;                                                        \
        const T *restrict c = in[0], *restrict x = in[1], *restrict y = in[2];      \
        for (int64_t i = 0; i < n; i++) {                                           \
            T a = x[i], b = y[i];                                                   \
            o[i] = c[i] != 0 ? a : b;                                               \
        }                                                                           \
    }
WHERE_LOOP(bool, uint8_t)
WHERE_LOOP(int32, int32_t)
WHERE_LOOP(int64, int64_t)
WHERE_LOOP(float32, float)
WHERE_LOOP(float64, double)
/* By compute dtype: uint8, int8 and int16 run the int32 loop. */
_Static_assert(EV_DTYPE_COUNT == 8, "a new compute dtype needs its where loop in join.c");
static const ev__loop_fn where_loops[EV_DTYPE_COUNT] = {
    where_bool, where_int32, where_int64, where_float32, where_float64,
};

int ev_where(const ev_exec *ex, ev_tensor *cond, ev_tensor *x, ev_tensor *y, ev_tensor **out)
{
    const char *name = "where";
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "cond", cond)) ||
        (rc = ev__check_tensor(name, "x", x)) || (rc = ev__check_tensor(name, "y", y))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if (cond->dtype != EV_BOOL) {
        return ev__set_message(EV_ETYPE, "%s: cond must be bool, not %s (compare first, as "
                               "PyTorch requires)", name, ev_dtype_name(cond->dtype));
    }
    ev_dtype r = ev_promote_types(x->dtype, y->dtype);
    if (r == EV_DTYPE_COUNT) {
        return ev__set_message(EV_ETYPE, "%s: invalid dtypes", name);
    }
    int nd, nd2;
    int64_t s1[EV_MAX_DIMS], s2[EV_MAX_DIMS];
    char sc[EV__SHAPE_STR_SIZE], sx[EV__SHAPE_STR_SIZE], sy[EV__SHAPE_STR_SIZE];
    if (ev_broadcast_shapes(x->ndim, x->shape, y->ndim, y->shape, &nd, s1) != 0 ||
        ev_broadcast_shapes(cond->ndim, cond->shape, nd, s1, &nd2, s2) != 0) {
        return ev__set_message(EV_EINVAL, "%s: shapes %s, %s and %s cannot be broadcast "
                               "together", name,
                               ev__shape_str(cond->ndim, cond->shape, sc, sizeof sc),
                               ev__shape_str(x->ndim, x->shape, sx, sizeof sx),
                               ev__shape_str(y->ndim, y->shape, sy, sizeof sy));
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new_like(name, ex, r, nd2, s2, (ev_tensor *[]){cond, x, y}, 3, &dst))) {
        return rc;
    }
    ev_dtype c = ev_dtype_get_info(r)->compute;
    ev__loop_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ev_tensor *in[3] = {cond, x, y};
    if ((rc = ev__elementwise(ex, name, dst, in, 3, c, c, where_loops[c], &ctx))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

/* ------------------------------------------------------------- cat, stack */

static int cat(const ev_exec *ex, const char *name, ev_tensor *const *ts, int n, int dim,
               ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec(name, ex))) {
        return rc;
    }
    if (!out || !ts || n <= 0) {
        return ev__set_message(EV_EINVAL, "%s: expected a non-empty list of tensors", name);
    }
    for (int i = 0; i < n; i++) {
        if ((rc = ev__check_tensor(name, "tensors[i]", ts[i]))) {
            return rc;
        }
    }
    const ev_tensor *t0 = ts[0];
    if (t0->ndim == 0) {
        return ev__set_message(EV_EINVAL, "%s: zero-dimensional tensor (at position 0) cannot "
                               "be concatenated", name);
    }
    int d;
    if ((rc = ev__norm_dim(name, dim, t0->ndim, &d))) {
        return rc;
    }
    ev_dtype r = t0->dtype;
    int64_t shape[EV_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof(int64_t) * (size_t)t0->ndim);
    shape[d] = 0;
    for (int i = 0; i < n; i++) {
        const ev_tensor *t = ts[i];
        int same = t->ndim == t0->ndim;
        for (int k = 0; same && k < t->ndim; k++) {
            same = k == d || t->shape[k] == t0->shape[k];
        }
        if (!same) {
            char s0[EV__SHAPE_STR_SIZE], si[EV__SHAPE_STR_SIZE];
            return ev__set_message(EV_EINVAL, "%s: tensor %d of shape %s does not match tensor "
                                   "0 of shape %s except in dimension %d", name, i,
                                   ev__shape_str(t->ndim, t->shape, si, sizeof si),
                                   ev__shape_str(t0->ndim, t0->shape, s0, sizeof s0), d);
        }
        shape[d] += t->shape[d];
        r = ev_promote_types(r, t->dtype);
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, r, t0->ndim, shape, &dst))) {
        return rc;
    }
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t len = ts[i]->shape[d];
        if (len == 0) {
            continue;
        }
        ev_tensor *part;
        if ((rc = ev_slice(dst, d, at, at + len, 1, &part))) {
            break;
        }
        rc = ev__copy(ex, name, part, ts[i]);
        ev_tensor_unref(part);
        if (rc) {
            break;
        }
        at += len;
    }
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_cat(const ev_exec *ex, ev_tensor *const *tensors, int n, int dim, ev_tensor **out)
{
    return cat(ex, "cat", tensors, n, dim, out);
}

int ev_stack(const ev_exec *ex, ev_tensor *const *tensors, int n, int dim, ev_tensor **out)
{
    const char *name = "stack";
    int rc;
    if ((rc = ev__check_exec(name, ex))) {
        return rc;
    }
    if (!out || !tensors || n <= 0) {
        return ev__set_message(EV_EINVAL, "%s: expected a non-empty list of tensors", name);
    }
    for (int i = 0; i < n; i++) {
        if ((rc = ev__check_tensor(name, "tensors[i]", tensors[i]))) {
            return rc;
        }
        int same = tensors[i]->ndim == tensors[0]->ndim;
        for (int k = 0; same && k < tensors[i]->ndim; k++) {
            same = tensors[i]->shape[k] == tensors[0]->shape[k];
        }
        if (!same) {
            char s0[EV__SHAPE_STR_SIZE], si[EV__SHAPE_STR_SIZE];
            return ev__set_message(EV_EINVAL, "%s: tensor %d of shape %s differs from tensor 0 "
                                   "of shape %s (stack needs equal shapes)", name, i,
                                   ev__shape_str(tensors[i]->ndim, tensors[i]->shape, si,
                                                 sizeof si),
                                   ev__shape_str(tensors[0]->ndim, tensors[0]->shape, s0,
                                                 sizeof s0));
        }
    }
    ev_tensor **views = ev__malloc(sizeof(ev_tensor *) * (size_t)n);
    if (!views) {
        return ev__set_message(EV_ENOMEM, "%s: out of memory", name);
    }
    int made = 0;
    for (; made < n; made++) {
        if ((rc = ev_unsqueeze(tensors[made], dim, &views[made]))) {
            break;
        }
    }
    if (made == n) {
        rc = cat(ex, name, views, n, dim, out);
    }
    for (int i = 0; i < made; i++) {
        ev_tensor_unref(views[i]);
    }
    ev__free(views);
    return rc;
}
