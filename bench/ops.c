/* bench_ops: eagervm's ops end to end (issue the op, then wait for its
 * output) against their peers on the same memory in the same run: a plain
 * single-threaded C loop for elementwise add and sum, and OpenBLAS's
 * cblas_sgemm called directly with its default threads for matmul. Prints
 * medians of several repeats and the ratio ours / peer (higher is better). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime, sysconf under -std=c11 */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eagervm/ops.h"

#ifdef EV_HAVE_BLAS
#include <cblas.h>
#endif

#define DIE_IF(cond, what)                                                            \
    do {                                                                              \
        if (cond) {                                                                   \
            fprintf(stderr, "bench_ops: %s failed: %s\n", what, ev_last_message());   \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static ev_vm *vm;
static ev_exec ex;

static void wait_for(ev_tensor *t)
{
    DIE_IF(ev_wait_obj(vm, ev_tensor_obj(t), NULL) != 0, "wait");
}

static ev_tensor *ramp(int ndim, const int64_t *shape, int64_t n)
{
    float *h = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        h[i] = (float)(i % 1000) * 1e-3f;
    }
    ev_tensor *t;
    DIE_IF(ev_from_host(&ex, EV_FLOAT32, ndim, shape, h, &t) != 0, "from_host");
    free(h);
    return t;
}

/* The peers: plain loops, kept out of line so that the compiler cannot fold
 * them across repeats; restrict lets GCC vectorize the add as ours is. */
__attribute__((noinline)) static void plain_add(float *restrict c, const float *restrict a,
                                                const float *restrict b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        c[i] = a[i] + b[i];
    }
}

__attribute__((noinline)) static float plain_sum(const float *x, int64_t n)
{
    float s = 0;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
    }
    return s;
}

static volatile float sink;

static void report(const char *what, const char *unit, double ours, double peer,
                   const char *peer_name)
{
    printf("%-34s ours %8.2f %s   %-22s %8.2f %s   ratio %.3f\n", what, ours, unit, peer_name,
           peer, unit, ours / peer);
}

static void bench_add(void)
{
    enum { REPS = 41 };
    const int64_t n = 1000000;
    ev_tensor *a = ramp(1, &n, n), *b = ramp(1, &n, n), *c0;
    DIE_IF(ev_add(&ex, a, b, &c0) != 0, "add");
    wait_for(c0);
    double t_ours[REPS], t_plain[REPS];
    for (int r = 0; r < REPS; r++) {
        ev_tensor *c;
        double t0 = now();
        DIE_IF(ev_add(&ex, a, b, &c) != 0, "add");
        wait_for(c);
        t_ours[r] = now() - t0;
        ev_tensor_unref(c);
        /* Same inputs, the first output's memory. */
        t0 = now();
        plain_add(ev_tensor_data(c0), ev_tensor_data(a), ev_tensor_data(b), n);
        t_plain[r] = now() - t0;
    }
    double bytes = 3.0 * 4 * (double)n;
    report("add 1e6 float32 (GB/s)", "GB/s", bytes / median(t_ours, REPS) * 1e-9,
           bytes / median(t_plain, REPS) * 1e-9, "plain C loop");
    ev_tensor_unref(c0);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

static void bench_sum(void)
{
    enum { REPS = 15 };
    const int64_t n = 10000000;
    ev_tensor *x = ramp(1, &n, n);
    double t_ours[REPS], t_plain[REPS];
    for (int r = 0; r < REPS; r++) {
        ev_tensor *s;
        double t0 = now();
        DIE_IF(ev_sum(&ex, x, 0, NULL, 0, &s) != 0, "sum");
        wait_for(s);
        t_ours[r] = now() - t0;
        ev_tensor_unref(s);
        t0 = now();
        sink = plain_sum(ev_tensor_data(x), n);
        t_plain[r] = now() - t0;
    }
    double bytes = 4.0 * (double)n;
    report("sum 1e7 float32 (GB/s)", "GB/s", bytes / median(t_ours, REPS) * 1e-9,
           bytes / median(t_plain, REPS) * 1e-9, "plain C loop");
    ev_tensor_unref(x);
}

static void bench_matmul(void)
{
    enum { REPS = 9 };
    const int64_t n = 1024;
    const int64_t shape[2] = {n, n};
    ev_tensor *a = ramp(2, shape, n * n), *b = ramp(2, shape, n * n), *c0;
    DIE_IF(ev_matmul(&ex, a, b, &c0) != 0, "matmul");
    wait_for(c0);
    double t_ours[REPS], t_blas[REPS];
    double flops = 2.0 * (double)n * (double)n * (double)n;
#ifdef EV_HAVE_BLAS
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    for (int r = 0; r < REPS; r++) {
        ev_tensor *c;
        double t0 = now();
        DIE_IF(ev_matmul(&ex, a, b, &c) != 0, "matmul");
        wait_for(c);
        t_ours[r] = now() - t0;
        ev_tensor_unref(c);
#ifdef EV_HAVE_BLAS
        /* OpenBLAS's default: every core (our policy may have set fewer). */
        openblas_set_num_threads((int)nc);
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)n,
                    (blasint)n, 1.0f, ev_tensor_data(a), (blasint)n, ev_tensor_data(b),
                    (blasint)n, 0.0f, ev_tensor_data(c0), (blasint)n);
        t_blas[r] = now() - t0;
#else
        t_blas[r] = t_ours[r];
#endif
    }
#ifdef EV_HAVE_BLAS
    report("matmul 1024 float32 (GFLOP/s)", "GFLOP/s", flops / median(t_ours, REPS) * 1e-9,
           flops / median(t_blas, REPS) * 1e-9, "cblas_sgemm direct");
#else
    printf("matmul 1024 float32: ours %.2f GFLOP/s (built without OpenBLAS: no peer)\n",
           flops / median(t_ours, REPS) * 1e-9);
#endif

    /* Busy workers: two workers each run matmuls at once. The thread policy
     * gives each BLAS call fewer threads, so the aggregate should stay near
     * the single-op figure rather than collapse from oversubscription. */
    uint32_t uid;
    if (ev_vm_thread_acquire(vm, &uid) == 0) {
        ev_exec ex2 = ex;
        ex2.thread_uid = uid;
        enum { K = 8 };
        double t_pair[3];
        for (int r = 0; r < 3; r++) {
            ev_tensor *c[K];
            double t0 = now();
            for (int i = 0; i < K; i++) {
                DIE_IF(ev_matmul(i % 2 ? &ex2 : &ex, a, b, &c[i]) != 0, "matmul");
            }
            for (int i = 0; i < K; i++) {
                wait_for(c[i]);
                ev_tensor_unref(c[i]);
            }
            t_pair[r] = now() - t0;
        }
        double ours2 = K * flops / median(t_pair, 3) * 1e-9;
        printf("%-34s ours %8.2f GFLOP/s aggregate (%d matmuls on 2 workers)\n",
               "matmul 1024 float32, 2 workers", ours2, K);
        ev_synchronize(vm, NULL);
        ev_vm_thread_release(vm, uid);
    }
    ev_tensor_unref(c0);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

int main(void)
{
    DIE_IF(ev_vm_create(NULL, &vm) != 0, "vm_create");
    static const ev_site site = {"bench/ops.c", "main", 0};
    ex.vm = vm;
    ex.thread_uid = 0;
    ex.site = &site;
    printf("bench_ops: %ld cores; medians; ratio = ours / peer (targets: add, sum >= 0.9; "
           "matmul >= 0.95)\n", sysconf(_SC_NPROCESSORS_ONLN));
    bench_add();
    bench_sum();
    bench_matmul();
    ev_synchronize(vm, NULL);
    ev_vm_destroy(vm);
    return 0;
}
