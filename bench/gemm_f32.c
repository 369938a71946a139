/* Our float32 gemm (src/ops/gemm_f32.c, built into this program) against
 * OpenBLAS's cblas_sgemm, both on one thread and on every CPU, in GFLOP/s
 * (medians of repeated calls), on the matmuls of the MLP training step
 * (bench/mlp_vs_torch.py, batch 128) and bench/ops.py's matmul sizes. Each
 * row is one C = A B with A m x k and B k x n, "N" a row-major operand and
 * "T" a transposed view, as eagervm's matmul hands them over; a Gram row
 * (x @ x.T) runs our gemm on the upper triangle against BLAS's ssyrk, and
 * its GFLOP/s count the whole product's 2 m n k.
 *
 *     build/bench/bench_gemm_f32 [--threads N] [--repeats R] [--only SUBSTRING]
 */
#define _GNU_SOURCE /* clock_gettime under -std=c11 */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops/gemm_f32.h"

typedef struct shape {
    const char *what;
    int64_t m, n, k;
    int ta, tb; /* operand stored transposed */
    int gram;   /* C = A A^T: our upper triangle against BLAS's ssyrk */
} shape;

static const shape SHAPES[] = {
    {"mlp fwd x@W1.T", 128, 256, 784, 0, 1, 0},
    {"mlp fwd h@W2.T", 128, 10, 256, 0, 1, 0},
    {"mlp bwd dW1 g1.T@x", 256, 784, 128, 1, 0, 0},
    {"mlp bwd dW2 g2.T@h", 10, 256, 128, 1, 0, 0},
    {"mlp bwd dh g2@W2", 128, 256, 10, 0, 0, 0},
    {"hand x@w1", 128, 256, 784, 0, 0, 0},
    {"hand x.T@dh", 784, 256, 128, 1, 0, 0},
    {"hand h.T@dl", 256, 10, 128, 1, 0, 0},
    {"hand dl@w2.T", 128, 256, 10, 0, 1, 0},
    {"ops 32^3", 32, 32, 32, 0, 0, 0},
    {"ops 1024^3", 1024, 1024, 1024, 0, 0, 0},
    {"ops gram 1024 x@x.T", 1024, 1024, 1024, 0, 1, 1},
    {"gram 256 x@x.T", 256, 256, 256, 0, 1, 1},
    {"512^3", 512, 512, 512, 0, 0, 0},
    {"256^3", 256, 256, 256, 0, 0, 0},
    {"64^3", 64, 64, 64, 0, 0, 0},
    {"128^3", 128, 128, 128, 0, 0, 0},
    /* Narrow and short products: where matmul.c hands over to BLAS. */
    {"narrow 256x1x256", 256, 1, 256, 0, 0, 0},
    {"narrow 256x2x256", 256, 2, 256, 0, 0, 0},
    {"narrow 256x4x256", 256, 4, 256, 0, 0, 0},
    {"narrow 256x8x256", 256, 8, 256, 0, 0, 0},
    {"short 1x256x256", 1, 256, 256, 0, 0, 0},
    {"short 2x256x256", 2, 256, 256, 0, 0, 0},
    {"short 4x256x256", 4, 256, 256, 0, 0, 0},
    {"short 8x256x256", 8, 256, 256, 0, 0, 0},
    {"short 1x4096x4096", 1, 4096, 4096, 0, 0, 0},
    {"short 1x4096x4096 T", 1, 4096, 4096, 0, 1, 0},
    {"narrow 4096x4x4096", 4096, 4, 4096, 0, 0, 0},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---------------------------------------------------------- our threads */

/* Our side's threads: started once and woken for each call by a barrier
 * (a futex wake, as eagervm's parked pool helpers pay), each running the
 * tasks t = i, i + threads, ... of the call's grid. */
static struct {
    pthread_barrier_t start, end;
    const ev__sgemm *g;
    ev__sgemm_grid grid;
    float **work;
    int threads, stop;
} team;

static void run_share(int i)
{
    for (int64_t t = i; t < team.grid.rows * team.grid.cols; t += team.threads) {
        ev__sgemm_task(team.g, &team.grid, t, team.work[i]);
    }
}

static void *team_main(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&team.start);
        if (team.stop) {
            return NULL;
        }
        run_share(i);
        pthread_barrier_wait(&team.end);
    }
}

static pthread_t team_threads[16];

static void team_start(int threads)
{
    team.threads = threads;
    team.stop = 0;
    pthread_barrier_init(&team.start, NULL, (unsigned)threads);
    pthread_barrier_init(&team.end, NULL, (unsigned)threads);
    for (int i = 1; i < threads; i++) {
        pthread_create(&team_threads[i], NULL, team_main, (void *)(intptr_t)i);
    }
}

static void team_stop(void)
{
    team.stop = 1;
    pthread_barrier_wait(&team.start);
    for (int i = 1; i < team.threads; i++) {
        pthread_join(team_threads[i], NULL);
    }
    pthread_barrier_destroy(&team.start);
    pthread_barrier_destroy(&team.end);
}

/* Our gemm on team.threads threads (the caller is one of them). */
static void ours(const ev__sgemm *g, float **work)
{
    if (team.threads <= 1) {
        ev__sgemm_run(g, work[0]);
        return;
    }
    /* As matmul.c cuts a product: tasks of at least 2^18 multiply-adds,
     * four per thread for a triangle. */
    int64_t tasks = (int64_t)team.threads * (g->upper ? 4 : 1);
    int64_t by_size = g->m * g->n * g->k >> 18;
    tasks = by_size < tasks ? (by_size > 1 ? by_size : 1) : tasks;
    if (tasks <= 1) {
        ev__sgemm_run(g, work[0]);
        return;
    }
    team.g = g;
    team.grid = ev__sgemm_grid_for(g, (int)tasks);
    team.work = work;
    pthread_barrier_wait(&team.start);
    run_share(0);
    pthread_barrier_wait(&team.end);
}

int main(int argc, char **argv)
{
    int max_threads = 2, repeats = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            max_threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) {
            repeats = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--repeats R] [--only SUBSTRING]\n", argv[0]);
            return 2;
        }
    }
    max_threads = max_threads < 1 ? 1 : max_threads > 16 ? 16 : max_threads;
    /* OpenBLAS's idle threads spin for ~2^28 cycles after each call, on the
     * cores our threads then need; OpenBLAS reads this when it loads, so
     * set it and start again. */
    if (!getenv("OPENBLAS_THREAD_TIMEOUT")) {
        setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe (set OPENBLAS_THREAD_TIMEOUT=4 yourself)");
    }
    if (!ev__sgemm_supported()) {
        printf("this CPU has no AVX-512: our kernel does not run here\n");
        return 0;
    }
    printf("%-22s %5s %5s %5s %2s %3s %9s %9s %6s\n", "case", "m", "n", "k", "op", "thr",
           "ours GF/s", "BLAS GF/s", "ratio");
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const shape *sh = &SHAPES[s];
        if (only && !strstr(sh->what, only)) {
            continue;
        }
        int64_t m = sh->m, n = sh->n, k = sh->k;
        float *a = malloc(sizeof(float) * (size_t)(m * k));
        float *b = sh->gram ? a : malloc(sizeof(float) * (size_t)(k * n));
        float *c = malloc(sizeof(float) * (size_t)(m * n));
        for (int64_t i = 0; i < m * k; i++) {
            a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        }
        for (int64_t i = 0; !sh->gram && i < k * n; i++) {
            b[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
        }
        /* Row-major A is m x k (lda k); transposed, it is stored k x m. */
        int64_t lda = sh->ta ? m : k, ldb = sh->tb ? k : n;
        ev__sgemm g = {
            .m = m, .n = n, .k = k, .a = a, .a_rs = sh->ta ? 1 : lda, .a_cs = sh->ta ? lda : 1,
            .b = b, .b_rs = sh->tb ? 1 : ldb, .b_cs = sh->tb ? ldb : 1, .c = c, .ldc = n,
            .beta = 0.0f, .upper = sh->gram,
        };
        float *work[16];
        for (int i = 0; i < max_threads; i++) {
            work[i] = aligned_alloc(64, (ev__sgemm_work_floats(&g, NULL) * sizeof(float) + 63) / 64 * 64);
        }
        double flops = 2.0 * (double)m * (double)n * (double)k;
        int reps = repeats > 0 ? repeats : flops > 1e9 ? 21 : 101;
        /* Calls per sample so that each sample is at least ~0.2 ms. */
        int inner = (int)(2e5 / (flops / 50.0 + 1.0)) + 1;
        for (int thr = 1; thr <= max_threads; thr *= 2) {
            double *t_ours = malloc(sizeof(double) * (size_t)reps);
            double *t_blas = malloc(sizeof(double) * (size_t)reps);
            openblas_set_num_threads(thr);
            team_start(thr);
            for (int r = -2; r < reps; r++) { /* two warm-up rounds */
                double t0 = now();
                for (int i = 0; i < inner; i++) {
                    ours(&g, work);
                }
                double t1 = now();
                for (int i = 0; sh->gram && i < inner; i++) {
                    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)m, (int)k, 1.0f, a,
                                (int)lda, 0.0f, c, (int)n);
                }
                for (int i = 0; !sh->gram && i < inner; i++) {
                    cblas_sgemm(CblasRowMajor, sh->ta ? CblasTrans : CblasNoTrans,
                                sh->tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f,
                                a, (int)lda, b, (int)ldb, 0.0f, c, (int)n);
                }
                double t2 = now();
                if (r >= 0) {
                    t_ours[r] = (t1 - t0) / inner;
                    t_blas[r] = (t2 - t1) / inner;
                }
            }
            team_stop();
            qsort(t_ours, (size_t)reps, sizeof(double), cmp_double);
            qsort(t_blas, (size_t)reps, sizeof(double), cmp_double);
            double go = flops / t_ours[reps / 2] * 1e-9, gb = flops / t_blas[reps / 2] * 1e-9;
            printf("%-22s %5lld %5lld %5lld %c%c %3d %9.1f %9.1f %6.2f\n", sh->what, (long long)m,
                   (long long)n, (long long)k, sh->ta ? 'T' : 'N', sh->tb ? 'T' : 'N', thr, go, gb,
                   go / gb);
            free(t_ours);
            free(t_blas);
        }
        for (int i = 0; i < max_threads; i++) {
            free(work[i]);
        }
        if (b != a) {
            free(b);
        }
        free(a);
        free(c);
    }
    return 0;
}
