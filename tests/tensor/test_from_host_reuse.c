/* ev_from_host into a block that stream-ordered reuse hands over while the
 * instructions of its last tensor are still queued: the host must not write
 * it before they ran (they would read the new values). A slow chain of
 * integer matmuls keeps the worker busy while sum(a + a) waits behind it,
 * then a is dropped and a new tensor of the same size is made from zeros.
 * EV_TEST_CONCURRENCY (the worker and the test thread race). */
#include <stdlib.h>

#include "tensor_test.h"

static void test_from_host_waits_for_the_reused_block(void)
{
    int64_t n = 1 << 20;
    float *zeros = calloc((size_t)n, sizeof(float));
    float *ones = malloc(sizeof(float) * (size_t)n);
    CHECK(zeros && ones);
    for (int64_t i = 0; i < n; i++) {
        ones[i] = 1;
    }
    int reused = 0;
    for (int round = 0; round < 5; round++) {
        ev_tensor *a, *b, *m, *chain, *t, *twice, *s;
        CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, &n, ones, &a));
        int64_t ms[2] = {300, 300}; /* not scaled: the chain must outlast the issue */
        CHECK_OK(ev_ones(&EX, EV_INT64, 2, ms, &m));
        CHECK_OK(ev_matmul(&EX, m, m, &chain)); /* the slow built-in integer kernel */
        for (int k = 0; k < 6; k++) {
            CHECK_OK(ev_matmul(&EX, chain, m, &t));
            ev_tensor_unref(chain);
            chain = t;
        }
        CHECK_OK(ev_add(&EX, a, a, &twice));
        CHECK_OK(ev_sum(&EX, twice, 0, NULL, 0, &s));
        ev_tensor_unref(twice);
        ev_allocator_stats before, after;
        ev_allocator_get_stats(EV_DEVICE_CPU, 0, &before);
        ev_tensor_unref(a); /* its block is parked for reuse on stream 0 */
        CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, &n, zeros, &b));
        ev_allocator_get_stats(EV_DEVICE_CPU, 0, &after);
        reused += after.n_stream_reuses > before.n_stream_reuses;
        float got;
        CHECK_OK(ev_to_host(&EX, s, &got));
        CHECK(got == 2.0f * (float)n);
        ev_tensor_unref(b);
        ev_tensor_unref(s);
        ev_tensor_unref(chain);
        ev_tensor_unref(m);
    }
    /* The case under test happened (else the test would prove nothing). */
    CHECK_GT(reused, 0);
    free(zeros);
    free(ones);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_from_host_waits_for_the_reused_block);
    test_teardown();
    return 0;
}
