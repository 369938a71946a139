/* Creation: empty, zeros, ones, full, arange, linspace, eye. Each checks its
 * arguments and allocates on the calling thread, then issues one instruction
 * that writes the new tensor. */
/* GCC's -O2 cost model leaves the generating loops scalar; fp-contract=off
 * keeps start + i * step two roundings in every SIMD clone (no FMA). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap", "fp-contract=off")
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

/* Pointers only, as the dense copies and fills (see dense_copy_arg in
 * copy.c): the engine keeps the storage until the instruction has run, and
 * a result the program drops at once then leaves its block to the stream's
 * next large op. */
typedef struct seq_arg {
    char *dst; /* the new tensor's data, contiguous */
    int64_t numel, rows, cols; /* rows, cols: eye's */
    ev_dtype dtype;
    int mode;
    int64_t istart, istep;
    double fstart, fstep, fstop;
} seq_arg;

/* Elements below which a sequence is written by its worker alone (the
 * hand-off to the pool costs more than it saves below about 1 MiB). */
#define SEQ_GRAIN ((int64_t)1 << 17)
/* eye's rows are a memset: split by bytes, as the fills are. */
#define EYE_GRAIN_BYTES ((int64_t)1 << 20)
/* Elements generated per call of a block loop below. */
#define SEQ_BLOCK 512

/* Built for AVX2 and AVX-512 too, as the fills (FILL_CLONES in copy.c). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define SEQ_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SEQ_CLONES
#endif

/* o[j] = v + j * step in wrapping unsigned arithmetic (the values are in
 * range by construction, the intermediate products need not be), stepped
 * by addition (no vector 64-bit multiply below AVX-512). */
SEQ_CLONES static void seq_ints(int64_t *restrict o, int64_t m, uint64_t v, uint64_t step)
{
    for (int64_t j = 0; j < m; j++) {
        o[j] = (int64_t)v;
        v += step;
    }
}

/* o[j] = start + (base + j) * step, j < m <= SEQ_BLOCK, rounded once to the
 * dtype: base + j is exact (integers below 2^53, as every position is), and
 * j counts in int32, which every vector width converts to double. */
SEQ_CLONES static void seq_f64(double *restrict o, int m, double base, double start,
                               double step)
{
    for (int j = 0; j < m; j++) {
        o[j] = start + (base + (double)j) * step;
    }
}

SEQ_CLONES static void seq_f32(float *restrict o, int m, double base, double start,
                               double step)
{
    for (int j = 0; j < m; j++) {
        o[j] = (float)(start + (base + (double)j) * step);
    }
}

/* Writes the rows [lo, hi) of eye. */
static void eye_range(const seq_arg *a, int64_t lo, int64_t hi)
{
    int64_t cols = a->cols, size = (int64_t)ev__dsize(a->dtype);
    memset(a->dst + lo * cols * size, 0, (size_t)((hi - lo) * cols * size));
    int64_t end = hi < cols ? hi : cols; /* rows with a diagonal element */
    if (end > lo) {
        ev__cast_strided(a->dst + lo * (cols + 1) * size, a->dtype, (cols + 1) * size,
                         &(int64_t){1}, EV_INT64, 0, end - lo);
    }
}

/* Writes elements [lo, hi) of a sequence (rows [lo, hi) of eye). */
static void seq_range(int64_t lo, int64_t hi, void *ctx)
{
    const seq_arg *a = ctx;
    if (a->mode == SEQ_EYE) {
        eye_range(a, lo, hi);
        return;
    }
    char *dst = a->dst;
    int64_t n = a->numel, size = (int64_t)ev__dsize(a->dtype);
    ev_dtype dt = a->dtype;
    /* int64 and the floats are written in place; the other dtypes are made
     * in int64 or float64 blocks, then converted to them. */
    int64_t ibuf[SEQ_BLOCK];
    double fbuf[SEQ_BLOCK];
    int is_int = ev_dtype_get_info(dt)->kind != EV_KIND_FLOAT;
    for (int64_t i0 = lo; i0 < hi; i0 += SEQ_BLOCK) {
        int m = (int)(hi - i0 < SEQ_BLOCK ? hi - i0 : SEQ_BLOCK);
        char *out = dst + i0 * size;
        if (a->mode == SEQ_INT) {
            uint64_t v = (uint64_t)a->istart + (uint64_t)i0 * (uint64_t)a->istep;
            int64_t *o = dt == EV_INT64 ? (int64_t *)(void *)out : ibuf;
            seq_ints(o, m, v, (uint64_t)a->istep);
            if (o == ibuf) {
                ev__cast_strided(out, dt, size, ibuf, EV_INT64, 8, m);
            }
            continue;
        }
        int last = a->mode == SEQ_LINSPACE && i0 + m == n && n > 1; /* stop, exactly */
        if (dt == EV_FLOAT32) {
            seq_f32((float *)(void *)out, m, (double)i0, a->fstart, a->fstep);
            if (last) {
                ((float *)(void *)out)[m - 1] = (float)a->fstop;
            }
            continue;
        }
        double *o = dt == EV_FLOAT64 ? (double *)(void *)out : fbuf;
        seq_f64(o, m, (double)i0, a->fstart, a->fstep);
        if (last) {
            o[m - 1] = a->fstop;
        }
        /* NumPy 2 rounds linspace toward -inf for integer dtypes. */
        for (int j = 0; a->mode == SEQ_LINSPACE && is_int && j < m; j++) {
            o[j] = floor(o[j]);
        }
        if (o == fbuf) {
            ev__cast_strided(out, dt, size, fbuf, EV_FLOAT64, 8, m);
        }
    }
}

static int seq_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    seq_arg *a = p;
    if (a->numel == 0) {
        return 0;
    }
    if (a->mode == SEQ_EYE) {
        int64_t row_bytes = a->cols * (int64_t)ev__dsize(a->dtype);
        ev__parallel_for(a->rows, (EYE_GRAIN_BYTES + row_bytes - 1) / row_bytes, seq_range, a);
    } else {
        ev__parallel_for(a->numel, SEQ_GRAIN, seq_range, a);
    }
    return 0;
}

static int seq_submit(const ev_exec *ex, const char *fn, seq_arg *a, ev_dtype dtype, int ndim,
                      const int64_t *shape, ev_tensor **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", fn);
    }
    ev_tensor *t;
    int rc = new_checked(fn, ex, dtype, ndim, shape, &t);
    if (rc) {
        return rc;
    }
    a->dst = ev__tensor_ptr(t);
    a->numel = t->numel;
    a->dtype = dtype;
    a->rows = ndim == 2 ? shape[0] : 0;
    a->cols = ndim == 2 ? shape[1] : 0;
    rc = ev__submit(ex, fn, seq_kernel, a, sizeof *a, NULL, NULL, 0, &t, 1);
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
