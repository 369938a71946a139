/* Copies, casts and fills on tensors large enough for their fast paths (the
 * tiled transposing copy, the split over the intra-op pool, memset and
 * store loops): contiguous() of every permutation of a 3-d tensor in each
 * element size, transposes with ragged edges, negative steps and slices,
 * copy_ into strided views, casts across layouts, and fill_ of strided
 * views. The reference is ev_to_host of the view, which walks the view's
 * strides itself without the copy instruction. */
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

/* A tensor of dtype whose element e is e % 251 (exact in every dtype). */
static ev_tensor *pattern(ev_dtype dt, int nd, const int64_t *shape)
{
    int64_t n = numel_of(nd, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) {
        v[e] = (double)(e % 251);
    }
    ev_tensor *t = tensor_from(dt, nd, shape, v);
    free(v);
    return t;
}

/* t's bytes in C order, read by ev_to_host (owned by the caller). */
static char *host_bytes(ev_tensor *t)
{
    size_t n = (size_t)ev_tensor_numel(t) * ev_dtype_size(ev_tensor_dtype(t));
    char *b = malloc(n ? n : 1);
    CHECK_OK(ev_to_host(&EX, t, b));
    return b;
}

/* Element e of host bytes b of dtype dt, as a double. */
static double elem(const char *b, ev_dtype dt, int64_t e)
{
    switch (dt) {
    case EV_BOOL: case EV_UINT8: return ((const uint8_t *)b)[e];
    case EV_INT8: return ((const int8_t *)b)[e];
    case EV_INT16: return ((const int16_t *)b)[e];
    case EV_INT32: return ((const int32_t *)b)[e];
    case EV_INT64: return (double)((const int64_t *)b)[e];
    case EV_FLOAT32: return ((const float *)b)[e];
    default: return ((const double *)b)[e];
    }
}

/* contiguous(v) has v's shape and, in C order, v's bytes. */
static void check_contiguous(ev_tensor *v)
{
    ev_tensor *c;
    CHECK_OK(ev_contiguous(&EX, v, &c));
    CHECK(ev_tensor_is_contiguous(c));
    CHECK_EQ(ev_tensor_ndim(c), ev_tensor_ndim(v));
    size_t n = (size_t)ev_tensor_numel(v) * ev_dtype_size(ev_tensor_dtype(v));
    char *want = host_bytes(v), *got = host_bytes(c);
    CHECK(memcmp(want, got, n) == 0);
    free(want);
    free(got);
    ev_tensor_unref(c);
}

/* cast(v, dt) equals v's values converted (all exact small integers). */
static void check_cast(ev_tensor *v, ev_dtype dt)
{
    ev_tensor *c;
    CHECK_OK(ev_cast(&EX, v, dt, &c));
    char *want = host_bytes(v), *got = host_bytes(c);
    for (int64_t e = 0; e < ev_tensor_numel(v); e++) {
        double w = elem(want, ev_tensor_dtype(v), e);
        CHECK_CLOSE(elem(got, dt, e), dt == EV_BOOL ? (double)(w != 0) : w, 0);
    }
    free(want);
    free(got);
    ev_tensor_unref(c);
}

static void test_permutations(void)
{
    const ev_dtype dts[] = {EV_UINT8, EV_INT16, EV_FLOAT32, EV_FLOAT64};
    const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int k = 0; k < 4; k++) {
        ev_tensor *x = pattern(dts[k], 3, SHAPE(64, 97, 50));
        for (int p = 0; p < 6; p++) {
            ev_tensor *v;
            CHECK_OK(ev_permute(x, perms[p], &v));
            check_contiguous(v);
            ev_tensor_unref(v);
        }
        ev_tensor_unref(x);
    }
}

static void test_transposes(void)
{
    const ev_dtype dts[] = {EV_INT8, EV_INT16, EV_INT32, EV_INT64};
    const int64_t shapes[][2] = {{1024, 1000}, {33, 1000}, {1000, 7}, {5, 3}, {1, 4000}};
    for (int k = 0; k < 4; k++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            ev_tensor *x = pattern(dts[k], 2, shapes[s]), *t;
            CHECK_OK(ev_transpose(x, 0, 1, &t));
            check_contiguous(t);
            /* Negative steps and every other row of the transpose. */
            ev_tensor *r, *h;
            CHECK_OK(ev_slice(t, 1, INT64_MAX, INT64_MIN, -1, &r));
            check_contiguous(r);
            ev_tensor_unref(r);
            CHECK_OK(ev_slice(t, 0, INT64_MAX, INT64_MIN, -1, &r));
            check_contiguous(r);
            ev_tensor_unref(r);
            CHECK_OK(ev_slice(t, 0, 0, shapes[s][1], 2, &h));
            check_contiguous(h);
            ev_tensor_unref(h);
            ev_tensor_unref(t);
            ev_tensor_unref(x);
        }
    }
    /* A 4-d batch of transposes. */
    ev_tensor *x = pattern(EV_FLOAT32, 4, SHAPE(3, 5, 70, 90)), *v;
    CHECK_OK(ev_permute(x, (const int[]){1, 0, 3, 2}, &v));
    check_contiguous(v);
    ev_tensor_unref(v);
    ev_tensor_unref(x);
}

static void test_copy_into_views_and_casts(void)
{
    /* copy_ of a transposed src into a contiguous dst and back. */
    ev_tensor *a = pattern(EV_FLOAT32, 2, SHAPE(700, 600)), *at, *dst, *dt;
    CHECK_OK(ev_transpose(a, 0, 1, &at));
    CHECK_OK(ev_empty(&EX, EV_FLOAT32, 2, SHAPE(600, 700), &dst));
    CHECK_OK(ev_copy_(&EX, dst, at));
    char *want = host_bytes(at), *got = host_bytes(dst);
    CHECK(memcmp(want, got, sizeof(float) * 700 * 600) == 0);
    free(got);
    /* dst transposed, src contiguous: the same values in dst's own order. */
    ev_tensor *b = pattern(EV_FLOAT32, 2, SHAPE(600, 700));
    CHECK_OK(ev_transpose(dst, 0, 1, &dt));
    ev_tensor *bt;
    CHECK_OK(ev_transpose(b, 0, 1, &bt));
    CHECK_OK(ev_copy_(&EX, dt, bt));
    char *wb = host_bytes(b);
    got = host_bytes(dst);
    CHECK(memcmp(wb, got, sizeof(float) * 700 * 600) == 0);
    free(got);
    free(wb);
    free(want);
    /* Casts, contiguous (split over the pool) and across layouts. */
    const ev_dtype to[] = {EV_INT64, EV_FLOAT64, EV_BOOL, EV_UINT8, EV_INT16, EV_INT32};
    for (size_t k = 0; k < sizeof to / sizeof to[0]; k++) {
        check_cast(a, to[k]);
        check_cast(at, to[k]);
    }
    ev_tensor *i = pattern(EV_INT64, 2, SHAPE(700, 600));
    check_cast(i, EV_FLOAT32);
    check_cast(i, EV_FLOAT64);
    ev_tensor *ts[] = {a, at, dst, dt, b, bt, i};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
        ev_tensor_unref(ts[j]);
    }
}

static void test_fills(void)
{
    /* zeros and full, contiguous and large. */
    ev_tensor *z, *f;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, SHAPE(1024, 1024), &z));
    CHECK_OK(ev_full(&EX, EV_INT16, 2, SHAPE(1024, 1023), ev_scalar_int(-3), &f));
    char *zb = host_bytes(z), *fb = host_bytes(f);
    for (int64_t e = 0; e < 1024 * 1024; e++) {
        CHECK(elem(zb, EV_FLOAT32, e) == 0 && !signbit(elem(zb, EV_FLOAT32, e)));
    }
    for (int64_t e = 0; e < 1024 * 1023; e++) {
        CHECK(elem(fb, EV_INT16, e) == -3);
    }
    free(zb);
    free(fb);
    /* fill_ of a strided view (every other column of a transpose) changes
     * exactly its elements. */
    const ev_dtype dts[] = {EV_UINT8, EV_INT16, EV_FLOAT32, EV_FLOAT64};
    for (int k = 0; k < 4; k++) {
        ev_tensor *x = pattern(dts[k], 2, SHAPE(900, 800)), *t, *h;
        CHECK_OK(ev_transpose(x, 0, 1, &t));
        CHECK_OK(ev_slice(t, 1, 0, 900, 2, &h));
        CHECK_OK(ev_fill_(&EX, h, ev_scalar_float(7.0)));
        char *b = host_bytes(x);
        for (int64_t e = 0; e < 900 * 800; e++) {
            int64_t row = e / 800; /* x's row: t's column */
            double want = row % 2 == 0 ? 7.0 : (double)(e % 251);
            CHECK_CLOSE(elem(b, dts[k], e), want, 0);
        }
        free(b);
        CHECK_OK(ev_fill_(&EX, t, ev_scalar_int(0)));
        b = host_bytes(x);
        for (int64_t e = 0; e < 900 * 800; e++) {
            CHECK(elem(b, dts[k], e) == 0);
        }
        free(b);
        ev_tensor_unref(h);
        ev_tensor_unref(t);
        ev_tensor_unref(x);
    }
    ev_tensor_unref(z);
    ev_tensor_unref(f);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_permutations);
    RUN_TEST(test_transposes);
    RUN_TEST(test_copy_into_views_and_casts);
    RUN_TEST(test_fills);
    test_teardown();
    return 0;
}
