/* Error codes, per-thread messages, error records of failed instructions,
 * and the one allocation gate of the library (with fault injection). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

/* ---------------------------------------------------------------- codes */

const char *ev_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define EV_STRERROR_CASE(name, val, desc)                                      \
    case EV_##name:                                                            \
        return desc;
        EV_ERRNO_MAP(EV_STRERROR_CASE)
#undef EV_STRERROR_CASE
    default:
        return "unknown error";
    }
}

const char *ev_err_name(int code)
{
    switch (code) {
    case 0:
        return "EV_OK";
#define EV_ERRNAME_CASE(name, val, desc)                                       \
    case EV_##name:                                                            \
        return "EV_" #name;
        EV_ERRNO_MAP(EV_ERRNAME_CASE)
#undef EV_ERRNAME_CASE
    default:
        return "EV_UNKNOWN";
    }
}

/* ------------------------------------------------------------- messages */

static _Thread_local char last_message[512];

const char *ev_last_message(void)
{
    return last_message;
}

int ev__set_message(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return code;
}

void ev__assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "eagervm: internal assertion failed: %s (%s:%d)\n", cond, file, line);
    abort();
}

int64_t ev__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ----------------------------------------------------------- allocation */

/* Remaining successful allocations before injected failures; < 0 = off. */
static _Atomic long alloc_budget = -1;

void ev__fail_alloc_after(long n)
{
    atomic_store_explicit(&alloc_budget, n, memory_order_relaxed);
}

static bool alloc_should_fail(void)
{
    long b = atomic_load_explicit(&alloc_budget, memory_order_relaxed);
    if (b < 0) {
        return false;
    }
    /* Count down without going below zero; relaxed is enough for a test hook. */
    while (b > 0) {
        if (atomic_compare_exchange_weak_explicit(&alloc_budget, &b, b - 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            return false;
        }
        if (b < 0) {
            return false;
        }
    }
    return true;
}

void *ev__malloc(size_t size)
{
    return alloc_should_fail() ? NULL : malloc(size);
}

void *ev__calloc(size_t n, size_t size)
{
    return alloc_should_fail() ? NULL : calloc(n, size);
}

void *ev__realloc(void *p, size_t size)
{
    return alloc_should_fail() ? NULL : realloc(p, size);
}

void *ev__aligned_malloc(size_t align, size_t size)
{
    void *p = NULL;
    if (alloc_should_fail() || posix_memalign(&p, align, size) != 0) {
        return NULL;
    }
    return p;
}

void ev__free(void *p)
{
    free(p);
}

/* ------------------------------------------------------- struct caches */

/* Enough for a recorded graph of tens of thousands of ops, whose nodes,
 * tensors and storages are all freed at once and taken again by the next
 * step: past the cap they went to malloc, which handed the memory back to
 * the system and faulted it in again every step (a chain of 30,000
 * recorded ops took 2.6x as long to record and free). The structs kept are
 * what the largest graph held, as a caching allocator keeps its peak; the
 * array is touched only as far as it is filled. The cache is an array of
 * pointers, so caching a struct does not touch it (it was last written by
 * a worker: a touch would be a cache miss). */
enum { CACHE_MAX = 65536 };

typedef struct struct_cache {
    int len[EV__CACHE_COUNT];
    void *items[EV__CACHE_COUNT][CACHE_MAX];
} struct_cache;

static EV_TLS_FAST struct_cache *cache;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

/* Thread exit: give the cached structs back to malloc. */
static void cache_drop(void *p)
{
    struct_cache *c = p;
    for (int k = 0; k < EV__CACHE_COUNT; k++) {
        for (int i = 0; i < c->len[k]; i++) {
            free(c->items[k][i]);
        }
    }
    free(c);
}

static void cache_key_create(void)
{
    pthread_key_create(&cache_key, cache_drop);
}

void *ev__cache_alloc(int kind, size_t size)
{
    if (alloc_should_fail()) {
        return NULL;
    }
    if (cache && cache->len[kind] > 0) {
        int len = --cache->len[kind];
        if (len > 1) {
            /* The structs of this kind after this one are taken soon (a
             * chain of ops takes one each): ask for the one after the next
             * now (the previous call asked for the next), so that a cache
             * someone else's work evicted costs latency once per chain
             * rather than once per op. */
            const char *next = cache->items[kind][len - 2];
            /* The struct's first 4 lines: the largest struct cached, a
             * graph node, is laid out so that every use touches only
             * those (EV__AG_NODE_HOT_BYTES in autograd-impl.h). */
            size_t hot = size < 256 ? size : 256;
            for (size_t off = 0; off < hot; off += 64) {
                __builtin_prefetch(next + off, 1);
            }
        }
        return cache->items[kind][len];
    }
    /* Line-aligned, so that a struct's fields lie on the fewest lines its
     * layout allows (malloc's 16 would split them at random). */
    return aligned_alloc(64, (size + 63) & ~(size_t)63);
}

void ev__cache_free(int kind, void *p)
{
    if (!p) {
        return;
    }
    if (!cache) {
        cache = calloc(1, sizeof *cache);
        if (!cache) {
            free(p);
            return;
        }
        /* This thread's exit frees what it kept. */
        pthread_once(&cache_key_once, cache_key_create);
        pthread_setspecific(cache_key, cache);
    }
    if (cache->len[kind] >= CACHE_MAX) {
        free(p);
        return;
    }
    cache->items[kind][cache->len[kind]++] = p;
}

void ev__cache_free_obj(void *p)
{
    ev__cache_free(EV__CACHE_OBJ, p);
}

void ev_free(void *p)
{
    ev__free(p);
}

/* --------------------------------------------------------- error records */

ev_error *ev__error_new(int code, const char *message, const char *name, const ev_site *site,
                        uint32_t uid, uint8_t stream_type, uint64_t seq)
{
    size_t len = strlen(message);
    ev_error *err = ev__malloc(sizeof *err + len + 1);
    if (!err) {
        return NULL;
    }
    atomic_init(&err->refs, 1);
    atomic_init(&err->reported, 0);
    err->code = code;
    err->name = name;
    err->site = site;
    err->thread_uid = uid;
    err->stream_type = stream_type;
    err->seq = seq;
    err->unreported_link.next = NULL;
    err->listed = false;
    memcpy(err->message, message, len + 1);
    return err;
}

void ev_error_ref(ev_error *err)
{
    atomic_fetch_add_explicit(&err->refs, 1, memory_order_relaxed);
}

void ev_error_unref(ev_error *err)
{
    /* acq_rel: the last dropper sees every write made under other references. */
    if (err && atomic_fetch_sub_explicit(&err->refs, 1, memory_order_acq_rel) == 1) {
        ev__free(err);
    }
}

void ev_error_get(const ev_error *err, ev_error_info *info)
{
    if (!err || !info) {
        if (info) {
            memset(info, 0, sizeof *info);
        }
        return;
    }
    info->code = err->code;
    info->message = err->message;
    info->name = err->name;
    info->site = err->site;
    info->thread_uid = err->thread_uid;
    info->seq = err->seq;
    info->stream_type = err->stream_type;
}

int ev_error_format(const ev_error *err, char *buf, size_t size)
{
    if (!err) {
        return snprintf(buf, size, "(no error)");
    }
    if (err->site && err->site->file) {
        return snprintf(buf, size, "%s failed at %s:%d in %s: %s", err->name, err->site->file,
                        err->site->line, err->site->function ? err->site->function : "?",
                        err->message);
    }
    return snprintf(buf, size, "%s failed: %s", err->name, err->message);
}

void ev__vm_add_unreported(ev_vm *vm, ev_error *err)
{
    pthread_mutex_lock(&vm->err_lock);
    /* A worker's oom_error stands for every failure it records, so it may
     * come again: once more unreported, but never twice on the list. */
    atomic_store_explicit(&err->reported, 0, memory_order_relaxed);
    if (err->listed) {
        pthread_mutex_unlock(&vm->err_lock);
        return;
    }
    ev_error_ref(err);
    err->listed = true;
    ev__fifo_push(&vm->unreported, &err->unreported_link);
    pthread_mutex_unlock(&vm->err_lock);
}

void ev__worker_remember_error(ev_worker *w, uint64_t seq, ev_error *err)
{
    const size_t ring = sizeof w->recent_errors / sizeof w->recent_errors[0];
    ev_error_ref(err);
    pthread_mutex_lock(&w->recent_lock);
    size_t slot = w->n_recent_errors++ % ring;
    ev_error_unref(w->recent_errors[slot].err);
    w->recent_errors[slot].seq = seq;
    w->recent_errors[slot].err = err;
    pthread_mutex_unlock(&w->recent_lock);
}
