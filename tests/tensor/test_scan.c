/* Tests of cumsum and cumprod (and their in-place forms): every dimension
 * of a 3-d tensor in every dtype, default and explicit result dtypes, on
 * contiguous, transposed, sliced and expanded inputs, against a reference
 * loop written here; integer wrapping, NaN and infinities, zero-size and 0-d
 * tensors, a long parallel case, allocation failures, and the errors raised
 * at the call. */
#include "tensor_test.h"

/* Exported by the engine for tests (src/core/internal.h). */
void ev__fail_alloc_after(long n);

/* ------------------------------------------------------------- reference */

/* The default result dtype (as PyTorch). */
static ev_dtype default_dtype(ev_dtype x)
{
    return ev_dtype_is_float(x) ? x : EV_INT64;
}

/* s (a 64-bit two's complement sum) wrapped to the range of the integer
 * dtype d, as storing it there does. */
static int64_t wrap_to(ev_dtype d, uint64_t s)
{
    int64_t lo, hi;
    CHECK_OK(ev_dtype_int_range(d, &lo, &hi));
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* 0 for int64: 2^64 */
    if (span == 0) {
        return (int64_t)s;
    }
    return (int64_t)((uint64_t)lo + (s - (uint64_t)lo) % span);
}

/* Scans C-order values v (already converted to the result dtype res) of
 * shape along dim into out, as the result dtype computes: bool as or/and,
 * integers with 64-bit wrapping (then wrapped to the result's width),
 * floats in double rounded to float32 for a float32 result. */
static void ref_scan(const double *v, const int64_t *iv, int ndim, const int64_t *shape, int dim,
                     ev_dtype res, int prod, double *out)
{
    int64_t numel = 1, inner = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        inner *= d > dim ? shape[d] : 1;
    }
    int64_t len = ndim ? shape[dim] : 1;
    for (int64_t e = 0; e < numel; e++) {
        int64_t i = (e / inner) % len; /* position along dim */
        int64_t first = e - i * inner;
        if (res == EV_BOOL) {
            int s = prod;
            for (int64_t k = 0; k <= i; k++) {
                s = prod ? (s && v[first + k * inner] != 0) : (s || v[first + k * inner] != 0);
            }
            out[e] = s;
        } else if (!ev_dtype_is_float(res)) {
            uint64_t s = prod ? 1 : 0;
            for (int64_t k = 0; k <= i; k++) {
                uint64_t x = (uint64_t)iv[first + k * inner];
                s = prod ? s * x : s + x;
            }
            out[e] = (double)wrap_to(res, s);
        } else {
            double s = prod ? 1 : 0;
            for (int64_t k = 0; k <= i; k++) {
                s = prod ? s * v[first + k * inner] : s + v[first + k * inner];
            }
            out[e] = res == EV_FLOAT32 ? (double)(float)s : s;
        }
    }
}

/* Checks op(x, dim, dtype) against the reference, exactly. */
static void check_scan(ev_tensor *x, int dim, ev_dtype dtype, int prod)
{
    int nd = ev_tensor_ndim(x);
    const int64_t *shape = ev_tensor_shape(x);
    int64_t n = ev_tensor_numel(x);
    ev_dtype res = dtype == EV_DTYPE_NONE ? default_dtype(ev_tensor_dtype(x)) : dtype;
    /* x's values as the result dtype holds them (x is converted first). */
    ev_tensor *c;
    CHECK_OK(ev_cast(&EX, x, res, &c));
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    read_f64(c, v);
    read_i64(c, iv);
    ev_tensor_unref(c);
    int d = dim < 0 ? dim + (nd ? nd : 1) : dim;
    ref_scan(v, iv, nd, shape, nd ? d : 0, res, prod, want);
    ev_tensor *y;
    CHECK_OK(prod ? ev_cumprod(&EX, x, dim, dtype, &y) : ev_cumsum(&EX, x, dim, dtype, &y));
    if (!ev_dtype_is_float(res)) {
        /* Integers exactly, past 2^53 too. */
        CHECK_EQ(ev_tensor_dtype(y), res);
        int64_t *got = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        read_i64(y, got);
        for (int64_t i = 0; i < n; i++) {
            CHECK_EQ(got[i], (int64_t)want[i]);
        }
        free(got);
    } else {
        check_tensor(y, res, nd, shape, want, 0);
    }
    ev_tensor_unref(y);
    free(v);
    free(iv);
    free(want);
}

/* Values with zeros, ones, negatives and a few larger ones. */
static void fill_vals(double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        v[i] = (double)((i * 37 + 5) % 9) - 3 + ((i % 11 == 0) ? 0.5 : 0);
    }
}

/* ------------------------------------------------------------------ tests */

static void test_every_dtype_and_dim(void)
{
    double vals[60];
    fill_vals(vals, 60);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 3, SHAPE(3, 4, 5), vals);
        for (int dim = -3; dim < 3; dim++) {
            check_scan(x, dim, EV_DTYPE_NONE, 0);
            check_scan(x, dim, EV_DTYPE_NONE, 1);
            /* Every explicit result dtype too (x converted first). */
            for (int rd = 0; rd < EV_DTYPE_COUNT; rd++) {
                check_scan(x, dim, (ev_dtype)rd, rd % 2);
            }
        }
        ev_tensor_unref(x);
    }
}

static void test_known_values(void)
{
    ev_tensor *x = tensor_from(EV_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6)), *y;
    CHECK_OK(ev_cumsum(&EX, x, 1, EV_DTYPE_NONE, &y));
    check_tensor(y, EV_INT64, 2, SHAPE(2, 3), VALS(1, 3, 6, 4, 9, 15), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_cumprod(&EX, x, 0, EV_DTYPE_NONE, &y));
    check_tensor(y, EV_INT64, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 10, 18), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_cumprod(&EX, x, -1, EV_FLOAT32, &y));
    check_tensor(y, EV_FLOAT32, 2, SHAPE(2, 3), VALS(1, 2, 6, 4, 20, 120), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);

    /* Bool: counts by default; or / and with dtype bool (NumPy's dtype=bool). */
    ev_tensor *b = tensor_from(EV_BOOL, 1, SHAPE(5), VALS(0, 1, 0, 1, 1));
    CHECK_OK(ev_cumsum(&EX, b, 0, EV_DTYPE_NONE, &y));
    check_tensor(y, EV_INT64, 1, SHAPE(5), VALS(0, 1, 1, 2, 3), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_cumsum(&EX, b, 0, EV_BOOL, &y));
    check_tensor(y, EV_BOOL, 1, SHAPE(5), VALS(0, 1, 1, 1, 1), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_cumprod(&EX, b, 0, EV_BOOL, &y));
    check_tensor(y, EV_BOOL, 1, SHAPE(5), VALS(0, 0, 0, 0, 0), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(b);

    /* A float x with an integer dtype is truncated first (as ev_cast). */
    x = tensor_from(EV_FLOAT64, 1, SHAPE(3), VALS(1.9, -2.7, 3.5));
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_INT32, &y));
    check_tensor(y, EV_INT32, 1, SHAPE(3), VALS(1, -1, 2), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    /* ... into the dtype itself: 3e9 is out of int32's range, so it becomes
     * the int32 minimum (as ev_cast), not 3e9 wrapped. */
    x = tensor_from(EV_FLOAT64, 1, SHAPE(2), VALS(3e9, 1));
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_INT32, &y));
    check_tensor(y, EV_INT32, 1, SHAPE(2), VALS(INT32_MIN, INT32_MIN + 1.0), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    /* A float32 result accumulates in float64: 1 then 200 times 1e-8 gives
     * float32(1 + 2e-6); adding in float32 would stay at 1. */
    double small[201];
    small[0] = 1;
    for (int i = 1; i < 201; i++) {
        small[i] = 1e-8;
    }
    x = tensor_from(EV_FLOAT32, 1, SHAPE(201), small);
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_DTYPE_NONE, &y));
    float last[201];
    CHECK_OK(ev_to_host(&EX, y, last));
    double exact = 1;
    for (int i = 1; i < 201; i++) {
        exact += (double)(float)1e-8;
    }
    CHECK(last[200] == (float)exact);
    CHECK(last[200] > 1.0f);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_wrapping(void)
{
    int64_t big[3] = {INT64_MAX, 1, 1};
    ev_tensor *x, *y;
    CHECK_OK(ev_from_host(&EX, EV_INT64, 1, SHAPE(3), big, &x));
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_DTYPE_NONE, &y));
    int64_t got[3];
    CHECK_OK(ev_to_host(&EX, y, got));
    CHECK_EQ(got[0], INT64_MAX);
    CHECK_EQ(got[1], INT64_MIN);
    CHECK_EQ(got[2], INT64_MIN + 1);
    ev_tensor_unref(y);
    ev_tensor_unref(x);

    /* int32 input: int64 result, no wrap at 2^31; with dtype int32 it wraps. */
    int32_t i32[2] = {INT32_MAX, 1};
    CHECK_OK(ev_from_host(&EX, EV_INT32, 1, SHAPE(2), i32, &x));
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_DTYPE_NONE, &y));
    CHECK_OK(ev_to_host(&EX, y, got));
    CHECK_EQ(got[1], (int64_t)INT32_MAX + 1);
    ev_tensor_unref(y);
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_INT32, &y));
    int32_t g32[2];
    CHECK_OK(ev_to_host(&EX, y, g32));
    CHECK_EQ(g32[1], INT32_MIN);
    ev_tensor_unref(y);
    ev_tensor_unref(x);

    /* Products wrap: 2^32 * 2^32 is 0 mod 2^64. */
    int64_t p[3] = {(int64_t)1 << 32, (int64_t)1 << 32, 5};
    CHECK_OK(ev_from_host(&EX, EV_INT64, 1, SHAPE(3), p, &x));
    CHECK_OK(ev_cumprod(&EX, x, 0, EV_DTYPE_NONE, &y));
    CHECK_OK(ev_to_host(&EX, y, got));
    CHECK_EQ(got[0], (int64_t)1 << 32);
    CHECK_EQ(got[1], 0);
    CHECK_EQ(got[2], 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_nan_inf(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT32, 1, SHAPE(4), VALS(1, NAN, 2, 3)), *y;
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_DTYPE_NONE, &y));
    check_tensor(y, EV_FLOAT32, 1, SHAPE(4), VALS(1, NAN, NAN, NAN), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    x = tensor_from(EV_FLOAT64, 1, SHAPE(4), VALS(2, INFINITY, -INFINITY, 0));
    CHECK_OK(ev_cumsum(&EX, x, 0, EV_DTYPE_NONE, &y));
    check_tensor(y, EV_FLOAT64, 1, SHAPE(4), VALS(2, INFINITY, NAN, NAN), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_cumprod(&EX, x, 0, EV_DTYPE_NONE, &y));
    check_tensor(y, EV_FLOAT64, 1, SHAPE(4), VALS(2, INFINITY, -INFINITY, NAN), 0);
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
        CHECK_OK(ev_slice(t, 1, 3, 0, 1, &s)); /* empty slice first */
        ev_tensor_unref(s);
        CHECK_OK(ev_slice(t, 1, 1, INT64_MAX, 2, &s));
        CHECK(!ev_tensor_is_contiguous(s));
        ev_tensor *n;
        CHECK_OK(ev_slice(t, 0, INT64_MAX, INT64_MIN, -2, &n)); /* negative stride */
        for (int dim = 0; dim < 3; dim++) {
            check_scan(t, dim, EV_DTYPE_NONE, dim % 2);
            check_scan(s, dim, EV_DTYPE_NONE, 0);
            check_scan(s, dim, EV_FLOAT64, 1);
            check_scan(n, dim, EV_DTYPE_NONE, dim % 2);
        }
        ev_tensor_unref(n);
        ev_tensor_unref(s);
        ev_tensor_unref(t);
        ev_tensor_unref(base);
    }
    ev_tensor *row = tensor_from(EV_INT32, 2, SHAPE(1, 3), VALS(1, -2, 3)), *e;
    CHECK_OK(ev_expand(row, 2, SHAPE(4, 3), &e));
    check_scan(e, 0, EV_DTYPE_NONE, 0);
    check_scan(e, 0, EV_DTYPE_NONE, 1);
    check_scan(e, 1, EV_DTYPE_NONE, 0);
    ev_tensor_unref(e);
    ev_tensor_unref(row);
}

static void test_zero_size_and_0d(void)
{
    ev_tensor *x, *y;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(0, 3), &x));
    for (int dim = 0; dim < 2; dim++) {
        CHECK_OK(ev_cumsum(&EX, x, dim, EV_DTYPE_NONE, &y));
        check_tensor(y, EV_FLOAT32, 2, SHAPE(0, 3), NULL, 0);
        ev_tensor_unref(y);
    }
    ev_tensor_unref(x);
    ev_tensor *s = tensor_from(EV_INT32, 0, NULL, VALS(7));
    CHECK_OK(ev_cumsum(&EX, s, 0, EV_DTYPE_NONE, &y));
    check_tensor(y, EV_INT64, 0, NULL, VALS(7), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_cumprod(&EX, s, -1, EV_FLOAT32, &y));
    check_tensor(y, EV_FLOAT32, 0, NULL, VALS(7), 0);
    ev_tensor_unref(y);
    CHECK_EQ(ev_cumsum(&EX, s, 1, EV_DTYPE_NONE, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "cumsum: dimension 1 is out of range [-1, 0]");
    CHECK_EQ(ev_cumsum_(&EX, s, 0, EV_DTYPE_NONE), 0);
    check_tensor(s, EV_INT32, 0, NULL, VALS(7), 0);
    ev_tensor_unref(s);
}

static void test_inplace(void)
{
    ev_tensor *x = tensor_from(EV_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
    CHECK_OK(ev_cumsum_(&EX, x, 1, EV_DTYPE_NONE));
    check_tensor(x, EV_INT32, 2, SHAPE(2, 3), VALS(1, 3, 6, 4, 9, 15), 0);
    /* Through a transposed view: writes x's storage along x's dim 0. */
    ev_tensor *t;
    CHECK_OK(ev_transpose(x, 0, 1, &t));
    CHECK_OK(ev_cumprod_(&EX, t, 1, EV_DTYPE_NONE));
    check_tensor(x, EV_INT32, 2, SHAPE(2, 3), VALS(1, 3, 6, 4, 27, 90), 0);
    ev_tensor_unref(t);
    /* Through a reversed view (negative stride): scans x's rows backwards. */
    ev_tensor *rv;
    CHECK_OK(ev_slice(x, 1, INT64_MAX, INT64_MIN, -1, &rv));
    CHECK_OK(ev_cumsum_(&EX, rv, 1, EV_DTYPE_NONE));
    check_tensor(x, EV_INT32, 2, SHAPE(2, 3), VALS(10, 9, 6, 121, 117, 90), 0);
    ev_tensor_unref(rv);
    /* int32 wraps when the int64 result is stored back. */
    int32_t w[2] = {INT32_MAX, 2};
    ev_tensor *wx;
    CHECK_OK(ev_from_host(&EX, EV_INT32, 1, SHAPE(2), w, &wx));
    CHECK_OK(ev_cumsum_(&EX, wx, 0, EV_DTYPE_NONE));
    int32_t g[2];
    CHECK_OK(ev_to_host(&EX, wx, g));
    CHECK_EQ(g[1], INT32_MIN + 1);
    ev_tensor_unref(wx);
    /* A float64 result into float32 x: computed in float64, rounded. */
    ev_tensor *f = tensor_from(EV_FLOAT32, 1, SHAPE(3), VALS(0.5, 0.25, 0.125));
    CHECK_OK(ev_cumsum_(&EX, f, 0, EV_FLOAT64));
    check_tensor(f, EV_FLOAT32, 1, SHAPE(3), VALS(0.5, 0.75, 0.875), 0);
    /* Kinds that do not cast down: an integer x with a float dtype, and
     * bool x without one (its default result is int64). */
    CHECK_EQ(ev_cumsum_(&EX, x, 0, EV_FLOAT32), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "cumsum_: the result dtype float32 cannot be cast");
    ev_tensor *b = tensor_from(EV_BOOL, 1, SHAPE(3), VALS(0, 1, 0));
    CHECK_EQ(ev_cumprod_(&EX, b, 0, EV_DTYPE_NONE), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "cumprod_: the result dtype int64");
    CHECK_OK(ev_cumsum_(&EX, b, 0, EV_BOOL));
    check_tensor(b, EV_BOOL, 1, SHAPE(3), VALS(0, 1, 1), 0);
    /* uint8 likewise (a signed result never goes into an unsigned tensor);
     * with dtype uint8 it wraps at 256. */
    ev_tensor *u8 = tensor_from(EV_UINT8, 1, SHAPE(3), VALS(200, 100, 1));
    CHECK_EQ(ev_cumsum_(&EX, u8, 0, EV_DTYPE_NONE), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "cumsum_: the result dtype int64 cannot be cast to "
                                          "the in-place operand's dtype uint8 (pass a dtype)");
    CHECK_OK(ev_cumsum_(&EX, u8, 0, EV_UINT8));
    check_tensor(u8, EV_UINT8, 1, SHAPE(3), VALS(200, 44, 45), 0);
    ev_tensor_unref(u8);
    /* An expanded x would write one element through several. */
    ev_tensor *e;
    CHECK_OK(ev_expand(f, 2, SHAPE(2, 3), &e));
    CHECK_EQ(ev_cumsum_(&EX, e, 1, EV_DTYPE_NONE), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "cumsum_: the in-place operand is an expanded");
    check_tensor(f, EV_FLOAT32, 1, SHAPE(3), VALS(0.5, 0.75, 0.875), 0);
    ev_tensor_unref(e);
    ev_tensor_unref(b);
    ev_tensor_unref(f);
    ev_tensor_unref(x);
}

static void test_long_parallel(void)
{
    /* Enough lines to be split over the intra-op threads, both ways. */
    int64_t rows = ev_test_scaled(600), cols = 301, n = rows * cols;
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (double)((i * 7919) % 13) - 6;
    }
    ev_tensor *x;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT64, 2, SHAPE(rows, cols), v, &x));
    ev_tensor *i64;
    CHECK_OK(ev_cast(&EX, x, EV_INT64, &i64));
    for (int dim = 0; dim < 2; dim++) {
        check_scan(x, dim, EV_DTYPE_NONE, 0);
        check_scan(i64, dim, EV_DTYPE_NONE, 1);
    }
    ev_tensor_unref(i64);
    ev_tensor_unref(x);
    free(v);
}

static void test_allocation_failures(void)
{
    /* Each allocation of the call or its kernel fails in turn: the call
     * fails cleanly with EV_ENOMEM, or its result is poisoned with it, and
     * nothing leaks (LeakSanitizer in the ASan build). */
    ev_tensor *x = tensor_from(EV_FLOAT32, 2, SHAPE(4, 3), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                              11, 12));
    CHECK_OK(ev_synchronize(test_vm, NULL));
    int saw_call = 0, saw_kernel = 0;
    for (long n = 0; n < 64; n++) {
        ev_tensor *y = NULL;
        /* The budget holds until the kernel has run (it allocates too). */
        ev__fail_alloc_after(n);
        int rc = ev_cumsum(&EX, x, 0, EV_FLOAT64, &y);
        ev_error *err = NULL;
        int wrc = rc ? 0 : ev_wait_obj(test_vm, ev_tensor_obj(y), &err);
        ev__fail_alloc_after(-1);
        if (rc) {
            CHECK_EQ(rc, EV_ENOMEM);
            CHECK(y == NULL);
            saw_call = 1;
            continue;
        }
        if (wrc) {
            CHECK(wrc == EV_EPOISON || wrc == EV_ENOMEM);
            if (err) {
                ev_error_info info;
                ev_error_get(err, &info);
                CHECK_EQ(info.code, EV_ENOMEM);
                ev_error_unref(err);
            }
            saw_kernel = 1;
        } else {
            check_tensor(y, EV_FLOAT64, 2, SHAPE(4, 3),
                         VALS(1, 2, 3, 5, 7, 9, 12, 15, 18, 22, 26, 30), 0);
        }
        ev_tensor_unref(y);
    }
    CHECK(saw_call && saw_kernel);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_tensor_unref(x);
}

static void test_errors(void)
{
    ev_tensor *x, *y = NULL;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(2, 2), &x));
    CHECK_EQ(ev_cumsum(&EX, x, 2, EV_DTYPE_NONE, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "cumsum: dimension 2 is out of range [-2, 1]");
    CHECK_EQ(ev_cumprod(&EX, x, -3, EV_DTYPE_NONE, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "cumprod: dimension -3");
    CHECK_EQ(ev_cumsum(&EX, x, 0, (ev_dtype)(EV_DTYPE_COUNT + 3), &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "cumsum: dtype");
    CHECK_EQ(ev_cumsum(&EX, x, 0, EV_DTYPE_NONE, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "cumsum: out is NULL");
    CHECK_EQ(ev_cumprod(&EX, NULL, 0, EV_DTYPE_NONE, &y), EV_EINVAL);
    CHECK_EQ(ev_cumsum(NULL, x, 0, EV_DTYPE_NONE, &y), EV_EINVAL);
    CHECK_EQ(ev_cumsum_(&EX, x, 5, EV_DTYPE_NONE), EV_EINDEX);
    CHECK_EQ(ev_cumprod_(&EX, NULL, 0, EV_DTYPE_NONE), EV_EINVAL);
    CHECK(y == NULL);
    ev_tensor_unref(x);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_every_dtype_and_dim);
    RUN_TEST(test_known_values);
    RUN_TEST(test_wrapping);
    RUN_TEST(test_nan_inf);
    RUN_TEST(test_strided_views);
    RUN_TEST(test_zero_size_and_0d);
    RUN_TEST(test_inplace);
    RUN_TEST(test_long_parallel);
    RUN_TEST(test_allocation_failures);
    RUN_TEST(test_errors);
    test_teardown();
    return 0;
}
