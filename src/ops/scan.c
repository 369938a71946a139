/* Cumulative sums and products (cumsum, cumprod and their in-place forms)
 * along one dimension: each line is converted into a buffer of its
 * accumulator (bool, int64 or float64, by the result's kind), scanned there
 * and stored into the output, so every dtype takes the same three loops.
 * Lines are split over the intra-op threads. One instruction per call. */
#include <stdatomic.h>
#include <string.h>

#include "ops/ops-impl.h"

typedef struct scan_arg {
    ev_tensor *x, *out;  /* referenced; out is x itself in place */
    int dim;             /* normalised; -1 for a 0-d x */
    int prod;            /* cumprod rather than cumsum */
    ev_dtype res;        /* result dtype: x is converted to it first */
    const char *name;    /* static */
} scan_arg;
_Static_assert(sizeof(scan_arg) <= EV_INLINE_ARG_SIZE, "scan_arg must travel inline");

static void scan_drop(void *p)
{
    scan_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->out);
}

/* The dtype a result of dtype res accumulates in. */
static ev_dtype acc_dtype(ev_dtype res)
{
    switch (ev_dtype_get_info(res)->kind) {
    case EV_KIND_BOOL: return EV_BOOL;
    case EV_KIND_INT: return EV_INT64;
    default: return EV_FLOAT64;
    }
}

/* Scans n accumulators of dtype acc in place. Integers wrap (computed
 * unsigned: signed overflow is undefined in C); bool sums are or, bool
 * products and. */
static void scan_buf(void *buf, ev_dtype acc, int prod, int64_t n)
{
    if (acc == EV_BOOL) {
        uint8_t *b = buf, s = prod ? 1 : 0;
        for (int64_t i = 0; i < n; i++) {
            s = prod ? (s & b[i]) : (s | b[i]);
            b[i] = s;
        }
    } else if (acc == EV_INT64) {
        int64_t *b = buf;
        uint64_t s = prod ? 1 : 0;
        for (int64_t i = 0; i < n; i++) {
            s = prod ? s * (uint64_t)b[i] : s + (uint64_t)b[i];
            b[i] = (int64_t)s;
        }
    } else {
        double *b = buf, s = prod ? 1 : 0;
        for (int64_t i = 0; i < n; i++) {
            s = prod ? s * b[i] : s + b[i];
            b[i] = s;
        }
    }
}

typedef struct scan_job {
    const scan_arg *a;
    ev__lines lines; /* operands x, out */
    atomic_int failed;
} scan_job;

static void scan_lines(int64_t lo, int64_t hi, void *p)
{
    scan_job *j = p;
    const scan_arg *a = j->a;
    const ev__lines *l = &j->lines;
    int64_t len = l->len[0];
    ev_dtype xd = a->x->dtype, acc = acc_dtype(a->res);
    int64_t rsz = (int64_t)ev__dsize(a->res), asz = (int64_t)ev__dsize(acc);
    /* A result dtype other than x's takes a first conversion into it (as
     * ev_cast), then a second into the accumulator. */
    int two_step = xd != a->res;
    char *buf = ev__malloc((size_t)(len * asz + (two_step ? len * rsz : 0)));
    if (!buf) {
        atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
        return;
    }
    char *rbuf = buf + len * asz;
    int64_t idx[EV_MAX_DIMS], off[2];
    ev__lines_seek(l, lo, idx, off);
    for (int64_t line = lo; line < hi; line++) {
        const char *xl = l->data[0] + off[0];
        if (two_step) {
            ev__cast_strided(rbuf, a->res, rsz, xl, xd, l->step[0], len);
            ev__cast_strided(buf, acc, asz, rbuf, a->res, rsz, len);
        } else {
            ev__cast_strided(buf, acc, asz, xl, xd, l->step[0], len);
        }
        scan_buf(buf, acc, a->prod, len);
        ev__cast_strided(l->data[1] + off[1], a->out->dtype, l->step[1], buf, acc, asz, len);
        ev__lines_next(l, idx, off);
    }
    ev__free(buf);
}

static int scan_kernel(void *p, ev_kctx *kc)
{
    scan_arg *a = p;
    scan_job j;
    ev_tensor *ops[2] = {a->x, a->out};
    ev__lines_init(&j.lines, 2, ops, a->dim);
    j.a = a;
    atomic_init(&j.failed, 0);
    int64_t len = j.lines.len[0];
    if (j.lines.count == 0 || len == 0) {
        return 0;
    }
    ev__parallel_for(j.lines.count, EV__PARALLEL_GRAIN / len + 1, scan_lines, &j);
    if (atomic_load_explicit(&j.failed, memory_order_relaxed)) {
        return ev_kctx_fail(kc, EV_ENOMEM, "%s: cannot allocate a buffer for a line of %lld "
                            "elements", a->name, (long long)len);
    }
    return 0;
}

static int scan(const ev_exec *ex, const char *name, ev_tensor *x, int dim, ev_dtype dtype,
                int prod, int inplace, ev_tensor **out)
{
    int rc, d;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!inplace && !out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if ((rc = ev__norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    ev_dtype res;
    if (dtype == EV_DTYPE_NONE) {
        res = ev_dtype_is_float(x->dtype) ? x->dtype : EV_INT64;
    } else if (!ev_dtype_get_info(dtype)) {
        return ev__set_message(EV_EINVAL, "%s: dtype %d is not a dtype (EV_DTYPE_NONE for the "
                               "default)", name, (int)dtype);
    } else {
        res = dtype;
    }
    ev_tensor *dst;
    if (inplace) {
        if (!ev__can_cast_same_kind(res, x->dtype)) {
            return ev__set_message(EV_ETYPE, "%s: the result dtype %s cannot be cast to the "
                                   "in-place operand's dtype %s%s", name, ev_dtype_name(res),
                                   ev_dtype_name(x->dtype),
                                   dtype == EV_DTYPE_NONE ? " (pass a dtype)" : "");
        }
        if (ev__has_internal_overlap(x)) {
            return ev__set_message(EV_EINVAL, "%s: the in-place operand is an expanded tensor "
                                   "(some elements share memory)", name);
        }
        dst = ev_tensor_ref(x);
    } else if ((rc = ev__tensor_new(name, ex, res, x->ndim, x->shape, &dst))) {
        return rc;
    }
    scan_arg a = {
        .x = ev_tensor_ref(x),
        .out = ev_tensor_ref(dst),
        .dim = d,
        .prod = prod,
        .res = res,
        .name = name,
    };
    rc = ev__submit(ex, name, scan_kernel, &a, sizeof a, scan_drop, &a.x, 1, &a.out, 1);
    if (rc || inplace) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_cumsum(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype, ev_tensor **out)
{
    return scan(ex, "cumsum", x, dim, dtype, 0, 0, out);
}

int ev_cumprod(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype, ev_tensor **out)
{
    return scan(ex, "cumprod", x, dim, dtype, 1, 0, out);
}

int ev_cumsum_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype)
{
    return scan(ex, "cumsum_", x, dim, dtype, 0, 1, NULL);
}

int ev_cumprod_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype)
{
    return scan(ex, "cumprod_", x, dim, dtype, 1, 1, NULL);
}

/* ------------------------------------------------ the gradient of cumprod */

typedef struct cumprod_bw_arg {
    ev_tensor *x, *g, *out; /* referenced */
    int dim;
} cumprod_bw_arg;
_Static_assert(sizeof(cumprod_bw_arg) <= EV_INLINE_ARG_SIZE, "must travel inline");

static void cumprod_bw_drop(void *p)
{
    cumprod_bw_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->g);
    ev_tensor_unref(a->out);
}

typedef struct cumprod_bw_job {
    const cumprod_bw_arg *a;
    ev__lines lines; /* operands x, g, out */
    atomic_int failed;
} cumprod_bw_job;

/* d/dx_k of sum_i g_i out_i is P_k S_k, with P_k = x_0 ... x_{k-1} and S_k =
 * g_k + x_{k+1} S_{k+1}: no division, so exact when x holds zeros. */
static void cumprod_bw_lines(int64_t lo, int64_t hi, void *p)
{
    cumprod_bw_job *j = p;
    const ev__lines *l = &j->lines;
    int64_t len = l->len[0];
    double *buf = ev__malloc(sizeof(double) * (size_t)(3 * len));
    if (!buf) {
        atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
        return;
    }
    double *x = buf, *g = buf + len, *r = buf + 2 * len;
    int64_t idx[EV_MAX_DIMS], off[3];
    ev__lines_seek(l, lo, idx, off);
    for (int64_t line = lo; line < hi; line++) {
        ev__cast_strided(x, EV_FLOAT64, sizeof(double), l->data[0] + off[0], j->a->x->dtype,
                         l->step[0], len);
        ev__cast_strided(g, EV_FLOAT64, sizeof(double), l->data[1] + off[1], j->a->g->dtype,
                         l->step[1], len);
        double s = 0;
        for (int64_t k = len - 1; k >= 0; k--) {
            s = g[k] + (k + 1 < len ? x[k + 1] * s : 0);
            r[k] = s;
        }
        double pre = 1;
        for (int64_t k = 0; k < len; k++) {
            r[k] *= pre;
            pre *= x[k];
        }
        ev__cast_strided(l->data[2] + off[2], j->a->out->dtype, l->step[2], r, EV_FLOAT64,
                         sizeof(double), len);
        ev__lines_next(l, idx, off);
    }
    ev__free(buf);
}

static int cumprod_bw_kernel(void *p, ev_kctx *kc)
{
    cumprod_bw_arg *a = p;
    cumprod_bw_job j;
    ev_tensor *ops[3] = {a->x, a->g, a->out};
    ev__lines_init(&j.lines, 3, ops, a->dim);
    j.a = a;
    atomic_init(&j.failed, 0);
    int64_t len = j.lines.len[0];
    if (j.lines.count == 0 || len == 0) {
        return 0;
    }
    ev__parallel_for(j.lines.count, EV__PARALLEL_GRAIN / len + 1, cumprod_bw_lines, &j);
    if (atomic_load_explicit(&j.failed, memory_order_relaxed)) {
        return ev_kctx_fail(kc, EV_ENOMEM, "cumprod_backward: cannot allocate a buffer for a "
                            "line of %lld elements", (long long)len);
    }
    return 0;
}

int ev_cumprod_backward(const ev_exec *ex, ev_tensor *x, ev_tensor *grad, int dim,
                        ev_tensor **out)
{
    const char *name = "cumprod_backward";
    int rc, d;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x)) ||
        (rc = ev__check_tensor(name, "grad", grad))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if (!ev_dtype_is_float(x->dtype) || !ev_dtype_is_float(grad->dtype)) {
        return ev__set_message(EV_ETYPE, "%s: x and grad must be floats, not %s and %s", name,
                               ev_dtype_name(x->dtype), ev_dtype_name(grad->dtype));
    }
    if (grad->ndim != x->ndim ||
        memcmp(grad->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim) != 0) {
        char sx[EV__SHAPE_STR_SIZE], sg[EV__SHAPE_STR_SIZE];
        ev__shape_str(x->ndim, x->shape, sx, sizeof sx);
        ev__shape_str(grad->ndim, grad->shape, sg, sizeof sg);
        return ev__set_message(EV_EINVAL, "%s: grad has shape %s, x %s (they must match)",
                               name, sg, sx);
    }
    if ((rc = ev__norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, x->ndim, x->shape, &dst))) {
        return rc;
    }
    cumprod_bw_arg a = {ev_tensor_ref(x), ev_tensor_ref(grad), ev_tensor_ref(dst), d};
    ev_tensor *reads[2] = {a.x, a.g};
    rc = ev__submit(ex, name, cumprod_bw_kernel, &a, sizeof a, cumprod_bw_drop, reads, 2, &a.out,
                    1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}
