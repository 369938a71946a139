/* Tests of the random ops (rand, randn, randint, uniform_, normal_) and
 * generators: Philox known answers, every op against a scalar reference
 * with each of the library's Philox loops, replay from a saved state,
 * independence from the worker and the time a kernel runs, two issuing
 * threads, loose statistics, zero-size and 0-d results, and the errors
 * raised at the call.
 * EV_TEST_CONCURRENCY: also run under TSan. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "tensor_test.h"

/* Test hooks exported by the library (core/internal.h, ops/random.c). */
void ev__fail_alloc_after(long n);
void ev__random_cap_philox(int level);

/* ----------------------------------------------------------------- helpers */

static ev_generator *new_gen(uint64_t seed)
{
    ev_generator *g;
    CHECK_OK(ev_generator_create(seed, &g));
    return g;
}

static ev_generator_state get_state(ev_generator *g)
{
    ev_generator_state s;
    CHECK_OK(ev_generator_get_state(g, &s));
    return s;
}

/* The raw bytes of t in its own dtype (caller frees). */
static void *raw(ev_tensor *t)
{
    int64_t n = ev_tensor_numel(t);
    size_t bytes = (size_t)n * ev_dtype_size(ev_tensor_dtype(t));
    void *p = malloc(bytes ? bytes : 1);
    CHECK(p);
    CHECK_OK(ev_to_host(&EX, t, p));
    return p;
}

/* 1 if a and b hold bit-identical values of one shape and dtype. */
static int same_bits(ev_tensor *a, ev_tensor *b)
{
    CHECK_EQ(ev_tensor_dtype(a), ev_tensor_dtype(b));
    CHECK_EQ(ev_tensor_numel(a), ev_tensor_numel(b));
    size_t bytes = (size_t)ev_tensor_numel(a) * ev_dtype_size(ev_tensor_dtype(a));
    void *pa = raw(a), *pb = raw(b);
    int same = memcmp(pa, pb, bytes) == 0;
    free(pa);
    free(pb);
    return same;
}

/* Which op a helper issues. */
enum { OP_RAND, OP_RANDN, OP_RANDINT_SMALL, OP_RANDINT_WIDE, OP_COUNT_ };

static ev_tensor *issue(const ev_exec *ex, ev_generator *g, int op, ev_dtype dt, int ndim,
                        const int64_t *shape)
{
    ev_tensor *t = NULL;
    switch (op) {
    case OP_RAND:
        CHECK_OK(ev_rand(ex, g, dt, ndim, shape, &t));
        break;
    case OP_RANDN:
        CHECK_OK(ev_randn(ex, g, dt, ndim, shape, &t));
        break;
    case OP_RANDINT_SMALL:
        CHECK_OK(ev_randint(ex, g, -1000, 1000, EV_INT32, ndim, shape, &t));
        break;
    default:
        CHECK_OK(ev_randint(ex, g, INT64_MIN, INT64_MAX, EV_INT64, ndim, shape, &t));
        break;
    }
    return t;
}

/* ------------------------------------------------------------------- tests */

/* Random123's tests/kat_vectors: philox4x32 10 with counter 0 and key 0
 * gives 6627e8d5 e169c58d bc57ac4c 9b00dbd8. Seed 0, offset 0 is exactly
 * that block, and the documented layout names each element's words. */
static void test_known_answers(void)
{
    const uint32_t kat[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    ev_generator *g = new_gen(0);
    ev_tensor *f32, *f64, *i64;
    CHECK_OK(ev_rand(&EX, g, EV_FLOAT32, 1, SHAPE(4), &f32));
    ev_generator_manual_seed(g, 0);
    CHECK_OK(ev_rand(&EX, g, EV_FLOAT64, 1, SHAPE(2), &f64));
    ev_generator_manual_seed(g, 0);
    /* n = 2^32 takes the high word of each 64-bit draw. */
    CHECK_OK(ev_randint(&EX, g, 0, (int64_t)1 << 32, EV_INT64, 1, SHAPE(2), &i64));
    float v32[4];
    double v64[2];
    int64_t vi[2];
    CHECK_OK(ev_to_host(&EX, f32, v32));
    CHECK_OK(ev_to_host(&EX, f64, v64));
    CHECK_OK(ev_to_host(&EX, i64, vi));
    for (int i = 0; i < 4; i++) {
        CHECK(v32[i] == (float)((double)(kat[i] >> 8) * 0x1p-24));
    }
    for (int i = 0; i < 2; i++) {
        uint64_t r = (uint64_t)kat[2 * i] | (uint64_t)kat[2 * i + 1] << 32;
        CHECK(v64[i] == (double)(r >> 11) * 0x1p-53);
        CHECK_EQ(vi[i], (int64_t)kat[2 * i + 1]);
    }
    ev_tensor_unref(f32);
    ev_tensor_unref(f64);
    ev_tensor_unref(i64);

    /* randn: the pair of block 0 by the documented Box-Muller formula (the
     * kernel's own log, sqrt, sin and cos: within a few ulp of libm's). */
    uint64_t r1 = (uint64_t)kat[0] | (uint64_t)kat[1] << 32;
    uint64_t r2 = (uint64_t)kat[2] | (uint64_t)kat[3] << 32;
    double rad = sqrt(-2.0 * log((double)((r1 >> 11) + 1) * 0x1p-53));
    double th = 2.0 * M_PI * ((double)(r2 >> 11) * 0x1p-53);
    double z[2];
    ev_generator_manual_seed(g, 0);
    CHECK_OK(ev_randn(&EX, g, EV_FLOAT64, 1, SHAPE(2), &f64));
    CHECK_OK(ev_to_host(&EX, f64, z));
    CHECK(fabs(z[0] - rad * cos(th)) <= 1e-15 * (1 + rad));
    CHECK(fabs(z[1] - rad * sin(th)) <= 1e-15 * (1 + rad));
    ev_tensor_unref(f64);
#ifdef __SIZEOF_INT128__
    /* randint over a range above 2^32: floor(r * n / 2^128) of the whole
     * block taken as one 128-bit r (words 2-3 high, 0-1 low). */
    ev_generator_manual_seed(g, 0);
    CHECK_OK(ev_randint(&EX, g, INT64_MIN, INT64_MAX, EV_INT64, 0, NULL, &i64));
    CHECK_OK(ev_to_host(&EX, i64, vi));
    uint64_t n = (uint64_t)INT64_MAX - (uint64_t)INT64_MIN;
    unsigned __int128 hi = (unsigned __int128)r2 * n + (((unsigned __int128)r1 * n) >> 64);
    CHECK_EQ(vi[0], (int64_t)((uint64_t)INT64_MIN + (uint64_t)(hi >> 64)));
    ev_tensor_unref(i64);
#endif
    ev_generator_destroy(g);
}

/* The scalar reference: Philox4x32-10 as Random123's philox.h. */
static void philox_ref(uint64_t blk, uint64_t seed, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)blk, c1 = (uint32_t)(blk >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Word k of the stream of (seed, offset). */
static uint32_t word_ref(uint64_t seed, uint64_t offset, uint64_t k)
{
    uint32_t x[4];
    philox_ref((offset + k) / 4, seed, x);
    return x[(offset + k) % 4];
}

static uint64_t word64_ref(uint64_t seed, uint64_t offset, uint64_t k)
{
    return (uint64_t)word_ref(seed, offset, k) | (uint64_t)word_ref(seed, offset, k + 1) << 32;
}

/* Every element of every op against the scalar reference and the documented
 * layout, for sizes that end inside a block, at offsets whose block counter
 * carries into its high word, on contiguous tensors (the vector loops,
 * split over the intra-op threads when large) and on strided views (the
 * buffered path): uniform and integer values bit for bit, normal values
 * within a few ulp of libm's Box-Muller. */
static void matches_reference(void)
{
#ifdef __SIZEOF_INT128__
    const uint64_t seeds[2] = {0, 0xdeadbeefcafebabeu};
    /* Block 2^32 - 3: a call of a few blocks crosses into counter 2^32. */
    const uint64_t offsets[2] = {0, ((uint64_t)1 << 34) - 12};
    const int64_t sizes[3] = {1, 1037, 300001};
    for (int si = 0; si < 2; si++) {
        for (int oi = 0; oi < 2; oi++) {
            for (int ni = 0; ni < 3; ni++) {
                uint64_t seed = seeds[si], off = offsets[oi];
                int64_t n = sizes[ni];
                ev_generator *g = new_gen(seed);
                ev_generator_state st = {seed, off};
                for (int strided = 0; strided < 2; strided++) {
                    ev_tensor *t[6], *base[6] = {0};
                    const ev_dtype dts[6] = {EV_FLOAT32, EV_FLOAT64, EV_FLOAT32, EV_FLOAT64,
                                             EV_INT64, EV_INT64};
                    for (int op = 0; op < 6; op++) {
                        CHECK_OK(ev_generator_set_state(g, &st));
                        if (strided && op < 4) {
                            /* Every other element of a buffer: a view with stride 2. */
                            CHECK_OK(ev_empty(&EX, dts[op], 1, SHAPE(2 * n), &base[op]));
                            CHECK_OK(ev_slice(base[op], 0, 1, INT64_MAX, 2, &t[op]));
                        }
                        switch (op) {
                        case 0:
                        case 1:
                            if (strided) {
                                CHECK_OK(ev_uniform_(&EX, g, t[op], 0.0, 1.0));
                            } else {
                                CHECK_OK(ev_rand(&EX, g, dts[op], 1, SHAPE(n), &t[op]));
                            }
                            break;
                        case 2:
                        case 3:
                            if (strided) {
                                CHECK_OK(ev_normal_(&EX, g, t[op], 0.0, 1.0));
                            } else {
                                CHECK_OK(ev_randn(&EX, g, dts[op], 1, SHAPE(n), &t[op]));
                            }
                            break;
                        case 4:
                            CHECK_OK(ev_randint(&EX, g, -5, 1000000007, EV_INT64, 1, SHAPE(n),
                                                &t[op]));
                            break;
                        default:
                            CHECK_OK(ev_randint(&EX, g, INT64_MIN, INT64_MAX, EV_INT64, 1,
                                                SHAPE(n), &t[op]));
                            break;
                        }
                    }
                    float *u32 = raw(t[0]), *n32 = raw(t[2]);
                    double *u64 = raw(t[1]), *n64 = raw(t[3]);
                    int64_t *i64 = raw(t[4]), *w64 = raw(t[5]);
                    int64_t bad = 0;
                    for (int64_t e = 0; e < n; e++) {
                        uint32_t x = word_ref(seed, off, (uint64_t)e);
                        bad += u32[e] != (float)((double)(x >> 8) * 0x1p-24);
                        uint64_t r = word64_ref(seed, off, 2 * (uint64_t)e);
                        bad += u64[e] != (double)(r >> 11) * 0x1p-53;
                        unsigned __int128 p = (unsigned __int128)r * 1000000012u;
                        bad += i64[e] != -5 + (int64_t)(uint64_t)(p >> 64);
                        uint64_t lo = word64_ref(seed, off, 4 * (uint64_t)e);
                        uint64_t hi = word64_ref(seed, off, 4 * (uint64_t)e + 2);
                        uint64_t span = (uint64_t)INT64_MAX - (uint64_t)INT64_MIN;
                        unsigned __int128 q = (unsigned __int128)hi * span +
                                              (((unsigned __int128)lo * span) >> 64);
                        bad += w64[e] != (int64_t)((uint64_t)INT64_MIN + (uint64_t)(q >> 64));
                        /* The pair of e: block e / 2 of the call. */
                        uint64_t r1 = word64_ref(seed, off, 4 * (uint64_t)(e / 2));
                        uint64_t r2 = word64_ref(seed, off, 4 * (uint64_t)(e / 2) + 2);
                        double rad = sqrt(-2.0 * log((double)((r1 >> 11) + 1) * 0x1p-53));
                        double th = 2.0 * M_PI * ((double)(r2 >> 11) * 0x1p-53);
                        double z = e % 2 ? rad * sin(th) : rad * cos(th);
                        bad += !(fabs(n64[e] - z) <= 1e-14 * (1 + rad));
                        /* float32 from the high words, in float32 arithmetic. */
                        uint32_t h1 = (uint32_t)(r1 >> 32), h2 = (uint32_t)(r2 >> 32);
                        float u1 = (float)(int32_t)(h1 >> 1) * 0x1p-31f + 0x1p-33f;
                        double rf = sqrt(-2.0 * log((double)u1));
                        double tf = 2.0 * M_PI * ((double)(h2 >> 8) * 0x1p-24);
                        double zf = e % 2 ? rf * sin(tf) : rf * cos(tf);
                        bad += !(fabs(n32[e] - zf) <= 3e-6 * (1 + rf));
                        /* and close to float64's, whose uniforms it rounds: u1 by up
                         * to 2^-25 near 1, which moves r by 2^-25 / r there. */
                        double tol = 1e-5 * (1 + rad) + 0x1p-25 / rad;
                        bad += !(fabs(n32[e] - z) <= tol) && h1 > 4096;
                    }
                    CHECK_EQ(bad, 0);
                    free(u32);
                    free(n32);
                    free(u64);
                    free(n64);
                    free(i64);
                    free(w64);
                    for (int op = 0; op < 6; op++) {
                        ev_tensor_unref(t[op]);
                        ev_tensor_unref(base[op]);
                    }
                }
                ev_generator_destroy(g);
            }
        }
    }
#endif
}

/* ... with each Philox loop the library has (those the CPU lacks fall back
 * to the next narrower one). */
static void test_matches_reference(void)
{
    for (int level = 3; level >= 0; level--) {
        ev__random_cap_philox(level);
        matches_reference();
    }
}

/* Same seed, same values; another seed or the next call, other values; the
 * offset moves by numel * words-per-element rounded up to 4. */
static void test_seed_and_offsets(void)
{
    const int64_t shape[2] = {3, 5};
    for (int op = 0; op < OP_COUNT_; op++) {
        ev_dtype dt = op == OP_RANDN ? EV_FLOAT64 : EV_FLOAT32;
        ev_generator *g1 = new_gen(1234), *g2 = new_gen(1234), *g3 = new_gen(1235);
        ev_tensor *a = issue(&EX, g1, op, dt, 2, shape);
        ev_tensor *b = issue(&EX, g2, op, dt, 2, shape);
        ev_tensor *c = issue(&EX, g3, op, dt, 2, shape);
        ev_tensor *d = issue(&EX, g1, op, dt, 2, shape);
        CHECK(same_bits(a, b));
        CHECK(!same_bits(a, c));
        CHECK(!same_bits(a, d));
        /* words per element: rand f32 1, randn 2, randint 2 (n <= 2^32) or 4. */
        const uint64_t wpe[OP_COUNT_] = {1, 2, 2, 4};
        uint64_t adv = (15 * wpe[op] + 3) / 4 * 4;
        CHECK_EQ(get_state(g1).offset, 2 * adv);
        CHECK_EQ(get_state(g2).offset, adv);
        CHECK_EQ(get_state(g1).seed, 1234);
        ev_tensor_unref(a);
        ev_tensor_unref(b);
        ev_tensor_unref(c);
        ev_tensor_unref(d);
        ev_generator_destroy(g1);
        ev_generator_destroy(g2);
        ev_generator_destroy(g3);
    }
    /* float64 rand takes two words per element. */
    ev_generator *g = new_gen(5);
    ev_tensor *t;
    CHECK_OK(ev_rand(&EX, g, EV_FLOAT64, 1, SHAPE(3), &t));
    CHECK_EQ(get_state(g).offset, 8);
    ev_tensor_unref(t);
    ev_generator_destroy(g);
}

/* get_state/set_state replays; manual_seed resets the offset. */
static void test_state_replay(void)
{
    ev_generator *g = new_gen(99);
    ev_tensor *warm = issue(&EX, g, OP_RAND, EV_FLOAT32, 1, SHAPE(7));
    ev_generator_state s = get_state(g);
    CHECK_EQ(s.seed, 99);
    CHECK_EQ(s.offset, 8);
    ev_tensor *first[OP_COUNT_], *again[OP_COUNT_];
    for (int op = 0; op < OP_COUNT_; op++) {
        first[op] = issue(&EX, g, op, EV_FLOAT32, 2, SHAPE(4, 9));
    }
    ev_generator_state end = get_state(g);
    CHECK_OK(ev_generator_set_state(g, &s));
    for (int op = 0; op < OP_COUNT_; op++) {
        again[op] = issue(&EX, g, op, EV_FLOAT32, 2, SHAPE(4, 9));
    }
    CHECK_EQ(get_state(g).offset, end.offset);
    for (int op = 0; op < OP_COUNT_; op++) {
        CHECK(same_bits(first[op], again[op]));
        ev_tensor_unref(first[op]);
        ev_tensor_unref(again[op]);
    }
    /* manual_seed is set_state(seed, 0). */
    ev_tensor *w2;
    ev_generator_manual_seed(g, 99);
    CHECK_EQ(get_state(g).offset, 0);
    CHECK_OK(ev_rand(&EX, g, EV_FLOAT32, 1, SHAPE(7), &w2));
    CHECK(same_bits(warm, w2));
    ev_tensor_unref(warm);
    ev_tensor_unref(w2);
    /* Offsets must stay on block boundaries. */
    ev_generator_state bad = {1, 6};
    CHECK_EQ(ev_generator_set_state(g, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "multiple of 4");
    CHECK_EQ(ev_generator_set_state(g, NULL), EV_EINVAL);
    CHECK_EQ(ev_generator_get_state(g, NULL), EV_EINVAL);
    CHECK_EQ(get_state(g).seed, 99);
    ev_generator_destroy(g);
}

/* The same op from the same state on worker 0 and worker 3 gives the same
 * bits, for every op and dtype. */
static void test_thread_uid_independent(void)
{
    ev_exec ex3 = EX;
    ex3.thread_uid = 3;
    const ev_dtype dts[2] = {EV_FLOAT32, EV_FLOAT64};
    for (int op = 0; op < OP_COUNT_; op++) {
        for (int k = 0; k < 2; k++) {
            ev_generator *g = new_gen(77);
            ev_generator_state s = get_state(g);
            ev_tensor *a = issue(&EX, g, op, dts[k], 3, SHAPE(3, 50, 7));
            CHECK_OK(ev_generator_set_state(g, &s));
            ev_tensor *b = issue(&ex3, g, op, dts[k], 3, SHAPE(3, 50, 7));
            CHECK(same_bits(a, b));
            ev_tensor_unref(a);
            ev_tensor_unref(b);
            ev_generator_destroy(g);
        }
    }
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

/* Values are fixed at the call, not when the kernel runs: uniform_ waits
 * behind a held writer while the generator is reseeded, used again and
 * destroyed; the result still equals the one from the state at the call. */
static void test_fixed_at_call(void)
{
    ev_generator *ref = new_gen(2024);
    ev_tensor *want;
    CHECK_OK(ev_rand(&EX, ref, EV_FLOAT64, 2, SHAPE(64, 33), &want));

    ev_tensor *t;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 2, SHAPE(64, 33), &t));
    atomic_store_explicit(&gate, 0, memory_order_relaxed);
    ev_operand op = {ev_tensor_obj(t), EV_WRITE};
    ev_instr_desc d = {
        .kernel = wait_gate,
        .stream = ev_cpu_stream(1),
        .operands = &op,
        .n_operands = 1,
        .name = "wait_gate",
    };
    CHECK_OK(ev_submit(test_vm, &d, NULL));
    ev_generator *g = new_gen(2024);
    ev_exec ex2 = EX;
    ex2.thread_uid = 2;
    CHECK_OK(ev_uniform_(&ex2, g, t, 0.0, 1.0));
    ev_generator_manual_seed(g, 1);
    ev_tensor *other;
    CHECK_OK(ev_rand(&ex2, g, EV_FLOAT64, 2, SHAPE(64, 33), &other));
    ev_generator_destroy(g);
    atomic_store_explicit(&gate, 1, memory_order_release);
    CHECK(same_bits(t, want));
    CHECK(!same_bits(other, want));
    ev_tensor_unref(t);
    ev_tensor_unref(want);
    ev_tensor_unref(other);
    ev_generator_destroy(ref);
}

/* ----------------------------------------------------- two issuing threads */

enum { CALLS = 40, LEN = 300 };

typedef struct issuer {
    ev_generator *gen;
    uint32_t uid;
    ev_tensor *out[CALLS];
} issuer;

static void *issue_many(void *p)
{
    issuer *is = p;
    ev_exec ex = EX;
    ex.thread_uid = is->uid;
    for (int i = 0; i < CALLS; i++) {
        int op = i % OP_COUNT_;
        is->out[i] = issue(&ex, is->gen, op, EV_FLOAT32, 1, SHAPE(LEN));
        if (i % 7 == 0) {
            sched_yield();
        }
    }
    return NULL;
}

static void run_two(issuer *a, issuer *b)
{
    pthread_t ta, tb;
    CHECK_EQ(pthread_create(&ta, NULL, issue_many, a), 0);
    CHECK_EQ(pthread_create(&tb, NULL, issue_many, b), 0);
    CHECK_EQ(pthread_join(ta, NULL), 0);
    CHECK_EQ(pthread_join(tb, NULL), 0);
}

/* Two OS threads with their own generators, interleaved however the
 * scheduler likes, each get what a lone serial run gives; two threads
 * sharing one generator get disjoint counter ranges that together use it
 * up exactly. */
static void test_two_issuing_threads(void)
{
    issuer a = {new_gen(11), 1, {0}}, b = {new_gen(12), 2, {0}};
    run_two(&a, &b);
    issuer sa = {new_gen(11), 0, {0}}, sb = {new_gen(12), 0, {0}};
    issue_many(&sa);
    issue_many(&sb);
    for (int i = 0; i < CALLS; i++) {
        CHECK(same_bits(a.out[i], sa.out[i]));
        CHECK(same_bits(b.out[i], sb.out[i]));
    }
    issuer *all[4] = {&a, &b, &sa, &sb};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < CALLS; i++) {
            ev_tensor_unref(all[k]->out[i]);
        }
        ev_generator_destroy(all[k]->gen);
    }

    /* Shared generator: both threads issue the same sequence of ops. */
    ev_generator *shared = new_gen(13);
    issuer c = {shared, 1, {0}}, d = {shared, 2, {0}};
    pthread_t tc, td;
    ev_generator_state s0 = get_state(shared);
    CHECK_EQ(pthread_create(&tc, NULL, issue_many, &c), 0);
    CHECK_EQ(pthread_create(&td, NULL, issue_many, &d), 0);
    CHECK_EQ(pthread_join(tc, NULL), 0);
    CHECK_EQ(pthread_join(td, NULL), 0);
    /* So the total is twice one run. */
    uint64_t one = 0;
    const uint64_t wpe[OP_COUNT_] = {1, 2, 2, 4};
    for (int i = 0; i < CALLS; i++) {
        one += ((uint64_t)LEN * wpe[i % OP_COUNT_] + 3) / 4 * 4;
    }
    CHECK_EQ(get_state(shared).offset, s0.offset + 2 * one);
    /* Each result equals the same op replayed at some offset, and no two
     * results came from the same counters. */
    ev_generator *replay = new_gen(13);
    int found = 0;
    uint64_t off = s0.offset;
    int used_c[CALLS] = {0}, used_d[CALLS] = {0};
    while (off < s0.offset + 2 * one) {
        int hit = 0;
        for (int k = 0; k < 2 && !hit; k++) {
            issuer *is = k ? &d : &c;
            int *used = k ? used_d : used_c;
            /* The next unmatched call of this thread is the only candidate:
             * each thread reserves in its own program order. */
            int i = 0;
            while (i < CALLS && used[i]) {
                i++;
            }
            if (i == CALLS) {
                continue;
            }
            ev_generator_state st = {13, off};
            CHECK_OK(ev_generator_set_state(replay, &st));
            ev_tensor *r = issue(&EX, replay, i % OP_COUNT_, EV_FLOAT32, 1, SHAPE(LEN));
            if (same_bits(r, is->out[i])) {
                used[i] = 1;
                hit = 1;
                found++;
                off = get_state(replay).offset;
            }
            ev_tensor_unref(r);
        }
        CHECK(hit);
    }
    CHECK_EQ(found, 2 * CALLS);
    for (int i = 0; i < CALLS; i++) {
        ev_tensor_unref(c.out[i]);
        ev_tensor_unref(d.out[i]);
    }
    ev_generator_destroy(replay);
    ev_generator_destroy(shared);
}

/* ------------------------------------------------------------- statistics */

enum { NS = 1000000 };

/* Sample mean and (population) variance of n values read as float64. */
static void moments(ev_tensor *t, double *mean, double *var, double *lo, double *hi)
{
    int64_t n = ev_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)n);
    CHECK(v);
    read_f64(t, v);
    double s = 0, mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s += v[i];
        mn = v[i] < mn ? v[i] : mn;
        mx = v[i] > mx ? v[i] : mx;
    }
    double m = s / (double)n, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        ss += (v[i] - m) * (v[i] - m);
    }
    *mean = m;
    *var = ss / (double)n;
    *lo = mn;
    *hi = mx;
    free(v);
}

/* |got - want| within 5 standard errors. */
#define CHECK_SIGMA(got, want, se)                                                     \
    do {                                                                               \
        double g_ = (got), w_ = (want), s_ = (se);                                     \
        if (!(fabs(g_ - w_) <= 5 * s_)) {                                              \
            EV_CHECK_FAIL_("%s = %.8g, expected %.8g within 5 x %.3g", #got, g_, w_, s_); \
        }                                                                              \
    } while (0)

static void test_uniform_stats(void)
{
    ev_generator *g = new_gen(31337);
    const ev_dtype dts[2] = {EV_FLOAT32, EV_FLOAT64};
    for (int k = 0; k < 2; k++) {
        ev_tensor *t;
        CHECK_OK(ev_rand(&EX, g, dts[k], 1, SHAPE(NS), &t));
        double m, v, lo, hi;
        moments(t, &m, &v, &lo, &hi);
        /* U[0,1): mean 1/2, variance 1/12; the variance's standard error is
         * sqrt((mu4 - sigma^4) / n) with mu4 = 1/80. */
        CHECK_SIGMA(m, 0.5, sqrt(1.0 / 12 / NS));
        CHECK_SIGMA(v, 1.0 / 12, sqrt((1.0 / 80 - 1.0 / 144) / NS));
        CHECK(lo >= 0 && hi < 1);
        ev_tensor_unref(t);
        /* uniform_ on [-2, 3): the same shape scaled by 5. */
        CHECK_OK(ev_empty(&EX, dts[k], 2, SHAPE(1000, NS / 1000), &t));
        CHECK_OK(ev_uniform_(&EX, g, t, -2.0, 3.0));
        moments(t, &m, &v, &lo, &hi);
        CHECK_SIGMA(m, 0.5, 5 * sqrt(1.0 / 12 / NS));
        CHECK_SIGMA(v, 25.0 / 12, 25 * sqrt((1.0 / 80 - 1.0 / 144) / NS));
        CHECK(lo >= -2 && hi < 3);
        ev_tensor_unref(t);
    }
    /* A span that rounds up to hi in float32 is kept below it. */
    ev_tensor *t;
    CHECK_OK(ev_empty(&EX, EV_FLOAT32, 1, SHAPE(100000), &t));
    CHECK_OK(ev_uniform_(&EX, g, t, 1.0, 1.0 + 0x1p-22));
    float *v = raw(t);
    for (int i = 0; i < 100000; i++) {
        CHECK(v[i] >= 1.0f && v[i] < 1.0f + 0x1p-22f);
    }
    free(v);
    /* lo == hi fills lo. */
    CHECK_OK(ev_uniform_(&EX, g, t, 0.25, 0.25));
    v = raw(t);
    for (int i = 0; i < 100000; i++) {
        CHECK(v[i] == 0.25f);
    }
    free(v);
    ev_tensor_unref(t);
    ev_generator_destroy(g);
}

static void test_normal_stats(void)
{
    ev_generator *g = new_gen(8);
    const ev_dtype dts[2] = {EV_FLOAT32, EV_FLOAT64};
    for (int k = 0; k < 2; k++) {
        ev_tensor *t;
        CHECK_OK(ev_randn(&EX, g, dts[k], 1, SHAPE(NS), &t));
        double m, v, lo, hi;
        moments(t, &m, &v, &lo, &hi);
        /* N(0,1): the variance's standard error is sqrt(2 / n). */
        CHECK_SIGMA(m, 0.0, sqrt(1.0 / NS));
        CHECK_SIGMA(v, 1.0, sqrt(2.0 / NS));
        CHECK(lo > -8.6 && hi < 8.6);
        /* The share within one sigma, 0.6826895, binomial standard error. */
        double *x = malloc(sizeof(double) * NS);
        CHECK(x);
        read_f64(t, x);
        int64_t in1 = 0;
        for (int i = 0; i < NS; i++) {
            in1 += fabs(x[i]) < 1;
        }
        free(x);
        double p = 0.6826894921370859;
        CHECK_SIGMA((double)in1 / NS, p, sqrt(p * (1 - p) / NS));
        ev_tensor_unref(t);
        /* normal_(3, 2) on a strided view. */
        ev_tensor *base, *view;
        CHECK_OK(ev_empty(&EX, dts[k], 2, SHAPE(NS / 500, 1000), &base));
        CHECK_OK(ev_slice(base, 1, 0, INT64_MAX, 2, &view));
        CHECK_OK(ev_normal_(&EX, g, view, 3.0, 2.0));
        moments(view, &m, &v, &lo, &hi);
        CHECK_SIGMA(m, 3.0, 2 * sqrt(1.0 / NS));
        CHECK_SIGMA(v, 4.0, 4 * sqrt(2.0 / NS));
        ev_tensor_unref(view);
        ev_tensor_unref(base);
    }
    /* float32 randn agrees with float64 randn to float32 precision (loosely
     * here; test_matches_reference has the bound). */
    ev_generator_state s = get_state(g);
    ev_tensor *a, *b;
    CHECK_OK(ev_randn(&EX, g, EV_FLOAT32, 1, SHAPE(1001), &a));
    CHECK_OK(ev_generator_set_state(g, &s));
    CHECK_OK(ev_randn(&EX, g, EV_FLOAT64, 1, SHAPE(1001), &b));
    float *fa = raw(a);
    double *fb = raw(b);
    for (int i = 0; i < 1001; i++) {
        CHECK(fabs(fa[i] - fb[i]) <= 1e-4 * (1 + fabs(fb[i])));
    }
    free(fa);
    free(fb);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
    /* std 0 gives the mean. */
    CHECK_OK(ev_empty(&EX, EV_FLOAT64, 1, SHAPE(5), &a));
    CHECK_OK(ev_normal_(&EX, g, a, -1.5, 0.0));
    check_tensor(a, EV_FLOAT64, 1, SHAPE(5), VALS(-1.5, -1.5, -1.5, -1.5, -1.5), 0);
    ev_tensor_unref(a);
    ev_generator_destroy(g);
}

/* Pearson's statistic of counts against a uniform expectation. */
static double chi_square(const int64_t *counts, int k, int64_t n)
{
    double e = (double)n / k, x = 0;
    for (int i = 0; i < k; i++) {
        x += (counts[i] - e) * (counts[i] - e) / e;
    }
    return x;
}

static void test_randint_stats(void)
{
    ev_generator *g = new_gen(4242);
    /* [-3, 7) in int32: every value appears, never 7; the chi-square bound
     * 50 with 9 degrees of freedom has p < 1e-6. */
    ev_tensor *t;
    enum { N = 200000 };
    CHECK_OK(ev_randint(&EX, g, -3, 7, EV_INT32, 2, SHAPE(400, N / 400), &t));
    CHECK_EQ(ev_tensor_dtype(t), EV_INT32);
    int32_t *v = raw(t);
    int64_t counts[16] = {0};
    for (int i = 0; i < N; i++) {
        CHECK(v[i] >= -3 && v[i] < 7);
        counts[v[i] + 3]++;
    }
    for (int i = 0; i < 10; i++) {
        CHECK_GT(counts[i], 0);
    }
    CHECK(chi_square(counts, 10, N) < 50);
    free(v);
    ev_tensor_unref(t);

    /* The narrow dtypes over their whole range: in bounds, the extremes
     * seen for 8 bits, within 100 of them for int16 (P(miss) < 1e-130). */
    const ev_dtype nd[3] = {EV_UINT8, EV_INT8, EV_INT16};
    for (int k = 0; k < 3; k++) {
        int64_t lo, hi;
        CHECK_OK(ev_dtype_int_range(nd[k], &lo, &hi));
        CHECK_OK(ev_randint(&EX, g, lo, hi + 1, nd[k], 1, SHAPE(N), &t));
        CHECK_EQ(ev_tensor_dtype(t), nd[k]);
        int64_t *x = malloc(sizeof(int64_t) * N);
        CHECK(x);
        read_i64(t, x);
        int64_t mn = hi, mx = lo;
        for (int i = 0; i < N; i++) {
            mn = x[i] < mn ? x[i] : mn;
            mx = x[i] > mx ? x[i] : mx;
        }
        int64_t slack = nd[k] == EV_INT16 ? 100 : 0;
        CHECK(mn >= lo && mn <= lo + slack);
        CHECK(mx <= hi && mx >= hi - slack);
        free(x);
        ev_tensor_unref(t);
    }

    /* [0, 1) is all zeros. */
    CHECK_OK(ev_randint(&EX, g, 0, 1, EV_INT64, 1, SHAPE(9), &t));
    check_tensor(t, EV_INT64, 1, SHAPE(9), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0), 0);
    ev_tensor_unref(t);

    /* The whole int32 range and a full-width int64 range (128-bit draws):
     * 16 buckets by the top bits of the offset from low (15 dof, bound 60). */
    struct {
        int64_t low, high;
        ev_dtype dt;
        int shift;
    } cases[3] = {
        {INT32_MIN, (int64_t)INT32_MAX + 1, EV_INT32, 28},
        {INT64_MIN, INT64_MAX, EV_INT64, 60},
        /* n = 3 * 2^61: the top bits of the offset in 12 equal buckets. */
        {-((int64_t)1 << 61), (int64_t)1 << 62, EV_INT64, 59},
    };
    for (int c = 0; c < 3; c++) {
        CHECK_OK(ev_randint(&EX, g, cases[c].low, cases[c].high, cases[c].dt, 1, SHAPE(N),
                            &t));
        int64_t *x = malloc(sizeof(int64_t) * N);
        CHECK(x);
        read_i64(t, x);
        int k = c == 2 ? 12 : 16;
        memset(counts, 0, sizeof counts);
        for (int i = 0; i < N; i++) {
            CHECK(x[i] >= cases[c].low && x[i] < cases[c].high);
            uint64_t off = (uint64_t)x[i] - (uint64_t)cases[c].low;
            counts[off >> cases[c].shift]++;
        }
        CHECK(chi_square(counts, k, N) < 60);
        free(x);
        ev_tensor_unref(t);
    }
    ev_generator_destroy(g);
}

/* ------------------------------------------------------ shapes and views */

static void test_zero_size_and_0d(void)
{
    ev_generator *g = new_gen(3);
    const int64_t shapes[2][3] = {{0, 0, 0}, {2, 0, 3}};
    const int ndims[2] = {1, 3};
    for (int s = 0; s < 2; s++) {
        for (int op = 0; op < OP_COUNT_; op++) {
            ev_tensor *t = issue(&EX, g, op, EV_FLOAT64, ndims[s], shapes[s]);
            CHECK_EQ(ev_tensor_numel(t), 0);
            CHECK_EQ(ev_tensor_ndim(t), ndims[s]);
            ev_tensor_unref(t);
        }
    }
    ev_tensor *e;
    CHECK_OK(ev_empty(&EX, EV_FLOAT32, 2, SHAPE(0, 4), &e));
    CHECK_OK(ev_uniform_(&EX, g, e, 0, 1));
    CHECK_OK(ev_normal_(&EX, g, e, 0, 1));
    ev_tensor_unref(e);
    CHECK_EQ(get_state(g).offset, 0); /* nothing consumed */

    /* 0-d: one value, one block. */
    ev_tensor *r, *n, *i;
    CHECK_OK(ev_rand(&EX, g, EV_FLOAT32, 0, NULL, &r));
    CHECK_OK(ev_randn(&EX, g, EV_FLOAT64, 0, NULL, &n));
    CHECK_OK(ev_randint(&EX, g, 5, 9, EV_INT64, 0, NULL, &i));
    CHECK_EQ(get_state(g).offset, 12);
    CHECK_EQ(ev_tensor_ndim(r), 0);
    CHECK_EQ(ev_tensor_numel(r), 1);
    double vr, vn;
    int64_t vi;
    read_f64(r, &vr);
    read_f64(n, &vn);
    read_i64(i, &vi);
    CHECK(vr >= 0 && vr < 1);
    CHECK(isfinite(vn));
    CHECK(vi >= 5 && vi < 9);
    /* The 0-d value is element 0 of a 1-d call from the same state. */
    ev_tensor *r1;
    ev_generator_manual_seed(g, 3);
    CHECK_OK(ev_rand(&EX, g, EV_FLOAT32, 1, SHAPE(3), &r1));
    double v3[3];
    read_f64(r1, v3);
    CHECK(v3[0] == vr);
    ev_tensor_unref(r);
    ev_tensor_unref(n);
    ev_tensor_unref(i);
    ev_tensor_unref(r1);
    ev_generator_destroy(g);
}

/* In place on a transposed or sliced view, values follow the view's C order:
 * they equal rand/randn of the view's shape from the same state, and the
 * elements outside the view stay untouched. */
static void test_inplace_views(void)
{
    ev_generator *g = new_gen(17);
    const ev_dtype dts[2] = {EV_FLOAT32, EV_FLOAT64};
    for (int k = 0; k < 2; k++) {
        for (int normal = 0; normal < 2; normal++) {
            ev_tensor *base, *tr, *view;
            CHECK_OK(ev_zeros(&EX, dts[k], 2, SHAPE(6, 10), &base));
            CHECK_OK(ev_transpose(base, 0, 1, &tr));         /* [10, 6] */
            CHECK_OK(ev_slice(tr, 0, 1, INT64_MAX, 3, &view)); /* [3, 6] */
            ev_generator_state s = get_state(g);
            if (normal) {
                CHECK_OK(ev_normal_(&EX, g, view, 0.0, 1.0));
            } else {
                CHECK_OK(ev_uniform_(&EX, g, view, 0.0, 1.0));
            }
            CHECK_OK(ev_generator_set_state(g, &s));
            ev_tensor *want = issue(&EX, g, normal ? OP_RANDN : OP_RAND, dts[k], 2,
                                    SHAPE(3, 6));
            double got[18], w[18], all[60];
            read_f64(view, got);
            read_f64(want, w);
            for (int i = 0; i < 18; i++) {
                CHECK(got[i] == w[i]);
            }
            read_f64(base, all);
            int written = 0;
            for (int i = 0; i < 60; i++) {
                written += all[i] != 0;
            }
            CHECK_EQ(written, 18);
            ev_tensor_unref(want);
            ev_tensor_unref(view);
            ev_tensor_unref(tr);
            ev_tensor_unref(base);
        }
    }
    ev_generator_destroy(g);
}

/* ---------------------------------------------------- generators, errors */

static void test_default_generator(void)
{
    ev_generator *d = ev_default_generator();
    CHECK(d != NULL);
    CHECK(ev_default_generator() == d);
    ev_generator_manual_seed(NULL, 555);
    CHECK_EQ(get_state(d).seed, 555);
    ev_tensor *a, *b;
    CHECK_OK(ev_randn(&EX, NULL, EV_FLOAT64, 1, SHAPE(10), &a));
    CHECK_EQ(get_state(NULL).offset, 20);
    ev_generator *g = new_gen(555);
    CHECK_OK(ev_randn(&EX, g, EV_FLOAT64, 1, SHAPE(10), &b));
    CHECK(same_bits(a, b));
    ev_generator_destroy(d); /* ignored */
    ev_generator_destroy(NULL);
    CHECK_EQ(get_state(d).offset, 20);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
    ev_generator_destroy(g);
    /* Creation is walked through an allocation failure. */
    ev_generator *f = NULL;
    ev__fail_alloc_after(0);
    int rc = ev_generator_create(1, &f);
    ev__fail_alloc_after(-1);
    CHECK_EQ(rc, EV_ENOMEM);
    CHECK(f == NULL);
    CHECK_EQ(ev_generator_create(1, NULL), EV_EINVAL);
}

#define CHECK_ERR(expr, code, text)                                                   \
    do {                                                                              \
        CHECK_EQ((expr), (code));                                                     \
        CHECK_STR_CONTAINS(ev_last_message(), (text));                                \
    } while (0)

static void test_errors(void)
{
    ev_generator *g = new_gen(1);
    ev_tensor *t = NULL;
    const int64_t *s3 = SHAPE(3);
    CHECK_ERR(ev_rand(&EX, g, EV_INT32, 1, s3, &t), EV_ETYPE, "rand: dtype int32");
    CHECK_ERR(ev_rand(&EX, g, EV_BOOL, 1, s3, &t), EV_ETYPE, "rand: dtype bool");
    CHECK_ERR(ev_randn(&EX, g, EV_INT64, 1, s3, &t), EV_ETYPE, "randn");
    CHECK_ERR(ev_rand(&EX, g, (ev_dtype)42, 1, s3, &t), EV_EINVAL, "rand: invalid dtype");
    CHECK_ERR(ev_rand(&EX, g, EV_FLOAT32, 1, SHAPE(-2), &t), EV_EINVAL, "rand: negative");
    CHECK_ERR(ev_randn(&EX, g, EV_FLOAT32, EV_MAX_DIMS + 1, s3, &t), EV_EINVAL, "randn: ndim");
    CHECK_ERR(ev_rand(&EX, g, EV_FLOAT32, 2, NULL, &t), EV_EINVAL, "shape is NULL");
    CHECK_ERR(ev_rand(&EX, g, EV_FLOAT32, 1, s3, NULL), EV_EINVAL, "rand: out is NULL");
    CHECK_ERR(ev_rand(NULL, g, EV_FLOAT32, 1, s3, &t), EV_EINVAL, "rand: the exec");
    CHECK_ERR(ev_randint(&EX, g, 5, 5, EV_INT64, 1, s3, &t), EV_EINVAL,
              "randint: high (5) must be greater than low (5)");
    CHECK_ERR(ev_randint(&EX, g, 5, -1, EV_INT64, 1, s3, &t), EV_EINVAL, "randint: high");
    CHECK_ERR(ev_randint(&EX, g, 0, 10, EV_FLOAT32, 1, s3, &t), EV_ETYPE,
              "randint: dtype float32");
    CHECK_ERR(ev_randint(&EX, g, 0, 2, EV_BOOL, 1, s3, &t), EV_ETYPE, "randint: dtype bool");
    CHECK_ERR(ev_randint(&EX, g, 0, (int64_t)INT32_MAX + 2, EV_INT32, 1, s3, &t), EV_EINVAL,
              "does not fit dtype int32");
    CHECK_ERR(ev_randint(&EX, g, (int64_t)INT32_MIN - 1, 0, EV_INT32, 1, s3, &t), EV_EINVAL,
              "does not fit dtype int32");
    CHECK_ERR(ev_randint(&EX, g, 0, 257, EV_UINT8, 1, s3, &t), EV_EINVAL,
              "randint: the range [0, 257) does not fit dtype uint8");
    CHECK_ERR(ev_randint(&EX, g, -1, 3, EV_UINT8, 1, s3, &t), EV_EINVAL,
              "does not fit dtype uint8");
    CHECK_ERR(ev_randint(&EX, g, -129, 0, EV_INT8, 1, s3, &t), EV_EINVAL,
              "does not fit dtype int8");
    CHECK_ERR(ev_randint(&EX, g, 0, 32769, EV_INT16, 1, s3, &t), EV_EINVAL,
              "does not fit dtype int16");
    CHECK_ERR(ev_randint(&EX, g, 0, 2, EV_INT64, 1, SHAPE(-1), &t), EV_EINVAL,
              "randint: negative");
    CHECK(t == NULL); /* untouched on failure */

    ev_tensor *f, *i, *x;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 1, SHAPE(4), &f));
    CHECK_OK(ev_zeros(&EX, EV_INT32, 1, SHAPE(4), &i));
    CHECK_OK(ev_expand(f, 2, SHAPE(3, 4), &x));
    CHECK_ERR(ev_uniform_(&EX, g, i, 0, 1), EV_ETYPE, "uniform_: dtype int32");
    CHECK_ERR(ev_normal_(&EX, g, i, 0, 1), EV_ETYPE, "normal_: dtype int32");
    CHECK_ERR(ev_uniform_(&EX, g, x, 0, 1), EV_EINVAL, "uniform_: the tensor is expanded");
    CHECK_ERR(ev_normal_(&EX, g, x, 0, 1), EV_EINVAL, "normal_: the tensor is expanded");
    CHECK_ERR(ev_uniform_(&EX, g, NULL, 0, 1), EV_EINVAL, "uniform_: t is NULL");
    CHECK_ERR(ev_uniform_(&EX, g, f, 2, 1), EV_EINVAL, "uniform_: need finite lo <= hi");
    CHECK_ERR(ev_uniform_(&EX, g, f, NAN, 1), EV_EINVAL, "uniform_");
    CHECK_ERR(ev_uniform_(&EX, g, f, 0, INFINITY), EV_EINVAL, "uniform_");
    CHECK_ERR(ev_uniform_(&EX, g, f, 0, 1e300), EV_EINVAL, "float32");
    CHECK_ERR(ev_uniform_(&EX, g, f, -3e38, 3e38), EV_EINVAL, "float32");
    CHECK_ERR(ev_normal_(&EX, g, f, 0, -1), EV_EINVAL, "normal_: need a finite mean");
    CHECK_ERR(ev_normal_(&EX, g, f, INFINITY, 1), EV_EINVAL, "normal_");
    CHECK_ERR(ev_normal_(&EX, g, f, 0, NAN), EV_EINVAL, "normal_");
    /* Nothing was consumed by the failed calls. */
    CHECK_EQ(get_state(g).offset, 0);
    ev_tensor_unref(x);
    ev_tensor_unref(f);
    ev_tensor_unref(i);
    ev_generator_destroy(g);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_known_answers);
    RUN_TEST(test_matches_reference);
    RUN_TEST(test_seed_and_offsets);
    RUN_TEST(test_state_replay);
    RUN_TEST(test_thread_uid_independent);
    RUN_TEST(test_fixed_at_call);
    RUN_TEST(test_two_issuing_threads);
    RUN_TEST(test_uniform_stats);
    RUN_TEST(test_normal_stats);
    RUN_TEST(test_randint_stats);
    RUN_TEST(test_zero_size_and_0d);
    RUN_TEST(test_inplace_views);
    RUN_TEST(test_default_generator);
    RUN_TEST(test_errors);
    test_teardown();
    return 0;
}
