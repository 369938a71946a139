/* The engine's submit lock (ev__lock in src/core/internal.h): mutual
 * exclusion under contention (a plain counter stays exact), and threads that
 * went to sleep behind a long holder all get in once it lets go.
 * EV_TEST_CONCURRENCY: also run under TSan. */
#include <pthread.h>
#include <time.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"
#include "test.h"

enum { THREADS = 4 };

static ev__lock lock;
static long counter; /* guarded by lock */

static void *hammer(void *arg)
{
    long n = *(long *)arg;
    for (long i = 0; i < n; i++) {
        ev__lock_acquire(&lock);
        counter++;
        ev__lock_release(&lock);
    }
    return NULL;
}

static void test_counter_stays_exact(void)
{
    long n = ev_test_scaled(200000);
    pthread_t th[THREADS];
    counter = 0;
    for (int i = 0; i < THREADS; i++) {
        CHECK_EQ(pthread_create(&th[i], NULL, hammer, &n), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK_EQ(counter, THREADS * n);
    CHECK_EQ(atomic_load(&lock.state), 0);
    CHECK_EQ(atomic_load(&lock.waiters), 0);
}

static void *take_once(void *arg)
{
    (void)arg;
    ev__lock_acquire(&lock);
    counter++;
    ev__lock_release(&lock);
    return NULL;
}

static void test_sleepers_get_in_after_a_long_hold(void)
{
    counter = 0;
    ev__lock_acquire(&lock);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        CHECK_EQ(pthread_create(&th[i], NULL, take_once, NULL), 0);
    }
    /* Long enough for every thread to give up spinning and sleep. */
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
    CHECK_EQ(counter, 0);
    ev__lock_release(&lock);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK_EQ(counter, THREADS);
}

int main(void)
{
    RUN_TEST(test_counter_stays_exact);
    RUN_TEST(test_sleepers_get_in_after_a_long_hold);
    fprintf(stderr, "all passed\n");
    return 0;
}
