/* Indexing ops whose index tensor is only read inside the kernel:
 * index_select, gather, take and scatter_add(_). Shapes and dtypes are
 * checked on the issuing thread; an index out of range fails the instruction
 * with EV_EINDEX naming the index, the dimension and its size (DESIGN rule 6),
 * which poisons the output (and, for scatter_add_, the tensor written). */
#include <string.h>

#include "ops/ops-impl.h"

/* ---------------------------------------------------------------- helpers */

/* An index of any integer dtype (checked on the issuing side), widened. */
static inline int64_t load_index(const char *p, ev_dtype d)
{
    switch (d) {
    case EV_INT32: return *(const int32_t *)p;
    case EV_UINT8: return *(const uint8_t *)p;
    case EV_INT8: return *(const int8_t *)p;
    case EV_INT16: return *(const int16_t *)p;
    default: return *(const int64_t *)p;
    }
}

/* Copies one element of esz bytes (1, 2, 4 or 8: every dtype we have). */
static inline void copy_elem(char *dst, const char *src, size_t esz)
{
    memcpy(dst, src, esz);
}

/* Advances the C-order multi-index idx over shape by one and the byte
 * offsets off[k] of nops operands by their strides str[k] (bytes). */
static inline void advance(int nd, const int64_t *shape, int64_t *idx, int nops,
                           const int64_t (*str)[EV_MAX_DIMS], int64_t *off)
{
    for (int d = nd - 1; d >= 0; d--) {
        for (int k = 0; k < nops; k++) {
            off[k] += str[k][d];
        }
        if (++idx[d] < shape[d]) {
            return;
        }
        for (int k = 0; k < nops; k++) {
            off[k] -= str[k][d] * shape[d];
        }
        idx[d] = 0;
    }
}

/* Byte strides of t, with stride 0 for dimension skip (-1: none). */
static void byte_strides(const ev_tensor *t, int skip, int64_t *out)
{
    int64_t esz = (int64_t)ev__dsize(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        out[d] = d == skip ? 0 : t->strides[d] * esz;
    }
}

/* Size and byte stride of x's dimension dim; a 0-d x counts as one element. */
static void dim_info(const ev_tensor *x, int dim, int64_t *size, int64_t *stride)
{
    if (x->ndim == 0) {
        *size = 1;
        *stride = 0;
    } else {
        *size = x->shape[dim];
        *stride = x->strides[dim] * (int64_t)ev__dsize(x->dtype);
    }
}

static int check_index_dtype(const char *name, const ev_tensor *index)
{
    if (ev_dtype_get_info(index->dtype)->kind != EV_KIND_INT) {
        return ev__set_message(EV_ETYPE, "%s: index must have an integer dtype, not %s", name,
                               ev_dtype_name(index->dtype));
    }
    return 0;
}

/* Normalises dim for x, accepting 0 and -1 for a 0-d x (as PyTorch). */
static int norm_dim0(const char *name, int dim, const ev_tensor *x, int *out)
{
    if (x->ndim == 0) {
        if (dim != 0 && dim != -1) {
            return ev__set_message(EV_EINDEX, "%s: dimension %d is out of range [-1, 0] for a "
                                   "0-d tensor", name, dim);
        }
        *out = 0;
        return 0;
    }
    return ev__norm_dim(name, dim, x->ndim, out);
}

/* The kernel argument of every op here. */
typedef struct idx_arg {
    ev_tensor *x, *index, *src, *out;  /* referenced; src only for scatter_add */
    int dim;
    const char *name;                  /* static */
} idx_arg;
_Static_assert(sizeof(idx_arg) <= EV_INLINE_ARG_SIZE, "idx_arg must travel inline");

static void idx_drop(void *p)
{
    idx_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->index);
    ev_tensor_unref(a->src);
    ev_tensor_unref(a->out);
}

#define OOB_FMT "%s: index %lld is out of bounds for dimension %d with size %lld"

/* --------------------------------------------------------------- kernels */

/* out[..., j, ...] = x[..., index[j], ...] along dim; walks out's elements. */
static int index_select_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *x = a->x, *o = a->out, *ix = a->index;
    if (o->numel == 0) {
        return 0;
    }
    size_t esz = ev__dsize(x->dtype);
    int64_t size, xs;
    dim_info(x, a->dim, &size, &xs);
    int64_t str[2][EV_MAX_DIMS] = {{0}};
    byte_strides(o, -1, str[0]);
    byte_strides(x, a->dim, str[1]);
    int64_t istride = ix->ndim ? ix->strides[0] * (int64_t)ev__dsize(ix->dtype) : 0;
    char *X = ev__tensor_ptr(x), *O = ev__tensor_ptr(o), *I = ev__tensor_ptr(ix);
    int64_t idx[EV_MAX_DIMS] = {0}, off[2] = {0, 0};
    for (int64_t e = 0; e < o->numel; e++) {
        int64_t j = o->ndim ? idx[a->dim] : 0;
        int64_t v = load_index(I + j * istride, ix->dtype);
        if (v < 0 || v >= size) {
            return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, a->dim,
                                (long long)size);
        }
        copy_elem(O + off[0], X + off[1] + v * xs, esz);
        advance(o->ndim, o->shape, idx, 2, (const int64_t(*)[EV_MAX_DIMS])str, off);
    }
    return 0;
}

/* out[i][j][k] = x[i][index[i][j][k]][k] (dim 1); walks index's elements. */
static int gather_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *x = a->x, *o = a->out, *ix = a->index;
    if (o->numel == 0) {
        return 0;
    }
    size_t esz = ev__dsize(x->dtype);
    int64_t size, xs;
    dim_info(x, a->dim, &size, &xs);
    int64_t str[3][EV_MAX_DIMS] = {{0}};
    byte_strides(o, -1, str[0]);
    byte_strides(x, a->dim, str[1]);
    byte_strides(ix, -1, str[2]);
    char *X = ev__tensor_ptr(x), *O = ev__tensor_ptr(o), *I = ev__tensor_ptr(ix);
    int64_t idx[EV_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
    for (int64_t e = 0; e < o->numel; e++) {
        int64_t v = load_index(I + off[2], ix->dtype);
        if (v < 0 || v >= size) {
            return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, a->dim,
                                (long long)size);
        }
        copy_elem(O + off[0], X + off[1] + v * xs, esz);
        advance(ix->ndim, ix->shape, idx, 3, (const int64_t(*)[EV_MAX_DIMS])str, off);
    }
    return 0;
}

/* out[i] = x.flatten()[index[i]], negative indices counting from the end. */
static int take_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *x = a->x, *o = a->out, *ix = a->index;
    if (o->numel == 0) {
        return 0;
    }
    size_t esz = ev__dsize(x->dtype);
    int64_t str[2][EV_MAX_DIMS] = {{0}};
    byte_strides(o, -1, str[0]);
    byte_strides(ix, -1, str[1]);
    int64_t xstr[EV_MAX_DIMS] = {0};
    byte_strides(x, -1, xstr);
    char *X = ev__tensor_ptr(x), *O = ev__tensor_ptr(o), *I = ev__tensor_ptr(ix);
    int64_t idx[EV_MAX_DIMS] = {0}, off[2] = {0, 0};
    for (int64_t e = 0; e < o->numel; e++) {
        int64_t v = load_index(I + off[1], ix->dtype);
        if (v < -x->numel || v >= x->numel) {
            return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, 0,
                                (long long)x->numel);
        }
        int64_t flat = v < 0 ? v + x->numel : v, xo = 0;
        /* Unravel the flat C-order index into x's strides. */
        for (int d = x->ndim - 1; d >= 0; d--) {
            xo += (flat % x->shape[d]) * xstr[d];
            flat /= x->shape[d];
        }
        copy_elem(O + off[0], X + xo, esz);
        advance(ix->ndim, ix->shape, idx, 2, (const int64_t(*)[EV_MAX_DIMS])str, off);
    }
    return 0;
}

/* x[i][index[i][j][k]][k] += src[i][j][k] (dim 1), x being a->out. */
static int scatter_add_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *o = a->out, *ix = a->index, *s = a->src;
    if (ix->numel == 0) {
        return 0;
    }
    int64_t size, os;
    dim_info(o, a->dim, &size, &os);
    int64_t str[3][EV_MAX_DIMS] = {{0}};
    byte_strides(o, a->dim, str[0]);
    byte_strides(s, -1, str[1]);
    byte_strides(ix, -1, str[2]);
    char *O = ev__tensor_ptr(o), *S = ev__tensor_ptr(s), *I = ev__tensor_ptr(ix);
    int64_t idx[EV_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
    for (int64_t e = 0; e < ix->numel; e++) {
        int64_t v = load_index(I + off[2], ix->dtype);
        if (v < 0 || v >= size) {
            return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, a->dim,
                                (long long)size);
        }
        char *dst = O + off[0] + v * os;
        const char *src = S + off[1];
        switch (o->dtype) {
        case EV_BOOL: *(uint8_t *)dst |= *(const uint8_t *)src; break;
        case EV_INT32: {
            /* Wraps like NumPy, computed unsigned (no signed overflow). */
            uint32_t sum = (uint32_t)*(int32_t *)dst + (uint32_t)*(const int32_t *)src;
            *(int32_t *)dst = (int32_t)sum;
            break;
        }
        case EV_INT64: {
            uint64_t sum = (uint64_t)*(int64_t *)dst + (uint64_t)*(const int64_t *)src;
            *(int64_t *)dst = (int64_t)sum;
            break;
        }
        /* The narrow integers: added in int, wrapped by the conversion. */
        case EV_UINT8: *(uint8_t *)dst = (uint8_t)(*(uint8_t *)dst + *(const uint8_t *)src); break;
        case EV_INT8: *(int8_t *)dst = (int8_t)(*(int8_t *)dst + *(const int8_t *)src); break;
        case EV_INT16: *(int16_t *)dst = (int16_t)(*(int16_t *)dst + *(const int16_t *)src); break;
        case EV_FLOAT32: *(float *)dst += *(const float *)src; break;
        default: *(double *)dst += *(const double *)src; break;
        }
        advance(ix->ndim, ix->shape, idx, 3, (const int64_t(*)[EV_MAX_DIMS])str, off);
    }
    return 0;
}

/* ---------------------------------------------------------- issuing side */

static int issue(const ev_exec *ex, const char *name, ev_kernel_fn kernel, ev_tensor *x,
                 ev_tensor *index, ev_tensor *src, ev_tensor *out, int dim)
{
    idx_arg a = {
        .x = ev_tensor_ref(x),
        .index = ev_tensor_ref(index),
        .src = ev_tensor_ref(src),
        .out = ev_tensor_ref(out),
        .dim = dim,
        .name = name,
    };
    ev_tensor *reads[3] = {a.x, a.index, a.src};
    return ev__submit(ex, name, kernel, &a, sizeof a, idx_drop, reads, 3, &a.out, 1);
}

static int check_common(const char *name, const ev_exec *ex, ev_tensor *x, ev_tensor *index,
                        ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x)) ||
        (rc = ev__check_tensor(name, "index", index))) {
        return rc;
    }
    if (out == NULL) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    return check_index_dtype(name, index);
}

int ev_index_select(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor **out)
{
    const char *name = "index_select";
    int rc, d;
    if ((rc = check_common(name, ex, x, index, out)) || (rc = norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    if (index->ndim > 1) {
        return ev__set_message(EV_EINVAL, "%s: index must be 0-d or 1-d, not %d-d", name,
                               index->ndim);
    }
    int64_t shape[EV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    int nd = x->ndim;
    if (nd > 0) {
        shape[d] = index->numel;
    } else if (index->ndim == 1) {
        /* A 0-d x indexed by a 1-d index gives a 1-d result (PyTorch). */
        shape[0] = index->numel;
        nd = 1;
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, nd, shape, &dst))) {
        return rc;
    }
    if ((rc = issue(ex, name, index_select_kernel, x, index, NULL, dst, x->ndim ? d : 0))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_gather(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor **out)
{
    const char *name = "gather";
    int rc, d;
    if ((rc = check_common(name, ex, x, index, out)) || (rc = norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    char sx[EV__SHAPE_STR_SIZE], si[EV__SHAPE_STR_SIZE];
    ev__shape_str(x->ndim, x->shape, sx, sizeof sx);
    ev__shape_str(index->ndim, index->shape, si, sizeof si);
    if (index->ndim != x->ndim) {
        return ev__set_message(EV_EINVAL, "%s: index %s must have as many dimensions as x %s",
                               name, si, sx);
    }
    for (int i = 0; i < x->ndim; i++) {
        if (i != d && index->shape[i] > x->shape[i]) {
            return ev__set_message(EV_EINVAL, "%s: index %s is larger than x %s in dimension "
                                   "%d", name, si, sx, i);
        }
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, index->ndim, index->shape, &dst))) {
        return rc;
    }
    if ((rc = issue(ex, name, gather_kernel, x, index, NULL, dst, d))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_take(const ev_exec *ex, ev_tensor *x, ev_tensor *index, ev_tensor **out)
{
    const char *name = "take";
    int rc;
    if ((rc = check_common(name, ex, x, index, out))) {
        return rc;
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, index->ndim, index->shape, &dst))) {
        return rc;
    }
    if ((rc = issue(ex, name, take_kernel, x, index, NULL, dst, 0))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

/* A private copy of t when it may share memory with w (so the kernel reads
 * it whole before writing w), else a new reference to t. */
static int unalias(const ev_exec *ex, const char *name, ev_tensor *t, ev_tensor *w,
                   ev_tensor **out)
{
    if (!ev__may_overlap(t, w)) {
        *out = ev_tensor_ref(t);
        return 0;
    }
    int rc = ev__tensor_new(name, ex, t->dtype, t->ndim, t->shape, out);
    if (rc == 0 && (rc = ev__copy(ex, name, *out, t)) != 0) {
        ev_tensor_unref(*out);
    }
    return rc;
}

static int scatter_add(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                       ev_tensor *src, int inplace, ev_tensor **out)
{
    const char *name = inplace ? "scatter_add_" : "scatter_add";
    int rc, d;
    ev_tensor *dummy;
    if ((rc = check_common(name, ex, x, index, inplace ? &dummy : out)) ||
        (rc = ev__check_tensor(name, "src", src)) || (rc = norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    if (src->dtype != x->dtype) {
        return ev__set_message(EV_ETYPE, "%s: src dtype %s must equal x dtype %s", name,
                               ev_dtype_name(src->dtype), ev_dtype_name(x->dtype));
    }
    char sx[EV__SHAPE_STR_SIZE], si[EV__SHAPE_STR_SIZE], ss[EV__SHAPE_STR_SIZE];
    ev__shape_str(x->ndim, x->shape, sx, sizeof sx);
    ev__shape_str(index->ndim, index->shape, si, sizeof si);
    ev__shape_str(src->ndim, src->shape, ss, sizeof ss);
    if (index->ndim != x->ndim || src->ndim != x->ndim) {
        return ev__set_message(EV_EINVAL, "%s: x %s, index %s and src %s must have the same "
                               "number of dimensions", name, sx, si, ss);
    }
    for (int i = 0; i < x->ndim; i++) {
        if (index->shape[i] > src->shape[i] || (i != d && index->shape[i] > x->shape[i])) {
            return ev__set_message(EV_EINVAL, "%s: index %s is larger than src %s or x %s in "
                                   "dimension %d", name, si, ss, sx, i);
        }
    }
    ev_tensor *dst;
    if (inplace) {
        if (ev__has_internal_overlap(x)) {
            return ev__set_message(EV_EINVAL, "%s: x is an expanded tensor (some elements "
                                   "share memory)", name);
        }
        dst = ev_tensor_ref(x);
    } else {
        if ((rc = ev__tensor_new(name, ex, x->dtype, x->ndim, x->shape, &dst))) {
            return rc;
        }
        if ((rc = ev__copy(ex, name, dst, x))) {
            ev_tensor_unref(dst);
            return rc;
        }
    }
    ev_tensor *s2 = NULL, *i2 = NULL;
    if ((rc = unalias(ex, name, src, dst, &s2)) || (rc = unalias(ex, name, index, dst, &i2))) {
        goto done;
    }
    rc = issue(ex, name, scatter_add_kernel, NULL, i2, s2, dst, d);
done:
    ev_tensor_unref(s2);
    ev_tensor_unref(i2);
    if (rc || inplace) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_scatter_add(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor *src,
                   ev_tensor **out)
{
    return scatter_add(ex, x, dim, index, src, 0, out);
}

int ev_scatter_add_(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor *src)
{
    return scatter_add(ex, x, dim, index, src, 1, NULL);
}
