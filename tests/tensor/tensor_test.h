/* Helpers shared by the tensor-layer tests: one runtime per test program,
 * tensors from literal arrays, and readback as float64 or int64. */
#ifndef EV_TENSOR_TEST_H
#define EV_TENSOR_TEST_H

#include <math.h>
#include <stdlib.h>

#include "eagervm/ops.h"
#include "eagervm/tensor.h"
#include "test.h"

static ev_vm *test_vm;
static ev_exec EX;
static const ev_site test_site = {"tests/tensor", "test", 1};

static void test_setup(void)
{
    CHECK_OK(ev_vm_create(NULL, &test_vm));
    EX.vm = test_vm;
    EX.thread_uid = 0;
    EX.site = &test_site;
}

static void test_teardown(void)
{
    CHECK_OK(ev_synchronize(test_vm, NULL));
    ev_vm_destroy(test_vm);
}

/* The reference of a reduction: C-order host data of shape reduced over the
 * dims in mask, fn applied to each output's n values (ctx passed along),
 * one value per output element (kept dims in order) written to out. */
typedef double (*ref_reduce_fn)(const double *v, int64_t n, const void *ctx);

static inline void ref_reduce_over(const double *data, int ndim, const int64_t *shape,
                                   unsigned mask, ref_reduce_fn fn, const void *ctx,
                                   double *out)
{
    int64_t numel = 1, nred = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        nred *= (mask & (1u << d)) ? shape[d] : 1;
    }
    int64_t nout = nred ? numel / nred : 1;
    for (int d = 0; nred == 0 && d < ndim; d++) {
        nout *= (mask & (1u << d)) ? 1 : shape[d];
    }
    double *bucket = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
    int64_t *fill = calloc((size_t)(nout ? nout : 1), sizeof(int64_t));
    CHECK(bucket && fill);
    for (int64_t e = 0; e < numel; e++) {
        /* Multi-index of e, then the flat index over the kept dims. */
        int64_t rem = e, oi = 0, mul = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            int64_t i = rem % shape[d];
            rem /= shape[d];
            if (!(mask & (1u << d))) {
                oi += i * mul;
                mul *= shape[d];
            }
        }
        bucket[oi * nred + fill[oi]++] = data[e];
    }
    for (int64_t o = 0; o < nout; o++) {
        out[o] = fn(bucket + o * nred, nred, ctx);
    }
    free(bucket);
    free(fill);
}

/* A tensor of dtype from host values given as doubles (converted). */
static inline ev_tensor *tensor_from(ev_dtype dtype, int ndim, const int64_t *shape,
                                     const double *vals)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        n *= shape[i];
    }
    ev_tensor *f, *t;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT64, ndim, shape, vals, &f));
    if (dtype == EV_FLOAT64) {
        return f;
    }
    CHECK_OK(ev_cast(&EX, f, dtype, &t));
    ev_tensor_unref(f);
    (void)n;
    return t;
}

/* Reads any tensor back as float64 values in C order (out has numel slots). */
static inline void read_f64(ev_tensor *t, double *out)
{
    ev_tensor *f;
    CHECK_OK(ev_cast(&EX, t, EV_FLOAT64, &f));
    CHECK_OK(ev_to_host(&EX, f, out));
    ev_tensor_unref(f);
}

static inline void read_i64(ev_tensor *t, int64_t *out)
{
    ev_tensor *f;
    CHECK_OK(ev_cast(&EX, t, EV_INT64, &f));
    CHECK_OK(ev_to_host(&EX, f, out));
    ev_tensor_unref(f);
}

static inline int close_enough(double a, double b, double rtol)
{
    if (isnan(a) || isnan(b)) {
        return isnan(a) && isnan(b);
    }
    if (isinf(a) || isinf(b)) {
        return a == b;
    }
    /* With a tolerance, values below float32's normal range count as equal
     * (float32 results underflow to 0 where float64 references do not). */
    return a == b || (rtol > 0 && fabs(a - b) <= rtol * fabs(b) + 1e-37);
}

#define CHECK_CLOSE(a, b, rtol)                                                   \
    do {                                                                          \
        double ca_ = (a), cb_ = (b);                                              \
        if (!close_enough(ca_, cb_, (rtol))) {                                    \
            EV_CHECK_FAIL_("%s ~= %s (%.17g vs %.17g)", #a, #b, ca_, cb_);         \
        }                                                                         \
    } while (0)

/* Checks t's shape, dtype and values (as doubles, exact unless rtol > 0). */
static inline void check_tensor(ev_tensor *t, ev_dtype dtype, int ndim, const int64_t *shape,
                                const double *want, double rtol)
{
    CHECK_EQ(ev_tensor_dtype(t), dtype);
    CHECK_EQ(ev_tensor_ndim(t), ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        CHECK_EQ(ev_tensor_shape(t)[i], shape[i]);
        n *= shape[i];
    }
    CHECK_EQ(ev_tensor_numel(t), n);
    double *got = malloc(sizeof(double) * (size_t)(n ? n : 1));
    read_f64(t, got);
    for (int64_t i = 0; i < n; i++) {
        if (!close_enough(got[i], want[i], rtol)) {
            fprintf(stderr, "element %lld: got %.17g want %.17g\n", (long long)i, got[i],
                    want[i]);
            CHECK(0);
        }
    }
    free(got);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})

#endif
