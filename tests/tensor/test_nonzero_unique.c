/* Tests of nonzero and unique, the ops whose result size depends on x's
 * values and which are therefore sync points on x: every dtype, strided,
 * expanded, zero-size and 0-d inputs against references written here; NaN
 * (nonzero, and collapsed into one value by unique as NumPy >= 1.24), signed
 * zeros and int64 extremes; waiting for an x still being computed on another
 * worker, results unaffected by later writes to x, a poisoned x, allocation
 * failures, and the errors raised at the call.
 * EV_TEST_CONCURRENCY: x is produced on a second worker thread. */
#define EV_TEST_CONCURRENCY 1
#include "tensor_test.h"

/* Exported by the engine for tests (src/core/internal.h). */
void ev__fail_alloc_after(long n);

/* ---------------------------------------------------------------- nonzero */

/* Checks ev_nonzero(x) against a loop over x's C-order values. */
static void check_nonzero(ev_tensor *x)
{
    int nd = ev_tensor_ndim(x);
    const int64_t *shape = ev_tensor_shape(x);
    int64_t n = ev_tensor_numel(x);
    double *h = malloc(sizeof(double) * (size_t)(n ? n : 1));
    read_f64(x, h);
    int64_t *want = malloc(sizeof(int64_t) * (size_t)(n * nd + 1)), cnt = 0;
    for (int64_t e = 0; e < n; e++) {
        if (h[e] != 0) { /* NaN != 0 */
            int64_t rest = e;
            for (int d = nd - 1; d >= 0; d--) {
                want[cnt * nd + d] = rest % shape[d];
                rest /= shape[d];
            }
            cnt++;
        }
    }
    ev_tensor *y;
    CHECK_OK(ev_nonzero(&EX, x, &y));
    CHECK_EQ(ev_tensor_dtype(y), EV_INT64);
    CHECK_EQ(ev_tensor_ndim(y), 2);
    CHECK_EQ(ev_tensor_shape(y)[0], cnt);
    CHECK_EQ(ev_tensor_shape(y)[1], nd);
    int64_t *got = malloc(sizeof(int64_t) * (size_t)(cnt * nd + 1));
    CHECK_OK(ev_to_host(&EX, y, got));
    for (int64_t i = 0; i < cnt * nd; i++) {
        CHECK_EQ(got[i], want[i]);
    }
    ev_tensor_unref(y);
    free(got);
    free(want);
    free(h);
}

static void fill_vals(double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        v[i] = (i % 3 == 0 || i % 7 == 2) ? 0 : (double)((i * 37) % 5) - 2;
    }
}

static void test_nonzero(void)
{
    double vals[120];
    fill_vals(vals, 120);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 3, SHAPE(4, 5, 6), vals), *t, *s;
        check_nonzero(x);
        CHECK_OK(ev_transpose(x, 0, 2, &t));
        check_nonzero(t);
        CHECK_OK(ev_slice(t, 1, 1, INT64_MAX, 2, &s));
        check_nonzero(s);
        ev_tensor_unref(s);
        CHECK_OK(ev_slice(t, 2, INT64_MAX, INT64_MIN, -3, &s)); /* negative stride */
        check_nonzero(s);
        ev_tensor_unref(s);
        ev_tensor_unref(t);
        ev_tensor_unref(x);
    }
    ev_tensor *row = tensor_from(EV_FLOAT32, 2, SHAPE(1, 3), VALS(0, NAN, 2)), *e;
    CHECK_OK(ev_expand(row, 3, SHAPE(2, 4, 3), &e));
    check_nonzero(e);
    ev_tensor_unref(e);
    /* Hand-checked: NaN counts. */
    ev_tensor *y;
    CHECK_OK(ev_nonzero(&EX, row, &y));
    int64_t got[4];
    CHECK_OK(ev_to_host(&EX, y, got));
    CHECK_EQ(ev_tensor_shape(y)[0], 2);
    CHECK(got[0] == 0 && got[1] == 1 && got[2] == 0 && got[3] == 2);
    ev_tensor_unref(y);
    ev_tensor_unref(row);
}

/* Large enough for the result rows to be split over the pool (chunks that
 * start inside a row of x), with runs of zeros spanning whole rows. */
static void test_nonzero_large(void)
{
    const int64_t shapes[3][3] = {{200, 300, 7}, {3, 1, 100000}, {100000, 3, 1}};
    for (int k = 0; k < 3; k++) {
        int64_t n = shapes[k][0] * shapes[k][1] * shapes[k][2];
        double *v = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            int64_t block = i / 5000;
            v[i] = block % 3 == 1 ? 0 : (i * 2654435761u) % 5 == 0 ? 0 : 1;
        }
        ev_tensor *x = tensor_from(EV_FLOAT32, 3, shapes[k], v), *xt;
        check_nonzero(x);
        CHECK_OK(ev_transpose(x, 0, 2, &xt));
        check_nonzero(xt);
        ev_tensor_unref(xt);
        ev_tensor_unref(x);
        free(v);
    }
}

static void test_nonzero_zero_size_and_0d(void)
{
    ev_tensor *x, *y;
    CHECK_OK(ev_zeros(&EX, EV_INT32, 2, SHAPE(0, 3), &x));
    check_nonzero(x);
    ev_tensor_unref(x);
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 3, SHAPE(2, 2, 2), &x));
    check_nonzero(x); /* no nonzero element: (0, 3) */
    ev_tensor_unref(x);
    ev_tensor *s = tensor_from(EV_INT64, 0, NULL, VALS(5));
    CHECK_OK(ev_nonzero(&EX, s, &y));
    CHECK_EQ(ev_tensor_shape(y)[0], 1);
    CHECK_EQ(ev_tensor_shape(y)[1], 0);
    ev_tensor_unref(y);
    ev_tensor_unref(s);
    s = tensor_from(EV_BOOL, 0, NULL, VALS(0));
    CHECK_OK(ev_nonzero(&EX, s, &y));
    CHECK_EQ(ev_tensor_shape(y)[0], 0);
    CHECK_EQ(ev_tensor_shape(y)[1], 0);
    ev_tensor_unref(y);
    ev_tensor_unref(s);
}

/* ----------------------------------------------------------------- unique */

static int cmp_f64(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    int na = isnan(a), nb = isnan(b);
    if (na || nb) {
        return na - nb;
    }
    return a < b ? -1 : a > b;
}

/* Checks every combination of outputs of ev_unique(x) against a reference:
 * the sorted distinct values (NaNs as one), each element's position among
 * them, and their counts. */
static void check_unique(ev_tensor *x)
{
    int64_t n = ev_tensor_numel(x);
    double *h = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *sorted = malloc(sizeof(double) * (size_t)(n ? n : 1));
    read_f64(x, h);
    memcpy(sorted, h, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), cmp_f64);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || cmp_f64(&sorted[i], &sorted[u - 1]) != 0) {
            sorted[u++] = sorted[i];
        }
    }
    int64_t *inv = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *cnt = calloc((size_t)(u ? u : 1), sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        int64_t j = 0;
        while (cmp_f64(&sorted[j], &h[i]) != 0) {
            j++;
        }
        inv[i] = j;
        cnt[j]++;
    }
    for (int mode = 0; mode < 4; mode++) {
        int ri = mode & 1, rc = (mode >> 1) & 1;
        ev_tensor *v = NULL, *iv = NULL, *c = NULL;
        CHECK_OK(ev_unique(&EX, x, mode != 2, ri, rc, &v, ri ? &iv : NULL, rc ? &c : NULL));
        check_tensor(v, ev_tensor_dtype(x), 1, &u, sorted, 0);
        if (ri) {
            CHECK_EQ(ev_tensor_dtype(iv), EV_INT64);
            CHECK_EQ(ev_tensor_ndim(iv), ev_tensor_ndim(x));
            int64_t *got = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
            CHECK_OK(ev_to_host(&EX, iv, got));
            for (int64_t i = 0; i < n; i++) {
                CHECK_EQ(got[i], inv[i]);
            }
            free(got);
        } else {
            CHECK(iv == NULL);
        }
        if (rc) {
            CHECK_EQ(ev_tensor_dtype(c), EV_INT64);
            CHECK_EQ(ev_tensor_numel(c), u);
            int64_t *got = malloc(sizeof(int64_t) * (size_t)(u ? u : 1));
            CHECK_OK(ev_to_host(&EX, c, got));
            for (int64_t j = 0; j < u; j++) {
                CHECK_EQ(got[j], cnt[j]);
            }
            free(got);
        } else {
            CHECK(c == NULL);
        }
        ev_tensor_unref(v);
        ev_tensor_unref(iv);
        ev_tensor_unref(c);
    }
    free(h);
    free(sorted);
    free(inv);
    free(cnt);
}

static void test_unique(void)
{
    double vals[120];
    fill_vals(vals, 120);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 3, SHAPE(4, 5, 6), vals), *t, *s;
        check_unique(x);
        CHECK_OK(ev_transpose(x, 0, 2, &t));
        check_unique(t);
        CHECK_OK(ev_slice(t, 1, 1, INT64_MAX, 2, &s));
        check_unique(s);
        ev_tensor_unref(s);
        CHECK_OK(ev_slice(t, 2, INT64_MAX, INT64_MIN, -3, &s)); /* negative stride */
        check_unique(s);
        ev_tensor_unref(s);
        ev_tensor_unref(t);
        ev_tensor_unref(x);
    }
    ev_tensor *row = tensor_from(EV_FLOAT64, 2, SHAPE(1, 3), VALS(3, NAN, -1)), *e;
    CHECK_OK(ev_expand(row, 2, SHAPE(4, 3), &e));
    check_unique(e);
    ev_tensor_unref(e);
    ev_tensor_unref(row);
}

/* Inputs long enough for the radix sort, in every dtype, with each dtype's
 * extremes: float32 and the narrow integers write each distinct value from
 * its packed key, which must give the value back exactly. */
static void test_unique_long_every_dtype(void)
{
    const int64_t n = 3001;
    double *h = malloc(sizeof(double) * (size_t)n);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        const ev_dtype_info *info = ev_dtype_get_info((ev_dtype)dt);
        double lo = info->kind == EV_KIND_FLOAT ? -3.4e38
                    : info->kind == EV_KIND_BOOL || info->is_unsigned
                        ? 0
                        : -ldexp(1, 8 * (int)info->size - 1);
        double hi = info->kind == EV_KIND_FLOAT ? 3.4e38
                    : info->kind == EV_KIND_BOOL ? 1
                    : info->is_unsigned ? 255
                    : -lo - 1;
        if (dt == EV_INT64) {
            lo = -9e18;
            hi = 9e18;
        }
        for (int64_t k = 0; k < n; k++) {
            int64_t r = (k * 40503) % 65521;
            h[k] = k % 5 == 0 ? (k % 2 ? lo : hi) : lo + (hi - lo) * (double)(r % 301) / 300;
            if (info->kind != EV_KIND_FLOAT) {
                h[k] = floor(h[k]);
            } else if (k % 7 == 0) {
                h[k] = k % 3 ? 1e-40 : -1.5e-40; /* subnormal in float32 */
            }
        }
        ev_tensor *x = tensor_from((ev_dtype)dt, 1, &n, h);
        check_unique(x);
        ev_tensor_unref(x);
    }
    free(h);
}

static void test_unique_nan_zeros_extremes(void)
{
    /* As NumPy 1.24: unique([nan, 1, nan, -0., 0.], return_inverse,
     * return_counts) is ([-0., 1., nan], [2, 1, 2, 0, 0], [2, 1, 2]). */
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 1, SHAPE(5), VALS(NAN, 1, NAN, -0.0, 0.0));
        ev_tensor *v, *iv, *c;
        CHECK_OK(ev_unique(&EX, x, 1, 1, 1, &v, &iv, &c));
        check_tensor(v, (ev_dtype)dt, 1, SHAPE(3), VALS(-0.0, 1, NAN), 0);
        double got[3];
        read_f64(v, got);
        CHECK(signbit(got[0])); /* the first occurrence is kept */
        int64_t gi[5], gc[3];
        CHECK_OK(ev_to_host(&EX, iv, gi));
        CHECK_OK(ev_to_host(&EX, c, gc));
        CHECK(gi[0] == 2 && gi[1] == 1 && gi[2] == 2 && gi[3] == 0 && gi[4] == 0);
        CHECK(gc[0] == 2 && gc[1] == 1 && gc[2] == 2);
        ev_tensor_unref(v);
        ev_tensor_unref(iv);
        ev_tensor_unref(c);
        ev_tensor_unref(x);
    }
    int64_t h[6] = {INT64_MAX, INT64_MIN, INT64_MAX, 0, INT64_MAX - 1, INT64_MIN};
    ev_tensor *x, *v, *c;
    CHECK_OK(ev_from_host(&EX, EV_INT64, 2, SHAPE(2, 3), h, &x));
    CHECK_OK(ev_unique(&EX, x, 0, 0, 1, &v, NULL, &c));
    int64_t gv[4], gc[4];
    CHECK_EQ(ev_tensor_numel(v), 4);
    CHECK_OK(ev_to_host(&EX, v, gv));
    CHECK_OK(ev_to_host(&EX, c, gc));
    CHECK(gv[0] == INT64_MIN && gv[1] == 0 && gv[2] == INT64_MAX - 1 && gv[3] == INT64_MAX);
    CHECK(gc[0] == 2 && gc[1] == 1 && gc[2] == 1 && gc[3] == 2);
    ev_tensor_unref(v);
    ev_tensor_unref(c);
    ev_tensor_unref(x);
}

static void test_unique_zero_size_and_0d(void)
{
    ev_tensor *x, *v, *iv, *c;
    CHECK_OK(ev_zeros(&EX, EV_INT32, 2, SHAPE(3, 0), &x));
    CHECK_OK(ev_unique(&EX, x, 1, 1, 1, &v, &iv, &c));
    check_tensor(v, EV_INT32, 1, SHAPE(0), NULL, 0);
    check_tensor(iv, EV_INT64, 2, SHAPE(3, 0), NULL, 0);
    check_tensor(c, EV_INT64, 1, SHAPE(0), NULL, 0);
    ev_tensor_unref(v);
    ev_tensor_unref(iv);
    ev_tensor_unref(c);
    ev_tensor_unref(x);
    x = tensor_from(EV_FLOAT32, 0, NULL, VALS(2.5));
    CHECK_OK(ev_unique(&EX, x, 1, 1, 1, &v, &iv, &c));
    check_tensor(v, EV_FLOAT32, 1, SHAPE(1), VALS(2.5), 0);
    check_tensor(iv, EV_INT64, 0, NULL, VALS(0), 0);
    check_tensor(c, EV_INT64, 1, SHAPE(1), VALS(1), 0);
    ev_tensor_unref(v);
    ev_tensor_unref(iv);
    ev_tensor_unref(c);
    ev_tensor_unref(x);
}

/* ------------------------------------------------------ as sync points */

static void test_waits_for_x(void)
{
    /* x is written on another worker by a chain that takes a while; each
     * call must see its final values. */
    uint32_t uid;
    CHECK_OK(ev_vm_thread_acquire(test_vm, &uid));
    ev_exec ex2 = EX;
    ex2.thread_uid = uid;
    int64_t n = ev_test_scaled(1 << 18);
    for (int round = 0; round < 4; round++) {
        ev_tensor *x, *t;
        CHECK_OK(ev_zeros(&ex2, EV_FLOAT32, 1, &n, &x));
        for (int k = 0; k < 8; k++) {
            CHECK_OK(ev_add(&ex2, x, x, &t)); /* still zeros */
            ev_tensor_unref(x);
            x = t;
        }
        /* The last write makes element n - 1 - round nonzero. */
        ev_tensor *part;
        CHECK_OK(ev_slice(x, 0, n - 1 - round, n - round, 1, &part));
        CHECK_OK(ev_fill_(&ex2, part, ev_scalar_float(7)));
        ev_tensor_unref(part);
        ev_tensor *y;
        if (round % 2 == 0) {
            CHECK_OK(ev_nonzero(&EX, x, &y));
            CHECK_EQ(ev_tensor_shape(y)[0], 1);
            int64_t at;
            CHECK_OK(ev_to_host(&EX, y, &at));
            CHECK_EQ(at, n - 1 - round);
        } else {
            ev_tensor *c;
            CHECK_OK(ev_unique(&EX, x, 1, 0, 1, &y, NULL, &c));
            check_tensor(y, EV_FLOAT32, 1, SHAPE(2), VALS(0, 7), 0);
            int64_t gc[2];
            CHECK_OK(ev_to_host(&EX, c, gc));
            CHECK(gc[0] == n - 1 && gc[1] == 1);
            ev_tensor_unref(c);
        }
        ev_tensor_unref(y);
        ev_tensor_unref(x);
    }
    CHECK_OK(ev_synchronize(test_vm, NULL));
    CHECK_OK(ev_vm_thread_release(test_vm, uid));
}

static void test_later_writes_do_not_change_results(void)
{
    ev_tensor *x = tensor_from(EV_INT32, 1, SHAPE(4), VALS(0, 3, 0, 3)), *y, *v;
    CHECK_OK(ev_nonzero(&EX, x, &y));
    CHECK_OK(ev_unique(&EX, x, 1, 0, 0, &v, NULL, NULL));
    CHECK_OK(ev_fill_(&EX, x, ev_scalar_int(9)));
    check_tensor(y, EV_INT64, 2, SHAPE(2, 1), VALS(1, 3), 0);
    check_tensor(v, EV_INT32, 1, SHAPE(2), VALS(0, 3), 0);
    check_tensor(x, EV_INT32, 1, SHAPE(4), VALS(9, 9, 9, 9), 0);
    ev_tensor_unref(v);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_poisoned_input(void)
{
    /* An out-of-range index_select poisons x; the calls report it. */
    ev_tensor *src = tensor_from(EV_FLOAT32, 1, SHAPE(3), VALS(1, 2, 3)), *idx, *x;
    int64_t bad[2] = {0, 5};
    CHECK_OK(ev_from_host(&EX, EV_INT64, 1, SHAPE(2), bad, &idx));
    CHECK_OK(ev_index_select(&EX, src, 0, idx, &x));
    ev_tensor *y = NULL, *v = NULL;
    int rc = ev_nonzero(&EX, x, &y);
    CHECK(rc == EV_EPOISON || rc == EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "nonzero: x is poisoned");
    CHECK_STR_CONTAINS(ev_last_message(), "index_select");
    rc = ev_unique(&EX, x, 1, 0, 0, &v, NULL, NULL);
    CHECK(rc == EV_EPOISON || rc == EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "unique: x is poisoned");
    CHECK(y == NULL && v == NULL);
    ev_tensor_unref(x);
    ev_tensor_unref(idx);
    ev_tensor_unref(src);
    /* The failure has been reported; the runtime goes on. */
    ev_synchronize(test_vm, NULL);
    CHECK_OK(ev_synchronize(test_vm, NULL));
}

static void test_allocation_failures(void)
{
    double vals[40];
    fill_vals(vals, 40);
    ev_tensor *x = tensor_from(EV_FLOAT64, 2, SHAPE(5, 8), vals);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    int failed = 0;
    for (long n = 0; n < 48; n++) {
        ev_tensor *y = NULL, *v = NULL, *iv = NULL, *c = NULL;
        ev__fail_alloc_after(n);
        int rc1 = ev_nonzero(&EX, x, &y);
        int rc2 = ev_unique(&EX, x, 1, 1, 1, &v, &iv, &c);
        ev_error *err = NULL;
        int w1 = rc1 ? 0 : ev_wait_obj(test_vm, ev_tensor_obj(y), &err);
        ev_error_unref(err);
        err = NULL;
        int w2 = rc2 ? 0 : ev_wait_obj(test_vm, ev_tensor_obj(v), &err);
        ev_error_unref(err);
        ev__fail_alloc_after(-1);
        CHECK(rc1 == 0 || rc1 == EV_ENOMEM);
        CHECK(rc2 == 0 || rc2 == EV_ENOMEM);
        CHECK(w1 == 0 || w1 == EV_EPOISON || w1 == EV_ENOMEM);
        CHECK(w2 == 0 || w2 == EV_EPOISON || w2 == EV_ENOMEM);
        CHECK(rc1 || y);
        CHECK(rc2 || (v && iv && c));
        CHECK(!rc2 || (!v && !iv && !c));
        failed |= rc1 || rc2;
        ev_tensor_unref(y);
        ev_tensor_unref(v);
        ev_tensor_unref(iv);
        ev_tensor_unref(c);
    }
    CHECK(failed);
    ev_synchronize(test_vm, NULL);
    check_nonzero(x);
    check_unique(x);
    ev_tensor_unref(x);
}

static void test_errors(void)
{
    ev_tensor *x, *v = NULL, *iv = NULL, *c = NULL;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(2, 3), &x));
    CHECK_EQ(ev_nonzero(&EX, x, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "nonzero: out is NULL");
    CHECK_EQ(ev_nonzero(&EX, NULL, &v), EV_EINVAL);
    CHECK_EQ(ev_nonzero(NULL, x, &v), EV_EINVAL);
    CHECK_EQ(ev_unique(&EX, x, 1, 0, 0, NULL, NULL, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "unique: values is NULL");
    CHECK_EQ(ev_unique(&EX, x, 1, 1, 0, &v, NULL, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "unique: inverse is NULL");
    CHECK_EQ(ev_unique(&EX, x, 1, 0, 1, &v, &iv, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "unique: counts is NULL");
    CHECK_EQ(ev_unique(&EX, NULL, 1, 0, 0, &v, NULL, NULL), EV_EINVAL);
    CHECK_EQ(ev_unique(NULL, x, 1, 0, 0, &v, NULL, NULL), EV_EINVAL);
    CHECK(v == NULL && iv == NULL && c == NULL);
    ev_tensor_unref(x);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_nonzero);
    RUN_TEST(test_nonzero_large);
    RUN_TEST(test_nonzero_zero_size_and_0d);
    RUN_TEST(test_unique);
    RUN_TEST(test_unique_long_every_dtype);
    RUN_TEST(test_unique_nan_zeros_extremes);
    RUN_TEST(test_unique_zero_size_and_0d);
    RUN_TEST(test_waits_for_x);
    RUN_TEST(test_later_writes_do_not_change_results);
    RUN_TEST(test_poisoned_input);
    RUN_TEST(test_allocation_failures);
    RUN_TEST(test_errors);
    test_teardown();
    return 0;
}
