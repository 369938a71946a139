/* The caching allocator: one per device for the whole process. Freed blocks go
 * to size-class bins and are reused without touching the system allocator.
 *
 * Size classes: small requests (up to 1 MiB) round up to one of four classes
 * per power of two (at most 25% slack, 64-byte granularity), each class with
 * its own free list. Large requests round up to 64 KiB and share one list
 * sorted by size, served best-fit when the cached block wastes at most 1/8.
 *
 * In front of it, each issuing thread keeps its last few small frees (see
 * "thread caches" below).
 *
 * Lock order: one mutex per allocator, taken last (nothing else is locked
 * while holding it, and no callback runs under it). Frees arrive from worker
 * threads (storage free callbacks), allocations from issuing threads. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor-impl.h"

#define ALIGN 64
#define SMALL_MAX ((size_t)1 << 20)
#define LARGE_ROUND ((size_t)64 << 10)
#define N_SMALL_BINS 52

typedef struct allocator {
    pthread_mutex_t lock;
    uint8_t device_type;
    ev__block *small[N_SMALL_BINS]; /* cached blocks per class (owned) */
    ev__block *large;               /* cached large blocks by size (owned) */
    ev_allocator_stats stats;
} allocator;

/* Process-wide, like PyTorch's: memory is a property of the device, not of a
 * runtime, and a block freed by one runtime may serve another. */
static allocator cpu_allocator = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .device_type = EV_DEVICE_CPU,
};

/* fork() copies only the calling thread: if a worker held the lock at that
 * moment, the child would find it locked forever. Hold it across the fork. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&cpu_allocator.lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&cpu_allocator.lock);
}

/* Registered at load time, so that this prepare handler runs after those of
 * the layers above (prepare handlers run in reverse order of registration). */
__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

/* ------------------------------------------------------- thread caches */

/* Each thread that issues ops keeps the last few small blocks it freed and
 * takes them back first: a loop of small ops then frees and allocates
 * without the allocator's lock (two lock round trips per op otherwise).
 * Blocks held here still count as in use, so the statistics stay exact
 * without any shared counter; what they held is folded in when the thread
 * hands blocks back, reads the statistics, or exits. Worker threads do not
 * keep any (they rarely allocate, so blocks would sit idle there). */
#define TCACHE_BLOCKS 16
#define TCACHE_MAX_SIZE ((size_t)64 << 10)

typedef struct tcache {
    int n;
    ev__block *blocks[TCACHE_BLOCKS]; /* owned (counted as in use) */
    uint64_t n_allocs;                /* not yet folded into the stats */
} tcache;

static EV_TLS_FAST tcache *my_tcache;
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

static void cache_put(allocator *a, ev__block *b);

/* Hands every block of c back to the allocator and folds its counts.
 * Caller holds no lock. */
static void tcache_flush(allocator *a, tcache *c)
{
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < c->n; i++) {
        a->stats.in_use -= c->blocks[i]->size;
        cache_put(a, c->blocks[i]);
    }
    a->stats.n_allocs += c->n_allocs;
    a->stats.n_cache_hits += c->n_allocs;
    pthread_mutex_unlock(&a->lock);
    c->n = 0;
    c->n_allocs = 0;
}

static void tcache_exit(void *p)
{
    tcache_flush(&cpu_allocator, p);
    ev__free(p);
}

static void tcache_key_init(void)
{
    pthread_key_create(&tcache_key, tcache_exit);
}

/* The calling thread's cache, made on first use; NULL on a worker or when
 * it cannot be made (the shared path still works). */
static tcache *tcache_get(void)
{
    if (my_tcache || ev__on_worker_thread()) {
        return my_tcache;
    }
    pthread_once(&tcache_once, tcache_key_init);
    tcache *c = ev__calloc(1, sizeof *c);
    if (c && pthread_setspecific(tcache_key, c) != 0) {
        ev__free(c);
        c = NULL;
    }
    my_tcache = c;
    return c;
}

static allocator *allocator_for(int device_type, int device_index)
{
    if (device_type == EV_DEVICE_CPU && device_index == 0) {
        return &cpu_allocator;
    }
    return NULL;
}

/* Rounds a small request up to its class; *idx receives the bin. */
static size_t small_class(size_t n, int *idx)
{
    if (n <= 64) {
        *idx = 0;
        return 64;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
    size_t pow = (size_t)1 << k;
    size_t step = pow / 4 < 64 ? 64 : pow / 4;
    size_t r = (n + step - 1) / step * step;
    if (k == 6) {
        *idx = 1;
    } else if (k == 7) {
        *idx = 1 + (int)((r - pow) / step);
    } else {
        *idx = 4 + (k - 8) * 4 + (int)((r - pow) / step) - 1;
    }
    return r;
}

static size_t class_size(size_t n, int *idx)
{
    if (n <= SMALL_MAX) {
        return small_class(n, idx);
    }
    *idx = -1;
    return (n + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

static void stats_take(allocator *a, size_t size, int hit)
{
    a->stats.in_use += size;
    if (a->stats.in_use > a->stats.peak_in_use) {
        a->stats.peak_in_use = a->stats.in_use;
    }
    a->stats.n_allocs++;
    a->stats.n_cache_hits += hit != 0;
}

/* Pops a cached block for (size, idx), or NULL. Caller holds the lock. */
static ev__block *cache_take(allocator *a, size_t size, int idx)
{
    if (idx >= 0) {
        ev__block *b = a->small[idx];
        if (b) {
            a->small[idx] = b->next;
            /* A chain of small ops takes one block each: ask for the next
             * one's descriptor now, or every take waits for a miss (the
             * list is walked by pointer). */
            if (b->next) {
                __builtin_prefetch(b->next, 1);
            }
        }
        return b;
    }
    /* The list is sorted by size, so the first block that fits is the best. */
    for (ev__block **p = &a->large; *p; p = &(*p)->next) {
        ev__block *b = *p;
        if (b->size >= size) {
            if (b->size - size > size / 8) {
                return NULL;
            }
            *p = b->next;
            return b;
        }
    }
    return NULL;
}

/* Frees every cached block; caller holds the lock. */
static void cache_empty(allocator *a)
{
    for (int i = 0; i < N_SMALL_BINS + 1; i++) {
        ev__block **list = i < N_SMALL_BINS ? &a->small[i] : &a->large;
        while (*list) {
            ev__block *b = *list;
            *list = b->next;
            a->stats.reserved -= b->size;
            ev__free(b->base);
            ev__free(b);
        }
    }
}

static ev__block *sys_alloc(allocator *a, size_t size)
{
    ev__block *b = ev__malloc(sizeof(*b));
    if (!b) {
        return NULL;
    }
    void *base = ev__malloc(size + ALIGN - 1);
    if (!base) {
        ev__free(b);
        return NULL;
    }
    b->base = base;
    b->ptr = (void *)(((uintptr_t)base + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    b->size = size;
    b->next = NULL;
    b->device_type = a->device_type;
    b->device_index = 0;
    a->stats.reserved += size;
    a->stats.n_sys_allocs++;
    return b;
}

int ev__alloc(int device_type, int device_index, size_t nbytes, ev__block **out)
{
    allocator *a = allocator_for(device_type, device_index);
    if (!a) {
        return ev__set_message(EV_EINVAL, "allocator: no device of type %d index %d",
                               device_type, device_index);
    }
    if (nbytes == 0 || nbytes > SIZE_MAX / 2) {
        return ev__set_message(nbytes ? EV_ENOMEM : EV_EINVAL,
                               "allocator: cannot allocate %zu bytes", nbytes);
    }
    int idx;
    size_t size = class_size(nbytes, &idx);
    tcache *c = a == &cpu_allocator && size <= TCACHE_MAX_SIZE ? tcache_get() : NULL;
    for (int i = c ? c->n - 1 : -1; i >= 0; i--) {
        if (c->blocks[i]->size == size) {
            ev__block *b = c->blocks[i];
            c->blocks[i] = c->blocks[--c->n];
            c->n_allocs++;
            *out = b;
            return 0;
        }
    }
    pthread_mutex_lock(&a->lock);
    ev__block *b = cache_take(a, size, idx);
    int hit = b != NULL;
    if (!b) {
        b = sys_alloc(a, size);
    }
    if (!b) {
        /* The system is out of memory: give it our cache back and try once
         * more before failing. */
        a->stats.n_oom_retries++;
        if (c && c->n) {
            pthread_mutex_unlock(&a->lock);
            tcache_flush(a, c);
            pthread_mutex_lock(&a->lock);
        }
        cache_empty(a);
        b = sys_alloc(a, size);
    }
    if (!b) {
        ev_allocator_stats s = a->stats;
        pthread_mutex_unlock(&a->lock);
        return ev__set_message(EV_ENOMEM,
                               "cpu allocator: out of memory allocating %zu bytes "
                               "(%llu bytes in use; the cache was emptied and the "
                               "allocation retried)",
                               nbytes, (unsigned long long)s.in_use);
    }
    stats_take(a, b->size, hit);
    pthread_mutex_unlock(&a->lock);
    *out = b;
    return 0;
}

void ev__dealloc(ev__block *b)
{
    if (!b) {
        return;
    }
    allocator *a = allocator_for(b->device_type, b->device_index);
    tcache *c = a == &cpu_allocator && b->size <= TCACHE_MAX_SIZE ? tcache_get() : NULL;
    if (c) {
        if (c->n == TCACHE_BLOCKS) {
            tcache_flush(a, c);
        }
        c->blocks[c->n++] = b;
        return;
    }
    pthread_mutex_lock(&a->lock);
    a->stats.in_use -= b->size;
    cache_put(a, b);
    pthread_mutex_unlock(&a->lock);
}

/* Puts b in its bin. Caller holds the lock. */
static void cache_put(allocator *a, ev__block *b)
{
    int idx;
    class_size(b->size, &idx);
    if (idx >= 0) {
        b->next = a->small[idx];
        a->small[idx] = b;
    } else {
        ev__block **p = &a->large;
        while (*p && (*p)->size < b->size) {
            p = &(*p)->next;
        }
        b->next = *p;
        *p = b;
    }
}

/* Folds the calling thread's cache into the allocator, so that what it reads
 * or empties next is exact for this thread. */
static void flush_mine(allocator *a)
{
    if (a == &cpu_allocator && my_tcache && (my_tcache->n || my_tcache->n_allocs)) {
        tcache_flush(a, my_tcache);
    }
}

int ev__block_fits(const ev__block *b, size_t nbytes)
{
    int idx;
    size_t size = class_size(nbytes, &idx);
    if (idx >= 0) {
        return b->size == size;
    }
    return b->size >= size && b->size - size <= size / 8;
}

void ev__alloc_count_reuse(const ev__block *b)
{
    allocator *a = allocator_for(b->device_type, b->device_index);
    pthread_mutex_lock(&a->lock);
    a->stats.n_allocs++;
    a->stats.n_cache_hits++;
    a->stats.n_stream_reuses++;
    pthread_mutex_unlock(&a->lock);
}

int ev_allocator_get_stats(int device_type, int device_index, ev_allocator_stats *out)
{
    allocator *a = allocator_for(device_type, device_index);
    if (!a || !out) {
        return ev__set_message(EV_EINVAL, "ev_allocator_get_stats: no device of type %d "
                               "index %d (or out is NULL)", device_type, device_index);
    }
    flush_mine(a);
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    pthread_mutex_unlock(&a->lock);
    out->cached = out->reserved - out->in_use;
    return 0;
}

int ev_allocator_empty_cache(int device_type, int device_index)
{
    allocator *a = allocator_for(device_type, device_index);
    if (!a) {
        return ev__set_message(EV_EINVAL, "ev_allocator_empty_cache: no device of type %d "
                               "index %d", device_type, device_index);
    }
    flush_mine(a);
    pthread_mutex_lock(&a->lock);
    cache_empty(a);
    pthread_mutex_unlock(&a->lock);
    return 0;
}

int ev_allocator_reset_peak(int device_type, int device_index)
{
    allocator *a = allocator_for(device_type, device_index);
    if (!a) {
        return ev__set_message(EV_EINVAL, "ev_allocator_reset_peak: no device of type %d "
                               "index %d", device_type, device_index);
    }
    flush_mine(a);
    pthread_mutex_lock(&a->lock);
    a->stats.peak_in_use = a->stats.in_use;
    pthread_mutex_unlock(&a->lock);
    return 0;
}
