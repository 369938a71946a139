/* Tests of creation (empty, zeros, ones, full, arange, linspace, eye), host
 * transfers, copy_ and fill_, against values computed here or NumPy's. */
#include <math.h>

#include "tensor_test.h"

static void test_full_family(void)
{
    for (int d = 0; d < EV_DTYPE_COUNT; d++) {
        ev_tensor *z, *o, *f;
        CHECK_OK(ev_zeros(&EX, (ev_dtype)d, 2, SHAPE(3, 5), &z));
        CHECK_OK(ev_ones(&EX, (ev_dtype)d, 2, SHAPE(3, 5), &o));
        CHECK_OK(ev_full(&EX, (ev_dtype)d, 1, SHAPE(7), ev_scalar_float(2.75), &f));
        double zw[15], ow[15], fw[7];
        for (int i = 0; i < 15; i++) {
            zw[i] = 0;
            ow[i] = 1;
        }
        /* 2.75 converted as a cast does: truncated for integers, true for bool. */
        double v = d == EV_BOOL ? 1 : ev_dtype_is_float((ev_dtype)d) ? 2.75 : 2;
        for (int i = 0; i < 7; i++) {
            fw[i] = v;
        }
        check_tensor(z, (ev_dtype)d, 2, SHAPE(3, 5), zw, 0);
        check_tensor(o, (ev_dtype)d, 2, SHAPE(3, 5), ow, 0);
        check_tensor(f, (ev_dtype)d, 1, SHAPE(7), fw, 0);
        ev_tensor_unref(z);
        ev_tensor_unref(o);
        ev_tensor_unref(f);
    }
    /* 0-d and large int64 values stay exact. */
    ev_tensor *s;
    CHECK_OK(ev_full(&EX, EV_INT64, 0, NULL, ev_scalar_int(INT64_MAX - 1), &s));
    int64_t got;
    CHECK_OK(ev_to_host(&EX, s, &got));
    CHECK_EQ(got, INT64_MAX - 1);
    ev_tensor_unref(s);

    /* The narrow integers take a value as a cast does: 300 -> uint8 44,
     * -1 -> 255, 200 -> int8 -56; arange and eye fill them exactly. */
    ev_tensor *u;
    CHECK_OK(ev_full(&EX, EV_UINT8, 1, SHAPE(2), ev_scalar_int(300), &u));
    check_tensor(u, EV_UINT8, 1, SHAPE(2), VALS(44, 44), 0);
    CHECK_OK(ev_fill_(&EX, u, ev_scalar_int(-1)));
    check_tensor(u, EV_UINT8, 1, SHAPE(2), VALS(255, 255), 0);
    ev_tensor_unref(u);
    CHECK_OK(ev_full(&EX, EV_INT8, 0, NULL, ev_scalar_int(200), &u));
    check_tensor(u, EV_INT8, 0, NULL, VALS(-56), 0);
    ev_tensor_unref(u);
    CHECK_OK(ev_arange(&EX, ev_scalar_int(-3), ev_scalar_int(9), ev_scalar_int(4), EV_INT16, &u));
    check_tensor(u, EV_INT16, 1, SHAPE(3), VALS(-3, 1, 5), 0);
    ev_tensor_unref(u);
    CHECK_OK(ev_eye(&EX, 2, 3, EV_UINT8, &u));
    check_tensor(u, EV_UINT8, 2, SHAPE(2, 3), VALS(1, 0, 0, 0, 1, 0), 0);
    ev_tensor_unref(u);

    ev_tensor *bad = NULL;
    CHECK_EQ(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(3, -1), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "zeros: negative size -1 in dimension 1 of shape "
                                          "[3, -1]");
    CHECK_EQ(ev_ones(&EX, EV_FLOAT32, 9, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "ones: ndim 9 is out of range [0, 8]");
    CHECK_EQ(ev_empty(&EX, EV_DTYPE_COUNT, 1, SHAPE(3), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "empty: invalid dtype");
    CHECK_EQ(ev_empty(NULL, EV_FLOAT32, 1, SHAPE(3), &bad), EV_EINVAL);
    CHECK_EQ(ev_empty(&EX, EV_FLOAT32, 2, SHAPE(INT64_MAX / 2, 4), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "empty: shape [4611686018427387903, 4] is too "
                                          "large: its sizes multiply past 2^59");
    /* Empty, yet its contiguous strides would overflow int64: refused too. */
    CHECK_EQ(ev_zeros(&EX, EV_FLOAT32, 3, SHAPE(0, (int64_t)1 << 40, (int64_t)1 << 40), &bad),
             EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "zeros: shape [0, 1099511627776, 1099511627776] is "
                                          "too large");
    CHECK(bad == NULL);
}

static void test_arange(void)
{
    ev_tensor *t;
    /* numpy.arange(10, 0, -3) -> [10, 7, 4, 1] */
    CHECK_OK(ev_arange(&EX, ev_scalar_int(10), ev_scalar_int(0), ev_scalar_int(-3), EV_INT64,
                       &t));
    check_tensor(t, EV_INT64, 1, SHAPE(4), VALS(10, 7, 4, 1), 0);
    ev_tensor_unref(t);
    /* numpy.arange(-5, 5, 3) -> [-5, -2, 1, 4] */
    CHECK_OK(ev_arange(&EX, ev_scalar_int(-5), ev_scalar_int(5), ev_scalar_int(3), EV_INT32,
                       &t));
    check_tensor(t, EV_INT32, 1, SHAPE(4), VALS(-5, -2, 1, 4), 0);
    ev_tensor_unref(t);
    /* numpy.arange(0, 1, 0.1) has 10 elements, i * 0.1 */
    CHECK_OK(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(1), ev_scalar_float(0.1),
                       EV_FLOAT64, &t));
    double want[10];
    for (int i = 0; i < 10; i++) {
        want[i] = i * 0.1;
    }
    check_tensor(t, EV_FLOAT64, 1, SHAPE(10), want, 0);
    ev_tensor_unref(t);
    /* Empty ranges and exact int64 at the extremes. */
    CHECK_OK(ev_arange(&EX, ev_scalar_int(3), ev_scalar_int(3), ev_scalar_int(1), EV_INT64,
                       &t));
    CHECK_EQ(ev_tensor_numel(t), 0);
    ev_tensor_unref(t);
    CHECK_OK(ev_arange(&EX, ev_scalar_int(INT64_MAX - 2), ev_scalar_int(INT64_MAX),
                       ev_scalar_int(1), EV_INT64, &t));
    int64_t g[2];
    CHECK_OK(ev_to_host(&EX, t, g));
    CHECK_EQ(g[1], INT64_MAX - 1);
    ev_tensor_unref(t);
    CHECK_EQ(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(3), ev_scalar_int(0), EV_INT64,
                       &t), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "arange: step must be nonzero");
    CHECK_EQ(ev_arange(&EX, ev_scalar_float(0), ev_scalar_float(INFINITY), ev_scalar_int(1),
                       EV_FLOAT32, &t), EV_EINVAL);
}

static void test_linspace_eye(void)
{
    ev_tensor *t;
    CHECK_OK(ev_linspace(&EX, 0, 1, 5, EV_FLOAT32, &t));
    check_tensor(t, EV_FLOAT32, 1, SHAPE(5), VALS(0, 0.25, 0.5, 0.75, 1), 0);
    ev_tensor_unref(t);
    /* NumPy 2: numpy.linspace(-1, 1, 4, dtype=int) -> [-1, -1, 0, 1] */
    CHECK_OK(ev_linspace(&EX, -1, 1, 4, EV_INT64, &t));
    check_tensor(t, EV_INT64, 1, SHAPE(4), VALS(-1, -1, 0, 1), 0);
    ev_tensor_unref(t);
    CHECK_OK(ev_linspace(&EX, 3, 9, 1, EV_FLOAT64, &t));
    check_tensor(t, EV_FLOAT64, 1, SHAPE(1), VALS(3), 0);
    ev_tensor_unref(t);
    CHECK_OK(ev_linspace(&EX, 3, 9, 0, EV_FLOAT64, &t));
    CHECK_EQ(ev_tensor_numel(t), 0);
    ev_tensor_unref(t);
    CHECK_EQ(ev_linspace(&EX, 0, 1, -1, EV_FLOAT64, &t), EV_EINVAL);

    CHECK_OK(ev_eye(&EX, 2, 3, EV_INT32, &t));
    check_tensor(t, EV_INT32, 2, SHAPE(2, 3), VALS(1, 0, 0, 0, 1, 0), 0);
    ev_tensor_unref(t);
    CHECK_OK(ev_eye(&EX, 3, -1, EV_BOOL, &t));
    check_tensor(t, EV_BOOL, 2, SHAPE(3, 3), VALS(1, 0, 0, 0, 1, 0, 0, 0, 1), 0);
    ev_tensor_unref(t);
    CHECK_OK(ev_eye(&EX, 0, 4, EV_FLOAT32, &t));
    CHECK_EQ(ev_tensor_numel(t), 0);
    ev_tensor_unref(t);
}

static void test_copy(void)
{
    /* copy_ from a broadcast, transposed int32 source into a strided
     * float64 slice. */
    ev_tensor *dst, *src, *srct, *slice;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 2, SHAPE(3, 4), &dst));
    src = tensor_from(EV_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
    CHECK_OK(ev_transpose(src, 0, 1, &srct)); /* [[1,4],[2,5],[3,6]] */
    CHECK_OK(ev_slice(dst, 1, 0, 4, 2, &slice)); /* dst[:, ::2] */
    CHECK_OK(ev_copy_(&EX, slice, srct));
    check_tensor(dst, EV_FLOAT64, 2, SHAPE(3, 4), VALS(1, 0, 4, 0, 2, 0, 5, 0, 3, 0, 6, 0), 0);
    ev_tensor *row = tensor_from(EV_BOOL, 1, SHAPE(2), VALS(1, 0));
    CHECK_OK(ev_copy_(&EX, slice, row));
    check_tensor(dst, EV_FLOAT64, 2, SHAPE(3, 4), VALS(1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0), 0);
    CHECK_EQ(ev_copy_(&EX, row, slice), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "copy_: src of shape [3, 2] cannot be broadcast to "
                                          "dst of shape [2]");

    /* Overlapping source and destination: x[1:] = x[:-1] shifts, as if the
     * source were read first. */
    ev_tensor *x = tensor_from(EV_INT64, 1, SHAPE(5), VALS(1, 2, 3, 4, 5));
    ev_tensor *hi, *lo;
    CHECK_OK(ev_slice(x, 0, 1, 5, 1, &hi));
    CHECK_OK(ev_slice(x, 0, 0, 4, 1, &lo));
    CHECK_OK(ev_copy_(&EX, hi, lo));
    check_tensor(x, EV_INT64, 1, SHAPE(5), VALS(1, 1, 2, 3, 4), 0);
    /* Reversal through a transpose of the same storage. */
    ev_tensor *m = tensor_from(EV_FLOAT32, 2, SHAPE(2, 2), VALS(1, 2, 3, 4)), *mt;
    CHECK_OK(ev_transpose(m, 0, 1, &mt));
    CHECK_OK(ev_copy_(&EX, m, mt));
    check_tensor(m, EV_FLOAT32, 2, SHAPE(2, 2), VALS(1, 3, 2, 4), 0);

    ev_tensor *ts[] = {dst, src, srct, slice, row, x, hi, lo, m, mt};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static void test_host_roundtrip(void)
{
    const float v[6] = {1.5f, -2, 3, 4, 5, 6};
    ev_tensor *t, *tt;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 2, SHAPE(2, 3), v, &t));
    CHECK_OK(ev_transpose(t, 0, 1, &tt));
    float g[6];
    CHECK_OK(ev_to_host(&EX, tt, g)); /* C order of the transposed view */
    const float w[6] = {1.5f, 4, -2, 5, 3, 6};
    for (int i = 0; i < 6; i++) {
        CHECK(g[i] == w[i]);
    }
    CHECK_EQ(ev_from_host(&EX, EV_FLOAT32, 1, SHAPE(2), NULL, &t), EV_EINVAL);
    ev_tensor_unref(tt);
    ev_tensor_unref(t);
}

static void test_kernel_failure_reported(void)
{
    /* An integer to a negative power fails inside the kernel; the readback
     * of the result names the op and where it was issued (DESIGN rule 6). */
    ev_tensor *a = tensor_from(EV_INT32, 1, SHAPE(3), VALS(2, 3, 4));
    ev_tensor *b = tensor_from(EV_INT32, 1, SHAPE(3), VALS(1, -1, 2));
    ev_tensor *c, *d;
    CHECK_OK(ev_pow(&EX, a, b, &c));
    CHECK_OK(ev_add(&EX, c, a, &d)); /* depends on the failed one */
    int32_t g[3];
    int rc = ev_to_host(&EX, d, g);
    CHECK_NE(rc, 0);
    CHECK_STR_CONTAINS(ev_last_message(), "pow");
    CHECK_STR_CONTAINS(ev_last_message(), "integers to negative integer powers");
    CHECK_STR_CONTAINS(ev_last_message(), "tests/tensor");
    /* Work that does not depend on it goes on. */
    ev_tensor *e;
    CHECK_OK(ev_mul(&EX, a, a, &e));
    check_tensor(e, EV_INT32, 1, SHAPE(3), VALS(4, 9, 16), 0);
    ev_error *err = NULL;
    ev_synchronize(test_vm, &err); /* consume the failure if still unreported */
    ev_error_unref(err);
    ev_tensor *ts[] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) {
        ev_tensor_unref(ts[i]);
    }
}

/* Shapes made from valid inputs can still be too large: a broadcast of
 * [2^40, 1] with [1, 2^40], a matmul of such factors, a cat of two halves
 * past the limit, an index_select by a huge index, and a where whose result
 * is empty but whose other sizes multiply past the limit. Each is a clean
 * error naming the op, and nothing is created. */
static void test_derived_shape_too_big(void)
{
    const int64_t big = (int64_t)1 << 40;
    ev_tensor *one, *col, *row, *half, *idx0, *idx, *bad = NULL;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(1, 1), &one));
    CHECK_OK(ev_expand(one, 2, SHAPE(big, 1), &col));
    CHECK_OK(ev_expand(one, 2, SHAPE(1, big), &row));
    CHECK_OK(ev_expand(one, 2, SHAPE((int64_t)1 << 58, 1), &half));
    CHECK_OK(ev_zeros(&EX, EV_INT64, 1, SHAPE(1), &idx0));
    CHECK_OK(ev_expand(idx0, 1, SHAPE(big), &idx));

    CHECK_EQ(ev_add(&EX, col, row, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "add: shape [1099511627776, 1099511627776] is too "
                                          "large");
    CHECK_EQ(ev_matmul(&EX, col, row, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "matmul: shape [");
    ev_tensor *halves[2] = {half, half};
    CHECK_EQ(ev_cat(&EX, halves, 2, 0, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "cat: shape [");
    CHECK_EQ(ev_index_select(&EX, row, 0, idx, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "index_select: shape [");
    CHECK(bad == NULL);

    /* Views check too: an expand past the limit, a view of an empty tensor
     * as sizes whose strides would overflow. */
    ev_tensor *empty;
    CHECK_EQ(ev_expand(one, 2, SHAPE(big, big), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "expand: shape [1099511627776, 1099511627776] is "
                                          "too large");
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 1, SHAPE(0), &empty));
    CHECK_EQ(ev_view(empty, 3, SHAPE(0, big, big), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "view: shape [0, 1099511627776, 1099511627776] is "
                                          "too large");
    CHECK_EQ(ev_reshape(&EX, empty, 3, SHAPE(big, big, 0), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "reshape: shape [1099511627776, 1099511627776, 0] "
                                          "is too large");
    ev_tensor_unref(empty);

    ev_tensor *cond, *x, *y;
    CHECK_OK(ev_zeros(&EX, EV_BOOL, 3, SHAPE(0, 1, 1), &cond));
    CHECK_OK(ev_unsqueeze(col, 0, &x));
    CHECK_OK(ev_unsqueeze(row, 0, &y));
    CHECK_EQ(ev_where(&EX, cond, x, y, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "where: shape [0, 1099511627776, 1099511627776] is "
                                          "too large");
    CHECK(bad == NULL);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    ev_tensor_unref(cond);

    ev_tensor_unref(idx);
    ev_tensor_unref(idx0);
    ev_tensor_unref(half);
    ev_tensor_unref(row);
    ev_tensor_unref(col);
    ev_tensor_unref(one);
}

/* Sequences long enough to be written in chunks on the pool: each element
 * as the formula gives it wherever its chunk starts. */
static void test_long_sequences(void)
{
    int64_t n = 1000003;
    ev_tensor *t;
    CHECK_OK(ev_arange(&EX, ev_scalar_int(5), ev_scalar_int(5 - 3 * n), ev_scalar_int(-3),
                       EV_INT64, &t));
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)n);
    CHECK_EQ(ev_tensor_numel(t), n);
    CHECK_OK(ev_to_host(&EX, t, iv));
    for (int64_t i = 0; i < n; i++) {
        CHECK_EQ(iv[i], 5 - 3 * i);
    }
    ev_tensor_unref(t);
    /* int16 wraps as a cast does. */
    CHECK_OK(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(n), ev_scalar_int(1), EV_INT16, &t));
    int16_t *sv = malloc(sizeof(int16_t) * (size_t)n);
    CHECK_OK(ev_to_host(&EX, t, sv));
    for (int64_t i = 0; i < n; i++) {
        CHECK_EQ(sv[i], (int16_t)(uint16_t)i);
    }
    ev_tensor_unref(t);
    free(sv);
    double *dv = malloc(sizeof(double) * (size_t)n);
    CHECK_OK(ev_arange(&EX, ev_scalar_float(0.5), ev_scalar_float(0.5 + 0.25 * (double)n),
                       ev_scalar_float(0.25), EV_FLOAT64, &t));
    CHECK_EQ(ev_tensor_numel(t), n);
    CHECK_OK(ev_to_host(&EX, t, dv));
    for (int64_t i = 0; i < n; i++) {
        CHECK(dv[i] == 0.5 + (double)i * 0.25);
    }
    ev_tensor_unref(t);
    CHECK_OK(ev_linspace(&EX, -1.0, 2.0, n, EV_FLOAT32, &t));
    float *fv = malloc(sizeof(float) * (size_t)n);
    CHECK_OK(ev_to_host(&EX, t, fv));
    double step = 3.0 / (double)(n - 1);
    for (int64_t i = 0; i < n - 1; i++) {
        CHECK(fv[i] == (float)(-1.0 + (double)i * step));
    }
    CHECK(fv[n - 1] == 2.0f);
    ev_tensor_unref(t);
    free(fv);
    free(dv);
    free(iv);
    /* eye, wider and taller than square, in rows split over the pool. */
    const int64_t dims[2][2] = {{700, 1500}, {1500, 700}};
    for (int k = 0; k < 2; k++) {
        int64_t r = dims[k][0], c = dims[k][1];
        CHECK_OK(ev_eye(&EX, r, c, EV_INT32, &t));
        int32_t *e = malloc(sizeof(int32_t) * (size_t)(r * c));
        CHECK_OK(ev_to_host(&EX, t, e));
        for (int64_t i = 0; i < r * c; i++) {
            CHECK_EQ(e[i], i / c == i % c);
        }
        free(e);
        ev_tensor_unref(t);
    }
}

/* The dtypes each sequence writes in place (int64, float32, float64) and one
 * it converts, long enough to split over the pool, each element against its
 * formula; results dropped at once leave their blocks to the next ones. */
static void test_sequences_in_place(void)
{
    int64_t n = 777777;
    ev_tensor *t;
    for (int k = 0; k < 6; k++) {
        CHECK_OK(ev_linspace(&EX, 0.0, 1.0, n, k % 2 ? EV_FLOAT32 : EV_FLOAT64, &t));
        ev_tensor_unref(t); /* dropped before it ran */
    }
    float *fv = malloc(sizeof(float) * (size_t)n);
    double *dv = malloc(sizeof(double) * (size_t)n);
    int32_t *iv = malloc(sizeof(int32_t) * (size_t)n);
    CHECK_OK(ev_arange(&EX, ev_scalar_float(-3.5), ev_scalar_float(-3.5 + 0.1 * (double)n),
                       ev_scalar_float(0.1), EV_FLOAT32, &t));
    CHECK_EQ(ev_tensor_numel(t), n);
    CHECK_OK(ev_to_host(&EX, t, fv));
    for (int64_t i = 0; i < n; i++) {
        CHECK(fv[i] == (float)(-3.5 + (double)i * 0.1));
    }
    ev_tensor_unref(t);
    double step = (7.0 - -5.0) / (double)(n - 1);
    CHECK_OK(ev_linspace(&EX, -5.0, 7.0, n, EV_FLOAT64, &t));
    CHECK_OK(ev_to_host(&EX, t, dv));
    for (int64_t i = 0; i < n - 1; i++) {
        CHECK(dv[i] == -5.0 + (double)i * step);
    }
    CHECK(dv[n - 1] == 7.0);
    ev_tensor_unref(t);
    /* Integer linspace rounds toward -inf, the stop included. */
    CHECK_OK(ev_linspace(&EX, -5.0, 7.0, n, EV_INT32, &t));
    CHECK_OK(ev_to_host(&EX, t, iv));
    for (int64_t i = 0; i < n - 1; i++) {
        CHECK_EQ(iv[i], (int32_t)floor(-5.0 + (double)i * step));
    }
    CHECK_EQ(iv[n - 1], 7);
    ev_tensor_unref(t);
    /* A length that is no multiple of any vector width or block. */
    CHECK_OK(ev_linspace(&EX, 1.0, -1.0, 1031, EV_FLOAT32, &t));
    CHECK_OK(ev_to_host(&EX, t, fv));
    for (int64_t i = 0; i < 1030; i++) {
        CHECK(fv[i] == (float)(1.0 + (double)i * (-2.0 / 1030.0)));
    }
    CHECK(fv[1030] == -1.0f);
    ev_tensor_unref(t);
    free(iv);
    free(dv);
    free(fv);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_full_family);
    RUN_TEST(test_arange);
    RUN_TEST(test_linspace_eye);
    RUN_TEST(test_long_sequences);
    RUN_TEST(test_sequences_in_place);
    RUN_TEST(test_copy);
    RUN_TEST(test_host_roundtrip);
    RUN_TEST(test_kernel_failure_reported);
    RUN_TEST(test_derived_shape_too_big);
    test_teardown();
    return 0;
}
