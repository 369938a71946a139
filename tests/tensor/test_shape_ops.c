/* Tests of flip, roll, tril and triu (and tril_, triu_): every subset of
 * dimensions, shifts of any sign and size, repeated and flattened rolls,
 * every diagonal, in every dtype, on contiguous, transposed, sliced and
 * expanded inputs, against references written here from the definitions;
 * zero-size and 0-d tensors, long parallel cases, in-place writes through
 * views, and the errors raised at the call. */
#include "tensor_test.h"

/* ------------------------------------------------------------- reference */

static void unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx)
{
    int64_t flat = 0;
    for (int d = 0; d < ndim; d++) {
        flat = flat * shape[d] + idx[d];
    }
    return flat;
}

static int64_t pmod(int64_t a, int64_t n)
{
    int64_t r = a % n;
    return r < 0 ? r + n : r;
}

/* out[idx] = v[source(idx)] with dims in flip reversed and each dim d
 * rolled by shift[d] (taken mod size; applied one shift at a time, as
 * PyTorch composes rolls). */
static void ref_remap(const double *v, int ndim, const int64_t *shape, unsigned flip,
                      const int64_t *shift, double *out)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        n *= shape[d];
    }
    for (int64_t e = 0; e < n; e++) {
        int64_t idx[EV_MAX_DIMS];
        unravel(e, ndim, shape, idx);
        for (int d = 0; d < ndim; d++) {
            if (flip & (1u << d)) {
                idx[d] = shape[d] - 1 - idx[d];
            }
            /* idx - shift mod size, without overflow for any int64 shift. */
            idx[d] = pmod(idx[d] - pmod(shift[d], shape[d]), shape[d]);
        }
        out[e] = v[ravel(ndim, shape, idx)];
    }
}

static void ref_tri(const double *v, int ndim, const int64_t *shape, int64_t diag, int upper,
                    double *out)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        n *= shape[d];
    }
    for (int64_t e = 0; e < n; e++) {
        int64_t idx[EV_MAX_DIMS];
        unravel(e, ndim, shape, idx);
        /* j - i compared without overflow: diag is within int64, j - i small */
        int64_t dji = idx[ndim - 1] - idx[ndim - 2];
        int keep = upper ? dji >= diag : dji <= diag;
        out[e] = keep ? v[e] : 0;
    }
}

static double *host_vals(ev_tensor *x)
{
    int64_t n = ev_tensor_numel(x);
    double *h = malloc(sizeof(double) * (size_t)(n ? n : 1));
    read_f64(x, h);
    return h;
}

static void check_flip(ev_tensor *x, unsigned mask)
{
    int nd = ev_tensor_ndim(x);
    int dims[EV_MAX_DIMS], ndims = 0;
    for (int d = 0; d < nd; d++) {
        if (mask & (1u << d)) {
            dims[ndims++] = (d % 2) ? d - nd : d;
        }
    }
    double *h = host_vals(x);
    double *want = malloc(sizeof(double) * (size_t)(ev_tensor_numel(x) + 1));
    int64_t zero[EV_MAX_DIMS] = {0};
    ref_remap(h, nd, ev_tensor_shape(x), mask, zero, want);
    ev_tensor *y;
    CHECK_OK(ev_flip(&EX, x, ndims, dims, &y));
    check_tensor(y, ev_tensor_dtype(x), nd, ev_tensor_shape(x), want, 0);
    CHECK(ev_tensor_is_contiguous(y));
    ev_tensor_unref(y);
    free(h);
    free(want);
}

/* Rolls x by shifts over dims (ndims 0: flattened by shifts[0]). */
static void check_roll(ev_tensor *x, int nshifts, const int64_t *shifts, int ndims,
                       const int *dims)
{
    int nd = ev_tensor_ndim(x);
    int64_t n = ev_tensor_numel(x);
    double *h = host_vals(x);
    double *want = malloc(sizeof(double) * (size_t)(n + 1));
    if (ndims == 0) {
        for (int64_t j = 0; j < n; j++) {
            want[j] = h[pmod(j - pmod(shifts[0], n), n)];
        }
    } else {
        /* One roll per (shift, dim) pair, composed. */
        double *cur = malloc(sizeof(double) * (size_t)(n + 1));
        memcpy(cur, h, sizeof(double) * (size_t)n);
        for (int k = 0; k < ndims; k++) {
            int64_t sh[EV_MAX_DIMS] = {0};
            int d = dims[k] < 0 ? dims[k] + nd : dims[k];
            if (nd > 0) {
                sh[d] = shifts[k];
            }
            ref_remap(cur, nd, ev_tensor_shape(x), 0, sh, want);
            memcpy(cur, want, sizeof(double) * (size_t)n);
        }
        free(cur);
    }
    ev_tensor *y;
    CHECK_OK(ev_roll(&EX, x, nshifts, shifts, ndims, dims, &y));
    check_tensor(y, ev_tensor_dtype(x), nd, ev_tensor_shape(x), want, 0);
    ev_tensor_unref(y);
    free(h);
    free(want);
}

static void check_tri(ev_tensor *x, int64_t diag, int upper)
{
    int nd = ev_tensor_ndim(x);
    double *h = host_vals(x);
    double *want = malloc(sizeof(double) * (size_t)(ev_tensor_numel(x) + 1));
    ref_tri(h, nd, ev_tensor_shape(x), diag, upper, want);
    ev_tensor *y;
    CHECK_OK(upper ? ev_triu(&EX, x, diag, &y) : ev_tril(&EX, x, diag, &y));
    check_tensor(y, ev_tensor_dtype(x), nd, ev_tensor_shape(x), want, 0);
    ev_tensor_unref(y);
    free(h);
    free(want);
}

/* Runs every check on x (3-d or more for the triangles' batches). */
static void check_everything(ev_tensor *x)
{
    int nd = ev_tensor_ndim(x);
    for (unsigned mask = 0; mask < (1u << nd); mask++) {
        check_flip(x, mask);
    }
    const int64_t shifts[] = {1, -1, 2, 7, -13, 0, INT64_MAX, INT64_MIN};
    for (int k = 0; k < 8; k++) {
        for (int d = -nd; d < nd; d++) {
            check_roll(x, 1, &shifts[k], 1, &d);
        }
        check_roll(x, 1, &shifts[k], 0, NULL);
    }
    int two[2] = {0, -1}, same[2] = {nd ? nd - 1 : 0, nd ? nd - 1 : 0};
    int64_t s2[2] = {1, -2};
    check_roll(x, 2, s2, 2, two);
    check_roll(x, 2, s2, 2, same); /* a dimension twice: shifts add up */
    if (nd >= 2) {
        for (int64_t diag = -6; diag <= 6; diag++) {
            check_tri(x, diag, 0);
            check_tri(x, diag, 1);
        }
        check_tri(x, INT64_MAX, 0);
        check_tri(x, INT64_MIN, 1);
        check_tri(x, INT64_MIN, 0);
    }
}

static void fill_vals(double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        v[i] = (double)((i * 37 + 11) % 23) / 2.0 - 5;
    }
}

/* ------------------------------------------------------------------ tests */

static void test_every_dtype(void)
{
    double vals[60];
    fill_vals(vals, 60);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 3, SHAPE(3, 4, 5), vals);
        check_everything(x);
        ev_tensor_unref(x);
        /* A non-square matrix, taller and wider. */
        x = tensor_from((ev_dtype)dt, 2, SHAPE(5, 3), vals);
        check_everything(x);
        ev_tensor_unref(x);
        x = tensor_from((ev_dtype)dt, 2, SHAPE(2, 6), vals);
        check_everything(x);
        ev_tensor_unref(x);
    }
}

static void test_known_values(void)
{
    ev_tensor *x = tensor_from(EV_INT32, 2, SHAPE(3, 3), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9)), *y;
    CHECK_OK(ev_tril(&EX, x, 0, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(3, 3), VALS(1, 0, 0, 4, 5, 0, 7, 8, 9), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_triu(&EX, x, 1, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(3, 3), VALS(0, 2, 3, 0, 0, 6, 0, 0, 0), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_tril(&EX, x, -1, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(3, 3), VALS(0, 0, 0, 4, 0, 0, 7, 8, 0), 0);
    ev_tensor_unref(y);
    int d0 = 0, d1 = 1;
    CHECK_OK(ev_flip(&EX, x, 1, &d1, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(3, 3), VALS(3, 2, 1, 6, 5, 4, 9, 8, 7), 0);
    ev_tensor_unref(y);
    int64_t one = 1;
    CHECK_OK(ev_roll(&EX, x, 1, &one, 1, &d0, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(3, 3), VALS(7, 8, 9, 1, 2, 3, 4, 5, 6), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_roll(&EX, x, 1, &one, 0, NULL, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(3, 3), VALS(9, 1, 2, 3, 4, 5, 6, 7, 8), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    /* NaN and -0.0 move as they are. */
    x = tensor_from(EV_FLOAT64, 1, SHAPE(3), VALS(NAN, -0.0, 1));
    CHECK_OK(ev_flip(&EX, x, 1, &d0, &y));
    double got[3];
    CHECK_OK(ev_to_host(&EX, y, got));
    CHECK(got[0] == 1 && got[1] == 0 && signbit(got[1]) && isnan(got[2]));
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_strided_views(void)
{
    double vals[120];
    fill_vals(vals, 120);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *base = tensor_from((ev_dtype)dt, 3, SHAPE(4, 5, 6), vals), *t, *s;
        CHECK_OK(ev_transpose(base, 0, 2, &t));
        CHECK_OK(ev_slice(t, 1, 1, INT64_MAX, 2, &s));
        CHECK(!ev_tensor_is_contiguous(s));
        check_everything(t);
        check_everything(s);
        ev_tensor *n;
        CHECK_OK(ev_slice(s, 1, INT64_MAX, INT64_MIN, -1, &n)); /* negative stride */
        check_everything(n);
        ev_tensor_unref(n);
        ev_tensor_unref(s);
        ev_tensor_unref(t);
        ev_tensor_unref(base);
    }
    ev_tensor *row = tensor_from(EV_FLOAT32, 2, SHAPE(1, 4), VALS(1, 2, 3, 4)), *e;
    CHECK_OK(ev_expand(row, 3, SHAPE(2, 3, 4), &e));
    check_everything(e);
    ev_tensor_unref(e);
    ev_tensor_unref(row);
}

static void test_zero_size_and_0d(void)
{
    ev_tensor *x, *y;
    int64_t shapes[3][3] = {{0, 3, 2}, {3, 0, 2}, {2, 3, 0}};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 3, shapes[k], &x));
        check_everything(x);
        ev_tensor_unref(x);
    }
    ev_tensor *s = tensor_from(EV_INT64, 0, NULL, VALS(42));
    int d0 = 0, dm = -1, both[2] = {0, -1};
    int64_t sh = 5;
    CHECK_OK(ev_flip(&EX, s, 1, &d0, &y));
    check_tensor(y, EV_INT64, 0, NULL, VALS(42), 0);
    ev_tensor_unref(y);
    CHECK_EQ(ev_flip(&EX, s, 2, both, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "flip: dimension 0 appears more than once");
    CHECK_OK(ev_roll(&EX, s, 1, &sh, 1, &dm, &y));
    check_tensor(y, EV_INT64, 0, NULL, VALS(42), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_roll(&EX, s, 1, &sh, 0, NULL, &y));
    check_tensor(y, EV_INT64, 0, NULL, VALS(42), 0);
    ev_tensor_unref(y);
    CHECK_EQ(ev_flip(&EX, s, 1, (const int[]){1}, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "flip: dimension 1 is out of range [-1, 0]");
    CHECK_EQ(ev_tril(&EX, s, 0, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "tril: x of shape [] has 0 dimensions; at least 2");
    CHECK_EQ(ev_triu_(&EX, s, 0), EV_EINVAL);
    ev_tensor_unref(s);
    x = tensor_from(EV_INT32, 1, SHAPE(3), VALS(1, 2, 3));
    CHECK_EQ(ev_triu(&EX, x, 0, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "triu: x of shape [3] has 1 dimensions");
    check_everything(x);
    ev_tensor_unref(x);
}

static void test_inplace(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT32, 2, SHAPE(3, 3), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9));
    CHECK_OK(ev_tril_(&EX, x, 0));
    check_tensor(x, EV_FLOAT32, 2, SHAPE(3, 3), VALS(1, 0, 0, 4, 5, 0, 7, 8, 9), 0);
    /* Through a transposed view: the view's upper triangle is x's lower. */
    ev_tensor *y = tensor_from(EV_INT64, 2, SHAPE(3, 3), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9)), *t;
    CHECK_OK(ev_transpose(y, 0, 1, &t));
    CHECK_OK(ev_triu_(&EX, t, 1));
    check_tensor(y, EV_INT64, 2, SHAPE(3, 3), VALS(0, 0, 0, 4, 0, 0, 7, 8, 0), 0);
    ev_tensor_unref(t);
    /* Batched, and a slice that leaves the rest of the storage alone. */
    double vals[24];
    fill_vals(vals, 24);
    ev_tensor *b = tensor_from(EV_INT32, 3, SHAPE(2, 3, 4), vals), *sl;
    double want[24];
    CHECK_OK(ev_slice(b, 2, 1, INT64_MAX, 1, &sl)); /* [2, 3, 3], columns 1.. */
    CHECK_OK(ev_triu_(&EX, sl, 0));
    double hv[24];
    read_f64(b, hv);
    for (int64_t e = 0; e < 24; e++) {
        int64_t i = (e / 4) % 3, j = e % 4;
        want[e] = (j >= 1 && j - 1 < i) ? 0 : vals[e];
        CHECK_EQ((int64_t)hv[e], (int64_t)(int32_t)want[e]);
    }
    ev_tensor_unref(sl);
    /* Through a view with negative strides on both dims: flipped rows and
     * columns, so the view's lower triangle is b's upper one. */
    ev_tensor *f1, *f2;
    CHECK_OK(ev_slice(b, 1, INT64_MAX, INT64_MIN, -1, &f1));
    CHECK_OK(ev_slice(f1, 2, INT64_MAX, INT64_MIN, -1, &f2)); /* [2, 3, 4] reversed */
    read_f64(b, hv);
    CHECK_OK(ev_tril_(&EX, f2, 0));
    double hv2[24];
    read_f64(b, hv2);
    for (int64_t e = 0; e < 24; e++) {
        /* f2[i][j] = b[2 - i][3 - j]; kept where j <= i. */
        int64_t i = 2 - (e / 4) % 3, j = 3 - e % 4;
        CHECK(hv2[e] == (j <= i ? hv[e] : 0));
    }
    ev_tensor_unref(f2);
    ev_tensor_unref(f1);
    /* An expanded x cannot be written in place. */
    ev_tensor *row = tensor_from(EV_FLOAT32, 2, SHAPE(1, 3), VALS(1, 2, 3)), *e;
    CHECK_OK(ev_expand(row, 2, SHAPE(3, 3), &e));
    CHECK_EQ(ev_tril_(&EX, e, 0), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "tril_: the in-place operand is an expanded tensor");
    check_tensor(row, EV_FLOAT32, 2, SHAPE(1, 3), VALS(1, 2, 3), 0);
    ev_tensor_unref(e);
    ev_tensor_unref(row);
    ev_tensor_unref(b);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_long_parallel(void)
{
    int64_t rows = ev_test_scaled(400), cols = 301, n = rows * cols;
    double *h = malloc(sizeof(double) * (size_t)n);
    fill_vals(h, n);
    ev_tensor *x;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT64, 2, SHAPE(rows, cols), h, &x));
    check_flip(x, 3);
    check_flip(x, 1);
    int64_t s2[2] = {17, -40};
    int dims[2] = {0, 1};
    check_roll(x, 2, s2, 2, dims);
    check_roll(x, 1, s2, 0, NULL);
    check_tri(x, 3, 0);
    check_tri(x, -7, 1);
    ev_tensor *t;
    CHECK_OK(ev_transpose(x, 0, 1, &t));
    check_roll(t, 1, s2 + 1, 0, NULL); /* flattened, not contiguous */
    check_tri(t, 0, 1);
    ev_tensor_unref(t);
    ev_tensor_unref(x);
    free(h);
}

static void test_errors(void)
{
    ev_tensor *x, *y = NULL;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(2, 3), &x));
    int d2 = 2, dup[2] = {1, -1};
    int64_t s[2] = {1, 2};
    CHECK_EQ(ev_flip(&EX, x, 1, &d2, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "flip: dimension 2 is out of range [-2, 1]");
    CHECK_EQ(ev_flip(&EX, x, 2, dup, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "flip: dimension 1 appears more than once");
    CHECK_EQ(ev_flip(&EX, x, 1, NULL, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "flip: 1 dimensions given in a NULL dims");
    CHECK_EQ(ev_flip(&EX, x, -1, dup, &y), EV_EINVAL);
    CHECK_EQ(ev_flip(&EX, x, 0, NULL, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "flip: out is NULL");
    CHECK_EQ(ev_roll(&EX, x, 2, s, 0, NULL, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "roll: rolling the flattened tensor (no dims) takes "
                                          "one shift, not 2");
    CHECK_EQ(ev_roll(&EX, x, 0, NULL, 0, NULL, &y), EV_EINVAL);
    CHECK_EQ(ev_roll(&EX, x, 1, s, 2, dup, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "roll: 1 shifts for 2 dimensions");
    CHECK_EQ(ev_roll(&EX, x, 1, NULL, 1, &d2, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "roll: 1 shifts given in a NULL shifts");
    CHECK_EQ(ev_roll(&EX, x, 1, s, 1, &d2, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "roll: dimension 2 is out of range");
    CHECK_EQ(ev_tril(&EX, x, 0, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "tril: out is NULL");
    CHECK_EQ(ev_triu(&EX, NULL, 0, &y), EV_EINVAL);
    CHECK_EQ(ev_tril_(NULL, x, 0), EV_EINVAL);
    CHECK_EQ(ev_roll(NULL, x, 1, s, 0, NULL, &y), EV_EINVAL);
    CHECK(y == NULL);
    ev_tensor_unref(x);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_every_dtype);
    RUN_TEST(test_known_values);
    RUN_TEST(test_strided_views);
    RUN_TEST(test_zero_size_and_0d);
    RUN_TEST(test_inplace);
    RUN_TEST(test_long_parallel);
    RUN_TEST(test_errors);
    test_teardown();
    return 0;
}
