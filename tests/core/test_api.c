/* The public engine API, function by function: argument checking (every bad
 * call returns its documented EV_E* code and ev_last_message() says what was
 * wrong), error names, the thread uid pool and its environment variable, lazy
 * worker start, tickets, argument and operand copies, arg_drop, profiling,
 * stall reports and several runtimes side by side. EV_TEST_CONCURRENCY */
#include <dirent.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine_util.h"

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits until the gate has let `n` kernels in (up to 5 s). */
static void wait_entered(gate *g, int n)
{
    for (int i = 0; i < 5000 && atomic_load(&g->entered) < n; i++) {
        sleep_ms(1);
    }
    CHECK_GE(atomic_load(&g->entered), n);
}

static ev_vm_stats stats_of(ev_vm *vm)
{
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    return st;
}

/* ------------------------------------------------------ errors, names */

static void test_error_names(void)
{
    CHECK_STR_CONTAINS(ev_strerror(0), "success");
    CHECK_STR_CONTAINS(ev_err_name(0), "EV_OK");
#define EV_CHECK_CODE(name, val, desc)                                        \
    CHECK_EQ(EV_##name, val);                                                 \
    CHECK(strcmp(ev_strerror(EV_##name), desc) == 0);                         \
    CHECK(strcmp(ev_err_name(EV_##name), "EV_" #name) == 0);
    EV_ERRNO_MAP(EV_CHECK_CODE)
#undef EV_CHECK_CODE
    CHECK_STR_CONTAINS(ev_strerror(EV_EINDEX), "index out of range");
    CHECK_STR_CONTAINS(ev_err_name(EV_ETIMEDOUT), "EV_ETIMEDOUT");
    int unknown[] = {1, 42, -EV_ERRNO_COUNT - 1, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK_STR_CONTAINS(ev_strerror(unknown[i]), "unknown error");
        CHECK_STR_CONTAINS(ev_err_name(unknown[i]), "EV_UNKNOWN");
    }
    CHECK_STR_CONTAINS(ev_stream_type_name(EV_STREAM_COMPUTE), "compute");
    CHECK_STR_CONTAINS(ev_stream_type_name(EV_STREAM_BARRIER), "barrier");
    CHECK_STR_CONTAINS(ev_stream_type_name(EV_STREAM_TYPE_COUNT), "unknown");
    CHECK_STR_CONTAINS(ev_stream_type_name(-1), "unknown");
    CHECK(ev_last_message() != NULL);
}

/* --------------------------------------------------- argument checking */

static void test_null_arguments(void)
{
    ev_vm *vm = (ev_vm *)0x1; /* must be overwritten */
    CHECK_EQ(ev_vm_create(NULL, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "out is NULL");
    ev_vm_destroy(NULL);
    CHECK_EQ(ev_vm_thread_limit(NULL), 0);
    CHECK_OK(ev_vm_create(NULL, &vm));

    uint32_t uid = 77;
    CHECK_EQ(ev_vm_thread_acquire(NULL, &uid), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "must not be NULL");
    CHECK_EQ(ev_vm_thread_acquire(vm, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "uid_out");
    CHECK_EQ(uid, 77);
    CHECK_EQ(ev_vm_thread_release(NULL, 1), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "vm is NULL");

    ev_obj *obj = NULL;
    CHECK_EQ(ev_obj_create(NULL, &obj), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "must not be NULL");
    CHECK(obj == NULL);
    CHECK_EQ(ev_obj_create(vm, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "ev_obj_create");
    CHECK_OK(ev_obj_create(vm, &obj));
    CHECK_OK(ev_obj_release(vm, NULL, NULL, NULL)); /* documented: accepts NULL */
    CHECK_EQ(ev_obj_release(NULL, obj, NULL, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "vm is NULL");

    ev_error *err = (ev_error *)0x1;
    CHECK_EQ(ev_wait_obj(NULL, obj, &err), EV_EINVAL);
    CHECK(err == NULL);
    CHECK_STR_CONTAINS(ev_last_message(), "must not be NULL");
    err = (ev_error *)0x1;
    CHECK_EQ(ev_wait_obj(vm, NULL, &err), EV_EINVAL);
    CHECK(err == NULL);
    CHECK_STR_CONTAINS(ev_last_message(), "ev_wait_obj");

    err = (ev_error *)0x1;
    CHECK_EQ(ev_synchronize(NULL, &err), EV_EINVAL);
    CHECK(err == NULL);
    CHECK_STR_CONTAINS(ev_last_message(), "vm is NULL");
    CHECK_EQ(ev_synchronize_timeout(NULL, 10, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "vm is NULL");

    ev_prof_record *recs = NULL;
    size_t n = 0;
    CHECK_EQ(ev_vm_profile_take(NULL, &recs, &n), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "NULL");
    CHECK_EQ(ev_vm_profile_take(vm, NULL, &n), EV_EINVAL);
    CHECK_EQ(ev_vm_profile_take(vm, &recs, NULL), EV_EINVAL);
    ev_vm_profile_enable(NULL, 1); /* no crash */
    ev_error_unref(NULL);          /* documented: accepts NULL */
    ev_free(NULL);

    /* A stall report into no buffer still says how long it would be. */
    CHECK_GE(ev_vm_stall_report(vm, NULL, 0), 0);

    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

typedef struct bad_case {
    const char *what;
    ev_instr_desc d;
    const char *message;
} bad_case;

static _Atomic int rejected_drops;

static void drop_rejected(void *arg)
{
    (void)arg;
    atomic_fetch_add(&rejected_drops, 1);
}

static void test_bad_instructions_queue_nothing(void)
{
    ev_vm_config cfg = {.worker_thread_limit = 3};
    ev_vm *vm;
    CHECK_OK(ev_vm_create(&cfg, &vm));
    CHECK_EQ(ev_vm_thread_limit(vm), 3);
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    /* One good instruction, so the counters below start from something. */
    submit1(vm, 1, noop, NULL, 0, obj, EV_WRITE, "good");
    CHECK_OK(ev_synchronize(vm, NULL));
    ev_vm_stats before = stats_of(vm);
    CHECK_EQ(before.submitted, 1);

    long arg = 5;
    ev_operand op = {obj, EV_READ};
    ev_instr_desc good = {.kernel = noop,
                          .arg = &arg,
                          .arg_size = sizeof arg,
                          .arg_drop = drop_rejected,
                          .stream = ev_cpu_stream(3), /* a uid nothing else uses */
                          .operands = &op,
                          .n_operands = 1,
                          .name = "bad"};

    bad_case cases[12];
    int nc = 0;
    ev_instr_desc d;

    d = good;
    d.stream.thread_uid = 4; /* limit is 3 */
    cases[nc++] = (bad_case){"uid above limit", d, "EAGERVM_WORKER_THREAD_LIMIT"};
    d = good;
    d.stream.thread_uid = UINT32_MAX;
    cases[nc++] = (bad_case){"uid UINT32_MAX", d, "thread uid 4294967295"};
    d = good;
    d.stream.device_type = EV_DEVICE_CUDA;
    cases[nc++] = (bad_case){"cuda device", d, "cuda"};
    d = good;
    d.stream.device_index = 1;
    cases[nc++] = (bad_case){"cpu:1", d, "not available"};
    d = good;
    d.stream.device_type = 200;
    cases[nc++] = (bad_case){"unknown device", d, "not available"};
    d = good;
    d.stream.type = EV_STREAM_TYPE_COUNT;
    cases[nc++] = (bad_case){"stream type", d, "stream type 5"};
    d = good;
    d.kernel = NULL;
    cases[nc++] = (bad_case){"no kernel", d, "no kernel"};
    d = good;
    d.arg = NULL;
    cases[nc++] = (bad_case){"arg NULL", d, "arg is NULL"};
    d = good;
    d.operands = NULL;
    cases[nc++] = (bad_case){"operands NULL", d, "operands is NULL"};
    ev_operand no_obj = {NULL, EV_READ};
    d = good;
    d.operands = &no_obj;
    cases[nc++] = (bad_case){"operand without object", d, "operand 0 has no object"};
    ev_operand bad_access[2] = {{obj, EV_READ}, {obj, 4}};
    d = good;
    d.operands = bad_access;
    d.n_operands = 2;
    cases[nc++] = (bad_case){"bad access", d, "operand 1 has access 4"};
    ev_operand zero_access = {obj, 0};
    d = good;
    d.operands = &zero_access;
    cases[nc++] = (bad_case){"access 0", d, "access 0"};

    for (int i = 0; i < nc; i++) {
        fprintf(stderr, "   %s\n", cases[i].what);
        ev_ticket t = {.thread_uid = 99, .seq = 99};
        CHECK_EQ(ev_submit(vm, &cases[i].d, &t), EV_EINVAL);
        CHECK_STR_CONTAINS(ev_last_message(), cases[i].message);
        CHECK_EQ(t.thread_uid, 99);
        CHECK_EQ(t.seq, 99);
    }
    CHECK_EQ(ev_submit(NULL, &good, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "vm is NULL");
    CHECK_EQ(ev_submit(vm, NULL, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "no kernel");

    /* Barriers check their stream the same way. */
    ev_stream bs = {EV_DEVICE_CPU, 0, EV_STREAM_BARRIER, 0, 4};
    CHECK_EQ(ev_submit_barrier(vm, bs, NULL, NULL, 0, "fence", NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "thread uid 4");
    bs.thread_uid = 0;
    bs.device_type = EV_DEVICE_CUDA;
    CHECK_EQ(ev_submit_barrier(vm, bs, NULL, NULL, 0, "fence", NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "cuda");
    bs.device_type = EV_DEVICE_CPU;
    CHECK_EQ(ev_submit_barrier(vm, bs, NULL, NULL, 8, "fence", NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "arg is NULL");
    CHECK_EQ(ev_submit_barrier(NULL, bs, NULL, NULL, 0, "fence", NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "vm is NULL");

    ev_vm_stats after = stats_of(vm);
    CHECK_EQ(after.submitted, before.submitted);
    CHECK_EQ(after.completed, before.completed);
    CHECK_EQ(after.pending, 0);
    CHECK_EQ(after.workers_started, before.workers_started);
    /* The object's dependency state is untouched: a write after the failed
     * reads does not wait on anything. */
    submit1(vm, 2, noop, NULL, 0, obj, EV_WRITE, "after");
    CHECK_OK(ev_synchronize(vm, NULL));
    after = stats_of(vm);
    CHECK_EQ(after.submitted, before.submitted + 1);
    /* One edge, to "good" on uid 1: no rejected read on uid 3 was recorded. */
    CHECK_EQ(after.cross_edges, before.cross_edges + 1);

    /* Bad tickets. */
    ev_error *err = (ev_error *)0x1;
    CHECK_EQ(ev_wait_ticket(vm, (ev_ticket){.thread_uid = 1, .seq = 0}, &err), EV_EINVAL);
    CHECK(err == NULL);
    CHECK_STR_CONTAINS(ev_last_message(), "not a ticket");
    CHECK_EQ(ev_wait_ticket(vm, (ev_ticket){.thread_uid = 4, .seq = 1}, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "not a ticket");
    CHECK_EQ(ev_wait_ticket(vm, (ev_ticket){.thread_uid = 3, .seq = 1}, NULL), EV_EINVAL); /* uid 3 never ran */
    CHECK_STR_CONTAINS(ev_last_message(), "never issued");
    CHECK_EQ(ev_wait_ticket(vm, (ev_ticket){.thread_uid = 1, .seq = 2}, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "ticket 1:2 was never issued");
    CHECK_EQ(ev_wait_ticket(NULL, (ev_ticket){.thread_uid = 1, .seq = 1}, NULL), EV_EINVAL);
    CHECK_OK(ev_wait_ticket(vm, (ev_ticket){.thread_uid = 1, .seq = 1}, NULL));

    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
    CHECK_EQ(atomic_load(&rejected_drops), 0);
}

/* ------------------------------------------------------- uid pool, env */

static void test_thread_uid_pool(void)
{
    ev_vm_config cfg = {.worker_thread_limit = 3};
    ev_vm *vm;
    CHECK_OK(ev_vm_create(&cfg, &vm));
    CHECK_EQ(ev_vm_thread_limit(vm), 3);
    uint32_t got[3];
    unsigned seen = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ev_vm_thread_acquire(vm, &got[i]));
        CHECK_GE(got[i], 1);
        CHECK_LE(got[i], 3);
        CHECK_EQ(seen & (1u << got[i]), 0); /* no uid handed out twice */
        seen |= 1u << got[i];
    }
    uint32_t extra = 1234;
    CHECK_EQ(ev_vm_thread_acquire(vm, &extra), EV_ELIMIT);
    CHECK_EQ(extra, 1234);
    CHECK_STR_CONTAINS(ev_last_message(), "EAGERVM_WORKER_THREAD_LIMIT");
    CHECK_STR_CONTAINS(ev_last_message(), "3");

    CHECK_OK(ev_vm_thread_release(vm, got[1]));
    uint32_t again = 0;
    CHECK_OK(ev_vm_thread_acquire(vm, &again));
    CHECK_EQ(again, got[1]);
    CHECK_EQ(ev_vm_thread_acquire(vm, &extra), EV_ELIMIT);

    CHECK_EQ(ev_vm_thread_release(vm, 0), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "thread uid 0 is not taken");
    CHECK_EQ(ev_vm_thread_release(vm, 4), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "thread uid 4");
    CHECK_EQ(ev_vm_thread_release(vm, UINT32_MAX), EV_EINVAL);
    CHECK_OK(ev_vm_thread_release(vm, got[0]));
    CHECK_EQ(ev_vm_thread_release(vm, got[0]), EV_EINVAL); /* twice */
    CHECK_STR_CONTAINS(ev_last_message(), "is not taken");

    /* Work issued on a released uid still runs. */
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    submit1(vm, got[2], noop, NULL, 0, obj, EV_WRITE, "w");
    CHECK_OK(ev_vm_thread_release(vm, got[2]));
    CHECK_OK(ev_wait_obj(vm, obj, NULL));
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);

    /* Above the hard maximum. */
    cfg.worker_thread_limit = 1u << 20;
    vm = (ev_vm *)0x1;
    CHECK_EQ(ev_vm_create(&cfg, &vm), EV_EINVAL);
    CHECK(vm == NULL);
    CHECK_STR_CONTAINS(ev_last_message(), "worker_thread_limit");
}

static void test_thread_limit_from_environment(void)
{
    CHECK_EQ(setenv("EAGERVM_WORKER_THREAD_LIMIT", "5", 1), 0);
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    CHECK_EQ(ev_vm_thread_limit(vm), 5);
    uint32_t uid;
    for (int i = 0; i < 5; i++) {
        CHECK_OK(ev_vm_thread_acquire(vm, &uid));
    }
    CHECK_EQ(ev_vm_thread_acquire(vm, &uid), EV_ELIMIT);
    CHECK_STR_CONTAINS(ev_last_message(), "EAGERVM_WORKER_THREAD_LIMIT");
    ev_vm_destroy(vm);

    /* The config wins over the environment. */
    ev_vm_config cfg = {.worker_thread_limit = 2};
    CHECK_OK(ev_vm_create(&cfg, &vm));
    CHECK_EQ(ev_vm_thread_limit(vm), 2);
    ev_vm_destroy(vm);

    const char *bad[] = {"abc", "-3", "3x", "99999999999999999999", "4097", " -1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(setenv("EAGERVM_WORKER_THREAD_LIMIT", bad[i], 1), 0);
        vm = (ev_vm *)0x1;
        int rc = ev_vm_create(NULL, &vm);
        if (rc != EV_EINVAL) {
            fprintf(stderr, "   EAGERVM_WORKER_THREAD_LIMIT=\"%s\"\n", bad[i]);
        }
        CHECK_EQ(rc, EV_EINVAL);
        CHECK(vm == NULL);
        CHECK_STR_CONTAINS(ev_last_message(), "EAGERVM_WORKER_THREAD_LIMIT");
        CHECK_STR_CONTAINS(ev_last_message(), bad[i]);
        /* A config value does not excuse a bad environment. */
        CHECK_EQ(ev_vm_create(&cfg, &vm), EV_EINVAL);
    }
    CHECK_EQ(setenv("EAGERVM_MAX_PENDING", "lots", 1), 0);
    CHECK_EQ(unsetenv("EAGERVM_WORKER_THREAD_LIMIT"), 0);
    CHECK_EQ(ev_vm_create(NULL, &vm), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "EAGERVM_MAX_PENDING");
    CHECK_EQ(unsetenv("EAGERVM_MAX_PENDING"), 0);

    /* Unset, empty or 0: the default of 16. */
    CHECK_OK(ev_vm_create(NULL, &vm));
    CHECK_EQ(ev_vm_thread_limit(vm), 16);
    ev_vm_destroy(vm);
    CHECK_EQ(setenv("EAGERVM_WORKER_THREAD_LIMIT", "0", 1), 0);
    CHECK_OK(ev_vm_create(NULL, &vm));
    CHECK_EQ(ev_vm_thread_limit(vm), 16);
    ev_vm_destroy(vm);
    CHECK_EQ(unsetenv("EAGERVM_WORKER_THREAD_LIMIT"), 0);
}

/* ------------------------------------------------------ lazy workers */

/* Counts this process's threads named ev-worker-*. */
static int count_worker_threads(void)
{
    DIR *dir = opendir("/proc/self/task");
    CHECK(dir != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[300], comm[64] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) {
            continue; /* the thread just ended */
        }
        if (fgets(comm, sizeof comm, f) && strncmp(comm, "ev-worker-", 10) == 0) {
            n++;
        }
        fclose(f);
    }
    closedir(dir);
    return n;
}

/* count_worker_threads() once it is `want`, waiting up to 2 s: pthread_join
 * returns when the kernel clears the thread's tid, a moment before its task
 * leaves /proc/self/task, so a count right after ev_vm_destroy may still
 * see a joined worker. */
static int count_worker_threads_settled(int want)
{
    int n = count_worker_threads();
    for (int i = 0; i < 200 && n != want; i++) {
        usleep(10000);
        n = count_worker_threads();
    }
    return n;
}

static void test_workers_start_lazily(void)
{
    CHECK_EQ(count_worker_threads_settled(0), 0); /* earlier tests' are joined */
    ev_vm_config cfg = {.worker_thread_limit = 3};
    ev_vm *vm;
    CHECK_OK(ev_vm_create(&cfg, &vm));
    CHECK_EQ(stats_of(vm).workers_started, 0);
    uint32_t a, b;
    CHECK_OK(ev_vm_thread_acquire(vm, &a));
    CHECK_OK(ev_vm_thread_acquire(vm, &b));
    CHECK_EQ(b, 2);
    CHECK_EQ(stats_of(vm).workers_started, 0);
    CHECK_OK(ev_synchronize(vm, NULL)); /* nothing to wait for */
    CHECK_EQ(stats_of(vm).workers_started, 0);
    CHECK_EQ(count_worker_threads(), 0);

    ev_ticket t;
    ev_instr_desc d = {.kernel = noop, .stream = ev_cpu_stream(b), .name = "first"};
    CHECK_OK(ev_submit(vm, &d, &t));
    CHECK_EQ(t.thread_uid, 2);
    CHECK_EQ(t.seq, 1);
    CHECK_EQ(stats_of(vm).workers_started, 1);
    CHECK_OK(ev_synchronize(vm, NULL)); /* the worker named itself before running */
    CHECK_EQ(count_worker_threads(), 1);
    CHECK_OK(ev_submit(vm, &d, &t));
    CHECK_EQ(t.seq, 2);
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(stats_of(vm).workers_started, 1);
    CHECK_EQ(count_worker_threads(), 1);
    /* One worker never waits for a peer, so it never moves off a CPU. */
    CHECK_EQ(stats_of(vm).cpu_moves, 0);
    /* A barrier on uid 0 starts uid 0's worker. */
    CHECK_OK(ev_submit_barrier(vm, ev_cpu_stream(0), NULL, NULL, 0, NULL, NULL));
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(stats_of(vm).workers_started, 2);
    CHECK_EQ(count_worker_threads(), 2);
    ev_vm_destroy(vm);
    CHECK_EQ(count_worker_threads_settled(0), 0); /* joined */
}

/* ------------------------------------------------------------ tickets */

typedef struct fail_op {
    int fail_with;
    _Atomic uint32_t *uid_seen;
} fail_op;

static int maybe_fail(void *arg, ev_kctx *kc)
{
    fail_op *op = arg;
    if (op->uid_seen) {
        atomic_store(op->uid_seen, ev_kctx_thread_uid(kc));
    }
    if (op->fail_with == EV_EINDEX) {
        return ev_kctx_fail(kc, EV_EINDEX, "index %d out of range", 12);
    }
    if (op->fail_with) {
        return ev_kctx_fail(kc, op->fail_with, "odd code %d", op->fail_with);
    }
    return 0;
}

/* Returns the code as a plain int without a message. */
static int bare_fail(void *arg, ev_kctx *kc)
{
    (void)kc;
    return *(int *)arg;
}

static void test_tickets_and_kernel_context(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    static const ev_site site = {"api.py", "step", 3};
    fail_op good = {0, NULL}, bad = {EV_EINDEX, NULL};
    ev_instr_desc d = {.kernel = maybe_fail,
                       .arg = &good,
                       .arg_size = sizeof good,
                       .stream = ev_cpu_stream(1),
                       .name = "ok"};
    ev_ticket t_good, t_bad, t_after;
    CHECK_OK(ev_submit(vm, &d, &t_good));
    d.arg = &bad;
    d.name = "lookup";
    d.site = &site;
    ev_operand op = {obj, EV_WRITE};
    d.operands = &op;
    d.n_operands = 1;
    CHECK_OK(ev_submit(vm, &d, &t_bad));
    d.arg = &good;
    d.name = "later";
    d.site = NULL;
    d.operands = NULL;
    d.n_operands = 0;
    CHECK_OK(ev_submit(vm, &d, &t_after));
    CHECK_EQ(t_good.thread_uid, 1);
    CHECK_EQ(t_bad.seq, t_good.seq + 1);

    ev_error *err = (ev_error *)0x1;
    CHECK_OK(ev_wait_ticket(vm, t_good, &err));
    CHECK(err == NULL);
    CHECK_EQ(ev_wait_ticket(vm, t_bad, &err), EV_EINDEX);
    CHECK(err != NULL);
    CHECK_STR_CONTAINS(ev_last_message(), "lookup failed at api.py:3 in step");
    CHECK_STR_CONTAINS(ev_last_message(), "index 12 out of range");
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_EQ(info.code, EV_EINDEX);
    CHECK_STR_CONTAINS(info.name, "lookup");
    CHECK_STR_CONTAINS(info.message, "index 12 out of range");
    CHECK(info.site == &site);
    CHECK_EQ(info.thread_uid, 1);
    CHECK_EQ(info.seq, t_bad.seq);
    char small[8];
    int want = ev_error_format(err, small, sizeof small);
    CHECK_EQ(strlen(small), sizeof small - 1);
    char *big = malloc((size_t)want + 1);
    CHECK(big != NULL);
    CHECK_EQ(ev_error_format(err, big, (size_t)want + 1), want);
    CHECK_EQ(strlen(big), (size_t)want);
    CHECK_STR_CONTAINS(big, "lookup failed at api.py:3 in step: index 12 out of range");
    free(big);
    ev_error_ref(err);
    ev_error_unref(err);
    ev_error_unref(err);
    CHECK_OK(ev_wait_ticket(vm, t_after, NULL)); /* the failure does not spread */
    CHECK_OK(ev_wait_ticket(vm, t_good, NULL));  /* asking twice is fine */
    CHECK_EQ(ev_wait_ticket(vm, t_bad, NULL), EV_EINDEX);
    /* The ticket's wait reported the error: synchronize does not raise it. */
    CHECK_OK(ev_synchronize(vm, NULL));
    CHECK_EQ(ev_wait_obj(vm, obj, NULL), EV_EPOISON);

    /* Codes that are not EV_E* become EV_EKERNEL, with the kernel's message
     * or, for a bare return, the code's description. */
    int odd[] = {7, -1000};
    for (int i = 0; i < 2; i++) {
        fail_op f = {odd[i], NULL};
        ev_instr_desc fd = {.kernel = maybe_fail,
                            .arg = &f,
                            .arg_size = sizeof f,
                            .stream = ev_cpu_stream(2),
                            .name = "odd"};
        ev_ticket t;
        CHECK_OK(ev_submit(vm, &fd, &t));
        CHECK_EQ(ev_wait_ticket(vm, t, NULL), EV_EKERNEL);
        CHECK_STR_CONTAINS(ev_last_message(), "odd code");
    }
    int code = EV_EVALUE;
    ev_instr_desc bd = {.kernel = bare_fail,
                        .arg = &code,
                        .arg_size = sizeof code,
                        .stream = ev_cpu_stream(2),
                        .name = "bare"};
    ev_ticket t_bare;
    CHECK_OK(ev_submit(vm, &bd, &t_bare));
    CHECK_EQ(ev_wait_ticket(vm, t_bare, NULL), EV_EVALUE);
    CHECK_STR_CONTAINS(ev_last_message(), "bare failed: invalid value");

    /* ev_kctx_thread_uid names the worker each kernel runs on. */
    _Atomic uint32_t seen[5];
    for (uint32_t u = 0; u < 5; u++) {
        atomic_init(&seen[u], 999);
        fail_op f = {0, &seen[u]};
        uint32_t uid = u == 4 ? 16 : u;
        ev_instr_desc ud = {.kernel = maybe_fail,
                            .arg = &f,
                            .arg_size = sizeof f,
                            .stream = ev_cpu_stream(uid),
                            .name = "where"};
        ev_ticket t;
        CHECK_OK(ev_submit(vm, &ud, &t));
        CHECK_EQ(t.thread_uid, uid);
    }
    CHECK_OK(ev_synchronize(vm, NULL));
    for (uint32_t u = 0; u < 5; u++) {
        CHECK_EQ(atomic_load(&seen[u]), u == 4 ? 16 : u);
    }
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

/* ---------------------------------------- big arguments, many operands */

enum { BIG_WORDS = 100, MANY = 9 }; /* 800 bytes > EV_INLINE_ARG_SIZE */

typedef struct big_arg {
    uint64_t words[BIG_WORDS];
    _Atomic int *bad;       /* set when the kernel sees a changed copy */
    _Atomic int *ran;
    int fail;
} big_arg;

static int check_big(void *arg, ev_kctx *kc)
{
    big_arg *a = arg;
    for (int i = 0; i < BIG_WORDS; i++) {
        if (a->words[i] != (uint64_t)i * 0x9e3779b97f4a7c15ull) {
            atomic_store(a->bad, 1);
        }
    }
    atomic_fetch_add(a->ran, 1);
    return a->fail ? ev_kctx_fail(kc, EV_EVALUE, "asked to fail") : 0;
}

static _Atomic int big_drops;
static _Atomic int big_drop_bad;

static void drop_big(void *arg)
{
    big_arg *a = arg;
    if (a->words[BIG_WORDS - 1] != (uint64_t)(BIG_WORDS - 1) * 0x9e3779b97f4a7c15ull) {
        atomic_store(&big_drop_bad, 1);
    }
    atomic_fetch_add(&big_drops, 1);
}

static void test_big_args_and_many_operands_are_copied(void)
{
    CHECK_GT(sizeof(big_arg), EV_INLINE_ARG_SIZE);
    CHECK_GT(MANY, EV_INLINE_OPERANDS);
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    ev_obj *blocker_obj, *objs[MANY], *decoys[MANY];
    CHECK_OK(ev_obj_create(vm, &blocker_obj));
    for (int i = 0; i < MANY; i++) {
        CHECK_OK(ev_obj_create(vm, &objs[i]));
        CHECK_OK(ev_obj_create(vm, &decoys[i]));
        /* Last written on five different workers: more cross edges than
         * EV_INLINE_DEPS. */
        submit1(vm, (uint32_t)(2 + i % 5), noop, NULL, 0, objs[i], EV_WRITE, "init");
    }
    /* Hold uid 1 so the instructions below run well after submission. */
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, blocker_obj, EV_WRITE, "blocker");
    wait_entered(&g, 1);

    _Atomic int bad = 0, ran = 0;
    big_arg a;
    for (int i = 0; i < BIG_WORDS; i++) {
        a.words[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
    }
    a.bad = &bad;
    a.ran = &ran;
    a.fail = 0;
    ev_operand ops[MANY];
    for (int i = 0; i < MANY; i++) {
        ops[i] = (ev_operand){objs[i], i == 0 ? EV_READ : EV_READ_WRITE};
    }
    ev_instr_desc d = {.kernel = check_big,
                       .arg = &a,
                       .arg_size = sizeof a,
                       .arg_drop = drop_big,
                       .stream = ev_cpu_stream(1),
                       .operands = ops,
                       .n_operands = MANY,
                       .name = "big"};
    uint64_t cross_before = stats_of(vm).cross_edges;
    CHECK_OK(ev_submit(vm, &d, NULL));
    CHECK_EQ(stats_of(vm).cross_edges, cross_before + 5);
    /* A failing one as well: it poisons what its (copied) operands name. */
    a.fail = 1;
    CHECK_OK(ev_submit(vm, &d, NULL));
    /* Scribble over the caller's copies at once. */
    memset(a.words, 0xab, sizeof a.words);
    a.fail = 0;
    for (int i = 0; i < MANY; i++) {
        ops[i] = (ev_operand){decoys[i], EV_WRITE};
    }
    sleep_ms(10);
    CHECK_EQ(atomic_load(&ran), 0);
    gate_open(&g);

    ev_error *err = NULL;
    CHECK_EQ(ev_synchronize(vm, &err), EV_EVALUE);
    CHECK_STR_CONTAINS(ev_last_message(), "asked to fail");
    ev_error_unref(err);
    CHECK_EQ(atomic_load(&ran), 2);
    CHECK_EQ(atomic_load(&bad), 0);
    CHECK_EQ(atomic_load(&big_drops), 2);
    CHECK_EQ(atomic_load(&big_drop_bad), 0);
    /* objs[0] was only read; the other originals were written and poisoned. */
    CHECK_OK(ev_wait_obj(vm, objs[0], NULL));
    for (int i = 1; i < MANY; i++) {
        CHECK_EQ(ev_wait_obj(vm, objs[i], NULL), EV_EPOISON);
    }
    for (int i = 0; i < MANY; i++) {
        CHECK_OK(ev_wait_obj(vm, decoys[i], NULL));
    }
    CHECK_OK(ev_obj_release(vm, blocker_obj, NULL, NULL));
    for (int i = 0; i < MANY; i++) {
        CHECK_OK(ev_obj_release(vm, objs[i], NULL, NULL));
        CHECK_OK(ev_obj_release(vm, decoys[i], NULL, NULL));
    }
    gate_destroy(&g);
    ev_vm_destroy(vm);
}

/* Arguments of every size up to past the inline buffer arrive byte for
 * byte: the copy goes in 16-, 8-, 4-, 2- and 1-byte steps. Byte 0 holds the
 * size (all sizes here are below 256), the rest a pattern of size and
 * position. */
enum { ARG_SIZES = EV_INLINE_ARG_SIZE + 40 };
static _Atomic int arg_seen[ARG_SIZES + 1];

static uint8_t arg_byte(size_t n, size_t i)
{
    return i == 0 ? (uint8_t)n : (uint8_t)(n * 31 + i * 7);
}

static int check_arg_bytes(void *arg, ev_kctx *kc)
{
    (void)kc;
    const uint8_t *b = arg;
    size_t n = b[0];
    int good = 1;
    for (size_t i = 1; i < n; i++) {
        good &= b[i] == arg_byte(n, i);
    }
    atomic_store(&arg_seen[n], good ? 1 : -1);
    return 0;
}

static void test_args_of_every_size_are_copied(void)
{
    _Static_assert(ARG_SIZES < 256, "sizes fit in the first byte");
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *obj;
    CHECK_OK(ev_obj_create(vm, &obj));
    ev_operand op = {obj, EV_READ_WRITE};
    uint8_t buf[ARG_SIZES];
    for (size_t n = 1; n <= ARG_SIZES; n++) {
        for (size_t i = 0; i < n; i++) {
            buf[i] = arg_byte(n, i);
        }
        ev_instr_desc d = {.kernel = check_arg_bytes,
                           .arg = buf,
                           .arg_size = n,
                           .stream = ev_cpu_stream(1),
                           .operands = &op,
                           .n_operands = 1,
                           .name = "arg bytes"};
        CHECK_OK(ev_submit(vm, &d, NULL));
        memset(buf, 0xee, sizeof buf); /* the instruction holds its own copy */
    }
    CHECK_OK(ev_synchronize(vm, NULL));
    for (size_t n = 1; n <= ARG_SIZES; n++) {
        if (atomic_load(&arg_seen[n]) != 1) {
            printf("   arg of %zu bytes: %d\n", n, atomic_load(&arg_seen[n]));
        }
        CHECK_EQ(atomic_load(&arg_seen[n]), 1);
    }
    CHECK_OK(ev_obj_release(vm, obj, NULL, NULL));
    ev_vm_destroy(vm);
}

/* ------------------------------------------------------------- arg_drop */

enum { DROP_N = 40 };

typedef struct drop_arg {
    int index;
    _Atomic int *drops;  /* [DROP_N] */
    _Atomic int *runs;   /* [DROP_N] */
    void *caller_copy;   /* the caller's address of this struct */
    _Atomic int *wrong;
} drop_arg;

static int count_run(void *arg, ev_kctx *kc)
{
    drop_arg *a = arg;
    atomic_fetch_add(&a->runs[a->index], 1);
    if (a->index == 0) {
        return ev_kctx_fail(kc, EV_EINDEX, "first one fails");
    }
    return 0;
}

static void count_drop(void *arg)
{
    drop_arg *a = arg;
    if (arg == a->caller_copy) {
        atomic_store(a->wrong, 1); /* handed the caller's struct, not the copy */
    }
    atomic_fetch_add(&a->drops[a->index], 1);
}

static void test_arg_drop_once_per_instruction(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    _Atomic int drops[DROP_N], runs[DROP_N], wrong = 0;
    for (int i = 0; i < DROP_N; i++) {
        atomic_init(&drops[i], 0);
        atomic_init(&runs[i], 0);
    }
    ev_obj *src, *mid, *clean;
    CHECK_OK(ev_obj_create(vm, &src));
    CHECK_OK(ev_obj_create(vm, &mid));
    CHECK_OK(ev_obj_create(vm, &clean));
    /* 0 fails writing src; 1..DROP_N/2-1 read src or mid (poisoned) and
     * write mid, so they are skipped; the rest run on a clean object. */
    for (int i = 0; i < DROP_N; i++) {
        drop_arg a = {i, drops, runs, NULL, &wrong};
        a.caller_copy = &a;
        ev_operand ops[2];
        size_t n = 0;
        if (i == 0) {
            ops[n++] = (ev_operand){src, EV_WRITE};
        } else if (i < DROP_N / 2) {
            ops[n++] = (ev_operand){i % 2 ? src : mid, EV_READ};
            ops[n++] = (ev_operand){mid, EV_WRITE};
        } else {
            ops[n++] = (ev_operand){clean, EV_READ_WRITE};
        }
        ev_instr_desc d = {.kernel = count_run,
                           .arg = &a,
                           .arg_size = sizeof a,
                           .arg_drop = count_drop,
                           .stream = ev_cpu_stream((uint32_t)(i % 3)),
                           .operands = ops,
                           .n_operands = n,
                           .name = "drop"};
        if (i % 10 == 5) {
            /* A rejected submit must not call arg_drop. */
            ev_instr_desc rejected = d;
            rejected.stream.thread_uid = 100000;
            CHECK_EQ(ev_submit(vm, &rejected, NULL), EV_EINVAL);
        }
        CHECK_OK(ev_submit(vm, &d, NULL));
    }
    ev_error *err = NULL;
    CHECK_EQ(ev_synchronize(vm, &err), EV_EINDEX);
    ev_error_unref(err);
    for (int i = 0; i < DROP_N; i++) {
        CHECK_EQ(atomic_load(&drops[i]), 1);
        CHECK_EQ(atomic_load(&runs[i]), i == 0 || i >= DROP_N / 2 ? 1 : 0);
    }
    CHECK_EQ(atomic_load(&wrong), 0);
    ev_vm_stats st = stats_of(vm);
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, DROP_N / 2 - 1);
    CHECK_OK(ev_obj_release(vm, src, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, mid, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, clean, NULL, NULL));
    ev_vm_destroy(vm);
    for (int i = 0; i < DROP_N; i++) {
        CHECK_EQ(atomic_load(&drops[i]), 1);
    }
}

/* ------------------------------------------------------------ profiling */

static const char *const prof_names[2] = {"prof.alpha", "prof.beta"};

static void test_profiling(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_obj *objs[2];
    CHECK_OK(ev_obj_create(vm, &objs[0]));
    CHECK_OK(ev_obj_create(vm, &objs[1]));
    /* Off by default: nothing recorded. */
    submit1(vm, 1, noop, NULL, 0, objs[0], EV_WRITE, "unrecorded");
    ev_prof_record *recs = NULL;
    size_t n = 99;
    CHECK_OK(ev_vm_profile_take(vm, &recs, &n));
    CHECK_EQ(n, 0);
    ev_free(recs);

    static const ev_site site = {"prof.py", "loop", 9};
    ev_vm_profile_enable(vm, 1);
    enum { N = 100 };
    for (int i = 0; i < N; i++) {
        int w = i % 2;
        /* uid 1 writes objs[0], uid 2 reads it and writes objs[1]: some
         * instructions wait on the other worker. */
        ev_operand ops[2] = {{objs[0], w ? EV_READ : EV_WRITE}, {objs[1], EV_WRITE}};
        ev_instr_desc d = {.kernel = noop,
                           .stream = ev_cpu_stream((uint32_t)(1 + w)),
                           .operands = ops,
                           .n_operands = w ? 2 : 1,
                           .name = prof_names[w],
                           .site = w ? &site : NULL};
        CHECK_OK(ev_submit(vm, &d, NULL));
    }
    CHECK_OK(ev_vm_profile_take(vm, &recs, &n));
    CHECK_EQ(n, N);
    uint64_t next_seq[3] = {0, 2, 1}; /* uid 1 ran "unrecorded" first */
    int count[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        const ev_prof_record *r = &recs[i];
        uint32_t uid = r->stream.thread_uid;
        CHECK(uid == 1 || uid == 2);
        CHECK(r->name == prof_names[uid - 1]); /* the borrowed static string */
        CHECK(r->site == (uid == 2 ? &site : NULL));
        CHECK_EQ(r->stream.device_type, EV_DEVICE_CPU);
        CHECK_EQ(r->stream.type, EV_STREAM_COMPUTE);
        CHECK_EQ(r->seq, next_seq[uid]);
        next_seq[uid]++;
        count[uid - 1]++;
        CHECK_EQ(r->failed, 0);
        CHECK_GT(r->issue_ns, 0);
        CHECK_LE(r->issue_ns, r->start_ns);
        CHECK_LE(r->start_ns, r->end_ns);
        if (i > 0) {
            CHECK_LE(recs[i - 1].issue_ns, r->issue_ns);
        }
    }
    CHECK_EQ(count[0], N / 2);
    CHECK_EQ(count[1], N / 2);
    ev_free(recs);
    /* Taken means moved: a second take is empty. */
    CHECK_OK(ev_vm_profile_take(vm, &recs, &n));
    CHECK_EQ(n, 0);
    ev_free(recs);

    /* Failed and skipped instructions are marked. */
    int code = EV_EINDEX;
    ev_operand fo = {objs[0], EV_WRITE};
    ev_instr_desc fd = {.kernel = bare_fail,
                        .arg = &code,
                        .arg_size = sizeof code,
                        .stream = ev_cpu_stream(1),
                        .operands = &fo,
                        .n_operands = 1,
                        .name = "prof.fail"};
    CHECK_OK(ev_submit(vm, &fd, NULL));
    submit1(vm, 2, noop, NULL, 0, objs[0], EV_READ, "prof.skip");
    CHECK_OK(ev_vm_profile_take(vm, &recs, &n));
    CHECK_EQ(n, 2);
    CHECK_EQ(strcmp(recs[0].name, "prof.fail"), 0);
    CHECK_EQ(recs[0].failed, 1);
    CHECK_EQ(strcmp(recs[1].name, "prof.skip"), 0);
    CHECK_EQ(recs[1].failed, 2);
    ev_free(recs);
    ev_error *err = NULL;
    CHECK_EQ(ev_synchronize(vm, &err), EV_EINDEX);
    ev_error_unref(err);

    /* Disabled: nothing new. */
    ev_vm_profile_enable(vm, 0);
    for (int i = 0; i < N; i++) {
        submit1(vm, (uint32_t)(1 + i % 2), noop, NULL, 0, objs[1], EV_READ_WRITE, "off");
    }
    CHECK_OK(ev_vm_profile_take(vm, &recs, &n));
    CHECK_EQ(n, 0);
    ev_free(recs);
    CHECK_EQ(stats_of(vm).pending, 0); /* take waited for the work */
    CHECK_OK(ev_obj_release(vm, objs[0], NULL, NULL));
    CHECK_OK(ev_obj_release(vm, objs[1], NULL, NULL));
    ev_vm_destroy(vm);
}

/* -------------------------------------------------------- stall reports */

static void test_stall_report_and_timeout(void)
{
    ev_vm_config cfg = {.stall_timeout_ms = 50};
    ev_vm *vm;
    CHECK_OK(ev_vm_create(&cfg, &vm));
    ev_obj *a, *b;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_OK(ev_obj_create(vm, &b));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    ev_ticket t_block;
    ev_operand wa = {a, EV_WRITE};
    ev_instr_desc bd = {.kernel = gate_kernel,
                        .arg = &gp,
                        .arg_size = sizeof gp,
                        .stream = ev_cpu_stream(1),
                        .operands = &wa,
                        .n_operands = 1,
                        .name = "stuck.kernel"};
    CHECK_OK(ev_submit(vm, &bd, &t_block));
    ev_operand rb[2] = {{a, EV_READ}, {b, EV_WRITE}};
    ev_instr_desc cd = {.kernel = noop,
                        .stream = ev_cpu_stream(2),
                        .operands = rb,
                        .n_operands = 2,
                        .name = "cross.consumer"};
    ev_ticket t_cons;
    CHECK_OK(ev_submit(vm, &cd, &t_cons));
    submit1(vm, 2, noop, NULL, 0, b, EV_READ, "queued.behind");
    wait_entered(&g, 1);

    char buf[4096];
    char want_wait[128];
    snprintf(want_wait, sizeof want_wait, "'cross.consumer' waits for instruction 1:%llu",
             (unsigned long long)t_block.seq);
    int len = 0;
    for (int i = 0; i < 5000; i++) {
        len = ev_vm_stall_report(vm, buf, sizeof buf);
        if (strstr(buf, "waits for")) {
            break;
        }
        sleep_ms(1);
    }
    fprintf(stderr, "%s", buf);
    CHECK_EQ((size_t)len, strlen(buf));
    CHECK_STR_CONTAINS(buf, "thread 1");
    CHECK_STR_CONTAINS(buf, "running instruction 1:1 'stuck.kernel'");
    CHECK_STR_CONTAINS(buf, want_wait);
    CHECK_STR_CONTAINS(buf, "thread 2 (cpu compute stream): 2 queued");
    /* Truncation works like snprintf. */
    char small[16];
    CHECK_EQ(ev_vm_stall_report(vm, small, sizeof small), len);
    CHECK_EQ(strlen(small), sizeof small - 1);

    /* A timed synchronize gives up; the stall timeout fires along the way
     * (its report goes to stderr). */
    int64_t t0 = wall_ns();
    ev_error *err = (ev_error *)0x1;
    CHECK_EQ(ev_synchronize_timeout(vm, 200, &err), EV_ETIMEDOUT);
    int64_t took = wall_ns() - t0;
    CHECK(err == NULL);
    CHECK_STR_CONTAINS(ev_last_message(), "200 ms");
    CHECK_GE(took, 190 * 1000000LL);
    CHECK_LT(took, 5000 * 1000000LL);
    CHECK_EQ(ev_synchronize_timeout(vm, 0, NULL), EV_ETIMEDOUT);
    CHECK_EQ(stats_of(vm).completed, 0);

    gate_open(&g);
    CHECK_OK(ev_synchronize_timeout(vm, 10000, NULL));
    CHECK_OK(ev_wait_ticket(vm, t_cons, NULL));
    len = ev_vm_stall_report(vm, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "idle");
    CHECK(strstr(buf, "waits for") == NULL);
    CHECK(strstr(buf, "running") == NULL);
    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, b, NULL, NULL));
    gate_destroy(&g);
    ev_vm_destroy(vm);
}

/* ------------------------------------------------------ several runtimes */

static void test_several_runtimes_are_independent(void)
{
    ev_vm_config ca = {.worker_thread_limit = 2}, cb = {.worker_thread_limit = 4};
    ev_vm *va, *vb;
    CHECK_OK(ev_vm_create(&ca, &va));
    CHECK_OK(ev_vm_create(&cb, &vb));
    CHECK_EQ(ev_vm_thread_limit(va), 2);
    CHECK_EQ(ev_vm_thread_limit(vb), 4);
    /* Separate uid pools. */
    uint32_t u;
    CHECK_OK(ev_vm_thread_acquire(va, &u));
    CHECK_OK(ev_vm_thread_acquire(va, &u));
    CHECK_EQ(ev_vm_thread_acquire(va, &u), EV_ELIMIT);
    CHECK_OK(ev_vm_thread_acquire(vb, &u));
    CHECK_EQ(u, 1);

    /* Block runtime a's uid 1; runtime b's uid 1 keeps going. */
    gate g;
    gate_init(&g);
    gate *gp = &g;
    ev_obj *oa, *ob;
    CHECK_OK(ev_obj_create(va, &oa));
    CHECK_OK(ev_obj_create(vb, &ob));
    submit1(va, 1, gate_kernel, &gp, sizeof gp, oa, EV_WRITE, "a.blocked");
    wait_entered(&g, 1);
    long cell = 0;
    for (int i = 0; i < 200; i++) {
        submit1(vb, (uint32_t)(1 + i % 4), noop, NULL, 0, ob, EV_READ_WRITE, "b.work");
    }
    /* A failure in b does not show in a. */
    int code = EV_EVALUE;
    ev_instr_desc fd = {.kernel = bare_fail,
                        .arg = &code,
                        .arg_size = sizeof code,
                        .stream = ev_cpu_stream(1),
                        .name = "b.fail"};
    CHECK_OK(ev_submit(vb, &fd, NULL));
    CHECK_EQ(ev_synchronize_timeout(vb, 10000, NULL), EV_EVALUE);
    (void)cell;
    ev_vm_stats sa = stats_of(va), sb = stats_of(vb);
    CHECK_EQ(sa.submitted, 1);
    CHECK_EQ(sa.completed, 0);
    CHECK_EQ(sa.failed, 0);
    CHECK_EQ(sa.workers_started, 1);
    CHECK_EQ(sb.submitted, 201);
    CHECK_EQ(sb.completed, 201);
    CHECK_EQ(sb.failed, 1);
    CHECK_EQ(sb.workers_started, 4);
    CHECK_EQ(ev_synchronize_timeout(va, 20, NULL), EV_ETIMEDOUT);
    /* Destroying b leaves a running. */
    CHECK_OK(ev_obj_release(vb, ob, NULL, NULL));
    ev_vm_destroy(vb);
    gate_open(&g);
    CHECK_OK(ev_synchronize(va, NULL));
    CHECK_OK(ev_obj_release(va, oa, NULL, NULL));
    ev_vm_destroy(va);
    gate_destroy(&g);
}

/* ---------------------------------------------- calls that must not crash */

/* Runs fn in a child process; true when it returned normally. */
static int survives(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void stall_report_null_vm(void)
{
    char buf[64];
    int rc = ev_vm_stall_report(NULL, buf, sizeof buf);
    _exit(rc < 0 && rc != EV_EINVAL ? 2 : 0);
}

/* "Nothing here aborts on bad input": ev_vm_stall_report returns an int
 * like every function that can fail, so a NULL runtime is bad input. */
static void test_stall_report_null_vm(void)
{
    CHECK(survives(stall_report_null_vm));
}

/* ---------------------------------------------- stream-ordered reuse */

static int write_cell(void *arg, ev_kctx *kc)
{
    (void)kc;
    int **cell = arg;
    **cell = 7;
    return 0;
}

/* ev_obj_pending_uid says where an object's unfinished uses run, and an
 * object from ev_obj_create_after is ordered after its stream's work even
 * when first used on another stream. */
static void test_pending_uid_and_create_after(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    uint32_t u1, u2, where = 99;
    CHECK_OK(ev_vm_thread_acquire(vm, &u1));
    CHECK_OK(ev_vm_thread_acquire(vm, &u2));
    ev_obj *a;
    CHECK_OK(ev_obj_create(vm, &a));
    CHECK_EQ(ev_obj_pending_uid(vm, a, &where), 0); /* never used */

    gate g;
    gate_init(&g);
    gate *gp = &g;
    submit1(vm, u1, gate_kernel, &gp, sizeof gp, a, EV_READ, "gate");
    CHECK_EQ(ev_obj_pending_uid(vm, a, &where), 1);
    CHECK_EQ(where, u1);
    submit1(vm, u1, noop, NULL, 0, a, EV_WRITE, "after gate");
    CHECK_EQ(ev_obj_pending_uid(vm, a, &where), 1); /* still only u1 */
    CHECK_EQ(where, u1);
    submit1(vm, u2, noop, NULL, 0, a, EV_READ, "reader on u2");
    CHECK_EQ(ev_obj_pending_uid(vm, a, &where), 2);

    /* c is first used on u2 but ordered after everything issued on u1,
     * which waits at the gate: it must not run before the gate opens. */
    ev_obj *c;
    CHECK_OK(ev_obj_create_after(vm, u1, &c));
    int cell = 0, *cellp = &cell;
    ev_ticket t;
    ev_operand op = {c, EV_WRITE};
    ev_instr_desc d = {.kernel = write_cell, .arg = &cellp, .arg_size = sizeof cellp,
                       .stream = ev_cpu_stream(u2), .operands = &op, .n_operands = 1,
                       .name = "write_cell"};
    CHECK_OK(ev_submit(vm, &d, &t));
    CHECK_EQ(ev_wait_obj_timeout(vm, c, 20, NULL), EV_ETIMEDOUT);
    gate_open(&g);
    CHECK_OK(ev_wait_ticket(vm, t, NULL));
    CHECK_EQ(cell, 7);
    CHECK_EQ(ev_obj_pending_uid(vm, c, &where), 0);

    /* On a stream with nothing issued the object is a plain one. */
    ev_obj *e;
    CHECK_OK(ev_obj_create_after(vm, 0, &e));
    CHECK_OK(ev_wait_obj(vm, e, NULL));

    CHECK_EQ(ev_obj_create_after(vm, 100000, &e), EV_EINVAL);
    CHECK(strstr(ev_last_message(), "uid") != NULL);
    CHECK_EQ(ev_obj_create_after(NULL, 0, &e), EV_EINVAL);
    CHECK_EQ(ev_obj_pending_uid(vm, NULL, &where), EV_EINVAL);
    CHECK_EQ(ev_obj_pending_uid(vm, a, NULL), EV_EINVAL);

    CHECK_OK(ev_obj_release(vm, a, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, c, NULL, NULL));
    CHECK_OK(ev_obj_release(vm, e, NULL, NULL));
    ev_vm_destroy(vm);
    gate_destroy(&g);
}

int main(void)
{
    RUN_TEST(test_error_names);
    RUN_TEST(test_null_arguments);
    RUN_TEST(test_bad_instructions_queue_nothing);
    RUN_TEST(test_thread_uid_pool);
    RUN_TEST(test_thread_limit_from_environment);
    RUN_TEST(test_workers_start_lazily);
    RUN_TEST(test_tickets_and_kernel_context);
    RUN_TEST(test_big_args_and_many_operands_are_copied);
    RUN_TEST(test_args_of_every_size_are_copied);
    RUN_TEST(test_arg_drop_once_per_instruction);
    RUN_TEST(test_profiling);
    RUN_TEST(test_stall_report_and_timeout);
    RUN_TEST(test_several_runtimes_are_independent);
    RUN_TEST(test_pending_uid_and_create_after);
    RUN_TEST(test_stall_report_null_vm); /* last: it forks */
    fprintf(stderr, "all passed\n");
    return 0;
}
