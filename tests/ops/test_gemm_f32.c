/* Our float32 gemm (src/ops/gemm_f32.c, built into this test: its entry
 * points are internal) against a float64 reference: random shapes with
 * every size 1..70 and k = 0, the four transpose combinations, leading
 * dimensions past the columns, negative and non-unit strides, beta 0 (over
 * NaN), 1 and other values, shapes past the cache blocks, exact-size
 * workspaces, untouched memory around C, the upper-triangle mode, and
 * every grid of tasks giving the single task's bits. Then ev_matmul on
 * float32 views (transposed, sliced with steps, reversed, batched, x @ x.T)
 * giving exactly the bits of one direct call: matmul takes our gemm for
 * them, and its split over the intra-op threads changes nothing. Skipped
 * on a CPU without AVX-512. */
#define EV_TEST_CONCURRENCY 1 /* matmul splits over the intra-op threads */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm_f32.h"
#include "tensor/tensor_test.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;

static uint64_t next_u64(void)
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return rng_state >> 11;
}

/* Uniform in [lo, hi]. */
static int64_t irand(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
}

static float frand(void)
{
    return (float)((double)next_u64() * 0x1p-53 * 2.0 - 1.0);
}

/* A 64-byte-aligned block of exactly n floats (n >= 1 rounded up to 16,
 * aligned_alloc's contract), so that an overrun of the workspace shows
 * under ASan. */
static float *alloc_floats(size_t n)
{
    size_t bytes = (n + 15) / 16 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    CHECK(p);
    return p;
}

/* A stored matrix of rows x cols with element strides rs, cs inside a
 * block of size floats starting at base; origin is element [0][0]. */
typedef struct mat {
    float *base, *origin;
    int64_t rows, cols, rs, cs, size;
} mat;

/* Layout kinds: row-major, transposed (column-major), row-major with the
 * rows reversed (negative row stride), and every other element (cs 2). */
enum { ROW_MAJOR, TRANSPOSED, REVERSED, STRIDED, N_LAYOUTS };

static mat make_mat(int64_t rows, int64_t cols, int layout, int64_t pad)
{
    mat x = {.rows = rows, .cols = cols};
    int64_t r = rows > 0 ? rows : 1, c = cols > 0 ? cols : 1;
    switch (layout) {
    case ROW_MAJOR:
        x.rs = c + pad, x.cs = 1, x.size = r * (c + pad);
        break;
    case TRANSPOSED:
        x.rs = 1, x.cs = r + pad, x.size = c * (r + pad);
        break;
    case REVERSED:
        x.rs = -(c + pad), x.cs = 1, x.size = r * (c + pad);
        break;
    default:
        x.rs = 2 * c + pad, x.cs = 2, x.size = r * (2 * c + pad);
        break;
    }
    x.base = alloc_floats((size_t)x.size);
    for (int64_t i = 0; i < x.size; i++) {
        x.base[i] = frand();
    }
    x.origin = layout == REVERSED ? x.base + (r - 1) * (c + pad) : x.base;
    return x;
}

static float at(const mat *x, int64_t i, int64_t j)
{
    return x->origin[i * x->rs + j * x->cs];
}

static const float SENTINEL = 12345.0f;

/* C (m x n, row stride ldc) with a sentinel in the padding and NaN or
 * random values in the tile. */
static float *make_c(int64_t m, int64_t n, int64_t ldc, int nan_fill)
{
    size_t size = (size_t)((m > 0 ? m : 1) * ldc);
    float *c = alloc_floats(size);
    for (size_t i = 0; i < size; i++) {
        int64_t j = (int64_t)i % ldc;
        c[i] = j >= n ? SENTINEL : nan_fill ? NAN : frand();
    }
    return c;
}

/* Runs g as one task (work of exactly the size asked for). */
static void run_one(const ev__sgemm *g)
{
    float *work = alloc_floats(ev__sgemm_work_floats(g, NULL));
    ev__sgemm_run(g, work);
    free(work);
}

/* Runs g task by task on grid, in reverse order (any order must do). */
static void run_grid(const ev__sgemm *g, const ev__sgemm_grid *grid)
{
    float *work = alloc_floats(ev__sgemm_work_floats(g, grid));
    for (int64_t t = grid->rows * grid->cols - 1; t >= 0; t--) {
        ev__sgemm_task(g, grid, t, work);
    }
    free(work);
}

/* Checks C against beta C0 + A B in float64, with a tolerance scaled by k:
 * each product and sum rounds once in float32, so the error is at most
 * about (k + 2) ulp of the sum of the absolute terms. */
static void check_product(const mat *A, const mat *B, const float *c0, const float *c,
                          int64_t m, int64_t n, int64_t k, int64_t ldc, float beta, int upper,
                          const char *what)
{
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = upper ? i : 0; j < ldc; j++) {
            float got = c[i * ldc + j];
            if (j >= n) {
                if (got != SENTINEL) {
                    EV_CHECK_FAIL_("%s: C[%lld][%lld] past the columns changed to %g", what,
                                   (long long)i, (long long)j, (double)got);
                }
                continue;
            }
            double want = 0.0, mag = 0.0;
            for (int64_t p = 0; p < k; p++) {
                double t = (double)at(A, i, p) * (double)at(B, p, j);
                want += t;
                mag += fabs(t);
            }
            if (beta != 0.0f) {
                want += (double)beta * (double)c0[i * ldc + j];
                mag += fabs((double)beta * (double)c0[i * ldc + j]);
            }
            double tol = (double)(k + 2) * 0x1p-23 * mag + 1e-30;
            if (!(fabs((double)got - want) <= tol)) {
                EV_CHECK_FAIL_("%s: m %lld n %lld k %lld: C[%lld][%lld] = %.9g, want %.9g "
                               "(tolerance %.3g)", what, (long long)m, (long long)n, (long long)k,
                               (long long)i, (long long)j, (double)got, want, tol);
            }
        }
    }
}

static const char *const LAYOUT_NAMES[N_LAYOUTS] = {"N", "T", "reversed", "strided"};

/* Bits of C's first m rows equal (upper: on and above the diagonal). */
static int same_bits(const float *x, const float *y, int64_t m, int64_t ldc, int upper)
{
    for (int64_t i = 0; i < m; i++) {
        int64_t j0 = upper ? i : 0;
        if (j0 < ldc && memcmp(x + i * ldc + j0, y + i * ldc + j0,
                               sizeof(float) * (size_t)(ldc - j0)) != 0) {
            return 0;
        }
    }
    return 1;
}

/* One product of the given shape and layouts: C from one task checked
 * against the reference, and every grid's C equal to it bit for bit
 * (upper: only C's upper triangle is wanted and checked). */
static void check_case_upper(int64_t m, int64_t n, int64_t k, int la, int lb, float beta,
                             int64_t pad, int upper)
{
    mat A = make_mat(m, k, la, pad), B = make_mat(k, n, lb, pad);
    int64_t ldc = (n > 0 ? n : 1) + pad;
    float *c = make_c(m, n, ldc, beta == 0.0f);
    size_t csize = (size_t)((m > 0 ? m : 1) * ldc);
    float *c0 = alloc_floats(csize);
    memcpy(c0, c, sizeof(float) * csize);
    ev__sgemm g = {
        .m = m, .n = n, .k = k, .a = A.origin, .a_rs = A.rs, .a_cs = A.cs,
        .b = B.origin, .b_rs = B.rs, .b_cs = B.cs, .c = c, .ldc = ldc, .beta = beta,
        .upper = upper,
    };
    char what[112];
    snprintf(what, sizeof what, "A %s, B %s, beta %g, pad %lld%s", LAYOUT_NAMES[la],
             LAYOUT_NAMES[lb], (double)beta, (long long)pad, upper ? ", upper" : "");
    run_one(&g);
    check_product(&A, &B, c0, c, m, n, k, ldc, beta, upper, what);
    /* Every grid gives the same bits (the order of each sum is fixed). */
    float *c2 = alloc_floats(csize);
    for (int tasks = 2; tasks <= 16; tasks += tasks < 4 ? 1 : tasks < 7 ? 3 : 9) {
        memcpy(c2, c0, sizeof(float) * csize);
        g.c = c2;
        ev__sgemm_grid grid = ev__sgemm_grid_for(&g, tasks);
        CHECK_GE(grid.rows * grid.cols, 1);
        CHECK_LE(grid.rows * grid.cols, tasks);
        CHECK_GE(grid.rows * grid.rows_per, m);
        CHECK_GE(grid.cols * grid.cols_per, n);
        run_grid(&g, &grid);
        if (!same_bits(c, c2, m, ldc, upper)) {
            EV_CHECK_FAIL_("%s: m %lld n %lld k %lld: a grid of %lld x %lld tasks changed bits",
                           what, (long long)m, (long long)n, (long long)k, (long long)grid.rows,
                           (long long)grid.cols);
        }
    }
    free(c2);
    free(c0);
    free(c);
    free(A.base);
    free(B.base);
}

static void check_case(int64_t m, int64_t n, int64_t k, int la, int lb, float beta,
                       int64_t pad)
{
    check_case_upper(m, n, k, la, lb, beta, pad, 0);
}

/* Every size 1..70 in each of m, n and k once (with the others random),
 * over every layout pair; plus k = 0. */
static void test_edge_sizes(void)
{
    for (int64_t s = 1; s <= 70; s++) {
        for (int la = 0; la < N_LAYOUTS; la++) {
            for (int lb = 0; lb < N_LAYOUTS; lb++) {
                int64_t pad = irand(0, 3);
                float beta = (s + la + lb) % 3 == 0 ? 0.0f : (s + la) % 3 == 1 ? 1.0f : -0.75f;
                switch ((s + la * 4 + lb) % 3) {
                case 0:
                    check_case(s, irand(1, 70), irand(1, 70), la, lb, beta, pad);
                    break;
                case 1:
                    check_case(irand(1, 70), s, irand(1, 70), la, lb, beta, pad);
                    break;
                default:
                    check_case(irand(1, 70), irand(1, 70), s, la, lb, beta, pad);
                    break;
                }
            }
        }
    }
}

/* k = 0: C = beta C (0 over NaN for beta 0), A and B never read. */
static void test_k_zero(void)
{
    for (int la = 0; la < N_LAYOUTS; la++) {
        check_case(irand(1, 40), irand(1, 40), 0, la, (la + 1) % N_LAYOUTS, 0.0f, 1);
        check_case(irand(1, 40), irand(1, 40), 0, la, la, 0.5f, 0);
    }
    float c[4] = {NAN, NAN, NAN, SENTINEL};
    ev__sgemm g = {.m = 1, .n = 3, .k = 0, .c = c, .ldc = 4};
    run_one(&g);
    CHECK(c[0] == 0.0f && c[1] == 0.0f && c[2] == 0.0f && c[3] == SENTINEL);
}

/* Exact micro-tile multiples and their neighbours (12 rows, 32 columns). */
static void test_tile_edges(void)
{
    static const int64_t sizes[] = {1, 11, 12, 13, 15, 16, 17, 31, 32, 33, 48, 64, 65};
    size_t ns = sizeof sizes / sizeof sizes[0];
    for (size_t i = 0; i < ns; i++) {
        for (size_t j = 0; j < ns; j++) {
            check_case(sizes[i], sizes[j], sizes[(i + j) % ns], (int)(i % 2), (int)(j % 2),
                       0.0f, (int64_t)((i + j) % 2));
        }
    }
}

/* Past the cache blocks (KC 256, MC 144, NC 1024) and the MLP's shapes. */
static void test_large(void)
{
    check_case(128, 256, 784, ROW_MAJOR, TRANSPOSED, 0.0f, 0);  /* x @ W1.T */
    check_case(256, 784, 128, TRANSPOSED, ROW_MAJOR, 0.0f, 0);  /* g1.T @ x */
    check_case(128, 10, 256, ROW_MAJOR, TRANSPOSED, 0.0f, 0);   /* h @ W2.T */
    check_case(300, 1100, 600, ROW_MAJOR, ROW_MAJOR, 0.0f, 3);  /* several blocks each way */
    check_case(157, 1037, 513, TRANSPOSED, TRANSPOSED, 1.0f, 1);
    check_case(290, 70, 1030, REVERSED, STRIDED, -2.0f, 2);
}

/* Only the upper triangle (a Gram matrix's half): square products of
 * sizes around the micro-tile and the blocks, with many tasks. */
static void test_upper(void)
{
    static const int64_t sizes[] = {1, 5, 12, 13, 32, 33, 70, 145, 300};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t s = sizes[i];
        check_case_upper(s, s, irand(1, 300), (int)(i % N_LAYOUTS), (int)((i + 1) % N_LAYOUTS),
                         i % 3 == 0 ? 0.5f : 0.0f, (int64_t)(i % 2), 1);
    }
    check_case_upper(1100, 1100, 40, ROW_MAJOR, TRANSPOSED, 0.0f, 0, 1); /* past NC */
}

/* Random shapes, layouts and betas. */
static void test_random(void)
{
    for (int i = 0; i < 300; i++) {
        int64_t m = irand(1, 100), n = irand(1, 100), k = irand(0, 300);
        float beta = i % 4 == 0 ? 0.25f : 0.0f;
        check_case(m, n, k, (int)irand(0, N_LAYOUTS - 1), (int)irand(0, N_LAYOUTS - 1), beta,
                   irand(0, 5));
    }
}

/* Special values: an Inf or NaN in A or B reaches C as a sum would take
 * it, and beta 0 never reads C (a NaN there does not leak). */
static void test_special_values(void)
{
    float a[2 * 3] = {1, 2, 3, 4, 5, 6}, b[3 * 2] = {1, 0, 0, 1, INFINITY, 0};
    float c[2 * 2] = {NAN, NAN, NAN, NAN};
    ev__sgemm g = {.m = 2, .n = 2, .k = 3, .a = a, .a_rs = 3, .a_cs = 1, .b = b, .b_rs = 2,
                   .b_cs = 1, .c = c, .ldc = 2};
    run_one(&g);
    CHECK(c[0] == INFINITY && c[1] == 2.0f && c[2] == INFINITY && c[3] == 5.0f);
    b[4] = NAN;
    run_one(&g);
    CHECK(isnan(c[0]) && c[1] == 2.0f && isnan(c[2]) && c[3] == 5.0f);
}

/* ------------------------------------------------------- through matmul */

/* A float32 tensor of shape rows x cols holding host (C order). */
static ev_tensor *f32_tensor(int64_t rows, int64_t cols, const float *host)
{
    int64_t shape[2] = {rows, cols};
    ev_tensor *t;
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 2, shape, host, &t));
    return t;
}

static float *host_rand_f32(int64_t n)
{
    float *v = alloc_floats((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = frand();
    }
    return v;
}

/* ev_matmul(a, b) (n x m, or batch x n x m with batch_stride_a elements
 * between A's matrices and B shared) against one direct call per matrix on
 * the same host data: A[i][p] = ha[i asr + p acs], B[p][j] = hb[p bsr + j
 * bcs]; upper: the product is a Gram matrix (matmul mirrors the upper
 * triangle). Bit for bit. */
static void check_matmul_bits(ev_tensor *a, ev_tensor *b, int64_t batch, int64_t n, int64_t k,
                              int64_t m, const float *ha, int64_t batch_stride_a, int64_t asr,
                              int64_t acs, const float *hb, int64_t bsr, int64_t bcs, int upper,
                              const char *what)
{
    ev_tensor *c;
    CHECK_OK(ev_matmul(&EX, a, b, &c));
    CHECK_EQ(ev_tensor_numel(c), batch * n * m);
    float *got = alloc_floats((size_t)(batch * n * m));
    CHECK_OK(ev_to_host(&EX, c, got));
    ev_tensor_unref(c);
    float *want = alloc_floats((size_t)(n * m));
    for (int64_t bi = 0; bi < batch; bi++) {
        ev__sgemm g = {
            .m = n, .n = m, .k = k, .a = ha + bi * batch_stride_a, .a_rs = asr, .a_cs = acs,
            .b = hb, .b_rs = bsr, .b_cs = bcs, .c = want, .ldc = m, .upper = upper,
        };
        run_one(&g);
        for (int64_t i = 0; upper && i < n; i++) {
            for (int64_t j = 0; j < i; j++) {
                want[i * m + j] = want[j * m + i];
            }
        }
        if (memcmp(got + bi * n * m, want, sizeof(float) * (size_t)(n * m)) != 0) {
            EV_CHECK_FAIL_("%s: matmul's bits differ from one direct call (batch %lld)", what,
                           (long long)bi);
        }
    }
    free(want);
    free(got);
}

static void test_matmul_views(void)
{
    test_setup();
    /* The MLP's forward x @ W.T and its weight gradient g.T @ x: split over
     * the intra-op threads (25M multiply-adds each). */
    float *x = host_rand_f32(128 * 784), *w = host_rand_f32(256 * 784);
    float *gr = host_rand_f32(128 * 256);
    ev_tensor *tx = f32_tensor(128, 784, x), *tw = f32_tensor(256, 784, w);
    ev_tensor *tg = f32_tensor(128, 256, gr), *wt, *gt;
    CHECK_OK(ev_transpose(tw, 0, 1, &wt));
    CHECK_OK(ev_transpose(tg, 0, 1, &gt));
    check_matmul_bits(tx, wt, 1, 128, 784, 256, x, 0, 784, 1, w, 1, 784, 0, "x @ W.T");
    check_matmul_bits(gt, tx, 1, 256, 128, 784, gr, 0, 1, 256, x, 784, 1, 0, "g.T @ x");
    /* Every other row of A, B's columns reversed: no BLAS layout, read as
     * they are. */
    float *p = host_rand_f32(140 * 300), *q = host_rand_f32(300 * 90);
    ev_tensor *tp = f32_tensor(140, 300, p), *tq = f32_tensor(300, 90, q), *ps, *qr;
    CHECK_OK(ev_slice(tp, 0, 0, INT64_MAX, 2, &ps));
    CHECK_OK(ev_slice(tq, 1, INT64_MAX, INT64_MIN, -1, &qr));
    check_matmul_bits(ps, qr, 1, 70, 300, 90, p, 0, 600, 1, q + 89, 90, -1, 0,
                      "X[::2] @ Y[:, ::-1]");
    /* A Gram matrix, through the upper triangle and the mirror. */
    ev_tensor *pt;
    CHECK_OK(ev_transpose(ps, 0, 1, &pt));
    check_matmul_bits(ps, pt, 1, 70, 300, 70, p, 0, 600, 1, p, 1, 600, 1, "x @ x.T");
    float *xs = host_rand_f32(400 * 300);
    ev_tensor *txs = f32_tensor(400, 300, xs), *txt;
    CHECK_OK(ev_transpose(txs, 0, 1, &txt));
    check_matmul_bits(txs, txt, 1, 400, 300, 400, xs, 0, 300, 1, xs, 1, 300, 1,
                      "x @ x.T, split");
    /* A batch of three against one B. */
    int64_t bshape[3] = {3, 40, 50};
    float *ba = host_rand_f32(3 * 40 * 50), *bb = host_rand_f32(50 * 60);
    ev_tensor *tba, *tbb = f32_tensor(50, 60, bb);
    CHECK_OK(ev_from_host(&EX, EV_FLOAT32, 3, bshape, ba, &tba));
    check_matmul_bits(tba, tbb, 3, 40, 50, 60, ba, 40 * 50, 50, 1, bb, 60, 1, 0, "batched");
    ev_tensor *all[] = {tx, tw, tg, wt, gt, tp, tq, ps, qr, pt, txs, txt, tba, tbb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ev_tensor_unref(all[i]);
    }
    float *hosts[] = {x, w, gr, p, q, xs, ba, bb};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        free(hosts[i]);
    }
    test_teardown();
}

int main(void)
{
    if (!ev__sgemm_supported()) {
        fprintf(stderr, "test_gemm_f32: this CPU has no AVX-512; skipped\n");
        return 0;
    }
    RUN_TEST(test_special_values);
    RUN_TEST(test_k_zero);
    RUN_TEST(test_tile_edges);
    RUN_TEST(test_edge_sizes);
    RUN_TEST(test_random);
    RUN_TEST(test_upper);
    RUN_TEST(test_large);
    RUN_TEST(test_matmul_views);
    return 0;
}
