/* The buffered loop driver's tiled path (iter.c): elementwise ops whose
 * inputs are far apart along the output's rows (transposed, permuted) are
 * converted a tile at a time. Checked against host references for ragged
 * tile edges, inputs needing a conversion, broadcast inputs beside tiled
 * ones, a 3-d permutation (dimensions outside the tiles), an in-place op on
 * a transposed tensor (output rows strided), and where with a transposed
 * condition. All values are small integers, so every result is exact. */
#include <string.h>

#include "tensor_test.h"

static int64_t numel_of(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        n *= shape[d];
    }
    return n;
}

/* Element e is (e * mul) % 53 - 20. */
static ev_tensor *pattern(ev_dtype dt, int nd, const int64_t *shape, int64_t mul)
{
    int64_t n = numel_of(nd, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) {
        v[e] = (double)((e * mul) % 53 - 20);
    }
    ev_tensor *t = tensor_from(dt, nd, shape, v);
    free(v);
    return t;
}

static double *values(ev_tensor *t)
{
    double *v = malloc(sizeof(double) * (size_t)(ev_tensor_numel(t) ? ev_tensor_numel(t) : 1));
    read_f64(t, v);
    return v;
}

static ev_tensor *transposed(ev_tensor *t)
{
    ev_tensor *r;
    CHECK_OK(ev_transpose(t, 0, 1, &r));
    return r;
}

/* a + b (broadcast to a's shape) against the host sum. */
static void check_add(ev_tensor *a, ev_tensor *b, ev_dtype want_dt)
{
    ev_tensor *r, *bb;
    CHECK_OK(ev_binary(&EX, EV_OP_ADD, a, b, &r));
    CHECK_OK(ev_expand(b, ev_tensor_ndim(a), ev_tensor_shape(a), &bb));
    double *av = values(a), *bv = values(bb);
    int64_t n = ev_tensor_numel(a);
    for (int64_t e = 0; e < n; e++) {
        av[e] += bv[e];
    }
    check_tensor(r, want_dt, ev_tensor_ndim(a), ev_tensor_shape(a), av, 0);
    free(av);
    free(bv);
    ev_tensor_unref(bb);
    ev_tensor_unref(r);
}

static void test_transposed_inputs(void)
{
    const int64_t shapes[][2] = {{300, 500}, {37, 129}, {129, 37}, {8, 1000}, {1000, 9}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        ev_tensor *a = pattern(EV_FLOAT32, 2, shapes[s], 7), *at = transposed(a);
        ev_tensor *b = pattern(EV_FLOAT32, 2, shapes[s], 11), *bt = transposed(b);
        ev_tensor *i = pattern(EV_INT32, 2, shapes[s], 5), *it = transposed(i);
        /* neg, and add of two tiled inputs, of the same and other dtypes. */
        ev_tensor *r;
        CHECK_OK(ev_unary(&EX, EV_OP_NEG, at, &r));
        double *want = values(at);
        for (int64_t e = 0; e < ev_tensor_numel(at); e++) {
            want[e] = -want[e];
        }
        check_tensor(r, EV_FLOAT32, 2, ev_tensor_shape(at), want, 0);
        free(want);
        ev_tensor_unref(r);
        check_add(at, bt, EV_FLOAT32);
        check_add(at, it, EV_FLOAT64);
        check_add(it, it, EV_INT32);
        /* Beside a contiguous input, a row and a column broadcast. */
        ev_tensor *c = pattern(EV_FLOAT32, 2, ev_tensor_shape(at), 3);
        check_add(at, c, EV_FLOAT32);
        check_add(c, at, EV_FLOAT32);
        int64_t rows = ev_tensor_shape(at)[0], cols = ev_tensor_shape(at)[1];
        ev_tensor *row = pattern(EV_INT16, 2, SHAPE(1, cols), 13);
        ev_tensor *col = pattern(EV_FLOAT64, 2, SHAPE(rows, 1), 17);
        check_add(at, row, EV_FLOAT32);
        check_add(at, col, EV_FLOAT64);
        ev_tensor *ts[] = {a, at, b, bt, i, it, c, row, col};
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
            ev_tensor_unref(ts[j]);
        }
    }
}

static void test_permuted_and_in_place(void)
{
    /* A 3-d permutation: the outermost dimension lies outside the tiles. */
    ev_tensor *x = pattern(EV_FLOAT64, 3, SHAPE(6, 70, 90), 7), *xp;
    CHECK_OK(ev_permute(x, (const int[]){0, 2, 1}, &xp));
    ev_tensor *y = pattern(EV_FLOAT64, 3, SHAPE(6, 90, 70), 3);
    check_add(xp, y, EV_FLOAT64);
    check_add(xp, xp, EV_FLOAT64);
    ev_tensor_unref(y);
    ev_tensor_unref(xp);
    ev_tensor_unref(x);
    /* In place on a transposed tensor from another transposed one: the
     * output's rows are strided too. */
    ev_tensor *a = pattern(EV_FLOAT32, 2, SHAPE(200, 300), 7), *at = transposed(a);
    ev_tensor *b = pattern(EV_FLOAT32, 2, SHAPE(300, 200), 11), *bt = transposed(b);
    double *want = values(a), *bv = values(bt);
    CHECK_OK(ev_binary_(&EX, EV_OP_ADD, a, bt));
    for (int64_t e = 0; e < 200 * 300; e++) {
        want[e] += bv[e];
    }
    check_tensor(a, EV_FLOAT32, 2, SHAPE(200, 300), want, 0);
    free(want);
    free(bv);
    want = values(at);
    double *b2 = values(b);
    CHECK_OK(ev_binary_(&EX, EV_OP_ADD, at, b));
    for (int64_t e = 0; e < 300 * 200; e++) {
        want[e] += b2[e];
    }
    check_tensor(at, EV_FLOAT32, 2, SHAPE(300, 200), want, 0);
    free(want);
    free(b2);
    ev_tensor *ts[] = {a, at, b, bt};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

static void test_where_transposed(void)
{
    ev_tensor *x = pattern(EV_FLOAT32, 2, SHAPE(250, 170), 7), *xt = transposed(x);
    ev_tensor *c0 = pattern(EV_FLOAT32, 2, SHAPE(250, 170), 3), *c;
    ev_tensor *zero = tensor_from(EV_FLOAT32, 0, NULL, VALS(0)), *ct, *r;
    CHECK_OK(ev_binary(&EX, EV_OP_GT, c0, zero, &c));
    ct = transposed(c);
    ev_tensor *y = tensor_from(EV_FLOAT32, 0, NULL, VALS(-100));
    CHECK_OK(ev_where(&EX, ct, xt, y, &r));
    double *cv = values(ct), *xv = values(xt);
    for (int64_t e = 0; e < 250 * 170; e++) {
        xv[e] = cv[e] != 0 ? xv[e] : -100;
    }
    check_tensor(r, EV_FLOAT32, 2, SHAPE(170, 250), xv, 0);
    free(cv);
    free(xv);
    ev_tensor *ts[] = {x, xt, c0, c, zero, ct, r, y};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

int main(void)
{
    test_setup();
    RUN_TEST(test_transposed_inputs);
    RUN_TEST(test_permuted_and_in_place);
    RUN_TEST(test_where_transposed);
    test_teardown();
    return 0;
}
