/* where, index_select, gather, take and scatter_add(_) on tensors large enough for
 * their fast paths (whole-row copies, blocked index loads, the split over
 * the intra-op pool), against references computed here from the operands
 * read back in C order: every element size, int64/int32/int16 and strided
 * indices, strided, transposed and sliced inputs, and an index out of range
 * among many (the first in C order is the one reported). */
#include <string.h>

#include "tensor_test.h"

static uint64_t rng_state = 12345;

static int64_t rnd(int64_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int64_t)((rng_state >> 33) % (uint64_t)n);
}

static int64_t numel_of(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        n *= shape[d];
    }
    return n;
}

/* A tensor of dtype whose element e is e * 7 % 101 (exact in every dtype). */
static ev_tensor *pattern(ev_dtype dt, int nd, const int64_t *shape)
{
    int64_t n = numel_of(nd, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) {
        v[e] = (double)(e * 7 % 101);
    }
    ev_tensor *t = tensor_from(dt, nd, shape, v);
    free(v);
    return t;
}

/* An index tensor of dtype with values drawn from [lo, hi). */
static ev_tensor *rand_index(ev_dtype dt, int nd, const int64_t *shape, int64_t lo, int64_t hi)
{
    int64_t n = numel_of(nd, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) {
        v[e] = (double)(lo + rnd(hi - lo));
    }
    ev_tensor *t = tensor_from(dt, nd, shape, v);
    free(v);
    return t;
}

/* t's values in C order (owned by the caller). */
static double *values(ev_tensor *t)
{
    double *v = malloc(sizeof(double) * (size_t)(ev_tensor_numel(t) ? ev_tensor_numel(t) : 1));
    read_f64(t, v);
    return v;
}

/* The flat C-order position in shape of multi-index idx with idx[dim] = at. */
static int64_t flat_with(int nd, const int64_t *shape, const int64_t *idx, int dim, int64_t at)
{
    int64_t f = 0;
    for (int d = 0; d < nd; d++) {
        f = f * shape[d] + (d == dim ? at : idx[d]);
    }
    return f;
}

static void unravel(int64_t e, int nd, const int64_t *shape, int64_t *idx)
{
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = e % shape[d];
        e /= shape[d];
    }
}

static void check_index_select(ev_tensor *x, int dim, ev_tensor *index)
{
    ev_tensor *r;
    CHECK_OK(ev_index_select(&EX, x, dim, index, &r));
    int nd = ev_tensor_ndim(x);
    const int64_t *xs = ev_tensor_shape(x);
    int64_t oshape[EV_MAX_DIMS];
    memcpy(oshape, xs, sizeof(int64_t) * (size_t)nd);
    oshape[dim] = ev_tensor_numel(index);
    double *xv = values(x), *iv = values(index);
    int64_t n = numel_of(nd, oshape);
    double *want = malloc(sizeof(double) * (size_t)n);
    for (int64_t e = 0; e < n; e++) {
        int64_t idx[EV_MAX_DIMS];
        unravel(e, nd, oshape, idx);
        want[e] = xv[flat_with(nd, xs, idx, dim, (int64_t)iv[idx[dim]])];
    }
    check_tensor(r, ev_tensor_dtype(x), nd, oshape, want, 0);
    free(want);
    free(xv);
    free(iv);
    ev_tensor_unref(r);
}

static void check_gather(ev_tensor *x, int dim, ev_tensor *index)
{
    ev_tensor *r;
    CHECK_OK(ev_gather(&EX, x, dim, index, &r));
    int nd = ev_tensor_ndim(x);
    const int64_t *xs = ev_tensor_shape(x), *is = ev_tensor_shape(index);
    double *xv = values(x), *iv = values(index);
    int64_t n = ev_tensor_numel(index);
    double *want = malloc(sizeof(double) * (size_t)n);
    for (int64_t e = 0; e < n; e++) {
        int64_t idx[EV_MAX_DIMS];
        unravel(e, nd, is, idx);
        want[e] = xv[flat_with(nd, xs, idx, dim, (int64_t)iv[e])];
    }
    check_tensor(r, ev_tensor_dtype(x), nd, is, want, 0);
    free(want);
    free(xv);
    free(iv);
    ev_tensor_unref(r);
}

static void check_take(ev_tensor *x, ev_tensor *index)
{
    ev_tensor *r;
    CHECK_OK(ev_take(&EX, x, index, &r));
    double *xv = values(x), *iv = values(index);
    int64_t n = ev_tensor_numel(index), nx = ev_tensor_numel(x);
    double *want = malloc(sizeof(double) * (size_t)n);
    for (int64_t e = 0; e < n; e++) {
        int64_t f = (int64_t)iv[e];
        want[e] = xv[f < 0 ? f + nx : f];
    }
    check_tensor(r, ev_tensor_dtype(x), ev_tensor_ndim(index), ev_tensor_shape(index), want, 0);
    free(want);
    free(xv);
    free(iv);
    ev_tensor_unref(r);
}

/* scatter_add (out of place) against additions made in C order: exact even
 * in floating point, as each element receives its terms in that order. */
static void check_scatter_add(ev_tensor *x, int dim, ev_tensor *index, ev_tensor *src)
{
    ev_tensor *r;
    CHECK_OK(ev_scatter_add(&EX, x, dim, index, src, &r));
    int nd = ev_tensor_ndim(x);
    const int64_t *xs = ev_tensor_shape(x), *is = ev_tensor_shape(index);
    const int64_t *ss = ev_tensor_shape(src);
    double *want = values(x), *iv = values(index), *sv = values(src);
    int is_float = ev_dtype_is_float(ev_tensor_dtype(x));
    int64_t lo, hi;
    if (!is_float) {
        CHECK_OK(ev_dtype_int_range(ev_tensor_dtype(x), &lo, &hi));
    }
    for (int64_t e = 0; e < ev_tensor_numel(index); e++) {
        int64_t idx[EV_MAX_DIMS];
        unravel(e, nd, is, idx);
        int64_t to = flat_with(nd, xs, idx, dim, (int64_t)iv[e]);
        double s = sv[flat_with(nd, ss, idx, -1, 0)];
        if (ev_tensor_dtype(x) == EV_FLOAT32) {
            want[to] = (float)((float)want[to] + (float)s);
        } else if (is_float) {
            want[to] += s;
        } else {
            /* Integers wrap at their width. */
            int64_t w = (int64_t)want[to] + (int64_t)s, span = hi - lo + 1;
            want[to] = (double)(((w - lo) % span + span) % span + lo);
        }
    }
    check_tensor(r, ev_tensor_dtype(x), nd, xs, want, 0);
    free(want);
    free(iv);
    free(sv);
    ev_tensor_unref(r);
}

/* A sync on t fails with a message containing want. */
static void check_fails(ev_tensor *t, const char *want)
{
    int64_t n = ev_tensor_numel(t);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    CHECK_NE(ev_to_host(&EX, t, buf), 0);
    CHECK_STR_CONTAINS(ev_last_message(), want);
    free(buf);
}

/* A copy of index with element at (flat, C order) set to value. */
static ev_tensor *with_value(ev_tensor *index, int64_t at, double value)
{
    double *v = values(index);
    v[at] = value;
    ev_tensor *t = tensor_from(ev_tensor_dtype(index), ev_tensor_ndim(index),
                               ev_tensor_shape(index), v);
    free(v);
    return t;
}

static void test_index_select_large(void)
{
    const ev_dtype dts[] = {EV_FLOAT32, EV_FLOAT64, EV_INT16, EV_UINT8};
    for (int k = 0; k < 4; k++) {
        /* Rows of 300 elements: whole-row copies, split over the pool. */
        ev_tensor *x = pattern(dts[k], 2, SHAPE(2000, 300));
        ev_tensor *i64 = rand_index(EV_INT64, 1, SHAPE(3000), 0, 2000);
        ev_tensor *i32 = rand_index(EV_INT32, 1, SHAPE(700), 0, 2000);
        check_index_select(x, 0, i64);
        check_index_select(x, 0, i32);
        /* Single elements (dim last), and a middle dimension. */
        ev_tensor *c = rand_index(EV_INT64, 1, SHAPE(500), 0, 300);
        check_index_select(x, 1, c);
        ev_tensor *x3 = pattern(dts[k], 3, SHAPE(40, 50, 30));
        ev_tensor *m = rand_index(EV_INT16, 1, SHAPE(77), 0, 50);
        check_index_select(x3, 1, m);
        ev_tensor *ts[] = {x, i64, i32, c, x3, m};
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
            ev_tensor_unref(ts[j]);
        }
    }
    ev_tensor *x = pattern(EV_FLOAT32, 2, SHAPE(2000, 300)), *xt, *xs, *big, *is;
    /* Every other row (outer strides not C order), a transposed x (rows
     * not contiguous: element by element) and every other index. */
    CHECK_OK(ev_slice(x, 0, 0, 2000, 2, &xs));
    CHECK_OK(ev_transpose(x, 0, 1, &xt));
    big = rand_index(EV_INT64, 1, SHAPE(1200), 0, 300);
    CHECK_OK(ev_slice(big, 0, 1, 1200, 2, &is));
    check_index_select(xs, 0, is);
    check_index_select(xs, 1, is);
    check_index_select(xt, 0, is);
    check_index_select(xt, 1, is);
    ev_tensor *xr, *ir;
    CHECK_OK(ev_slice(x, 0, INT64_MAX, INT64_MIN, -1, &xr));
    CHECK_OK(ev_slice(is, 0, INT64_MAX, INT64_MIN, -1, &ir));
    check_index_select(xr, 0, ir);
    check_index_select(xr, 1, ir);
    ev_tensor_unref(xr);
    ev_tensor_unref(ir);
    /* The first index out of range is named, whichever chunk meets it. */
    ev_tensor *bad1 = with_value(big, 1100, 300), *bad2, *r;
    bad2 = with_value(bad1, 900, -1);
    CHECK_OK(ev_index_select(&EX, x, 0, bad2, &r));
    check_fails(r, "index_select: index -1 is out of bounds for dimension 0 with size 2000");
    ev_tensor_unref(r);
    CHECK_OK(ev_index_select(&EX, x, 1, bad1, &r));
    check_fails(r, "index_select: index 300 is out of bounds for dimension 1 with size 300");
    ev_tensor_unref(r);
    ev_tensor *ts[] = {x, xt, xs, big, is, bad1, bad2};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

static void test_gather_take_large(void)
{
    const ev_dtype dts[] = {EV_FLOAT32, EV_INT64, EV_INT16, EV_BOOL};
    for (int k = 0; k < 4; k++) {
        ev_tensor *x = pattern(dts[k], 2, SHAPE(400, 300));
        ev_tensor *g1 = rand_index(EV_INT64, 2, SHAPE(400, 250), 0, 300);
        ev_tensor *g0 = rand_index(EV_INT32, 2, SHAPE(350, 300), 0, 400);
        check_gather(x, 1, g1);
        check_gather(x, 0, g0);
        ev_tensor *t = rand_index(EV_INT64, 2, SHAPE(300, 500), -120000, 120000);
        check_take(x, t);
        ev_tensor *ts[] = {x, g1, g0, t};
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
            ev_tensor_unref(ts[j]);
        }
    }
    /* A transposed x and index, a 3-d gather along the middle. */
    ev_tensor *x = pattern(EV_FLOAT32, 2, SHAPE(400, 300)), *xt, *g, *gt;
    CHECK_OK(ev_transpose(x, 0, 1, &xt));
    g = rand_index(EV_INT64, 2, SHAPE(400, 300), 0, 300);
    CHECK_OK(ev_transpose(g, 0, 1, &gt));
    check_gather(xt, 0, gt);
    check_gather(x, 1, g);
    check_take(xt, g);
    /* Negative steps: x reversed along rows, the index reversed too. */
    ev_tensor *xr, *gr;
    CHECK_OK(ev_slice(x, 1, INT64_MAX, INT64_MIN, -1, &xr));
    CHECK_OK(ev_slice(g, 0, INT64_MAX, INT64_MIN, -1, &gr));
    check_take(xr, g);
    check_take(xr, gr);
    check_gather(xr, 1, gr);
    check_gather(x, 1, gr);
    ev_tensor_unref(xr);
    ev_tensor_unref(gr);
    ev_tensor *x3 = pattern(EV_FLOAT64, 3, SHAPE(30, 40, 100));
    ev_tensor *g3 = rand_index(EV_INT64, 3, SHAPE(30, 70, 100), 0, 40);
    check_gather(x3, 1, g3);
    /* Out of range, twice: the first in C order is reported. */
    ev_tensor *b1 = with_value(g, 100000, 300), *b2, *r;
    b2 = with_value(b1, 5000, -2);
    CHECK_OK(ev_gather(&EX, x, 1, b2, &r));
    check_fails(r, "gather: index -2 is out of bounds for dimension 1 with size 300");
    ev_tensor_unref(r);
    CHECK_OK(ev_gather(&EX, x, 1, b1, &r));
    check_fails(r, "gather: index 300 is out of bounds for dimension 1 with size 300");
    ev_tensor_unref(r);
    ev_tensor *t1 = with_value(g, 90000, 120000), *t2;
    t2 = with_value(t1, 7, -120001);
    CHECK_OK(ev_take(&EX, x, t2, &r));
    check_fails(r, "take: index -120001 is out of bounds for dimension 0 with size 120000");
    ev_tensor_unref(r);
    CHECK_OK(ev_take(&EX, xt, t1, &r));
    check_fails(r, "take: index 120000 is out of bounds for dimension 0 with size 120000");
    ev_tensor_unref(r);
    ev_tensor *ts[] = {x, xt, g, gt, x3, g3, b1, b2, t1, t2};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

static void test_scatter_add_large(void)
{
    const ev_dtype dts[] = {EV_FLOAT32, EV_FLOAT64, EV_INT32, EV_INT8};
    for (int k = 0; k < 4; k++) {
        /* Many duplicates along dim, split along the other dimension. */
        ev_tensor *x = pattern(dts[k], 2, SHAPE(300, 200));
        ev_tensor *src = pattern(dts[k], 2, SHAPE(300, 600));
        ev_tensor *i1 = rand_index(EV_INT64, 2, SHAPE(300, 600), 0, 200);
        check_scatter_add(x, 1, i1, src);
        ev_tensor *x0 = pattern(dts[k], 2, SHAPE(50, 400));
        ev_tensor *s0 = pattern(dts[k], 2, SHAPE(300, 400));
        ev_tensor *i0 = rand_index(EV_INT32, 2, SHAPE(300, 400), 0, 50);
        check_scatter_add(x0, 0, i0, s0);
        /* A 1-d index runs whole (one dimension: dim). */
        ev_tensor *xv = pattern(dts[k], 1, SHAPE(100));
        ev_tensor *sv = pattern(dts[k], 1, SHAPE(90000));
        ev_tensor *iv = rand_index(EV_INT64, 1, SHAPE(90000), 0, 100);
        check_scatter_add(xv, 0, iv, sv);
        ev_tensor *ts[] = {x, src, i1, x0, s0, i0, xv, sv, iv};
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
            ev_tensor_unref(ts[j]);
        }
    }
    /* In place, with a transposed index and an index out of range. */
    ev_tensor *x = pattern(EV_FLOAT64, 2, SHAPE(300, 200)), *src, *i, *it, *r;
    src = pattern(EV_FLOAT64, 2, SHAPE(400, 300));
    i = rand_index(EV_INT64, 2, SHAPE(200, 300), 0, 200);
    CHECK_OK(ev_transpose(i, 0, 1, &it)); /* [300, 200] */
    check_scatter_add(x, 1, it, src);
    CHECK_OK(ev_scatter_add(&EX, x, 1, it, src, &r));
    CHECK_OK(ev_scatter_add_(&EX, x, 1, it, src));
    double *a = values(r), *b = values(x);
    CHECK(memcmp(a, b, sizeof(double) * 300 * 200) == 0);
    free(a);
    free(b);
    ev_tensor_unref(r);
    ev_tensor *bad = with_value(it, 50000, 200);
    CHECK_OK(ev_scatter_add_(&EX, x, 1, bad, src));
    check_fails(x, "scatter_add_: index 200 is out of bounds for dimension 1 with size 200");
    ev_tensor *ts[] = {x, src, i, it, bad};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

/* where with a random condition over every loop dtype (bool, int32 for the
 * narrow integers, int64, float32, float64), NaN among the values. */
static void test_where_large(void)
{
    int64_t n = 300000;
    double *cv = malloc(sizeof(double) * (size_t)n), *xv = malloc(sizeof(double) * (size_t)n);
    double *yv = malloc(sizeof(double) * (size_t)n), *want = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        cv[i] = (double)rnd(2);
        xv[i] = i % 97 == 0 ? NAN : (double)(i % 100);
        yv[i] = (double)(i % 7) - 3.0;
    }
    ev_tensor *c = tensor_from(EV_BOOL, 2, SHAPE(1000, 300), cv);
    const ev_dtype dts[] = {EV_FLOAT32, EV_FLOAT64, EV_INT64, EV_INT16, EV_UINT8, EV_BOOL};
    for (int k = 0; k < 6; k++) {
        ev_dtype dt = dts[k];
        int is_float = ev_dtype_is_float(dt);
        for (int64_t i = 0; i < n; i++) {
            double xi = is_float || !isnan(xv[i]) ? xv[i] : 1.0;
            double yi = dt == EV_UINT8 ? yv[i] + 3.0 : yv[i];
            if (dt == EV_BOOL) {
                xi = xi != 0;
                yi = yi != 0;
            }
            xv[i] = xi;
            yv[i] = yi;
            want[i] = cv[i] != 0 ? xi : yi;
        }
        ev_tensor *x = tensor_from(dt, 2, SHAPE(1000, 300), xv);
        ev_tensor *y = tensor_from(dt, 2, SHAPE(1000, 300), yv), *r;
        CHECK_OK(ev_where(&EX, c, x, y, &r));
        check_tensor(r, dt, 2, SHAPE(1000, 300), want, 0);
        ev_tensor_unref(r);
        ev_tensor_unref(x);
        ev_tensor_unref(y);
        for (int64_t i = 0; i < n; i++) {
            xv[i] = i % 97 == 0 ? NAN : (double)(i % 100);
            yv[i] = (double)(i % 7) - 3.0;
        }
    }
    ev_tensor_unref(c);
    free(cv);
    free(xv);
    free(yv);
    free(want);
}

/* Indexing into an empty x (no data at all) fails without reading it. */
static void test_empty_source(void)
{
    ev_tensor *e, *x2, *r;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 1, SHAPE(0), &e));
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(2, 0), &x2));
    ev_tensor *i = rand_index(EV_INT64, 1, SHAPE(40), -3, 3);
    ev_tensor *g = rand_index(EV_INT64, 2, SHAPE(2, 40), 0, 1);
    CHECK_OK(ev_take(&EX, e, i, &r));
    check_fails(r, "out of bounds for dimension 0 with size 0");
    ev_tensor_unref(r);
    CHECK_OK(ev_gather(&EX, x2, 1, g, &r));
    check_fails(r, "gather: index 0 is out of bounds for dimension 1 with size 0");
    ev_tensor_unref(r);
    CHECK_OK(ev_index_select(&EX, x2, 1, i, &r));
    check_fails(r, "out of bounds for dimension 1 with size 0");
    ev_tensor_unref(r);
    ev_tensor *src = pattern(EV_FLOAT64, 1, SHAPE(40));
    CHECK_OK(ev_scatter_add(&EX, e, 0, i, src, &r));
    check_fails(r, "scatter_add: index");
    ev_tensor_unref(r);
    ev_tensor_unref(src);
    ev_tensor *ts[] = {e, x2, i, g};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

int main(void)
{
    test_setup();
    RUN_TEST(test_where_large);
    RUN_TEST(test_index_select_large);
    RUN_TEST(test_gather_take_large);
    RUN_TEST(test_scatter_add_large);
    RUN_TEST(test_empty_source);
    test_teardown();
    return 0;
}
