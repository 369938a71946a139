/* sort, argsort and topk along one dimension: a stable sort (radix, or merge
 * for short lines) of order keys per line, 64-bit keys beside positions, or
 * for float32 and the narrow integers 32-bit keys packed above them in one
 * word (the keys and the sorts are shared with unique); or for a small k a
 * heap selection that picks the same elements in the same order. Lines split
 * over the intra-op threads. Checks and shapes on the issuing thread, one
 * instruction per call. */
/* GCC's -O2 cost model leaves the key loops scalar. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

#include <stdatomic.h>
#include <string.h>

#include "ops/ops-impl.h"

/* --------------------------------------------------------------- the keys */

#define SIGN_BIT ((uint64_t)1 << 63)

void ev__sort_load(ev__sort_item *items, const char *src, ev_dtype dt, int64_t stride,
                   int64_t n, int64_t first)
{
    int is_float = ev_dtype_is_float(dt);
    /* The conversion writes each value (as float64 or int64) into its key. */
    ev__cast_strided(&items[0].key, is_float ? EV_FLOAT64 : EV_INT64,
                     (int64_t)sizeof(ev__sort_item), src, dt, stride, n);
    for (int64_t i = 0; i < n; i++) {
        uint64_t b = items[i].key;
        if (is_float) {
            double v;
            memcpy(&v, &b, sizeof v);
            if (v != v) {
                b = UINT64_MAX; /* every NaN: one key, above +inf's */
            } else {
                if (v == 0) {
                    b = 0; /* -0.0 is +0.0 */
                }
                /* IEEE order as unsigned order: flip negatives whole, set the
                 * sign bit of positives. */
                b = (b & SIGN_BIT) ? ~b : b | SIGN_BIT;
            }
        } else {
            b ^= SIGN_BIT; /* two's complement order as unsigned order */
        }
        items[i].key = b;
        items[i].idx = first + i;
    }
}

/* Below this length a run is sorted by insertion (stable). */
#define INSERTION_MAX 16

static void merge_sort(ev__sort_item *a, ev__sort_item *scratch, int64_t n)
{
    if (n <= INSERTION_MAX) {
        for (int64_t i = 1; i < n; i++) {
            ev__sort_item v = a[i];
            int64_t j = i;
            for (; j > 0 && a[j - 1].key > v.key; j--) {
                a[j] = a[j - 1];
            }
            a[j] = v;
        }
        return;
    }
    int64_t h = n / 2;
    merge_sort(a, scratch, h);
    merge_sort(a + h, scratch, n - h);
    if (a[h - 1].key <= a[h].key) {
        return; /* the halves are already in order */
    }
    /* Merge: the left half moves to scratch; the output front never passes
     * the unread part of the right half (k = i + j - h <= j). Ties take the
     * left element first, which keeps the sort stable. */
    memcpy(scratch, a, sizeof *a * (size_t)h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        a[k++] = a[j].key < scratch[i].key ? a[j++] : scratch[i++];
    }
    while (i < h) {
        a[k++] = scratch[i++];
    }
}

/* From this length on, a least-significant-digit radix sort by bytes of the
 * key: stable, as each pass is, and linear. Passes over a byte that every
 * key shares are skipped (a float32 input's keys, widened to float64, share
 * their three lowest bytes), so a float32 line takes five passes. */
#define RADIX_MIN 256

static void radix_sort(ev__sort_item *a, ev__sort_item *tmp, int64_t n)
{
    int64_t count[8][256];
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = a[i].key;
        for (int b = 0; b < 8; b++) {
            count[b][(k >> (8 * b)) & 0xff]++;
        }
    }
    ev__sort_item *src = a, *dst = tmp;
    for (int b = 0; b < 8; b++) {
        int64_t *c = count[b];
        if (c[(src[0].key >> (8 * b)) & 0xff] == n) {
            continue;
        }
        int64_t off = 0;
        for (int v = 0; v < 256; v++) {
            int64_t m = c[v];
            c[v] = off;
            off += m;
        }
        for (int64_t i = 0; i < n; i++) {
            dst[c[(src[i].key >> (8 * b)) & 0xff]++] = src[i];
        }
        ev__sort_item *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) {
        memcpy(a, src, sizeof *a * (size_t)n);
    }
}

void ev__sort_items(ev__sort_item *a, ev__sort_item *scratch, int64_t n)
{
    if (n >= RADIX_MIN) {
        radix_sort(a, scratch, n);
    } else {
        merge_sort(a, scratch, n);
    }
}

/* ------------------------------------------------------- packed words
 *
 * Keys of at most 32 bits (float32, and the integers and bool of 4 bytes or
 * fewer) go in the high half of one 64-bit word, the position in the low
 * half. The words are distinct and their unsigned order is the stable
 * order of the elements, so any sort of them is stable; they move half the
 * bytes of items, and a radix sort passes over the key's four bytes only.
 * The keys order as the 64-bit items' keys do (float32 -> float64 keeps
 * order; -0.0 is +0.0, every NaN one key above +inf). */

#define KEY32_SIGN ((uint32_t)1 << 31)

int ev__sort_packable(ev_dtype dt, int64_t n)
{
    return n <= (int64_t)UINT32_MAX + 1 &&
           (dt == EV_FLOAT32 || (!ev_dtype_is_float(dt) && ev__dsize(dt) <= 4));
}

#define LOAD_PACKED(T, KEY)                                                     \
    for (int64_t i = 0; i < n; i++) {                                           \
        T v_;                                                                   \
        memcpy(&v_, src + i * stride, sizeof v_);                               \
        w[i] = (uint64_t)(KEY) << 32 | (uint64_t)(uint32_t)(first + i);         \
    }

/* IEEE order as unsigned order without branches: negatives flipped whole,
 * positives' sign bit set; both zeros +0.0's key, every NaN the largest. */
static inline uint32_t f32_key(uint32_t b)
{
    uint32_t mag = b & ~KEY32_SIGN;
    uint32_t k = b ^ ((uint32_t)((int32_t)b >> 31) | KEY32_SIGN);
    k = mag == 0 ? KEY32_SIGN : k;
    return mag > 0x7f800000u ? UINT32_MAX : k;
}

/* The common case, contiguous float32, in a loop the compiler vectorises. */
EV__SIMD_CLONES static void load_f32_dense(uint64_t *restrict w, const uint32_t *restrict x,
                                           int64_t n, uint32_t first)
{
    for (int64_t i = 0; i < n; i++) {
        w[i] = (uint64_t)f32_key(x[i]) << 32 | (uint32_t)(first + (uint32_t)i);
    }
}

void ev__sort_load_packed(uint64_t *w, const char *src, ev_dtype dt, int64_t stride, int64_t n,
                          int64_t first)
{
    if (dt == EV_FLOAT32 && stride == 4) {
        load_f32_dense(w, (const uint32_t *)(const void *)src, n, (uint32_t)first);
        return;
    }
    switch (dt) {
    case EV_FLOAT32: LOAD_PACKED(uint32_t, f32_key(v_)); break;
    case EV_INT32: LOAD_PACKED(int32_t, (uint32_t)v_ ^ KEY32_SIGN); break;
    case EV_INT16: LOAD_PACKED(int16_t, (uint32_t)(int32_t)v_ ^ KEY32_SIGN); break;
    case EV_INT8: LOAD_PACKED(int8_t, (uint32_t)(int32_t)v_ ^ KEY32_SIGN); break;
    default: LOAD_PACKED(uint8_t, (uint32_t)v_); break; /* uint8, bool */
    }
}

int ev__sort_unpack_value(uint32_t key, ev_dtype dt, void *out)
{
    if (dt == EV_FLOAT32) {
        if (key == UINT32_MAX || key == KEY32_SIGN) {
            return 0; /* NaN or zero: which one is the element's own */
        }
        uint32_t b = (key & KEY32_SIGN) ? key ^ KEY32_SIGN : ~key;
        memcpy(out, &b, 4);
        return 1;
    }
    int32_t v = dt == EV_UINT8 || dt == EV_BOOL ? (int32_t)key : (int32_t)(key ^ KEY32_SIGN);
    switch (ev__dsize(dt)) {
    case 1: *(uint8_t *)out = (uint8_t)v; break;
    case 2: {
        int16_t h = (int16_t)v;
        memcpy(out, &h, 2);
        break;
    }
    default: memcpy(out, &v, 4); break;
    }
    return 1;
}

/* Words are sorted by insertion up to a longer run than items: each
 * insertion costs one mispredicted branch, and the shifts of 8-byte words
 * are cheap (32 x 32 float32: 3.9 us with 16, 3.2 with 32, 4.9 with 8). */
#define INSERTION_MAX_WORDS 32

static void merge_sort_words(uint64_t *a, uint64_t *scratch, int64_t n)
{
    if (n <= INSERTION_MAX_WORDS) {
        for (int64_t i = 1; i < n; i++) {
            uint64_t v = a[i];
            int64_t j = i;
            for (; j > 0 && a[j - 1] > v; j--) {
                a[j] = a[j - 1];
            }
            a[j] = v;
        }
        return;
    }
    int64_t h = n / 2;
    merge_sort_words(a, scratch, h);
    merge_sort_words(a + h, scratch, n - h);
    if (a[h - 1] < a[h]) {
        return;
    }
    /* As merge_sort; the words are distinct, so no tie to order. */
    memcpy(scratch, a, sizeof *a * (size_t)h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        uint64_t x = scratch[i], y = a[j];
        int take_y = y < x;
        a[k++] = take_y ? y : x;
        j += take_y;
        i += !take_y;
    }
    while (i < h) {
        a[k++] = scratch[i++];
    }
}

static void radix_sort_words(uint64_t *a, uint64_t *tmp, int64_t n)
{
    int64_t count[4][256];
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = a[i] >> 32;
        count[0][k & 0xff]++;
        count[1][(k >> 8) & 0xff]++;
        count[2][(k >> 16) & 0xff]++;
        count[3][k >> 24]++;
    }
    uint64_t *src = a, *dst = tmp;
    for (int b = 0; b < 4; b++) {
        int64_t *c = count[b];
        int sh = 32 + 8 * b;
        if (c[(src[0] >> sh) & 0xff] == n) {
            continue; /* a byte every key shares */
        }
        int64_t off = 0;
        for (int v = 0; v < 256; v++) {
            int64_t m = c[v];
            c[v] = off;
            off += m;
        }
        for (int64_t i = 0; i < n; i++) {
            dst[c[(src[i] >> sh) & 0xff]++] = src[i];
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) {
        memcpy(a, src, sizeof *a * (size_t)n);
    }
}

/* Between these lengths, words are placed by rank: each word's place is the
 * count of words below it (they are distinct), a loop of compares without a
 * branch on the data that the compiler vectorises (float32 lines of 32:
 * 2.0 ns an element, 2.5 by insertion; shorter lines insert faster, longer
 * ones merge faster). */
#define RANK_MIN 17
#define RANK_MAX 48

EV__SIMD_CLONES static void rank_sort_words(uint64_t *restrict w, uint64_t *restrict out,
                                            int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = w[i];
        int64_t r = 0;
        for (int64_t j = 0; j < n; j++) {
            r += w[j] < v;
        }
        out[r] = v;
    }
    memcpy(w, out, sizeof *w * (size_t)n);
}

void ev__sort_words(uint64_t *w, uint64_t *scratch, int64_t n)
{
    if (n >= RADIX_MIN) {
        radix_sort_words(w, scratch, n);
    } else if (n >= RANK_MIN && n <= RANK_MAX) {
        rank_sort_words(w, scratch, n);
    } else {
        merge_sort_words(w, scratch, n);
    }
}

/* ------------------------------------------------------------- selection
 *
 * topk with k much smaller than the line need not sort it all: a max-heap
 * of the k smallest items so far, ordered by (key, position), sees each item
 * once (O(n log k)). Position breaks ties, so the k chosen and their order
 * are exactly the first k of the stable sort. */

static inline int item_less(const ev__sort_item *a, const ev__sort_item *b)
{
    return a->key < b->key || (a->key == b->key && a->idx < b->idx);
}

static void sift_down(ev__sort_item *h, int64_t n, int64_t i)
{
    ev__sort_item v = h[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) {
            break;
        }
        if (c + 1 < n && item_less(&h[c], &h[c + 1])) {
            c++;
        }
        if (!item_less(&v, &h[c])) {
            break;
        }
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* Writes the k smallest of items[0..n) (0 < k <= n), in order, to out. */
static void select_smallest(const ev__sort_item *items, int64_t n, int64_t k, ev__sort_item *out)
{
    memcpy(out, items, sizeof *out * (size_t)k);
    for (int64_t i = k / 2; i-- > 0;) {
        sift_down(out, k, i);
    }
    for (int64_t i = k; i < n; i++) {
        if (item_less(&items[i], &out[0])) {
            out[0] = items[i];
            sift_down(out, k, 0);
        }
    }
    /* Heap sort in place: the largest goes last. */
    for (int64_t m = k - 1; m > 0; m--) {
        ev__sort_item top = out[0];
        out[0] = out[m];
        out[m] = top;
        sift_down(out, m, 0);
    }
}

/* Below this ratio of k to the line's length, topk selects instead of
 * sorting. */
#define SELECT_RATIO 16

/* ------------------------------------------------------------- the kernel */

typedef struct sort_arg {
    ev_tensor *x, *values, *indices; /* referenced; values NULL for argsort */
    int dim;                         /* normalised; -1 for a 0-d x */
    int descending;
    int64_t k;                       /* leading elements written per line */
    const char *name;                /* static */
} sort_arg;
_Static_assert(sizeof(sort_arg) <= EV_INLINE_ARG_SIZE, "sort_arg must travel inline");

static void sort_drop(void *p)
{
    sort_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->values);
    ev_tensor_unref(a->indices);
}

typedef struct sort_job {
    const sort_arg *a;
    ev__lines lines; /* operands x, values, indices */
    atomic_int failed;
} sort_job;

/* Lines [lo, hi) of a full sort (not a selection) of a packable dtype; idx
 * and off are line lo's (ev__lines_seek). */
static void sort_lines_packed(sort_job *j, int64_t lo, int64_t hi, int64_t *idx, int64_t *off)
{
    const sort_arg *a = j->a;
    const ev__lines *l = &j->lines;
    int64_t len = l->len[0];
    uint64_t *w = ev__malloc(sizeof *w * (size_t)(2 * len + 1));
    if (!w) {
        atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
        return;
    }
    size_t esz = ev__dsize(a->x->dtype);
    for (int64_t line = lo; line < hi; line++) {
        const char *xl = l->data[0] + off[0];
        ev__sort_load_packed(w, xl, a->x->dtype, l->step[0], len, 0);
        if (a->descending) {
            /* Reversed keys (NaN first), the positions kept: ties in order. */
            for (int64_t i = 0; i < len; i++) {
                w[i] ^= (uint64_t)UINT32_MAX << 32;
            }
        }
        ev__sort_words(w, w + len, len);
        if (l->data[1]) {
            char *vl = l->data[1] + off[1];
            for (int64_t i = 0; i < a->k; i++) {
                ev__copy_elem(vl + i * l->step[1], xl + (int64_t)(uint32_t)w[i] * l->step[0],
                              esz);
            }
        }
        if (l->data[2]) {
            char *il = l->data[2] + off[2];
            for (int64_t i = 0; i < a->k; i++) {
                int64_t pos = (int64_t)(uint32_t)w[i];
                memcpy(il + i * l->step[2], &pos, sizeof pos);
            }
        }
        ev__lines_next(l, idx, off);
    }
    ev__free(w);
}

static void sort_lines(int64_t lo, int64_t hi, void *p)
{
    sort_job *j = p;
    const sort_arg *a = j->a;
    const ev__lines *l = &j->lines;
    int64_t len = l->len[0];
    size_t esz = ev__dsize(a->x->dtype);
    int64_t idx[EV_MAX_DIMS], off[3];
    ev__lines_seek(l, lo, idx, off);
    if (a->k * SELECT_RATIO > len && ev__sort_packable(a->x->dtype, len)) {
        sort_lines_packed(j, lo, hi, idx, off);
        return;
    }
    ev__sort_item *items = ev__malloc(sizeof *items * (size_t)(2 * len + 1));
    if (!items) {
        atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
        return;
    }
    ev__sort_item *scratch = items + len;
    for (int64_t line = lo; line < hi; line++) {
        const char *xl = l->data[0] + off[0];
        ev__sort_load(items, xl, a->x->dtype, l->step[0], len, 0);
        if (a->descending) {
            /* Reversed keys: NaN (the largest) first; ties stay in order. */
            for (int64_t i = 0; i < len; i++) {
                items[i].key = ~items[i].key;
            }
        }
        const ev__sort_item *sorted = items;
        if (a->k * SELECT_RATIO <= len) {
            select_smallest(items, len, a->k, scratch); /* k <= len / 2 + 1: it fits */
            sorted = scratch;
        } else {
            ev__sort_items(items, scratch, len);
        }
        if (l->data[1]) {
            char *vl = l->data[1] + off[1];
            for (int64_t i = 0; i < a->k; i++) {
                ev__copy_elem(vl + i * l->step[1], xl + sorted[i].idx * l->step[0], esz);
            }
        }
        if (l->data[2]) {
            char *il = l->data[2] + off[2];
            for (int64_t i = 0; i < a->k; i++) {
                memcpy(il + i * l->step[2], &sorted[i].idx, sizeof(int64_t));
            }
        }
        ev__lines_next(l, idx, off);
    }
    ev__free(items);
}

/* Work per line is about len log len compares: lines are split so that a
 * chunk holds at least this many elements. */
#define SORT_GRAIN ((int64_t)1 << 14)

static int sort_kernel(void *p, ev_kctx *kc)
{
    sort_arg *a = p;
    sort_job j;
    ev_tensor *ops[3] = {a->x, a->values, a->indices};
    ev__lines_init(&j.lines, 3, ops, a->dim);
    j.a = a;
    atomic_init(&j.failed, 0);
    int64_t len = j.lines.len[0];
    if (j.lines.count == 0 || len == 0 || a->k == 0) {
        return 0;
    }
    ev__parallel_for(j.lines.count, SORT_GRAIN / len + 1, sort_lines, &j);
    if (atomic_load_explicit(&j.failed, memory_order_relaxed)) {
        long long bytes = (long long)(sizeof(ev__sort_item) * (size_t)(2 * len + 1));
        return ev_kctx_fail(kc, EV_ENOMEM, "%s: cannot allocate a %lld-byte sort buffer",
                            a->name, bytes);
    }
    return 0;
}

/* ---------------------------------------------------------- issuing side */

/* Checks, makes the outputs (x's shape, with dim resized to k for topk) and
 * issues the instruction; argsort makes no values. */
static int issue_sort(const ev_exec *ex, const char *name, ev_tensor *x, int dim, int descending,
                      int is_topk, int64_t k, int want_values, ev_tensor **values,
                      ev_tensor **indices)
{
    int rc, d;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x))) {
        return rc;
    }
    if ((want_values && !values) || !indices) {
        return ev__set_message(EV_EINVAL, "%s: %s is NULL", name, indices ? "values" : "indices");
    }
    if ((rc = ev__norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    int64_t size = d >= 0 ? x->shape[d] : 1;
    if (!is_topk) {
        k = size;
    } else if (k < 0 || k > size) {
        return ev__set_message(EV_EINVAL, "topk: k = %lld is out of range [0, %lld] (the size "
                               "of dimension %d)", (long long)k, (long long)size, d < 0 ? 0 : d);
    }
    int64_t shape[EV_MAX_DIMS];
    int nd = x->ndim;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
    if (d >= 0) {
        shape[d] = k;
    } else if (k == 0) {
        /* A 0-d x with k = 0: no element, so no 0-d result (PyTorch gives
         * a 0-d tensor without a value); a 1-d one of size 0 instead. */
        nd = 1;
        shape[0] = 0;
    }
    ev_tensor *v = NULL, *ix = NULL;
    if (want_values && (rc = ev__tensor_new(name, ex, x->dtype, nd, shape, &v))) {
        return rc;
    }
    if ((rc = ev__tensor_new(name, ex, EV_INT64, nd, shape, &ix))) {
        ev_tensor_unref(v);
        return rc;
    }
    sort_arg a = {
        .x = ev_tensor_ref(x),
        .values = ev_tensor_ref(v),
        .indices = ev_tensor_ref(ix),
        .dim = d,
        .descending = descending != 0,
        .k = k,
        .name = name,
    };
    ev_tensor *writes[2] = {a.values, a.indices};
    rc = ev__submit(ex, name, sort_kernel, &a, sizeof a, sort_drop, &a.x, 1, writes, 2);
    if (rc) {
        ev_tensor_unref(v);
        ev_tensor_unref(ix);
        return rc;
    }
    if (want_values) {
        *values = v;
    }
    *indices = ix;
    return 0;
}

int ev_sort(const ev_exec *ex, ev_tensor *x, int dim, int descending, int stable,
            ev_tensor **values, ev_tensor **indices)
{
    (void)stable; /* the sort is always stable */
    return issue_sort(ex, "sort", x, dim, descending, 0, 0, 1, values, indices);
}

int ev_argsort(const ev_exec *ex, ev_tensor *x, int dim, int descending, int stable,
               ev_tensor **indices)
{
    (void)stable;
    return issue_sort(ex, "argsort", x, dim, descending, 0, 0, 0, NULL, indices);
}

int ev_topk(const ev_exec *ex, ev_tensor *x, int64_t k, int dim, int largest, int sorted,
            ev_tensor **values, ev_tensor **indices)
{
    (void)sorted; /* always sorted: an order PyTorch allows either way */
    return issue_sort(ex, "topk", x, dim, largest != 0, 1, k, 1, values, indices);
}
