/* Tests of sort, argsort and topk: every dimension of a 3-d tensor with
 * many ties, in every dtype, both directions, on contiguous, transposed,
 * sliced and expanded inputs, against a reference written here (qsort by
 * value, then by position: the stable order); NaN, infinities and signed
 * zeros, int64 extremes, stability of equal keys, top-k of every k, zero-size
 * and 0-d tensors, long parallel cases, allocation failures, and the errors
 * raised at the call. */
#include "tensor_test.h"

/* Exported by the engine for tests (src/core/internal.h). */
void ev__fail_alloc_after(long n);

/* ------------------------------------------------------------- reference */

typedef struct pair {
    double v;
    int64_t i;
} pair;

static int g_desc;

/* NaN is the largest value and equal to itself; -0.0 == +0.0. */
static int cmp_value(double a, double b)
{
    int na = isnan(a), nb = isnan(b);
    if (na || nb) {
        return na - nb;
    }
    return a < b ? -1 : a > b;
}

static int cmp_pair(const void *pa, const void *pb)
{
    const pair *a = pa, *b = pb;
    int c = cmp_value(a->v, b->v);
    if (g_desc) {
        c = -c;
    }
    /* Ties by position: the order a stable sort keeps. */
    return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Sorts each line of C-order values v of shape along dim; writes the first
 * k of each line (k < 0: all) into vals and idx, in the C order of the
 * result (dim resized to k). */
static void ref_sort(const double *v, int ndim, const int64_t *shape, int dim, int desc,
                     int64_t k, double *vals, int64_t *idx)
{
    int64_t numel = 1, inner = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        inner *= d > dim ? shape[d] : 1;
    }
    int64_t len = ndim ? shape[dim] : 1;
    k = k < 0 ? len : k;
    if (len == 0) {
        return;
    }
    int64_t lines = numel / len;
    pair *p = malloc(sizeof(pair) * (size_t)len);
    g_desc = desc;
    for (int64_t l = 0; l < lines; l++) {
        int64_t outer = l / inner, in = l % inner;
        int64_t base = outer * len * inner + in, obase = outer * k * inner + in;
        for (int64_t i = 0; i < len; i++) {
            p[i].v = v[base + i * inner];
            p[i].i = i;
        }
        qsort(p, (size_t)len, sizeof(pair), cmp_pair);
        for (int64_t i = 0; i < k; i++) {
            vals[obase + i * inner] = p[i].v;
            idx[obase + i * inner] = p[i].i;
        }
    }
    free(p);
}

/* Exact comparison of t with want (NaN equal to NaN, signs of zeros too). */
static void check_vals(ev_tensor *t, ev_dtype dtype, int ndim, const int64_t *shape,
                       const double *want)
{
    check_tensor(t, dtype, ndim, shape, want, 0);
    int64_t n = ev_tensor_numel(t);
    double *got = malloc(sizeof(double) * (size_t)(n ? n : 1));
    read_f64(t, got);
    for (int64_t i = 0; i < n; i++) {
        CHECK_EQ(signbit(got[i]) != 0, signbit(want[i]) != 0);
    }
    free(got);
}

static void check_idx(ev_tensor *t, int ndim, const int64_t *shape, const int64_t *want)
{
    CHECK_EQ(ev_tensor_dtype(t), EV_INT64);
    CHECK_EQ(ev_tensor_ndim(t), ndim);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        CHECK_EQ(ev_tensor_shape(t)[d], shape[d]);
        n *= shape[d];
    }
    int64_t *got = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    CHECK_OK(ev_to_host(&EX, t, got));
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            fprintf(stderr, "index %lld: got %lld want %lld\n", (long long)i,
                    (long long)got[i], (long long)want[i]);
            CHECK(0);
        }
    }
    free(got);
}

/* Checks sort, argsort and topk (every k, or only the given k >= 0) of x
 * along dim in one direction. */
static void check_sorts(ev_tensor *x, int dim, int desc, int64_t only_k)
{
    int nd = ev_tensor_ndim(x);
    int64_t n = ev_tensor_numel(x), shape[EV_MAX_DIMS];
    memcpy(shape, ev_tensor_shape(x), sizeof(int64_t) * (size_t)nd);
    ev_dtype dt = ev_tensor_dtype(x);
    double *hv = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *wv = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int64_t *wi = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    read_f64(x, hv);
    int d = nd ? (dim < 0 ? dim + nd : dim) : 0;
    ref_sort(hv, nd, shape, d, desc, -1, wv, wi);
    ev_tensor *v, *i;
    CHECK_OK(ev_sort(&EX, x, dim, desc, (int)(n % 2), &v, &i));
    check_vals(v, dt, nd, shape, wv);
    check_idx(i, nd, shape, wi);
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    CHECK_OK(ev_argsort(&EX, x, dim, desc, 1, &i));
    check_idx(i, nd, shape, wi);
    ev_tensor_unref(i);
    int64_t len = nd ? shape[d] : 1;
    for (int64_t k = 0; k <= len; k++) {
        if (only_k >= 0 && k != only_k) {
            continue;
        }
        int64_t kshape[EV_MAX_DIMS];
        memcpy(kshape, shape, sizeof(int64_t) * (size_t)nd);
        if (nd) {
            kshape[d] = k;
        }
        ref_sort(hv, nd, shape, d, desc, k, wv, wi);
        CHECK_OK(ev_topk(&EX, x, k, dim, desc, (int)(k % 2), &v, &i));
        if (nd == 0 && k == 0) {
            check_vals(v, dt, 1, SHAPE(0), wv);
            check_idx(i, 1, SHAPE(0), wi);
        } else {
            check_vals(v, dt, nd, kshape, wv);
            check_idx(i, nd, kshape, wi);
        }
        ev_tensor_unref(v);
        ev_tensor_unref(i);
    }
    free(hv);
    free(wv);
    free(wi);
}

/* Few distinct values: many ties, so stability shows. */
static void fill_ties(double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        v[i] = (double)((i * 7 + 3) % 5) - 2;
    }
}

/* ------------------------------------------------------------------ tests */

static void test_every_dtype_and_dim(void)
{
    double vals[60];
    fill_ties(vals, 60);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 3, SHAPE(3, 4, 5), vals);
        for (int dim = -3; dim < 3; dim++) {
            for (int desc = 0; desc < 2; desc++) {
                check_sorts(x, dim, desc, -1);
            }
        }
        ev_tensor_unref(x);
    }
}

static void test_stability(void)
{
    /* Equal keys at distinct positions keep their order, both ways. */
    ev_tensor *x = tensor_from(EV_INT32, 1, SHAPE(6), VALS(2, 1, 2, 1, 2, 1)), *v, *i;
    CHECK_OK(ev_sort(&EX, x, 0, 0, 1, &v, &i));
    check_tensor(v, EV_INT32, 1, SHAPE(6), VALS(1, 1, 1, 2, 2, 2), 0);
    check_idx(i, 1, SHAPE(6), (const int64_t[]){1, 3, 5, 0, 2, 4});
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    CHECK_OK(ev_sort(&EX, x, 0, 1, 0, &v, &i));
    check_tensor(v, EV_INT32, 1, SHAPE(6), VALS(2, 2, 2, 1, 1, 1), 0);
    check_idx(i, 1, SHAPE(6), (const int64_t[]){0, 2, 4, 1, 3, 5});
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    CHECK_OK(ev_topk(&EX, x, 4, 0, 1, 1, &v, &i));
    check_tensor(v, EV_INT32, 1, SHAPE(4), VALS(2, 2, 2, 1), 0);
    check_idx(i, 1, SHAPE(4), (const int64_t[]){0, 2, 4, 1});
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    ev_tensor_unref(x);
    /* A long line of two keys: the sort keeps the order. */
    int64_t n = 1000;
    double *h = malloc(sizeof(double) * (size_t)n);
    int64_t *want = malloc(sizeof(int64_t) * (size_t)n);
    int64_t at = 0;
    for (int64_t k = 0; k < n; k++) {
        h[k] = (double)((k * 31) % 3 == 0);
    }
    for (int key = 0; key < 2; key++) {
        for (int64_t k = 0; k < n; k++) {
            if (h[k] == key) {
                want[at++] = k;
            }
        }
    }
    x = tensor_from(EV_FLOAT32, 1, &n, h);
    CHECK_OK(ev_argsort(&EX, x, 0, 0, 1, &i));
    check_idx(i, 1, &n, want);
    ev_tensor_unref(i);
    ev_tensor_unref(x);
    free(h);
    free(want);
}

/* Lines long enough for the radix sort, of values from an ordered set
 * (negatives, signed zeros, a subnormal, infinities, NaN; int64 near its
 * extremes), many of each: the indices come out value by value, each
 * value's in order. */
static void test_long_lines_radix(void)
{
    const double fvals[9] = {-INFINITY, -1e30, -2.5, -0.0, 0.0, 1e-40, 3, INFINITY, NAN};
    const double ivals[6] = {-9e18, -70000, -1, 0, 255, 9e18};
    const int64_t n = 5003;
    double *h = malloc(sizeof(double) * (size_t)n);
    int64_t *want = malloc(sizeof(int64_t) * (size_t)n);
    for (int dt = EV_INT64; dt <= EV_FLOAT64; dt++) {
        int is_f = dt != EV_INT64;
        const double *vals = is_f ? fvals : ivals;
        int nv = is_f ? 9 : 6;
        for (int64_t k = 0; k < n; k++) {
            h[k] = vals[(k * 7919 + k / 3) % nv];
        }
        int64_t at = 0;
        for (int v = 0; v < nv; v++) {
            /* -0.0 and 0.0 are one key: both runs interleave by position. */
            if (is_f && v == 4) {
                continue;
            }
            for (int64_t k = 0; k < n; k++) {
                int64_t cat = (k * 7919 + k / 3) % nv;
                if (cat == v || (is_f && v == 3 && cat == 4)) {
                    want[at++] = k;
                }
            }
        }
        CHECK_EQ(at, n);
        ev_tensor *x = tensor_from((ev_dtype)dt, 1, &n, h), *i;
        CHECK_OK(ev_argsort(&EX, x, 0, 0, 1, &i));
        check_idx(i, 1, &n, want);
        ev_tensor_unref(i);
        ev_tensor_unref(x);
    }
    free(h);
    free(want);
}

/* Lines of every dtype long enough for the radix sort (700), and of the
 * lengths sorted by rank (33, 40), of values spread over each dtype's range
 * (its extremes included, and for the floats signed zeros, a subnormal,
 * infinities and NaN), with ties, both directions, on a contiguous and a
 * transposed tensor: float32 and the narrow integers sort as packed words
 * (key above position), the others as items. */
static void test_long_lines_every_dtype(void)
{
    const double fspecial[8] = {-INFINITY, -0.0, 0.0, 1e-40, INFINITY, NAN, -3e38, 3e38};
    const int64_t shapes[2][2] = {{3, 700}, {33, 40}};
    double *h = malloc(sizeof(double) * 3 * 700);
    for (int sh = 0; sh < 2; sh++) {
        int64_t rows = shapes[sh][0], cols = shapes[sh][1], n = rows * cols;
        for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
            const ev_dtype_info *info = ev_dtype_get_info((ev_dtype)dt);
            for (int64_t k = 0; k < n; k++) {
                int64_t r = (k * 2654435761u) % 1000003;
                if (info->kind == EV_KIND_FLOAT) {
                    h[k] = k % 11 == 0 ? fspecial[(k / 11) % 8] : (double)(r % 2001 - 1000) / 7;
                } else if (info->kind == EV_KIND_BOOL) {
                    h[k] = (double)(r % 2);
                } else if (info->is_unsigned) {
                    h[k] = (double)(r % 256);
                } else {
                    /* Spread over the dtype's range, its extremes included. */
                    double lo = -ldexp(1, 8 * (int)info->size - 1);
                    double span = dt == EV_INT64 ? 2e6 : -2 * lo - 1;
                    h[k] = k % 13 == 0 ? (k % 2 ? lo : -lo - 1)
                                       : (dt == EV_INT64 ? -1e6 : lo) + (double)(r % 997) / 996 * span;
                    h[k] = floor(h[k]);
                }
            }
            ev_tensor *x = tensor_from((ev_dtype)dt, 2, SHAPE(rows, cols), h), *t;
            CHECK_OK(ev_transpose(x, 0, 1, &t));
            for (int desc = 0; desc < 2; desc++) {
                check_sorts(x, 1, desc, 5);
                check_sorts(t, 0, desc, 0);
            }
            ev_tensor_unref(t);
            ev_tensor_unref(x);
        }
    }
    free(h);
}

static void test_nan_inf_zeros(void)
{
    const double vals[8] = {3, NAN, 1, NAN, -INFINITY, INFINITY, -0.0, 0.0};
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 1, SHAPE(8), vals), *v, *i;
        CHECK_OK(ev_sort(&EX, x, 0, 0, 1, &v, &i));
        check_vals(v, (ev_dtype)dt, 1, SHAPE(8),
                   VALS(-INFINITY, -0.0, 0.0, 1, 3, INFINITY, NAN, NAN));
        check_idx(i, 1, SHAPE(8), (const int64_t[]){4, 6, 7, 2, 0, 5, 1, 3});
        ev_tensor_unref(v);
        ev_tensor_unref(i);
        CHECK_OK(ev_sort(&EX, x, -1, 1, 1, &v, &i));
        check_vals(v, (ev_dtype)dt, 1, SHAPE(8),
                   VALS(NAN, NAN, INFINITY, 3, 1, -0.0, 0.0, -INFINITY));
        check_idx(i, 1, SHAPE(8), (const int64_t[]){1, 3, 5, 0, 2, 6, 7, 4});
        ev_tensor_unref(v);
        ev_tensor_unref(i);
        /* topk: NaN first among the largest, -inf first among the smallest. */
        CHECK_OK(ev_topk(&EX, x, 3, 0, 1, 1, &v, &i));
        check_vals(v, (ev_dtype)dt, 1, SHAPE(3), VALS(NAN, NAN, INFINITY));
        check_idx(i, 1, SHAPE(3), (const int64_t[]){1, 3, 5});
        ev_tensor_unref(v);
        ev_tensor_unref(i);
        CHECK_OK(ev_topk(&EX, x, 2, 0, 0, 0, &v, &i));
        check_vals(v, (ev_dtype)dt, 1, SHAPE(2), VALS(-INFINITY, -0.0));
        ev_tensor_unref(v);
        ev_tensor_unref(i);
        ev_tensor_unref(x);
    }
}

static void test_selection_path(void)
{
    /* topk with k far below the line's length selects with a heap: NaN,
     * signed zeros, infinities and ties must come out as the sort gives. */
    const double pool[7] = {NAN, 1, -0.0, 0.0, INFINITY, -INFINITY, 2};
    double h[301];
    for (int k = 0; k < 301; k++) {
        h[k] = pool[(k * 5 + k / 7) % 7];
    }
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 2, SHAPE(2, 150), h);
        for (int64_t k = 1; k <= 9; k += 4) {
            check_sorts(x, 1, 0, k);
            check_sorts(x, 1, 1, k);
        }
        ev_tensor_unref(x);
    }
    ev_tensor *x = tensor_from(EV_INT32, 1, SHAPE(300), h + 1); /* NaN becomes INT32_MIN */
    check_sorts(x, 0, 1, 2);
    check_sorts(x, 0, 0, 18);
    ev_tensor_unref(x);
}

static void test_int64_extremes(void)
{
    int64_t h[5] = {INT64_MAX, INT64_MIN, 0, -1, INT64_MAX - 1};
    ev_tensor *x, *v, *i;
    CHECK_OK(ev_from_host(&EX, EV_INT64, 1, SHAPE(5), h, &x));
    CHECK_OK(ev_sort(&EX, x, 0, 0, 1, &v, &i));
    int64_t got[5];
    CHECK_OK(ev_to_host(&EX, v, got));
    const int64_t want[5] = {INT64_MIN, -1, 0, INT64_MAX - 1, INT64_MAX};
    for (int k = 0; k < 5; k++) {
        CHECK_EQ(got[k], want[k]);
    }
    check_idx(i, 1, SHAPE(5), (const int64_t[]){1, 3, 2, 4, 0});
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    ev_tensor_unref(x);
    /* bool: false < true. */
    x = tensor_from(EV_BOOL, 1, SHAPE(4), VALS(1, 0, 1, 0));
    CHECK_OK(ev_sort(&EX, x, 0, 1, 1, &v, &i));
    check_tensor(v, EV_BOOL, 1, SHAPE(4), VALS(1, 1, 0, 0), 0);
    check_idx(i, 1, SHAPE(4), (const int64_t[]){0, 2, 1, 3});
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    ev_tensor_unref(x);
}

static void test_strided_views(void)
{
    double vals[60];
    fill_ties(vals, 60);
    for (int dt = 0; dt < EV_DTYPE_COUNT; dt++) {
        ev_tensor *base = tensor_from((ev_dtype)dt, 3, SHAPE(3, 4, 5), vals), *t, *s;
        CHECK_OK(ev_transpose(base, 0, 2, &t));
        CHECK_OK(ev_slice(t, 1, 0, INT64_MAX, 3, &s));
        CHECK(!ev_tensor_is_contiguous(s));
        ev_tensor *n;
        CHECK_OK(ev_slice(t, 2, INT64_MAX, INT64_MIN, -1, &n)); /* negative stride */
        for (int dim = 0; dim < 3; dim++) {
            check_sorts(t, dim, dim % 2, 2);
            check_sorts(s, dim, 1 - dim % 2, -1);
            check_sorts(n, dim, dim % 2, -1);
        }
        ev_tensor_unref(n);
        ev_tensor_unref(s);
        ev_tensor_unref(t);
        ev_tensor_unref(base);
    }
    /* An expanded x: all elements along dim 0 equal, so indices 0, 1, ... */
    ev_tensor *row = tensor_from(EV_FLOAT64, 2, SHAPE(1, 3), VALS(5, -1, 2)), *e;
    CHECK_OK(ev_expand(row, 2, SHAPE(4, 3), &e));
    for (int dim = 0; dim < 2; dim++) {
        check_sorts(e, dim, 0, -1);
        check_sorts(e, dim, 1, -1);
    }
    ev_tensor_unref(e);
    ev_tensor_unref(row);
}

static void test_zero_size_and_0d(void)
{
    ev_tensor *x, *v, *i;
    CHECK_OK(ev_zeros(&EX, EV_INT32, 2, SHAPE(3, 0), &x));
    for (int dim = 0; dim < 2; dim++) {
        check_sorts(x, dim, 0, -1);
        CHECK_OK(ev_sort(&EX, x, dim, 1, 0, &v, &i));
        check_tensor(v, EV_INT32, 2, SHAPE(3, 0), NULL, 0);
        check_idx(i, 2, SHAPE(3, 0), NULL);
        ev_tensor_unref(v);
        ev_tensor_unref(i);
    }
    CHECK_OK(ev_topk(&EX, x, 0, 1, 1, 1, &v, &i));
    check_idx(i, 2, SHAPE(3, 0), NULL);
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    CHECK_EQ(ev_topk(&EX, x, 1, 1, 1, 1, &v, &i), EV_EINVAL);
    CHECK_OK(ev_topk(&EX, x, 2, 0, 1, 1, &v, &i));
    check_idx(i, 2, SHAPE(2, 0), NULL);
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    ev_tensor_unref(x);

    ev_tensor *s = tensor_from(EV_FLOAT32, 0, NULL, VALS(2.5));
    check_sorts(s, 0, 0, -1);
    check_sorts(s, -1, 1, -1);
    CHECK_OK(ev_topk(&EX, s, 1, 0, 1, 1, &v, &i));
    check_tensor(v, EV_FLOAT32, 0, NULL, VALS(2.5), 0);
    check_idx(i, 0, NULL, (const int64_t[]){0});
    ev_tensor_unref(v);
    ev_tensor_unref(i);
    CHECK_EQ(ev_topk(&EX, s, 2, 0, 1, 1, &v, &i), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "topk: k = 2 is out of range [0, 1]");
    CHECK_EQ(ev_sort(&EX, s, 1, 0, 0, &v, &i), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "sort: dimension 1 is out of range [-1, 0]");
    ev_tensor_unref(s);
}

static void test_long_parallel(void)
{
    /* Many lines (split over the intra-op threads) and one long line (deep
     * merges), with ties. */
    int64_t rows = ev_test_scaled(600), cols = 301, n = rows * cols;
    double *h = malloc(sizeof(double) * (size_t)n);
    for (int64_t k = 0; k < n; k++) {
        h[k] = (double)((k * 7919) % 1013) - 500;
    }
    ev_tensor *x;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT64, 2, SHAPE(rows, cols), h, &x));
    check_sorts(x, 1, 0, 7);
    check_sorts(x, 0, 1, 3);
    ev_tensor *flat;
    CHECK_OK(ev_reshape(&EX, x, 1, &n, &flat));
    check_sorts(flat, 0, 1, 100);
    ev_tensor_unref(flat);
    ev_tensor_unref(x);
    free(h);
}

static void test_allocation_failures(void)
{
    ev_tensor *x, *v, *i;
    double h[80];
    fill_ties(h, 80);
    x = tensor_from(EV_FLOAT32, 2, SHAPE(2, 40), h);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    int saw_call = 0, saw_kernel = 0;
    for (long n = 0; n < 64; n++) {
        v = i = NULL;
        /* The budget holds until the kernel has run (it allocates too). */
        ev__fail_alloc_after(n);
        int rc = ev_sort(&EX, x, 1, 0, 1, &v, &i);
        ev_error *err = NULL;
        int wrc = rc ? 0 : ev_wait_obj(test_vm, ev_tensor_obj(i), &err);
        ev__fail_alloc_after(-1);
        if (rc) {
            CHECK_EQ(rc, EV_ENOMEM);
            CHECK(v == NULL && i == NULL);
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
            /* A clean run: the right answer. */
            double hv[80], wv[80];
            int64_t wi[80];
            read_f64(x, hv);
            ref_sort(hv, 2, SHAPE(2, 40), 1, 0, -1, wv, wi);
            check_vals(v, EV_FLOAT32, 2, SHAPE(2, 40), wv);
            check_idx(i, 2, SHAPE(2, 40), wi);
        }
        ev_tensor_unref(v);
        ev_tensor_unref(i);
    }
    CHECK(saw_call && saw_kernel);
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_tensor_unref(x);
}

static void test_errors(void)
{
    ev_tensor *x, *v = NULL, *i = NULL;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(2, 3), &x));
    CHECK_EQ(ev_sort(&EX, x, 2, 0, 0, &v, &i), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "sort: dimension 2 is out of range [-2, 1]");
    CHECK_EQ(ev_argsort(&EX, x, -3, 0, 0, &i), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "argsort: dimension -3");
    CHECK_EQ(ev_topk(&EX, x, 4, 1, 1, 1, &v, &i), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "topk: k = 4 is out of range [0, 3] (the size of "
                                          "dimension 1)");
    CHECK_EQ(ev_topk(&EX, x, -1, 1, 1, 1, &v, &i), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "topk: k = -1");
    CHECK_EQ(ev_sort(&EX, x, 0, 0, 0, NULL, &i), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "sort: values is NULL");
    CHECK_EQ(ev_sort(&EX, x, 0, 0, 0, &v, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "sort: indices is NULL");
    CHECK_EQ(ev_argsort(&EX, x, 0, 0, 0, NULL), EV_EINVAL);
    CHECK_EQ(ev_topk(&EX, x, 1, 0, 1, 1, NULL, &i), EV_EINVAL);
    CHECK_EQ(ev_sort(&EX, NULL, 0, 0, 0, &v, &i), EV_EINVAL);
    CHECK_EQ(ev_argsort(NULL, x, 0, 0, 0, &i), EV_EINVAL);
    CHECK(v == NULL && i == NULL);
    ev_tensor_unref(x);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_every_dtype_and_dim);
    RUN_TEST(test_stability);
    RUN_TEST(test_long_lines_radix);
    RUN_TEST(test_long_lines_every_dtype);
    RUN_TEST(test_nan_inf_zeros);
    RUN_TEST(test_selection_path);
    RUN_TEST(test_int64_extremes);
    RUN_TEST(test_strided_views);
    RUN_TEST(test_zero_size_and_0d);
    RUN_TEST(test_long_parallel);
    RUN_TEST(test_allocation_failures);
    RUN_TEST(test_errors);
    test_teardown();
    return 0;
}
