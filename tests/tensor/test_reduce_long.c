/* Tests of the vectorized reduction kernels on long inputs: lengths around
 * the lane, chunk and parallel-part boundaries, ties, NaN and infinities at
 * chosen places, for every dtype the kernels specialise; each result is
 * checked against a scalar reference computed here. */
#include <string.h>

#include "tensor_test.h"

/* Lengths that straddle the kernels' boundaries: 4 vectors of lanes (64
 * floats), a chunk (4096), the parallel split (2^18) and its parts. */
static const int64_t lengths[] = {1, 7, 63, 64, 65, 127, 128, 129, 1000, 4095, 4096, 4097,
                                  8191, 70001, 262143, 262144, 262145, 1000003};
#define N_LENGTHS ((int)(sizeof lengths / sizeof lengths[0]))

/* The index of the first max (or min) of v, or of its first NaN. */
static int64_t ref_arg(const double *v, int64_t n, int want_max)
{
    int64_t at = 0;
    for (int64_t i = 1; i < n && !isnan(v[at]); i++) {
        if (isnan(v[i]) || (want_max ? v[i] > v[at] : v[i] < v[at])) {
            at = i;
        }
    }
    return at;
}

/* Small integers with many ties, so that the first occurrence matters. */
static void fill_ties(double *v, int64_t n, unsigned seed)
{
    uint64_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        v[i] = (double)((int64_t)(s >> 40) % 101) - 50;
    }
}

static void check_extrema(ev_dtype dt, const double *v, int64_t n)
{
    ev_tensor *x = tensor_from(dt, 1, &n, v);
    for (int want_max = 0; want_max < 2; want_max++) {
        int64_t want = ref_arg(v, n, want_max);
        ev_tensor *y;
        CHECK_OK(want_max ? ev_argmax(&EX, x, NULL, 0, &y) : ev_argmin(&EX, x, NULL, 0, &y));
        int64_t got;
        read_i64(y, &got);
        if (got != want) {
            fprintf(stderr, "arg%s of %s, n %lld: got %lld, want %lld\n",
                    want_max ? "max" : "min", ev_dtype_name(dt), (long long)n,
                    (long long)got, (long long)want);
        }
        CHECK_EQ(got, want);
        ev_tensor_unref(y);
        CHECK_OK(ev_reduce(&EX, want_max ? EV_REDUCE_MAX : EV_REDUCE_MIN, x, 0, NULL, 0, &y));
        check_tensor(y, dt, 0, NULL, &v[want], 0);
        ev_tensor_unref(y);
    }
    ev_tensor_unref(x);
}

static void test_extrema_long(void)
{
    const ev_dtype dts[] = {EV_FLOAT32, EV_FLOAT64, EV_INT32, EV_INT64, EV_INT16};
    int64_t nmax = lengths[N_LENGTHS - 1];
    double *v = malloc(sizeof(double) * (size_t)nmax);
    for (int d = 0; d < (int)(sizeof dts / sizeof dts[0]); d++) {
        for (int l = 0; l < N_LENGTHS; l++) {
            int64_t n = lengths[l];
            fill_ties(v, n, (unsigned)l);
            check_extrema(dts[d], v, n);
            if (!ev_dtype_is_float(dts[d])) {
                continue;
            }
            /* NaN at the start, in the middle (with a second one later) and
             * at the end; infinities of both signs; only zeros of both
             * signs. */
            int64_t spots[3] = {0, n / 3, n - 1};
            for (int s = 0; s < 3; s++) {
                fill_ties(v, n, (unsigned)l);
                v[spots[s]] = NAN;
                if (spots[s] + 4100 < n) {
                    v[spots[s] + 4100] = NAN;
                }
                check_extrema(dts[d], v, n);
            }
            fill_ties(v, n, (unsigned)l);
            v[n / 2] = INFINITY;
            v[n / 4] = -INFINITY;
            v[n - 1] = INFINITY;
            check_extrema(dts[d], v, n);
            for (int64_t i = 0; i < n; i++) {
                v[i] = i % 3 ? 0.0 : -0.0;
            }
            check_extrema(dts[d], v, n);
        }
    }
    free(v);
}

static void test_extrema_rows_and_columns(void)
{
    /* A (5, 4099) matrix along either dim, and a strided view of it. */
    int64_t r = 5, c = 4099, n = r * c;
    double *v = malloc(sizeof(double) * (size_t)n);
    fill_ties(v, n, 7);
    v[2 * c + 4000] = NAN;
    v[3 * c + 11] = NAN;
    ev_tensor *x = tensor_from(EV_FLOAT32, 2, SHAPE(r, c), v);
    int dim1 = 1, dim0 = 0;
    ev_tensor *y;
    CHECK_OK(ev_argmax(&EX, x, &dim1, 0, &y));
    int64_t got[4099];
    read_i64(y, got);
    for (int64_t i = 0; i < r; i++) {
        CHECK_EQ(got[i], ref_arg(v + i * c, c, 1));
    }
    ev_tensor_unref(y);
    CHECK_OK(ev_argmin(&EX, x, &dim0, 0, &y));
    read_i64(y, got);
    double col[5];
    for (int64_t j = 0; j < c; j++) {
        for (int64_t i = 0; i < r; i++) {
            col[i] = v[i * c + j];
        }
        CHECK_EQ(got[j], ref_arg(col, r, 0));
    }
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    free(v);
}

static void test_sum_long(void)
{
    /* Sums and products of every length agree with float64 references. */
    int64_t nmax = lengths[N_LENGTHS - 1];
    double *v = malloc(sizeof(double) * (size_t)nmax);
    for (int l = 0; l < N_LENGTHS; l++) {
        int64_t n = lengths[l];
        double want = 0;
        for (int64_t i = 0; i < n; i++) {
            v[i] = 0.5 + (double)(i % 13) * 0.125;
            want += v[i];
        }
        for (ev_dtype dt = EV_FLOAT32; dt <= EV_FLOAT64; dt++) {
            ev_tensor *x = tensor_from(dt, 1, &n, v), *y;
            CHECK_OK(ev_sum(&EX, x, 0, NULL, 0, &y));
            check_tensor(y, dt, 0, NULL, &want, dt == EV_FLOAT32 ? 1e-6 : 1e-13);
            ev_tensor_unref(y);
            ev_tensor_unref(x);
        }
    }
    free(v);
}

/* softmax or log_softmax of the n values v[0], v[stride], ... into out
 * (same stride), in float64. */
static void ref_softmax(const double *v, int64_t n, int64_t stride, int log_, double *out)
{
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) {
        m = isnan(v[i * stride]) || v[i * stride] > m ? v[i * stride] : m;
    }
    for (int64_t i = 0; i < n; i++) {
        s += exp(v[i * stride] - m);
    }
    for (int64_t i = 0; i < n; i++) {
        double z = v[i * stride] - m;
        out[i * stride] = log_ ? z - log(s) : exp(z) / s;
    }
}

static void test_softmax_long(void)
{
    /* Rows of 1000 and 70 (lanes plus a tail), along either dim, with a
     * NaN row; float32 against the float64 formula. */
    const int64_t shapes[2][2] = {{3, 1000}, {130, 70}};
    for (int s = 0; s < 2; s++) {
        int64_t r = shapes[s][0], c = shapes[s][1], n = r * c;
        double *v = malloc(sizeof(double) * (size_t)n), *want = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            v[i] = (double)((i * 7919) % 2001) / 100.0 - 10.0;
        }
        v[c + 5] = NAN; /* row 1 (dim=1) and column 5 (dim=0) are NaN */
        ev_tensor *x = tensor_from(EV_FLOAT32, 2, SHAPE(r, c), v);
        /* The reference from the float32 values the kernel sees. */
        double *vf = malloc(sizeof(double) * (size_t)n);
        read_f64(x, vf);
        for (int log_ = 0; log_ < 2; log_++) {
            for (int dim = 0; dim < 2; dim++) {
                if (dim == 1) {
                    for (int64_t i = 0; i < r; i++) {
                        ref_softmax(vf + i * c, c, 1, log_, want + i * c);
                    }
                } else {
                    for (int64_t j = 0; j < c; j++) {
                        ref_softmax(vf + j, r, c, log_, want + j);
                    }
                }
                ev_tensor *y;
                CHECK_OK(log_ ? ev_log_softmax(&EX, x, dim, &y) : ev_softmax(&EX, x, dim, &y));
                check_tensor(y, EV_FLOAT32, 2, SHAPE(r, c), want, 2e-6);
                ev_tensor_unref(y);
            }
        }
        ev_tensor_unref(x);
        free(vf);
        free(want);
        free(v);
    }
}

static void test_any_all_long(void)
{
    /* One deciding element (a zero among ones for all, a one among zeros
     * for any) at the start, past the serial head, in the middle and at
     * the end of long runs; -0.0 is false and NaN true for floats. */
    const ev_dtype dts[] = {EV_BOOL, EV_UINT8, EV_INT16, EV_INT32, EV_INT64, EV_FLOAT32,
                            EV_FLOAT64};
    const int64_t ns[] = {5000, 262144, 1000003};
    double *v = malloc(sizeof(double) * 1000003);
    for (int d = 0; d < (int)(sizeof dts / sizeof dts[0]); d++) {
        int fl = ev_dtype_is_float(dts[d]);
        for (int l = 0; l < 3; l++) {
            int64_t n = ns[l];
            int64_t spots[5] = {0, n > 16385 ? 16385 : n / 3, n / 2, n - 2, n - 1};
            for (int s = -1; s < 5; s++) {
                for (int want_all = 0; want_all < 2; want_all++) {
                    /* all: ones (NaN for floats), one zero (-0.0); any: zeros
                     * (-0.0 for floats), one one. */
                    double base = want_all ? (fl ? NAN : 1) : (fl ? -0.0 : 0);
                    double odd = want_all ? (fl ? -0.0 : 0) : 1;
                    for (int64_t i = 0; i < n; i++) {
                        v[i] = base;
                    }
                    if (s >= 0) {
                        v[spots[s]] = odd;
                    }
                    ev_tensor *x = tensor_from(dts[d], 1, &n, v), *y;
                    CHECK_OK(ev_reduce(&EX, want_all ? EV_REDUCE_ALL : EV_REDUCE_ANY, x, 0,
                                       NULL, 0, &y));
                    /* all is true (any false) only without the odd element. */
                    double want = want_all ? s < 0 : s >= 0;
                    check_tensor(y, EV_BOOL, 0, NULL, &want, 0);
                    ev_tensor_unref(y);
                    ev_tensor_unref(x);
                }
            }
        }
    }
    free(v);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_extrema_long);
    RUN_TEST(test_extrema_rows_and_columns);
    RUN_TEST(test_sum_long);
    RUN_TEST(test_softmax_long);
    RUN_TEST(test_any_all_long);
    test_teardown();
    return 0;
}
