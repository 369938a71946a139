/* Tests of where, cat, stack, index_select, gather, take and scatter_add(_)
 * against references computed here, with broadcasting, promotion,
 * non-contiguous inputs, empty tensors, errors at the call, and indices out
 * of range failing the instruction with a message naming index, dimension
 * and size (DESIGN rule 6) while the runtime stays usable. */
#include "tensor_test.h"

static ev_tensor *idx_tensor(ev_dtype dt, int nd, const int64_t *shape, const double *v)
{
    return tensor_from(dt, nd, shape, v);
}

/* A sync on t fails with the kernel's message containing want. */
static void check_fails(ev_tensor *t, const char *want)
{
    int64_t n = ev_tensor_numel(t);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    int rc = ev_to_host(&EX, t, buf);
    CHECK_NE(rc, 0);
    CHECK_STR_CONTAINS(ev_last_message(), want);
    free(buf);
}

static void test_where(void)
{
    ev_tensor *c = tensor_from(EV_BOOL, 2, SHAPE(2, 1), VALS(1, 0));
    ev_tensor *x = tensor_from(EV_INT32, 1, SHAPE(3), VALS(1, 2, 3));
    ev_tensor *y = tensor_from(EV_FLOAT32, 0, NULL, VALS(-0.5));
    ev_tensor *r;
    CHECK_OK(ev_where(&EX, c, x, y, &r));
    check_tensor(r, EV_FLOAT64, 2, SHAPE(2, 3), VALS(1, 2, 3, -0.5, -0.5, -0.5), 0);
    ev_tensor_unref(r);
    /* A transposed condition. */
    ev_tensor *c2 = tensor_from(EV_BOOL, 2, SHAPE(3, 2), VALS(1, 0, 0, 1, 1, 1)), *ct;
    CHECK_OK(ev_transpose(c2, 0, 1, &ct)); /* [[1,0,1],[0,1,1]] */
    CHECK_OK(ev_where(&EX, ct, x, x, &r));
    check_tensor(r, EV_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 1, 2, 3), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_where(&EX, ct, y, x, &r));
    check_tensor(r, EV_FLOAT64, 2, SHAPE(2, 3), VALS(-0.5, 2, -0.5, 1, -0.5, -0.5), 0);
    ev_tensor_unref(r);
    CHECK_EQ(ev_where(&EX, x, x, y, &r), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "where: cond must be bool, not int32");
    ev_tensor *z = tensor_from(EV_INT32, 1, SHAPE(4), VALS(1, 2, 3, 4));
    CHECK_EQ(ev_where(&EX, c, x, z, &r), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "cannot be broadcast");
    ev_tensor_unref(z);
    ev_tensor_unref(ct);
    ev_tensor_unref(c2);
    ev_tensor_unref(c);
    ev_tensor_unref(x);
    ev_tensor_unref(y);
}

static void test_cat_stack(void)
{
    ev_tensor *a = tensor_from(EV_INT32, 2, SHAPE(2, 2), VALS(1, 2, 3, 4));
    ev_tensor *b = tensor_from(EV_FLOAT32, 2, SHAPE(1, 2), VALS(5.5, 6));
    ev_tensor *e, *at, *r;
    CHECK_OK(ev_zeros(&EX, EV_INT64, 2, SHAPE(0, 2), &e));
    CHECK_OK(ev_transpose(a, 0, 1, &at)); /* [[1,3],[2,4]] */
    ev_tensor *list[4] = {a, e, b, at};
    CHECK_OK(ev_cat(&EX, list, 4, 0, &r));
    check_tensor(r, EV_FLOAT64, 2, SHAPE(5, 2), VALS(1, 2, 3, 4, 5.5, 6, 1, 3, 2, 4), 0);
    ev_tensor_unref(r);
    ev_tensor *l2[2] = {a, at};
    CHECK_OK(ev_cat(&EX, l2, 2, -1, &r));
    check_tensor(r, EV_INT32, 2, SHAPE(2, 4), VALS(1, 2, 1, 3, 3, 4, 2, 4), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_stack(&EX, l2, 2, 0, &r));
    check_tensor(r, EV_INT32, 3, SHAPE(2, 2, 2), VALS(1, 2, 3, 4, 1, 3, 2, 4), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_stack(&EX, l2, 2, -1, &r));
    check_tensor(r, EV_INT32, 3, SHAPE(2, 2, 2), VALS(1, 1, 2, 3, 3, 2, 4, 4), 0);
    ev_tensor_unref(r);
    /* Errors. */
    ev_tensor *l3[2] = {a, b};
    CHECK_EQ(ev_cat(&EX, l3, 2, 1, &r), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "tensor 1 of shape [1, 2] does not match");
    CHECK_EQ(ev_stack(&EX, l3, 2, 0, &r), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "stack needs equal shapes");
    CHECK_EQ(ev_cat(&EX, l3, 0, 0, &r), EV_EINVAL);
    CHECK_EQ(ev_cat(&EX, l2, 2, 2, &r), EV_EINDEX);
    ev_tensor *s = tensor_from(EV_FLOAT32, 0, NULL, VALS(1));
    ev_tensor *l4[2] = {s, s};
    CHECK_EQ(ev_cat(&EX, l4, 2, 0, &r), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "zero-dimensional");
    CHECK_OK(ev_stack(&EX, l4, 2, 0, &r)); /* stacking 0-d tensors is fine */
    check_tensor(r, EV_FLOAT32, 1, SHAPE(2), VALS(1, 1), 0);
    ev_tensor_unref(r);
    ev_tensor_unref(s);
    ev_tensor_unref(at);
    ev_tensor_unref(e);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

static void test_index_select(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT64, 2, SHAPE(3, 4), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                                  10, 11));
    ev_tensor *i1 = idx_tensor(EV_INT32, 1, SHAPE(3), VALS(3, 0, 0));
    ev_tensor *r;
    CHECK_OK(ev_index_select(&EX, x, 1, i1, &r));
    check_tensor(r, EV_FLOAT64, 2, SHAPE(3, 3), VALS(3, 0, 0, 7, 4, 4, 11, 8, 8), 0);
    ev_tensor_unref(r);
    ev_tensor *i0 = idx_tensor(EV_INT64, 1, SHAPE(2), VALS(2, 1));
    ev_tensor *xt;
    CHECK_OK(ev_transpose(x, 0, 1, &xt)); /* 4 x 3 */
    CHECK_OK(ev_index_select(&EX, xt, -1, i0, &r));
    check_tensor(r, EV_FLOAT64, 2, SHAPE(4, 2), VALS(8, 4, 9, 5, 10, 6, 11, 7), 0);
    ev_tensor_unref(r);
    ev_tensor *ie;
    CHECK_OK(ev_zeros(&EX, EV_INT64, 1, SHAPE(0), &ie));
    CHECK_OK(ev_index_select(&EX, x, 1, ie, &r));
    CHECK_EQ(ev_tensor_shape(r)[1], 0);
    ev_tensor_unref(r);
    /* Out of range: the call succeeds, the instruction fails. */
    ev_tensor *bad = idx_tensor(EV_INT64, 1, SHAPE(2), VALS(1, 4));
    CHECK_OK(ev_index_select(&EX, x, 1, bad, &r));
    check_fails(r, "index_select: index 4 is out of bounds for dimension 1 with size 4");
    ev_tensor_unref(r);
    ev_tensor *neg = idx_tensor(EV_INT32, 1, SHAPE(1), VALS(-1));
    CHECK_OK(ev_index_select(&EX, x, 0, neg, &r));
    check_fails(r, "index -1 is out of bounds for dimension 0 with size 3");
    ev_tensor_unref(r);
    /* The runtime is still usable, and errors at the call. */
    CHECK_OK(ev_index_select(&EX, x, 0, i0, &r));
    check_tensor(r, EV_FLOAT64, 2, SHAPE(2, 4), VALS(8, 9, 10, 11, 4, 5, 6, 7), 0);
    ev_tensor_unref(r);
    CHECK_EQ(ev_index_select(&EX, x, 0, x, &r), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "index must have an integer dtype, not float64");
    ev_tensor *bidx = idx_tensor(EV_BOOL, 1, SHAPE(1), VALS(1));
    CHECK_EQ(ev_index_select(&EX, x, 0, bidx, &r), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "index must have an integer dtype, not bool");
    ev_tensor_unref(bidx);
    CHECK_EQ(ev_index_select(&EX, x, 2, i0, &r), EV_EINDEX);
    ev_tensor_unref(neg);
    ev_tensor_unref(bad);
    ev_tensor_unref(ie);
    ev_tensor_unref(xt);
    ev_tensor_unref(i0);
    ev_tensor_unref(i1);
    ev_tensor_unref(x);
}

static void test_gather_take(void)
{
    double xv[6] = {1, 2, 3, 4, 5, 6};
    ev_tensor *x = tensor_from(EV_INT64, 2, SHAPE(2, 3), xv);
    ev_tensor *idx = idx_tensor(EV_INT64, 2, SHAPE(2, 2), VALS(2, 0, 1, 1));
    ev_tensor *r;
    CHECK_OK(ev_gather(&EX, x, 1, idx, &r));
    /* Reference: out[i][j] = x[i][idx[i][j]]. */
    check_tensor(r, EV_INT64, 2, SHAPE(2, 2), VALS(3, 1, 5, 5), 0);
    ev_tensor_unref(r);
    ev_tensor *idx0 = idx_tensor(EV_INT32, 2, SHAPE(1, 3), VALS(1, 0, 1));
    CHECK_OK(ev_gather(&EX, x, 0, idx0, &r));
    check_tensor(r, EV_INT64, 2, SHAPE(1, 3), VALS(4, 2, 6), 0);
    ev_tensor_unref(r);
    ev_tensor *bad = idx_tensor(EV_INT64, 2, SHAPE(1, 1), VALS(3));
    CHECK_OK(ev_gather(&EX, x, 1, bad, &r));
    check_fails(r, "gather: index 3 is out of bounds for dimension 1 with size 3");
    ev_tensor_unref(r);
    ev_tensor *big = idx_tensor(EV_INT64, 2, SHAPE(3, 1), VALS(0, 0, 0));
    CHECK_EQ(ev_gather(&EX, x, 1, big, &r), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "larger than x");
    ev_tensor *one = idx_tensor(EV_INT64, 1, SHAPE(1), VALS(0));
    CHECK_EQ(ev_gather(&EX, x, 1, one, &r), EV_EINVAL);

    /* take: C order of the (transposed) view, negative indices wrap. */
    ev_tensor *xt;
    CHECK_OK(ev_transpose(x, 0, 1, &xt)); /* [[1,4],[2,5],[3,6]] */
    ev_tensor *ti = idx_tensor(EV_INT32, 2, SHAPE(2, 2), VALS(0, 1, -1, 3));
    CHECK_OK(ev_take(&EX, xt, ti, &r));
    check_tensor(r, EV_INT64, 2, SHAPE(2, 2), VALS(1, 4, 6, 5), 0);
    ev_tensor_unref(r);
    ev_tensor *tb = idx_tensor(EV_INT64, 1, SHAPE(2), VALS(0, -7));
    CHECK_OK(ev_take(&EX, xt, tb, &r));
    check_fails(r, "take: index -7 is out of bounds for dimension 0 with size 6");
    ev_tensor_unref(r);
    ev_tensor_unref(tb);
    ev_tensor_unref(ti);
    ev_tensor_unref(xt);
    ev_tensor_unref(one);
    ev_tensor_unref(big);
    ev_tensor_unref(bad);
    ev_tensor_unref(idx0);
    ev_tensor_unref(idx);
    ev_tensor_unref(x);
}

static void test_scatter_add(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT32, 2, SHAPE(3, 2), VALS(1, 1, 1, 1, 1, 1));
    ev_tensor *src = tensor_from(EV_FLOAT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
    ev_tensor *idx = idx_tensor(EV_INT64, 2, SHAPE(2, 2), VALS(0, 2, 0, 0));
    ev_tensor *r;
    CHECK_OK(ev_scatter_add(&EX, x, 0, idx, src, &r));
    /* Reference: out[idx[i][j]][j] += src[i][j] for i, j < 2; repeated
     * index 0 in column 0 accumulates 1 + 4. */
    double want[6] = {1, 1, 1, 1, 1, 1};
    const double iv[4] = {0, 2, 0, 0}, sv[6] = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            want[(int)iv[i * 2 + j] * 2 + j] += sv[i * 3 + j];
        }
    }
    check_tensor(r, EV_FLOAT32, 2, SHAPE(3, 2), want, 0);
    ev_tensor_unref(r);
    /* x itself is untouched by the out-of-place form. */
    check_tensor(x, EV_FLOAT32, 2, SHAPE(3, 2), VALS(1, 1, 1, 1, 1, 1), 0);
    CHECK_OK(ev_scatter_add_(&EX, x, 0, idx, src));
    check_tensor(x, EV_FLOAT32, 2, SHAPE(3, 2), want, 0);

    /* Integers, dim 1, a transposed (non-contiguous) target. */
    ev_tensor *xi = tensor_from(EV_INT32, 2, SHAPE(2, 2), VALS(10, 20, 30, 40)), *xit;
    CHECK_OK(ev_transpose(xi, 0, 1, &xit)); /* [[10,30],[20,40]] */
    ev_tensor *si = tensor_from(EV_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
    ev_tensor *ii = idx_tensor(EV_INT32, 2, SHAPE(2, 3), VALS(1, 1, 0, 0, 0, 0));
    CHECK_OK(ev_scatter_add(&EX, xit, 1, ii, si, &r));
    check_tensor(r, EV_INT32, 2, SHAPE(2, 2), VALS(13, 33, 35, 40), 0);
    ev_tensor_unref(r);

    /* Errors at the call. */
    CHECK_EQ(ev_scatter_add(&EX, x, 0, idx, si, &r), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "src dtype int32 must equal x dtype float32");
    ev_tensor *ibig = idx_tensor(EV_INT64, 2, SHAPE(3, 3), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0));
    CHECK_EQ(ev_scatter_add(&EX, x, 0, ibig, src, &r), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "is larger than src");
    /* Out of range in place: x is poisoned, the next sync on it says why. */
    ev_tensor *ibad = idx_tensor(EV_INT64, 2, SHAPE(1, 1), VALS(5));
    CHECK_OK(ev_scatter_add_(&EX, x, 0, ibad, src));
    check_fails(x, "scatter_add_: index 5 is out of bounds for dimension 0 with size 3");
    ev_tensor_unref(ibad);
    ev_tensor_unref(ibig);
    ev_tensor_unref(ii);
    ev_tensor_unref(si);
    ev_tensor_unref(xit);
    ev_tensor_unref(xi);
    ev_tensor_unref(idx);
    ev_tensor_unref(src);
    ev_tensor_unref(x);
}

/* uint8, int8 and int16 as data (selection copies 1- and 2-byte elements;
 * scatter_add wraps at the width) and as indices (every integer dtype). */
static void test_narrow_int(void)
{
    const ev_dtype dts[] = {EV_UINT8, EV_INT8, EV_INT16};
    for (int k = 0; k < 3; k++) {
        ev_dtype dt = dts[k];
        ev_tensor *x = tensor_from(dt, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
        ev_tensor *i = idx_tensor(dt, 1, SHAPE(3), VALS(2, 0, 2)), *r;
        CHECK_OK(ev_index_select(&EX, x, 1, i, &r));
        check_tensor(r, dt, 2, SHAPE(2, 3), VALS(3, 1, 3, 6, 4, 6), 0);
        ev_tensor_unref(r);
        CHECK_OK(ev_take(&EX, x, i, &r));
        check_tensor(r, dt, 1, SHAPE(3), VALS(3, 1, 3), 0);
        ev_tensor_unref(r);
        ev_tensor *gi = idx_tensor(dt, 2, SHAPE(2, 2), VALS(1, 0, 0, 1));
        CHECK_OK(ev_gather(&EX, x, 0, gi, &r));
        check_tensor(r, dt, 2, SHAPE(2, 2), VALS(4, 2, 1, 5), 0);
        ev_tensor_unref(r);
        /* 120 + 100 + 100 wraps for uint8 (64) and int8 (64), not int16. */
        ev_tensor *acc = tensor_from(dt, 1, SHAPE(2), VALS(120, 0));
        ev_tensor *src = tensor_from(dt, 1, SHAPE(3), VALS(100, 100, 7));
        ev_tensor *si = idx_tensor(EV_INT64, 1, SHAPE(3), VALS(0, 0, 1));
        CHECK_OK(ev_scatter_add_(&EX, acc, 0, si, src));
        check_tensor(acc, dt, 1, SHAPE(2), VALS(dt == EV_INT16 ? 320 : 64, 7), 0);
        ev_tensor *bad = idx_tensor(dt, 1, SHAPE(1), VALS(100));
        CHECK_OK(ev_index_select(&EX, x, 1, bad, &r));
        check_fails(r, "index_select: index 100 is out of bounds for dimension 1 with size 3");
        ev_tensor_unref(r);
        ev_tensor *ts[] = {x, i, gi, acc, src, si, bad};
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
            ev_tensor_unref(ts[j]);
        }
    }
    /* A negative int8 index is out of range except for take. */
    ev_tensor *x = tensor_from(EV_FLOAT32, 1, SHAPE(3), VALS(1, 2, 3));
    ev_tensor *neg = idx_tensor(EV_INT8, 1, SHAPE(1), VALS(-1)), *r;
    CHECK_OK(ev_take(&EX, x, neg, &r));
    check_tensor(r, EV_FLOAT32, 1, SHAPE(1), VALS(3), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_index_select(&EX, x, 0, neg, &r));
    check_fails(r, "index -1 is out of bounds for dimension 0 with size 3");
    ev_tensor_unref(r);
    /* cat and where promote as NumPy: uint8 with int8 gives int16. */
    ev_tensor *u = tensor_from(EV_UINT8, 1, SHAPE(2), VALS(255, 0));
    ev_tensor *s = tensor_from(EV_INT8, 1, SHAPE(1), VALS(-128));
    ev_tensor *parts[2] = {u, s};
    CHECK_OK(ev_cat(&EX, parts, 2, 0, &r));
    check_tensor(r, EV_INT16, 1, SHAPE(3), VALS(255, 0, -128), 0);
    ev_tensor_unref(r);
    ev_tensor *c = tensor_from(EV_BOOL, 1, SHAPE(2), VALS(1, 0));
    CHECK_OK(ev_where(&EX, c, u, s, &r));
    check_tensor(r, EV_INT16, 1, SHAPE(2), VALS(255, -128), 0);
    ev_tensor_unref(r);
    CHECK_OK(ev_where(&EX, c, u, u, &r));
    check_tensor(r, EV_UINT8, 1, SHAPE(2), VALS(255, 0), 0);
    ev_tensor_unref(r);
    ev_tensor *ts[] = {x, neg, u, s, c};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

int main(void)
{
    test_setup();
    RUN_TEST(test_where);
    RUN_TEST(test_cat_stack);
    RUN_TEST(test_index_select);
    RUN_TEST(test_gather_take);
    RUN_TEST(test_scatter_add);
    RUN_TEST(test_narrow_int);
    test_teardown();
    return 0;
}
