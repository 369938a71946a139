/* tril and triu (and their in-place forms): the lower or upper triangle of
 * each matrix in the last two dimensions, the other elements set to 0. A
 * row i of a matrix with C columns keeps a leading run of columns (tril:
 * j <= i + diagonal) or a trailing one (triu: j >= i + diagonal), so each
 * row is one copied run and one zeroed run. Zero is all bits zero in every
 * dtype (+0.0 for floats), so the code moves bytes and serves every dtype.
 * One instruction per call; rows are split over the intra-op threads. */
#include <string.h>

#include "ops/ops-impl.h"

typedef struct tri_arg {
    ev_tensor *x, *out; /* referenced; out is x itself in place */
    int upper;          /* triu rather than tril */
    int64_t diagonal;   /* clamped to [-rows, cols] (the same triangle) */
} tri_arg;
_Static_assert(sizeof(tri_arg) <= EV_INLINE_ARG_SIZE, "tri_arg must travel inline");

static void tri_drop(void *p)
{
    tri_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->out);
}

/* Sets n elements of esz bytes, stride bytes apart, to zero. */
static void zero_run(char *dst, int64_t stride, int64_t n, size_t esz)
{
    if (stride == (int64_t)esz) {
        if (n > 0) {
            memset(dst, 0, (size_t)n * esz);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        memset(dst + i * stride, 0, esz);
    }
}

/* Matrix rows [lo, hi) over every batch (rows in C order). */
static void tri_rows(int64_t lo, int64_t hi, void *p)
{
    const tri_arg *a = p;
    const ev_tensor *x = a->x, *o = a->out;
    int inplace = x == o;
    int nd = x->ndim;
    size_t esz = ev__dsize(x->dtype);
    int64_t cols = x->shape[nd - 1];
    int64_t xcs = x->strides[nd - 1] * (int64_t)esz, ocs = o->strides[nd - 1] * (int64_t)esz;
    char *xb = ev__tensor_ptr(x), *ob = ev__tensor_ptr(o);
    /* Multi-index of row lo over the dimensions but the last. */
    int64_t idx[EV_MAX_DIMS], rest = lo;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = rest % x->shape[d];
        rest /= x->shape[d];
    }
    for (int64_t r = lo; r < hi; r++) {
        int64_t xo = 0, oo = 0;
        for (int d = 0; d < nd - 1; d++) {
            xo += idx[d] * x->strides[d];
            oo += idx[d] * o->strides[d];
        }
        char *xr = xb + xo * (int64_t)esz, *orow = ob + oo * (int64_t)esz;
        /* Columns [0, cut) and [cut, cols): tril keeps the first, triu the
         * second (|diagonal| <= max(rows, cols), so no overflow). */
        int64_t i = idx[nd - 2];
        int64_t cut = a->upper ? i + a->diagonal : i + a->diagonal + 1;
        cut = cut < 0 ? 0 : cut > cols ? cols : cut;
        int64_t keep0 = a->upper ? cut : 0, keepn = a->upper ? cols - cut : cut;
        int64_t zero0 = a->upper ? 0 : cut, zeron = cols - keepn;
        if (!inplace) {
            ev__copy_run(orow + keep0 * ocs, ocs, xr + keep0 * xcs, xcs, keepn, esz);
        }
        zero_run(orow + zero0 * ocs, ocs, zeron, esz);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < x->shape[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
}

static int tri_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    tri_arg *a = p;
    const ev_tensor *x = a->x;
    if (x->numel == 0) {
        return 0;
    }
    int64_t cols = x->shape[x->ndim - 1];
    ev__parallel_for(x->numel / cols, EV__PARALLEL_GRAIN / cols + 1, tri_rows, a);
    return 0;
}

static int tri(const ev_exec *ex, const char *name, ev_tensor *x, int64_t diagonal, int upper,
               int inplace, ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!inplace && !out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if (x->ndim < 2) {
        char s[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "%s: x of shape %s has %d dimensions; at least 2 "
                               "expected (a matrix or a stack of them)", name,
                               ev__shape_str(x->ndim, x->shape, s, sizeof s), x->ndim);
    }
    int64_t rows = x->shape[x->ndim - 2], cols = x->shape[x->ndim - 1];
    diagonal = diagonal < -rows ? -rows : diagonal > cols ? cols : diagonal;
    ev_tensor *dst;
    if (inplace) {
        if (ev__has_internal_overlap(x)) {
            return ev__set_message(EV_EINVAL, "%s: the in-place operand is an expanded tensor "
                                   "(some elements share memory)", name);
        }
        dst = ev_tensor_ref(x);
    } else if ((rc = ev__tensor_new(name, ex, x->dtype, x->ndim, x->shape, &dst))) {
        return rc;
    }
    tri_arg a = {
        .x = ev_tensor_ref(x),
        .out = ev_tensor_ref(dst),
        .upper = upper,
        .diagonal = diagonal,
    };
    /* In place nothing is read: the kept elements stay as they are. */
    rc = ev__submit(ex, name, tri_kernel, &a, sizeof a, tri_drop, inplace ? NULL : &a.x,
                    inplace ? 0 : 1, &a.out, 1);
    if (rc || inplace) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_tril(const ev_exec *ex, ev_tensor *x, int64_t diagonal, ev_tensor **out)
{
    return tri(ex, "tril", x, diagonal, 0, 0, out);
}

int ev_triu(const ev_exec *ex, ev_tensor *x, int64_t diagonal, ev_tensor **out)
{
    return tri(ex, "triu", x, diagonal, 1, 0, out);
}

int ev_tril_(const ev_exec *ex, ev_tensor *x, int64_t diagonal)
{
    return tri(ex, "tril_", x, diagonal, 0, 1, NULL);
}

int ev_triu_(const ev_exec *ex, ev_tensor *x, int64_t diagonal)
{
    return tri(ex, "triu_", x, diagonal, 1, 1, NULL);
}
