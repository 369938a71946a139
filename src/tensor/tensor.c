/* Tensors and storages: creation of the structs, reference counting, the
 * metadata accessors, argument checks and instruction submission shared by
 * every op. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor-impl.h"

/* ---------------------------------------------------------------- storage */

static void storage_free_now(void *data)
{
    ev__storage *s = data;
    ev__dealloc(s->was_parked ? ev__reuse_unpark(s) : s->block);
    ev__cache_free(EV__CACHE_STORAGE, s);
}

static void storage_free_cb(void *data)
{
    /* Runs after the last instruction touching the storage finished. On a
     * worker, the free waits for the next submitting thread, which made the
     * storage: no allocator lock or malloc arena is contended with it. */
    ev__storage *s = data;
    ev__call_deferred(s->vm, storage_free_now, s);
}

static void storage_unref(ev__storage *s)
{
    /* acq_rel: every use of the storage by this thread happens before the
     * free, whichever thread drops the last reference. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) {
        return;
    }
    /* Parked or not, the storage is freed by its release; parking only lets
     * a later storage on the same stream take the block first. */
    ev__reuse_park(s);
    ev_obj_release(s->vm, s->obj, storage_free_cb, s);
}

/* Memory back-pressure. An op allocates its output when it is issued, but
 * the inputs it frees come back only when it has run: a thread issuing large
 * ops far ahead of its worker (y = y + x on big tensors) would take fresh
 * memory for each. Past this many bytes of new storages since it last
 * waited, a submitting thread waits for the work queued on its own worker
 * thread (not for other threads'), so memory is reused from the cache.
 * (A smaller bound would keep memory-bound chains in the CPU caches, but it
 * would also make chains of big ops wait at issue, losing the asynchrony.) */
#define INFLIGHT_BYTES_LIMIT ((size_t)256 << 20)

static EV_TLS_FAST size_t bytes_since_wait;

static void limit_inflight_bytes(const ev_exec *ex, size_t nbytes)
{
    /* Below 256 KiB a storage is not counted: EAGERVM_MAX_PENDING bounds
     * how many can be in flight (8192 x 256 KiB = 2 GiB at most), and
     * counting them would make loops of small ops wait at issue. Blocks
     * reused in stream order are not counted either: they are not new. */
    bytes_since_wait += nbytes;
    if (bytes_since_wait > INFLIGHT_BYTES_LIMIT) {
        bytes_since_wait = 0;
        ev_wait_thread(ex->vm, ex->thread_uid, UINT32_MAX);
    }
}

static int storage_new(const ev_exec *ex, size_t nbytes, ev__storage **out)
{
    ev__storage *s = ev__cache_alloc(EV__CACHE_STORAGE, sizeof(*s));
    if (!s) {
        return ev__set_message(EV_ENOMEM, "out of memory for a storage");
    }
    atomic_init(&s->refs, 1);
    s->vm = ex->vm;
    s->nbytes = nbytes;
    s->block = NULL;
    s->obj = NULL;
    s->was_parked = false;
    s->parked = false;
    atomic_init(&s->version, 0);
    atomic_init(&s->aliases, 0);
    atomic_init(&s->last_write_name, NULL);
    atomic_init(&s->last_write_site, NULL);
    int rc = 0;
    if (nbytes >= EV__REUSE_MIN) {
        s->block = ev__reuse_take(ex->vm, ex->thread_uid, nbytes);
    }
    if (s->block) {
        /* The block's last uses are queued on this stream: order the new
         * object after them (they may not have run yet). */
        rc = ev_obj_create_after(ex->vm, ex->thread_uid, &s->obj);
        if (rc) {
            goto fail_obj;
        }
        *out = s;
        return 0;
    }
    if (nbytes > 0) {
        if (nbytes >= ((size_t)256 << 10)) {
            limit_inflight_bytes(ex, nbytes);
        }
        rc = ev__alloc(EV_DEVICE_CPU, 0, nbytes, &s->block);
        if (rc) {
            goto fail_block;
        }
    }
    rc = ev_obj_create(ex->vm, &s->obj);
    if (rc) {
        goto fail_obj;
    }
    *out = s;
    return 0;

fail_obj:
    if (s->block && nbytes >= EV__REUSE_MIN) {
        /* Possibly a reused block still in use on this stream: the cache
         * may hand it to anyone, so let those uses finish first. */
        ev_wait_thread(ex->vm, ex->thread_uid, UINT32_MAX);
    }
    ev__dealloc(s->block);
fail_block:
    ev__cache_free(EV__CACHE_STORAGE, s);
    return rc;
}

/* ---------------------------------------------------------------- tensors */

ev_tensor *ev_tensor_ref(ev_tensor *t)
{
    if (t) {
        /* relaxed: a new reference is made from an existing one, which
         * already orders the metadata. */
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    }
    return t;
}

static void tensor_struct_free(void *p)
{
    ev_tensor *t = p;
    /* The upper layer's state goes here too: on a worker that dropped the
     * last reference (an instruction's operand), this runs on the next
     * submitting thread, so the state is freed where it was made and never
     * runs user code (a Python hook's release) on a worker. */
    ev_tensor_ext *ext = atomic_load_explicit(&t->ext, memory_order_acquire);
    if (ext) {
        ext->release(ext);
    }
    ev__cache_free(EV__CACHE_TENSOR, t);
}

void ev_tensor_unref(ev_tensor *t)
{
    /* acq_rel: all uses of t happen before its free on the last unref. */
    if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) {
        return;
    }
    if (t->is_alias) {
        atomic_fetch_sub_explicit(&t->storage->aliases, 1, memory_order_relaxed);
    }
    ev_vm *vm = t->storage->vm;
    storage_unref(t->storage);
    ev__call_deferred(vm, tensor_struct_free, t);
}

void ev_tensor_unref_n(ev_tensor *const *ts, size_t n)
{
    /* Loads whose results only steer prefetches: a stale value (another
     * thread's unref racing) costs a useless fetch, never a wrong free. */
    for (size_t i = 0; i < n; i++) {
        if (ts[i]) {
            __builtin_prefetch(ts[i], 1);
            __builtin_prefetch(&ts[i]->storage);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ts[i] && atomic_load_explicit(&ts[i]->refs, memory_order_relaxed) == 1) {
            ev_tensor_ext *ext = atomic_load_explicit(&ts[i]->ext, memory_order_relaxed);
            __builtin_prefetch(ts[i]->storage, 1);
            __builtin_prefetch((const char *)ts[i]->storage + 64, 1);
            if (ext) {
                __builtin_prefetch(ext, 1);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ts[i] && atomic_load_explicit(&ts[i]->refs, memory_order_relaxed) == 1) {
            const ev__storage *s = ts[i]->storage;
            if (atomic_load_explicit(&s->refs, memory_order_relaxed) == 1) {
                /* The object's access list spans its first two lines. */
                __builtin_prefetch(s->obj, 1);
                __builtin_prefetch((const char *)s->obj + 64, 1);
                __builtin_prefetch(s->block);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        n *= shape[i];
    }
    return n;
}

static int tensor_struct(ev_dtype dtype, int ndim, const int64_t *shape, const int64_t *strides,
                         int64_t offset, ev__storage *s, ev_tensor **out)
{
    ev_tensor *t = ev__cache_alloc(EV__CACHE_TENSOR, sizeof(*t));
    if (!t) {
        return ev__set_message(EV_ENOMEM, "out of memory for a tensor");
    }
    atomic_init(&t->refs, 1);
    atomic_init(&t->ext, NULL);
    t->is_alias = false;
    t->dtype = dtype;
    t->ndim = ndim;
    t->offset = offset;
    /* Only ndim entries: nothing reads past them, and a tensor of up to 2
     * dimensions then writes 2 of the struct's 3 lines. Debug builds
     * (which the sanitizer runs of every test use) poison the others, so
     * that a read past ndim shows. */
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->strides[i] = strides[i];
    }
#ifndef NDEBUG
    for (int i = ndim; i < EV_MAX_DIMS; i++) {
        t->shape[i] = t->strides[i] = INT64_MIN / 3;
    }
#endif
    t->numel = shape_numel(ndim, shape);
    t->storage = s;
    *out = t;
    return 0;
}

int ev__check_exec(const char *fn, const ev_exec *ex)
{
    if (!ex || !ex->vm) {
        return ev__set_message(EV_EINVAL, "%s: the exec context (or its vm) is NULL", fn);
    }
    return 0;
}

int ev__check_tensor(const char *fn, const char *what, const ev_tensor *t)
{
    if (!t) {
        return ev__set_message(EV_EINVAL, "%s: %s is NULL", fn, what);
    }
    return 0;
}

/* Every tensor keeps the product of its sizes, zeros counted as ones, at
 * most INT64_MAX / 16: then no product of sizes, strides or byte counts
 * anywhere overflows int64, even for an empty tensor such as [0, 2^40, 2^40]
 * (whose contiguous strides would). Sizes are known to be >= 0. */
static int shape_too_big(const char *fn, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    bool wrapped = false;
    for (int i = 0; i < ndim; i++) {
        wrapped |= __builtin_mul_overflow(n, shape[i] > 0 ? shape[i] : 1, &n);
    }
    if (wrapped || n > INT64_MAX / 16) {
        char buf[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "%s: shape %s is too large: its sizes multiply past "
                               "2^59", fn, ev__shape_str(ndim, shape, buf, sizeof buf));
    }
    return 0;
}

int ev__check_shape(const char *fn, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > EV_MAX_DIMS) {
        return ev__set_message(EV_EINVAL, "%s: ndim %d is out of range [0, %d]", fn, ndim,
                               EV_MAX_DIMS);
    }
    if (ndim > 0 && !shape) {
        return ev__set_message(EV_EINVAL, "%s: shape is NULL for ndim %d", fn, ndim);
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char buf[EV__SHAPE_STR_SIZE];
            return ev__set_message(EV_EINVAL, "%s: negative size %lld in dimension %d of "
                                   "shape %s", fn, (long long)shape[i], i,
                                   ev__shape_str(ndim, shape, buf, sizeof buf));
        }
    }
    return shape_too_big(fn, ndim, shape);
}

int ev__norm_dim(const char *fn, int dim, int ndim, int *out)
{
    int lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
    if (dim < lo || dim > hi || ndim == 0) {
        if (ndim == 0) {
            return ev__set_message(EV_EINDEX, "%s: dimension %d is out of range for a 0-d "
                                   "tensor", fn, dim);
        }
        return ev__set_message(EV_EINDEX, "%s: dimension %d is out of range [%d, %d] for a "
                               "%d-d tensor", fn, dim, lo, hi, ndim);
    }
    *out = dim < 0 ? dim + ndim : dim;
    return 0;
}

char *ev__shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && len < size; i++) {
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "",
                                (long long)shape[i]);
    }
    if (len < size) {
        snprintf(buf + len, size - len, "]");
    }
    return buf;
}

/* A new tensor of its own storage (dense: strides a permutation of C
 * order's for shape, or C order's), in one struct. The caller has checked
 * shape (shape_too_big) before it computed the strides, whose products
 * could overflow otherwise. */
static int tensor_new_strided(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                              const int64_t *strides, ev_tensor **out)
{
    int64_t numel = shape_numel(ndim, shape);
    size_t nbytes = (size_t)numel * ev__dsize(dtype);
    ev__storage *s = NULL;
    int rc = storage_new(ex, nbytes, &s);
    if (rc) {
        return rc;
    }
    rc = tensor_struct(dtype, ndim, shape, strides, 0, s, out);
    if (rc) {
        storage_unref(s);
    }
    return rc;
}

int ev__tensor_new(const char *fn, const ev_exec *ex, ev_dtype dtype, int ndim,
                   const int64_t *shape, ev_tensor **out)
{
    int rc = shape_too_big(fn, ndim, shape);
    if (rc) {
        return rc;
    }
    int64_t strides[EV_MAX_DIMS];
    int64_t st = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = st;
        st *= shape[i] > 0 ? shape[i] : 1;
    }
    return tensor_new_strided(ex, dtype, ndim, shape, strides, out);
}

/* The dimensions of t longer than 1, from the largest stride to the
 * smallest (perm[0] outermost), when t is dense in that order: its elements
 * fill a block of numel with positive strides, as a permuted contiguous
 * tensor's. Returns how many there are, or -1 if t is not so laid out. */
static int dense_order(const ev_tensor *t, int *perm)
{
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] != 1) {
            /* Insertion by stride, descending; ties keep C order. */
            int j = n++;
            for (; j > 0 && t->strides[perm[j - 1]] < t->strides[i]; j--) {
                perm[j] = perm[j - 1];
            }
            perm[j] = i;
        }
    }
    int64_t st = 1;
    for (int j = n - 1; j >= 0; j--) {
        if (t->strides[perm[j]] != st) {
            return -1;
        }
        st *= t->shape[perm[j]];
    }
    return n;
}

int ev__tensor_is_dense(const ev_tensor *t)
{
    int perm[EV_MAX_DIMS];
    return t->numel > 0 && (ev_tensor_is_contiguous(t) || dense_order(t, perm) >= 0);
}

int ev__same_strides(const ev_tensor *a, const ev_tensor *b)
{
    if (a->ndim != b->ndim) {
        return 0;
    }
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d] || (a->shape[d] != 1 && a->strides[d] != b->strides[d])) {
            return 0;
        }
    }
    return 1;
}

int ev__tensor_new_like(const char *fn, const ev_exec *ex, ev_dtype dtype, int ndim,
                        const int64_t *shape, ev_tensor *const *likes, int nlikes,
                        ev_tensor **out)
{
    int perm[EV_MAX_DIMS], other[EV_MAX_DIMS], n = -1, found = 0;
    const ev_tensor *first = NULL;
    for (int k = 0; k < nlikes && found >= 0; k++) {
        const ev_tensor *t = likes[k];
        if (!t || t->ndim != ndim || t->numel < 2 ||
            memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim) != 0) {
            continue; /* broadcast (or a scalar): says nothing of the layout */
        }
        if (ev_tensor_is_contiguous(t)) {
            found = -1; /* C order, whatever the others are (the usual case: no sort) */
            continue;
        }
        if (first && ev__same_strides(t, first)) {
            continue; /* a.T + b.T: the order is first's, no second sort */
        }
        int m = dense_order(t, found ? other : perm);
        if (m < 0 || (found && memcmp(perm, other, sizeof(int) * (size_t)m) != 0)) {
            found = -1;
        } else {
            n = m;
            found = 1;
            first = t;
        }
    }
    int permuted = 0;
    for (int j = 1; found == 1 && j < n; j++) {
        permuted |= perm[j] < perm[j - 1];
    }
    if (!permuted) {
        return ev__tensor_new(fn, ex, dtype, ndim, shape, out);
    }
    /* A contiguous block in perm's order, in the requested one (dimensions
     * of size 1 take stride 1: any would do); one struct, not a base and a
     * view of it: a transposed result costs what a contiguous one does. */
    int rc = shape_too_big(fn, ndim, shape);
    if (rc) {
        return rc;
    }
    int64_t strides[EV_MAX_DIMS], st = 1;
    for (int i = 0; i < ndim; i++) {
        strides[i] = 1;
    }
    for (int j = n - 1; j >= 0; j--) {
        strides[perm[j]] = st;
        st *= shape[perm[j]];
    }
    return tensor_new_strided(ex, dtype, ndim, shape, strides, out);
}

/* First and one-past-last element offsets that a layout touches (the
 * lowest through negative strides, the highest through positive ones);
 * the layout must have at least one element. */
static void layout_extent(int ndim, const int64_t *shape, const int64_t *strides,
                          int64_t offset, int64_t *lo, int64_t *hi)
{
    *lo = *hi = offset;
    for (int i = 0; i < ndim; i++) {
        int64_t span = (shape[i] - 1) * strides[i];
        if (span < 0) {
            *lo += span;
        } else {
            *hi += span;
        }
    }
    *hi += 1;
}

static void extent(const ev_tensor *t, int64_t *lo, int64_t *hi)
{
    layout_extent(t->ndim, t->shape, t->strides, t->offset, lo, hi);
}

/* 1 if every element of the layout lies inside storage s. */
static int view_in_storage(const ev__storage *s, ev_dtype dtype, int ndim, const int64_t *shape,
                           const int64_t *strides, int64_t offset)
{
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            return 1; /* no element: any offset and strides */
        }
    }
    int64_t lo, hi, size = (int64_t)ev__dsize(dtype);
    layout_extent(ndim, shape, strides, offset, &lo, &hi);
    return lo >= 0 && hi <= (int64_t)(s->nbytes / (size_t)size);
}

int ev__tensor_alias(const ev_tensor *t, ev_dtype dtype, int ndim, const int64_t *shape,
                     const int64_t *strides, int64_t offset, ev_tensor **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "view: out is NULL");
    }
    /* Every view function derives its layout from t's, so a view that
     * reaches outside the storage (below its start through a negative
     * stride, or past its end) is a bug here, never bad input. */
    EV_ASSERT(view_in_storage(t->storage, dtype, ndim, shape, strides, offset));
    /* relaxed: the caller holds a reference to t, hence to the storage. */
    atomic_fetch_add_explicit(&t->storage->refs, 1, memory_order_relaxed);
    int rc = tensor_struct(dtype, ndim, shape, strides, offset, t->storage, out);
    if (rc) {
        storage_unref(t->storage);
    }
    return rc;
}

int ev__same_layout(const ev_tensor *a, const ev_tensor *b)
{
    if (a->storage != b->storage || a->offset != b->offset || a->ndim != b->ndim ||
        a->dtype != b->dtype) {
        return 0;
    }
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i])) {
            return 0;
        }
    }
    return 1;
}

int ev__may_overlap(const ev_tensor *a, const ev_tensor *b)
{
    if (a->storage != b->storage || a->numel == 0 || b->numel == 0) {
        return 0;
    }
    int64_t alo, ahi, blo, bhi;
    extent(a, &alo, &ahi);
    extent(b, &blo, &bhi);
    int64_t sa = (int64_t)ev__dsize(a->dtype), sb = (int64_t)ev__dsize(b->dtype);
    return alo * sa < bhi * sb && blo * sb < ahi * sa;
}

int ev__has_internal_overlap(const ev_tensor *t)
{
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] > 1 && t->strides[i] == 0) {
            return 1;
        }
    }
    return 0;
}

/* -------------------------------------------------------------- accessors */

ev_dtype ev_tensor_dtype(const ev_tensor *t)
{
    return t->dtype;
}

int ev_tensor_ndim(const ev_tensor *t)
{
    return t->ndim;
}

const int64_t *ev_tensor_shape(const ev_tensor *t)
{
    return t->shape;
}

const int64_t *ev_tensor_strides(const ev_tensor *t)
{
    return t->strides;
}

int64_t ev_tensor_offset(const ev_tensor *t)
{
    return t->offset;
}

int64_t ev_tensor_numel(const ev_tensor *t)
{
    return t->numel;
}

int ev_tensor_is_contiguous(const ev_tensor *t)
{
    int64_t st = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != st) {
            return t->numel == 0;
        }
        st *= t->shape[i];
    }
    return 1;
}

int ev_tensor_same_storage(const ev_tensor *a, const ev_tensor *b)
{
    return a && b && a->storage == b->storage;
}

uint64_t ev_tensor_version(const ev_tensor *t)
{
    return atomic_load_explicit(&t->storage->version, memory_order_relaxed);
}

void ev_tensor_last_write(const ev_tensor *t, const char **name, const ev_site **site)
{
    *name = atomic_load_explicit(&t->storage->last_write_name, memory_order_relaxed);
    *site = atomic_load_explicit(&t->storage->last_write_site, memory_order_relaxed);
}

int ev_tensor_is_unique(const ev_tensor *t)
{
    return atomic_load_explicit(&((ev_tensor *)t)->refs, memory_order_acquire) == 1 &&
           atomic_load_explicit(&t->storage->refs, memory_order_acquire) == 1;
}

int ev_tensor_has_views(const ev_tensor *t)
{
    /* relaxed: a hint for the issuing thread, which made the views. */
    int refs = atomic_load_explicit(&t->storage->refs, memory_order_relaxed);
    int aliases = atomic_load_explicit(&t->storage->aliases, memory_order_relaxed);
    return refs - aliases - (t->is_alias ? 0 : 1) > 0;
}

ev_tensor_ext *ev_tensor_ext_get(const ev_tensor *t)
{
    /* acquire: pairs with the release of the set, so the state it points
     * to is seen initialised. */
    return atomic_load_explicit(&((ev_tensor *)t)->ext, memory_order_acquire);
}

ev_tensor_ext *ev_tensor_ext_set(ev_tensor *t, ev_tensor_ext *ext)
{
    ev_tensor_ext *expected = NULL;
    /* acq_rel: publishes ext on success, and on failure sees the winner's. */
    if (atomic_compare_exchange_strong_explicit(&t->ext, &expected, ext, memory_order_acq_rel,
                                                memory_order_acquire)) {
        return ext;
    }
    return expected;
}

int ev_tensor_alias(ev_tensor *t, ev_tensor **out)
{
    int rc = tensor_struct(t->dtype, t->ndim, t->shape, t->strides, t->offset, t->storage, out);
    if (rc == 0) {
        atomic_fetch_add_explicit(&t->storage->refs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->storage->aliases, 1, memory_order_relaxed);
        (*out)->is_alias = true;
    }
    return rc;
}

ev_obj *ev_tensor_obj(const ev_tensor *t)
{
    return t->storage->obj;
}

void *ev_tensor_data(const ev_tensor *t)
{
    return ev__tensor_ptr(t);
}

/* ------------------------------------------------------------- submission */

/* An op touching at most this many bytes runs in a few microseconds, far
 * less than waking a parked worker costs: its submitter may run it
 * (EV_SUBMIT_MAY_RUN_HERE). 32 KB is a 1K-element float op with room to
 * spare, and a 32x32 matmul. */
#define RUN_HERE_MAX_BYTES (32 * 1024)

int ev__submit(const ev_exec *ex, const char *name, ev_kernel_fn kernel, const void *arg,
               size_t arg_size, void (*drop)(void *), ev_tensor *const *reads, int n_reads,
               ev_tensor *const *writes, int n_writes)
{
    ev_operand ops[2 * EV__ITER_MAX_OPS];
    size_t n = 0;
    int64_t bytes = 0;
    for (int i = 0; i < n_reads; i++) {
        if (reads[i]) {
            ops[n++] = (ev_operand){reads[i]->storage->obj, EV_READ};
            bytes += reads[i]->numel * (int64_t)ev__dsize(reads[i]->dtype);
        }
    }
    for (int i = 0; i < n_writes; i++) {
        if (writes[i]) {
            ops[n++] = (ev_operand){writes[i]->storage->obj, EV_WRITE};
            bytes += writes[i]->numel * (int64_t)ev__dsize(writes[i]->dtype);
        }
    }
    ev_instr_desc d = {
        .kernel = kernel,
        .arg = arg,
        .arg_size = arg_size,
        .arg_drop = drop,
        .stream = ev_cpu_stream(ex->thread_uid),
        .operands = ops,
        .n_operands = n,
        .name = name,
        .site = ex->site,
        .flags = bytes <= RUN_HERE_MAX_BYTES ? EV_SUBMIT_MAY_RUN_HERE : 0,
    };
    int rc = ev_submit(ex->vm, &d, NULL);
    if (!rc) {
        for (int i = 0; i < n_writes; i++) {
            if (writes[i]) {
                ev__storage_written(writes[i]->storage, name, ex->site);
            }
        }
    }
    if (rc && drop) {
        /* Nothing was queued and the engine will not call drop: release what
         * the argument references here. */
        drop((void *)arg);
    }
    return rc;
}
