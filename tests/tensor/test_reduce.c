/* Tests of reductions and softmax: every op over every subset of dimensions,
 * with and without keepdim, against a reference computed here in float64
 * from the reduced elements of each output; plus dtypes, non-contiguous
 * inputs, 0-d and zero-size tensors, NaN, accuracy of long float32 sums, and
 * the errors raised at the call. */
#include "tensor_test.h"

/* --------------------------------------------------------------- reference */

enum { K_SUM, K_MEAN, K_PROD, K_MAX, K_MIN, K_ARGMAX, K_ARGMIN, K_VAR, K_STD };

static double ref_one(int kind, const double *v, int64_t n, double correction)
{
    double r = 0;
    int64_t at = 0;
    switch (kind) {
    case K_SUM:
    case K_MEAN:
        for (int64_t i = 0; i < n; i++) {
            r += v[i];
        }
        return kind == K_MEAN ? r / (double)n : r;
    case K_PROD:
        r = 1;
        for (int64_t i = 0; i < n; i++) {
            r *= v[i];
        }
        return r;
    case K_MAX:
    case K_MIN:
    case K_ARGMAX:
    case K_ARGMIN:
        for (int64_t i = 1; i < n; i++) {
            if (isnan(v[at])) {
                break;
            }
            int better = (kind == K_MAX || kind == K_ARGMAX) ? v[i] > v[at] : v[i] < v[at];
            if (better || isnan(v[i])) {
                at = i;
            }
        }
        return (kind == K_ARGMAX || kind == K_ARGMIN) ? (double)at : v[at];
    default: {
        double m = 0, ss = 0;
        for (int64_t i = 0; i < n; i++) {
            m += v[i];
        }
        m /= (double)n;
        for (int64_t i = 0; i < n; i++) {
            ss += (v[i] - m) * (v[i] - m);
        }
        double var = ss / fmax(0, (double)n - correction);
        return kind == K_STD ? sqrt(var) : var;
    }
    }
}

/* ref_one of the kind and correction in ctx, for ref_reduce_over. */
typedef struct ref_kind {
    int kind;
    double correction;
} ref_kind;

static double ref_kind_fn(const double *v, int64_t n, const void *ctx)
{
    const ref_kind *k = ctx;
    return ref_one(k->kind, v, n, k->correction);
}

static int run_kind(int kind, ev_tensor *x, int ndims, const int *dims, int keepdim,
                    double correction, ev_tensor **out)
{
    switch (kind) {
    case K_ARGMAX: return ev_argmax(&EX, x, dims, keepdim, out);
    case K_ARGMIN: return ev_argmin(&EX, x, dims, keepdim, out);
    case K_VAR: return ev_var(&EX, x, ndims, dims, correction, keepdim, out);
    case K_STD: return ev_std(&EX, x, ndims, dims, correction, keepdim, out);
    default: return ev_reduce(&EX, kind, x, ndims, dims, keepdim, out);
    }
}

/* Values that make every reduction non-trivial (distinct, mixed signs). */
static void fill_vals(double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        v[i] = (double)((i * 37 + 11) % 23) / 4.0 - 2.5;
    }
}

/* Checks one reduction of x (whose C-order host values are vals) over mask. */
static void check_reduce(int kind, ev_tensor *x, const double *vals, unsigned mask, int keepdim,
                         double correction, ev_dtype want_dt, double rtol)
{
    int nd = ev_tensor_ndim(x);
    const int64_t *shape = ev_tensor_shape(x);
    int dims[EV_MAX_DIMS], ndims = 0;
    int64_t oshape[EV_MAX_DIMS];
    int ond = 0;
    for (int d = 0; d < nd; d++) {
        if (mask & (1u << d)) {
            /* Alternate negative and positive spellings of the dims. */
            dims[ndims++] = (d % 2) ? d - nd : d;
            if (keepdim) {
                oshape[ond++] = 1;
            }
        } else {
            oshape[ond++] = shape[d];
        }
    }
    int64_t nout = 1;
    for (int d = 0; d < ond; d++) {
        nout *= oshape[d];
    }
    double *want = malloc(sizeof(double) * (size_t)(nout ? nout : 1));
    ref_kind k = {kind, correction};
    ref_reduce_over(vals, nd, shape, mask, ref_kind_fn, &k, want);
    ev_tensor *y;
    CHECK_OK(run_kind(kind, x, ndims, dims, keepdim, correction, &y));
    check_tensor(y, want_dt, ond, oshape, want, rtol);
    ev_tensor_unref(y);
    free(want);
}

/* ------------------------------------------------------------------ tests */

static void test_all_subsets(void)
{
    const int64_t shape[3] = {3, 4, 5};
    double vals[60];
    fill_vals(vals, 60);
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 3, shape, vals);
        double hv[60];
        read_f64(x, hv); /* the values as the dtype holds them */
        double rtol = dt == EV_FLOAT32 ? 2e-6 : 1e-13;
        for (unsigned mask = 0; mask < 8; mask++) {
            for (int keep = 0; keep < 2; keep++) {
                for (int kind = K_SUM; kind <= K_STD; kind++) {
                    if ((kind == K_ARGMAX || kind == K_ARGMIN) && __builtin_popcount(mask) != 1) {
                        continue;
                    }
                    ev_dtype want = kind == K_ARGMAX || kind == K_ARGMIN ? EV_INT64
                                                                         : (ev_dtype)dt;
                    double tol = kind == K_PROD ? rtol * 8 : rtol;
                    check_reduce(kind, x, hv, mask, keep, 1, want, tol);
                    if (kind == K_VAR) {
                        check_reduce(kind, x, hv, mask, keep, 0, want, tol);
                    }
                }
            }
        }
        ev_tensor_unref(x);
    }
}

static void test_full_reduction_and_argmax_flat(void)
{
    double vals[12] = {3, -1, 7, 7, 2, 0, -9, 7, 1, 1, 5, -9};
    ev_tensor *x = tensor_from(EV_FLOAT64, 2, SHAPE(3, 4), vals);
    ev_tensor *y;
    CHECK_OK(ev_sum(&EX, x, 0, NULL, 0, &y));
    check_tensor(y, EV_FLOAT64, 0, NULL, VALS(14), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_sum(&EX, x, 0, NULL, 1, &y));
    check_tensor(y, EV_FLOAT64, 2, SHAPE(1, 1), VALS(14), 0);
    ev_tensor_unref(y);
    /* Ties: the first occurrence wins. */
    CHECK_OK(ev_argmax(&EX, x, NULL, 0, &y));
    check_tensor(y, EV_INT64, 0, NULL, VALS(2), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_argmin(&EX, x, NULL, 1, &y));
    check_tensor(y, EV_INT64, 2, SHAPE(1, 1), VALS(6), 0);
    ev_tensor_unref(y);
    /* ndims == 0 with dims given reduces nothing (NumPy's axis=()). */
    int none[1] = {0};
    CHECK_OK(ev_sum(&EX, x, 0, none, 0, &y));
    check_tensor(y, EV_FLOAT64, 2, SHAPE(3, 4), vals, 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_int_and_bool(void)
{
    double vals[6] = {2147483647, 1, -5, 3, 0, 4};
    ev_tensor *x = tensor_from(EV_INT32, 2, SHAPE(2, 3), vals);
    ev_tensor *y;
    int d1 = 1, d0 = 0;
    /* int32 sums accumulate in int64: no wrap at 2^31. */
    CHECK_OK(ev_sum(&EX, x, 1, &d1, 0, &y));
    check_tensor(y, EV_INT64, 1, SHAPE(2), VALS(2147483643.0, 7), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_prod(&EX, x, 1, &d0, 0, &y));
    check_tensor(y, EV_INT64, 1, SHAPE(3), VALS(6442450941.0, 0, -20), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_max(&EX, x, 1, &d1, 1, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(2, 1), VALS(2147483647, 4), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_argmin(&EX, x, &d1, 0, &y));
    check_tensor(y, EV_INT64, 1, SHAPE(2), VALS(2, 1), 0);
    ev_tensor_unref(y);
    CHECK_EQ(ev_mean(&EX, x, 0, NULL, 0, &y), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "mean: input dtype int32");
    CHECK_EQ(ev_var(&EX, x, 0, NULL, 1, 0, &y), EV_ETYPE);
    ev_tensor_unref(x);

    ev_tensor *b = tensor_from(EV_BOOL, 2, SHAPE(2, 3), VALS(1, 0, 1, 1, 1, 1));
    CHECK_OK(ev_sum(&EX, b, 1, &d1, 0, &y));
    check_tensor(y, EV_INT64, 1, SHAPE(2), VALS(2, 3), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_min(&EX, b, 1, &d1, 0, &y));
    check_tensor(y, EV_BOOL, 1, SHAPE(2), VALS(0, 1), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_argmax(&EX, b, &d1, 0, &y));
    check_tensor(y, EV_INT64, 1, SHAPE(2), VALS(0, 0), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(b);

    /* int64 sums wrap like NumPy. */
    int64_t big[2] = {INT64_MAX, 2};
    ev_tensor *l;
    CHECK_OK(ev_from_host(&EX, EV_INT64, 1, SHAPE(2), big, &l));
    CHECK_OK(ev_sum(&EX, l, 0, NULL, 0, &y));
    int64_t got;
    CHECK_OK(ev_to_host(&EX, y, &got));
    CHECK_EQ(got, INT64_MIN + 1);
    ev_tensor_unref(y);
    ev_tensor_unref(l);
}

/* uint8, int8, int16: sum and prod give int64 (PyTorch; no wrap at the
 * narrow width), max/min keep the dtype, argmax/argmin int64; over the last
 * dim (dense rows), the first (the outer path of wider dtypes) and all. */
static void test_narrow_int(void)
{
    const ev_dtype dts[] = {EV_UINT8, EV_INT8, EV_INT16};
    const double vu[6] = {255, 1, 200, 3, 0, 255};
    const double vs[6] = {-128, 1, 127, -3, 0, 127};
    int d0 = 0, d1 = 1;
    for (int k = 0; k < 3; k++) {
        const double *v = dts[k] == EV_UINT8 ? vu : vs;
        ev_tensor *x = tensor_from(dts[k], 2, SHAPE(2, 3), v), *y;
        CHECK_OK(ev_sum(&EX, x, 1, &d1, 0, &y));
        check_tensor(y, EV_INT64, 1, SHAPE(2), VALS(v[0] + v[1] + v[2], v[3] + v[4] + v[5]), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_sum(&EX, x, 1, &d0, 0, &y));
        check_tensor(y, EV_INT64, 1, SHAPE(3), VALS(v[0] + v[3], v[1] + v[4], v[2] + v[5]), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_prod(&EX, x, 0, NULL, 0, &y));
        check_tensor(y, EV_INT64, 0, NULL, VALS(v[0] * v[1] * v[2] * v[3] * v[4] * v[5]), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_prod(&EX, x, 1, &d0, 0, &y));
        check_tensor(y, EV_INT64, 1, SHAPE(3), VALS(v[0] * v[3], v[1] * v[4], v[2] * v[5]), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_max(&EX, x, 1, &d1, 0, &y));
        check_tensor(y, dts[k], 1, SHAPE(2), VALS(fmax(fmax(v[0], v[1]), v[2]),
                                                 fmax(fmax(v[3], v[4]), v[5])), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_min(&EX, x, 1, &d0, 1, &y));
        check_tensor(y, dts[k], 2, SHAPE(1, 3), VALS(fmin(v[0], v[3]), fmin(v[1], v[4]),
                                                    fmin(v[2], v[5])), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_argmax(&EX, x, NULL, 0, &y));
        check_tensor(y, EV_INT64, 0, NULL, VALS(dts[k] == EV_UINT8 ? 0 : 2), 0);
        ev_tensor_unref(y);
        CHECK_OK(ev_argmin(&EX, x, &d1, 0, &y));
        check_tensor(y, EV_INT64, 1, SHAPE(2), VALS(dts[k] == EV_UINT8 ? 1 : 0,
                                                   dts[k] == EV_UINT8 ? 1 : 0), 0);
        ev_tensor_unref(y);
        CHECK_EQ(ev_mean(&EX, x, 0, NULL, 0, &y), EV_ETYPE);
        CHECK_STR_CONTAINS(ev_last_message(), "mean: input dtype");
        CHECK_STR_CONTAINS(ev_last_message(), "a floating dtype is required");
        ev_tensor_unref(x);
    }
    /* A long uint8 sum: 100000 * 255 is far past 2^16 and exact in int64. */
    const int64_t n = 100000;
    ev_tensor *o, *y;
    CHECK_OK(ev_full(&EX, EV_UINT8, 1, &n, ev_scalar_int(255), &o));
    CHECK_OK(ev_sum(&EX, o, 0, NULL, 0, &y));
    check_tensor(y, EV_INT64, 0, NULL, VALS(25500000), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(o);
}

static void test_non_contiguous(void)
{
    double vals[48];
    fill_vals(vals, 48);
    ev_tensor *base = tensor_from(EV_FLOAT32, 3, SHAPE(4, 3, 4), vals);
    /* A transposed view with a step: shape [4, 3, 2] after the slice. */
    ev_tensor *t, *x;
    CHECK_OK(ev_transpose(base, 0, 2, &t));
    CHECK_OK(ev_slice(t, 2, 0, INT64_MAX, 2, &x));
    CHECK(!ev_tensor_is_contiguous(x));
    int64_t n = ev_tensor_numel(x);
    double hv[48];
    read_f64(x, hv);
    for (unsigned mask = 0; mask < 8; mask++) {
        for (int kind = K_SUM; kind <= K_STD; kind++) {
            if ((kind == K_ARGMAX || kind == K_ARGMIN) && __builtin_popcount(mask) != 1) {
                continue;
            }
            ev_dtype want = kind == K_ARGMAX || kind == K_ARGMIN ? EV_INT64 : EV_FLOAT32;
            check_reduce(kind, x, hv, mask, mask & 1, 1, want, 1e-5);
        }
    }
    (void)n;
    /* An expanded (stride 0) input. */
    ev_tensor *row = tensor_from(EV_FLOAT64, 2, SHAPE(1, 3), VALS(1, 2, 4));
    ev_tensor *e, *y;
    CHECK_OK(ev_expand(row, 2, SHAPE(5, 3), &e));
    int d0 = 0;
    CHECK_OK(ev_sum(&EX, e, 1, &d0, 0, &y));
    check_tensor(y, EV_FLOAT64, 1, SHAPE(3), VALS(5, 10, 20), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(e);
    ev_tensor_unref(row);
    ev_tensor_unref(x);
    ev_tensor_unref(t);
    ev_tensor_unref(base);
}

static void test_nan(void)
{
    ev_tensor *x = tensor_from(EV_FLOAT64, 2, SHAPE(2, 3), VALS(1, NAN, 3, 2, 5, NAN));
    ev_tensor *y;
    int d1 = 1;
    CHECK_OK(ev_max(&EX, x, 1, &d1, 0, &y));
    check_tensor(y, EV_FLOAT64, 1, SHAPE(2), VALS(NAN, NAN), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_argmin(&EX, x, &d1, 0, &y));
    check_tensor(y, EV_INT64, 1, SHAPE(2), VALS(1, 2), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_zero_size_and_0d(void)
{
    ev_tensor *x, *y;
    int d0 = 0, d1 = 1, d2 = 2, dm = -1;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(3, 0), &x));
    CHECK_OK(ev_sum(&EX, x, 1, &d1, 0, &y));
    check_tensor(y, EV_FLOAT32, 1, SHAPE(3), VALS(0, 0, 0), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_prod(&EX, x, 1, &d1, 1, &y));
    check_tensor(y, EV_FLOAT32, 2, SHAPE(3, 1), VALS(1, 1, 1), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_mean(&EX, x, 0, NULL, 0, &y));
    check_tensor(y, EV_FLOAT32, 0, NULL, VALS(NAN), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_var(&EX, x, 1, &d1, 1, 0, &y));
    check_tensor(y, EV_FLOAT32, 1, SHAPE(3), VALS(NAN, NAN, NAN), 0);
    ev_tensor_unref(y);
    /* Reducing the non-empty dim leaves an empty result: fine for max. */
    CHECK_OK(ev_max(&EX, x, 1, &d0, 0, &y));
    CHECK_EQ(ev_tensor_numel(y), 0);
    CHECK_EQ(ev_tensor_shape(y)[0], 0);
    ev_tensor_unref(y);
    CHECK_EQ(ev_max(&EX, x, 1, &d1, 0, &y), EV_EVALUE);
    CHECK_STR_CONTAINS(ev_last_message(), "max: cannot reduce over zero elements");
    CHECK_STR_CONTAINS(ev_last_message(), "[3, 0]");
    CHECK_EQ(ev_argmin(&EX, x, NULL, 0, &y), EV_EVALUE);
    CHECK_STR_CONTAINS(ev_last_message(), "argmin");
    ev_tensor_unref(x);

    ev_tensor *s = tensor_from(EV_FLOAT64, 0, NULL, VALS(4.5));
    CHECK_OK(ev_sum(&EX, s, 0, NULL, 0, &y));
    check_tensor(y, EV_FLOAT64, 0, NULL, VALS(4.5), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_max(&EX, s, 1, &dm, 1, &y));
    check_tensor(y, EV_FLOAT64, 0, NULL, VALS(4.5), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_argmax(&EX, s, &d0, 0, &y));
    check_tensor(y, EV_INT64, 0, NULL, VALS(0), 0);
    ev_tensor_unref(y);
    CHECK_EQ(ev_sum(&EX, s, 1, &d1, 0, &y), EV_EINDEX);
    CHECK_STR_CONTAINS(ev_last_message(), "0-d tensor");
    ev_tensor_unref(s);

    /* Argument errors. */
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(2, 2), &x));
    int dup[2] = {1, -1};
    CHECK_EQ(ev_sum(&EX, x, 2, dup, 0, &y), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "appears more than once");
    CHECK_EQ(ev_sum(&EX, x, 1, &d2, 0, &y), EV_EINDEX);
    CHECK_EQ(ev_sum(&EX, x, 2, NULL, 0, &y), EV_EINVAL);
    CHECK_EQ(ev_reduce(&EX, 99, x, 0, NULL, 0, &y), EV_EINVAL);
    CHECK_EQ(ev_softmax(&EX, x, 2, &y), EV_EINDEX);
    ev_tensor_unref(x);
}

static void test_long_float32_sum(void)
{
    /* 1,000,003 values of 0.1f: a naive float32 loop drifts by ~1e-3
     * relative; pairwise stays within 1e-6 of the float64 sum. */
    int64_t n = 1000003;
    float *h = malloc(sizeof(float) * (size_t)n);
    double want = 0;
    for (int64_t i = 0; i < n; i++) {
        h[i] = 0.1f + (float)(i % 7) * 1e-3f;
        want += h[i];
    }
    ev_tensor *x, *y;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 1, &n, h, &x));
    CHECK_OK(ev_sum(&EX, x, 0, NULL, 0, &y));
    float got;
    CHECK_OK(ev_to_host(&EX, y, &got));
    CHECK_CLOSE(got, want, 1e-6);
    ev_tensor_unref(y);
    CHECK_OK(ev_mean(&EX, x, 0, NULL, 0, &y));
    CHECK_OK(ev_to_host(&EX, y, &got));
    CHECK_CLOSE(got, want / (double)n, 1e-6);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    free(h);
}

static void ref_softmax(const double *v, int64_t n, int64_t stride, int log_, double *out)
{
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) {
        m = fmax(m, v[i * stride]);
    }
    for (int64_t i = 0; i < n; i++) {
        s += exp(v[i * stride] - m);
    }
    for (int64_t i = 0; i < n; i++) {
        double z = v[i * stride] - m;
        out[i * stride] = log_ ? z - log(s) : exp(z) / s;
    }
}

static void test_softmax(void)
{
    /* Large values would overflow exp without subtracting the max. */
    double vals[6] = {1000, 1001, 1002, -3, 0, 3};
    for (int dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *x = tensor_from((ev_dtype)dt, 2, SHAPE(2, 3), vals);
        for (int log_ = 0; log_ < 2; log_++) {
            for (int dim = 0; dim < 2; dim++) {
                double want[6];
                if (dim == 1) {
                    ref_softmax(vals, 3, 1, log_, want);
                    ref_softmax(vals + 3, 3, 1, log_, want + 3);
                } else {
                    for (int j = 0; j < 3; j++) {
                        ref_softmax(vals + j, 2, 3, log_, want + j);
                    }
                }
                ev_tensor *y;
                CHECK_OK(log_ ? ev_log_softmax(&EX, x, dim - 2, &y)
                              : ev_softmax(&EX, x, dim, &y));
                check_tensor(y, (ev_dtype)dt, 2, SHAPE(2, 3), want,
                             dt == EV_FLOAT32 ? 1e-6 : 1e-14);
                ev_tensor_unref(y);
            }
        }
        /* Non-contiguous: the transpose, softmax along its dim 0 = rows. */
        ev_tensor *t, *y;
        CHECK_OK(ev_transpose(x, 0, 1, &t));
        CHECK_OK(ev_softmax(&EX, t, 0, &y));
        double want[6], wt[6];
        ref_softmax(vals, 3, 1, 0, want);
        ref_softmax(vals + 3, 3, 1, 0, want + 3);
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 2; j++) {
                wt[i * 2 + j] = want[j * 3 + i];
            }
        }
        check_tensor(y, (ev_dtype)dt, 2, SHAPE(3, 2), wt, dt == EV_FLOAT32 ? 1e-6 : 1e-14);
        ev_tensor_unref(y);
        ev_tensor_unref(t);
        ev_tensor_unref(x);
    }
    ev_tensor *i, *y, *s;
    CHECK_OK(ev_zeros(&EX, EV_INT64, 1, SHAPE(3), &i));
    CHECK_EQ(ev_softmax(&EX, i, 0, &y), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "softmax: input dtype int64");
    ev_tensor_unref(i);
    s = tensor_from(EV_FLOAT64, 0, NULL, VALS(-7));
    CHECK_OK(ev_log_softmax(&EX, s, 0, &y));
    check_tensor(y, EV_FLOAT64, 0, NULL, VALS(0), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(s);
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(0, 4), &s));
    CHECK_OK(ev_softmax(&EX, s, 1, &y));
    CHECK_EQ(ev_tensor_numel(y), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(s);
}

static void test_outer_path(void)
{
    /* Reducing leading dims of a dense tensor takes the row-accumulating
     * path: integers, NaN, the blocked float sum over many rows, and a
     * kept dim in front of the reduced one. */
    ev_tensor *x, *y;
    int d0 = 0;
    x = tensor_from(EV_INT32, 2, SHAPE(3, 2), VALS(5, -1, 7, -8, 2147483647, 3));
    CHECK_OK(ev_max(&EX, x, 1, &d0, 0, &y));
    check_tensor(y, EV_INT32, 1, SHAPE(2), VALS(2147483647, 3), 0);
    ev_tensor_unref(y);
    CHECK_OK(ev_min(&EX, x, 1, &d0, 1, &y));
    check_tensor(y, EV_INT32, 2, SHAPE(1, 2), VALS(5, -8), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    int64_t big[4] = {INT64_MAX, 1, 1, 2};
    CHECK_OK(ev_from_host(&EX, EV_INT64, 2, SHAPE(2, 2), big, &x));
    CHECK_OK(ev_sum(&EX, x, 1, &d0, 0, &y));
    int64_t got[2];
    CHECK_OK(ev_to_host(&EX, y, got));
    CHECK_EQ(got[0], INT64_MIN);
    CHECK_EQ(got[1], 3);
    ev_tensor_unref(y);
    CHECK_OK(ev_prod(&EX, x, 1, &d0, 0, &y));
    CHECK_OK(ev_to_host(&EX, y, got));
    CHECK_EQ(got[0], INT64_MAX);
    CHECK_EQ(got[1], 2);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    x = tensor_from(EV_FLOAT32, 2, SHAPE(3, 2), VALS(1, NAN, NAN, 2, 3, 4));
    CHECK_OK(ev_max(&EX, x, 1, &d0, 0, &y));
    check_tensor(y, EV_FLOAT32, 1, SHAPE(2), VALS(NAN, NAN), 0);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    /* 20001 rows of 3: sums and means within 1e-6 of float64. */
    int64_t rows = 20001;
    float *h = malloc(sizeof(float) * (size_t)(rows * 3));
    double want[3] = {0, 0, 0};
    for (int64_t i = 0; i < rows * 3; i++) {
        h[i] = 0.1f + (float)(i % 11) * 1e-2f;
        want[i % 3] += h[i];
    }
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 2, SHAPE(rows, 3), h, &x));
    CHECK_OK(ev_sum(&EX, x, 1, &d0, 0, &y));
    check_tensor(y, EV_FLOAT32, 1, SHAPE(3), want, 1e-6);
    ev_tensor_unref(y);
    CHECK_OK(ev_mean(&EX, x, 1, &d0, 0, &y));
    double wm[3] = {want[0] / (double)rows, want[1] / (double)rows, want[2] / (double)rows};
    check_tensor(y, EV_FLOAT32, 1, SHAPE(3), wm, 1e-6);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    free(h);
    /* Kept, reduced, kept: [2, 3, 2] over dim 1. */
    double v[12];
    fill_vals(v, 12);
    x = tensor_from(EV_FLOAT64, 3, SHAPE(2, 3, 2), v);
    for (int kind = K_SUM; kind <= K_MIN; kind++) {
        check_reduce(kind, x, v, 2u, kind % 2, 1, EV_FLOAT64, 1e-15);
    }
    ev_tensor_unref(x);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_all_subsets);
    RUN_TEST(test_full_reduction_and_argmax_flat);
    RUN_TEST(test_int_and_bool);
    RUN_TEST(test_narrow_int);
    RUN_TEST(test_non_contiguous);
    RUN_TEST(test_nan);
    RUN_TEST(test_zero_size_and_0d);
    RUN_TEST(test_long_float32_sum);
    RUN_TEST(test_softmax);
    RUN_TEST(test_outer_path);
    test_teardown();
    return 0;
}
