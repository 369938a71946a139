/* Creation: empty, zeros, ones, full, arange, linspace, eye. Each checks its
 * arguments and allocates on the calling thread, then issues one instruction
 * that writes the new tensor. */
/* GCC's -O2 cost model leaves the generating loops scalar. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

#include <math.h>
#include <string.h>

#include "tensor/tensor-impl.h"

static int check_dtype(const char *fn, ev_dtype dtype)
{
    if (!ev_dtype_get_info(dtype)) {
        return ev__set_message(EV_EINVAL, "%s: invalid dtype %d", fn, (int)dtype);
    }
    return 0;
}

static int new_checked(const char *fn, const ev_exec *ex, ev_dtype dtype, int ndim,
                       const int64_t *shape, ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec(fn, ex)) || (rc = check_dtype(fn, dtype)) ||
        (rc = ev__check_shape(fn, ndim, shape))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", fn);
    }
    return ev__tensor_new(fn, ex, dtype, ndim, shape, out);
}

int ev_empty(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
             ev_tensor **out)
{
    return new_checked("empty", ex, dtype, ndim, shape, out);
}

static int full(const char *fn, const ev_exec *ex, ev_dtype dtype, int ndim,
                const int64_t *shape, ev_scalar value, ev_tensor **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", fn);
    }
    ev_tensor *t;
    int rc = new_checked(fn, ex, dtype, ndim, shape, &t);
    if (rc) {
        return rc;
    }
    rc = ev_fill_(ex, t, value);
    if (rc) {
        ev_tensor_unref(t);
        return rc;
    }
    *out = t;
    return 0;
}

int ev_zeros(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
             ev_tensor **out)
{
    return full("zeros", ex, dtype, ndim, shape, ev_scalar_int(0), out);
}

int ev_ones(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
            ev_tensor **out)
{
    return full("ones", ex, dtype, ndim, shape, ev_scalar_int(1), out);
}

int ev_full(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
            ev_scalar value, ev_tensor **out)
{
    if (!ev_dtype_get_info(value.dtype)) {
        return ev__set_message(EV_EINVAL, "full: the value has an invalid dtype %d",
                               (int)value.dtype);
    }
    return full("full", ex, dtype, ndim, shape, value, out);
}

/* --------------------------------------------------------------- sequences */

enum { SEQ_INT, SEQ_FLOAT, SEQ_LINSPACE, SEQ_EYE };

typedef struct seq_arg {
    ev_tensor *t; /* referenced; new and contiguous */
    int mode;
    int64_t istart, istep;
    double fstart, fstep, fstop;
} seq_arg;

/* Elements below which a sequence is written by its worker alone (the
 * hand-off to the pool costs more than it saves below about 1 MiB). */
#define SEQ_GRAIN ((int64_t)1 << 17)

static void seq_drop(void *p)
{
    ev_tensor_unref(((seq_arg *)p)->t);
}

/* Writes elements [lo, hi) of a sequence (rows [lo, hi) of eye). */
static void seq_range(int64_t lo, int64_t hi, void *ctx)
{
    const seq_arg *a = ctx;
    ev_tensor *t = a->t;
    char *dst = ev__tensor_ptr(t);
    int64_t n = t->numel, size = (int64_t)ev__dsize(t->dtype);
    if (a->mode == SEQ_EYE) {
        int64_t cols = t->shape[1];
        memset(dst + lo * cols * size, 0, (size_t)((hi - lo) * cols * size));
        int64_t end = hi < cols ? hi : cols; /* rows with a diagonal element */
        if (end > lo) {
            ev__cast_strided(dst + lo * (cols + 1) * size, t->dtype, (cols + 1) * size,
                             &(int64_t){1}, EV_INT64, 0, end - lo);
        }
        return;
    }
    /* Generated in int64 or float64 blocks (in place when that is the
     * dtype), then converted to it. */
    enum { B = 512 };
    int64_t ibuf[B];
    double fbuf[B];
    int is_int = ev_dtype_get_info(t->dtype)->kind != EV_KIND_FLOAT;
    for (int64_t i0 = lo; i0 < hi; i0 += B) {
        int64_t m = hi - i0 < B ? hi - i0 : B;
        if (a->mode == SEQ_INT) {
            int64_t *o = t->dtype == EV_INT64 ? (int64_t *)(void *)(dst + i0 * size) : ibuf;
            /* Unsigned arithmetic: the values are in range by construction,
             * the intermediate products need not be. Stepped by addition
             * (the baseline x86-64 has no vector 64-bit multiply). */
            uint64_t v = (uint64_t)a->istart + (uint64_t)i0 * (uint64_t)a->istep;
            for (int64_t j = 0; j < m; j++) {
                o[j] = (int64_t)v;
                v += (uint64_t)a->istep;
            }
            if (o == ibuf) {
                ev__cast_strided(dst + i0 * size, t->dtype, size, ibuf, EV_INT64, 8, m);
            }
            continue;
        }
        double *o = t->dtype == EV_FLOAT64 ? (double *)(void *)(dst + i0 * size) : fbuf;
        /* The position counted in a double (exact below 2^53, as every
         * length is): no vector int64 -> double conversion either. */
        double pos = (double)i0;
        for (int64_t j = 0; j < m; j++) {
            o[j] = a->fstart + pos * a->fstep;
            pos += 1.0;
        }
        if (a->mode == SEQ_LINSPACE) {
            if (i0 + m == n && n > 1) {
                o[m - 1] = a->fstop;
            }
            /* NumPy 2 rounds linspace toward -inf for integer dtypes. */
            for (int64_t j = 0; is_int && j < m; j++) {
                o[j] = floor(o[j]);
            }
        }
        if (o == fbuf) {
            ev__cast_strided(dst + i0 * size, t->dtype, size, fbuf, EV_FLOAT64, 8, m);
        }
    }
}

static int seq_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    seq_arg *a = p;
    if (a->t->numel == 0) {
        return 0;
    }
    if (a->mode == SEQ_EYE) {
        int64_t cols = a->t->shape[1];
        ev__parallel_for(a->t->shape[0], (SEQ_GRAIN + cols - 1) / cols, seq_range, a);
    } else {
        ev__parallel_for(a->t->numel, SEQ_GRAIN, seq_range, a);
    }
    return 0;
}

static int seq_submit(const ev_exec *ex, const char *fn, seq_arg *a, ev_dtype dtype, int ndim,
                      const int64_t *shape, ev_tensor **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", fn);
    }
    int rc = new_checked(fn, ex, dtype, ndim, shape, &a->t);
    if (rc) {
        return rc;
    }
    ev_tensor *t = ev_tensor_ref(a->t);
    rc = ev__submit(ex, fn, seq_kernel, a, sizeof *a, seq_drop, NULL, 0, &t, 1);
    if (rc) {
        ev_tensor_unref(t);
        return rc;
    }
    *out = t;
    return 0;
}

static double scalar_f(ev_scalar s)
{
    return ev_dtype_is_float(s.dtype) ? s.v.f : (double)s.v.i;
}

int ev_arange(const ev_exec *ex, ev_scalar start, ev_scalar stop, ev_scalar step,
              ev_dtype dtype, ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec("arange", ex)) || (rc = check_dtype("arange", dtype))) {
        return rc;
    }
    if (!ev_dtype_get_info(start.dtype) || !ev_dtype_get_info(stop.dtype) ||
        !ev_dtype_get_info(step.dtype)) {
        return ev__set_message(EV_EINVAL, "arange: a bound has an invalid dtype");
    }
    seq_arg a;
    memset(&a, 0, sizeof a);
    int64_t n;
    int ints = !ev_dtype_is_float(start.dtype) && !ev_dtype_is_float(stop.dtype) &&
               !ev_dtype_is_float(step.dtype) && !ev_dtype_is_float(dtype);
    if (ints) {
        int64_t s0 = start.v.i, s1 = stop.v.i, st = step.v.i;
        if (st == 0) {
            return ev__set_message(EV_EINVAL, "arange: step must be nonzero");
        }
        /* The span fits in uint64 whenever it is positive. */
        uint64_t span = st > 0 ? (s1 > s0 ? (uint64_t)s1 - (uint64_t)s0 : 0)
                               : (s0 > s1 ? (uint64_t)s0 - (uint64_t)s1 : 0);
        uint64_t ast = st > 0 ? (uint64_t)st : 0 - (uint64_t)st;
        uint64_t len = span / ast + (span % ast != 0);
        if (len > (uint64_t)INT64_MAX / 16) {
            return ev__set_message(EV_EINVAL, "arange: %llu elements are too many",
                                   (unsigned long long)len);
        }
        n = (int64_t)len;
        a.mode = SEQ_INT;
        a.istart = s0;
        a.istep = st;
    } else {
        double f0 = scalar_f(start), f1 = scalar_f(stop), fs = scalar_f(step);
        if (!isfinite(f0) || !isfinite(f1) || !isfinite(fs)) {
            return ev__set_message(EV_EINVAL, "arange: start, stop and step must be finite "
                                   "(got %g, %g, %g)", f0, f1, fs);
        }
        if (fs == 0) {
            return ev__set_message(EV_EINVAL, "arange: step must be nonzero");
        }
        double len = ceil((f1 - f0) / fs);
        if (!(len < 9.0e15)) {
            return ev__set_message(EV_EINVAL, "arange: %g elements are too many", len);
        }
        n = len > 0 ? (int64_t)len : 0;
        a.mode = SEQ_FLOAT;
        a.fstart = f0;
        a.fstep = fs;
    }
    return seq_submit(ex, "arange", &a, dtype, 1, &n, out);
}

int ev_linspace(const ev_exec *ex, double start, double stop, int64_t num, ev_dtype dtype,
                ev_tensor **out)
{
    if (num < 0) {
        return ev__set_message(EV_EINVAL, "linspace: num must be non-negative, got %lld",
                               (long long)num);
    }
    seq_arg a;
    memset(&a, 0, sizeof a);
    a.mode = SEQ_LINSPACE;
    a.fstart = start;
    a.fstop = stop;
    a.fstep = num > 1 ? (stop - start) / (double)(num - 1) : 0.0;
    return seq_submit(ex, "linspace", &a, dtype, 1, &num, out);
}

int ev_eye(const ev_exec *ex, int64_t n, int64_t m, ev_dtype dtype, ev_tensor **out)
{
    if (m < 0) {
        m = n;
    }
    if (n < 0) {
        return ev__set_message(EV_EINVAL, "eye: n must be non-negative, got %lld", (long long)n);
    }
    seq_arg a;
    memset(&a, 0, sizeof a);
    a.mode = SEQ_EYE;
    int64_t shape[2] = {n, m};
    return seq_submit(ex, "eye", &a, dtype, 2, shape, out);
}
