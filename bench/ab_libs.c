/* A/B of two builds of libeagervm in one process: both are dlopened (each
 * with its own runtime, allocator and threads) and the same cases run
 * alternately, so that the slow and fast periods of a shared machine hit
 * both builds alike. Run through scripts/ab_builds.sh, which builds two git
 * revisions; by hand: ab_libs A/libeagervm.so B/libeagervm.so [rounds].
 *
 * Cases: a chain of 20,000 tiny adds (16 float32, each result replacing
 * the last, as `y = y + x` does), the same with exp (a tiny unary op), and
 * a chain of 200,000 empty instructions
 * alternating between two worker threads (bench_engine's
 * chain_cross_thread). Prints the median and the best of each. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "eagervm/ops.h"
#include "eagervm/tensor.h"
#include "eagervm/vm.h"

typedef struct lib {
    int (*vm_create)(const ev_vm_config *, ev_vm **);
    void (*vm_destroy)(ev_vm *);
    int (*obj_create)(ev_vm *, ev_obj **);
    int (*obj_release)(ev_vm *, ev_obj *, ev_free_fn, void *);
    int (*submit)(ev_vm *, const ev_instr_desc *, ev_ticket *);
    int (*sync)(ev_vm *, ev_error **);
    int (*ones)(const ev_exec *, ev_dtype, int, const int64_t *, ev_tensor **);
    int (*add)(const ev_exec *, ev_tensor *, ev_tensor *, ev_tensor **);
    int (*exp)(const ev_exec *, ev_tensor *, ev_tensor **);
    void (*unref)(ev_tensor *);
} lib;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "ab_libs: %s\n", dlerror());
        exit(1);
    }
    return p;
}

static void load(lib *l, const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "ab_libs: %s\n", dlerror());
        exit(1);
    }
    *(void **)&l->vm_create = sym(h, "ev_vm_create");
    *(void **)&l->vm_destroy = sym(h, "ev_vm_destroy");
    *(void **)&l->obj_create = sym(h, "ev_obj_create");
    *(void **)&l->obj_release = sym(h, "ev_obj_release");
    *(void **)&l->submit = sym(h, "ev_submit");
    *(void **)&l->sync = sym(h, "ev_synchronize");
    *(void **)&l->ones = sym(h, "ev_ones");
    *(void **)&l->add = sym(h, "ev_add");
    *(void **)&l->exp = sym(h, "ev_exp");
    *(void **)&l->unref = sym(h, "ev_tensor_unref");
}

/* 20,000 tiny ops on 16 float32, each result replacing the last: y = y + x,
 * or with unary set y = exp(y). */
static double tiny_chain(const lib *l, ev_vm *vm, int unary)
{
    enum { N = 20000 };
    ev_exec ex = {vm, 0, NULL};
    const int64_t n = 16;
    ev_tensor *x, *y;
    if (l->ones(&ex, EV_FLOAT32, 1, &n, &x) || l->ones(&ex, EV_FLOAT32, 1, &n, &y)) {
        exit(1);
    }
    l->sync(vm, NULL);
    double t0 = now_s();
    for (int i = 0; i < N; i++) {
        ev_tensor *y2;
        if (unary ? l->exp(&ex, y, &y2) : l->add(&ex, y, x, &y2)) {
            exit(1);
        }
        l->unref(y);
        y = y2;
    }
    l->sync(vm, NULL);
    double ns = (now_s() - t0) / N * 1e9;
    l->unref(x);
    l->unref(y);
    return ns;
}

static int empty_kernel(void *arg, ev_kctx *kc)
{
    (void)arg;
    (void)kc;
    return 0;
}

static double cross_chain(const lib *l)
{
    enum { N = 200000 };
    ev_vm *vm;
    ev_obj *obj;
    if (l->vm_create(NULL, &vm) || l->obj_create(vm, &obj)) {
        exit(1);
    }
    ev_operand op = {obj, EV_READ_WRITE};
    ev_instr_desc d = {.kernel = empty_kernel, .operands = &op, .n_operands = 1, .name = "e"};
    for (uint32_t u = 0; u < 2; u++) { /* start both workers */
        d.stream = ev_cpu_stream(u);
        l->submit(vm, &d, NULL);
    }
    l->sync(vm, NULL);
    double t0 = now_s();
    for (long i = 0; i < N; i++) {
        d.stream = ev_cpu_stream((uint32_t)(i & 1));
        if (l->submit(vm, &d, NULL)) {
            exit(1);
        }
    }
    l->sync(vm, NULL);
    double ns = (now_s() - t0) / N * 1e9;
    l->obj_release(vm, obj, NULL, NULL);
    l->vm_destroy(vm);
    return ns;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ab_libs A/libeagervm.so B/libeagervm.so [rounds]\n");
        return 2;
    }
    enum { MAX_ROUNDS = 64 };
    lib libs[2];
    load(&libs[0], argv[1]);
    load(&libs[1], argv[2]);
    int rounds = argc > 3 ? atoi(argv[3]) : 15;
    rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
    ev_vm *vms[2];
    for (int j = 0; j < 2; j++) {
        if (libs[j].vm_create(NULL, &vms[j])) {
            return 1;
        }
        tiny_chain(&libs[j], vms[j], 0); /* warm-up */
    }
    double tiny[2][MAX_ROUNDS], unary[2][MAX_ROUNDS], cross[2][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int j = (r & 1) ? 1 - k : k; /* ABBA... order */
            tiny[j][r] = tiny_chain(&libs[j], vms[j], 0);
            unary[j][r] = tiny_chain(&libs[j], vms[j], 1);
            cross[j][r] = cross_chain(&libs[j]);
        }
    }
    for (int j = 0; j < 2; j++) {
        qsort(tiny[j], (size_t)rounds, sizeof(double), cmp_double);
        qsort(unary[j], (size_t)rounds, sizeof(double), cmp_double);
        qsort(cross[j], (size_t)rounds, sizeof(double), cmp_double);
        printf("%c  tiny add %5.0f ns/op (best %4.0f)  tiny exp %5.0f ns/op (best %4.0f)  "
               "chain_cross_thread %5.0f ns (best %4.0f)\n",
               "AB"[j], tiny[j][rounds / 2], tiny[j][0], unary[j][rounds / 2], unary[j][0],
               cross[j][rounds / 2], cross[j][0]);
        libs[j].vm_destroy(vms[j]);
    }
    printf("B/A medians: tiny add %.3f, tiny exp %.3f, chain_cross_thread %.3f (%d rounds)\n",
           tiny[1][rounds / 2] / tiny[0][rounds / 2], unary[1][rounds / 2] / unary[0][rounds / 2],
           cross[1][rounds / 2] / cross[0][rounds / 2], rounds);
    return 0;
}
