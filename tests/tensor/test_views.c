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

static void test_as_strided(void)
{
    /* Any layout over the storage: a column of x's second matrix, read
     * backwards, and the whole storage flat. */
    ev_tensor *x = arange24(), *col, *flat, *bad;
    CHECK_OK(ev_as_strided(x, 1, SHAPE(3), (int64_t[]){-4}, 12 + 8 + 1, &col));
    check_tensor(col, EV_FLOAT64, 1, SHAPE(3), VALS(21, 17, 13), 0);
    CHECK(ev_tensor_obj(col) == ev_tensor_obj(x));
    CHECK_OK(ev_as_strided(col, 2, SHAPE(4, 6), (int64_t[]){6, 1}, 0, &flat));
    CHECK_EQ(ev_tensor_offset(flat), 0);
    CHECK_EQ(ev_tensor_numel(flat), 24);
    /* Elements outside the storage, on either side. */
    CHECK_EQ(ev_as_strided(x, 1, SHAPE(3), (int64_t[]){-4}, 7, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "reaches elements -1 to 7 of a storage of 24");
    CHECK_EQ(ev_as_strided(x, 2, SHAPE(5, 5), (int64_t[]){5, 1}, 0, &bad), EV_EINVAL);
    CHECK_EQ(ev_as_strided(x, 1, SHAPE(3), (int64_t[]){INT64_MAX}, 0, &bad), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "overflows");
    /* An empty view may sit at the storage's end. */
    CHECK_OK(ev_as_strided(x, 1, SHAPE(0), (int64_t[]){1}, 24, &bad));
    ev_tensor_unref(bad);
    CHECK_EQ(ev_as_strided(x, 1, SHAPE(0), (int64_t[]){1}, 25, &bad), EV_EINVAL);
    CHECK_EQ(ev_as_strided(x, 1, SHAPE(2), NULL, 0, &bad), EV_EINVAL);
    ev_tensor_unref(flat);
    ev_tensor_unref(col);
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

/* ------------------------------------------------------ negative steps */

/* A 1-d float64 tensor holding f(i) at storage index i, for i < n. */
static double fval(int64_t i)
{
    return (double)((i * 7) % 24) - 0.5 * (double)(i % 3);
}

static ev_tensor *fbase(int64_t n)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        v[i] = fval(i);
    }
    ev_tensor *t = tensor_from(EV_FLOAT64, 1, SHAPE(n), v);
    free(v);
    return t;
}

/* The storage index of each element of v in C order, from its public
 * layout (offset and strides): with fbase, fval of it is the element's
 * value, so these are the references the ops are checked against. */
static void layout_index(const ev_tensor *v, int64_t *out)
{
    int nd = ev_tensor_ndim(v);
    const int64_t *sh = ev_tensor_shape(v), *st = ev_tensor_strides(v);
    int64_t n = ev_tensor_numel(v), idx[EV_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t off = ev_tensor_offset(v);
        for (int d = 0; d < nd; d++) {
            off += idx[d] * st[d];
        }
        out[e] = off;
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < sh[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
}

static void layout_values(const ev_tensor *v, double *out)
{
    int64_t n = ev_tensor_numel(v);
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    layout_index(v, ix);
    for (int64_t e = 0; e < n; e++) {
        out[e] = fval(ix[e]);
    }
    free(ix);
}

static ev_tensor *slice_of(ev_tensor *t, int dim, int64_t start, int64_t stop, int64_t step)
{
    ev_tensor *s;
    CHECK_OK(ev_slice(t, dim, start, stop, step, &s));
    return s;
}

static void test_negative_slice(void)
{
    /* Python's rules, written out by hand: list(range(10))[start:stop:step]
     * for each row, with INT64_MAX / INT64_MIN standing for omitted bounds. */
    static const struct {
        int64_t start, stop, step, n, first;
    } cases[] = {
        {INT64_MAX, INT64_MIN, -1, 10, 9}, /* [::-1] */
        {5, 1, -2, 2, 5},                  /* [5:1:-2] = [5, 3] */
        {-1, -11, -3, 4, 9},               /* [9, 6, 3, 0] */
        {-1, -1, -1, 0, 0},                /* stop -1 is the last element */
        {100, -100, -4, 3, 9},             /* clamped: [9, 5, 1] */
        {2, 8, -1, 0, 0},                  /* stop not below start */
        {0, INT64_MIN, -1, 1, 0},          /* [0::-1] = [0] */
        {-3, INT64_MIN, -1, 8, 7},         /* [-3::-1] */
        {9, 0, -1, 9, 9},                  /* [9:0:-1] stops before 0 */
        {-100, INT64_MIN, -1, 0, 0},       /* start clamps to -1: empty */
        {INT64_MAX, INT64_MIN, INT64_MIN, 1, 9},
        {INT64_MAX, INT64_MIN, -INT64_MAX, 1, 9},
        {3, INT64_MAX, INT64_MAX, 1, 3},
        {-11, INT64_MAX, 3, 4, 0},         /* [-11::3] = [0, 3, 6, 9] */
        {INT64_MIN, INT64_MAX, 1, 10, 0},
    };
    ev_tensor *x;
    CHECK_OK(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(10), ev_scalar_int(1), EV_FLOAT64,
                       &x));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ev_tensor *s = slice_of(x, 0, cases[c].start, cases[c].stop, cases[c].step);
        int64_t n = cases[c].n;
        int64_t step = cases[c].step < -9 ? -10 : cases[c].step > 9 ? 10 : cases[c].step;
        double want[10];
        for (int64_t i = 0; i < n; i++) {
            want[i] = (double)(cases[c].first + i * step);
        }
        fprintf(stderr, "   case %zu\n", c);
        check_tensor(s, EV_FLOAT64, 1, SHAPE(n), want, 0);
        CHECK_EQ(ev_tensor_offset(s), n > 0 ? cases[c].first : 0);
        if (n > 1) {
            CHECK_EQ(ev_tensor_strides(s)[0], cases[c].step);
            CHECK_EQ(ev_tensor_is_contiguous(s), cases[c].step == 1);
        }
        ev_tensor_unref(s);
    }
    /* An empty dimension: any step gives an empty view. */
    ev_tensor *e, *s;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 2, SHAPE(2, 0), &e));
    s = slice_of(e, 1, INT64_MAX, INT64_MIN, -1);
    check_tensor(s, EV_FLOAT64, 2, SHAPE(2, 0), NULL, 0);
    ev_tensor_unref(s);
    ev_tensor_unref(e);
    /* Step 0 is refused, whatever the sign conventions. */
    CHECK_EQ(ev_slice(x, 0, INT64_MAX, INT64_MIN, 0, &s), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "slice: step must not be zero");
    ev_tensor_unref(x);

    /* x[:, ::-1, 3:0:-2] of arange(24) as [2, 3, 4], then [::-1] of that. */
    x = arange24();
    ev_tensor *a = slice_of(x, 1, INT64_MAX, INT64_MIN, -1);
    ev_tensor *b = slice_of(a, 2, 3, 0, -2);
    CHECK_EQ(ev_tensor_offset(b), 11);
    CHECK_EQ(ev_tensor_strides(b)[0], 12);
    CHECK_EQ(ev_tensor_strides(b)[1], -4);
    CHECK_EQ(ev_tensor_strides(b)[2], -2);
    CHECK(!ev_tensor_is_contiguous(b));
    CHECK(ev_tensor_obj(b) == ev_tensor_obj(x));
    double want[12];
    for (int i = 0, n = 0; i < 2; i++) {
        for (int j = 0; j < 3; j++) {
            for (int k = 0; k < 2; k++) {
                want[n++] = i * 12 + (2 - j) * 4 + (3 - 2 * k);
            }
        }
    }
    check_tensor(b, EV_FLOAT64, 3, SHAPE(2, 3, 2), want, 0);
    ev_tensor *c = slice_of(b, 0, INT64_MAX, INT64_MIN, -1);
    CHECK_EQ(ev_tensor_offset(c), 23);
    CHECK_EQ(ev_tensor_strides(c)[0], -12);
    double want2[12];
    for (int i = 0; i < 12; i++) {
        want2[i] = want[(i + 6) % 12];
    }
    check_tensor(c, EV_FLOAT64, 3, SHAPE(2, 3, 2), want2, 0);
    /* Reversing twice is the identity; one element reversed is contiguous. */
    ev_tensor *d = slice_of(c, 0, INT64_MAX, INT64_MIN, -1);
    CHECK_EQ(ev_tensor_strides(d)[0], 12);
    check_tensor(d, EV_FLOAT64, 3, SHAPE(2, 3, 2), want, 0);
    ev_tensor *one = slice_of(x, 2, 2, 1, -1);
    ev_tensor *one2 = slice_of(one, 1, 1, 0, -1);
    ev_tensor *one3 = slice_of(one2, 0, 1, 0, -1);
    CHECK(ev_tensor_is_contiguous(one3));
    check_tensor(one3, EV_FLOAT64, 3, SHAPE(1, 1, 1), VALS(18), 0);
    ev_tensor *ts[] = {x, a, b, c, d, one, one2, one3};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static void test_negative_views(void)
{
    /* arange(12)[::-1] viewed as [3, 4]: a view with strides [-4, -1]. */
    ev_tensor *a;
    CHECK_OK(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(12), ev_scalar_int(1), EV_FLOAT64,
                       &a));
    ev_tensor *r = slice_of(a, 0, INT64_MAX, INT64_MIN, -1), *v, *w;
    CHECK_OK(ev_view(r, 2, SHAPE(3, 4), &v));
    CHECK(ev_tensor_same_storage(v, a));
    CHECK_EQ(ev_tensor_strides(v)[0], -4);
    CHECK_EQ(ev_tensor_strides(v)[1], -1);
    double want[12];
    for (int i = 0; i < 12; i++) {
        want[i] = 11 - i;
    }
    check_tensor(v, EV_FLOAT64, 2, SHAPE(3, 4), want, 0);
    ev_tensor_unref(v);
    /* Rows reversed, columns not: no flat view, reshape copies; splitting
     * the inner dimension is still a view. */
    ev_tensor *m;
    CHECK_OK(ev_view(a, 2, SHAPE(3, 4), &m));
    ev_tensor *rr = slice_of(m, 0, INT64_MAX, INT64_MIN, -1);
    CHECK_EQ(ev_view(rr, 1, SHAPE(12), &v), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "use reshape");
    CHECK_OK(ev_reshape(&EX, rr, 1, SHAPE(12), &v));
    CHECK(!ev_tensor_same_storage(v, a));
    for (int i = 0; i < 12; i++) {
        want[i] = (2 - i / 4) * 4 + i % 4;
    }
    check_tensor(v, EV_FLOAT64, 1, SHAPE(12), want, 0);
    ev_tensor_unref(v);
    CHECK_OK(ev_view(rr, 3, SHAPE(3, 2, 2), &v));
    CHECK(ev_tensor_same_storage(v, a));
    CHECK_EQ(ev_tensor_strides(v)[0], -4);
    check_tensor(v, EV_FLOAT64, 3, SHAPE(3, 2, 2), want, 0);
    ev_tensor_unref(v);
    /* Both reversed: flat again, with stride -1. */
    ev_tensor *rc = slice_of(rr, 1, INT64_MAX, INT64_MIN, -1);
    CHECK_OK(ev_view(rc, 1, SHAPE(12), &v));
    CHECK_EQ(ev_tensor_strides(v)[0], -1);
    CHECK_EQ(ev_tensor_offset(v), 11);
    ev_tensor_unref(v);
    /* transpose, permute, unsqueeze, squeeze keep the negative strides. */
    CHECK_OK(ev_transpose(rr, 0, 1, &v)); /* [4, 3] */
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
            want[i * 3 + j] = (2 - j) * 4 + i;
        }
    }
    check_tensor(v, EV_FLOAT64, 2, SHAPE(4, 3), want, 0);
    CHECK_OK(ev_unsqueeze(v, 1, &w));
    check_tensor(w, EV_FLOAT64, 3, SHAPE(4, 1, 3), want, 0);
    ev_tensor *sq;
    CHECK_OK(ev_squeeze_all(w, &sq));
    check_tensor(sq, EV_FLOAT64, 2, SHAPE(4, 3), want, 0);
    ev_tensor *c;
    CHECK_OK(ev_contiguous(&EX, w, &c));
    CHECK(ev_tensor_is_contiguous(c) && !ev_tensor_same_storage(c, a));
    check_tensor(c, EV_FLOAT64, 3, SHAPE(4, 1, 3), want, 0);
    ev_tensor_unref(c);
    ev_tensor_unref(sq);
    ev_tensor_unref(w);
    ev_tensor_unref(v);
    /* expand of a reversed row. */
    ev_tensor *row = slice_of(a, 0, 2, INT64_MIN, -1); /* [2, 1, 0] */
    CHECK_OK(ev_expand(row, 2, SHAPE(2, -1), &v));
    CHECK_EQ(ev_tensor_strides(v)[0], 0);
    CHECK_EQ(ev_tensor_strides(v)[1], -1);
    check_tensor(v, EV_FLOAT64, 2, SHAPE(2, 3), VALS(2, 1, 0, 2, 1, 0), 0);
    ev_tensor_unref(v);
    ev_tensor *ts[] = {a, r, m, rr, rc, row};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static ev_tensor *arange10(void)
{
    ev_tensor *a;
    CHECK_OK(ev_arange(&EX, ev_scalar_int(0), ev_scalar_int(10), ev_scalar_int(1), EV_FLOAT64,
                       &a));
    return a;
}

static void test_negative_writes(void)
{
    /* fill_ through x[::-2] writes the odd elements. */
    ev_tensor *a = arange10(), *s = slice_of(a, 0, INT64_MAX, INT64_MIN, -2);
    CHECK_OK(ev_fill_(&EX, s, ev_scalar_float(-1)));
    check_tensor(a, EV_FLOAT64, 1, SHAPE(10), VALS(0, -1, 2, -1, 4, -1, 6, -1, 8, -1), 0);
    ev_tensor_unref(s);
    ev_tensor_unref(a);
    /* x[::-1] = x reads all of x first: x ends reversed. */
    a = arange10();
    s = slice_of(a, 0, INT64_MAX, INT64_MIN, -1);
    CHECK_OK(ev_copy_(&EX, s, a));
    check_tensor(a, EV_FLOAT64, 1, SHAPE(10), VALS(9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 0);
    ev_tensor_unref(s);
    ev_tensor_unref(a);
    /* x[::-1] += x and x += x[::-1]: every element becomes 9. */
    double nines[10] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    a = arange10();
    s = slice_of(a, 0, INT64_MAX, INT64_MIN, -1);
    CHECK_OK(ev_add_(&EX, s, a));
    check_tensor(a, EV_FLOAT64, 1, SHAPE(10), nines, 0);
    ev_tensor_unref(s);
    ev_tensor_unref(a);
    a = arange10();
    s = slice_of(a, 0, INT64_MAX, INT64_MIN, -1);
    CHECK_OK(ev_add_(&EX, a, s));
    check_tensor(a, EV_FLOAT64, 1, SHAPE(10), nines, 0);
    ev_tensor_unref(s);
    ev_tensor_unref(a);
    /* Partial overlap: x[8::-1] -= x[1:] gives x[k] = k - (9 - k) for
     * k < 9 (all of x[1:] read first); x[9] stays. */
    a = arange10();
    s = slice_of(a, 0, 8, INT64_MIN, -1);
    ev_tensor *t = slice_of(a, 0, 1, INT64_MAX, 1);
    CHECK_OK(ev_sub_(&EX, s, t));
    double want[10];
    for (int k = 0; k < 10; k++) {
        want[k] = k < 9 ? 2 * k - 9 : 9;
    }
    check_tensor(a, EV_FLOAT64, 1, SHAPE(10), want, 0);
    ev_tensor_unref(t);
    ev_tensor_unref(s);
    ev_tensor_unref(a);
    /* An in-place unary op on a reversed int view (its own layout). */
    ev_tensor *f = arange10(), *i;
    CHECK_OK(ev_cast(&EX, f, EV_INT64, &i));
    s = slice_of(i, 0, 7, 2, -2); /* [7, 5, 3] */
    CHECK_OK(ev_neg_(&EX, s));
    check_tensor(i, EV_INT64, 1, SHAPE(10), VALS(0, 1, 2, -3, 4, -5, 6, -7, 8, 9), 0);
    ev_tensor_unref(s);
    ev_tensor_unref(i);
    ev_tensor_unref(f);
}

/* fbase(24) as [2, 3, 4], reversed in every dimension. */
static ev_tensor *reversed3(ev_tensor **base)
{
    ev_tensor *b = fbase(24), *v;
    CHECK_OK(ev_view(b, 3, SHAPE(2, 3, 4), &v));
    ev_tensor *r = v;
    for (int d = 0; d < 3; d++) {
        ev_tensor *n = slice_of(r, d, INT64_MAX, INT64_MIN, -1);
        ev_tensor_unref(r);
        r = n;
    }
    *base = b;
    return r;
}

static void test_negative_ops(void)
{
    ev_tensor *base, *r = reversed3(&base), *o;
    double rv[24], want[24];
    layout_values(r, rv);
    /* Unary, cast, binary with a broadcast reversed row. */
    CHECK_OK(ev_neg(&EX, r, &o));
    for (int i = 0; i < 24; i++) {
        want[i] = -rv[i];
    }
    check_tensor(o, EV_FLOAT64, 3, SHAPE(2, 3, 4), want, 0);
    ev_tensor_unref(o);
    CHECK_OK(ev_cast(&EX, r, EV_FLOAT32, &o));
    check_tensor(o, EV_FLOAT32, 3, SHAPE(2, 3, 4), rv, 0);
    ev_tensor_unref(o);
    ev_tensor *a = arange10(), *row = slice_of(a, 0, 3, INT64_MIN, -1); /* [3, 2, 1, 0] */
    CHECK_OK(ev_mul(&EX, r, row, &o));
    for (int i = 0; i < 24; i++) {
        want[i] = rv[i] * (3 - i % 4);
    }
    check_tensor(o, EV_FLOAT64, 3, SHAPE(2, 3, 4), want, 0);
    ev_tensor_unref(o);
    /* Reductions along each dimension and over all. */
    const int64_t sh[3] = {2, 3, 4};
    for (int d = 0; d < 3; d++) {
        int64_t osh[2];
        for (int k = 0, j = 0; k < 3; k++) {
            if (k != d) {
                osh[j++] = sh[k];
            }
        }
        double sum[12] = {0}, amax[12] = {0};
        double best[12];
        for (int i = 0; i < 12; i++) {
            best[i] = -1e300;
        }
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 3; j++) {
                for (int k = 0; k < 4; k++) {
                    int idx[3] = {i, j, k};
                    int oi = d == 0 ? j * 4 + k : d == 1 ? i * 4 + k : i * 3 + j;
                    double x = rv[(i * 3 + j) * 4 + k];
                    sum[oi] += x;
                    if (x > best[oi]) {
                        best[oi] = x;
                        amax[oi] = idx[d];
                    }
                }
            }
        }
        CHECK_OK(ev_sum(&EX, r, 1, &d, 0, &o));
        check_tensor(o, EV_FLOAT64, 2, osh, sum, 1e-12);
        ev_tensor_unref(o);
        CHECK_OK(ev_max(&EX, r, 1, &d, 0, &o));
        check_tensor(o, EV_FLOAT64, 2, osh, best, 0);
        ev_tensor_unref(o);
        CHECK_OK(ev_argmax(&EX, r, &d, 0, &o));
        check_tensor(o, EV_INT64, 2, osh, amax, 0);
        ev_tensor_unref(o);
    }
    double total = 0;
    for (int i = 0; i < 24; i++) {
        total += rv[i];
    }
    CHECK_OK(ev_sum(&EX, r, 0, NULL, 0, &o));
    check_tensor(o, EV_FLOAT64, 0, NULL, &total, 1e-12);
    ev_tensor_unref(o);
    /* softmax along the reversed last dimension. */
    CHECK_OK(ev_softmax(&EX, r, -1, &o));
    for (int l = 0; l < 6; l++) {
        double m = -1e300, s = 0;
        for (int k = 0; k < 4; k++) {
            m = rv[l * 4 + k] > m ? rv[l * 4 + k] : m;
        }
        for (int k = 0; k < 4; k++) {
            s += exp(rv[l * 4 + k] - m);
        }
        for (int k = 0; k < 4; k++) {
            want[l * 4 + k] = exp(rv[l * 4 + k] - m) / s;
        }
    }
    check_tensor(o, EV_FLOAT64, 3, SHAPE(2, 3, 4), want, 1e-12);
    ev_tensor_unref(o);
    /* index_select and cat read through the negative strides. */
    ev_tensor *ix = tensor_from(EV_INT64, 1, SHAPE(2), VALS(2, 0));
    CHECK_OK(ev_index_select(&EX, r, 1, ix, &o));
    for (int i = 0, n = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            for (int k = 0; k < 4; k++) {
                want[n++] = rv[(i * 3 + (j ? 0 : 2)) * 4 + k];
            }
        }
    }
    check_tensor(o, EV_FLOAT64, 3, SHAPE(2, 2, 4), want, 0);
    ev_tensor_unref(o);
    ev_tensor *pair[2] = {r, r};
    CHECK_OK(ev_cat(&EX, pair, 2, 0, &o));
    double cat[48];
    memcpy(cat, rv, sizeof rv);
    memcpy(cat + 24, rv, sizeof rv);
    check_tensor(o, EV_FLOAT64, 3, SHAPE(4, 3, 4), cat, 0);
    ev_tensor_unref(o);
    /* where(r > 5, r, -r), the condition reversed too and -r another
     * reversed view (negated in place, through its negative strides). */
    ev_tensor *five = tensor_from(EV_FLOAT64, 0, NULL, VALS(5)), *cond, *base2;
    ev_tensor *nr = reversed3(&base2);
    CHECK_OK(ev_neg_(&EX, nr));
    CHECK_OK(ev_gt(&EX, r, five, &cond));
    ev_tensor *rcond = cond;
    for (int d = 0; d < 3; d++) {
        ev_tensor *n2 = slice_of(rcond, d, INT64_MAX, INT64_MIN, -1);
        if (rcond != cond) {
            ev_tensor_unref(rcond);
        }
        rcond = n2;
    }
    /* rcond is cond reversed: pick with r reversed back, i.e. the base. */
    ev_tensor *bv;
    CHECK_OK(ev_view(base, 3, SHAPE(2, 3, 4), &bv));
    CHECK_OK(ev_where(&EX, rcond, bv, nr, &o));
    double bvv[24];
    layout_values(bv, bvv);
    for (int i = 0; i < 24; i++) {
        want[i] = rv[23 - i] > 5 ? bvv[i] : -rv[i];
    }
    check_tensor(o, EV_FLOAT64, 3, SHAPE(2, 3, 4), want, 0);
    ev_tensor *ts[] = {o, bv, rcond, cond, nr, base2, five, ix, row, a, r, base};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

/* matmul of reversed operands: float64 (BLAS, when built with it, takes a
 * contiguous copy) and int64 (our kernel walks the negative strides). */
static void check_matmul_reversed(ev_dtype dt)
{
    ev_tensor *fa = fbase(12), *fb = fbase(8), *ta, *tb, *m, *n;
    CHECK_OK(ev_cast(&EX, fa, dt, &ta));
    CHECK_OK(ev_cast(&EX, fb, dt, &tb));
    CHECK_OK(ev_view(ta, 2, SHAPE(3, 4), &m));
    CHECK_OK(ev_view(tb, 2, SHAPE(4, 2), &n));
    ev_tensor *ra = slice_of(m, 0, INT64_MAX, INT64_MIN, -1), *a = slice_of(ra, 1, INT64_MAX,
                                                                             INT64_MIN, -1);
    ev_tensor *b = slice_of(n, 0, INT64_MAX, INT64_MIN, -1), *o;
    /* Integer reference values: with int64, the float parts are cut. */
    double av[12], bv[8], want[6];
    layout_values(a, av);
    layout_values(b, bv);
    for (int i = 0; i < 12; i++) {
        av[i] = dt == EV_INT64 ? trunc(av[i]) : av[i];
    }
    for (int i = 0; i < 8; i++) {
        bv[i] = dt == EV_INT64 ? trunc(bv[i]) : bv[i];
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 2; j++) {
            want[i * 2 + j] = 0;
            for (int k = 0; k < 4; k++) {
                want[i * 2 + j] += av[i * 4 + k] * bv[k * 2 + j];
            }
        }
    }
    CHECK_OK(ev_matmul(&EX, a, b, &o));
    check_tensor(o, dt, 2, SHAPE(3, 2), want, 1e-12);
    ev_tensor_unref(o);
    /* A reversed vector times a reversed matrix: [4] @ [4, 2]. */
    ev_tensor *vec = slice_of(ta, 0, 3, INT64_MIN, -1); /* elements 3, 2, 1, 0 */
    double vv[4], want2[2] = {0, 0};
    layout_values(vec, vv);
    for (int j = 0; j < 2; j++) {
        for (int k = 0; k < 4; k++) {
            want2[j] += (dt == EV_INT64 ? trunc(vv[k]) : vv[k]) * bv[k * 2 + j];
        }
    }
    CHECK_OK(ev_matmul(&EX, vec, b, &o));
    check_tensor(o, dt, 1, SHAPE(2), want2, 1e-12);
    ev_tensor_unref(o);
    ev_tensor *ts[] = {vec, b, a, ra, n, m, tb, ta, fb, fa};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ev_tensor_unref(ts[i]);
    }
}

static void test_negative_matmul(void)
{
    check_matmul_reversed(EV_FLOAT64);
    check_matmul_reversed(EV_FLOAT32);
    check_matmul_reversed(EV_INT64);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_view_reshape);
    RUN_TEST(test_transpose_permute);
    RUN_TEST(test_expand);
    RUN_TEST(test_slice);
    RUN_TEST(test_write_through_view);
    RUN_TEST(test_as_strided);
    RUN_TEST(test_squeeze_unsqueeze);
    RUN_TEST(test_zero_d_and_empty);
    RUN_TEST(test_contiguous);
    RUN_TEST(test_negative_slice);
    RUN_TEST(test_negative_views);
    RUN_TEST(test_negative_writes);
    RUN_TEST(test_negative_ops);
    RUN_TEST(test_negative_matmul);
    test_teardown();
    return 0;
}
