/* Streams of another type than compute: each runs on an OS thread of its
 * own, and its instructions may complete after their kernels return
 * (ev_kctx_complete_later). The tests hold completions open with flags
 * that the test thread (or another instruction) sets, and check what may
 * and may not happen meanwhile. EV_TEST_CONCURRENCY */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "core/engine_util.h"

#if defined(__SANITIZE_THREAD__)
#define EV_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EV_UNDER_TSAN 1
#endif
#endif

static ev_stream ccl_stream(uint32_t uid)
{
    return (ev_stream){EV_DEVICE_CPU, 0, EV_STREAM_CCL, 0, uid};
}

/* Work a kernel starts and a flag ends: the stand-in for a non-blocking
 * collective. At completion the poll writes `value` into *cell. */
typedef struct later {
    _Atomic int release;   /* set by the test: the work is over */
    _Atomic int started;   /* the kernel ran */
    _Atomic int completed; /* the poll saw the release */
    _Atomic int polls;
    int fail;              /* complete with a failure */
    long *cell;
    long value;
} later;

static void later_init(later *l, long *cell, long value)
{
    atomic_init(&l->release, 0);
    atomic_init(&l->started, 0);
    atomic_init(&l->completed, 0);
    atomic_init(&l->polls, 0);
    l->fail = 0;
    l->cell = cell;
    l->value = value;
}

static int later_poll(void *state, ev_kctx *kc)
{
    later *l = state;
    atomic_fetch_add(&l->polls, 1);
    if (!atomic_load(&l->release)) {
        return 0;
    }
    if (l->fail) {
        return ev_kctx_fail(kc, EV_EVALUE, "the peer went away");
    }
    if (l->cell) {
        *l->cell = l->value;
    }
    atomic_store(&l->completed, 1);
    return 1;
}

static int later_kernel(void *arg, ev_kctx *kc)
{
    later *l = *(later **)arg;
    atomic_store(&l->started, 1);
    return ev_kctx_complete_later(kc, later_poll, l);
}

/* Submits a `later` on uid's ccl stream writing obj (if any). */
static ev_ticket submit_later(ev_vm *vm, uint32_t uid, later *l, ev_obj *obj, int access)
{
    ev_operand op = {obj, access};
    ev_instr_desc d = {.kernel = later_kernel,
                       .arg = &l,
                       .arg_size = sizeof l,
                       .stream = ccl_stream(uid),
                       .operands = &op,
                       .n_operands = obj ? 1 : 0,
                       .name = "later"};
    ev_ticket t;
    CHECK_OK(ev_submit(vm, &d, &t));
    return t;
}

static void wait_flag(_Atomic int *flag)
{
    for (int i = 0; i < 10000 && !atomic_load(flag); i++) {
        sleep_ms(1);
    }
    CHECK(atomic_load(flag));
}

typedef struct copy_op {
    const long *src;
    long *dst;
} copy_op;

static int copy_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    copy_op *op = arg;
    *op->dst = *op->src;
    return 0;
}

static void submit_copy(ev_vm *vm, ev_stream s, const long *src, ev_obj *in, long *dst,
                        ev_obj *out)
{
    copy_op op = {src, dst};
    ev_operand ops[2] = {{in, EV_READ}, {out, EV_WRITE}};
    ev_instr_desc d = {.kernel = copy_kernel, .arg = &op, .arg_size = sizeof op, .stream = s,
                       .operands = ops, .n_operands = 2, .name = "copy"};
    CHECK_OK(ev_submit(vm, &d, NULL));
}

/* A kernel blocked on the ccl stream of uid 1 does not hold back uid 1's
 * compute stream: the two run on different OS threads. */
static void test_ccl_runs_beside_compute(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    ev_instr_desc d = {.kernel = gate_kernel, .arg = &gp, .arg_size = sizeof gp,
                       .stream = ccl_stream(1), .name = "blocked collective"};
    ev_ticket blocked;
    CHECK_OK(ev_submit(vm, &d, &blocked));
    CHECK_EQ(blocked.stream_type, EV_STREAM_CCL);
    CHECK_EQ(blocked.thread_uid, 1);
    wait_flag(&g.entered);
    ev_instr_desc c = {.kernel = noop, .stream = ev_cpu_stream(1), .name = "compute"};
    ev_ticket t;
    CHECK_OK(ev_submit(vm, &c, &t));
    CHECK_EQ(t.stream_type, EV_STREAM_COMPUTE);
    CHECK_OK(ev_wait_ticket(vm, t, NULL));
    /* The uid's wait covers its ccl stream, which is still blocked. */
    CHECK_EQ(ev_wait_thread(vm, 1, 30), EV_ETIMEDOUT);
    char report[2048];
    ev_vm_stall_report(vm, report, sizeof report);
    CHECK_STR_CONTAINS(report, "thread 1 (cpu ccl stream)");
    CHECK_STR_CONTAINS(report, "'blocked collective'");
    gate_open(&g);
    CHECK_OK(ev_wait_ticket(vm, blocked, NULL));
    CHECK_OK(ev_wait_thread(vm, 1, UINT32_MAX));
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(st.workers_started, 2);
    ev_vm_destroy(vm);
    gate_destroy(&g);
}

/* A reader of what an instruction in flight writes runs after it
 * completes, not after its kernel returned; the stream meanwhile polls. */
static void test_readers_wait_for_completion(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a, *b;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_OK(ev_obj_create(vm, &b));
    long cell = 0, out = -1;
    later l;
    later_init(&l, &cell, 42);
    submit_later(vm, 0, &l, a, EV_WRITE);
    submit_copy(vm, ev_cpu_stream(0), &cell, a, &out, b);
    wait_flag(&l.started);
    CHECK_EQ(ev_wait_obj_timeout(vm, b, 30, NULL), EV_ETIMEDOUT);
    CHECK_EQ(out, -1);
    CHECK_GT(atomic_load(&l.polls), 1);
    atomic_store(&l.release, 1);
    CHECK_OK(ev_wait_obj(vm, b, NULL));
    CHECK_EQ(out, 42);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, b, NULL, NULL));
    ev_vm_destroy(vm);
}

/* Independent instructions of one stream are in flight together, and
 * finish in submission order: a later one whose work is over is seen done
 * only once the earlier one is. */
static void test_in_flight_together_finish_in_order(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a, *b;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_OK(ev_obj_create(vm, &b));
    long ca = 0, cb = 0;
    later x, y;
    later_init(&x, &ca, 1);
    later_init(&y, &cb, 2);
    ev_ticket tx = submit_later(vm, 0, &x, a, EV_WRITE);
    ev_ticket ty = submit_later(vm, 0, &y, b, EV_WRITE);
    CHECK_EQ(ty.seq, tx.seq + 1);
    wait_flag(&y.started); /* y's kernel ran while x is in flight */
    CHECK(!atomic_load(&x.completed));
    atomic_store(&y.release, 1);
    CHECK_EQ(ev_wait_obj_timeout(vm, b, 30, NULL), EV_ETIMEDOUT);
    atomic_store(&x.release, 1);
    CHECK_OK(ev_wait_obj(vm, b, NULL));
    CHECK_OK(ev_wait_ticket(vm, tx, NULL));
    CHECK_EQ(ca, 1);
    CHECK_EQ(cb, 2);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, b, NULL, NULL));
    ev_vm_destroy(vm);
}

typedef struct observe_op {
    later *before;
    _Atomic int *saw_completed;
} observe_op;

static int observe_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    observe_op *op = arg;
    atomic_store(op->saw_completed, atomic_load(&op->before->completed) ? 1 : 2);
    return 0;
}

/* On one stream, an instruction reading what one in flight writes starts
 * only after that one completed (stream order alone no longer says so). */
static void test_same_stream_dependency(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a;
    CHECK_OK(ev_obj_create(vm, &a));
    later x;
    later_init(&x, NULL, 0);
    _Atomic int saw = 0;
    submit_later(vm, 0, &x, a, EV_WRITE);
    observe_op op = {&x, &saw};
    ev_operand rd = {a, EV_READ};
    ev_instr_desc d = {.kernel = observe_kernel, .arg = &op, .arg_size = sizeof op,
                       .stream = ccl_stream(0), .operands = &rd, .n_operands = 1,
                       .name = "reader"};
    CHECK_OK(ev_submit(vm, &d, NULL));
    wait_flag(&x.started);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&saw), 0);
    atomic_store(&x.release, 1);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(atomic_load(&saw), 1);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    ev_vm_destroy(vm);
}

static int poll_n(void *state, ev_kctx *kc)
{
    (void)kc;
    later *l = state;
    if (atomic_fetch_add(&l->polls, 1) < 50) {
        return 0;
    }
    *l->cell = l->value;
    atomic_store(&l->completed, 1);
    return 1;
}

static int kernel_poll_n(void *arg, ev_kctx *kc)
{
    return ev_kctx_complete_later(kc, poll_n, *(later **)arg);
}

/* A cycle through the compute stream: the ccl stream's next instruction
 * waits for compute work that waits for the ccl instruction in flight. The
 * stream must keep polling while it waits, or nothing ever completes. */
static void test_waiting_stream_keeps_polling(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a, *b, *c;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_OK(ev_obj_create(vm, &b));
    CHECK_OK(ev_obj_create(vm, &c));
    long ca = 0, cb = 0, cc = 0;
    later x;
    later_init(&x, &ca, 7);
    later *xp = &x;
    ev_operand wa = {a, EV_WRITE};
    ev_instr_desc d = {.kernel = kernel_poll_n, .arg = &xp, .arg_size = sizeof xp,
                       .stream = ccl_stream(0), .operands = &wa, .n_operands = 1,
                       .name = "collective"};
    CHECK_OK(ev_submit(vm, &d, NULL));
    submit_copy(vm, ev_cpu_stream(0), &ca, a, &cb, b);
    submit_copy(vm, ccl_stream(0), &cb, b, &cc, c);
    CHECK_OK(ev_wait_obj(vm, c, NULL));
    CHECK_EQ(cc, 7);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, b, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, c, NULL, NULL));
    ev_vm_destroy(vm);
}

/* A completion that fails poisons the outputs like a failed kernel, is
 * reported with its stream, and leaves the runtime usable. */
static void test_failed_completion(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a, *b;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_OK(ev_obj_create(vm, &b));
    long cell = 0, out = -1;
    later l;
    later_init(&l, &cell, 5);
    l.fail = 1;
    submit_later(vm, 2, &l, a, EV_WRITE);
    submit_copy(vm, ev_cpu_stream(2), &cell, a, &out, b);
    atomic_store(&l.release, 1);
    ev_error *err = NULL;
    CHECK_EQ(ev_wait_obj(vm, b, &err), EV_EPOISON);
    CHECK_EQ(out, -1); /* the reader was skipped */
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_EQ(info.code, EV_EVALUE);
    CHECK_EQ(info.stream_type, EV_STREAM_CCL);
    CHECK_EQ(info.thread_uid, 2);
    CHECK_STR_CONTAINS(info.message, "the peer went away");
    CHECK_STR_CONTAINS(info.name, "later");
    ev_error_unref(err);
    CHECK_OK(ev_synchronize(vm, NULL)); /* the wait reported it */
    /* Still usable: the next completion succeeds. */
    later ok;
    later_init(&ok, &cell, 9);
    atomic_store(&ok.release, 1);
    ev_ticket t = submit_later(vm, 2, &ok, NULL, 0);
    CHECK_OK(ev_wait_ticket(vm, t, NULL));
    CHECK_EQ(cell, 9);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, b, NULL, NULL));
    ev_vm_destroy(vm);
}

static int compute_later_kernel(void *arg, ev_kctx *kc)
{
    return ev_kctx_complete_later(kc, later_poll, *(later **)arg);
}

/* A compute stream completes every instruction when its kernel returns. */
static void test_compute_stream_refuses(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    later l;
    later_init(&l, NULL, 0);
    later *lp = &l;
    ev_instr_desc d = {.kernel = compute_later_kernel, .arg = &lp, .arg_size = sizeof lp,
                       .stream = ev_cpu_stream(0), .name = "compute later"};
    ev_ticket t;
    CHECK_OK(ev_submit(vm, &d, &t));
    ev_error *err = NULL;
    CHECK_EQ(ev_wait_ticket(vm, t, &err), EV_ESTATE);
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_STR_CONTAINS(info.message, "must complete when its kernel returns");
    ev_error_unref(err);
    CHECK_EQ(atomic_load(&l.polls), 0);
    ev_vm_destroy(vm);
}

static void free_flag_fn(void *p)
{
    atomic_store((_Atomic int *)p, 1);
}

/* An object released while an instruction in flight uses it is freed after
 * that instruction completes. */
static void test_release_waits_for_completion(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a;
    CHECK_OK(ev_obj_create(vm, &a));
    later l;
    later_init(&l, NULL, 0);
    submit_later(vm, 0, &l, a, EV_WRITE);
    wait_flag(&l.started);
    _Atomic int freed = 0;
    CHECK_OK(ev_obj_release(vm, a, free_flag_fn, &freed));
    sleep_ms(20);
    CHECK_EQ(ev_wait_all(vm, 0), EV_ETIMEDOUT);
    CHECK_EQ(atomic_load(&freed), 0);
    atomic_store(&l.release, 1);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(atomic_load(&freed), 1);
    ev_vm_destroy(vm);
}

/* The profile shows the instruction on its stream, ending when it completed,
 * not when its kernel returned. */
static void test_profile_spans_completion(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_vm_profile_enable(vm, 1);
    later l;
    later_init(&l, NULL, 0);
    submit_later(vm, 3, &l, NULL, 0);
    wait_flag(&l.started);
    sleep_ms(30);
    atomic_store(&l.release, 1);
    ev_prof_record *recs;
    size_t n;
    CHECK_OK(ev_vm_profile_take(vm, &recs, &n));
    CHECK_EQ(n, 1);
    CHECK_EQ(recs[0].stream.type, EV_STREAM_CCL);
    CHECK_EQ(recs[0].stream.thread_uid, 3);
    CHECK_EQ(recs[0].failed, 0);
    CHECK_GE(recs[0].end_ns - recs[0].start_ns, 25 * 1000000LL);
    ev_free(recs);
    ev_vm_destroy(vm);
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct releaser {
    later *l;
    int after_ms;
    ev_vm *vm;
} releaser;

static void *release_after(void *p)
{
    releaser *r = p;
    sleep_ms(r->after_ms);
    atomic_store(&r->l->release, 1);
    /* A completion signalled from another thread wakes the stream. */
    CHECK_OK(ev_stream_notify(r->vm, ccl_stream(0)));
    return NULL;
}

/* A stream waiting 400 ms for work in flight backs off to sleeping: the
 * process stays nearly idle (a margin that asserts backing off, not speed). */
static void test_waiting_for_completion_is_idle(void)
{
#ifdef EV_UNDER_TSAN
    fprintf(stderr, "   skipped: CPU time under ThreadSanitizer says nothing about parking\n");
    return;
#endif
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *a;
    CHECK_OK(ev_obj_create(vm, &a));
    later l;
    later_init(&l, NULL, 0);
    submit_later(vm, 0, &l, a, EV_WRITE);
    wait_flag(&l.started);
    releaser r = {&l, 400, vm};
    pthread_t t;
    int64_t c0 = cpu_ns();
    CHECK_EQ(pthread_create(&t, NULL, release_after, &r), 0);
    CHECK_OK(ev_wait_obj(vm, a, NULL));
    int64_t used = cpu_ns() - c0;
    CHECK_EQ(pthread_join(t, NULL), 0);
    fprintf(stderr, "   waiting 400 ms for a completion: %.2f ms cpu, %d polls\n", used / 1e6,
            atomic_load(&l.polls));
    CHECK_LT(used, 80 * 1000000LL);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    ev_vm_destroy(vm);
}

static void test_notify_checks_its_stream(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    CHECK_EQ(ev_stream_notify(NULL, ccl_stream(0)), EV_EINVAL);
    CHECK_EQ(ev_stream_notify(vm, ccl_stream(ev_vm_thread_limit(vm) + 1)), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "no such stream");
    CHECK_OK(ev_stream_notify(vm, ccl_stream(0))); /* no thread yet: nothing to do */
    ev_vm_destroy(vm);
}

/* Many collectives in flight from several submitting threads, interleaved
 * with compute that reads them: every value arrives, in order per stream. */
enum { CHAIN = 200 };

typedef struct chain_arg {
    ev_vm *vm;
    uint32_t uid;
    long cells[CHAIN];
    long outs[CHAIN];
    later ls[CHAIN];
} chain_arg;

static void *run_chain(void *p)
{
    chain_arg *c = p;
    ev_obj *objs[CHAIN], *outs[CHAIN];
    for (int i = 0; i < CHAIN; i++) {
        CHECK_OK(ev_obj_create(c->vm, &objs[i]));
        CHECK_OK(ev_obj_create(c->vm, &outs[i]));
        later_init(&c->ls[i], &c->cells[i], i + 1000L * c->uid);
        atomic_store(&c->ls[i].release, 1);
        c->outs[i] = -1;
        submit_later(c->vm, 0, &c->ls[i], objs[i], EV_WRITE);
        submit_copy(c->vm, ev_cpu_stream(c->uid), &c->cells[i], objs[i], &c->outs[i], outs[i]);
    }
    for (int i = 0; i < CHAIN; i++) {
        CHECK_OK(ev_wait_obj(c->vm, outs[i], NULL));
        CHECK_EQ(c->outs[i], i + 1000L * c->uid);
        CHECK_OK(ev_obj_release(c->vm, objs[i], NULL, NULL));
        CHECK_OK(ev_obj_release(c->vm, outs[i], NULL, NULL));
    }
    return NULL;
}

static void test_many_in_flight_from_threads(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    static chain_arg args[3];
    pthread_t ts[3];
    for (uint32_t k = 0; k < 3; k++) {
        args[k].vm = vm;
        args[k].uid = k + 1;
        CHECK_EQ(pthread_create(&ts[k], NULL, run_chain, &args[k]), 0);
    }
    for (int k = 0; k < 3; k++) {
        CHECK_EQ(pthread_join(ts[k], NULL), 0);
    }
    CHECK_OK(ev_synchronize(vm, NULL));
    ev_vm_destroy(vm);
}

int main(void)
{
    RUN_TEST(test_ccl_runs_beside_compute);
    RUN_TEST(test_readers_wait_for_completion);
    RUN_TEST(test_in_flight_together_finish_in_order);
    RUN_TEST(test_same_stream_dependency);
    RUN_TEST(test_waiting_stream_keeps_polling);
    RUN_TEST(test_failed_completion);
    RUN_TEST(test_compute_stream_refuses);
    RUN_TEST(test_release_waits_for_completion);
    RUN_TEST(test_profile_spans_completion);
    RUN_TEST(test_waiting_for_completion_is_idle);
    RUN_TEST(test_notify_checks_its_stream);
    RUN_TEST(test_many_in_flight_from_threads);
    fprintf(stderr, "all passed\n");
    return 0;
}
