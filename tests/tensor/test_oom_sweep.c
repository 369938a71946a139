/* Allocation-failure sweep: a representative program (creation, views,
 * elementwise, reductions, matmul, index ops with an out-of-range index,
 * cat/stack, in-place writes, releases, three thread uids and a barrier) runs
 * with the Nth internal allocation failing, for N = 0, 1, 2, ... until it
 * completes. Each failure must surface as EV_ENOMEM from a call, or as an
 * EV_ENOMEM or poisoned result at a wait; then, with the hook reset, the same
 * runtime must run the program again and give exactly the results of a clean
 * run. Every tensor is released and the runtime destroyed in each round, so
 * LeakSanitizer (ASan build) and the allocator's in-use count check that
 * nothing is lost. EV_OOM_VERBOSE=1 prints each N and the call that failed.
 * EV_TEST_CONCURRENCY: also run under TSan. */
#include "tensor_test.h"

/* Exported by the engine for tests (src/core/internal.h). */
void ev__fail_alloc_after(long n);

/* ---------------------------------------------------------------- results */

#define N_OUT 10
#define OUT_BYTES 512

typedef struct result {
    size_t len[N_OUT];
    unsigned char data[N_OUT][OUT_BYTES];
    int bad_rc[2]; /* waits on the out-of-range index_select and a dependent */
} result;

/* ---------------------------------------------------------------- program */

/* Which calls the program may see fail: under injection a call may return
 * EV_ENOMEM, and a wait EV_EPOISON from a failure whose code is EV_ENOMEM (a
 * kernel that could not allocate, or one upstream); in a clean run nothing
 * fails but the out-of-range index. */
static int injecting;

static void check_call_rc(int rc, const char *what, int line)
{
    if (getenv("EV_OOM_VERBOSE")) {
        fprintf(stderr, "  line %d: %s -> %s\n", line, what, ev_err_name(rc));
    }
    if (!injecting || rc != EV_ENOMEM || !ev_last_message()[0]) {
        fprintf(stderr, "line %d: %s returned %d (%s): %s\n", line, what, rc, ev_err_name(rc),
                ev_last_message());
        CHECK(0);
    }
}

#define TRY(call)                                                                 \
    do {                                                                          \
        rc = (call);                                                              \
        if (rc) {                                                                 \
            check_call_rc(rc, #call, __LINE__);                                   \
            goto done;                                                            \
        }                                                                         \
    } while (0)

/* Waits for t; returns 0, or the code of the failure that poisoned it (the
 * wait itself says EV_EPOISON and hands out that failure). */
static int root_code(ev_vm *vm, ev_tensor *t)
{
    ev_error *err = NULL;
    int rc = ev_wait_obj(vm, ev_tensor_obj(t), &err);
    if (rc == 0) {
        CHECK(err == NULL);
        return 0;
    }
    CHECK_EQ(rc, EV_EPOISON);
    CHECK(err != NULL);
    CHECK(ev_last_message()[0]);
    ev_error_info info;
    ev_error_get(err, &info);
    int code = info.code;
    ev_error_unref(err);
    return code;
}

/* A failed wait is only allowed under injection, and only for lack of memory. */
static void check_wait_rc(int code, const char *what, int line)
{
    if (!injecting || code != EV_ENOMEM) {
        fprintf(stderr, "line %d: wait on %s failed with %d (%s): %s\n", line, what, code,
                ev_err_name(code), ev_last_message());
        CHECK(0);
    }
}

/* Reads t into output slot k; a failed wait ends the program. */
#define READ(ex, t, k)                                                            \
    do {                                                                          \
        size_t n_ = (size_t)ev_tensor_numel(t) * ev_dtype_size(ev_tensor_dtype(t)); \
        CHECK_LE(n_, OUT_BYTES);                                                  \
        res->len[k] = n_;                                                         \
        rc = root_code((ex)->vm, t);                                              \
        if (rc) {                                                                 \
            check_wait_rc(rc, #t, __LINE__);                                      \
            goto done;                                                            \
        }                                                                         \
        CHECK_OK(ev_to_host(ex, t, res->data[k]));                                \
    } while (0)

enum { T_A, T_A3, T_AF, T_B, T_BIAS, T_C, T_AT, T_SL, T_S, T_MX, T_MEAN, T_MM, T_IDX, T_SEL,
       T_BADIDX, T_BAD, T_BAD2, T_CAT, T_STK, T_G, T_COUNT };

/* Runs the program on vm; returns 0 with *res filled, or the first error
 * (after releasing everything it made). */
static int program(ev_vm *vm, result *res)
{
    static const ev_site site = {"tests/tensor/test_oom_sweep.c", "program", 1};
    ev_tensor *t[T_COUNT] = {0};
    uint32_t u1 = 0, u2 = 0;
    int rc;
    memset(res, 0, sizeof *res);
    TRY(ev_vm_thread_acquire(vm, &u1));
    TRY(ev_vm_thread_acquire(vm, &u2));
    ev_exec e0 = {vm, 0, &site}, e1 = {vm, u1, &site}, e2 = {vm, u2, &site};

    /* Creation and views on uid 0. */
    TRY(ev_arange(&e0, ev_scalar_int(0), ev_scalar_int(24), ev_scalar_int(1), EV_INT64,
                  &t[T_A]));
    TRY(ev_view(t[T_A], 3, SHAPE(2, 3, 4), &t[T_A3]));
    float bvals[12];
    for (int i = 0; i < 12; i++) {
        bvals[i] = (float)(i % 5) - 1.5f;
    }
    TRY(ev_from_host(&e0, EV_FLOAT32, 2, SHAPE(4, 3), bvals, &t[T_B]));
    TRY(ev_linspace(&e0, -1, 1, 4, EV_FLOAT32, &t[T_BIAS]));

    /* Elementwise on uid 1: a cast, a broadcast add, an in-place multiply. */
    TRY(ev_cast(&e1, t[T_A3], EV_FLOAT32, &t[T_AF]));
    TRY(ev_add(&e1, t[T_AF], t[T_BIAS], &t[T_C]));
    TRY(ev_mul_(&e1, t[T_C], t[T_BIAS]));
    TRY(ev_transpose(t[T_C], 1, 2, &t[T_AT]));                 /* [2, 4, 3] */
    TRY(ev_slice(t[T_AT], 1, 1, INT64_MAX, 2, &t[T_SL]));       /* [2, 2, 3] */
    /* Drop intermediates early: their storage is freed after their readers. */
    ev_tensor_unref(t[T_A]);
    t[T_A] = NULL;
    TRY(ev_submit_barrier(vm, (ev_stream){EV_DEVICE_CPU, 0, EV_STREAM_BARRIER, 0, u1}, NULL,
                          NULL, 0, "sweep barrier", NULL));

    /* Reductions and matmul on uid 2. */
    TRY(ev_sum(&e2, t[T_SL], 1, (const int[]){2}, 0, &t[T_S]));  /* [2, 2] */
    TRY(ev_max(&e2, t[T_C], 1, (const int[]){0}, 1, &t[T_MX]));  /* [1, 3, 4] */
    TRY(ev_mean(&e2, t[T_AT], 0, NULL, 0, &t[T_MEAN]));           /* 0-d */
    TRY(ev_matmul(&e2, t[T_AF], t[T_B], &t[T_MM]));               /* [2, 3, 3] */
    ev_tensor_unref(t[T_AT]);
    t[T_AT] = NULL;

    /* Index ops on uid 0, one with an index out of range, and a dependent. */
    int64_t ivals[3] = {2, 0, 1}, bad[2] = {0, 7};
    TRY(ev_from_host(&e0, EV_INT64, 1, SHAPE(3), ivals, &t[T_IDX]));
    TRY(ev_index_select(&e0, t[T_C], 1, t[T_IDX], &t[T_SEL]));
    TRY(ev_from_host(&e0, EV_INT64, 1, SHAPE(2), bad, &t[T_BADIDX]));
    TRY(ev_index_select(&e0, t[T_MM], 2, t[T_BADIDX], &t[T_BAD]));
    TRY(ev_exp(&e1, t[T_BAD], &t[T_BAD2]));
    /* A bad call fails at the call whatever memory is left. */
    CHECK_EQ(ev_gather(&e1, t[T_MM], 1, t[T_IDX], &t[T_G]), EV_EINVAL);
    CHECK(t[T_G] == NULL);

    /* Joins back on uid 1, reading results of uid 2. */
    ev_tensor *pair[2] = {t[T_S], t[T_S]};
    TRY(ev_cat(&e1, pair, 2, 0, &t[T_CAT]));                      /* [4, 2] */
    TRY(ev_stack(&e1, pair, 2, 1, &t[T_STK]));                    /* [2, 2, 2] */

    /* Give uid 2 back while its work may still run; take it again. */
    TRY(ev_vm_thread_release(vm, u2));
    u2 = 0;
    TRY(ev_vm_thread_acquire(vm, &u2));

    /* Sync points. */
    READ(&e0, t[T_C], 0);
    READ(&e0, t[T_SL], 1);
    READ(&e0, t[T_S], 2);
    READ(&e0, t[T_MX], 3);
    READ(&e0, t[T_MEAN], 4);
    READ(&e0, t[T_MM], 5);
    READ(&e0, t[T_SEL], 6);
    READ(&e0, t[T_CAT], 7);
    READ(&e0, t[T_STK], 8);
    READ(&e0, t[T_B], 9);
    /* The out-of-range index fails its instruction and poisons the exp. */
    for (int k = 0; k < 2; k++) {
        ev_tensor *bt = t[k == 0 ? T_BAD : T_BAD2];
        res->bad_rc[k] = root_code(vm, bt);
        if (res->bad_rc[k] != EV_EINDEX) {
            /* Only an allocation failure may come first. */
            check_wait_rc(res->bad_rc[k], "the out-of-range index_select", __LINE__);
            rc = res->bad_rc[k];
            goto done;
        }
        double scratch[64];
        CHECK_EQ(ev_to_host(&e0, bt, scratch), EV_EPOISON);
        CHECK_STR_CONTAINS(ev_last_message(), "index 7 is out of bounds for dimension 2");
    }
    rc = 0;
done:
    for (int i = 0; i < T_COUNT; i++) {
        ev_tensor_unref(t[i]);
    }
    if (u1) {
        CHECK_OK(ev_vm_thread_release(vm, u1));
    }
    if (u2) {
        CHECK_OK(ev_vm_thread_release(vm, u2));
    }
    return rc;
}

static void check_same(const result *got, const result *want)
{
    for (int k = 0; k < N_OUT; k++) {
        CHECK_EQ(got->len[k], want->len[k]);
        if (memcmp(got->data[k], want->data[k], want->len[k]) != 0) {
            fprintf(stderr, "output %d differs from the clean run\n", k);
            CHECK(0);
        }
    }
    CHECK_EQ(got->bad_rc[0], want->bad_rc[0]);
    CHECK_EQ(got->bad_rc[1], want->bad_rc[1]);
}

/* Drains vm after a failed round: each ev_synchronize hands out one failure
 * not yet reported (an EV_ENOMEM, the out-of-range index, or a poison), in
 * order, until none is left. */
static void drain(ev_vm *vm)
{
    for (int i = 0;; i++) {
        ev_error *err = NULL;
        int rc = ev_synchronize(vm, &err);
        if (rc == 0) {
            CHECK(err == NULL);
            break;
        }
        CHECK(rc == EV_ENOMEM || rc == EV_EPOISON || rc == EV_EINDEX);
        CHECK(err != NULL);
        ev_error_unref(err);
        CHECK_LT(i, 64);
    }
}

static uint64_t in_use(void)
{
    ev_allocator_stats s;
    CHECK_OK(ev_allocator_get_stats(EV_DEVICE_CPU, 0, &s));
    return s.in_use;
}

/* ------------------------------------------------------------------ tests */

static ev_vm *new_vm(void)
{
    ev_vm *vm;
    ev_vm_config cfg = {.worker_thread_limit = 4};
    CHECK_OK(ev_vm_create(&cfg, &vm));
    return vm;
}

static void test_vm_create_sweep(void)
{
    long n = 0;
    for (;; n++) {
        ev_vm *vm = NULL;
        ev__fail_alloc_after(n);
        int rc = ev_vm_create(NULL, &vm);
        ev__fail_alloc_after(-1);
        if (rc == 0) {
            ev_vm_destroy(vm);
            break;
        }
        CHECK_EQ(rc, EV_ENOMEM);
        CHECK(vm == NULL);
        CHECK(ev_last_message()[0]);
        CHECK_LT(n, 10000);
    }
    fprintf(stderr, "ev_vm_create: swept %ld values of N\n", n + 1);
}

static void test_program_sweep(void)
{
    uint64_t base = in_use();
    result ref, got;
    {
        ev_vm *vm = new_vm();
        CHECK_OK(program(vm, &ref));
        CHECK_OK(ev_synchronize(vm, NULL));
        ev_vm_destroy(vm);
    }
    CHECK_EQ(in_use(), base);
    CHECK_EQ(ref.bad_rc[0], EV_EINDEX);
    CHECK_EQ(ref.bad_rc[1], EV_EINDEX);

    /* Stop once the program completes with the failure armed: with every
     * allocation from the Nth on failing, later N fail strictly less. A few
     * more rounds past that guard against worker allocations racing. */
    long n, completed_at = -1, failures = 0;
    for (n = 0; n < 100000; n++) {
        ev_vm *vm = new_vm();
        if (getenv("EV_OOM_VERBOSE")) {
            fprintf(stderr, "N = %ld\n", n);
        }
        injecting = 1;
        ev__fail_alloc_after(n);
        int rc = program(vm, &got);
        ev__fail_alloc_after(-1);
        injecting = 0;
        if (rc == 0) {
            check_same(&got, &ref);
        } else {
            failures++;
        }
        drain(vm);
        /* The same runtime, the hook reset: the clean results again. */
        CHECK_OK(program(vm, &got));
        check_same(&got, &ref);
        CHECK_OK(ev_synchronize(vm, NULL));
        ev_vm_destroy(vm);
        CHECK_EQ(in_use(), base);
        if (rc == 0 && completed_at < 0) {
            completed_at = n;
        }
        if (completed_at >= 0 && n >= completed_at + 3) {
            break;
        }
    }
    CHECK_GE(completed_at, 1);
    printf("oom sweep: swept %ld values of N (N = 0..%ld); the program first completed at "
           "N = %ld; %ld rounds failed cleanly\n", n + 1, n, completed_at, failures);
    fprintf(stderr, "oom sweep: swept %ld values of N, first completed at N = %ld\n", n + 1,
            completed_at);
}

int main(void)
{
    test_setup(); /* a runtime that lives through the sweep, untouched */
    RUN_TEST(test_vm_create_sweep);
    RUN_TEST(test_program_sweep);
    test_teardown();
    return 0;
}
