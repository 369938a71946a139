/* The engine's rules, one test each: dependency edges, stream order and
 * preschedule, release after last use, poison, barriers, back-pressure and
 * concurrent submitters. EV_TEST_CONCURRENCY */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine_util.h"

/* ------------------------------------------------------ rule 1: edges */

typedef struct cell_op {
    _Atomic long *cell;
    long value;
    long *seen;       /* where a reader stores what it saw */
    int delay_ms;     /* makes a wrong order visible */
} cell_op;

static int write_cell(void *arg, ev_kctx *kc)
{
    (void)kc;
    cell_op *op = arg;
    sleep_ms(op->delay_ms);
    atomic_store(op->cell, op->value);
    return 0;
}

static int read_cell(void *arg, ev_kctx *kc)
{
    (void)kc;
    cell_op *op = arg;
    sleep_ms(op->delay_ms);
    *op->seen = atomic_load(op->cell);
    return 0;
}

static void test_read_after_write_across_threads(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    _Atomic long cell = 0;
    long seen = -1;
    cell_op w = {&cell, 42, NULL, 30};
    cell_op r = {&cell, 0, &seen, 0};
    submit1(vm, 1, write_cell, &w, sizeof w, obj, EV_WRITE, "write");
    submit1(vm, 2, read_cell, &r, sizeof r, obj, EV_READ, "read");
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(seen, 42);
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(st.cross_edges, 1);
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

static void test_write_after_read_across_threads(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    _Atomic long cell = 7;
    long seen = -1;
    cell_op r = {&cell, 0, &seen, 30};
    cell_op w = {&cell, 8, NULL, 0};
    submit1(vm, 1, read_cell, &r, sizeof r, obj, EV_READ, "read");
    submit1(vm, 2, write_cell, &w, sizeof w, obj, EV_WRITE, "write");
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(seen, 7);
    CHECK_EQ(atomic_load(&cell), 8);
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

static void test_write_after_write_across_threads(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    _Atomic long cell = 0;
    cell_op w1 = {&cell, 1, NULL, 30};
    cell_op w2 = {&cell, 2, NULL, 0};
    submit1(vm, 1, write_cell, &w1, sizeof w1, obj, EV_WRITE, "first");
    submit1(vm, 2, write_cell, &w2, sizeof w2, obj, EV_WRITE, "second");
    CHECK_OK(ev_wait_obj(vm, obj, NULL));
    CHECK_EQ(atomic_load(&cell), 2);
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

/* Readers of one object on different threads must overlap: each waits until
 * both are inside, which never happens if the engine serialises them. */
typedef struct rendezvous {
    _Atomic int *inside;
    _Atomic int *met;
} rendezvous;

static int meet_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    rendezvous *rv = arg;
    atomic_fetch_add(rv->inside, 1);
    for (int i = 0; i < 5000 && atomic_load(rv->inside) < 2; i++) {
        sleep_ms(1);
    }
    if (atomic_load(rv->inside) >= 2) {
        atomic_fetch_add(rv->met, 1);
    }
    return 0;
}

static void test_readers_run_in_parallel(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    _Atomic int inside = 0, met = 0;
    rendezvous rv = {&inside, &met};
    submit1(vm, 1, noop, NULL, 0, obj, EV_WRITE, "init");
    submit1(vm, 1, meet_kernel, &rv, sizeof rv, obj, EV_READ, "reader1");
    submit1(vm, 2, meet_kernel, &rv, sizeof rv, obj, EV_READ, "reader2");
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(atomic_load(&met), 2);
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

/* -------------------------------------------- rule 2: streams, preschedule */

typedef struct order_log {
    _Atomic int next;
    int order[16];
} order_log;

typedef struct log_op {
    order_log *log;
    int id;
} log_op;

static int log_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    log_op *op = arg;
    op->log->order[atomic_fetch_add(&op->log->next, 1)] = op->id;
    return 0;
}

static void test_same_stream_runs_in_order_and_preschedules(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a, *b;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_OK(ev_obj_create(vm, &b));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    order_log log = {0};
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, a, EV_WRITE, "producer");
    /* Same stream, reads the producer's output: queued behind it at once. */
    log_op c1 = {&log, 1}, c2 = {&log, 2}, c3 = {&log, 3};
    submit1(vm, 1, log_kernel, &c1, sizeof c1, a, EV_READ, "consumer");
    /* Independent work on the same stream still keeps stream order. */
    submit1(vm, 1, log_kernel, &c2, sizeof c2, b, EV_WRITE, "independent");
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(st.cross_edges, 0);
    CHECK_EQ(st.stream_edges, 1);
    CHECK_EQ(st.pending, 3); /* handed to the worker, none waiting elsewhere */
    /* A consumer on another thread must not start before the producer ends. */
    submit1(vm, 2, log_kernel, &c3, sizeof c3, a, EV_READ, "cross consumer");
    sleep_ms(30);
    CHECK_EQ(atomic_load(&log.next), 0);
    gate_open(&g);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(atomic_load(&log.next), 3);
    /* Stream order: the consumer before the independent instruction behind
     * it; the cross-thread consumer may run at any point after the gate. */
    int pos[4] = {0};
    for (int i = 0; i < 3; i++) {
        pos[log.order[i]] = i;
    }
    CHECK_LT(pos[1], pos[2]);
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(st.cross_edges, 1);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, b, NULL, NULL));
    gate_destroy(&g);
    ev_vm_destroy(vm);
}

/* --------------------------------------- rule 3: release after last use */

typedef struct freed_flag {
    _Atomic int freed;
    _Atomic int running; /* set while the touching kernel runs */
    _Atomic int overlap; /* set if the free ran while a kernel held the object */
} freed_flag;

static void on_free(void *data)
{
    freed_flag *f = data;
    if (atomic_load(&f->running)) {
        atomic_store(&f->overlap, 1);
    }
    atomic_fetch_add(&f->freed, 1);
}

typedef struct hold_op {
    gate *g;
    freed_flag *f;
} hold_op;

static int hold_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    hold_op *op = arg;
    atomic_store(&op->f->running, 1);
    gate_pass(op->g);
    sleep_ms(5);
    atomic_store(&op->f->running, 0);
    return 0;
}

static void test_free_callback_waits_for_last_instruction(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    gate g;
    gate_init(&g);
    freed_flag f = {0};
    for (uint32_t uid = 0; uid < 3; uid++) {
        ev_obj *obj;
        CHECK_OK(ev_obj_create(vm, &obj));
        hold_op op = {&g, &f};
        /* Read on one thread, the blocked kernel on another. */
        submit1(vm, uid, noop, NULL, 0, obj, EV_WRITE, "write");
        submit1(vm, (uid + 1) % 3, hold_kernel, &op, sizeof op, obj, EV_READ, "hold");
        CHECK_OK(ev_obj_release(vm, obj, on_free, &f));
        sleep_ms(20);
        CHECK_EQ(atomic_load(&f.freed), (int)uid);
        gate_open(&g);
        CHECK_OK(ev_synchronize(vm, NULL));
        CHECK_EQ(atomic_load(&f.freed), (int)uid + 1);
        CHECK_EQ(atomic_load(&f.overlap), 0);
        g.open = 0;
    }
    /* An object nobody touched is freed at once, on the caller. */
    ev_obj *idle;
    CHECK_OK(ev_obj_create(vm, &idle));
    CHECK_OK(ev_obj_release(vm, idle, on_free, &f));
    CHECK_EQ(atomic_load(&f.freed), 4);
    gate_destroy(&g);
    ev_vm_destroy(vm);
}

static void count_free_cb(void *data)
{
    atomic_fetch_add((_Atomic int *)data, 1);
}

/* Objects whose unfinished accesses all run on one worker wait on that
 * worker's released list: none is freed before its accesses finish, a
 * later submit frees the finished ones in a batch (without any wait), and
 * a synchronize frees the rest. */
static void test_released_on_one_worker_freed_after_its_accesses(void)
{
    enum { OBJS = 100 };
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    _Atomic int freed = 0;
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, NULL, 0, "blocked");
    for (int i = 0; i < OBJS; i++) {
        ev_obj *obj;
        CHECK_OK(ev_obj_create(vm, &obj));
        submit1(vm, 1, noop, NULL, 0, obj, i % 2 ? EV_READ : EV_WRITE, "use");
        CHECK_OK(ev_obj_release(vm, obj, count_free_cb, &freed));
    }
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(st.submitted, 1 + OBJS); /* no release instructions */
    sleep_ms(10);
    CHECK_EQ(atomic_load(&freed), 0);
    gate_open(&g);
    /* Once the worker is past them, submits (to any worker) free them. */
    for (int i = 0; i < 100000 && atomic_load(&freed) < OBJS; i++) {
        submit1(vm, 0, noop, NULL, 0, NULL, 0, "tick");
        if (i % 64 == 63) {
            sleep_ms(1);
        }
    }
    CHECK_EQ(atomic_load(&freed), OBJS);

    /* And a synchronize frees what a submit batch has not taken yet. */
    g.open = 0;
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, NULL, 0, "blocked");
    for (int i = 0; i < 5; i++) {
        ev_obj *obj;
        CHECK_OK(ev_obj_create(vm, &obj));
        submit1(vm, 1, noop, NULL, 0, obj, EV_WRITE, "use");
        CHECK_OK(ev_obj_release(vm, obj, count_free_cb, &freed));
    }
    gate_open(&g);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(atomic_load(&freed), OBJS + 5);
    ev_vm_destroy(vm);
    gate_destroy(&g);
}

/* ------------------------------------------------------- rule 4: poison */

typedef struct index_op {
    int index, size;
    _Atomic int *ran;
} index_op;

static int gather_kernel(void *arg, ev_kctx *kc)
{
    index_op *op = arg;
    atomic_fetch_add(op->ran, 1);
    if (op->index >= op->size) {
        return ev_kctx_fail(kc, EV_EINDEX, "index %d is out of bounds for dimension 0 with size %d",
                            op->index, op->size);
    }
    return 0;
}

static int count_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    atomic_fetch_add(*(_Atomic int **)arg, 1);
    return 0;
}

static void test_failure_poisons_outputs_only(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *x, *y, *z, *other;
    CHECK_OK(ev_obj_create(vm, &x));
    CHECK_OK(ev_obj_create(vm, &y));
    CHECK_OK(ev_obj_create(vm, &z));
    CHECK_OK(ev_obj_create(vm, &other));
    static const ev_site site = {"model.py", "forward", 17};
    _Atomic int ran = 0, downstream = 0, unrelated = 0;
    index_op bad = {5, 3, &ran};
    ev_operand ops[2] = {{x, EV_READ}, {y, EV_WRITE}};
    ev_instr_desc d = {.kernel = gather_kernel,
                       .arg = &bad,
                       .arg_size = sizeof bad,
                       .stream = ev_cpu_stream(1),
                       .operands = ops,
                       .n_operands = 2,
                       .name = "gather",
                       .site = &site};
    ev_ticket bad_ticket;
    CHECK_OK(ev_submit(vm, &d, &bad_ticket));
    /* y -> z on another thread: skipped, z poisoned with the first error. */
    _Atomic int *dp = &downstream, *up = &unrelated;
    ev_operand ops2[2] = {{y, EV_READ}, {z, EV_WRITE}};
    ev_instr_desc d2 = {.kernel = count_kernel,
                        .arg = &dp,
                        .arg_size = sizeof dp,
                        .stream = ev_cpu_stream(2),
                        .operands = ops2,
                        .n_operands = 2,
                        .name = "relu"};
    ev_ticket skipped_ticket;
    CHECK_OK(ev_submit(vm, &d2, &skipped_ticket));
    submit1(vm, 1, count_kernel, &up, sizeof up, other, EV_WRITE, "unrelated");

    ev_error *err = NULL;
    CHECK_EQ(ev_wait_obj(vm, z, &err), EV_EPOISON);
    CHECK(err != NULL);
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_EQ(info.code, EV_EINDEX);
    CHECK_STR_CONTAINS(info.name, "gather");
    CHECK_STR_CONTAINS(info.message, "index 5 is out of bounds for dimension 0 with size 3");
    CHECK(info.site == &site);
    char buf[256];
    ev_error_format(err, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "gather failed at model.py:17 in forward");
    CHECK_STR_CONTAINS(ev_last_message(), "model.py:17");
    ev_error_unref(err);

    CHECK_EQ(ev_wait_obj(vm, y, NULL), EV_EPOISON);
    CHECK_EQ(ev_wait_obj(vm, other, NULL), 0);
    CHECK_EQ(ev_wait_obj(vm, x, NULL), 0);
    CHECK_EQ(atomic_load(&ran), 1);
    CHECK_EQ(atomic_load(&downstream), 0);
    CHECK_EQ(atomic_load(&unrelated), 1);
    CHECK_EQ(ev_wait_ticket(vm, bad_ticket, NULL), EV_EINDEX);
    CHECK_EQ(ev_wait_ticket(vm, skipped_ticket, &err), EV_EINDEX);
    ev_error_get(err, &info);
    CHECK_STR_CONTAINS(info.name, "gather");
    ev_error_unref(err);
    /* A wait already reported the error: synchronize does not raise it again. */
    CHECK_OK(ev_synchronize(vm, NULL));
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, 1);

    /* The runtime stays usable; a fresh failure is raised once by synchronize. */
    index_op bad2 = {9, 2, &ran};
    submit1(vm, 0, gather_kernel, &bad2, sizeof bad2, other, EV_WRITE, "take");
    CHECK_EQ(ev_synchronize(vm, &err), EV_EINDEX);
    ev_error_get(err, &info);
    CHECK_STR_CONTAINS(info.name, "take");
    ev_error_unref(err);
    CHECK_OK(ev_synchronize(vm, NULL));
    index_op good = {0, 2, &ran};
    ev_obj *fresh;
    CHECK_OK(ev_obj_create(vm, &fresh));
    submit1(vm, 1, gather_kernel, &good, sizeof good, fresh, EV_WRITE, "ok");
    CHECK_OK(ev_wait_obj(vm, fresh, NULL));
    ev_obj *all[] = {x, y, z, other, fresh};
    for (int i = 0; i < 5; i++) {
        CHECK_OK(ev_obj_release(vm, all[i], NULL, NULL));
    }
    ev_vm_destroy(vm);
}

/* ------------------------------------------------------------- barrier */

static int mark_barrier(void *arg, ev_kctx *kc)
{
    (void)kc;
    order_log *log = *(order_log **)arg;
    log->order[atomic_fetch_add(&log->next, 1)] = 100;
    return 0;
}

static void test_barrier_orders_everything(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *objs[4];
    order_log log = {0};
    order_log *lp = &log;
    log_op before[3] = {{&log, 1}, {&log, 2}, {&log, 3}};
    log_op after[3] = {{&log, 4}, {&log, 5}, {&log, 6}};
    gate g;
    gate_init(&g);
    gate *gp = &g;
    for (int i = 0; i < 4; i++) {
        CHECK_OK(ev_obj_create(vm, &objs[i]));
    }
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, objs[3], EV_WRITE, "slow");
    for (uint32_t i = 0; i < 3; i++) {
        submit1(vm, i + 1, log_kernel, &before[i], sizeof before[i], objs[i], EV_WRITE, "before");
    }
    ev_stream bs = {EV_DEVICE_CPU, 0, EV_STREAM_BARRIER, 0, 0};
    CHECK_OK(ev_submit_barrier(vm, bs, mark_barrier, &lp, sizeof lp, "barrier", NULL));
    for (uint32_t i = 0; i < 3; i++) {
        submit1(vm, 3 - i, log_kernel, &after[i], sizeof after[i], objs[i], EV_READ, "after");
    }
    sleep_ms(20);
    CHECK_LE(atomic_load(&log.next), 2); /* threads 2 and 3 ran their "before" */
    gate_open(&g);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(atomic_load(&log.next), 7);
    CHECK_EQ(log.order[3], 100);
    for (int i = 0; i < 3; i++) {
        CHECK_LE(log.order[i], 3);
        CHECK_GE(log.order[4 + i], 4);
    }
    for (int i = 0; i < 4; i++) {
        CHECK_OK(ev_obj_release(vm, objs[i], NULL, NULL));
    }
    gate_destroy(&g);
    ev_vm_destroy(vm);
}

/* -------------------------------------------------------- back-pressure */

typedef struct producer_arg {
    ev_vm *vm;
    ev_obj *obj;
    _Atomic long submitted;
    long total;
} producer_arg;

static void *produce(void *p)
{
    producer_arg *a = p;
    for (long i = 0; i < a->total; i++) {
        submit1(a->vm, 1, noop, NULL, 0, a->obj, EV_READ_WRITE, "fill");
        atomic_fetch_add(&a->submitted, 1);
    }
    return NULL;
}

static void test_backpressure_bounds_the_queue(void)
{
    ev_vm_config cfg = {.max_pending = 1000};
    ev_vm *vm;
    CHECK_OK(ev_vm_create(&cfg, &vm));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, obj, EV_WRITE, "blocker");
    producer_arg a = {vm, obj, 0, 20000};
    pthread_t t;
    pthread_create(&t, NULL, produce, &a);
    sleep_ms(200);
    /* The producer checks every 256 submissions, so it may overshoot by that. */
    long queued = atomic_load(&a.submitted);
    CHECK_LE(queued, 1000 + 256);
    CHECK_GE(queued, 1000);
    gate_open(&g);
    pthread_join(t, NULL);
    CHECK_OK(ev_synchronize(vm, NULL));
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_GE(st.backpressure_waits, 1);
    CHECK_EQ(st.pending, 0);
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    gate_destroy(&g);
    ev_vm_destroy(vm);
}

/* --------------------------------------------- rule 6: many submitters */

typedef struct add_op {
    unsigned long *cell;
    unsigned long k;
} add_op;

static int add_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    add_op *op = arg;
    *op->cell = *op->cell * 3 + op->k; /* order-sensitive: any reordering shows */
    return 0;
}

typedef struct submitter {
    ev_vm *vm;
    ev_obj *obj;
    unsigned long cell;
    int id;
    long n;
} submitter;

static void *submit_chain(void *p)
{
    submitter *s = p;
    for (long i = 0; i < s->n; i++) {
        add_op op = {&s->cell, (unsigned long)i};
        submit1(s->vm, (uint32_t)((i + s->id) % 4), add_kernel, &op, sizeof op, s->obj,
                EV_READ_WRITE, "step");
    }
    return NULL;
}

static void test_concurrent_submitters(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    enum { N = 8 };
    submitter s[N];
    pthread_t t[N];
    long n = ev_test_scaled(20000);
    for (int i = 0; i < N; i++) {
        s[i] = (submitter){vm, NULL, 0, i, n};
        CHECK_OK(ev_obj_create(vm, &s[i].obj));
        pthread_create(&t[i], NULL, submit_chain, &s[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_OK(ev_synchronize(vm, NULL));
    unsigned long expect = 0;
    for (long i = 0; i < n; i++) {
        expect = expect * 3 + (unsigned long)i;
    }
    for (int i = 0; i < N; i++) {
        CHECK(s[i].cell == expect);
        CHECK_OK(ev_obj_release(vm, s[i].obj, NULL, NULL));
    }
    ev_vm_destroy(vm);
}

/* ------------------------------------------ timed waits, wait-all, fork */

static void test_timed_waits_and_wait_all(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    index_op bad = {4, 1, &(_Atomic int){0}};
    submit1(vm, 2, gather_kernel, &bad, sizeof bad, NULL, 0, "fails");
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, obj, EV_WRITE, "blocked");
    CHECK_EQ(ev_wait_obj_timeout(vm, obj, 0, NULL), EV_ETIMEDOUT);
    CHECK_EQ(ev_wait_obj_timeout(vm, obj, 20, NULL), EV_ETIMEDOUT);
    CHECK_EQ(ev_wait_all(vm, 20), EV_ETIMEDOUT);
    /* Waiting for one thread does not wait for another's blocked work. */
    CHECK_EQ(ev_wait_thread(vm, 1, 20), EV_ETIMEDOUT);
    CHECK_OK(ev_wait_thread(vm, 2, 1000));
    CHECK_OK(ev_wait_thread(vm, 5, 0)); /* never used: nothing to wait for */
    CHECK_EQ(ev_wait_thread(vm, 9999, 0), EV_EINVAL);
    gate_open(&g);
    CHECK_OK(ev_wait_obj_timeout(vm, obj, UINT32_MAX, NULL));
    /* Waiting for everything takes no error: synchronize still reports it. */
    CHECK_OK(ev_wait_all(vm, UINT32_MAX));
    CHECK_EQ(ev_synchronize(vm, NULL), EV_EINDEX);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    gate_destroy(&g);
    ev_vm_destroy(vm);
}

#if !defined(__SANITIZE_THREAD__)
/* A child forked while other threads submit gets working locks and can run a
 * runtime of its own; the parent carries on. (TSan cannot start threads in a
 * child of a multi-threaded process, so its build leaves this out.) */
typedef struct churn {
    ev_vm *vm;
    _Atomic int stop;
} churn;

static void *submit_until_stopped(void *p)
{
    churn *c = p;
    ev_obj *obj;
    CHECK_OK(ev_obj_create(c->vm, &obj));
    while (!atomic_load(&c->stop)) {
        submit1(c->vm, 1, noop, NULL, 0, obj, EV_READ_WRITE, "churn");
    }
    CHECK_OK(ev_obj_release(c->vm, obj, NULL, NULL));
    return NULL;
}

static void test_fork_while_submitting(void)
{
    churn c = {NULL, 0};
    CHECK_OK(ev_vm_create(NULL, &c.vm));
    pthread_t t;
    pthread_create(&t, NULL, submit_until_stopped, &c);
    for (int i = 0; i < 5; i++) {
        sleep_ms(5);
        pid_t pid = fork();
        CHECK_GE(pid, 0);
        if (pid == 0) {
            ev_vm *child;
            _Atomic long cell = 0;
            long seen = 0;
            cell_op w = {&cell, 7, NULL, 0}, r = {&cell, 0, &seen, 0};
            ev_obj *obj;
            if (ev_vm_create(NULL, &child) || ev_obj_create(child, &obj)) {
                _exit(2);
            }
            submit1(child, 1, write_cell, &w, sizeof w, obj, EV_WRITE, "child write");
            submit1(child, 2, read_cell, &r, sizeof r, obj, EV_READ, "child read");
            int rc = ev_synchronize(child, NULL);
            ev_obj_release(child, obj, NULL, NULL);
            ev_vm_destroy(child);
            _exit(rc == 0 && seen == 7 ? 0 : 3);
        }
        int status = 0;
        CHECK_EQ(waitpid(pid, &status, 0), pid);
        CHECK(WIFEXITED(status));
        CHECK_EQ(WEXITSTATUS(status), 0);
    }
    atomic_store(&c.stop, 1);
    pthread_join(t, NULL);
    CHECK_OK(ev_synchronize(c.vm, NULL));
    ev_vm_destroy(c.vm);
}
#endif

int main(void)
{
    RUN_TEST(test_read_after_write_across_threads);
    RUN_TEST(test_write_after_read_across_threads);
    RUN_TEST(test_write_after_write_across_threads);
    RUN_TEST(test_readers_run_in_parallel);
    RUN_TEST(test_same_stream_runs_in_order_and_preschedules);
    RUN_TEST(test_free_callback_waits_for_last_instruction);
    RUN_TEST(test_released_on_one_worker_freed_after_its_accesses);
    RUN_TEST(test_failure_poisons_outputs_only);
    RUN_TEST(test_barrier_orders_everything);
    RUN_TEST(test_backpressure_bounds_the_queue);
    RUN_TEST(test_concurrent_submitters);
    RUN_TEST(test_timed_waits_and_wait_all);
#if !defined(__SANITIZE_THREAD__)
    RUN_TEST(test_fork_while_submitting);
#endif
    fprintf(stderr, "all passed\n");
    return 0;
}
