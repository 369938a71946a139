/* This machine's memory bandwidth as plain C loops reach it (a STREAM-like
 * benchmark): read (a sum), copy (b = a) and triad (a = b + s c) over float32
 * arrays, split over T threads, best of R repeats. bench/ops.py runs it
 * beside the peers, at the sizes of its cases, so that the memory-bound
 * cases can say what fraction of the limit they reach.
 *
 *     bench_stream [N elements = 1048576] [threads = cores] [repeats = 50]
 *
 * Prints one line of JSON: {"n":..., "threads":..., "read_gbs":...,
 * "copy_gbs":..., "triad_gbs":...}. Bytes counted are the bytes each kernel
 * must move: read 4N, copy 8N, triad 12N (write-allocate traffic not
 * counted, as in STREAM). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { K_READ, K_COPY, K_TRIAD, K_COUNT };

typedef struct shared {
    float *a, *b, *c;
    int64_t n;
    int threads;
    int kernel;
    /* Spinning barriers: a repeat lasts tens of microseconds, and waking
     * a thread from a futex would be part of what is timed. */
    _Atomic unsigned start_gen, done_count;
    double sums[64];
} shared;

typedef struct slot {
    shared *sh;
    int id;
} slot;

/* The same flags and clones as the kernels (src/ops/ops-impl.h), so the
 * limit is what our own loops could reach. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* Sixteen partial sums, so the loop vectorizes without reassociating. */
CLONES static float read_loop(const float *restrict a, int64_t n)
{
    float s[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j++) {
            s[j] += a[i + j];
        }
    }
    for (; i < n; i++) {
        s[0] += a[i];
    }
    float t = 0;
    for (int j = 0; j < 16; j++) {
        t += s[j];
    }
    return t;
}

CLONES static void copy_loop(float *restrict b, const float *restrict a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        b[i] = a[i];
    }
}

CLONES static void triad_loop(float *restrict a, const float *restrict b,
                              const float *restrict c, float s, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        a[i] = b[i] + s * c[i];
    }
}

static void run_slice(shared *sh, int id)
{
    int64_t per = (sh->n + sh->threads - 1) / sh->threads;
    int64_t lo = id * per, hi = lo + per < sh->n ? lo + per : sh->n;
    if (lo >= hi) {
        return;
    }
    switch (sh->kernel) {
    case K_READ:
        sh->sums[id] += read_loop(sh->a + lo, hi - lo);
        break;
    case K_COPY:
        copy_loop(sh->b + lo, sh->a + lo, hi - lo);
        break;
    default:
        triad_loop(sh->a + lo, sh->b + lo, sh->c + lo, 3.0f, hi - lo);
    }
}

static void *thread_main(void *p)
{
    slot *sl = p;
    shared *sh = sl->sh;
    unsigned seen = 0;
    for (;;) {
        /* acquire: the kernel field written before the release below. */
        while (atomic_load_explicit(&sh->start_gen, memory_order_acquire) == seen) {
        }
        seen++;
        if (sh->kernel < 0) {
            return NULL;
        }
        run_slice(sh, sl->id);
        /* release: the slice's writes happen before the caller's timing ends. */
        atomic_fetch_add_explicit(&sh->done_count, 1, memory_order_release);
    }
}

static void start_all(shared *sh)
{
    atomic_store_explicit(&sh->done_count, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&sh->start_gen, 1, memory_order_release);
}

static void wait_all(shared *sh)
{
    while (atomic_load_explicit(&sh->done_count, memory_order_acquire) <
           (unsigned)sh->threads - 1) {
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Thread 0 is the caller, so one thread costs no hand-off. */
static double best_seconds(shared *sh, int kernel, int repeats)
{
    double best = 1e30;
    sh->kernel = kernel;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_s();
        start_all(sh);
        run_slice(sh, 0);
        wait_all(sh);
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    return best;
}

static long parse(const char *s, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "bench_stream: %s must be an integer in [%ld, %ld], got '%s'\n", what,
                lo, hi, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t n = argc > 1 ? parse(argv[1], "N", 1024, 1L << 31) : 1 << 20;
    int threads = argc > 2 ? (int)parse(argv[2], "threads", 1, 64) : (int)(cores > 0 ? cores : 1);
    int repeats = argc > 3 ? (int)parse(argv[3], "repeats", 1, 100000) : 50;
    shared sh = {.n = n, .threads = threads};
    size_t bytes = (size_t)n * sizeof(float);
    sh.a = aligned_alloc(64, (bytes + 63) / 64 * 64);
    sh.b = aligned_alloc(64, (bytes + 63) / 64 * 64);
    sh.c = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!sh.a || !sh.b || !sh.c) {
        fprintf(stderr, "bench_stream: out of memory for 3 x %zu bytes\n", bytes);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) { /* touch every page before timing */
        sh.a[i] = 1.0f;
        sh.b[i] = 2.0f;
        sh.c[i] = 0.5f;
    }
    pthread_t tids[64];
    slot slots[64];
    for (int t = 1; t < threads; t++) {
        slots[t] = (slot){&sh, t};
        if (pthread_create(&tids[t], NULL, thread_main, &slots[t]) != 0) {
            fprintf(stderr, "bench_stream: cannot start thread %d\n", t);
            return 1;
        }
    }
    double t_read = best_seconds(&sh, K_READ, repeats);
    double t_copy = best_seconds(&sh, K_COPY, repeats);
    double t_triad = best_seconds(&sh, K_TRIAD, repeats);
    sh.kernel = -1;
    start_all(&sh);
    for (int t = 1; t < threads; t++) {
        pthread_join(tids[t], NULL);
    }
    double checksum = 0;
    for (int t = 0; t < threads; t++) {
        checksum += sh.sums[t];
    }
    printf("{\"n\": %lld, \"threads\": %d, \"read_gbs\": %.2f, \"copy_gbs\": %.2f, "
           "\"triad_gbs\": %.2f, \"checksum\": %.1f}\n",
           (long long)n, threads, 4.0 * n / t_read / 1e9, 8.0 * n / t_copy / 1e9,
           12.0 * n / t_triad / 1e9, checksum);
    free(sh.a);
    free(sh.b);
    free(sh.c);
    return 0;
}
