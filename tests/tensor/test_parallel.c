/* Elementwise loops large enough to be split over the intra-op helper
 * threads: exact results at sizes that do not divide into the chunks, a
 * loop failure met in one chunk, in-place ops, sums split over threads
 * that keep the serial bits, two workers splitting loops at the same time
 * (one gets the helpers, the other runs alone), and the core budget: an op
 * alone gets every thread, ops while another worker is busy share them.
 * EV_TEST_CONCURRENCY: also run under TSan. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_test.h"

#define N 1000003 /* prime: the last chunk is short */

static float *ramp(int64_t n, int mod)
{
    float *h = malloc((size_t)n * sizeof *h);
    CHECK(h != NULL);
    for (int64_t i = 0; i < n; i++) {
        h[i] = (float)(i % mod);
    }
    return h;
}

static ev_tensor *upload_f32(const ev_exec *ex, const float *h, int64_t n)
{
    ev_tensor *t;
    CHECK_OK(ev_from_host(ex, EV_FLOAT32, 1, SHAPE(n), h, &t));
    return t;
}

static void test_large_dense_ops_exact(void)
{
    float *ha = ramp(N, 1000), *hb = ramp(N, 7), *got = malloc(N * sizeof(float));
    CHECK(got != NULL);
    ev_tensor *a = upload_f32(&EX, ha, N), *b = upload_f32(&EX, hb, N), *s, *p, *q;
    CHECK_OK(ev_add(&EX, a, b, &s));
    CHECK_OK(ev_mul(&EX, s, b, &p));
    CHECK_OK(ev_neg(&EX, p, &q));
    CHECK_OK(ev_to_host(&EX, q, got));
    for (int64_t i = 0; i < N; i++) {
        float want = -((ha[i] + hb[i]) * hb[i]);
        if (got[i] != want) {
            fprintf(stderr, "element %lld: %g, expected %g\n", (long long)i, got[i], want);
            CHECK(got[i] == want);
        }
    }
    /* In place: the output is also an input, chunk for chunk. */
    CHECK_OK(ev_add_(&EX, a, a));
    CHECK_OK(ev_to_host(&EX, a, got));
    for (int64_t i = 0; i < N; i++) {
        CHECK(got[i] == 2 * ha[i]);
    }
    ev_tensor_unref(a);
    ev_tensor_unref(b);
    ev_tensor_unref(s);
    ev_tensor_unref(p);
    ev_tensor_unref(q);
    free(ha);
    free(hb);
    free(got);
}

static void test_failure_in_one_chunk(void)
{
    const int64_t n = 500000;
    int32_t *e = malloc((size_t)n * sizeof *e);
    CHECK(e != NULL);
    for (int64_t i = 0; i < n; i++) {
        e[i] = 2;
    }
    ev_tensor *base, *ok_exp, *bad_exp, *r;
    CHECK_OK(ev_full(&EX, EV_INT32, 1, SHAPE(n), ev_scalar_int(3), &base));
    CHECK_OK(ev_from_host(&EX, EV_INT32, 1, SHAPE(n), e, &ok_exp));
    e[n - 100] = -1; /* only the last chunk meets it */
    CHECK_OK(ev_from_host(&EX, EV_INT32, 1, SHAPE(n), e, &bad_exp));

    CHECK_OK(ev_pow(&EX, base, ok_exp, &r));
    CHECK_OK(ev_to_host(&EX, r, e));
    for (int64_t i = 0; i < n; i++) {
        CHECK_EQ(e[i], 9);
    }
    ev_tensor_unref(r);

    CHECK_OK(ev_pow(&EX, base, bad_exp, &r));
    ev_error *err = NULL;
    CHECK_EQ(ev_wait_obj(test_vm, ev_tensor_obj(r), &err), EV_EPOISON);
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_EQ(info.code, EV_EVALUE);
    CHECK_STR_CONTAINS(info.message, "negative integer powers");
    ev_error_unref(err);
    ev_tensor_unref(r);
    ev_tensor_unref(base);
    ev_tensor_unref(ok_exp);
    ev_tensor_unref(bad_exp);
    free(e);
}

/* The serial pairwise sum the kernels use (src/ops/reduce.c), written again
 * here: a split sum must give these bits, whatever the number of threads.
 * Leaves of up to 1024 elements: below 128 in 8 partials, else in 64
 * lanes folded pairwise; longer runs halved at multiples of 64. */
static float ref_pairwise(const float *x, int64_t n)
{
    if (n > 1024) {
        int64_t h = n / 2;
        h -= h % 64;
        return ref_pairwise(x, h) + ref_pairwise(x + h, n - h);
    }
    if (n < 128) {
        float r[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++) {
                r[j] += x[i + j];
            }
        }
        float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) {
            s += x[i];
        }
        return s;
    }
    float r[64];
    for (int j = 0; j < 64; j++) {
        r[j] = x[j];
    }
    int64_t i = 64;
    for (; i + 64 <= n; i += 64) {
        for (int j = 0; j < 64; j++) {
            r[j] += x[i + j];
        }
    }
    for (int h = 32; h > 0; h /= 2) {
        for (int j = 0; j < h; j++) {
            r[j] += r[j + h];
        }
    }
    float s = r[0];
    for (; i < n; i++) {
        s += x[i];
    }
    return s;
}

static void test_split_sums_match_the_serial_bits(void)
{
    /* Values whose sum rounds differently in different orders. */
    const int64_t n = 3000017;
    float *h = malloc((size_t)n * sizeof *h);
    CHECK(h != NULL);
    for (int64_t i = 0; i < n; i++) {
        h[i] = (float)((i * 2654435761u) % 1000003) * 1e-3f + 1e-7f * (float)(i % 13);
    }
    ev_tensor *x = upload_f32(&EX, h, n), *s, *m;
    CHECK_OK(ev_sum(&EX, x, 0, NULL, 0, &s));
    CHECK_OK(ev_mean(&EX, x, 0, NULL, 0, &m));
    float got_s, got_m;
    CHECK_OK(ev_to_host(&EX, s, &got_s));
    CHECK_OK(ev_to_host(&EX, m, &got_m));
    float want = ref_pairwise(h, n);
    CHECK(memcmp(&got_s, &want, sizeof want) == 0);
    float want_m = want / (float)n;
    CHECK(memcmp(&got_m, &want_m, sizeof want_m) == 0);
    ev_tensor_unref(s);
    ev_tensor_unref(m);

    /* Many rows at once (split by rows): each row is its own serial sum. */
    enum { ROWS = 301, COLS = 2003 };
    ev_tensor *x2, *rs;
    ev_tensor *part = upload_f32(&EX, h, ROWS * COLS);
    CHECK_OK(ev_reshape(&EX, part, 2, SHAPE(ROWS, COLS), &x2));
    const int dim1[1] = {1};
    CHECK_OK(ev_sum(&EX, x2, 1, dim1, 0, &rs));
    float *rows = malloc(ROWS * sizeof *rows);
    CHECK(rows != NULL);
    CHECK_OK(ev_to_host(&EX, rs, rows));
    for (int r = 0; r < ROWS; r++) {
        float w = ref_pairwise(h + (int64_t)r * COLS, COLS);
        CHECK(memcmp(&rows[r], &w, sizeof w) == 0);
    }
    free(rows);
    ev_tensor_unref(rs);
    ev_tensor_unref(x2);
    ev_tensor_unref(part);
    ev_tensor_unref(x);
    free(h);
}

/* Strided loops (broadcast, transposed, mixed dtypes) split along their
 * outermost dimension give the values a plain loop gives. */
static void test_strided_loops_split_exactly(void)
{
    enum { R = 777, C = 1031 }; /* 801,087 elements, odd sizes */
    float *hm = ramp(R * C, 997), *hr = ramp(C, 13), *got = malloc((size_t)R * C * 8);
    CHECK(got != NULL);
    ev_tensor *flat = upload_f32(&EX, hm, R * C), *m, *row, *bsum, *tsum, *m64, *mix;
    CHECK_OK(ev_reshape(&EX, flat, 2, SHAPE(R, C), &m));
    row = upload_f32(&EX, hr, C);
    CHECK_OK(ev_add(&EX, m, row, &bsum)); /* row broadcast down the rows */
    CHECK_OK(ev_to_host(&EX, bsum, got));
    for (int64_t i = 0; i < (int64_t)R * C; i++) {
        CHECK(got[i] == hm[i] + hr[i % C]);
    }
    /* Square part of m against its own transpose: a strided input. */
    ev_tensor *sq, *sqt;
    CHECK_OK(ev_slice(m, 1, 0, R, 1, &sq)); /* R x R, rows of stride C */
    CHECK_OK(ev_transpose(sq, 0, 1, &sqt));
    CHECK_OK(ev_add(&EX, sq, sqt, &tsum));
    CHECK_OK(ev_to_host(&EX, tsum, got));
    for (int64_t i = 0; i < R; i++) {
        for (int64_t j = 0; j < R; j++) {
            CHECK(got[i * R + j] == hm[i * C + j] + hm[j * C + i]);
        }
    }
    /* float32 + float64: converted through buffers, chunk by chunk. */
    CHECK_OK(ev_cast(&EX, m, EV_FLOAT64, &m64));
    CHECK_OK(ev_add(&EX, m, m64, &mix));
    double *g64 = (double *)got;
    CHECK_OK(ev_to_host(&EX, mix, g64));
    for (int64_t i = 0; i < (int64_t)R * C; i++) {
        CHECK(g64[i] == 2.0 * (double)hm[i]);
    }
    ev_tensor *objs[] = {flat, m, row, bsum, sq, sqt, tsum, m64, mix};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        ev_tensor_unref(objs[i]);
    }
    free(hm);
    free(hr);
    free(got);
}

/* A strided loop that meets a bad value in one chunk fails as a whole. */
static void test_strided_failure_in_one_chunk(void)
{
    enum { R = 600, C = 500 };
    int32_t *e = malloc(C * sizeof *e);
    CHECK(e != NULL);
    for (int i = 0; i < C; i++) {
        e[i] = i == C - 3 ? -1 : 1;
    }
    ev_tensor *base, *ex_row, *r;
    CHECK_OK(ev_full(&EX, EV_INT32, 2, SHAPE(R, C), ev_scalar_int(3), &base));
    CHECK_OK(ev_from_host(&EX, EV_INT32, 1, SHAPE(C), e, &ex_row));
    CHECK_OK(ev_pow(&EX, base, ex_row, &r)); /* the row broadcast: strided */
    ev_error *err = NULL;
    CHECK_EQ(ev_wait_obj(test_vm, ev_tensor_obj(r), &err), EV_EPOISON);
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_EQ(info.code, EV_EVALUE);
    ev_error_unref(err);
    ev_tensor_unref(r);
    ev_tensor_unref(base);
    ev_tensor_unref(ex_row);
    free(e);
}

/* Each thread runs a chain of large adds on its own worker thread. */
static void *chain(void *arg)
{
    uint32_t uid = *(uint32_t *)arg;
    ev_exec ex = {test_vm, uid, NULL};
    enum { ITERS = 12 };
    const int64_t n = 300001;
    ev_tensor *x, *y;
    CHECK_OK(ev_full(&ex, EV_FLOAT32, 1, SHAPE(n), ev_scalar_float(uid), &x));
    CHECK_OK(ev_zeros(&ex, EV_FLOAT32, 1, SHAPE(n), &y));
    for (int i = 0; i < ITERS; i++) {
        ev_tensor *y2;
        CHECK_OK(ev_add(&ex, y, x, &y2));
        ev_tensor_unref(y);
        y = y2;
    }
    float *h = malloc((size_t)n * sizeof *h);
    CHECK(h != NULL);
    CHECK_OK(ev_to_host(&ex, y, h));
    for (int64_t i = 0; i < n; i++) {
        CHECK(h[i] == (float)(ITERS * uid));
    }
    free(h);
    ev_tensor_unref(x);
    ev_tensor_unref(y);
    return NULL;
}

static void test_two_workers_split_at_once(void)
{
    enum { T = 2 };
    pthread_t th[T];
    uint32_t uids[T];
    for (int i = 0; i < T; i++) {
        CHECK_OK(ev_vm_thread_acquire(test_vm, &uids[i]));
    }
    for (int i = 0; i < T; i++) {
        CHECK_EQ(pthread_create(&th[i], NULL, chain, &uids[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK_OK(ev_synchronize(test_vm, NULL));
    for (int i = 0; i < T; i++) {
        CHECK_OK(ev_vm_thread_release(test_vm, uids[i]));
    }
}

/* ------------------------------------------------------------ the budget */

static ev_intraop_stats intraop_stats(void)
{
    ev_intraop_stats st;
    CHECK_OK(ev_intraop_get_stats(&st));
    return st;
}

/* A kernel that keeps its worker busy until told to stop. */
static atomic_int blocker_state; /* 1 running, 2 told to stop */

static int blocker_kernel(void *arg, ev_kctx *kc)
{
    (void)arg;
    (void)kc;
    /* seq_cst: a test handshake, not a hot path. */
    atomic_store(&blocker_state, 1);
    while (atomic_load(&blocker_state) != 2) {
        sched_yield();
    }
    return 0;
}

/* Runs a large add and (with BLAS, a large) matmul on uid 0 and waits. */
static void large_ops_on_uid0(void)
{
    ev_tensor *a, *b, *s, *m, *mm;
    CHECK_OK(ev_full(&EX, EV_FLOAT32, 1, SHAPE(N), ev_scalar_float(1), &a));
    CHECK_OK(ev_full(&EX, EV_FLOAT32, 1, SHAPE(N), ev_scalar_float(2), &b));
    CHECK_OK(ev_add(&EX, a, b, &s));
    CHECK_OK(ev_full(&EX, EV_FLOAT32, 2, SHAPE(512, 512), ev_scalar_float(1), &m));
    CHECK_OK(ev_matmul(&EX, m, m, &mm));
    float first, corner;
    CHECK_OK(ev_wait_obj(test_vm, ev_tensor_obj(s), NULL));
    CHECK_OK(ev_wait_obj(test_vm, ev_tensor_obj(mm), NULL));
    first = ((const float *)ev_tensor_data(s))[N - 1];
    corner = ((const float *)ev_tensor_data(mm))[512 * 512 - 1];
    CHECK(first == 3.0f);
    CHECK(corner == 512.0f);
    ev_tensor *objs[] = {a, b, s, m, mm};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        ev_tensor_unref(objs[i]);
    }
}

/* One busy worker: a large op may use every thread. Two: each op gets at
 * most half (at least 1), helpers and BLAS threads alike. */
static void test_budget_shares_the_cores_between_busy_workers(void)
{
    int total = intraop_stats().threads;
    CHECK_GE(total, 1);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_intraop_reset_peak();
    large_ops_on_uid0();
    ev_intraop_stats alone = intraop_stats();
    CHECK_EQ(alone.max_grant, total);
    CHECK_EQ(alone.running, 0);
    CHECK_EQ(alone.granted, 0);

    /* Another worker busy for the whole time. */
    uint32_t uid;
    CHECK_OK(ev_vm_thread_acquire(test_vm, &uid));
    ev_instr_desc d = {0};
    d.kernel = blocker_kernel;
    d.stream = ev_cpu_stream(uid);
    d.name = "blocker";
    ev_ticket t;
    atomic_store(&blocker_state, 0);
    CHECK_OK(ev_submit(test_vm, &d, &t));
    while (atomic_load(&blocker_state) != 1) {
        sched_yield();
    }
    ev_intraop_reset_peak();
    uint64_t shared0 = intraop_stats().shared_ops;
    large_ops_on_uid0();
    ev_intraop_stats shared = intraop_stats();
    int half = total / 2 > 1 ? total / 2 : 1;
    CHECK_GE(shared.shared_ops - shared0, 1);
    CHECK_LE(shared.max_grant, half);
    CHECK_LE(shared.max_shared_grant, half);
    CHECK_LE(shared.peak_granted, total);
    atomic_store(&blocker_state, 2);
    CHECK_OK(ev_wait_ticket(test_vm, t, NULL));
    CHECK_OK(ev_vm_thread_release(test_vm, uid));

    /* Idle again: the whole budget is back. */
    ev_intraop_reset_peak();
    large_ops_on_uid0();
    CHECK_EQ(intraop_stats().max_grant, total);
}

/* Two Threads issuing large adds and matmuls at once: exact results, ops
 * that overlapped another busy worker got at most half the threads each,
 * and what was held at once never passed the total but for the one thread
 * of each op that started while the others held everything. */
static void *mixed(void *arg)
{
    uint32_t uid = *(uint32_t *)arg;
    ev_exec ex = {test_vm, uid, NULL};
    enum { ITERS = 8, M = 384 };
    const int64_t n = 400003;
    ev_tensor *x, *y, *m, *acc;
    CHECK_OK(ev_full(&ex, EV_FLOAT32, 1, SHAPE(n), ev_scalar_float(1), &x));
    CHECK_OK(ev_zeros(&ex, EV_FLOAT32, 1, SHAPE(n), &y));
    CHECK_OK(ev_full(&ex, EV_FLOAT32, 2, SHAPE(M, M), ev_scalar_float(1), &m));
    CHECK_OK(ev_zeros(&ex, EV_FLOAT32, 2, SHAPE(M, M), &acc));
    for (int i = 0; i < ITERS; i++) {
        ev_tensor *y2, *p, *acc2;
        CHECK_OK(ev_add(&ex, y, x, &y2));
        ev_tensor_unref(y);
        y = y2;
        CHECK_OK(ev_matmul(&ex, m, m, &p));
        CHECK_OK(ev_add(&ex, acc, p, &acc2));
        ev_tensor_unref(p);
        ev_tensor_unref(acc);
        acc = acc2;
    }
    float last, corner;
    CHECK_OK(ev_wait_obj(test_vm, ev_tensor_obj(y), NULL));
    CHECK_OK(ev_wait_obj(test_vm, ev_tensor_obj(acc), NULL));
    last = ((const float *)ev_tensor_data(y))[n - 1];
    corner = ((const float *)ev_tensor_data(acc))[M * M - 1];
    CHECK(last == (float)ITERS);
    CHECK(corner == (float)(ITERS * M));
    ev_tensor_unref(x);
    ev_tensor_unref(y);
    ev_tensor_unref(m);
    ev_tensor_unref(acc);
    return NULL;
}

static void test_two_threads_mixed_workload_stays_in_budget(void)
{
    enum { T = 2 };
    int total = intraop_stats().threads;
    pthread_t th[T];
    uint32_t uids[T];
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_intraop_reset_peak();
    for (int i = 0; i < T; i++) {
        CHECK_OK(ev_vm_thread_acquire(test_vm, &uids[i]));
    }
    for (int i = 0; i < T; i++) {
        CHECK_EQ(pthread_create(&th[i], NULL, mixed, &uids[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK_OK(ev_synchronize(test_vm, NULL));
    for (int i = 0; i < T; i++) {
        CHECK_OK(ev_vm_thread_release(test_vm, uids[i]));
    }
    ev_intraop_stats st = intraop_stats();
    int half = total / 2 > 1 ? total / 2 : 1;
    CHECK_LE(st.max_shared_grant, half);
    CHECK_LE(st.peak_granted, total + T - 1);
    CHECK_EQ(st.running, 0);
    CHECK_EQ(st.granted, 0);
}

static void test_stats_argument_checked(void)
{
    CHECK_EQ(ev_intraop_get_stats(NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "ev_intraop_get_stats");
}

int main(void)
{
    test_setup();
    RUN_TEST(test_large_dense_ops_exact);
    RUN_TEST(test_failure_in_one_chunk);
    RUN_TEST(test_split_sums_match_the_serial_bits);
    RUN_TEST(test_strided_loops_split_exactly);
    RUN_TEST(test_strided_failure_in_one_chunk);
    RUN_TEST(test_two_workers_split_at_once);
    RUN_TEST(test_budget_shares_the_cores_between_busy_workers);
    RUN_TEST(test_two_threads_mixed_workload_stays_in_budget);
    RUN_TEST(test_stats_argument_checked);
    test_teardown();
    return 0;
}
