/* Intra-op parallelism: one kernel's loop split over the calling worker and
 * a few helper threads, for ops large enough that the split pays for the
 * hand-off (a memory-bound add over 1M floats runs ~1.8x faster on 2 cores).
 *
 * One process-wide pool, like OpenBLAS's: a kernel that finds it busy (a
 * kernel on another worker holds it) runs its loop alone, so threads never
 * multiply past the cores. The caller takes chunks too, and chunks are
 * claimed one at a time, so a helper that is slow to wake costs nothing but
 * its share. Helpers spin briefly after a job (the next large op of a chain
 * follows at once), then park: an idle process stays idle.
 *
 * A job is published in one 64-bit word: generation (32 bits), number of
 * chunks (16), next chunk to claim (16). A helper claims with a CAS that
 * checks the generation, so it never takes a chunk of a job it did not
 * read, and the job's fields cannot change before every chunk is done. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/tensor-impl.h"

#define MAX_HELPERS 15
#define MAX_CHUNKS 0xffff
#define HELPER_SPIN_NS 50000

typedef void (*range_fn)(int64_t lo, int64_t hi, void *ctx);

static struct {
    pthread_mutex_t owner;   /* held by the kernel whose job runs */
    pthread_mutex_t start_lock;
    _Atomic int started;     /* helpers running; -1 until first needed */
    _Atomic uint64_t work;   /* gen << 32 | n_chunks << 16 | next */
    _Atomic uint32_t done;   /* chunks finished in the current job */
    _Atomic uint32_t wake_gen; /* futex word: the generation parked helpers wait past */
    _Atomic uint32_t n_parked;
    pthread_t helpers[MAX_HELPERS]; /* [0, started) */
    _Atomic int helper_cpu[MAX_HELPERS]; /* where each last ran, -1 unknown */
    uint32_t gen;            /* guarded by owner */
    /* The job; written by its owner before it is published. */
    range_fn fn;
    void *ctx;
    int64_t n, chunk;
} pool = {
    .owner = PTHREAD_MUTEX_INITIALIZER,
    .start_lock = PTHREAD_MUTEX_INITIALIZER,
    .started = -1,
};

static uint32_t work_gen(uint64_t w)
{
    return (uint32_t)(w >> 32);
}

/* Claims the next chunk of job gen; false when it has none left (or a later
 * job replaced it). */
static bool claim(uint32_t gen, int64_t *idx)
{
    uint64_t w = atomic_load_explicit(&pool.work, memory_order_acquire);
    for (;;) {
        uint32_t n_chunks = (uint32_t)(w >> 16) & 0xffff, next = (uint32_t)w & 0xffff;
        if (work_gen(w) != gen || next >= n_chunks) {
            return false;
        }
        if (atomic_compare_exchange_weak_explicit(&pool.work, &w, w + 1, memory_order_acquire,
                                                  memory_order_acquire)) {
            *idx = next;
            return true;
        }
    }
}

static void run_chunks(uint32_t gen)
{
    int64_t idx;
    while (claim(gen, &idx)) {
        int64_t lo = idx * pool.chunk;
        int64_t hi = lo + pool.chunk < pool.n ? lo + pool.chunk : pool.n;
        pool.fn(lo, hi, pool.ctx);
        /* release: the owner that sees the count sees the chunk's writes. */
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
    }
}

static void *helper_main(void *arg)
{
    int self = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof name, "ev-intraop-%u", (unsigned)(self + 1) % 100u);
    pthread_setname_np(pthread_self(), name);
    uint32_t seen = work_gen(atomic_load_explicit(&pool.work, memory_order_acquire));
    for (;;) {
        int64_t spin_until = ev__now_ns() + HELPER_SPIN_NS;
        uint32_t gen;
        atomic_store_explicit(&pool.helper_cpu[self], sched_getcpu(), memory_order_relaxed);
        while ((gen = work_gen(atomic_load_explicit(&pool.work, memory_order_acquire))) == seen) {
            if (ev__now_ns() > spin_until) {
                /* Dekker with the owner: either it sees us parked and wakes
                 * us, or we see its new generation here. */
                atomic_fetch_add(&pool.n_parked, 1);
                if (work_gen(atomic_load(&pool.work)) == seen) {
                    ev__park(&pool.wake_gen, seen, -1);
                }
                atomic_fetch_sub(&pool.n_parked, 1);
                spin_until = ev__now_ns() + HELPER_SPIN_NS;
            } else {
                sched_yield(); /* a worker or the issuing thread may want this core */
            }
        }
        run_chunks(gen);
        seen = gen;
    }
    return NULL;
}

static int configured_helpers(void)
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
    return total - 1 > MAX_HELPERS ? MAX_HELPERS : (int)total - 1;
}

int ev__intraop_threads(void)
{
    return 1 + configured_helpers();
}

/* Starts the helpers once; returns how many run. */
static int ensure_helpers(void)
{
    int started = atomic_load_explicit(&pool.started, memory_order_acquire);
    if (started >= 0) {
        return started;
    }
    pthread_mutex_lock(&pool.start_lock);
    started = atomic_load_explicit(&pool.started, memory_order_relaxed);
    if (started < 0) {
        int wanted = configured_helpers();
        started = 0;
        for (int i = 0; i < wanted; i++) {
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            /* Fewer helpers than wanted (thread limits) is still correct. */
            atomic_store(&pool.helper_cpu[started], -1);
            if (pthread_create(&pool.helpers[started], &attr, helper_main,
                               (void *)(intptr_t)started) == 0) {
                started++;
            }
            pthread_attr_destroy(&attr);
        }
        atomic_store_explicit(&pool.started, started, memory_order_release);
    }
    pthread_mutex_unlock(&pool.start_lock);
    return started;
}

/* A helper that last ran on the caller's CPU is queued behind it (the
 * scheduler put it there when the caller woke it, as the other cores looked
 * busy): it would only start once the caller's loop is over. Move it off. */
static void avoid_my_cpu(int helpers)
{
    int me = sched_getcpu();
    for (int i = 0; i < helpers && me >= 0; i++) {
        if (atomic_load_explicit(&pool.helper_cpu[i], memory_order_relaxed) != me) {
            continue;
        }
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) != 0) {
            return;
        }
        CPU_CLR(me, &set);
        if (CPU_COUNT(&set) > 0) {
            pthread_setaffinity_np(pool.helpers[i], sizeof set, &set);
        }
        atomic_store_explicit(&pool.helper_cpu[i], -1, memory_order_relaxed);
    }
}

void ev__parallel_for(int64_t n, int64_t grain, range_fn fn, void *ctx)
{
    int helpers = n >= 2 * grain ? ensure_helpers() : 0;
    if (helpers == 0 || pthread_mutex_trylock(&pool.owner) != 0) {
        fn(0, n, ctx);
        return;
    }
    /* A few chunks per thread, so that a late helper costs only its share;
     * chunk sizes are multiples of 64 elements, so chunks share no cache
     * line of any operand. */
    int64_t n_chunks = 4 * (int64_t)(helpers + 1);
    int64_t chunk = (n + n_chunks - 1) / n_chunks;
    chunk = chunk < grain ? grain : chunk;
    chunk = (chunk + 63) / 64 * 64;
    n_chunks = (n + chunk - 1) / chunk;
    EV_ASSERT(n_chunks <= MAX_CHUNKS);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = chunk;
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    uint32_t gen = ++pool.gen;
    atomic_store(&pool.work, (uint64_t)gen << 32 | (uint64_t)n_chunks << 16);
    atomic_store(&pool.wake_gen, gen);
    if (atomic_load(&pool.n_parked) > 0) {
        ev__wake_all(&pool.wake_gen);
    }
    avoid_my_cpu(helpers);
    run_chunks(gen);
    /* The last chunks run on helpers: they are short, so spin for them. */
    for (uint32_t spins = 0;
         atomic_load_explicit(&pool.done, memory_order_acquire) < (uint32_t)n_chunks; spins++) {
        if (spins < 1000) {
            ev__cpu_relax();
        } else {
            sched_yield();
        }
    }
    pthread_mutex_unlock(&pool.owner);
}

/* fork() keeps only the calling thread: the child starts with no helpers and
 * a free pool (a job the parent ran belongs to threads the child lacks). */
static void fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pool.owner = fresh;
    pool.start_lock = fresh;
    atomic_store(&pool.started, -1);
    atomic_store(&pool.n_parked, 0);
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}
