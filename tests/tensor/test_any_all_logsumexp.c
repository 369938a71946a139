/* Tests of the reductions any, all and logsumexp: every subset of the
 * dimensions of a 3-d tensor with and without keepdim, in every dtype, on
 * contiguous, transposed, sliced and expanded inputs, against references
 * computed here from the elements each output reduces; plus NaN and
 * infinities, the stability of logsumexp, zero-size and 0-d tensors, a long
 * parallel case, and the errors raised at the call. */
#include "tensor_test.h"

/* ------------------------------------------------------------- reference */

static double ref_any(const double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (v[i] != 0) { /* NaN != 0 */
            return 1;
        }
    }
    return 0;
}

static double ref_all(const double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (v[i] == 0) {
            return 0;
        }
    }
    return 1;
}

/* In long double, straight from the definition where it cannot overflow. */
static double ref_lse(const double *v, int64_t n)
{
    long double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) {
            return NAN;
        }
        m = v[i] > m ? v[i] : m;
    }
    if (isinf(m)) {
        return (double)m;
    }
    long double s = 0;
    for (int64_t i = 0; i < n; i++) {
        s += expl((long double)v[i] - m);
    }
    return (double)(m + logl(s));
}

/* ref_reduce_over calls fn(v, n, ctx): ctx carries the reference to use. */
static double ref_call(const double *v, int64_t n, const void *ctx)
{
    double (*const *fn)(const double *, int64_t) = ctx;
    return (*fn)(v, n);
}

enum { K_ANY, K_ALL, K_LSE };

static int run(int kind, ev_tensor *x, int ndims, const int *dims, int keepdim, ev_tensor **out)
{
    switch (kind) {
    case K_ANY: return ev_any(&EX, x, ndims, dims, keepdim, out);
    case K_ALL: return ev_all(&EX, x, ndims, dims, keepdim, out);
    default: return ev_logsumexp(&EX, x, ndims, dims, keepdim, out);
    }
}

/* Checks kind over mask of x, whose C-order values are vals. */
static void check_one(int kind, ev_tensor *x, const double *vals, unsigned mask, int keepdim,
                      double rtol)
{
    int nd = ev_tensor_ndim(x);
    const int64_t *shape = ev_tensor_shape(x);
    int dims[EV_MAX_DIMS], ndims = 0, ond = 0;
    int64_t oshape[EV_MAX_DIMS], nout = 1;
    for (int d = 0; d < nd; d++) {
        if (mask & (1u << d)) {
            dims[ndims++] = (d % 2) ? d - nd : d; /* both spellings */
            if (keepdim) {
                oshape[ond++] = 1;
            }
        } else {
            oshape[ond++] = shape[d];
            nout *= shape[d];
        }
    }
    double *want = malloc(sizeof(double) * (size_t)(nout ? nout : 1));
    double (*const fns[3])(const double *, int64_t) = {ref_any, ref_all, ref_lse};
    ref_reduce_over(vals, nd, shape, mask, ref_call, &fns[kind], want);
    ev_tensor *y;
    CHECK_OK(run(kind, x, ndims, dims, keepdim, &y));
    ev_dtype dt = kind == K_LSE ? ev_dtype_to_float(ev_tensor_dtype(x)) : EV_BOOL;
    check_tensor(y, dt, ond, oshape, want, kind == K_LSE ? rtol : 0);
    ev_tensor_unref(y);
    free(want);
}

static void check_all_subsets(ev_tensor *x)
{
    int64_t n = ev_tensor_numel(x);
    double *hv = malloc(sizeof(double) * (size_t)(n ? n : 1));
    read_f64(x, hv); /* the values as x's dtype holds them */
    ev_dtype lse_dt = ev_dtype_to_float(ev_tensor_dtype(x));
    double rtol = lse_dt == EV_FLOAT32 ? 1e-6 : 1e-14;
    unsigned full = (1u << ev_tensor_ndim(x)) - 1;
    for (unsigned mask = 0; mask <= full; mask++) {
        for (int keep = 0; keep < 2; keep++) {
            for (int kind = K_ANY; kind <= K_LSE; kind++) {
                check_one(kind, x, hv, mask, keep, rtol);
            }
        }
    }
    free(hv);
}

/* ------------------------------------------------------------------ tests */

/* Values with zeros in some lines and not others, so any and all differ. */
static void fill_vals(double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        v[i] = (i % 7 == 3 || i % 5 == 0) ? 0 : (double)((i * 37) % 11) - 4.5;
    }
}

static void test_every_dtype_and_subset(void)
{
    double vals[60];
    fill_vals(vals, 60);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 3, SHAPE(3, 4, 5), vals);
        check_all_subsets(x);
        ev_tensor_unref(x);
    }
    /* A line with all elements nonzero, so all is true somewhere. */
    ev_tensor *x = tensor_from(EV_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 0, 5, 6));
    ev_tensor *y;
    int d1 = 1;
    CHECK_OK(ev_all(&EX, x, 1, &d1, 0, &y));
    check_tensor(y, EV_BOOL, 1, SHAPE(2), VALS(1, 0), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_any(&EX, x, 1, &d1, 1, &y));
    check_tensor(y, EV_BOOL, 2, SHAPE(2, 1), VALS(1, 1), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_strided_views(void)
{
    double vals[60];
    fill_vals(vals, 60);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *base = tensor_from((ev_dtype)dt, 3, SHAPE(3, 4, 5), vals);
        ev_tensor *t, *s;
        CHECK_OK(ev_transpose(base, 0, 2, &t));
        CHECK(!ev_tensor_is_contiguous(t));
        check_all_subsets(t);
        CHECK_OK(ev_slice(t, 1, 1, INT64_MAX, 2, &s));
        check_all_subsets(s);
        ev_tensor_unref(s);
        CHECK_OK(ev_slice(t, 0, INT64_MAX, INT64_MIN, -2, &s)); /* negative stride */
        check_all_subsets(s);
        ev_tensor_unref(s);
        ev_tensor_unref(t);
        ev_tensor_unref(base);
    }
    ev_tensor *row = tensor_from(EV_FLOAT32, 2, SHAPE(1, 3), VALS(0, 2, 1000));
    ev_tensor *e;
    CHECK_OK(ev_expand(row, 3, SHAPE(2, 4, 3), &e));
    check_all_subsets(e);
    ev_tensor_unref(e);
    ev_tensor_unref(row);
}

static void test_nan_inf_and_stability(void)
{
    ev_tensor *y;
    int d1 = 1;
    /* NaN counts as nonzero. */
    ev_tensor *x = tensor_from(EV_FLOAT64, 2, SHAPE(2, 3), VALS(0, NAN, 0, NAN, NAN, 1));
    CHECK_OK(ev_any(&EX, x, 1, &d1, 0, &y));
    check_tensor(y, EV_BOOL, 1, SHAPE(2), VALS(1, 1), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_all(&EX, x, 1, &d1, 0, &y));
    check_tensor(y, EV_BOOL, 1, SHAPE(2), VALS(0, 1), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);

    /* Rows: large equal values (exp would overflow without the max), very
     * negative ones (exp would underflow), all -inf, +inf with -inf, NaN
     * with +inf, +inf with finite values. */
    const double rows[7][2] = {
        {1000, 1000},      {-1000, -1000},  {-INFINITY, -INFINITY}, {INFINITY, -INFINITY},
        {NAN, INFINITY},   {INFINITY, 3},   {0, 0},
    };
    const double want[7] = {1000 + M_LN2, -1000 + M_LN2, -INFINITY, INFINITY,
                            NAN,          INFINITY,      M_LN2};
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        x = tensor_from((ev_dtype)dt, 2, SHAPE(7, 2), &rows[0][0]);
        CHECK_OK(ev_logsumexp(&EX, x, 1, &d1, 0, &y));
        check_tensor(y, (ev_dtype)dt, 1, SHAPE(7), want, dt == EV_FLOAT32 ? 1e-7 : 1e-15);
        ev_tensor_unref(y);
        ev_tensor_unref(x);
    }
    /* log(sum(exp)) of mixed magnitudes, against the definition. */
    x = tensor_from(EV_FLOAT64, 1, SHAPE(3), VALS(1, 2, 3));
    CHECK_OK(ev_logsumexp(&EX, x, 0, NULL, 0, &y));
    check_tensor(y, EV_FLOAT64, 0, NULL, VALS(log(exp(1) + exp(2) + exp(3))), 1e-15);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_result_dtypes(void)
{
    ev_tensor *x, *y;
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        CHECK_OK(ev_ones(&EX, (ev_dtype)dt, 2, SHAPE(2, 2), &x));
        CHECK_OK(ev_any(&EX, x, 0, NULL, 0, &y));
        check_tensor(y, EV_BOOL, 0, NULL, VALS(1), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_logsumexp(&EX, x, 0, NULL, 0, &y));
        /* Four ones: 1 + log 4, in the float dtype of x. */
        ev_dtype fd = ev_dtype_to_float((ev_dtype)dt);
        check_tensor(y, fd, 0, NULL, VALS(1 + log(4)), fd == EV_FLOAT32 ? 1e-7 : 1e-15);
        ev_tensor_unref(y);
        ev_tensor_unref(x);
    }
    CHECK_EQ(ev_dtype_to_float(EV_INT32), EV_FLOAT64);
    CHECK_EQ(ev_dtype_to_float(EV_BOOL), EV_FLOAT32);
}

static void test_zero_size_and_0d(void)
{
    ev_tensor *x, *y;
    int d0 = 0, d1 = 1, dm = -1;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(0, 3), &x));
    /* Over zero elements: any false, all true, logsumexp -inf. */
    CHECK_OK(ev_any(&EX, x, 1, &d0, 0, &y));
    check_tensor(y, EV_BOOL, 1, SHAPE(3), VALS(0, 0, 0), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_all(&EX, x, 1, &d0, 1, &y));
    check_tensor(y, EV_BOOL, 2, SHAPE(1, 3), VALS(1, 1, 1), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_logsumexp(&EX, x, 0, NULL, 0, &y));
    check_tensor(y, EV_FLOAT32, 0, NULL, VALS(-INFINITY), 0);
    ev_tensor_unref(y);
    /* An empty result. */
    CHECK_OK(ev_logsumexp(&EX, x, 1, &d1, 0, &y));
    check_tensor(y, EV_FLOAT32, 1, SHAPE(0), NULL, 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);

    ev_tensor *s = tensor_from(EV_INT64, 0, NULL, VALS(0));
    CHECK_OK(ev_any(&EX, s, 1, &dm, 0, &y));
    check_tensor(y, EV_BOOL, 0, NULL, VALS(0), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_all(&EX, s, 0, NULL, 1, &y));
    check_tensor(y, EV_BOOL, 0, NULL, VALS(0), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_logsumexp(&EX, s, 1, &d0, 0, &y));
    check_tensor(y, EV_FLOAT64, 0, NULL, VALS(0), 0);
    ev_tensor_unref(y);
    CHECK_EQ(ev_any(&EX, s, 1, &d1, 0, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "any: dimension 1 is out of range");
    ev_tensor_unref(s);
}

static void test_long_parallel(void)
{
    /* Long dense rows take the split path (many outputs) and the serial
     * one (one output); the single true element sits last. */
    int64_t rows = 64, cols = (int64_t)ev_test_scaled(8192);
    int64_t n = rows * cols;
    uint8_t *b = calloc((size_t)n, 1);
    double *f = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        f[i] = (double)((i * 7919) % 1000) / 100.0;
    }
    b[n - 1] = 1;
    ev_tensor *x, *y;
    CHECK_OK(ev_from_host(&EX, EV_BOOL, 2, SHAPE(rows, cols), b, &x));
    int d1 = 1;
    CHECK_OK(ev_any(&EX, x, 1, &d1, 0, &y));
    double want[64];
    for (int64_t r = 0; r < rows; r++) {
        want[r] = r == rows - 1;
    }
    check_tensor(y, EV_BOOL, 1, SHAPE(rows), want, 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_any(&EX, x, 0, NULL, 0, &y));
    check_tensor(y, EV_BOOL, 0, NULL, VALS(1), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_all(&EX, x, 0, NULL, 0, &y));
    check_tensor(y, EV_BOOL, 0, NULL, VALS(0), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);

    CHECK_OK(ev_from_host(&EX, EV_FLOAT64, 2, SHAPE(rows, cols), f, &x));
    CHECK_OK(ev_logsumexp(&EX, x, 1, &d1, 0, &y));
    for (int64_t r = 0; r < rows; r++) {
        want[r] = ref_lse(f + r * cols, cols);
    }
    check_tensor(y, EV_FLOAT64, 1, SHAPE(rows), want, 1e-13);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    free(b);
    free(f);
}

static void test_errors(void)
{
    ev_tensor *x, *y = NULL;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(2, 2), &x));
    int dup[2] = {1, -1}, d2 = 2;
    CHECK_EQ(ev_all(&EX, x, 2, dup, 0, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "all: dimension 1 appears more than once");
    CHECK_EQ(ev_logsumexp(&EX, x, 1, &d2, 0, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "logsumexp: dimension 2 is out of range");
    CHECK_EQ(ev_any(&EX, x, 2, NULL, 0, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "any: dims is NULL");
    CHECK_EQ(ev_any(&EX, x, 3, dup, 0, &y), EV_EINVAL);
    CHECK_EQ(ev_any(&EX, x, -1, dup, 0, &y), EV_EINVAL);
    CHECK_EQ(ev_any(&EX, x, 0, NULL, 0, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "any: out is NULL");
    CHECK_EQ(ev_all(&EX, NULL, 0, NULL, 0, &y), EV_EINVAL);
    CHECK_EQ(ev_logsumexp(NULL, x, 0, NULL, 0, &y), EV_EINVAL);
    CHECK(y == NULL);
    ev_tensor_unref(x);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_every_dtype_and_subset);
    RUN_TEST(test_strided_views);
    RUN_TEST(test_nan_inf_and_stability);
    RUN_TEST(test_result_dtypes);
    RUN_TEST(test_zero_size_and_0d);
    RUN_TEST(test_long_parallel);
    RUN_TEST(test_errors);
    test_teardown();
    return 0;
}
