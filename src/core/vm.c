/* Runtime lifecycle, configuration from the environment, the thread uid
 * pool, and statistics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

enum {
    DEFAULT_THREAD_LIMIT = 16,
    /* Past a few thousand queued instructions a deeper queue buys no
     * throughput, only memory: and each burst of frees after a wait must fit
     * the per-thread struct caches (errors.c). */
    DEFAULT_MAX_PENDING = 8192,
    MAX_THREAD_LIMIT = 4096,
};

/* Reads a positive integer from the environment; 0 when unset. */
static int env_uint(const char *name, uint32_t max, uint32_t *out)
{
    const char *s = getenv(name);
    *out = 0;
    if (!s || !*s) {
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max || s[0] == '-') {
        return ev__set_message(EV_EINVAL, "%s=%s is not a whole number in 0..%u", name, s, max);
    }
    *out = (uint32_t)v;
    return 0;
}

static int configure(ev_vm *vm, const ev_vm_config *cfg)
{
    uint32_t limit, pending, stall, run_here = 1;
    int rc = env_uint("EAGERVM_WORKER_THREAD_LIMIT", MAX_THREAD_LIMIT, &limit);
    const char *run_here_env = getenv("EAGERVM_RUN_HERE");
    if (rc == 0 && run_here_env && *run_here_env) {
        rc = env_uint("EAGERVM_RUN_HERE", 1, &run_here);
    }
    if (rc == 0) {
        rc = env_uint("EAGERVM_MAX_PENDING", 1u << 30, &pending);
    }
    if (rc == 0) {
        rc = env_uint("EAGERVM_STALL_TIMEOUT_MS", 1u << 30, &stall);
    }
    if (rc != 0) {
        return rc;
    }
    if (cfg && cfg->worker_thread_limit) {
        limit = cfg->worker_thread_limit;
    }
    if (cfg && cfg->max_pending) {
        pending = cfg->max_pending;
    }
    if (cfg && cfg->stall_timeout_ms) {
        stall = cfg->stall_timeout_ms;
    }
    if (limit > MAX_THREAD_LIMIT) {
        return ev__set_message(EV_EINVAL, "worker_thread_limit %u is above %u", limit,
                               MAX_THREAD_LIMIT);
    }
    vm->limit = limit ? limit : DEFAULT_THREAD_LIMIT;
    vm->max_pending = pending ? pending : DEFAULT_MAX_PENDING;
    vm->stall_timeout_ms = stall;
    vm->run_here = run_here != 0;
    return 0;
}

/* ------------------------------------------------------------- fork */

/* fork() copies only the calling thread. A lock another thread held at that
 * moment would stay locked in the child, so every runtime's locks are taken
 * across the fork. The child has none of the parent's workers: it may release
 * objects of a runtime whose work had finished, but should create a runtime
 * of its own for new work. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static ev__lifo live_vms; /* of ev_vm.live_link; guarded by live_lock */

#define LIVE_OF(l) EV_CONTAINER_OF(l, ev_vm, live_link)

static void fork_prepare(void)
{
    pthread_mutex_lock(&live_lock);
    for (ev__link *l = ev__lifo_peek(&live_vms); l; l = l->next) {
        ev_vm *vm = LIVE_OF(l);
        ev__lock_acquire(&vm->submit_lock);
        pthread_mutex_lock(&vm->pool_lock);
        pthread_mutex_lock(&vm->err_lock);
    }
}

static void fork_release(void)
{
    for (ev__link *l = ev__lifo_peek(&live_vms); l; l = l->next) {
        ev_vm *vm = LIVE_OF(l);
        pthread_mutex_unlock(&vm->err_lock);
        pthread_mutex_unlock(&vm->pool_lock);
        ev__lock_release(&vm->submit_lock);
    }
    pthread_mutex_unlock(&live_lock);
}

/* Registered when the library loads, before any layer above can register
 * its own: prepare handlers run in reverse order, so ours runs last, after
 * those that may still submit or wait (a Python layer draining its work). */
__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

static void live_add(ev_vm *vm)
{
    pthread_mutex_lock(&live_lock);
    ev__lifo_push(&live_vms, &vm->live_link);
    pthread_mutex_unlock(&live_lock);
}

static void live_remove(ev_vm *vm)
{
    pthread_mutex_lock(&live_lock);
    ev__lifo_remove(&live_vms, &vm->live_link);
    pthread_mutex_unlock(&live_lock);
}

/* --------------------------------------------------------- lifecycle */

int ev_vm_create(const ev_vm_config *cfg, ev_vm **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "ev_vm_create: out is NULL");
    }
    *out = NULL;
    ev_vm *vm = ev__aligned_malloc(EV_CACHELINE, sizeof *vm);
    if (!vm) {
        return ev__set_message(EV_ENOMEM, "ev_vm_create: out of memory");
    }
    memset(vm, 0, sizeof *vm);
    int rc = configure(vm, cfg);
    if (rc != 0) {
        goto fail_config;
    }
    vm->n_lanes = (vm->limit + 1) * EV_STREAM_TYPE_COUNT;
    vm->workers = ev__calloc(vm->n_lanes, sizeof *vm->workers);
    if (!vm->workers) {
        goto fail_workers;
    }
    vm->uid_taken = ev__calloc(vm->limit + 1, 1);
    if (!vm->uid_taken) {
        goto fail_pool;
    }
    vm->uid_taken[0] = 1;
    pthread_mutex_init(&vm->pool_lock, NULL);
    pthread_mutex_init(&vm->err_lock, NULL);
    pthread_mutex_init(&vm->spares_lock, NULL);
    live_add(vm);
    *out = vm;
    return 0;

fail_pool:
    ev__free((void *)vm->workers);
fail_workers:
    rc = ev__set_message(EV_ENOMEM, "ev_vm_create: out of memory");
fail_config:
    ev__free(vm);
    return rc;
}

void ev_vm_destroy(ev_vm *vm)
{
    if (!vm) {
        return;
    }
    ev__wait_all(vm, -1);
    ev__reap_released(vm); /* every access has finished; before the workers go */
    live_remove(vm);
    for (uint32_t u = 0; u < vm->n_lanes; u++) {
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
        if (w) {
            ev__worker_stop(w);
        }
    }
    /* No kernel runs now: the layers' state (the intra-op pool, whose
     * helpers are joined here) goes, in reverse order of the slots. */
    for (int i = EV__EXT_COUNT - 1; i >= 0; i--) {
        void *p = atomic_load_explicit(&vm->ext[i], memory_order_acquire);
        if (p) {
            vm->ext_destroy[i](p);
        }
    }
    ev__run_deferred(vm); /* what the last instructions handed back */
    ev__free_defer_spares(vm);
    for (size_t i = 0; i < vm->n_slabs; i++) {
        ev__free(vm->slabs[i]);
    }
    ev__free(vm->slabs);
    ev__link *l;
    while ((l = ev__fifo_pop(&vm->unreported))) {
        ev_error_unref(EV_CONTAINER_OF(l, ev_error, unreported_link));
    }
    pthread_mutex_destroy(&vm->pool_lock);
    pthread_mutex_destroy(&vm->err_lock);
    pthread_mutex_destroy(&vm->spares_lock);
    ev__free(vm->uid_taken);
    ev__free((void *)vm->workers);
    ev__free(vm);
}

uint32_t ev_vm_thread_limit(const ev_vm *vm)
{
    return vm ? vm->limit : 0;
}

int ev_vm_set_run_here(ev_vm *vm, int on)
{
    if (!vm || (on != 0 && on != 1)) {
        return ev__set_message(EV_EINVAL, "ev_vm_set_run_here: expected a runtime and 0 or 1, "
                               "got %s and %d", vm ? "a runtime" : "NULL", on);
    }
    ev__lock_acquire(&vm->submit_lock); /* where it is read */
    int was = vm->run_here;
    vm->run_here = on;
    ev__lock_release(&vm->submit_lock);
    return was;
}

/* -------------------------------------------------------- extensions */

void *ev__vm_ext(ev_vm *vm, int slot)
{
    EV_ASSERT(slot >= 0 && slot < EV__EXT_COUNT);
    /* acquire: pairs with the install's release, so the state is seen
     * initialised. */
    return atomic_load_explicit(&vm->ext[slot], memory_order_acquire);
}

void *ev__vm_ext_install(ev_vm *vm, int slot, void *p, void (*destroy)(void *p))
{
    EV_ASSERT(slot >= 0 && slot < EV__EXT_COUNT && p && destroy);
    pthread_mutex_lock(&vm->pool_lock);
    void *have = atomic_load_explicit(&vm->ext[slot], memory_order_relaxed);
    if (!have) {
        vm->ext_destroy[slot] = destroy;
        /* release: a reader of the slot sees p's contents. */
        atomic_store_explicit(&vm->ext[slot], p, memory_order_release);
        have = p;
    }
    pthread_mutex_unlock(&vm->pool_lock);
    return have;
}

/* ---------------------------------------------------------- uid pool */

int ev_vm_thread_acquire(ev_vm *vm, uint32_t *uid_out)
{
    if (!vm || !uid_out) {
        return ev__set_message(EV_EINVAL, "ev_vm_thread_acquire: vm and uid_out must not be NULL");
    }
    pthread_mutex_lock(&vm->pool_lock);
    for (uint32_t u = 1; u <= vm->limit; u++) {
        if (!vm->uid_taken[u]) {
            vm->uid_taken[u] = 1;
            pthread_mutex_unlock(&vm->pool_lock);
            *uid_out = u;
            return 0;
        }
    }
    pthread_mutex_unlock(&vm->pool_lock);
    return ev__set_message(EV_ELIMIT,
                           "all %u worker threads are in use; raise EAGERVM_WORKER_THREAD_LIMIT "
                           "(now %u) or release a Thread first",
                           vm->limit, vm->limit);
}

int ev_vm_thread_release(ev_vm *vm, uint32_t uid)
{
    if (!vm) {
        return ev__set_message(EV_EINVAL, "ev_vm_thread_release: vm is NULL");
    }
    pthread_mutex_lock(&vm->pool_lock);
    if (uid == 0 || uid > vm->limit || !vm->uid_taken[uid]) {
        pthread_mutex_unlock(&vm->pool_lock);
        return ev__set_message(EV_EINVAL,
                               "thread uid %u is not taken (expected a uid from "
                               "ev_vm_thread_acquire, 1..%u)",
                               uid, vm->limit);
    }
    vm->uid_taken[uid] = 0;
    pthread_mutex_unlock(&vm->pool_lock);
    return 0;
}

/* ------------------------------------------------------------- stats */

void ev_vm_get_stats(ev_vm *vm, ev_vm_stats *out)
{
    if (!out) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (!vm) {
        return;
    }
    ev__lock_acquire(&vm->submit_lock);
    for (uint32_t u = 0; u < vm->n_lanes; u++) {
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
        if (w) {
            uint64_t done = atomic_load_explicit(&w->completed, memory_order_acquire);
            out->completed += done;
            out->pending += atomic_load_explicit(&w->issued, memory_order_relaxed) - done;
        }
    }
    out->workers_started = vm->workers_started;
    out->submitted = vm->n_submitted;
    out->cross_edges = vm->n_cross_edges;
    out->stream_edges = vm->n_stream_edges;
    out->worker_wakes = vm->n_wakes;
    out->ran_here = vm->n_ran_here;
    ev__lock_release(&vm->submit_lock);
    out->failed = atomic_load_explicit(&vm->n_failed, memory_order_relaxed);
    out->skipped = atomic_load_explicit(&vm->n_skipped, memory_order_relaxed);
    out->backpressure_waits = atomic_load_explicit(&vm->n_backpressure, memory_order_relaxed);
    out->cpu_moves = atomic_load_explicit(&vm->n_cpu_moves, memory_order_relaxed);
}

const char *ev_stream_type_name(int type)
{
    static const char *const names[EV_STREAM_TYPE_COUNT] = {"compute", "h2d", "d2h", "ccl",
                                                            "barrier"};
    return type >= 0 && type < EV_STREAM_TYPE_COUNT ? names[type] : "unknown";
}
