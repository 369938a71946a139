/* Helpers shared by the engine tests: gates that block kernels until the
 * test opens them, and small kernels over plain memory cells. */
#ifndef EV_TEST_ENGINE_UTIL_H
#define EV_TEST_ENGINE_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "eagervm/vm.h"
#include "test.h"

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    _Atomic int entered; /* kernels that reached the gate */
} gate;

static inline void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
    atomic_init(&g->entered, 0);
}

static inline void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static inline void gate_pass(gate *g)
{
    atomic_fetch_add(&g->entered, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

static inline void gate_destroy(gate *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

/* A kernel that waits at the gate given as its argument. */
static inline int gate_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    gate_pass(*(gate **)arg);
    return 0;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static inline int noop(void *arg, ev_kctx *kc)
{
    (void)arg;
    (void)kc;
    return 0;
}

/* Submits `kernel` with arg on uid's compute stream touching one object. */
static inline void submit1(ev_vm *vm, uint32_t uid, ev_kernel_fn kernel, const void *arg,
                           size_t size, ev_obj *obj, int access, const char *name)
{
    ev_operand op = {obj, access};
    ev_instr_desc d = {.kernel = kernel,
                       .arg = arg,
                       .arg_size = size,
                       .stream = ev_cpu_stream(uid),
                       .operands = &op,
                       .n_operands = obj ? 1 : 0,
                       .name = name};
    CHECK_OK(ev_submit(vm, &d, NULL));
}

#endif
