/* Tests of the caching allocator and storage lifetime: size-class reuse,
 * statistics, empty_cache, out-of-memory handling (through the engine's
 * allocation fault injection), memory held until the last instruction that
 * touches it has finished, and frees arriving from worker threads.
 * EV_TEST_CONCURRENCY: also run under TSan. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tensor_test.h"

/* Exported by the engine for tests (src/core/internal.h). */
void ev__fail_alloc_after(long n);

static ev_allocator_stats stats(void)
{
    ev_allocator_stats s;
    CHECK_OK(ev_allocator_get_stats(EV_DEVICE_CPU, 0, &s));
    CHECK_EQ(s.cached, s.reserved - s.in_use);
    return s;
}

static void test_reuse_and_stats(void)
{
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_allocator_stats s0 = stats();
    ev_tensor *t;
    CHECK_OK(ev_empty(&EX, EV_FLOAT32, 1, SHAPE(1000), &t)); /* 4000 bytes */
    ev_allocator_stats s1 = stats();
    /* 4000 rounds up to the 4096 class (four classes per power of two). */
    CHECK_EQ(s1.in_use - s0.in_use, 4096);
    CHECK_GE(s1.peak_in_use, s1.in_use);
    ev_tensor_unref(t); /* no instruction touched it: back at once */
    ev_allocator_stats s2 = stats();
    CHECK_EQ(s2.in_use, s0.in_use);
    CHECK_GE(s2.cached, 4096);
    /* The same class is served from the cache, without the system. */
    CHECK_OK(ev_empty(&EX, EV_INT32, 2, SHAPE(31, 32), &t)); /* 3968 bytes: same class */
    ev_allocator_stats s3 = stats();
    CHECK_EQ(s3.n_sys_allocs, s2.n_sys_allocs);
    CHECK_EQ(s3.n_cache_hits, s2.n_cache_hits + 1);
    ev_tensor_unref(t);

    /* Large blocks: a cached 5 MiB block serves 4.9 MiB but not 2 MiB. */
    CHECK_OK(ev_empty(&EX, EV_INT64, 1, SHAPE(5 << 17), &t));
    ev_tensor_unref(t);
    ev_allocator_stats l0 = stats();
    CHECK_OK(ev_empty(&EX, EV_INT64, 1, SHAPE(630000), &t)); /* ~4.8 MiB */
    ev_allocator_stats l1 = stats();
    CHECK_EQ(l1.n_cache_hits, l0.n_cache_hits + 1);
    CHECK_EQ(l1.in_use - l0.in_use, 5 << 20);
    ev_tensor *u;
    CHECK_OK(ev_empty(&EX, EV_INT64, 1, SHAPE(1 << 18), &u)); /* 2 MiB: new block */
    ev_allocator_stats l2 = stats();
    CHECK_EQ(l2.n_sys_allocs, l1.n_sys_allocs + 1);
    ev_tensor_unref(t);
    ev_tensor_unref(u);

    /* Zero-size tensors take no memory. */
    ev_allocator_stats z0 = stats();
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 2, SHAPE(0, 100), &t));
    CHECK_EQ(stats().in_use, z0.in_use);
    ev_tensor_unref(t);

    CHECK_OK(ev_allocator_empty_cache(EV_DEVICE_CPU, 0));
    ev_allocator_stats e = stats();
    CHECK_EQ(e.cached, 0);
    CHECK_OK(ev_allocator_reset_peak(EV_DEVICE_CPU, 0));
    CHECK_EQ(stats().peak_in_use, e.in_use);
    ev_allocator_stats bad;
    CHECK_EQ(ev_allocator_get_stats(EV_DEVICE_CUDA, 0, &bad), EV_EINVAL);
    CHECK_EQ(ev_allocator_empty_cache(EV_DEVICE_CPU, 3), EV_EINVAL);
}

static void test_out_of_memory(void)
{
    /* Keep something cached, then make every system allocation fail after
     * the storage struct: the allocator empties its cache, retries once and
     * fails cleanly; the runtime stays usable and nothing leaks. */
    ev_tensor *t;
    CHECK_OK(ev_empty(&EX, EV_FLOAT32, 1, SHAPE(300000), &t));
    ev_tensor_unref(t);
    CHECK_GT(stats().cached, 0);
    ev_allocator_stats s0 = stats();
    ev__fail_alloc_after(1);
    int rc = ev_ones(&EX, EV_FLOAT64, 2, SHAPE(1000, 1000), &t);
    ev__fail_alloc_after(-1);
    CHECK_EQ(rc, EV_ENOMEM);
    CHECK_STR_CONTAINS(ev_last_message(), "cpu allocator: out of memory allocating 8000000 bytes");
    ev_allocator_stats s1 = stats();
    CHECK_EQ(s1.n_oom_retries, s0.n_oom_retries + 1);
    CHECK_EQ(s1.cached, 0);
    CHECK_EQ(s1.in_use, s0.in_use);
    /* Every first allocation of the call failing also fails cleanly. */
    ev__fail_alloc_after(0);
    rc = ev_ones(&EX, EV_FLOAT64, 1, SHAPE(10), &t);
    ev__fail_alloc_after(-1);
    CHECK_EQ(rc, EV_ENOMEM);
    /* An op whose output cannot be allocated queues nothing. */
    ev_tensor *a;
    CHECK_OK(ev_ones(&EX, EV_FLOAT32, 1, SHAPE(100000), &a));
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_vm_stats v0, v1;
    ev_vm_get_stats(test_vm, &v0);
    for (long k = 0; k < 4; k++) {
        ev__fail_alloc_after(k);
        rc = ev_add(&EX, a, a, &t);
        ev__fail_alloc_after(-1);
        if (rc == 0) {
            ev_tensor_unref(t);
            break;
        }
        CHECK_EQ(rc, EV_ENOMEM);
    }
    ev_vm_get_stats(test_vm, &v1);
    CHECK_LE(v1.submitted, v0.submitted + 1);
    CHECK_OK(ev_add(&EX, a, a, &t));
    double g[3];
    ev_tensor *sl;
    CHECK_OK(ev_slice(t, 0, 0, 3, 1, &sl));
    read_f64(sl, g);
    CHECK_CLOSE(g[2], 2.0, 0);
    ev_tensor_unref(sl);
    ev_tensor_unref(t);
    ev_tensor_unref(a);
}

/* A kernel that holds its worker until the test lets it go. */
static atomic_int gate;

static int wait_gate(void *arg, ev_kctx *kc)
{
    (void)arg;
    (void)kc;
    /* acquire: pairs with the test's release store. */
    while (!atomic_load_explicit(&gate, memory_order_acquire)) {
        sched_yield();
    }
    return 0;
}

/* Closes the gate and issues an instruction that reads t until it opens. */
static void read_until_gate_opens(ev_tensor *t)
{
    atomic_store_explicit(&gate, 0, memory_order_relaxed);
    ev_operand op = {ev_tensor_obj(t), EV_READ};
    ev_instr_desc d = {
        .kernel = wait_gate,
        .stream = ev_cpu_stream(0),
        .operands = &op,
        .n_operands = 1,
        .name = "wait_gate",
    };
    CHECK_OK(ev_submit(test_vm, &d, NULL));
}

static void test_freed_after_last_instruction(void)
{
    /* DESIGN rule 4: dropping the last reference while an instruction that
     * reads the storage is still pending must not return the memory yet. */
    CHECK_OK(ev_synchronize(test_vm, NULL));
    CHECK_OK(ev_allocator_empty_cache(EV_DEVICE_CPU, 0));
    ev_allocator_stats s0 = stats();
    ev_tensor *t;
    CHECK_OK(ev_ones(&EX, EV_FLOAT32, 1, SHAPE(1 << 20), &t));
    read_until_gate_opens(t);
    ev_tensor_unref(t);
    CHECK_EQ(stats().in_use, s0.in_use + (4 << 20)); /* still held */
    atomic_store_explicit(&gate, 1, memory_order_release);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    /* The release runs after the reader finished, on a worker, which hands
     * the free back to the next thread that submits or waits: the release
     * itself may have been issued by a worker while we synchronized. */
    for (int i = 0; i < 1000 && stats().in_use != s0.in_use; i++) {
        CHECK_OK(ev_synchronize(test_vm, NULL));
        sched_yield();
    }
    CHECK_EQ(stats().in_use, s0.in_use);
}

/* ev_tensor_unref_n drops one reference per entry, as ev_tensor_unref
 * would one by one: tensors sharing a storage, an alias, a tensor with a
 * reference left, NULL entries and a storage a pending instruction reads. */
static void test_unref_n(void)
{
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_allocator_stats s_base = stats();
    ev_tensor *a, *b, *a_view, *a_alias, *kept;
    CHECK_OK(ev_full(&EX, EV_INT64, 1, SHAPE(100), ev_scalar_int(7), &kept));
    uint64_t with_kept = stats().in_use;
    CHECK_OK(ev_ones(&EX, EV_FLOAT32, 1, SHAPE(1 << 18), &b));
    uint64_t b_bytes = stats().in_use - with_kept;
    CHECK_OK(ev_full(&EX, EV_FLOAT32, 1, SHAPE(4096), ev_scalar_float(2.0), &a));
    CHECK_OK(ev_view(a, 2, SHAPE(64, 64), &a_view));
    CHECK_OK(ev_tensor_alias(a, &a_alias));
    ev_tensor_ref(kept);
    CHECK_OK(ev_synchronize(test_vm, NULL)); /* the fills are done */
    read_until_gate_opens(b);
    ev_tensor *all[] = {a, NULL, a_view, b, kept, a_alias, NULL};
    ev_tensor_unref_n(all, sizeof all / sizeof *all);
    ev_tensor_unref_n(NULL, 0);
    /* a's storage is back; b's waits for its reader; kept's stays with
     * the reference left. */
    CHECK_EQ(stats().in_use, with_kept + b_bytes);
    atomic_store_explicit(&gate, 1, memory_order_release);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    for (int i = 0; i < 1000 && stats().in_use != with_kept; i++) {
        CHECK_OK(ev_synchronize(test_vm, NULL));
        sched_yield();
    }
    CHECK_EQ(stats().in_use, with_kept);
    int64_t host[100];
    CHECK_OK(ev_to_host(&EX, kept, host));
    CHECK_EQ(host[0], 7);
    CHECK_EQ(host[99], 7);
    ev_tensor_unref(kept);
    CHECK_EQ(stats().in_use, s_base.in_use);
}

/* Several OS threads issue ops on their own worker threads, dropping their
 * temporaries at once, so frees come back from several workers while other
 * threads allocate. */
static void *churn(void *arg)
{
    uint32_t uid = *(uint32_t *)arg;
    ev_exec ex = {test_vm, uid, NULL};
    long iters = ev_test_scaled(300);
    ev_tensor *acc;
    CHECK_OK(ev_zeros(&ex, EV_FLOAT64, 1, SHAPE(257), &acc));
    for (long i = 0; i < iters; i++) {
        ev_tensor *a, *b;
        CHECK_OK(ev_full(&ex, EV_FLOAT64, 1, SHAPE(257), ev_scalar_float(1), &a));
        CHECK_OK(ev_mul(&ex, a, a, &b));
        ev_tensor_unref(a);
        CHECK_OK(ev_add_(&ex, acc, b));
        ev_tensor_unref(b);
    }
    double g[257];
    CHECK_OK(ev_to_host(&ex, acc, g));
    for (int i = 0; i < 257; i++) {
        CHECK_CLOSE(g[i], (double)iters, 0);
    }
    ev_tensor_unref(acc);
    return NULL;
}

static void test_concurrent_churn(void)
{
    enum { N = 3 };
    pthread_t th[N];
    uint32_t uids[N];
    for (int i = 0; i < N; i++) {
        CHECK_OK(ev_vm_thread_acquire(test_vm, &uids[i]));
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(pthread_create(&th[i], NULL, churn, &uids[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK_OK(ev_synchronize(test_vm, NULL));
    for (int i = 0; i < N; i++) {
        CHECK_OK(ev_vm_thread_release(test_vm, uids[i]));
    }
}

/* A thread's small frees stay in its own cache (still counted as in use,
 * and served again without the lock); they are folded back into the
 * allocator when the thread reads the statistics or exits. */
static void *free_small_blocks(void *arg)
{
    ev_allocator_stats *seen = arg;
    ev_exec ex = {test_vm, 0, NULL};
    ev_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        CHECK_OK(ev_empty(&ex, EV_FLOAT32, 1, SHAPE(100), &t[i])); /* 400 -> 448 bytes */
    }
    for (int i = 0; i < 4; i++) {
        ev_tensor_unref(t[i]);
    }
    /* Served again from this thread's cache: no new system block. */
    ev_allocator_stats before;
    CHECK_OK(ev_allocator_get_stats(EV_DEVICE_CPU, 0, &before));
    CHECK_OK(ev_empty(&ex, EV_FLOAT32, 1, SHAPE(100), &t[0]));
    ev_tensor_unref(t[0]);
    CHECK_OK(ev_allocator_get_stats(EV_DEVICE_CPU, 0, seen));
    CHECK_EQ(seen->n_sys_allocs, before.n_sys_allocs);
    CHECK_EQ(seen->n_cache_hits, before.n_cache_hits + 1);
    /* Freed again, and kept until this thread exits. */
    CHECK_OK(ev_empty(&ex, EV_FLOAT32, 1, SHAPE(100), &t[0]));
    ev_tensor_unref(t[0]);
    return NULL;
}

static void test_thread_cache_folds_back(void)
{
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_allocator_stats s0 = stats(), seen;
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, free_small_blocks, &seen), 0);
    pthread_join(th, NULL);
    CHECK_EQ(seen.in_use, s0.in_use); /* its own reading was exact */
    ev_allocator_stats s1 = stats();
    CHECK_EQ(s1.in_use, s0.in_use); /* the exit handed its cache back */
    CHECK_GE(s1.cached, 448);
}

/* Closes the gate and queues a kernel waiting at it on uid's stream, so
 * that everything issued after it there stays pending. */
static void block_stream(uint32_t uid)
{
    atomic_store_explicit(&gate, 0, memory_order_relaxed);
    ev_instr_desc d = {.kernel = wait_gate, .stream = ev_cpu_stream(uid), .name = "wait_gate"};
    CHECK_OK(ev_submit(test_vm, &d, NULL));
}

static void check_all(ev_tensor *t, double want)
{
    int64_t n = ev_tensor_numel(t);
    double *h = malloc((size_t)n * sizeof *h);
    CHECK(h != NULL);
    read_f64(t, h);
    for (int64_t i = 0; i < n; i++) {
        if (h[i] != want) {
            fprintf(stderr, "element %lld is %g, expected %g\n", (long long)i, h[i], want);
            CHECK(h[i] == want);
        }
    }
    free(h);
}

/* A chain y = y + x issued while its stream is blocked reuses the block of
 * the y dropped before, in stream order, instead of taking new memory for
 * every op; the results are still exact. */
static void test_stream_ordered_reuse_chain(void)
{
    enum { ITERS = 40 };
    const int64_t n = 1 << 18; /* 1 MiB of float32 */
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_tensor *x, *y;
    CHECK_OK(ev_ones(&EX, EV_FLOAT32, 1, SHAPE(n), &x));
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 1, SHAPE(n), &y));
    block_stream(0);
    ev_allocator_stats s0 = stats();
    for (int i = 0; i < ITERS; i++) {
        ev_tensor *y2;
        CHECK_OK(ev_add(&EX, y, x, &y2));
        ev_tensor_unref(y);
        y = y2;
    }
    ev_allocator_stats s1 = stats();
    /* Each op after the first takes the block of the y dropped two ops
     * before; no op has run yet. */
    CHECK_GE(s1.n_stream_reuses - s0.n_stream_reuses, ITERS - 2);
    CHECK_LE(s1.in_use - s0.in_use, 2 << 20);
    atomic_store_explicit(&gate, 1, memory_order_release);
    check_all(y, ITERS);
    ev_tensor_unref(x);
    ev_tensor_unref(y);
}

/* A block whose pending uses run on another stream is not taken; the
 * stream they run on takes it, and a write to it from a third stream waits
 * for them. */
static void test_stream_ordered_reuse_other_streams(void)
{
    const int64_t n = 1 << 17; /* 512 KiB of float32 */
    uint32_t u1;
    CHECK_OK(ev_vm_thread_acquire(test_vm, &u1));
    ev_exec ex1 = {test_vm, u1, NULL};
    ev_tensor *t, *r;
    CHECK_OK(ev_ones(&EX, EV_FLOAT32, 1, SHAPE(n), &t));
    CHECK_OK(ev_synchronize(test_vm, NULL));
    block_stream(u1);
    CHECK_OK(ev_add(&ex1, t, t, &r)); /* pending on u1 */
    ev_tensor_unref(t);

    ev_allocator_stats s0 = stats();
    ev_tensor *on0, *on1;
    CHECK_OK(ev_empty(&EX, EV_FLOAT32, 1, SHAPE(n), &on0));
    CHECK_EQ(stats().n_stream_reuses, s0.n_stream_reuses); /* not from u1's uses */
    CHECK_OK(ev_empty(&ex1, EV_FLOAT32, 1, SHAPE(n), &on1));
    CHECK_EQ(stats().n_stream_reuses, s0.n_stream_reuses + 1);
    /* Written from stream 0 while u1 still has to read the old contents. */
    CHECK_OK(ev_fill_(&EX, on1, ev_scalar_float(7)));
    CHECK_EQ(ev_wait_obj_timeout(test_vm, ev_tensor_obj(on1), 20, NULL), EV_ETIMEDOUT);
    atomic_store_explicit(&gate, 1, memory_order_release);
    check_all(r, 2);
    check_all(on1, 7);
    ev_tensor_unref(on0);
    ev_tensor_unref(on1);
    ev_tensor_unref(r);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    CHECK_OK(ev_vm_thread_release(test_vm, u1));
}

/* A reused block does not carry the poison of the op that wrote it last. */
static void test_stream_ordered_reuse_drops_poison(void)
{
    const int64_t n = 1 << 16; /* 256 KiB of int32 */
    ev_tensor *base, *e, *bad;
    CHECK_OK(ev_full(&EX, EV_INT32, 1, SHAPE(n), ev_scalar_int(2), &base));
    CHECK_OK(ev_full(&EX, EV_INT32, 1, SHAPE(n), ev_scalar_int(-1), &e));
    CHECK_OK(ev_synchronize(test_vm, NULL));
    block_stream(0);
    CHECK_OK(ev_pow(&EX, base, e, &bad)); /* fails in the kernel, later */
    ev_tensor_unref(bad);
    ev_allocator_stats s0 = stats();
    ev_tensor *fresh;
    CHECK_OK(ev_full(&EX, EV_INT32, 1, SHAPE(n), ev_scalar_int(5), &fresh));
    CHECK_EQ(stats().n_stream_reuses, s0.n_stream_reuses + 1);
    atomic_store_explicit(&gate, 1, memory_order_release);
    check_all(fresh, 5);
    ev_error *err = NULL;
    CHECK_EQ(ev_synchronize(test_vm, &err), EV_EVALUE); /* the pow's failure */
    CHECK(err != NULL);
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_STR_CONTAINS(info.message, "negative integer powers");
    ev_error_unref(err);
    ev_tensor_unref(fresh);
    ev_tensor_unref(base);
    ev_tensor_unref(e);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_reuse_and_stats);
    RUN_TEST(test_out_of_memory);
    RUN_TEST(test_freed_after_last_instruction);
    RUN_TEST(test_unref_n);
    RUN_TEST(test_concurrent_churn);
    RUN_TEST(test_thread_cache_folds_back);
    RUN_TEST(test_stream_ordered_reuse_chain);
    RUN_TEST(test_stream_ordered_reuse_other_streams);
    RUN_TEST(test_stream_ordered_reuse_drops_poison);
    test_teardown();
    ev_allocator_stats s = stats();
    CHECK_EQ(s.in_use, 0); /* every storage came back */
    CHECK_OK(ev_allocator_empty_cache(EV_DEVICE_CPU, 0));
    return 0;
}
