/* Rule "no busy waiting": once the work is done, or while everything waits on
 * a blocked kernel, the runtime parks its threads instead of spinning. Both
 * tests measure the CPU time of the whole process across a sleep and allow a
 * generous margin: they assert parking, not speed. Not run under TSan, whose
 * own overhead makes CPU measurements meaningless. */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "core/engine_util.h"

#if defined(__SANITIZE_THREAD__)
#define EV_IDLE_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EV_IDLE_UNDER_TSAN 1
#endif
#endif

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct add_op {
    long *cell;
    long k;
} add_op;

static int add_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    add_op *op = arg;
    *op->cell += op->k;
    return 0;
}

/* (a) After a burst of work on four workers, an idle runtime uses no CPU. */
static void test_idle_runtime_parks(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    enum { UIDS = 4, N = 4000 };
    ev_obj *objs[UIDS];
    long cells[UIDS] = {0};
    for (int i = 0; i < UIDS; i++) {
        CHECK_OK(ev_obj_create(vm, &objs[i]));
    }
    /* Each object is handed from worker to worker, so the burst also leaves
     * workers that waited on each other, not just drained queues. */
    for (long i = 0; i < N; i++) {
        int o = (int)(i % UIDS);
        add_op op = {&cells[o], i};
        submit1(vm, (uint32_t)((i / UIDS + (long)o) % UIDS), add_kernel, &op, sizeof op, objs[o],
                EV_READ_WRITE, "add");
    }
    CHECK_OK(ev_synchronize(vm, NULL));
    long expect[UIDS] = {0};
    for (long i = 0; i < N; i++) {
        expect[i % UIDS] += i;
    }
    for (int i = 0; i < UIDS; i++) {
        CHECK_EQ(cells[i], expect[i]);
    }
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(st.workers_started, UIDS);

    sleep_ms(100); /* let every spinner give up and park */
    int64_t c0 = cpu_ns(), w0 = wall_ns();
    sleep_ms(500);
    int64_t used = cpu_ns() - c0, wall = wall_ns() - w0;
    fprintf(stderr, "   idle: %.2f ms cpu over %.0f ms\n", used / 1e6, wall / 1e6);
    CHECK_LT(used, 25 * 1000000LL);

    for (int i = 0; i < UIDS; i++) {
        CHECK_OK(ev_obj_release(vm, objs[i], NULL, NULL));
    }
    ev_vm_destroy(vm);
}

typedef struct opener {
    gate *g;
    int after_ms;
} opener;

static void *open_later(void *p)
{
    opener *o = p;
    sleep_ms(o->after_ms);
    gate_open(o->g);
    return NULL;
}

/* (b) A host thread waits on an object whose writer kernel is blocked for
 * 500 ms; a consumer on another worker waits on that writer as well. The
 * blocked kernel sleeps on a condvar, so the whole process must stay idle. */
static void test_blocked_waits_park(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a, *b;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_OK(ev_obj_create(vm, &b));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    /* Start both workers first, so thread creation is not measured. */
    submit1(vm, 1, noop, NULL, 0, NULL, 0, "warm");
    submit1(vm, 2, noop, NULL, 0, NULL, 0, "warm");
    CHECK_OK(ev_synchronize(vm, NULL));

    submit1(vm, 1, gate_kernel, &gp, sizeof gp, a, EV_WRITE, "blocked writer");
    ev_operand ops[2] = {{a, EV_READ}, {b, EV_WRITE}};
    ev_instr_desc d = {.kernel = noop,
                       .stream = ev_cpu_stream(2),
                       .operands = ops,
                       .n_operands = 2,
                       .name = "consumer"};
    CHECK_OK(ev_submit(vm, &d, NULL));
    for (int i = 0; i < 5000 && atomic_load(&g.entered) == 0; i++) {
        sleep_ms(1);
    }
    CHECK_EQ(atomic_load(&g.entered), 1);

    opener o = {&g, 500};
    int64_t c0 = cpu_ns(), w0 = wall_ns();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, open_later, &o), 0);
    CHECK_OK(ev_wait_obj(vm, b, NULL));
    int64_t used = cpu_ns() - c0, wall = wall_ns() - w0;
    CHECK_EQ(pthread_join(t, NULL), 0);
    fprintf(stderr, "   blocked wait: %.2f ms cpu over %.0f ms\n", used / 1e6, wall / 1e6);
    CHECK_GE(wall, 450 * 1000000LL); /* it really waited for the gate */
    CHECK_LT(used, 50 * 1000000LL);

    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, b, NULL, NULL));
    ev_vm_destroy(vm);
    gate_destroy(&g);
}

int main(int argc, char **argv)
{
#ifdef EV_IDLE_UNDER_TSAN
    fprintf(stderr, "skipped: CPU time under ThreadSanitizer says nothing about parking\n");
    if (argc < 2) {
        return 0;
    }
#endif
    (void)argc;
    (void)argv;
    RUN_TEST(test_idle_runtime_parks);
    RUN_TEST(test_blocked_waits_park);
    fprintf(stderr, "all passed\n");
    return 0;
}
