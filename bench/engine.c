/* bench_engine: nanoseconds per instruction for four dependency patterns,
 * with OpenMP tasks and StarPU running the same cases in the same run when
 * they were found at build time. Median of several repeats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eagervm/vm.h"
#include "engine_peers.h"

enum { REPEATS = 5, FAN = 64 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int empty_kernel(void *arg, ev_kctx *kc)
{
    (void)arg;
    (void)kc;
    return 0;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_engine: %s: %s\n", what, ev_last_message());
    exit(1);
}

static void submit(ev_vm *vm, uint32_t uid, ev_obj *obj, int access)
{
    ev_operand op = {obj, access};
    ev_instr_desc d = {.kernel = empty_kernel,
                       .stream = ev_cpu_stream(uid),
                       .operands = &op,
                       .n_operands = 1,
                       .name = "empty"};
    if (ev_submit(vm, &d, NULL) != 0) {
        die("submit");
    }
}

/* Runs one case once on a fresh runtime; returns ns per instruction. */
static double run_ours(const char *name, long n)
{
    ev_vm *vm;
    if (ev_vm_create(NULL, &vm) != 0) {
        die("create");
    }
    enum { N_INDEPENDENT = 1024 };
    ev_obj *objs[N_INDEPENDENT];
    for (int i = 0; i < N_INDEPENDENT; i++) {
        if (ev_obj_create(vm, &objs[i]) != 0) {
            die("object");
        }
    }
    /* Start both workers before timing, as the peers' pools are started. */
    submit(vm, 0, objs[0], EV_WRITE);
    submit(vm, 1, objs[1], EV_WRITE);
    ev_synchronize(vm, NULL);

    long count = 0;
    double t0 = now_s();
    if (!strcmp(name, "chain_same_stream")) {
        for (long i = 0; i < n; i++) {
            submit(vm, 0, objs[0], EV_READ_WRITE);
        }
        count = n;
    } else if (!strcmp(name, "chain_cross_thread")) {
        for (long i = 0; i < n; i++) {
            submit(vm, (uint32_t)(i & 1), objs[0], EV_READ_WRITE);
        }
        count = n;
    } else if (!strcmp(name, "independent")) {
        /* Instruction i writes object i % 1024, as the peers do. */
        for (long i = 0; i < n; i++) {
            submit(vm, (uint32_t)(i & 1), objs[i % N_INDEPENDENT], EV_WRITE);
        }
        count = n;
    } else {
        long rounds = n / (FAN + 2);
        for (long r = 0; r < rounds; r++) {
            submit(vm, 0, objs[0], EV_READ_WRITE);
            for (int k = 0; k < FAN; k++) {
                submit(vm, (uint32_t)(k & 1), objs[0], EV_READ);
            }
            submit(vm, 1, objs[0], EV_READ_WRITE);
        }
        count = rounds * (FAN + 2);
    }
    if (ev_synchronize(vm, NULL) != 0) {
        die("synchronize");
    }
    double dt = now_s() - t0;
    for (int i = 0; i < N_INDEPENDENT; i++) {
        ev_obj_release(vm, objs[i], NULL, NULL);
    }
    ev_vm_destroy(vm);
    return dt * 1e9 / (double)count;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef double (*runner)(const char *, long);

static double median_of(runner fn, const char *name, long n, int repeats)
{
    double v[REPEATS];
    for (int i = 0; i < repeats; i++) {
        v[i] = fn(name, n);
        if (v[i] < 0) {
            return -1;
        }
    }
    qsort(v, (size_t)repeats, sizeof v[0], cmp_double);
    return v[repeats / 2];
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    /* The peers are 10-100x slower per task: fewer tasks keep the run short;
     * figures are per task either way. */
    long n_omp = argc > 2 ? atol(argv[2]) : 200000;
    long n_starpu = argc > 3 ? atol(argv[3]) : 20000;
    static const char *const cases[] = {"chain_same_stream", "chain_cross_thread", "independent",
                                        "fan_out_in"};
    int have_starpu = n_starpu > 0 && peer_starpu_init() == 0;
    printf("# eagervm engine benchmark: %ld instructions per case (OpenMP: %ld, StarPU: %ld), "
           "median of %d (peers: 3)\n",
           n, n_omp, n_starpu, REPEATS);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double ours = median_of(run_ours, cases[c], n, REPEATS);
        double omp = n_omp > 0 ? median_of(peer_omp_run, cases[c], n_omp, 3) : -1;
        double spu = have_starpu && n_starpu > 0
                         ? median_of(peer_starpu_run, cases[c], n_starpu, 3)
                         : -1;
        printf("%s ns_per_instruction=%.1f", cases[c], ours);
        if (omp > 0) {
            printf("  openmp_ns=%.1f openmp_ratio=%.1fx", omp, omp / ours);
        } else {
            printf("  openmp=unavailable");
        }
        if (spu > 0) {
            printf("  starpu_ns=%.1f starpu_ratio=%.1fx", spu, spu / ours);
        } else {
            printf("  starpu=unavailable");
        }
        printf("\n");
        fflush(stdout);
    }
    if (have_starpu) {
        peer_starpu_shutdown();
    }
    return 0;
}
