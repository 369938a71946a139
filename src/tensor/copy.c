/* Copies between tensors of any layout and dtype (copy_, contiguous), fill_,
 * and the host transfers (from_host, to_host, the sync point). */
#include <stdio.h>
#include <string.h>

#include "tensor/tensor-impl.h"

/* ------------------------------------------------------------------- copy */

/* The instruction's argument: both tensors referenced until drop. */
typedef struct copy_arg {
    ev_tensor *dst;
    ev_tensor *src; /* already broadcast to dst's shape */
} copy_arg;

static void copy_drop(void *p)
{
    copy_arg *a = p;
    ev_tensor_unref(a->dst);
    ev_tensor_unref(a->src);
}

static void copy_row(char **p, const int64_t *s, int64_t n, void *user)
{
    const ev_dtype *dt = user;
    ev__cast_strided(p[0], dt[0], s[0], p[1], dt[1], s[1], n);
}

static int copy_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    copy_arg *a = p;
    ev_tensor *ops[2] = {a->dst, a->src};
    ev_dtype dt[2] = {a->dst->dtype, a->src->dtype};
    ev__iter it;
    ev__iter_init(&it, 2, ops);
    ev__iter_rows(&it, copy_row, dt);
    return 0;
}

int ev__copy(const ev_exec *ex, const char *name, ev_tensor *dst, ev_tensor *src)
{
    copy_arg a;
    int rc = ev__broadcast_to(name, src, dst->ndim, dst->shape, &a.src);
    if (rc) {
        return rc;
    }
    a.dst = ev_tensor_ref(dst);
    return ev__submit(ex, name, copy_kernel, &a, sizeof a, copy_drop, &a.src, 1, &a.dst, 1);
}

/* A contiguous copy of t, issued on ex. */
static int clone_tensor(const ev_exec *ex, const char *name, ev_tensor *t, ev_tensor **out)
{
    ev_tensor *c;
    int rc = ev__tensor_new(name, ex, t->dtype, t->ndim, t->shape, &c);
    if (rc) {
        return rc;
    }
    rc = ev__copy(ex, name, c, t);
    if (rc) {
        ev_tensor_unref(c);
        return rc;
    }
    *out = c;
    return 0;
}

int ev_copy_(const ev_exec *ex, ev_tensor *dst, ev_tensor *src)
{
    int rc;
    if ((rc = ev__check_exec("copy_", ex)) || (rc = ev__check_tensor("copy_", "dst", dst)) ||
        (rc = ev__check_tensor("copy_", "src", src))) {
        return rc;
    }
    if (ev__has_internal_overlap(dst)) {
        return ev__set_message(EV_EINVAL, "copy_: dst is an expanded tensor (some of its "
                               "elements share memory); copy into a contiguous tensor");
    }
    int nd;
    int64_t shape[EV_MAX_DIMS];
    rc = ev_broadcast_shapes(dst->ndim, dst->shape, src->ndim, src->shape, &nd, shape);
    if (rc || nd != dst->ndim) {
        char a[EV__SHAPE_STR_SIZE], b[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "copy_: src of shape %s cannot be broadcast to dst "
                               "of shape %s", ev__shape_str(src->ndim, src->shape, a, sizeof a),
                               ev__shape_str(dst->ndim, dst->shape, b, sizeof b));
    }
    if (ev__same_layout(dst, src)) {
        return 0;
    }
    if (ev__may_overlap(dst, src)) {
        /* Read all of src before writing any of dst, as if src were copied
         * first: that is what a sequential program means. */
        ev_tensor *tmp;
        rc = clone_tensor(ex, "copy_", src, &tmp);
        if (rc) {
            return rc;
        }
        rc = ev__copy(ex, "copy_", dst, tmp);
        ev_tensor_unref(tmp);
        return rc;
    }
    return ev__copy(ex, "copy_", dst, src);
}

int ev_contiguous(const ev_exec *ex, ev_tensor *t, ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec("contiguous", ex)) ||
        (rc = ev__check_tensor("contiguous", "the tensor", t))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "contiguous: out is NULL");
    }
    if (ev_tensor_is_contiguous(t)) {
        *out = ev_tensor_ref(t);
        return 0;
    }
    return clone_tensor(ex, "contiguous", t, out);
}

/* ------------------------------------------------------------------- fill */

typedef struct fill_arg {
    ev_tensor *t;
    _Alignas(8) unsigned char value[8]; /* in t's dtype */
} fill_arg;

static void fill_drop(void *p)
{
    ev_tensor_unref(((fill_arg *)p)->t);
}

static void fill_row(char **p, const int64_t *s, int64_t n, void *user)
{
    fill_arg *a = user;
    ev__cast_strided(p[0], a->t->dtype, s[0], a->value, a->t->dtype, 0, n);
}

static int fill_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    fill_arg *a = p;
    ev__iter it;
    ev__iter_init(&it, 1, &a->t);
    ev__iter_rows(&it, fill_row, a);
    return 0;
}

int ev_fill_(const ev_exec *ex, ev_tensor *t, ev_scalar value)
{
    int rc;
    if ((rc = ev__check_exec("fill_", ex)) || (rc = ev__check_tensor("fill_", "the tensor", t))) {
        return rc;
    }
    if (!ev_dtype_get_info(value.dtype)) {
        return ev__set_message(EV_EINVAL, "fill_: the value has an invalid dtype %d",
                               (int)value.dtype);
    }
    fill_arg a;
    memset(&a, 0, sizeof a);
    a.t = ev_tensor_ref(t);
    ev__scalar_store(t->dtype, value, a.value);
    return ev__submit(ex, "fill_", fill_kernel, &a, sizeof a, fill_drop, NULL, 0, &a.t, 1);
}

/* ------------------------------------------------------------- host copies */

int ev_from_host(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                 const void *src, ev_tensor **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "from_host: out is NULL");
    }
    ev_tensor *t;
    int rc = ev_empty(ex, dtype, ndim, shape, &t);
    if (rc) {
        return rc;
    }
    if (t->numel > 0) {
        if (!src) {
            ev_tensor_unref(t);
            return ev__set_message(EV_EINVAL, "from_host: src is NULL");
        }
        /* No instruction uses the new storage, but its block may be one
         * that stream-ordered reuse handed over while the instructions of
         * its last tensor are still queued on this stream: the new object
         * is ordered after them, so wait for them before the host writes.
         * (A failure of theirs is not this tensor's: it is reported where
         * their results are read.) */
        ev_wait_obj(ex->vm, t->storage->obj, NULL);
        memcpy(ev__tensor_ptr(t), src, (size_t)t->numel * ev__dsize(dtype));
    }
    *out = t;
    return 0;
}

int ev_to_host(const ev_exec *ex, ev_tensor *t, void *dst)
{
    int rc;
    if ((rc = ev__check_exec("to_host", ex)) ||
        (rc = ev__check_tensor("to_host", "the tensor", t))) {
        return rc;
    }
    ev_error *err = NULL;
    rc = ev_wait_obj(ex->vm, t->storage->obj, &err);
    if (rc) {
        if (err) {
            char buf[512];
            ev_error_format(err, buf, sizeof buf);
            ev_error_unref(err);
            return ev__set_message(rc, "%s", buf);
        }
        return rc;
    }
    if (t->numel == 0) {
        return 0;
    }
    if (!dst) {
        return ev__set_message(EV_EINVAL, "to_host: dst is NULL");
    }
    int64_t size = (int64_t)ev__dsize(t->dtype);
    int64_t strides[2][EV_MAX_DIMS];
    int64_t st = size;
    for (int d = t->ndim - 1; d >= 0; d--) {
        strides[0][d] = st;
        strides[1][d] = t->strides[d] * size;
        st *= t->shape[d];
    }
    char *data[2] = {dst, ev__tensor_ptr(t)};
    ev_dtype dt[2] = {t->dtype, t->dtype};
    ev__iter it;
    ev__iter_init_raw(&it, 2, t->ndim, t->shape, data, (const int64_t(*)[EV_MAX_DIMS])strides);
    ev__iter_rows(&it, copy_row, dt);
    return 0;
}
