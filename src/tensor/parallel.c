/* Intra-op parallelism: one kernel's loop split over the calling worker and
 * a few helper threads, for ops large enough that the split pays for the
 * hand-off (a memory-bound add over 1M floats runs ~1.8x faster on 2 cores),
 * and the core budget that large ops (these loops and BLAS calls) share.
 *
 * The budget. Each large op asks for threads when it starts and gets at
 * most T / busy (at least 1: its own thread), where T is what one op alone
 * may use (EAGERVM_INTRAOP_THREADS, default the CPUs) and busy the kernels
 * busy at that moment: the workers of its runtime running an instruction,
 * or the large ops in flight in the process if more. It also gets no more
 * than the T less what the other large ops hold (still at least 1). So with
 * one busy worker an op uses every core, and with several the helpers and
 * BLAS threads they ask for add up to at most T. What the budget cannot
 * undo: an op that started alone keeps its threads until it ends (a BLAS
 * call cannot give them back), so a kernel that starts meanwhile overlaps
 * it for that long.
 *
 * The pool. Each runtime owns one, made when a kernel of one of its workers
 * first splits a loop, and joined in ev_vm_destroy (the engine calls us back
 * once its workers have stopped). A kernel that finds its runtime's pool
 * busy (a kernel on another worker holds it) runs its loop alone. The
 * caller takes chunks too, and chunks are claimed one at a time, so a
 * helper that is slow to wake costs nothing but its share. Helpers spin
 * briefly after a job (the next large op of a chain follows at once), then
 * park: an idle process stays idle.
 *
 * A job is published in one 64-bit word: generation (24 bits), seats left
 * for helpers (8), number of chunks (16), next chunk to claim (16). A helper
 * takes a seat, then claims chunks, each with a CAS that checks the
 * generation, so it never takes a chunk of a job it did not read, and the
 * job's fields cannot change before every chunk is done.
 *
 * Locks: a pool's owner lock is held while its job runs (the loop bodies
 * take no lock of ours); making a pool takes the runtime's extension lock
 * (ev__vm_ext_install), a leaf. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensor/tensor-impl.h"

#define MAX_HELPERS 15
#define MAX_CHUNKS 0xffff
#define HELPER_SPIN_NS 50000

typedef void (*range_fn)(int64_t lo, int64_t hi, void *ctx);

/* --------------------------------------------------------------- the word */

#define GEN_SHIFT 40
#define GEN_MASK 0xffffffu
#define SEAT_SHIFT 32
#define SEAT_ONE ((uint64_t)1 << SEAT_SHIFT)
/* Parked helpers wait while the futex word is their last generation; no
 * generation (24 bits) equals this, so stopping wakes every one. */
#define WAKE_STOP UINT32_MAX

static uint32_t work_gen(uint64_t w)
{
    return (uint32_t)(w >> GEN_SHIFT) & GEN_MASK;
}

static uint32_t work_seats(uint64_t w)
{
    return (uint32_t)(w >> SEAT_SHIFT) & 0xffu;
}

static uint32_t work_chunks(uint64_t w)
{
    return (uint32_t)(w >> 16) & 0xffffu;
}

static uint32_t work_next(uint64_t w)
{
    return (uint32_t)w & 0xffffu;
}

/* --------------------------------------------------------------- the pool */

typedef struct pool pool;

typedef struct helper {
    pool *pool;
    pthread_t thread;
    _Atomic int cpu; /* where it last ran, -1 unknown; a hint */
    int index;
} helper;

struct pool {
    /* Written by every job's owner and read by every helper. */
    _Alignas(64) _Atomic uint64_t work; /* gen << 40 | seats << 32 | n_chunks << 16 | next */
    _Atomic uint32_t done;     /* chunks finished in the current job */
    _Atomic uint32_t wake_gen; /* futex word: the generation parked helpers wait past */
    _Atomic uint32_t n_parked;
    _Atomic bool stop;         /* set by the destroy; helpers exit */
    /* The job; written by its owner before it is published. */
    range_fn fn;
    void *ctx;
    int64_t n, chunk;
    /* The owner's side. */
    _Alignas(64) pthread_mutex_t owner; /* held by the kernel whose job runs */
    uint32_t gen;              /* guarded by owner */
    pid_t pid;                 /* the process whose threads the helpers are */
    int started;               /* helpers running; fixed once installed */
    helper helpers[MAX_HELPERS];
};

/* ------------------------------------------------------------- the budget */

static struct {
    /* Changed by every large op as it starts and ends. All relaxed: the
     * counts are advisory (a stale one only shifts a grant by a thread),
     * and no memory is published through them. */
    _Alignas(64) _Atomic int running;  /* large ops in flight */
    _Atomic int granted;               /* threads they hold */
    /* Statistics, updated once per large op. */
    _Alignas(64) _Atomic uint64_t n_ops, n_shared;
    _Atomic int last_grant, max_grant, max_shared_grant, peak_granted;
    _Atomic int helpers; /* of every live pool */
    _Atomic int total;   /* T; 0 until first read */
} budget;

static int read_total(void)
{
    const char *env = getenv("EAGERVM_INTRAOP_THREADS");
    long total = 0;
    if (env && *env) {
        char *end;
        total = strtol(env, &end, 10);
        if (*end || total < 1) {
            fprintf(stderr, "eagervm: EAGERVM_INTRAOP_THREADS=%s is not a positive integer; "
                    "using the number of CPUs\n", env);
            total = 0;
        }
    }
    if (total == 0) {
        cpu_set_t set;
        total = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    return total > MAX_HELPERS + 1 ? MAX_HELPERS + 1 : (int)total;
}

int ev__intraop_threads(void)
{
    /* Relaxed: the value is computed the same by any thread that races to
     * read the environment first (only the warning may print twice). */
    int t = atomic_load_explicit(&budget.total, memory_order_relaxed);
    if (t == 0) {
        t = read_total();
        atomic_store_explicit(&budget.total, t, memory_order_relaxed);
    }
    return t;
}

static void raise_max(_Atomic int *m, int v)
{
    /* Relaxed: a statistic; only its own value matters. */
    int cur = atomic_load_explicit(m, memory_order_relaxed);
    while (cur < v &&
           !atomic_compare_exchange_weak_explicit(m, &cur, v, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* ev__parallel_enter for a large op running on a thread of vm, host: the
 * issuing thread (not a worker), which counts as busy beside vm's workers. */
static int parallel_enter_on(ev_vm *vm, bool host)
{
    int total = ev__intraop_threads();
    /* Relaxed (all the budget's atomics): see the struct. */
    int running = atomic_fetch_add_explicit(&budget.running, 1, memory_order_relaxed) + 1;
    int busy = vm ? ev__vm_busy_workers(vm) + host : 1;
    busy = busy > running ? busy : running;
    int share = total / busy;
    share = share < 1 ? 1 : share;
    int held = atomic_load_explicit(&budget.granted, memory_order_relaxed), grant;
    do {
        int left = total - held;
        grant = share < left ? share : left;
        grant = grant < 1 ? 1 : grant;
    } while (!atomic_compare_exchange_weak_explicit(&budget.granted, &held, held + grant,
                                                    memory_order_relaxed, memory_order_relaxed));
    atomic_fetch_add_explicit(&budget.n_ops, 1, memory_order_relaxed);
    atomic_store_explicit(&budget.last_grant, grant, memory_order_relaxed);
    raise_max(&budget.max_grant, grant);
    raise_max(&budget.peak_granted, held + grant);
    if (busy > 1) {
        atomic_fetch_add_explicit(&budget.n_shared, 1, memory_order_relaxed);
        raise_max(&budget.max_shared_grant, grant);
    }
    return grant;
}

int ev__parallel_enter(void)
{
    return parallel_enter_on(ev__current_vm(), false);
}

/* Gives back part of a grant the op cannot use (its pool was busy). */
static void regrant(int *grant, int now)
{
    /* Relaxed: an advisory count (see the budget struct). */
    atomic_fetch_sub_explicit(&budget.granted, *grant - now, memory_order_relaxed);
    *grant = now;
}

void ev__parallel_leave(int grant)
{
    /* Relaxed: advisory counts (see the budget struct). */
    atomic_fetch_sub_explicit(&budget.granted, grant, memory_order_relaxed);
    atomic_fetch_sub_explicit(&budget.running, 1, memory_order_relaxed);
}

int ev_intraop_get_stats(ev_intraop_stats *out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "ev_intraop_get_stats: out is NULL");
    }
    memset(out, 0, sizeof *out);
    /* Relaxed: a snapshot of counters; each value is its own. */
    out->threads = ev__intraop_threads();
    out->helpers = atomic_load_explicit(&budget.helpers, memory_order_relaxed);
    out->running = atomic_load_explicit(&budget.running, memory_order_relaxed);
    out->granted = atomic_load_explicit(&budget.granted, memory_order_relaxed);
    out->peak_granted = atomic_load_explicit(&budget.peak_granted, memory_order_relaxed);
    out->last_grant = atomic_load_explicit(&budget.last_grant, memory_order_relaxed);
    out->max_grant = atomic_load_explicit(&budget.max_grant, memory_order_relaxed);
    out->max_shared_grant = atomic_load_explicit(&budget.max_shared_grant, memory_order_relaxed);
    out->large_ops = atomic_load_explicit(&budget.n_ops, memory_order_relaxed);
    out->shared_ops = atomic_load_explicit(&budget.n_shared, memory_order_relaxed);
    return 0;
}

void ev_intraop_reset_peak(void)
{
    /* Relaxed: statistics (an op racing with the reset may count in the
     * old or the new period). */
    atomic_store_explicit(&budget.peak_granted,
                          atomic_load_explicit(&budget.granted, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&budget.max_grant, 0, memory_order_relaxed);
    atomic_store_explicit(&budget.max_shared_grant, 0, memory_order_relaxed);
}

/* ----------------------------------------------------------------- a job */

/* Claims the next chunk of job gen; false when it has none left (or a later
 * job replaced it). */
static bool claim(pool *p, uint32_t gen, int64_t *idx)
{
    /* Relaxed: this value only picks the CAS's expected word. */
    uint64_t w = atomic_load_explicit(&p->work, memory_order_relaxed);
    for (;;) {
        uint32_t next = work_next(w);
        if (work_gen(w) != gen || next >= work_chunks(w)) {
            return false;
        }
        /* acquire on success: the job's fields, written before the owner's
         * release store of this word, are read next (the other claims'
         * RMWs continue that release sequence). Relaxed on failure: we
         * retry or give up, reading nothing. */
        if (atomic_compare_exchange_weak_explicit(&p->work, &w, w + 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
            *idx = next;
            return true;
        }
    }
}

static void run_chunks(pool *p, uint32_t gen)
{
    int64_t idx;
    while (claim(p, gen, &idx)) {
        int64_t lo = idx * p->chunk;
        int64_t hi = lo + p->chunk < p->n ? lo + p->chunk : p->n;
        p->fn(lo, hi, p->ctx);
        /* release: the owner that reads the count with acquire sees the
         * chunk's writes. */
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

/* Takes a seat in job gen if it has one and chunks left. */
static bool take_seat(pool *p, uint32_t gen)
{
    /* Relaxed: only the CAS's expected word; the claims acquire. */
    uint64_t w = atomic_load_explicit(&p->work, memory_order_relaxed);
    while (work_gen(w) == gen && work_seats(w) > 0 && work_next(w) < work_chunks(w)) {
        /* Relaxed: the seat is a count; the job's fields are read only
         * after a claim, which acquires. */
        if (atomic_compare_exchange_weak_explicit(&p->work, &w, w - SEAT_ONE,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

static void *helper_main(void *arg)
{
    helper *h = arg;
    pool *p = h->pool;
    char name[16];
    snprintf(name, sizeof name, "ev-intraop-%u", (unsigned)(h->index + 1) % 100u);
    pthread_setname_np(pthread_self(), name);
    /* Relaxed: only the generation to wait past. */
    uint32_t seen = work_gen(atomic_load_explicit(&p->work, memory_order_relaxed));
    for (;;) {
        int64_t spin_until = ev__now_ns() + HELPER_SPIN_NS;
        uint32_t gen;
        /* Relaxed: a placement hint (avoid_my_cpu). */
        atomic_store_explicit(&h->cpu, sched_getcpu(), memory_order_relaxed);
        /* Relaxed (the loop's loads): a new generation is acted on through
         * take_seat and claim, which check it again; stop publishes
         * nothing (the join orders what follows). */
        while ((gen = work_gen(atomic_load_explicit(&p->work, memory_order_relaxed))) == seen) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) {
                return NULL;
            }
            if (ev__now_ns() > spin_until) {
                /* seq_cst (the add and the loads): Dekker with the owner's
                 * seq_cst store of the word and load of n_parked: either it
                 * sees us parked and wakes us, or we see its new generation
                 * here. The same with the destroy's stop. */
                atomic_fetch_add_explicit(&p->n_parked, 1, memory_order_seq_cst);
                if (work_gen(atomic_load_explicit(&p->work, memory_order_seq_cst)) == seen &&
                    !atomic_load_explicit(&p->stop, memory_order_seq_cst)) {
                    ev__park(&p->wake_gen, seen, -1);
                }
                /* Relaxed: a stale count costs the owner one needless wake. */
                atomic_fetch_sub_explicit(&p->n_parked, 1, memory_order_relaxed);
                spin_until = ev__now_ns() + HELPER_SPIN_NS;
            } else {
                sched_yield(); /* a worker or the issuing thread may want this core */
            }
        }
        if (take_seat(p, gen)) {
            run_chunks(p, gen);
        }
        seen = gen;
    }
}

/* Stops and joins the helpers, then frees the pool. In a fork child the
 * helpers are the parent's and do not exist here: nothing to join. */
static void pool_destroy(void *arg)
{
    pool *p = arg;
    if (p->pid == getpid()) {
        /* seq_cst: the other side of the helpers' Dekker (see helper_main). */
        atomic_store_explicit(&p->stop, true, memory_order_seq_cst);
        atomic_store_explicit(&p->wake_gen, WAKE_STOP, memory_order_seq_cst);
        ev__wake_all(&p->wake_gen);
        for (int i = 0; i < p->started; i++) {
            pthread_join(p->helpers[i].thread, NULL);
        }
        /* Relaxed: a statistic. */
        atomic_fetch_sub_explicit(&budget.helpers, p->started, memory_order_relaxed);
    }
    pthread_mutex_destroy(&p->owner);
    ev__free(p);
}

/* vm's pool, made with its helpers when first needed; NULL if no memory. */
static pool *pool_of(ev_vm *vm)
{
    pool *p = ev__vm_ext(vm, EV__EXT_INTRAOP);
    if (p) {
        return p;
    }
    p = ev__aligned_malloc(64, sizeof *p);
    if (!p) {
        return NULL;
    }
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->owner, NULL);
    p->pid = getpid();
    int wanted = ev__intraop_threads() - 1;
    for (int i = 0; i < wanted; i++) {
        helper *h = &p->helpers[p->started];
        h->pool = p;
        h->index = p->started;
        /* Relaxed: before the thread exists; pthread_create orders it. */
        atomic_store_explicit(&h->cpu, -1, memory_order_relaxed);
        /* Fewer helpers than wanted (thread limits) is still correct. */
        if (pthread_create(&h->thread, NULL, helper_main, h) == 0) {
            p->started++;
        }
    }
    /* Relaxed: a statistic. */
    atomic_fetch_add_explicit(&budget.helpers, p->started, memory_order_relaxed);
    pool *have = ev__vm_ext_install(vm, EV__EXT_INTRAOP, p, pool_destroy);
    if (have != p) {
        pool_destroy(p); /* another worker of vm made one first */
    }
    return have;
}

/* A helper that last ran on the caller's CPU is queued behind it (the
 * scheduler put it there when the caller woke it, as the other cores looked
 * busy): it would only start once the caller's loop is over. Move it off. */
static void avoid_my_cpu(pool *p, int helpers)
{
    int me = sched_getcpu();
    for (int i = 0; i < helpers && me >= 0; i++) {
        /* Relaxed: a hint; a stale one costs a needless or missed move. */
        if (atomic_load_explicit(&p->helpers[i].cpu, memory_order_relaxed) != me) {
            continue;
        }
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) != 0) {
            return;
        }
        CPU_CLR(me, &set);
        if (CPU_COUNT(&set) > 0) {
            pthread_setaffinity_np(p->helpers[i].thread, sizeof set, &set);
        }
        /* Relaxed: the hint again (the helper stores its CPU itself). */
        atomic_store_explicit(&p->helpers[i].cpu, -1, memory_order_relaxed);
    }
}

/* Runs [0, n) as one job of p with `helpers` seats; the caller owns p. */
static void run_job(pool *p, int helpers, int64_t n, int64_t grain, range_fn fn, void *ctx)
{
    /* A few chunks per thread, so that a late helper costs only its share;
     * chunks of elements are multiples of 64, so they share no cache line
     * of any operand. A job of few items (rows, blocks: under 64 per chunk)
     * is not rounded, or it would become one chunk and run alone. */
    int64_t n_chunks = 4 * (int64_t)(helpers + 1);
    int64_t chunk = (n + n_chunks - 1) / n_chunks;
    chunk = chunk < grain ? grain : chunk;
    chunk = chunk > 64 ? (chunk + 63) / 64 * 64 : chunk;
    n_chunks = (n + chunk - 1) / chunk;
    EV_ASSERT(n_chunks <= MAX_CHUNKS);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    /* Relaxed: ordered before the helpers' increments by the release store
     * of the word below, which they acquire before any claim. */
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t gen = ++p->gen & GEN_MASK;
    /* seq_cst: a release that publishes the job's fields, and the store
     * half of the Dekker with parking helpers (see helper_main). */
    atomic_store_explicit(&p->work,
                          (uint64_t)gen << GEN_SHIFT | (uint64_t)helpers << SEAT_SHIFT |
                              (uint64_t)n_chunks << 16,
                          memory_order_seq_cst);
    /* seq_cst: stored before n_parked is read, so a helper that parks after
     * our read finds the futex word changed. */
    atomic_store_explicit(&p->wake_gen, gen, memory_order_seq_cst);
    if (atomic_load_explicit(&p->n_parked, memory_order_seq_cst) > 0) {
        ev__wake_all(&p->wake_gen);
    }
    avoid_my_cpu(p, helpers);
    run_chunks(p, gen);
    /* The last chunks run on helpers: they are short, so spin for them.
     * acquire: pairs with each chunk's release, so its writes are seen. */
    for (uint32_t spins = 0;
         atomic_load_explicit(&p->done, memory_order_acquire) < (uint32_t)n_chunks; spins++) {
        if (spins < 1000) {
            ev__cpu_relax();
        } else {
            sched_yield();
        }
    }
}

static void parallel_for_on(ev_vm *vm, bool host, int64_t n, int64_t grain, range_fn fn,
                            void *ctx)
{
    if (!vm || n < 2 * grain) {
        fn(0, n, ctx); /* small, or no runtime: no pool to use */
        return;
    }
    int grant = parallel_enter_on(vm, host);
    pool *p = grant > 1 ? pool_of(vm) : NULL;
    int helpers = p ? (p->started < grant - 1 ? p->started : grant - 1) : 0;
    if (helpers == 0 || pthread_mutex_trylock(&p->owner) != 0) {
        regrant(&grant, 1);
        fn(0, n, ctx);
    } else {
        regrant(&grant, helpers + 1);
        run_job(p, helpers, n, grain, fn, ctx);
        pthread_mutex_unlock(&p->owner);
    }
    ev__parallel_leave(grant);
}

void ev__parallel_for(int64_t n, int64_t grain, range_fn fn, void *ctx)
{
    parallel_for_on(ev__current_vm(), false, n, grain, fn, ctx);
}

void ev__parallel_for_caller(ev_vm *vm, int64_t n, int64_t grain, range_fn fn, void *ctx)
{
    if (ev__on_worker_thread()) {
        ev__parallel_for(n, grain, fn, ctx);
    } else {
        parallel_for_on(vm, true, n, grain, fn, ctx);
    }
}

/* fork() keeps only the calling thread: the large ops of the parent's other
 * threads are not running in the child, so its budget starts empty. The
 * parent's pools stay with the parent's runtimes, which the child does not
 * use (it makes a runtime, and so a pool, of its own). */
static void fork_child(void)
{
    /* Relaxed: the child has one thread. */
    atomic_store_explicit(&budget.running, 0, memory_order_relaxed);
    atomic_store_explicit(&budget.granted, 0, memory_order_relaxed);
    atomic_store_explicit(&budget.helpers, 0, memory_order_relaxed);
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}
