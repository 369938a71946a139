/* Tests of views: shapes, strides and offsets they produce, that they share
 * storage and copy nothing, that writes through them reach the base, and
 * their errors. Expected values are computed by index arithmetic here. */
#include "tensor_test.h"

/* x = arange(24) as float64 of shape [2, 3, 4]. */
static ev_tensor *arange24(void)
{
    ev_tensor *a, *x;
    CHECK_OK(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(24), ev_scalar_int(1), EV_FLOAT64,
                       &a));
    CHECK_OK(ev_view(a, 3, SHAPE(2, 3, 4), &x));
    ev_tensor_unref(a);
    return x;
}

static void test_view_reshape(void)
{
    ev_tensor *x = arange24();
    CHECK(ev_tensor_is_contiguous(x));
    CHECK_EQ(ev_tensor_strides(x)[0], 12);
    ev_tensor *v;
    CHECK_OK(ev_view(x, 2, SHAPE(-1, 6), &v));
    CHECK(ev_tensor_same_storage(v, x));
    double want[24];
    for (int i = 0; i < 24; i++) {
        want[i] = i;
    }
    check_tensor(v, EV_FLOAT64, 2, SHAPE(4, 6), want, 0);
    ev_tensor_unref(v);

    /* A transposed tensor cannot be viewed flat; reshape copies. */
    ev_tensor *t, *r;
    CHECK_OK(ev_transpose(x, 0, 2, &t)); /* [4, 3, 2] */
    CHECK(!ev_tensor_is_contiguous(t));
    CHECK_EQ(ev_view(t, 1, SHAPE(24), &v), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "view: the strides of a tensor of shape [4, 3, 2]");
    CHECK_STR_CONTAINS(ev_last_message(), "use reshape");
    CHECK_OK(ev_reshape(&EX, t, 1, SHAPE(24), &r));
    CHECK(!ev_tensor_same_storage(r, x));
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
            for (int k = 0; k < 2; k++) {
                want[(i * 3 + j) * 2 + k] = k * 12 + j * 4 + i;
            }
        }
    }
    check_tensor(r, EV_FLOAT64, 1, SHAPE(24), want, 0);
    ev_tensor_unref(r);
    /* Splitting a dimension of a transposed tensor is still a view. */
    CHECK_OK(ev_reshape(&EX, t, 4, SHAPE(2, 2, 3, 2), &r));
    CHECK(ev_tensor_same_storage(r, x));
    CHECK_EQ(ev_tensor_strides(r)[0], 2);
    CHECK_EQ(ev_tensor_strides(r)[1], 1);
    CHECK_EQ(ev_tensor_strides(r)[2], 4);
    CHECK_EQ(ev_tensor_strides(r)[3], 12);
    ev_tensor_unref(r);
    /* Size-1 dimensions anywhere do not block a view. */
    CHECK_OK(ev_view(x, 5, SHAPE(1, 2, 1, 12, 1), &v));
    ev_tensor_unref(v);

    CHECK_EQ(ev_view(x, 2, SHAPE(5, -1), &v), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "shape [5, -1] is invalid for a tensor of shape "
                                          "[2, 3, 4] (24 elements)");
    CHECK_EQ(ev_view(x, 2, SHAPE(-1, -1), &v), EV_EINVAL);
    CHECK_EQ(ev_view(x, 9, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 24), &v), EV_EINVAL);
    ev_tensor_unref(t);
    ev_tensor_unref(x);
}

static void test_transpose_permute(void)
{
    ev_tensor *x = arange24();
    ev_tensor *p;
    CHECK_OK(ev_permute(x, (const int[]){2, 0, -2}, &p)); /* [4, 2, 3] */
    CHECK_EQ(ev_tensor_strides(p)[0], 1);
    CHECK_EQ(ev_tensor_strides(p)[1], 12);
    CHECK_EQ(ev_tensor_strides(p)[2], 4);
    double want[24];
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 2; j++) {
            for (int k = 0; k < 3; k++) {
                want[(i * 2 + j) * 3 + k] = j * 12 + k * 4 + i;
            }
        }
    }
    check_tensor(p, EV_FLOAT64, 3, SHAPE(4, 2, 3), want, 0);
    ev_tensor *bad;
    CHECK_EQ(ev_permute(x, (const int[]){0, 0, 1}, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "permute: dimension 0 appears twice");
    CHECK_EQ(ev_permute(x, (const int[]){0, 1, 3}, &bad), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "permute: dimension 3 is out of range [-3, 2]");
    CHECK_EQ(ev_transpose(x, 0, -4, &bad), EV_EINDEX);
    ev_tensor_unref(p);
    ev_tensor_unref(x);
}

static void test_expand(void)
{
    ev_tensor *col = tensor_from(EV_INT32, 2, SHAPE(3, 1), VALS(1, 2, 3));
    ev_tensor *e;
    CHECK_OK(ev_expand(col, 3, SHAPE(2, -1, 4), &e));
    CHECK_EQ(ev_tensor_strides(e)[0], 0);
    CHECK_EQ(ev_tensor_strides(e)[2], 0);
    double want[24];
    for (int i = 0; i < 24; i++) {
        want[i] = (i / 4) % 3 + 1;
    }
    check_tensor(e, EV_INT32, 3, SHAPE(2, 3, 4), want, 0);
    ev_tensor *bad;
    CHECK_EQ(ev_expand(col, 2, SHAPE(4, 4), &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "expand: cannot expand shape [3, 1] to [4, 4]");
    CHECK_EQ(ev_expand(col, 1, SHAPE(3), &bad), EV_EINVAL);
    /* In-place ops refuse an expanded destination. */
    ev_tensor *one = tensor_from(EV_INT32, 0, NULL, VALS(1));
    CHECK_EQ(ev_add_(&EX, e, one), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "add_: the in-place operand is an expanded tensor");
    CHECK_EQ(ev_copy_(&EX, e, one), EV_EINVAL);
    ev_tensor_unref(one);
    ev_tensor_unref(e);
    ev_tensor_unref(col);
}

static void test_slice(void)
{
    ev_tensor *x = arange24();
    ev_tensor *s, *s2;
    /* x[:, ::2, 1:] */
    CHECK_OK(ev_slice(x, 1, 0, INT64_MAX, 2, &s));
    CHECK_OK(ev_slice(s, -1, 1, INT64_MAX, 1, &s2));
    CHECK_EQ(ev_tensor_offset(s2), 1);
    CHECK_EQ(ev_tensor_strides(s2)[1], 8);
    double want[12];
    int n = 0;
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 3; j += 2) {
            for (int k = 1; k < 4; k++) {
                want[n++] = i * 12 + j * 4 + k;
            }
        }
    }
    check_tensor(s2, EV_FLOAT64, 3, SHAPE(2, 2, 3), want, 0);
    ev_tensor_unref(s2);
    /* Negative bounds and clamping: x[..., -3:-1], x[..., -100:100:3],
     * an empty x[..., 3:1]. */
    CHECK_OK(ev_slice(x, 2, -3, -1, 1, &s2));
    CHECK_EQ(ev_tensor_shape(s2)[2], 2);
    CHECK_EQ(ev_tensor_offset(s2), 1);
    ev_tensor_unref(s2);
    CHECK_OK(ev_slice(x, 2, -100, 100, 3, &s2));
    CHECK_EQ(ev_tensor_shape(s2)[2], 2);
    ev_tensor_unref(s2);
    CHECK_OK(ev_slice(x, 2, 3, 1, 1, &s2));
    CHECK_EQ(ev_tensor_numel(s2), 0);
    check_tensor(s2, EV_FLOAT64, 3, SHAPE(2, 3, 0), NULL, 0);
    ev_tensor_unref(s2);
    CHECK_EQ(ev_slice(x, 0, 0, 1, 0, &s2), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "slice: step must not be zero");
    CHECK_EQ(ev_slice(x, 3, 0, 1, 1, &s2), EV_EINDEX);
    ev_tensor_unref(s);
    ev_tensor_unref(x);
}

static void test_write_through_view(void)
{
    /* Filling a strided slice writes the base storage, and a later read of
     * the base sees it (the slice's storage object is the base's). */
    ev_tensor *x = arange24();
    ev_tensor *s, *col;
    CHECK_OK(ev_slice(x, 2, 1, 4, 2, &s)); /* x[:, :, 1::2] */
    CHECK(ev_tensor_obj(s) == ev_tensor_obj(x));
    CHECK_OK(ev_fill_(&EX, s, ev_scalar_float(-1)));
    CHECK_OK(ev_slice(x, 1, 2, 3, 1, &col)); /* x[:, 2:3, :] */
    ev_tensor *ten = tensor_from(EV_FLOAT64, 1, SHAPE(4), VALS(10, 20, 30, 40));
    CHECK_OK(ev_add_(&EX, col, ten));
    double want[24];
    for (int i = 0; i < 24; i++) {
        int k = i % 4, j = (i / 4) % 3;
        want[i] = (k % 2 == 1) ? -1 : i;
        if (j == 2) {
            want[i] += 10 * (k + 1);
        }
    }
    check_tensor(x, EV_FLOAT64, 3, SHAPE(2, 3, 4), want, 0);
    ev_tensor_unref(ten);
    ev_tensor_unref(col);
    ev_tensor_unref(s);
    ev_tensor_unref(x);
}

static void test_squeeze_unsqueeze(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT32, 3, SHAPE(1, 3, 1), VALS(1, 2, 3));
    ev_tensor *a, *b, *c, *d;
    CHECK_OK(ev_squeeze(x, 0, &a));
    CHECK_EQ(ev_tensor_ndim(a), 2);
    CHECK_OK(ev_squeeze(x, 1, &b)); /* size 3: unchanged */
    CHECK_EQ(ev_tensor_ndim(b), 3);
    CHECK_OK(ev_squeeze_all(x, &c));
    check_tensor(c, EV_FLOAT32, 1, SHAPE(3), VALS(1, 2, 3), 0);
    CHECK_OK(ev_unsqueeze(c, -1, &d));
    CHECK_EQ(ev_tensor_ndim(d), 2);
    CHECK_EQ(ev_tensor_shape(d)[1], 1);
    CHECK(ev_tensor_is_contiguous(d));
    ev_tensor *e;
    CHECK_EQ(ev_unsqueeze(c, 3, &e), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "unsqueeze: dimension 3 is out of range [-2, 1]");
    ev_tensor *ts[] = {x, a, b, c, d};
    for (int i = 0; i < 5; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static void test_zero_d_and_empty(void)
{
    ev_tensor *s = tensor_from(EV_INT64, 0, NULL, VALS(7));
    CHECK_EQ(ev_tensor_ndim(s), 0);
    CHECK_EQ(ev_tensor_numel(s), 1);
    CHECK(ev_tensor_is_contiguous(s));
    ev_tensor *u, *v, *bad;
    CHECK_OK(ev_unsqueeze(s, 0, &u));
    CHECK_OK(ev_view(u, 0, NULL, &v));
    check_tensor(v, EV_INT64, 0, NULL, VALS(7), 0);
    CHECK_EQ(ev_squeeze(s, 0, &bad), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "out of range for a 0-d tensor");
    ev_tensor *e, *e2, *c;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 3, SHAPE(2, 0, 3), &e));
    CHECK_EQ(ev_tensor_numel(e), 0);
    /* -1 is ambiguous with 0 elements; PyTorch refuses too. */
    CHECK_EQ(ev_view(e, 2, SHAPE(0, -1), &e2), EV_EINVAL);
    CHECK_OK(ev_view(e, 2, SHAPE(6, 0), &e2));
    ev_tensor_unref(e2);
    CHECK_OK(ev_transpose(e, 0, 2, &e2));
    CHECK_OK(ev_contiguous(&EX, e2, &c));
    check_tensor(c, EV_FLOAT32, 3, SHAPE(3, 0, 2), NULL, 0);
    ev_tensor_unref(c);
    ev_tensor_unref(e2);
    ev_tensor_unref(e);
    ev_tensor_unref(v);
    ev_tensor_unref(u);
    ev_tensor_unref(s);
}

static void test_contiguous(void)
{
    ev_tensor *x = arange24();
    ev_tensor *c, *t;
    CHECK_OK(ev_contiguous(&EX, x, &c));
    CHECK(c == x); /* no copy when not needed */
    ev_tensor_unref(c);
    CHECK_OK(ev_transpose(x, 1, 2, &t));
    CHECK_OK(ev_contiguous(&EX, t, &c));
    CHECK(c != t && ev_tensor_is_contiguous(c) && !ev_tensor_same_storage(c, x));
    double want[24];
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < 3; j++) {
                want[(i * 4 + k) * 3 + j] = i * 12 + j * 4 + k;
            }
        }
    }
    check_tensor(c, EV_FLOAT64, 3, SHAPE(2, 4, 3), want, 0);
    ev_tensor_unref(c);
    ev_tensor_unref(t);
    ev_tensor_unref(x);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_view_reshape);
    RUN_TEST(test_transpose_permute);
    RUN_TEST(test_expand);
    RUN_TEST(test_slice);
    RUN_TEST(test_write_through_view);
    RUN_TEST(test_squeeze_unsqueeze);
    RUN_TEST(test_zero_d_and_empty);
    RUN_TEST(test_contiguous);
    test_teardown();
    return 0;
}
