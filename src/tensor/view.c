/* Views: new tensor structs over the same storage with another shape, strides
 * or offset (reshape, transpose, permute, expand, slice, squeeze, unsqueeze),
 * and the broadcasting rules they share with the ops. */
#include <string.h>

#include "tensor/tensor-impl.h"

int ev_broadcast_shapes(int ndim_a, const int64_t *shape_a, int ndim_b,
                        const int64_t *shape_b, int *out_ndim, int64_t *out_shape)
{
    int n = ndim_a > ndim_b ? ndim_a : ndim_b;
    int64_t res[EV_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int ia = ndim_a - n + i, ib = ndim_b - n + i;
        int64_t a = ia >= 0 ? shape_a[ia] : 1, b = ib >= 0 ? shape_b[ib] : 1;
        if (a != b && a != 1 && b != 1) {
            char sa[EV__SHAPE_STR_SIZE], sb[EV__SHAPE_STR_SIZE];
            return ev__set_message(EV_EINVAL, "shapes %s and %s cannot be broadcast together "
                                   "(dimension %d: %lld vs %lld)",
                                   ev__shape_str(ndim_a, shape_a, sa, sizeof sa),
                                   ev__shape_str(ndim_b, shape_b, sb, sizeof sb), i,
                                   (long long)a, (long long)b);
        }
        res[i] = a == 1 ? b : a;
    }
    for (int i = 0; i < n; i++) {
        out_shape[i] = res[i];
    }
    *out_ndim = n;
    return 0;
}

/* Fills in a -1 entry of shape (into res) so the element count matches numel. */
static int infer_shape(const char *fn, const ev_tensor *t, int ndim, const int64_t *shape,
                       int64_t *res)
{
    if (ndim < 0 || ndim > EV_MAX_DIMS || (ndim > 0 && !shape)) {
        return ev__set_message(EV_EINVAL, "%s: bad ndim %d (or NULL shape)", fn, ndim);
    }
    int infer = -1, zero = 0, big = 0;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        res[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
        } else if (shape[i] < 0) {
            return ev__set_message(EV_EINVAL, "%s: bad size %lld in dimension %d", fn,
                                   (long long)shape[i], i);
        } else {
            /* Sizes are untrusted: a product past int64 cannot match numel,
             * unless another size is 0. */
            zero |= shape[i] == 0;
            big |= __builtin_mul_overflow(known, shape[i], &known);
        }
    }
    if (zero) {
        known = 0;
    }
    if (infer >= 0) {
        res[infer] = known > 0 ? t->numel / known : -1;
    }
    /* known * res[infer] <= numel: no overflow. */
    int64_t n = infer >= 0 ? known * res[infer] : known;
    if ((big && !zero) || n != t->numel || (infer >= 0 && res[infer] < 0)) {
        char a[EV__SHAPE_STR_SIZE], b[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "%s: shape %s is invalid for a tensor of shape %s "
                               "(%lld elements)", fn, ev__shape_str(ndim, shape, a, sizeof a),
                               ev__shape_str(t->ndim, t->shape, b, sizeof b),
                               (long long)t->numel);
    }
    /* An empty tensor may take sizes whose strides would overflow. */
    return ev__check_shape(fn, ndim, res);
}

/* Strides for viewing t as shape, or 0 if its strides do not allow it. Walks
 * the old dimensions in chunks that are contiguous among themselves; each
 * chunk must map onto a run of new dimensions with the same element count
 * (the approach of PyTorch's computeStride). */
static int view_strides(const ev_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    if (t->numel == 0 || t->ndim == 0 || ndim == 0) {
        /* Nothing to preserve: any layout of no elements (or of one) works. */
        int64_t st = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            strides[i] = st;
            st *= shape[i] > 0 ? shape[i] : 1;
        }
        return 1;
    }
    int vd = ndim - 1;
    int64_t base = t->strides[t->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        /* The chunk ends where dimension d-1 does not continue it. */
        if (d == 0 ||
            (t->shape[d - 1] != 1 && t->strides[d - 1] != tensor_numel * base)) {
            while (vd >= 0 && (view_numel < tensor_numel || shape[vd] == 1)) {
                strides[vd] = view_numel * base;
                view_numel *= shape[vd];
                vd--;
            }
            if (view_numel != tensor_numel) {
                return 0;
            }
            if (d > 0) {
                base = t->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return vd == -1;
}

int ev_view(ev_tensor *t, int ndim, const int64_t *shape, ev_tensor **out)
{
    int rc = ev__check_tensor("view", "the tensor", t);
    if (rc) {
        return rc;
    }
    int64_t res[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    rc = infer_shape("view", t, ndim, shape, res);
    if (rc) {
        return rc;
    }
    if (!view_strides(t, ndim, res, strides)) {
        char a[EV__SHAPE_STR_SIZE], b[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "view: the strides of a tensor of shape %s do not "
                               "allow viewing it as shape %s; use reshape (which copies)",
                               ev__shape_str(t->ndim, t->shape, b, sizeof b),
                               ev__shape_str(ndim, res, a, sizeof a));
    }
    return ev__tensor_alias(t, t->dtype, ndim, res, strides, t->offset, out);
}

int ev_reshape(const ev_exec *ex, ev_tensor *t, int ndim, const int64_t *shape,
               ev_tensor **out)
{
    int rc = ev__check_tensor("reshape", "the tensor", t);
    if (rc) {
        return rc;
    }
    int64_t res[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    rc = infer_shape("reshape", t, ndim, shape, res);
    if (rc) {
        return rc;
    }
    if (view_strides(t, ndim, res, strides)) {
        return ev__tensor_alias(t, t->dtype, ndim, res, strides, t->offset, out);
    }
    ev_tensor *c;
    rc = ev_contiguous(ex, t, &c);
    if (rc) {
        return rc;
    }
    rc = ev_view(c, ndim, res, out);
    ev_tensor_unref(c);
    return rc;
}

int ev_transpose(ev_tensor *t, int dim0, int dim1, ev_tensor **out)
{
    int rc = ev__check_tensor("transpose", "the tensor", t);
    int d0, d1;
    if (rc || (rc = ev__norm_dim("transpose", dim0, t->ndim, &d0)) ||
        (rc = ev__norm_dim("transpose", dim1, t->ndim, &d1))) {
        return rc;
    }
    int64_t shape[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    shape[d0] = t->shape[d1];
    strides[d0] = t->strides[d1];
    shape[d1] = t->shape[d0];
    strides[d1] = t->strides[d0];
    return ev__tensor_alias(t, t->dtype, t->ndim, shape, strides, t->offset, out);
}

int ev_permute(ev_tensor *t, const int *dims, ev_tensor **out)
{
    int rc = ev__check_tensor("permute", "the tensor", t);
    if (rc) {
        return rc;
    }
    if (t->ndim > 0 && !dims) {
        return ev__set_message(EV_EINVAL, "permute: dims is NULL");
    }
    int64_t shape[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    int seen[EV_MAX_DIMS] = {0};
    for (int i = 0; i < t->ndim; i++) {
        int d;
        rc = ev__norm_dim("permute", dims[i], t->ndim, &d);
        if (rc) {
            return rc;
        }
        if (seen[d]++) {
            return ev__set_message(EV_EINVAL, "permute: dimension %d appears twice; dims must "
                                   "be a permutation of the %d dimensions", dims[i], t->ndim);
        }
        shape[i] = t->shape[d];
        strides[i] = t->strides[d];
    }
    return ev__tensor_alias(t, t->dtype, t->ndim, shape, strides, t->offset, out);
}

static int expand(const char *fn, ev_tensor *t, int ndim, const int64_t *shape, int allow_keep,
                  ev_tensor **out)
{
    int rc = ev__check_tensor(fn, "the tensor", t);
    if (rc) {
        return rc;
    }
    if (ndim < t->ndim || ndim > EV_MAX_DIMS || (ndim > 0 && !shape)) {
        char a[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "%s: cannot expand a tensor of shape %s to %d "
                               "dimensions", fn, ev__shape_str(t->ndim, t->shape, a, sizeof a),
                               ndim);
    }
    int64_t res[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        int64_t want = shape[i];
        if (want == -1 && allow_keep && j >= 0) {
            want = t->shape[j];
        }
        if (want < 0) {
            return ev__set_message(EV_EINVAL, "%s: bad size %lld in dimension %d", fn,
                                   (long long)shape[i], i);
        }
        if (j < 0) {
            res[i] = want;
            strides[i] = 0;
        } else if (t->shape[j] == want) {
            res[i] = want;
            strides[i] = t->strides[j];
        } else if (t->shape[j] == 1) {
            res[i] = want;
            strides[i] = 0;
        } else {
            char a[EV__SHAPE_STR_SIZE], b[EV__SHAPE_STR_SIZE];
            return ev__set_message(EV_EINVAL, "%s: cannot expand shape %s to %s (dimension %d "
                                   "has size %lld, which is not 1)", fn,
                                   ev__shape_str(t->ndim, t->shape, a, sizeof a),
                                   ev__shape_str(ndim, shape, b, sizeof b), i,
                                   (long long)t->shape[j]);
        }
    }
    if ((rc = ev__check_shape(fn, ndim, res))) {
        return rc;
    }
    return ev__tensor_alias(t, t->dtype, ndim, res, strides, t->offset, out);
}

int ev_expand(ev_tensor *t, int ndim, const int64_t *shape, ev_tensor **out)
{
    return expand("expand", t, ndim, shape, 1, out);
}

int ev__broadcast_to(const char *fn, ev_tensor *t, int ndim, const int64_t *shape,
                     ev_tensor **out)
{
    return expand(fn, t, ndim, shape, 0, out);
}

/* Clamps a Python-style bound as PySlice_AdjustIndices does: negative counts
 * from the end, then into [0, size] for a positive step and [-1, size - 1]
 * for a negative one (-1 standing for "before the first element"). Any
 * int64 is accepted: size >= 0, so bound + size cannot overflow. */
static int64_t clamp_bound(int64_t b, int64_t size, int64_t step)
{
    if (b < 0) {
        b += size;
        if (b < 0) {
            b = step < 0 ? -1 : 0;
        }
    } else if (b >= size) {
        b = step < 0 ? size - 1 : size;
    }
    return b;
}

int ev_slice(ev_tensor *t, int dim, int64_t start, int64_t stop, int64_t step,
             ev_tensor **out)
{
    int rc = ev__check_tensor("slice", "the tensor", t);
    int d;
    if (rc || (rc = ev__norm_dim("slice", dim, t->ndim, &d))) {
        return rc;
    }
    if (step == 0) {
        return ev__set_message(EV_EINVAL, "slice: step must not be zero");
    }
    /* As Python does: -step must be representable, and a step of at least
     * the size takes one element whatever its magnitude. */
    if (step < -INT64_MAX) {
        step = -INT64_MAX;
    }
    int64_t size = t->shape[d];
    start = clamp_bound(start, size, step);
    stop = clamp_bound(stop, size, step);
    /* Both bounds lie in [-1, size], so the differences cannot overflow. */
    int64_t len = 0;
    if (step > 0 && stop > start) {
        len = (stop - start - 1) / step + 1;
    } else if (step < 0 && stop < start) {
        len = (start - stop - 1) / -step + 1;
    }
    int64_t shape[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    shape[d] = len;
    /* With two or more elements, |step| < size and the new stride spans no
     * more than the old dimension did; with fewer, any stride will do, and
     * a huge step must not overflow it. */
    if (len > 1 && __builtin_mul_overflow(t->strides[d], step, &strides[d])) {
        return ev__set_message(EV_EINVAL, "slice: stride %lld times step %lld overflows",
                               (long long)t->strides[d], (long long)step);
    }
    /* The first element is the one at start, whichever way the view walks;
     * an empty view keeps t's offset (start may be -1 or size then). */
    int64_t offset = t->offset + (len > 0 ? start * t->strides[d] : 0);
    return ev__tensor_alias(t, t->dtype, t->ndim, shape, strides, offset, out);
}

int ev_as_strided(ev_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                  int64_t offset, ev_tensor **out)
{
    int rc = ev__check_tensor("as_strided", "the tensor", t);
    if (rc || (rc = ev__check_shape("as_strided", ndim, shape))) {
        return rc;
    }
    if (!strides && ndim > 0) {
        return ev__set_message(EV_EINVAL, "as_strided: strides is NULL");
    }
    int64_t capacity = (int64_t)(t->storage->nbytes / ev__dsize(t->dtype));
    /* The lowest and highest element reached, with overflow checked: the
     * shape check bounds the sizes, not the strides. */
    int64_t lo = offset, hi = offset;
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        empty |= shape[d] == 0;
        int64_t span;
        if (shape[d] > 1 && __builtin_mul_overflow(shape[d] - 1, strides[d], &span)) {
            return ev__set_message(EV_EINVAL, "as_strided: stride %lld of dimension %d "
                                   "overflows", (long long)strides[d], d);
        }
        span = shape[d] > 1 ? span : 0;
        if (__builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi)) {
            return ev__set_message(EV_EINVAL, "as_strided: the view's extent overflows");
        }
    }
    if (offset < 0 || offset > capacity || (!empty && (lo < 0 || hi >= capacity))) {
        return ev__set_message(EV_EINVAL,
                               "as_strided: the view reaches elements %lld to %lld of a storage "
                               "of %lld elements (offset %lld)",
                               (long long)lo, (long long)hi, (long long)capacity,
                               (long long)offset);
    }
    return ev__tensor_alias(t, t->dtype, ndim, shape, strides, offset, out);
}

int ev_squeeze(ev_tensor *t, int dim, ev_tensor **out)
{
    int rc = ev__check_tensor("squeeze", "the tensor", t);
    int d;
    if (rc || (rc = ev__norm_dim("squeeze", dim, t->ndim, &d))) {
        return rc;
    }
    int64_t shape[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d && t->shape[i] == 1) {
            continue;
        }
        shape[n] = t->shape[i];
        strides[n++] = t->strides[i];
    }
    return ev__tensor_alias(t, t->dtype, n, shape, strides, t->offset, out);
}

int ev_squeeze_all(ev_tensor *t, ev_tensor **out)
{
    int rc = ev__check_tensor("squeeze", "the tensor", t);
    if (rc) {
        return rc;
    }
    int64_t shape[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] != 1) {
            shape[n] = t->shape[i];
            strides[n++] = t->strides[i];
        }
    }
    return ev__tensor_alias(t, t->dtype, n, shape, strides, t->offset, out);
}

int ev_unsqueeze(ev_tensor *t, int dim, ev_tensor **out)
{
    int rc = ev__check_tensor("unsqueeze", "the tensor", t);
    if (rc) {
        return rc;
    }
    if (t->ndim >= EV_MAX_DIMS) {
        return ev__set_message(EV_EINVAL, "unsqueeze: a tensor has at most %d dimensions",
                               EV_MAX_DIMS);
    }
    int d;
    rc = ev__norm_dim("unsqueeze", dim, t->ndim + 1, &d);
    if (rc) {
        return rc;
    }
    int64_t shape[EV_MAX_DIMS], strides[EV_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            shape[i] = 1;
            /* Any stride works for size 1; this one keeps a contiguous
             * tensor contiguous by every test. */
            strides[i] = j < t->ndim ? t->strides[j] * t->shape[j] : 1;
            continue;
        }
        shape[i] = t->shape[j];
        strides[i] = t->strides[j];
        j++;
    }
    return ev__tensor_alias(t, t->dtype, t->ndim + 1, shape, strides, t->offset, out);
}
