/* Tests of one_hot, cross_entropy and randperm: values against references
 * computed here (strided and 0-d inputs, both index dtypes, every
 * reduction, logits large enough to overflow a naive exp), indices out of
 * range failing the instruction with a message naming the index and the
 * class count (DESIGN rule 6) while the runtime stays usable, errors at the
 * call, and randperm being a permutation that depends only on the
 * generator's state, never on the worker. */
#include "tensor_test.h"

/* Waiting for t reports the failed kernel's code and a message containing
 * want; a readback fails too. */
static void check_fails(ev_tensor *t, int code, const char *want)
{
    ev_error *err = NULL;
    CHECK_NE(ev_wait_obj(test_vm, ev_tensor_obj(t), &err), 0);
    CHECK(err != NULL);
    ev_error_info info;
    ev_error_get(err, &info);
    CHECK_EQ(info.code, code);
    CHECK_STR_CONTAINS(info.message, want);
    ev_error_unref(err);
    int64_t n = ev_tensor_numel(t);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    CHECK_NE(ev_to_host(&EX, t, buf), 0);
    CHECK_STR_CONTAINS(ev_last_message(), want);
    free(buf);
}

#define CHECK_ERR(expr, code, want)                            \
    do {                                                       \
        CHECK_EQ((expr), (code));                              \
        CHECK_STR_CONTAINS(ev_last_message(), (want));         \
    } while (0)

/* ---------------------------------------------------------------- one_hot */

static void test_one_hot_values(void)
{
    /* Every integer dtype: uint8 labels go in as they are. */
    const ev_dtype dts[5] = {EV_INT32, EV_INT64, EV_UINT8, EV_INT8, EV_INT16};
    for (int k = 0; k < 5; k++) {
        ev_tensor *ix = tensor_from(dts[k], 2, SHAPE(2, 3), VALS(0, 3, 1, 2, 2, 0));
        ev_tensor *r;
        CHECK_OK(ev_one_hot(&EX, ix, 4, &r));
        check_tensor(r, EV_INT64, 3, SHAPE(2, 3, 4),
                     VALS(1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0,
                          0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0), 0);
        ev_tensor_unref(r);
        /* A transposed (non-contiguous) index follows its logical order. */
        ev_tensor *it;
        CHECK_OK(ev_transpose(ix, 0, 1, &it)); /* [[0,2],[3,2],[1,0]] */
        CHECK_OK(ev_one_hot(&EX, it, 5, &r));
        check_tensor(r, EV_INT64, 3, SHAPE(3, 2, 5),
                     VALS(1, 0, 0, 0, 0, 0, 0, 1, 0, 0,
                          0, 0, 0, 1, 0, 0, 0, 1, 0, 0,
                          0, 1, 0, 0, 0, 1, 0, 0, 0, 0), 0);
        ev_tensor_unref(r);
        ev_tensor_unref(it);
        ev_tensor_unref(ix);
    }
    /* 0-d index: a 1-d result. */
    ev_tensor *s = tensor_from(EV_INT64, 0, NULL, VALS(2)), *r;
    CHECK_OK(ev_one_hot(&EX, s, 3, &r));
    check_tensor(r, EV_INT64, 1, SHAPE(3), VALS(0, 0, 1), 0);
    ev_tensor_unref(r);
    ev_tensor_unref(s);
    /* Empty index: an empty result of the right shape. */
    ev_tensor *e;
    CHECK_OK(ev_zeros(&EX, EV_INT32, 2, SHAPE(0, 4), &e));
    CHECK_OK(ev_one_hot(&EX, e, 6, &r));
    check_tensor(r, EV_INT64, 3, SHAPE(0, 4, 6), NULL, 0);
    ev_tensor_unref(r);
    ev_tensor_unref(e);
}

static void test_one_hot_errors(void)
{
    ev_tensor *ix = tensor_from(EV_INT64, 1, SHAPE(3), VALS(0, 4, 1)), *r;
    CHECK_OK(ev_one_hot(&EX, ix, 4, &r));
    check_fails(r, EV_EINDEX, "one_hot: index 4 is out of range for num_classes 4");
    ev_tensor_unref(r);
    ev_tensor *neg = tensor_from(EV_INT32, 1, SHAPE(2), VALS(1, -1));
    CHECK_OK(ev_one_hot(&EX, neg, 4, &r));
    check_fails(r, EV_EINDEX, "one_hot: index -1 is out of range for num_classes 4");
    ev_tensor_unref(r);
    /* The runtime stays usable after a failed kernel. */
    CHECK_OK(ev_one_hot(&EX, ix, 5, &r));
    check_tensor(r, EV_INT64, 2, SHAPE(3, 5),
                 VALS(1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0), 0);
    ev_tensor_unref(r);
    /* Errors at the call. */
    CHECK_ERR(ev_one_hot(&EX, ix, 0, &r), EV_EINVAL, "one_hot: num_classes must be > 0");
    CHECK_ERR(ev_one_hot(&EX, ix, -1, &r), EV_EINVAL, "num_classes must be > 0, not -1");
    CHECK_ERR(ev_one_hot(&EX, ix, 3, NULL), EV_EINVAL, "out is NULL");
    CHECK_ERR(ev_one_hot(&EX, NULL, 3, &r), EV_EINVAL, "one_hot");
    ev_tensor *f = tensor_from(EV_FLOAT32, 1, SHAPE(2), VALS(0, 1));
    CHECK_ERR(ev_one_hot(&EX, f, 3, &r), EV_ETYPE,
              "index must have an integer dtype, not float32");
    ev_tensor *big;
    CHECK_OK(ev_zeros(&EX, EV_INT64, 8, SHAPE(1, 1, 1, 1, 1, 1, 1, 1), &big));
    CHECK_ERR(ev_one_hot(&EX, big, 2, &r), EV_EINVAL, "exceed the maximum");
    ev_tensor_unref(big);
    ev_tensor_unref(f);
    ev_tensor_unref(neg);
    ev_tensor_unref(ix);
}

/* ---------------------------------------------------------- cross_entropy */

/* The reference loss of one row, in long double from the definition. */
static double ref_row(const double *x, int64_t c, int64_t t)
{
    long double m = x[0];
    for (int64_t j = 1; j < c; j++) {
        m = x[j] > m ? x[j] : m;
    }
    long double s = 0;
    for (int64_t j = 0; j < c; j++) {
        s += expl(x[j] - m);
    }
    return (double)(m + logl(s) - x[t]);
}

static void test_cross_entropy_values(void)
{
    enum { N = 6, C = 5 };
    double x[N * C];
    for (int i = 0; i < N * C; i++) {
        x[i] = sin(i * 1.7) * 3.0;
    }
    /* Logits large enough that exp overflows unless the max is taken out. */
    for (int j = 0; j < C; j++) {
        x[2 * C + j] = 1000.0 + j;
        x[3 * C + j] = -1000.0 - 2 * j;
    }
    const double tv[N] = {0, 4, 2, 3, 1, 4};
    double rows[N], sum = 0;
    for (int i = 0; i < N; i++) {
        rows[i] = ref_row(x + i * C, C, (int64_t)tv[i]);
        sum += rows[i];
    }
    const ev_dtype fdt[2] = {EV_FLOAT32, EV_FLOAT64};
    const ev_dtype idt[3] = {EV_INT32, EV_INT64, EV_UINT8};
    for (int a = 0; a < 2; a++) {
        /* float32 logits are rounded first, so compare with a loose rtol. */
        double rtol = fdt[a] == EV_FLOAT32 ? 1e-5 : 1e-12;
        double ref32[N], sum32 = 0;
        ev_tensor *lx = tensor_from(fdt[a], 2, SHAPE(N, C), x);
        double xr[N * C];
        read_f64(lx, xr);
        for (int i = 0; i < N; i++) {
            ref32[i] = ref_row(xr + i * C, C, (int64_t)tv[i]);
            sum32 += ref32[i];
        }
        for (int b = 0; b < 3; b++) {
            ev_tensor *t = tensor_from(idt[b], 1, SHAPE(N), tv), *r;
            CHECK_OK(ev_cross_entropy(&EX, lx, t, EV_REDUCTION_NONE, &r));
            check_tensor(r, fdt[a], 1, SHAPE(N), ref32, rtol);
            ev_tensor_unref(r);
            CHECK_OK(ev_cross_entropy(&EX, lx, t, EV_REDUCTION_SUM, &r));
            check_tensor(r, fdt[a], 0, NULL, VALS(sum32), rtol);
            ev_tensor_unref(r);
            CHECK_OK(ev_cross_entropy(&EX, lx, t, EV_REDUCTION_MEAN, &r));
            check_tensor(r, fdt[a], 0, NULL, VALS(sum32 / N), rtol);
            ev_tensor_unref(r);
            ev_tensor_unref(t);
        }
        ev_tensor_unref(lx);
    }
    /* Every loss is finite despite the +-1000 rows. */
    for (int i = 0; i < N; i++) {
        CHECK(isfinite(rows[i]) && rows[i] >= 0);
    }
    (void)sum;
}

/* Transposed logits and a strided target read through their strides. */
static void test_cross_entropy_strided(void)
{
    /* xt is (C=3, N=2); its transpose is the (N, C) logits. */
    ev_tensor *xt = tensor_from(EV_FLOAT64, 2, SHAPE(3, 2), VALS(1, -1, 2, 0.5, 3, 4)), *x;
    CHECK_OK(ev_transpose(xt, 0, 1, &x)); /* [[1,2,3],[-1,0.5,4]] */
    ev_tensor *t4 = tensor_from(EV_INT64, 1, SHAPE(4), VALS(2, 9, 0, 9)), *t;
    CHECK_OK(ev_slice(t4, 0, 0, 4, 2, &t)); /* [2, 0] */
    double r0 = ref_row(VALS(1, 2, 3), 3, 2), r1 = ref_row(VALS(-1, 0.5, 4), 3, 0);
    ev_tensor *r;
    CHECK_OK(ev_cross_entropy(&EX, x, t, EV_REDUCTION_NONE, &r));
    check_tensor(r, EV_FLOAT64, 1, SHAPE(2), VALS(r0, r1), 1e-14);
    ev_tensor_unref(r);
    ev_tensor_unref(t);
    ev_tensor_unref(t4);
    ev_tensor_unref(x);
    ev_tensor_unref(xt);
}

static void test_cross_entropy_edge(void)
{
    /* No samples: none is empty, sum 0, mean NaN (as PyTorch). */
    ev_tensor *x, *t, *r;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(0, 3), &x));
    CHECK_OK(ev_zeros(&EX, EV_INT64, 1, SHAPE(0), &t));
    CHECK_OK(ev_cross_entropy(&EX, x, t, EV_REDUCTION_NONE, &r));
    check_tensor(r, EV_FLOAT32, 1, SHAPE(0), NULL, 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_cross_entropy(&EX, x, t, EV_REDUCTION_SUM, &r));
    check_tensor(r, EV_FLOAT32, 0, NULL, VALS(0), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_cross_entropy(&EX, x, t, EV_REDUCTION_MEAN, &r));
    check_tensor(r, EV_FLOAT32, 0, NULL, VALS(NAN), 0);
    ev_tensor_unref(r);
    ev_tensor_unref(x);
    ev_tensor_unref(t);
    /* One class: the loss is 0; a NaN logit makes its row NaN. */
    x = tensor_from(EV_FLOAT64, 2, SHAPE(2, 1), VALS(7, NAN));
    t = tensor_from(EV_INT32, 1, SHAPE(2), VALS(0, 0));
    CHECK_OK(ev_cross_entropy(&EX, x, t, EV_REDUCTION_NONE, &r));
    check_tensor(r, EV_FLOAT64, 1, SHAPE(2), VALS(0, NAN), 0);
    ev_tensor_unref(r);
    ev_tensor_unref(x);
    ev_tensor_unref(t);
    CHECK(strcmp(ev_reduction_name(EV_REDUCTION_MEAN), "mean") == 0);
    CHECK(strcmp(ev_reduction_name(EV_REDUCTION_NONE), "none") == 0);
    CHECK(strcmp(ev_reduction_name(EV_REDUCTION_SUM), "sum") == 0);
    CHECK(strcmp(ev_reduction_name(EV_REDUCTION_COUNT), "invalid") == 0);
}

/* Long rows (the vectorized float32 path: lanes, blocks of exp and a
 * tail) and many samples (split over the intra-op threads): every loss and
 * the ordered sum, and the first invalid target of a long batch. */
static void test_cross_entropy_long(void)
{
    enum { N = 300, C = 1100 };
    double *x = malloc(sizeof(double) * N * C), *xr = malloc(sizeof(double) * N * C);
    double tv[N], want[N], sum = 0;
    for (int64_t i = 0; i < (int64_t)N * C; i++) {
        x[i] = sin((double)i * 0.37) * 6.0;
    }
    for (int i = 0; i < N; i++) {
        tv[i] = (i * 37) % C;
    }
    ev_tensor *lx = tensor_from(EV_FLOAT32, 2, SHAPE(N, C), x);
    read_f64(lx, xr);
    for (int i = 0; i < N; i++) {
        want[i] = ref_row(xr + (int64_t)i * C, C, (int64_t)tv[i]);
        sum += want[i];
    }
    ev_tensor *t = tensor_from(EV_INT64, 1, SHAPE(N), tv), *r;
    CHECK_OK(ev_cross_entropy(&EX, lx, t, EV_REDUCTION_NONE, &r));
    check_tensor(r, EV_FLOAT32, 1, SHAPE(N), want, 1e-5);
    ev_tensor_unref(r);
    CHECK_OK(ev_cross_entropy(&EX, lx, t, EV_REDUCTION_SUM, &r));
    check_tensor(r, EV_FLOAT32, 0, NULL, VALS(sum), 1e-5);
    ev_tensor_unref(r);
    ev_tensor_unref(t);
    tv[250] = C;
    tv[201] = -1;
    t = tensor_from(EV_INT64, 1, SHAPE(N), tv);
    CHECK_OK(ev_cross_entropy(&EX, lx, t, EV_REDUCTION_MEAN, &r));
    check_fails(r, EV_EINDEX, "target -1 is out of range for 1100 classes (sample 201)");
    ev_tensor_unref(r);
    ev_tensor_unref(t);
    ev_tensor_unref(lx);
    free(xr);
    free(x);
}

static void test_cross_entropy_errors(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT32, 2, SHAPE(3, 4), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                               10, 11));
    ev_tensor *bad = tensor_from(EV_INT64, 1, SHAPE(3), VALS(0, 4, 1)), *r;
    for (int red = 0; red < EV_REDUCTION_COUNT; red++) {
        CHECK_OK(ev_cross_entropy(&EX, x, bad, red, &r));
        check_fails(r, EV_EINDEX, "cross_entropy: target 4 is out of range for 4 classes "
                    "(sample 1)");
        ev_tensor_unref(r);
    }
    ev_tensor *neg = tensor_from(EV_INT32, 1, SHAPE(3), VALS(0, 1, -2));
    CHECK_OK(ev_cross_entropy(&EX, x, neg, EV_REDUCTION_MEAN, &r));
    check_fails(r, EV_EINDEX, "target -2 is out of range for 4 classes (sample 2)");
    ev_tensor_unref(r);
    /* Still usable afterwards. */
    ev_tensor *ok = tensor_from(EV_INT64, 1, SHAPE(3), VALS(3, 3, 3));
    CHECK_OK(ev_cross_entropy(&EX, x, ok, EV_REDUCTION_SUM, &r));
    double want = 3 * ref_row(VALS(0, 1, 2, 3), 4, 3);
    check_tensor(r, EV_FLOAT32, 0, NULL, VALS(want), 1e-6);
    ev_tensor_unref(r);
    /* Errors at the call. */
    CHECK_ERR(ev_cross_entropy(&EX, x, ok, 3, &r), EV_EINVAL, "invalid reduction 3");
    CHECK_ERR(ev_cross_entropy(&EX, x, ok, -1, &r), EV_EINVAL, "invalid reduction");
    CHECK_ERR(ev_cross_entropy(&EX, x, ok, EV_REDUCTION_MEAN, NULL), EV_EINVAL, "out is NULL");
    ev_tensor *xi = tensor_from(EV_INT32, 2, SHAPE(3, 4), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                               0, 0));
    CHECK_ERR(ev_cross_entropy(&EX, xi, ok, EV_REDUCTION_MEAN, &r), EV_ETYPE,
              "logits must be float32 or float64, not int32");
    CHECK_ERR(ev_cross_entropy(&EX, x, x, EV_REDUCTION_MEAN, &r), EV_ETYPE,
              "target must have an integer dtype, not float32");
    ev_tensor *t2 = tensor_from(EV_INT64, 1, SHAPE(2), VALS(0, 1));
    CHECK_ERR(ev_cross_entropy(&EX, x, t2, EV_REDUCTION_MEAN, &r), EV_EINVAL,
              "expected logits (N, C) and target (N,), got logits [3, 4] and target [2]");
    ev_tensor *x1 = tensor_from(EV_FLOAT32, 1, SHAPE(3), VALS(0, 1, 2));
    CHECK_ERR(ev_cross_entropy(&EX, x1, ok, EV_REDUCTION_MEAN, &r), EV_EINVAL,
              "got logits [3]");
    CHECK_ERR(ev_cross_entropy(&EX, NULL, ok, EV_REDUCTION_MEAN, &r), EV_EINVAL,
              "cross_entropy");
    ev_tensor_unref(x1);
    ev_tensor_unref(t2);
    ev_tensor_unref(xi);
    ev_tensor_unref(ok);
    ev_tensor_unref(neg);
    ev_tensor_unref(bad);
    ev_tensor_unref(x);
}

/* --------------------------------------------------------------- randperm */

/* Reads a randperm result and checks it holds each of 0 .. n-1 once. */
static int64_t *read_perm(ev_tensor *t, int64_t n)
{
    CHECK_EQ(ev_tensor_ndim(t), 1);
    CHECK_EQ(ev_tensor_numel(t), n);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    char *seen = calloc((size_t)(n ? n : 1), 1);
    CHECK(v && seen);
    read_i64(t, v);
    for (int64_t i = 0; i < n; i++) {
        CHECK(v[i] >= 0 && v[i] < n);
        CHECK(!seen[v[i]]);
        seen[v[i]] = 1;
    }
    free(seen);
    return v;
}

static void test_randperm_is_permutation(void)
{
    ev_generator *g;
    CHECK_OK(ev_generator_create(5, &g));
    const int64_t sizes[] = {0, 1, 2, 3, 10, 1000, 100003};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        for (int d = 0; d < 5; d++) {
            const ev_dtype dts[5] = {EV_INT64, EV_INT32, EV_INT16, EV_INT8, EV_UINT8};
            ev_dtype dt = dts[d];
            int64_t lo, hi;
            CHECK_OK(ev_dtype_int_range(dt, &lo, &hi));
            if (sizes[k] - 1 > hi) {
                continue; /* refused, see test_randperm_errors */
            }
            ev_tensor *t;
            CHECK_OK(ev_randperm(&EX, g, sizes[k], dt, &t));
            CHECK_EQ(ev_tensor_dtype(t), dt);
            free(read_perm(t, sizes[k]));
            ev_tensor_unref(t);
        }
    }
    /* A long permutation is not the identity (or nearly so). */
    ev_tensor *t;
    CHECK_OK(ev_randperm(&EX, g, 1000, EV_INT64, &t));
    int64_t *v = read_perm(t, 1000);
    int fixed = 0;
    for (int i = 0; i < 1000; i++) {
        fixed += v[i] == i;
    }
    CHECK_LT(fixed, 10); /* expected 1 fixed point */
    free(v);
    ev_tensor_unref(t);
    ev_generator_destroy(g);
}

/* Same state gives the same permutation (whichever worker), and the
 * offset moves by 2n rounded up to 4. */
static void test_randperm_determinism(void)
{
    ev_generator *g;
    CHECK_OK(ev_generator_create(99, &g));
    ev_generator_state s0;
    CHECK_OK(ev_generator_get_state(g, &s0));
    ev_tensor *a, *b, *c;
    CHECK_OK(ev_randperm(&EX, g, 4097, EV_INT64, &a));
    ev_generator_state s1;
    CHECK_OK(ev_generator_get_state(g, &s1));
    CHECK_EQ(s1.offset - s0.offset, 8196); /* 2 * 4097 = 8194, rounded up to 4 */
    CHECK_OK(ev_generator_set_state(g, &s0));
    ev_exec ex3 = EX;
    ex3.thread_uid = 3;
    CHECK_OK(ev_randperm(&ex3, g, 4097, EV_INT64, &b));
    /* The next call from the advanced state differs. */
    CHECK_OK(ev_randperm(&EX, g, 4097, EV_INT64, &c));
    int64_t *va = read_perm(a, 4097), *vb = read_perm(b, 4097), *vc = read_perm(c, 4097);
    CHECK(memcmp(va, vb, sizeof(int64_t) * 4097) == 0);
    CHECK(memcmp(va, vc, sizeof(int64_t) * 4097) != 0);
    /* int32 gives the same permutation as int64 from the same state. */
    CHECK_OK(ev_generator_set_state(g, &s0));
    ev_tensor *d;
    CHECK_OK(ev_randperm(&EX, g, 4097, EV_INT32, &d));
    int64_t *vd = read_perm(d, 4097);
    CHECK(memcmp(va, vd, sizeof(int64_t) * 4097) == 0);
    free(va);
    free(vb);
    free(vc);
    free(vd);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
    ev_tensor_unref(c);
    ev_tensor_unref(d);
    ev_generator_destroy(g);
}

/* All 6 permutations of 3 appear about equally often. */
static void test_randperm_uniform(void)
{
    ev_generator *g;
    CHECK_OK(ev_generator_create(1234, &g));
    int counts[9] = {0};
    const int trials = 1200;
    for (int k = 0; k < trials; k++) {
        ev_tensor *t;
        CHECK_OK(ev_randperm(&EX, g, 3, EV_INT64, &t));
        int64_t v[3];
        read_i64(t, v);
        counts[v[0] * 3 + v[1]]++;
        ev_tensor_unref(t);
    }
    int kinds = 0;
    for (int k = 0; k < 9; k++) {
        if (counts[k]) {
            kinds++;
            /* Expected 200 each; 5 sigma is about 65. */
            CHECK(counts[k] > 130 && counts[k] < 270);
        }
    }
    CHECK_EQ(kinds, 6);
    ev_generator_destroy(g);
}

static void test_randperm_errors(void)
{
    ev_generator *g;
    CHECK_OK(ev_generator_create(1, &g));
    ev_tensor *t;
    CHECK_ERR(ev_randperm(&EX, g, -1, EV_INT64, &t), EV_EINVAL, "randperm: n must be >= 0");
    CHECK_ERR(ev_randperm(&EX, g, 5, EV_FLOAT32, &t), EV_ETYPE, "expected an integer dtype");
    CHECK_ERR(ev_randperm(&EX, g, 5, EV_BOOL, &t), EV_ETYPE, "randperm");
    CHECK_ERR(ev_randperm(&EX, g, 5, (ev_dtype)99, &t), EV_EINVAL, "randperm");
    CHECK_ERR(ev_randperm(&EX, g, (int64_t)INT32_MAX + 2, EV_INT32, &t), EV_EINVAL,
              "does not fit dtype int32");
    CHECK_ERR(ev_randperm(&EX, g, 257, EV_UINT8, &t), EV_EINVAL,
              "n = 257 does not fit dtype uint8");
    CHECK_ERR(ev_randperm(&EX, g, 129, EV_INT8, &t), EV_EINVAL, "does not fit dtype int8");
    CHECK_ERR(ev_randperm(&EX, g, 5, EV_INT64, NULL), EV_EINVAL, "out is NULL");
    CHECK_ERR(ev_randperm(NULL, g, 5, EV_INT64, &t), EV_EINVAL, "randperm");
    /* Failed calls consume nothing. */
    ev_generator_state s;
    CHECK_OK(ev_generator_get_state(g, &s));
    CHECK_EQ(s.offset, 0);
    CHECK_OK(ev_randperm(&EX, g, 256, EV_UINT8, &t)); /* 0 .. 255 fits */
    free(read_perm(t, 256));
    ev_tensor_unref(t);
    /* The default generator works too. */
    CHECK_OK(ev_randperm(&EX, NULL, 7, EV_INT64, &t));
    free(read_perm(t, 7));
    ev_tensor_unref(t);
    ev_generator_destroy(g);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_one_hot_values);
    RUN_TEST(test_one_hot_errors);
    RUN_TEST(test_cross_entropy_values);
    RUN_TEST(test_cross_entropy_strided);
    RUN_TEST(test_cross_entropy_edge);
    RUN_TEST(test_cross_entropy_errors);
    RUN_TEST(test_cross_entropy_long);
    RUN_TEST(test_randperm_is_permutation);
    RUN_TEST(test_randperm_determinism);
    RUN_TEST(test_randperm_uniform);
    RUN_TEST(test_randperm_errors);
    test_teardown();
    return 0;
}
