/* The intra-op pool belongs to its runtime: made by the first large op,
 * joined by ev_vm_destroy. Runtimes created and destroyed in a loop (their
 * first large ops racing on two workers to make the pool) leave the
 * process's thread count where it was, and the pool's helpers counted in
 * ev_intraop_get_stats go with them. EV_TEST_CONCURRENCY: also run under
 * TSan. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "eagervm/ops.h"
#include "eagervm/tensor.h"
#include "test.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static const ev_site site = {"tests/tensor/test_intraop_pool.c", "test", 1};

/* Threads of this process, from /proc/self/task. */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

/* The thread count once it has come down to want, or after a second what
 * it is: a joined thread's /proc entry goes a moment after pthread_join
 * returns (the kernel wakes the joiner before it reaps the thread). */
static int thread_count_settled(int want)
{
    int n = thread_count();
    for (int i = 0; i < 1000 && n != want; i++) {
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        n = thread_count();
    }
    return n;
}

static int helpers_now(void)
{
    ev_intraop_stats st;
    CHECK_OK(ev_intraop_get_stats(&st));
    return st.helpers;
}

/* A large add on thread uid of vm, waited for. */
static ev_tensor *issue_large_add(ev_vm *vm, uint32_t uid)
{
    ev_exec ex = {vm, uid, &site};
    ev_tensor *a, *s;
    CHECK_OK(ev_full(&ex, EV_FLOAT32, 1, SHAPE(500009), ev_scalar_float(2), &a));
    CHECK_OK(ev_add(&ex, a, a, &s));
    ev_tensor_unref(a);
    return s;
}

static void check_fours(ev_vm *vm, ev_tensor *s)
{
    ev_exec ex = {vm, 0, &site};
    float *h = malloc((size_t)ev_tensor_numel(s) * sizeof *h);
    CHECK(h != NULL);
    CHECK_OK(ev_to_host(&ex, s, h));
    for (int64_t i = 0; i < ev_tensor_numel(s); i++) {
        CHECK(h[i] == 4.0f);
    }
    free(h);
    ev_tensor_unref(s);
}

static void test_destroy_joins_the_pool(void)
{
    ev_intraop_stats st;
    CHECK_OK(ev_intraop_get_stats(&st));
    int base = thread_count();
    CHECK_EQ(helpers_now(), 0);
    long rounds = ev_test_scaled(20) < 3 ? 3 : ev_test_scaled(20);
    for (long r = 0; r < rounds; r++) {
        ev_vm *vm;
        CHECK_OK(ev_vm_create(NULL, &vm));
        uint32_t uid;
        CHECK_OK(ev_vm_thread_acquire(vm, &uid));
        /* Two workers' first large ops: either may make the pool. */
        ev_tensor *s0 = issue_large_add(vm, 0), *s1 = issue_large_add(vm, uid);
        check_fours(vm, s0);
        check_fours(vm, s1);
        /* Alone (both got one thread if they overlapped), an op surely
         * makes the pool; its helpers run while the runtime lives. */
        check_fours(vm, issue_large_add(vm, 0));
        CHECK_EQ(helpers_now(), st.threads - 1);
        CHECK_GE(thread_count(), base + 2 + st.threads - 1);
        CHECK_OK(ev_vm_thread_release(vm, uid));
        ev_vm_destroy(vm);
        CHECK_EQ(helpers_now(), 0);
        CHECK_EQ(thread_count_settled(base), base);
    }
}

/* A runtime that never ran a large op never made a pool. */
static void test_small_ops_make_no_pool(void)
{
    int base = thread_count();
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    ev_exec ex = {vm, 0, &site};
    ev_tensor *a, *s;
    CHECK_OK(ev_full(&ex, EV_FLOAT32, 1, SHAPE(1000), ev_scalar_float(1), &a));
    CHECK_OK(ev_add(&ex, a, a, &s));
    CHECK_OK(ev_wait_obj(vm, ev_tensor_obj(s), NULL));
    CHECK_EQ(helpers_now(), 0);
    CHECK_EQ(thread_count(), base + 1); /* the worker */
    ev_tensor_unref(a);
    ev_tensor_unref(s);
    ev_vm_destroy(vm);
    CHECK_EQ(thread_count_settled(base), base);
}

/* Two runtimes at once: each has its own pool. */
static void test_two_runtimes_two_pools(void)
{
    ev_intraop_stats st;
    CHECK_OK(ev_intraop_get_stats(&st));
    int base = thread_count();
    ev_vm *a, *b;
    CHECK_OK(ev_vm_create(NULL, &a));
    CHECK_OK(ev_vm_create(NULL, &b));
    check_fours(a, issue_large_add(a, 0));
    check_fours(b, issue_large_add(b, 0));
    CHECK_EQ(helpers_now(), 2 * (st.threads - 1));
    ev_vm_destroy(a);
    CHECK_EQ(helpers_now(), st.threads - 1);
    check_fours(b, issue_large_add(b, 0)); /* b's pool still works */
    ev_vm_destroy(b);
    CHECK_EQ(helpers_now(), 0);
    CHECK_EQ(thread_count_settled(base), base);
}

int main(void)
{
    RUN_TEST(test_destroy_joins_the_pool);
    RUN_TEST(test_small_ops_make_no_pool);
    RUN_TEST(test_two_runtimes_two_pools);
    return 0;
}
