/* EV_SUBMIT_MAY_RUN_HERE: a cheap instruction submitted while its worker is
 * parked runs on the submitting thread, as if the worker ran it (same
 * stream order, errors, poison, profile records); with anything unfinished
 * in its way, or the setting off, it goes to the worker. EV_TEST_CONCURRENCY */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "core/engine_util.h"

typedef struct where_op {
    pthread_t *slot;      /* gets the thread that ran the kernel */
    _Atomic int *runs;    /* counts the kernel's runs (may be NULL) */
    _Atomic int *dropped; /* set by arg_drop (may be NULL) */
} where_op;

static int where_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    where_op *op = arg;
    *op->slot = pthread_self();
    if (op->runs) {
        atomic_fetch_add(op->runs, 1);
    }
    return 0;
}

static void where_drop(void *arg)
{
    where_op *op = arg;
    if (op->dropped) {
        atomic_store(op->dropped, 1);
    }
}

static ev_vm_stats stats_of(ev_vm *vm)
{
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    return st;
}

static int submit_flagged(ev_vm *vm, uint32_t uid, ev_kernel_fn kernel, const void *arg,
                          size_t size, void (*drop)(void *), ev_obj *obj, int access,
                          unsigned flags, ev_ticket *ticket)
{
    ev_operand op = {obj, access};
    ev_instr_desc d = {.kernel = kernel,
                       .arg = arg,
                       .arg_size = size,
                       .arg_drop = drop,
                       .stream = ev_cpu_stream(uid),
                       .operands = &op,
                       .n_operands = obj ? 1 : 0,
                       .name = "cheap",
                       .flags = flags};
    return ev_submit(vm, &d, ticket);
}

/* Starts uid's worker and lets it go idle long enough to park. */
static void park_worker(ev_vm *vm, uint32_t uid)
{
    submit1(vm, uid, noop, NULL, 0, NULL, EV_READ, "start");
    CHECK_OK(ev_synchronize(vm, NULL));
    sleep_ms(30); /* its idle poll lasts 20 us */
}

/* Submits a flagged where_kernel, after parking the worker, until one runs
 * on the submitter (a spurious wake can keep the worker up); returns
 * whether one did within 20 tries. */
static int submit_while_parked(ev_vm *vm, ev_obj *obj, pthread_t *slot, _Atomic int *dropped,
                               ev_ticket *ticket)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        park_worker(vm, 0);
        uint64_t before = stats_of(vm).ran_here;
        where_op op = {.slot = slot, .dropped = dropped};
        CHECK_OK(submit_flagged(vm, 0, where_kernel, &op, sizeof op, where_drop, obj, EV_WRITE,
                                EV_SUBMIT_MAY_RUN_HERE, ticket));
        if (stats_of(vm).ran_here == before + 1) {
            return 1;
        }
        CHECK_OK(ev_synchronize(vm, NULL));
    }
    return 0;
}

/* (a) It runs, and its arg_drop runs, on the caller before ev_submit returns,
 * numbered next on its stream. */
static void test_runs_on_submitter(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    pthread_t ran;
    _Atomic int dropped = 0;
    ev_ticket t;
    CHECK(submit_while_parked(vm, obj, &ran, &dropped, &t));
    CHECK(pthread_equal(ran, pthread_self()));
    CHECK_EQ(atomic_load(&dropped), 1);
    CHECK_EQ(t.thread_uid, 0);
    ev_vm_stats st = stats_of(vm);
    CHECK_EQ(st.pending, 0);            /* already finished */
    CHECK_EQ(st.completed, st.submitted);
    CHECK_OK(ev_wait_ticket(vm, t, NULL));
    /* The next instruction on the stream, queued to the worker, follows it. */
    ev_ticket t2;
    CHECK_OK(submit_flagged(vm, 0, noop, NULL, 0, NULL, obj, EV_READ, 0, &t2));
    CHECK_EQ(t2.seq, t.seq + 1);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

/* (b) Off, or not asked for, it goes to the worker. */
static void test_off_or_unmarked_goes_to_worker(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    CHECK_EQ(ev_vm_set_run_here(vm, 0), 1);
    CHECK_EQ(ev_vm_set_run_here(vm, 0), 0);
    for (int flagged = 0; flagged < 2; flagged++) {
        park_worker(vm, 0);
        pthread_t ran;
        where_op op = {.slot = &ran};
        CHECK_OK(submit_flagged(vm, 0, where_kernel, &op, sizeof op, NULL, NULL, EV_READ,
                                flagged ? EV_SUBMIT_MAY_RUN_HERE : 0, NULL));
        CHECK_OK(ev_synchronize(vm, NULL));
        CHECK(!pthread_equal(ran, pthread_self()));
    }
    CHECK_EQ(stats_of(vm).ran_here, 0);
    CHECK_EQ(ev_vm_set_run_here(vm, 1), 0);
    CHECK_EQ(ev_vm_set_run_here(vm, 2), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "0 or 1");
    CHECK_EQ(ev_vm_set_run_here(NULL, 1), EV_EINVAL);
    /* Unknown flags are refused, and nothing is queued. */
    uint64_t before = stats_of(vm).submitted;
    CHECK_EQ(submit_flagged(vm, 0, noop, NULL, 0, NULL, NULL, EV_READ, 1u << 5, NULL),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "unknown flags 0x20");
    CHECK_EQ(stats_of(vm).submitted, before);
    ev_vm_destroy(vm);
}

typedef struct gated_write {
    gate *g;
    long *cell;
    long value;
} gated_write;

static int gated_write_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    gated_write *op = arg;
    gate_pass(op->g);
    *op->cell = op->value;
    return 0;
}

typedef struct copy_op {
    const long *from;
    long *to;
    pthread_t *ran;
} copy_op;

static int copy_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    copy_op *op = arg;
    *op->to = *op->from;
    *op->ran = pthread_self();
    return 0;
}

/* (c) A reader whose producer (on another stream) is unfinished is queued
 * to its worker, which waits for the producer. */
static void test_unfinished_producer_queues(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    park_worker(vm, 0);
    gate g;
    gate_init(&g);
    long cell = 0, copy = -1;
    gated_write w = {&g, &cell, 42};
    submit1(vm, 1, gated_write_kernel, &w, sizeof w, obj, EV_WRITE, "producer");
    pthread_t ran;
    copy_op c = {&cell, &copy, &ran};
    uint64_t before = stats_of(vm).ran_here;
    CHECK_OK(submit_flagged(vm, 0, copy_kernel, &c, sizeof c, NULL, obj, EV_READ,
                            EV_SUBMIT_MAY_RUN_HERE, NULL));
    CHECK_EQ(stats_of(vm).ran_here, before);
    CHECK_EQ(copy, -1);
    gate_open(&g);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(copy, 42);
    CHECK(!pthread_equal(ran, pthread_self()));
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
    gate_destroy(&g);
}

typedef struct slow_op {
    gate *g;
    _Atomic int *finished;
} slow_op;

static int slow_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    slow_op *op = arg;
    gate_pass(op->g);
    atomic_store(op->finished, 1);
    return 0;
}

typedef struct observe_op {
    _Atomic int *finished;
    int *seen;
} observe_op;

static int observe_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    observe_op *op = arg;
    *op->seen = atomic_load(op->finished);
    return 0;
}

typedef struct submitter_args {
    ev_vm *vm;
    slow_op op;
    int ran_here;
} submitter_args;

static void *submit_slow(void *p)
{
    submitter_args *a = p;
    uint64_t before = stats_of(a->vm).ran_here;
    CHECK_OK(submit_flagged(a->vm, 0, slow_kernel, &a->op, sizeof a->op, NULL, NULL, EV_READ,
                            EV_SUBMIT_MAY_RUN_HERE, NULL));
    a->ran_here = stats_of(a->vm).ran_here == before + 1;
    return NULL;
}

/* (d) The stream's order holds against a submitter still running one: an
 * instruction queued behind it, from another thread and with no object in
 * common, starts only after it ends. */
static void test_stream_order_across_submitters(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    int tested = 0;
    for (int attempt = 0; attempt < 20 && !tested; attempt++) {
        park_worker(vm, 0);
        gate g;
        gate_init(&g);
        _Atomic int finished = 0;
        submitter_args a = {vm, {&g, &finished}, 0};
        pthread_t th;
        CHECK_EQ(pthread_create(&th, NULL, submit_slow, &a), 0);
        for (int i = 0; i < 5000 && atomic_load(&g.entered) < 1; i++) {
            sleep_ms(1);
        }
        CHECK_EQ(atomic_load(&g.entered), 1);
        int seen = -1;
        observe_op o = {&finished, &seen};
        submit1(vm, 0, observe_kernel, &o, sizeof o, NULL, EV_READ, "after");
        sleep_ms(20); /* time for the worker to run it too early */
        gate_open(&g);
        CHECK_EQ(pthread_join(th, NULL), 0);
        CHECK_OK(ev_synchronize(vm, NULL));
        CHECK_EQ(seen, 1);
        tested = a.ran_here;
        gate_destroy(&g);
    }
    CHECK(tested); /* at least once the slow one ran on its submitter */
    ev_vm_destroy(vm);
}

static int failing_kernel(void *arg, ev_kctx *kc)
{
    (void)arg;
    return ev_kctx_fail(kc, EV_EKERNEL, "cheap kernel failed on purpose");
}

/* (e) A failure there is reported at the next sync, poisons its outputs
 * (their readers are skipped), and the runtime goes on. */
static void test_failure_is_reported_later(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    static const ev_site site = {"model.py", "step", 7};
    int failed_here = 0;
    for (int attempt = 0; attempt < 20 && !failed_here; attempt++) {
        park_worker(vm, 0);
        uint64_t before = stats_of(vm).ran_here;
        ev_operand op = {obj, EV_WRITE};
        ev_instr_desc d = {.kernel = failing_kernel,
                           .stream = ev_cpu_stream(0),
                           .operands = &op,
                           .n_operands = 1,
                           .name = "cheap_fail",
                           .site = &site,
                           .flags = EV_SUBMIT_MAY_RUN_HERE};
        CHECK_OK(ev_submit(vm, &d, NULL));
        failed_here = stats_of(vm).ran_here == before + 1;
        submit1(vm, 0, noop, NULL, 0, obj, EV_READ, "reader");
        ev_error *err = NULL;
        CHECK_EQ(ev_synchronize(vm, &err), EV_EKERNEL);
        CHECK(err != NULL);
        ev_error_info info;
        ev_error_get(err, &info);
        CHECK(strcmp(info.name, "cheap_fail") == 0);
        CHECK_STR_CONTAINS(info.message, "on purpose");
        CHECK(info.site == &site);
        CHECK_EQ(info.thread_uid, 0);
        ev_error_unref(err);
        CHECK_EQ(ev_wait_obj(vm, obj, NULL), EV_EPOISON);
        CHECK_GE(stats_of(vm).skipped, 1);
        /* A cheap reader of the poisoned object, run here, is skipped too,
         * and poisons what it writes. */
        park_worker(vm, 0);
        ev_obj *out;
        CHECK_OK(ev_obj_create(vm, &out));
        ev_operand ops[2] = {{obj, EV_READ}, {out, EV_WRITE}};
        pthread_t ran;
        _Atomic int runs = 0;
        where_op w = {.slot = &ran, .runs = &runs};
        ev_instr_desc rd = {.kernel = where_kernel,
                            .arg = &w,
                            .arg_size = sizeof w,
                            .stream = ev_cpu_stream(0),
                            .operands = ops,
                            .n_operands = 2,
                            .name = "cheap_reader",
                            .flags = EV_SUBMIT_MAY_RUN_HERE};
        uint64_t skipped = stats_of(vm).skipped;
        CHECK_OK(ev_submit(vm, &rd, NULL));
        CHECK_EQ(ev_wait_obj(vm, out, NULL), EV_EPOISON);
        CHECK_EQ(stats_of(vm).skipped, skipped + 1);
        CHECK_EQ(atomic_load(&runs), 0);
        CHECK_OK(ev_obj_release(vm, out, NULL, NULL));
        /* A fresh object and stream work as before. */
        ev_obj_release(vm, obj, NULL, NULL);
        CHECK_OK(ev_obj_create(vm, &obj));
        submit1(vm, 0, noop, NULL, 0, obj, EV_WRITE, "after");
        CHECK_OK(ev_synchronize(vm, NULL));
    }
    CHECK(failed_here);
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

/* (f) Profiled as if the worker ran it: a record on its own stream. */
static void test_profiled_on_its_stream(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_vm_profile_enable(vm, 1);
    pthread_t ran;
    ev_ticket t;
    CHECK(submit_while_parked(vm, NULL, &ran, NULL, &t));
    ev_prof_record *recs;
    size_t n;
    CHECK_OK(ev_vm_profile_take(vm, &recs, &n));
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(recs[i].name, "cheap") == 0 && recs[i].seq == t.seq) {
            found = 1;
            CHECK_EQ(recs[i].stream.thread_uid, 0);
            CHECK_EQ(recs[i].failed, 0);
            CHECK_LE(recs[i].issue_ns, recs[i].start_ns);
            CHECK_LE(recs[i].start_ns, recs[i].end_ns);
        }
    }
    CHECK(found);
    ev_free(recs);
    ev_vm_destroy(vm);
}

typedef struct burst_count {
    _Atomic long on_worker; /* kernels the worker ran */
    pthread_t submitter;
} burst_count;

static int count_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    burst_count *c = *(burst_count **)arg;
    if (!pthread_equal(pthread_self(), c->submitter)) {
        atomic_fetch_add(&c->on_worker, 1);
    }
    return 0;
}

/* (g) A long burst wakes the worker ahead of need, and it takes over. */
static void test_long_burst_wakes_worker(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    park_worker(vm, 0);
    uint64_t wakes = stats_of(vm).worker_wakes;
    burst_count counts = {.submitter = pthread_self()};
    atomic_init(&counts.on_worker, 0);
    burst_count *p = &counts;
    /* Until the worker has run some (a wake takes far less than the
     * seconds this bound allows). */
    for (long i = 0; i < 50000000 && atomic_load(&counts.on_worker) == 0; i++) {
        CHECK_OK(submit_flagged(vm, 0, count_kernel, &p, sizeof p, NULL, NULL, EV_READ,
                                EV_SUBMIT_MAY_RUN_HERE, NULL));
    }
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_GT(atomic_load(&counts.on_worker), 0);
    ev_vm_stats st = stats_of(vm);
    CHECK_GT(st.ran_here, 0);
    CHECK_LT(st.ran_here, st.submitted);
    CHECK_GE(st.worker_wakes, wakes + 1);
    ev_vm_destroy(vm);
}

int main(void)
{
    RUN_TEST(test_runs_on_submitter);
    RUN_TEST(test_off_or_unmarked_goes_to_worker);
    RUN_TEST(test_unfinished_producer_queues);
    RUN_TEST(test_stream_order_across_submitters);
    RUN_TEST(test_failure_is_reported_later);
    RUN_TEST(test_profiled_on_its_stream);
    RUN_TEST(test_long_burst_wakes_worker);
    fprintf(stderr, "all passed\n");
    return 0;
}
