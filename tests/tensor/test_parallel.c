/* Elementwise loops large enough to be split over the intra-op helper
 * threads: exact results at sizes that do not divide into the chunks, a
 * loop failure met in one chunk, in-place ops, and two workers splitting
 * loops at the same time (one gets the helpers, the other runs alone).
 * EV_TEST_CONCURRENCY: also run under TSan. */
#include <pthread.h>
#include <stdlib.h>

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

int main(void)
{
    test_setup();
    RUN_TEST(test_large_dense_ops_exact);
    RUN_TEST(test_failure_in_one_chunk);
    RUN_TEST(test_two_workers_split_at_once);
    test_teardown();
    return 0;
}
