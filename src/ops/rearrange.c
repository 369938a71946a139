/* flip and roll: copies of x whose elements move to other positions. One
 * kernel serves both: along each dimension, output index i reads x at
 * size - 1 - i (flipped) or at i - shift modulo size (rolled); the innermost
 * dimension is copied as one or two runs. Rolling the flattened tensor
 * copies two ranges of x's C order. Bytes move as they are, so every dtype
 * takes the same code. One instruction per call. */
#include <string.h>

#include "ops/ops-impl.h"

typedef struct remap_arg {
    ev_tensor *x;                  /* referenced */
    /* The output (new, contiguous, x's shape) by value, not referenced: a
     * result the program drops at once then leaves its block to the
     * stream's next allocation instead of holding it until the kernel ran. */
    char *out_ptr;
    int flat;                      /* roll the flattened tensor by shift[0] */
    uint32_t flip;                 /* bit d: dimension d is reversed */
    int64_t shift[EV_MAX_DIMS];    /* in [0, size): index i moves to i + shift */
} remap_arg;
_Static_assert(sizeof(remap_arg) <= EV_INLINE_ARG_SIZE, "remap_arg must travel inline");

static void remap_drop(void *p)
{
    remap_arg *a = p;
    ev_tensor_unref(a->x);
}

/* Where output index i along dimension d reads x. */
static int64_t source_index(const remap_arg *a, int d, int64_t i)
{
    int64_t n = a->x->shape[d];
    if (a->flip & (1u << d)) {
        return n - 1 - i;
    }
    int64_t s = a->shift[d];
    return i >= s ? i - s : i - s + n;
}

/* Output elements [lo, hi) in C order, row piece by row piece (rows along
 * the last dimension), so that a tensor of few long rows splits too. */
static void remap_range(int64_t lo, int64_t hi, void *p)
{
    const remap_arg *a = p;
    const ev_tensor *x = a->x;
    size_t esz = ev__dsize(x->dtype);
    int last = x->ndim - 1;
    int64_t n = x->shape[last], xs = x->strides[last] * (int64_t)esz;
    char *xb = ev__tensor_ptr(x), *ob = a->out_ptr;
    while (lo < hi) {
        int64_t r = lo / n, c0 = lo % n;
        int64_t c1 = hi - r * n < n ? hi - r * n : n;
        int64_t xo = 0, rest = r;
        for (int d = last - 1; d >= 0; d--) {
            xo += source_index(a, d, rest % x->shape[d]) * x->strides[d] * (int64_t)esz;
            rest /= x->shape[d];
        }
        const char *xr = xb + xo;
        char *orow = ob + r * n * (int64_t)esz;
        if (a->flip & (1u << last)) {
            ev__copy_run(orow + c0 * (int64_t)esz, (int64_t)esz, xr + (n - 1 - c0) * xs, -xs,
                         c1 - c0, esz);
        } else {
            /* Output column c reads column c - s, or c - s + n below s. */
            int64_t s = a->shift[last], mid = c1 < s ? c1 : s;
            if (c0 < mid) {
                ev__copy_run(orow + c0 * (int64_t)esz, (int64_t)esz, xr + (c0 - s + n) * xs, xs,
                             mid - c0, esz);
            }
            int64_t from = c0 > s ? c0 : s;
            if (from < c1) {
                ev__copy_run(orow + from * (int64_t)esz, (int64_t)esz, xr + (from - s) * xs, xs,
                             c1 - from, esz);
            }
        }
        lo = r * n + c1;
    }
}

/* Copies count elements of x's C order, from flat position start on, into
 * dst (contiguous). */
static void copy_flat_range(const ev_tensor *x, int64_t start, int64_t count, char *dst)
{
    size_t esz = ev__dsize(x->dtype);
    char *xb = ev__tensor_ptr(x);
    if (x->ndim == 0) {
        if (count > 0) {
            ev__copy_elem(dst, xb, esz);
        }
        return;
    }
    int last = x->ndim - 1;
    int64_t idx[EV_MAX_DIMS], rest = start;
    for (int d = last; d >= 0; d--) {
        idx[d] = rest % x->shape[d];
        rest /= x->shape[d];
    }
    while (count > 0) {
        int64_t xo = 0;
        for (int d = 0; d <= last; d++) {
            xo += idx[d] * x->strides[d];
        }
        int64_t run = x->shape[last] - idx[last];
        run = run < count ? run : count;
        ev__copy_run(dst, (int64_t)esz, xb + xo * (int64_t)esz,
                     x->strides[last] * (int64_t)esz, run, esz);
        dst += run * (int64_t)esz;
        count -= run;
        idx[last] += run;
        for (int d = last; d > 0 && idx[d] == x->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

/* Output elements [lo, hi) of a flattened roll: out[j] = x[(j - s) mod N]. */
static void remap_flat(int64_t lo, int64_t hi, void *p)
{
    const remap_arg *a = p;
    int64_t n = a->x->numel, s = a->shift[0];
    size_t esz = ev__dsize(a->x->dtype);
    char *ob = a->out_ptr;
    int64_t src = lo - s < 0 ? lo - s + n : lo - s;
    int64_t first = hi - lo < n - src ? hi - lo : n - src;
    copy_flat_range(a->x, src, first, ob + lo * (int64_t)esz);
    copy_flat_range(a->x, 0, hi - lo - first, ob + (lo + first) * (int64_t)esz);
}

static int remap_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    remap_arg *a = p;
    const ev_tensor *x = a->x;
    if (x->numel == 0) {
        return 0;
    }
    if (a->flat || x->ndim == 0) {
        ev__parallel_for(x->numel, EV__PARALLEL_GRAIN, remap_flat, a);
        return 0;
    }
    ev__parallel_for(x->numel, EV__PARALLEL_GRAIN, remap_range, a);
    return 0;
}

/* Checks what both ops share, then makes the output and issues the copy
 * described by a (whose tensors this sets). */
static int remap_issue(const ev_exec *ex, const char *name, ev_tensor *x, remap_arg *a,
                       ev_tensor **out)
{
    ev_tensor *dst;
    int rc = ev__tensor_new(name, ex, x->dtype, x->ndim, x->shape, &dst);
    if (rc) {
        return rc;
    }
    a->x = ev_tensor_ref(x);
    a->out_ptr = ev__tensor_ptr(dst);
    rc = ev__submit(ex, name, remap_kernel, a, sizeof *a, remap_drop, &a->x, 1, &dst, 1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

static int check_common(const char *name, const ev_exec *ex, ev_tensor *x, int ndims,
                        const int *dims, ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if (ndims < 0 || (ndims > 0 && !dims)) {
        return ev__set_message(EV_EINVAL, "%s: %d dimensions given in %s", name, ndims,
                               dims ? "dims" : "a NULL dims");
    }
    return 0;
}

int ev_flip(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, ev_tensor **out)
{
    const char *name = "flip";
    int rc;
    if ((rc = check_common(name, ex, x, ndims, dims, out))) {
        return rc;
    }
    remap_arg a;
    memset(&a, 0, sizeof a);
    uint32_t seen = 0;
    for (int i = 0; i < ndims; i++) {
        int d;
        if ((rc = ev__norm_dim0(name, dims[i], x, &d))) {
            return rc;
        }
        uint32_t bit = 1u << (d < 0 ? 0 : d);
        if (seen & bit) {
            return ev__set_message(EV_EINVAL, "%s: dimension %d appears more than once in dims",
                                   name, d < 0 ? 0 : d);
        }
        seen |= bit;
    }
    a.flip = x->ndim ? seen : 0;
    return remap_issue(ex, name, x, &a, out);
}

/* s modulo n, in [0, n) (0 when n is 0). */
static int64_t mod_size(int64_t s, int64_t n)
{
    if (n <= 1) {
        return 0;
    }
    s %= n;
    return s < 0 ? s + n : s;
}

int ev_roll(const ev_exec *ex, ev_tensor *x, int nshifts, const int64_t *shifts, int ndims,
            const int *dims, ev_tensor **out)
{
    const char *name = "roll";
    int rc;
    if ((rc = check_common(name, ex, x, ndims, dims, out))) {
        return rc;
    }
    if (nshifts < 0 || (nshifts > 0 && !shifts)) {
        return ev__set_message(EV_EINVAL, "%s: %d shifts given in %s", name, nshifts,
                               shifts ? "shifts" : "a NULL shifts");
    }
    remap_arg a;
    memset(&a, 0, sizeof a);
    if (ndims == 0) {
        if (nshifts != 1) {
            return ev__set_message(EV_EINVAL, "%s: rolling the flattened tensor (no dims) takes "
                                   "one shift, not %d", name, nshifts);
        }
        a.flat = 1;
        a.shift[0] = mod_size(shifts[0], x->numel);
        return remap_issue(ex, name, x, &a, out);
    }
    if (nshifts != ndims) {
        return ev__set_message(EV_EINVAL, "%s: %d shifts for %d dimensions (one shift per "
                               "dimension expected)", name, nshifts, ndims);
    }
    for (int i = 0; i < ndims; i++) {
        int d;
        if ((rc = ev__norm_dim0(name, dims[i], x, &d))) {
            return rc;
        }
        if (d >= 0) {
            /* A dimension given twice rolls by both shifts, as PyTorch. */
            int64_t n = x->shape[d];
            a.shift[d] = mod_size(a.shift[d] + mod_size(shifts[i], n), n);
        }
    }
    return remap_issue(ex, name, x, &a, out);
}
