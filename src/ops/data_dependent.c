/* Ops whose result's size depends on the input's values: nonzero and unique.
 * The call must know that size to make the result, so each is a sync point
 * on x: it waits for x (as ev_to_host does), reads it on the calling thread,
 * and issues one instruction that writes the results from what it found.
 * The kernel reads only host buffers its argument owns, never x again, so a
 * write to x issued later (by any thread) cannot change the result. */
/* GCC's -O2 cost model leaves the counting loop scalar. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

#include <string.h>

#include "ops/ops-impl.h"

/* Waits until x is ready. Returns 0, or the code of the failure that
 * poisoned it with a message naming the op and that failure. */
static int wait_input(const ev_exec *ex, const char *name, ev_tensor *x)
{
    ev_error *err = NULL;
    int rc = ev_wait_obj(ex->vm, x->storage->obj, &err);
    if (rc == 0) {
        return 0;
    }
    if (err) {
        char buf[512];
        ev_error_format(err, buf, sizeof buf);
        ev_error_unref(err);
        return ev__set_message(rc, "%s: x is poisoned: %s", name, buf);
    }
    return ev__set_message(rc, "%s: waiting for x failed (%s)", name, ev_err_name(rc));
}

/* Address of the element at flat C-order position flat of x. */
static const char *flat_ptr(const ev_tensor *x, int64_t flat)
{
    int64_t off = 0;
    for (int d = x->ndim - 1; d >= 0; d--) {
        off += (flat % x->shape[d]) * x->strides[d];
        flat /= x->shape[d];
    }
    return ev__tensor_ptr(x) + off * (int64_t)ev__dsize(x->dtype);
}

/* ---------------------------------------------------------------- nonzero */

/* Elements converted to bool per step of the host scan. */
#define NZ_BLOCK 1024

typedef struct nz_scan {
    ev_dtype dtype;
    int64_t flat;  /* C-order position of the row's first element */
    int64_t count; /* nonzero elements seen */
    int64_t *pos;  /* their positions, or NULL to count only */
    int64_t cap;   /* room in pos (x could only change between the passes
                      in a racy program; never write past it) */
} nz_scan;

static void nz_row(char **p, const int64_t *s, int64_t n, void *user)
{
    nz_scan *z = user;
    uint8_t nz[NZ_BLOCK];
    for (int64_t i = 0; i < n; i += NZ_BLOCK) {
        int64_t m = n - i < NZ_BLOCK ? n - i : NZ_BLOCK;
        /* x != 0, as a cast to bool gives: NaN counts. */
        ev__cast_strided(nz, EV_BOOL, 1, p[0] + i * s[0], z->dtype, s[0], m);
        /* Without branches on the values, which mispredict on mixed data:
         * the counting pass sums, the recording pass writes every position
         * and moves on only past a nonzero one. */
        int64_t count = z->count;
        if (!z->pos) {
            for (int64_t k = 0; k < m; k++) {
                count += nz[k];
            }
        } else {
            int64_t *pos = z->pos, cap = z->cap, at = z->flat + i;
            for (int64_t k = 0; k < m; k++) {
                if (count < cap) {
                    pos[count] = at + k;
                }
                count += nz[k];
            }
        }
        z->count = count;
    }
    z->flat += n;
}

typedef struct nz_arg {
    ev_tensor *out;            /* referenced: (n, ndim) int64 */
    int64_t *pos;              /* owned: the n flat positions, ascending */
    int ndim;
    int64_t shape[EV_MAX_DIMS];
} nz_arg;
_Static_assert(sizeof(nz_arg) <= EV_INLINE_ARG_SIZE, "nz_arg must travel inline");

static void nz_drop(void *p)
{
    nz_arg *a = p;
    ev_tensor_unref(a->out);
    ev__free(a->pos);
}

/* Rows [lo, hi) of the result: each position unravelled over x's shape.
 * The positions ascend, so the multi-index usually moves along the last
 * dimension only: divisions (two per dimension) are made only when a
 * position leaves the current row. */
static void nz_rows(int64_t lo, int64_t hi, void *p)
{
    const nz_arg *a = p;
    int64_t *o = (int64_t *)ev__tensor_ptr(a->out);
    int nd = a->ndim, last = nd - 1;
    int64_t idx[EV_MAX_DIMS], row_start = 0, row_end = -1; /* positions of the row */
    for (int64_t r = lo; r < hi; r++) {
        int64_t flat = a->pos[r];
        if (flat < row_start || flat >= row_end) {
            int64_t f = flat;
            for (int d = last; d >= 0; d--) {
                idx[d] = f % a->shape[d];
                f /= a->shape[d];
            }
            row_start = flat - idx[last];
            row_end = row_start + a->shape[last];
        }
        int64_t *row = o + r * nd;
        for (int d = 0; d < last; d++) {
            row[d] = idx[d];
        }
        row[last] = flat - row_start;
    }
}

static int nz_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    nz_arg *a = p;
    int64_t n = a->out->shape[0];
    if (n > 0 && a->ndim > 0) {
        ev__parallel_for(n, EV__PARALLEL_GRAIN / a->ndim + 1, nz_rows, a);
    }
    return 0;
}

int ev_nonzero(const ev_exec *ex, ev_tensor *x, ev_tensor **out)
{
    const char *name = "nonzero";
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    if ((rc = wait_input(ex, name, x))) {
        return rc;
    }
    /* Two passes over x: count, then record the positions. */
    ev__iter it;
    ev__iter_init(&it, 1, &x);
    nz_scan z = {x->dtype, 0, 0, NULL, 0};
    ev__iter_rows(&it, nz_row, &z);
    int64_t n = z.count;
    nz_arg a;
    memset(&a, 0, sizeof a);
    a.ndim = x->ndim;
    memcpy(a.shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    if (n > 0) {
        a.pos = ev__malloc(sizeof(int64_t) * (size_t)n);
        if (!a.pos) {
            return ev__set_message(EV_ENOMEM, "%s: cannot allocate the positions of %lld "
                                   "elements", name, (long long)n);
        }
        z = (nz_scan){x->dtype, 0, 0, a.pos, n};
        ev__iter_rows(&it, nz_row, &z);
        for (int64_t i = z.count; i < n; i++) {
            a.pos[i] = 0; /* (only in a racy program) */
        }
    }
    int64_t shape[2] = {n, x->ndim};
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, EV_INT64, 2, shape, &dst))) {
        ev__free(a.pos);
        return rc;
    }
    a.out = ev_tensor_ref(dst);
    if ((rc = ev__submit(ex, name, nz_kernel, &a, sizeof a, nz_drop, NULL, 0, &a.out, 1))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

/* ----------------------------------------------------------------- unique */

typedef struct uq_load {
    ev__sort_item *items;
    ev_dtype dtype;
    int64_t at;
} uq_load;

static void uq_row(char **p, const int64_t *s, int64_t n, void *user)
{
    uq_load *u = user;
    ev__sort_load(u->items + u->at, p[0], u->dtype, s[0], n, u->at);
    u->at += n;
}

typedef struct uq_load_packed {
    uint64_t *w;
    ev_dtype dtype;
    int64_t at;
} uq_load_packed;

static void uq_row_packed(char **p, const int64_t *s, int64_t n, void *user)
{
    uq_load_packed *u = user;
    ev__sort_load_packed(u->w + u->at, p[0], u->dtype, s[0], n, u->at);
    u->at += n;
}

/* The sorted (key, C-order position) pairs of unique: packed words (see
 * ev__sort_packable) or items. */
typedef struct uq_sorted {
    uint64_t *w;
    ev__sort_item *items;
} uq_sorted;

static inline uint64_t uq_key(const uq_sorted *q, int64_t i)
{
    return q->w ? q->w[i] >> 32 : q->items[i].key;
}

static inline int64_t uq_pos(const uq_sorted *q, int64_t i)
{
    return q->w ? (int64_t)(uint32_t)q->w[i] : q->items[i].idx;
}

typedef struct uq_arg {
    ev_tensor *out[3];  /* referenced: values, inverse, counts (NULL when not asked) */
    void *buf[3];       /* owned: their contents, in order */
} uq_arg;
_Static_assert(sizeof(uq_arg) <= EV_INLINE_ARG_SIZE, "uq_arg must travel inline");

static void uq_drop(void *p)
{
    uq_arg *a = p;
    for (int k = 0; k < 3; k++) {
        ev_tensor_unref(a->out[k]);
        ev__free(a->buf[k]);
    }
}

static int uq_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    uq_arg *a = p;
    for (int k = 0; k < 3; k++) {
        const ev_tensor *t = a->out[k];
        if (t && t->numel > 0) {
            memcpy(ev__tensor_ptr(t), a->buf[k], (size_t)t->numel * ev__dsize(t->dtype));
        }
    }
    return 0;
}

int ev_unique(const ev_exec *ex, ev_tensor *x, int sorted, int return_inverse, int return_counts,
              ev_tensor **values, ev_tensor **inverse, ev_tensor **counts)
{
    const char *name = "unique";
    (void)sorted; /* the values are sorted either way */
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if (!values || (return_inverse && !inverse) || (return_counts && !counts)) {
        return ev__set_message(EV_EINVAL, "%s: %s is NULL", name,
                               !values ? "values" : (return_inverse && !inverse) ? "inverse"
                                                                               : "counts");
    }
    if ((rc = wait_input(ex, name, x))) {
        return rc;
    }
    int64_t n = x->numel;
    size_t esz = ev__dsize(x->dtype);
    uq_arg a;
    memset(&a, 0, sizeof a);
    /* The keys in C order, sorted stably: each run of equal keys starts with
     * the first occurrence of its value. */
    uq_sorted q = {NULL, NULL};
    int packed = ev__sort_packable(x->dtype, n);
    void *sort_buf = packed ? ev__malloc(sizeof(uint64_t) * (size_t)(2 * n + 1))
                            : ev__malloc(sizeof(ev__sort_item) * (size_t)(2 * n + 1));
    if (!sort_buf) {
        return ev__set_message(EV_ENOMEM, "%s: cannot allocate a sort buffer for %lld "
                               "elements", name, (long long)n);
    }
    ev__iter it;
    ev__iter_init(&it, 1, &x);
    if (packed) {
        q.w = sort_buf;
        uq_load_packed ld = {q.w, x->dtype, 0};
        ev__iter_rows(&it, uq_row_packed, &ld);
        ev__sort_words(q.w, q.w + n, n);
    } else {
        q.items = sort_buf;
        uq_load ld = {q.items, x->dtype, 0};
        ev__iter_rows(&it, uq_row, &ld);
        ev__sort_items(q.items, q.items + n, n);
    }
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++) {
        u += i == 0 || uq_key(&q, i) != uq_key(&q, i - 1);
    }
    a.buf[0] = ev__malloc(esz * (size_t)(u ? u : 1));
    a.buf[1] = return_inverse ? ev__malloc(sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    a.buf[2] = return_counts ? ev__malloc(sizeof(int64_t) * (size_t)(u ? u : 1)) : NULL;
    if (!a.buf[0] || (return_inverse && !a.buf[1]) || (return_counts && !a.buf[2])) {
        ev__free(sort_buf);
        uq_drop(&a);
        return ev__set_message(EV_ENOMEM, "%s: cannot allocate the results for %lld elements",
                               name, (long long)n);
    }
    char *vals = a.buf[0];
    int64_t *inv = a.buf[1], *cnt = a.buf[2];
    int64_t j = -1;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || uq_key(&q, i) != uq_key(&q, i - 1)) {
            j++;
            /* A packed key is its value (read from x, a random access, only
             * for the keys of several values: a zero's sign, a NaN's bits);
             * the first occurrence's element otherwise. */
            char *vj = vals + (size_t)j * esz;
            if (!packed || !ev__sort_unpack_value((uint32_t)uq_key(&q, i), x->dtype, vj)) {
                ev__copy_elem(vj, flat_ptr(x, uq_pos(&q, i)), esz);
            }
            if (cnt) {
                cnt[j] = 0;
            }
        }
        if (inv) {
            inv[uq_pos(&q, i)] = j;
        }
        if (cnt) {
            cnt[j]++;
        }
    }
    ev__free(sort_buf);
    rc = ev__tensor_new(name, ex, x->dtype, 1, &u, &a.out[0]);
    if (rc == 0 && return_inverse) {
        rc = ev__tensor_new(name, ex, EV_INT64, x->ndim, x->shape, &a.out[1]);
    }
    if (rc == 0 && return_counts) {
        rc = ev__tensor_new(name, ex, EV_INT64, 1, &u, &a.out[2]);
    }
    if (rc) {
        uq_drop(&a);
        return rc;
    }
    ev_tensor *res[3];
    for (int k = 0; k < 3; k++) {
        res[k] = ev_tensor_ref(a.out[k]);
    }
    /* On failure ev__submit has dropped a (its references and buffers). */
    if ((rc = ev__submit(ex, name, uq_kernel, &a, sizeof a, uq_drop, NULL, 0, a.out, 3))) {
        for (int k = 0; k < 3; k++) {
            ev_tensor_unref(res[k]);
        }
        return rc;
    }
    *values = res[0];
    if (return_inverse) {
        *inverse = res[1];
    }
    if (return_counts) {
        *counts = res[2];
    }
    return 0;
}
