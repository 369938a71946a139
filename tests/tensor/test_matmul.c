/* Tests of matmul: every operand form NumPy's matmul accepts (1-D, 2-D,
 * batched with broadcasting) and every dtype, against a reference product
 * computed here in float64, with transposed, strided and expanded views,
 * the Gram-matrix form x @ x.T, zero-size and large operands, concurrent matmuls on two workers, and the
 * errors raised at the call. */
#define EV_TEST_CONCURRENCY 1
#include "tensor_test.h"

/* NumPy matmul on host float64 arrays in C order. Writes the result shape
 * into oshape/ond and the values into out (which must be large enough). */
static void ref_matmul(const double *A, int and_, const int64_t *ash, const double *B,
                       int bnd, const int64_t *bsh, double *out, int *ond, int64_t *oshape)
{
    int a1 = and_ == 1, b1 = bnd == 1;
    int64_t n = a1 ? 1 : ash[and_ - 2], k = ash[and_ - 1];
    int64_t m = b1 ? 1 : bsh[bnd - 1];
    int nba = a1 ? 0 : and_ - 2, nbb = b1 ? 0 : bnd - 2;
    int nb = nba > nbb ? nba : nbb;
    int64_t bshape[EV_MAX_DIMS];
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - nba), db = d - (nb - nbb);
        int64_t x = da >= 0 ? ash[da] : 1, y = db >= 0 ? bsh[db] : 1;
        bshape[d] = x == 1 ? y : x;
    }
    int64_t nbatch = 1;
    for (int d = 0; d < nb; d++) {
        nbatch *= bshape[d];
        oshape[d] = bshape[d];
    }
    *ond = nb;
    if (!a1) {
        oshape[(*ond)++] = n;
    }
    if (!b1) {
        oshape[(*ond)++] = m;
    }
    for (int64_t bi = 0; bi < nbatch; bi++) {
        /* Batch offsets of a and b, with size-1 dims broadcast. */
        int64_t rem = bi, oa = 0, ob = 0, ma = n * k, mb = k * m;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t i = rem % bshape[d];
            rem /= bshape[d];
            int da = d - (nb - nba), db = d - (nb - nbb);
            if (da >= 0) {
                oa += (ash[da] == 1 ? 0 : i) * ma;
                ma *= ash[da];
            }
            if (db >= 0) {
                ob += (bsh[db] == 1 ? 0 : i) * mb;
                mb *= bsh[db];
            }
        }
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < m; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++) {
                    s += A[oa + i * k + p] * B[ob + p * m + j];
                }
                out[bi * n * m + i * m + j] = s;
            }
        }
    }
}

static void fill(double *v, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++) {
        v[i] = (double)(((i + seed) * 7919 + seed * 31) % 17) - 8;
    }
}

/* matmul(a, b) against the reference on the values a and b hold. */
static void check_matmul(ev_tensor *a, ev_tensor *b, ev_dtype want_dt, double rtol)
{
    int64_t na = ev_tensor_numel(a), nb = ev_tensor_numel(b);
    double *A = malloc(sizeof(double) * (size_t)(na + 1));
    double *B = malloc(sizeof(double) * (size_t)(nb + 1));
    read_f64(a, A);
    read_f64(b, B);
    int ond;
    int64_t oshape[EV_MAX_DIMS];
    /* The result has at most max(na, nb)^2 elements; size generously. */
    int64_t cap = (na + 1) * (nb + 1) + 1;
    double *want = malloc(sizeof(double) * (size_t)cap);
    ref_matmul(A, ev_tensor_ndim(a), ev_tensor_shape(a), B, ev_tensor_ndim(b),
               ev_tensor_shape(b), want, &ond, oshape);
    ev_tensor *c;
    CHECK_OK(ev_matmul(&EX, a, b, &c));
    check_tensor(c, want_dt, ond, oshape, want, rtol);
    ev_tensor_unref(c);
    free(A);
    free(B);
    free(want);
}

static ev_tensor *make(ev_dtype dt, int nd, const int64_t *shape, int seed)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        n *= shape[i];
    }
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    fill(v, n, seed);
    ev_tensor *t = tensor_from(dt, nd, shape, v);
    free(v);
    return t;
}

static void test_forms(void)
{
    static const struct {
        int and_, bnd;
        int64_t as[4], bs[4];
    } cases[] = {
        {2, 2, {3, 4}, {4, 5}},
        {1, 1, {6}, {6}},
        {1, 2, {4}, {4, 3}},
        {2, 1, {3, 4}, {4}},
        {3, 3, {2, 3, 4}, {2, 4, 5}},
        {4, 3, {2, 1, 3, 4}, {3, 4, 2}},
        {1, 3, {4}, {2, 4, 3}},
        {3, 1, {2, 3, 4}, {4}},
        {2, 3, {1, 1}, {3, 1, 1}},
    };
    for (int dt = EV_INT32; dt <= EV_FLOAT64; dt++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            ev_tensor *a = make((ev_dtype)dt, cases[c].and_, cases[c].as, 1);
            ev_tensor *b = make((ev_dtype)dt, cases[c].bnd, cases[c].bs, 2);
            check_matmul(a, b, (ev_dtype)dt, 0);
            ev_tensor_unref(a);
            ev_tensor_unref(b);
        }
    }
    /* Mixed dtypes promote as NumPy: int32 with float32 gives float64. */
    ev_tensor *a = make(EV_INT32, 2, SHAPE(2, 3), 3);
    ev_tensor *b = make(EV_FLOAT32, 2, SHAPE(3, 2), 4);
    check_matmul(a, b, EV_FLOAT64, 0);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

static void test_views(void)
{
    for (int dt = EV_INT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *a0 = make((ev_dtype)dt, 2, SHAPE(7, 5), 5);
        ev_tensor *b0 = make((ev_dtype)dt, 2, SHAPE(6, 7), 6);
        ev_tensor *at, *bt, *as, *bs;
        /* Transposed views: BLAS takes them without a copy. */
        CHECK_OK(ev_transpose(a0, 0, 1, &at));  /* 5 x 7 */
        CHECK_OK(ev_transpose(b0, 0, 1, &bt));  /* 7 x 6 */
        check_matmul(at, bt, (ev_dtype)dt, 0);
        ev_tensor_unref(at);
        ev_tensor_unref(bt);
        /* Stepped slices: no BLAS form, copied first. */
        CHECK_OK(ev_slice(a0, 1, 0, INT64_MAX, 2, &as));   /* 7 x 3 */
        CHECK_OK(ev_slice(b0, 0, 0, INT64_MAX, 2, &bs));   /* 3 x 7 */
        check_matmul(as, bs, (ev_dtype)dt, 0);
        check_matmul(bs, as, (ev_dtype)dt, 0);
        ev_tensor_unref(as);
        ev_tensor_unref(bs);
        /* A column slice as a 1-D operand (stride 5). */
        ev_tensor *col, *v;
        CHECK_OK(ev_slice(a0, 1, 2, 3, 1, &col));
        CHECK_OK(ev_squeeze(col, 1, &v));                   /* 7, stride 5 */
        check_matmul(v, a0, (ev_dtype)dt, 0);  /* 7 . 7x5 */
        check_matmul(b0, v, (ev_dtype)dt, 0);                     /* 6x7 . 7 */
        check_matmul(v, v, (ev_dtype)dt, 0);
        ev_tensor_unref(v);
        ev_tensor_unref(col);
        /* An expanded batch (stride 0). */
        ev_tensor *e;
        CHECK_OK(ev_expand(a0, 3, SHAPE(3, 7, 5), &e));
        ev_tensor *w = make((ev_dtype)dt, 3, SHAPE(3, 5, 2), 7);
        check_matmul(e, w, (ev_dtype)dt, 0);
        ev_tensor_unref(w);
        ev_tensor_unref(e);
        ev_tensor_unref(a0);
        ev_tensor_unref(b0);
    }
}

static void test_large(void)
{
    /* Sizes past the kernel's k block and BLAS's small-matrix paths. */
    ev_tensor *a = make(EV_FLOAT64, 2, SHAPE(130, 300), 8);
    ev_tensor *b = make(EV_FLOAT64, 2, SHAPE(300, 90), 9);
    check_matmul(a, b, EV_FLOAT64, 1e-12);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
    a = make(EV_INT64, 2, SHAPE(67, 300), 10);
    b = make(EV_INT64, 2, SHAPE(300, 45), 11);
    check_matmul(a, b, EV_INT64, 0);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
    a = make(EV_FLOAT32, 2, SHAPE(129, 257), 12);
    b = make(EV_FLOAT32, 2, SHAPE(257, 65), 13);
    check_matmul(a, b, EV_FLOAT32, 1e-5);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
    /* int32 wraps like NumPy. */
    int32_t big[2] = {65536, 65536};
    ev_tensor *x, *c;
    CHECK_OK(ev_from_host(&EX, EV_INT32, 1, SHAPE(2), big, &x));
    CHECK_OK(ev_matmul(&EX, x, x, &c));
    int32_t got;
    CHECK_OK(ev_to_host(&EX, c, &got));
    CHECK_EQ(got, 0);
    ev_tensor_unref(c);
    ev_tensor_unref(x);
}

/* x @ x.T and x.T @ x (B is A's transpose, one storage) give the reference
 * product, both triangles: small ones by gemm, from 128^3 multiply-adds by
 * the Gram-matrix path (syrk and a mirrored triangle, across its tiles). */
static void test_gram(void)
{
    const int64_t shapes[][2] = {{2, 3}, {7, 5}, {64, 9}, {65, 130}, {130, 65}, {200, 1}, {130, 140}};
    ev_dtype dts[] = {EV_FLOAT32, EV_FLOAT64};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t d = 0; d < 2; d++) {
            ev_tensor *x = make(dts[d], 2, shapes[s], (int)s + 3), *xt;
            CHECK_OK(ev_transpose(x, 0, 1, &xt));
            check_matmul(x, xt, dts[d], 1e-6);
            check_matmul(xt, x, dts[d], 1e-6);
            ev_tensor_unref(xt);
            ev_tensor_unref(x);
        }
    }
}

static void test_zero_size(void)
{
    for (int dt = EV_INT32; dt <= EV_FLOAT64; dt++) {
        ev_tensor *a, *b, *c;
        CHECK_OK(ev_zeros(&EX, (ev_dtype)dt, 2, SHAPE(3, 0), &a));
        CHECK_OK(ev_zeros(&EX, (ev_dtype)dt, 2, SHAPE(0, 2), &b));
        CHECK_OK(ev_matmul(&EX, a, b, &c));  /* k = 0: zeros */
        check_tensor(c, (ev_dtype)dt, 2, SHAPE(3, 2), VALS(0, 0, 0, 0, 0, 0), 0);
        ev_tensor_unref(c);
        ev_tensor *z;
        CHECK_OK(ev_zeros(&EX, (ev_dtype)dt, 2, SHAPE(0, 3), &z));
        CHECK_OK(ev_matmul(&EX, z, a, &c));  /* 0 x 0 */
        CHECK_EQ(ev_tensor_numel(c), 0);
        CHECK_EQ(ev_tensor_ndim(c), 2);
        ev_tensor_unref(c);
        ev_tensor_unref(z);
        ev_tensor_unref(a);
        ev_tensor_unref(b);
        CHECK_OK(ev_zeros(&EX, (ev_dtype)dt, 3, SHAPE(0, 2, 3), &a));
        b = make((ev_dtype)dt, 2, SHAPE(3, 4), 1);
        CHECK_OK(ev_matmul(&EX, a, b, &c));  /* empty batch */
        CHECK_EQ(ev_tensor_shape(c)[0], 0);
        CHECK_EQ(ev_tensor_shape(c)[2], 4);
        ev_tensor_unref(c);
        ev_tensor_unref(a);
        ev_tensor_unref(b);
    }
}

/* uint8, int8, int16: the result keeps the promoted dtype and wraps at its
 * width, as NumPy's matmul (an 8-bit accumulator and int32 accumulation
 * wrapped at the end agree); mixed with int8, uint8 promotes to int16. */
static void test_narrow_int(void)
{
    const ev_dtype dts[] = {EV_UINT8, EV_INT8, EV_INT16};
    for (int k = 0; k < 3; k++) {
        /* Values in [0, 2], so no product sum wraps: exact against the
         * reference (batched and 1-d forms). */
        ev_tensor *a = make(EV_INT64, 3, SHAPE(2, 3, 4), 1), *b = make(EV_INT64, 2, SHAPE(4, 2), 2);
        ev_tensor *v = make(EV_INT64, 1, SHAPE(4), 3);
        ev_tensor *three = tensor_from(EV_INT64, 0, NULL, VALS(3));
        ev_tensor *src[3] = {a, b, v}, *nar[3];
        for (int i = 0; i < 3; i++) {
            ev_tensor *ab, *q;
            CHECK_OK(ev_abs(&EX, src[i], &ab));
            CHECK_OK(ev_floor_divide(&EX, ab, three, &q));
            CHECK_OK(ev_cast(&EX, q, dts[k], &nar[i]));
            ev_tensor_unref(ab);
            ev_tensor_unref(q);
        }
        check_matmul(nar[0], nar[1], dts[k], 0);
        check_matmul(nar[0], nar[2], dts[k], 0);
        check_matmul(nar[2], nar[1], dts[k], 0);
        ev_tensor *ts[] = {a, b, v, three, nar[0], nar[1], nar[2]};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
            ev_tensor_unref(ts[i]);
        }
    }
    /* Wrapping: [100, 100] . [100, 100] = 20000, which is 32 as uint8,
     * 32 as int8 and 20000 as int16. */
    const double want[] = {32, 32, 20000};
    for (int k = 0; k < 3; k++) {
        ev_tensor *x = tensor_from(dts[k], 1, SHAPE(2), VALS(100, 100)), *c;
        CHECK_OK(ev_matmul(&EX, x, x, &c));
        check_tensor(c, dts[k], 0, NULL, &want[k], 0);
        ev_tensor_unref(c);
        ev_tensor_unref(x);
    }
    ev_tensor *u = tensor_from(EV_UINT8, 2, SHAPE(1, 2), VALS(200, 255));
    ev_tensor *s = tensor_from(EV_INT8, 2, SHAPE(2, 1), VALS(-1, 2)), *c;
    CHECK_OK(ev_matmul(&EX, u, s, &c));
    check_tensor(c, EV_INT16, 2, SHAPE(1, 1), VALS(310), 0);
    ev_tensor_unref(c);
    ev_tensor_unref(u);
    ev_tensor_unref(s);
}

static void test_errors(void)
{
    ev_tensor *a = make(EV_FLOAT32, 2, SHAPE(2, 3), 1);
    ev_tensor *b = make(EV_FLOAT32, 2, SHAPE(2, 3), 2);
    ev_tensor *s = tensor_from(EV_FLOAT32, 0, NULL, VALS(1));
    ev_tensor *c;
    CHECK_EQ(ev_matmul(&EX, a, b, &c), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "matmul: shapes [2, 3] and [2, 3] are not aligned");
    CHECK_EQ(ev_matmul(&EX, a, s, &c), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "at least 1-d");
    ev_tensor *x = make(EV_FLOAT32, 3, SHAPE(2, 2, 3), 1);
    ev_tensor *y = make(EV_FLOAT32, 3, SHAPE(3, 3, 2), 1);
    CHECK_EQ(ev_matmul(&EX, x, y, &c), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "batch dimensions");
    ev_tensor *t = tensor_from(EV_BOOL, 1, SHAPE(2), VALS(1, 0));
    CHECK_EQ(ev_matmul(&EX, t, t, &c), EV_ETYPE);
    CHECK_STR_CONTAINS(ev_last_message(), "bool");
    CHECK_EQ(ev_matmul(&EX, a, NULL, &c), EV_EINVAL);
    ev_tensor_unref(t);
    ev_tensor_unref(x);
    ev_tensor_unref(y);
    ev_tensor_unref(s);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

static void test_two_workers(void)
{
    /* Matmuls on two workers at once (BLAS called from two threads, the
     * thread policy switching counts), each checked. */
    uint32_t uid;
    CHECK_OK(ev_vm_thread_acquire(test_vm, &uid));
    ev_exec ex2 = EX;
    ex2.thread_uid = uid;
    ev_tensor *a = make(EV_FLOAT32, 2, SHAPE(200, 150), 3);
    ev_tensor *b = make(EV_FLOAT32, 2, SHAPE(150, 120), 4);
    double *A = malloc(sizeof(double) * 200 * 150), *B = malloc(sizeof(double) * 150 * 120);
    double *want = malloc(sizeof(double) * 200 * 120);
    read_f64(a, A);
    read_f64(b, B);
    int ond;
    int64_t osh[EV_MAX_DIMS];
    ref_matmul(A, 2, SHAPE(200, 150), B, 2, SHAPE(150, 120), want, &ond, osh);
    ev_tensor *c[16];
    for (int i = 0; i < 16; i++) {
        CHECK_OK(ev_matmul(i % 2 ? &ex2 : &EX, a, b, &c[i]));
    }
    for (int i = 0; i < 16; i++) {
        check_tensor(c[i], EV_FLOAT32, 2, SHAPE(200, 120), want, 1e-5);
        ev_tensor_unref(c[i]);
    }
    CHECK_OK(ev_synchronize(test_vm, NULL));
    CHECK_OK(ev_vm_thread_release(test_vm, uid));
    free(A);
    free(B);
    free(want);
    ev_tensor_unref(a);
    ev_tensor_unref(b);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_forms);
    RUN_TEST(test_views);
    RUN_TEST(test_large);
    RUN_TEST(test_gram);
    RUN_TEST(test_zero_size);
    RUN_TEST(test_narrow_int);
    RUN_TEST(test_errors);
    RUN_TEST(test_two_workers);
    test_teardown();
    return 0;
}
