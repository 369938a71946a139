/* matmul with NumPy semantics (1-D and 2-D operands, batches with broadcast
 * batch dimensions): float32 through our AVX-512 gemm (gemm_f32.c) where the
 * CPU has it and the shape suits it, other floats through OpenBLAS when the
 * build found it, integers (and floats without BLAS) through our own simple
 * kernel; the BLAS thread policy that keeps BLAS threads and eagervm workers
 * from oversubscribing. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "ops/gemm_f32.h"
#include "ops/ops-impl.h"

#ifdef EV_HAVE_BLAS
#include <cblas.h>
#endif

/* ------------------------------------------------------- built-in kernel */

/* C (n x m, contiguous) = A (n x k, strides asr, asc) . B (k x m, strides
 * bsr, bsc), in elements. i-p-j order so that the innermost loop runs along
 * a row of C and of B (vectorized when B's rows are dense), with k cut into
 * blocks so that a block of B rows stays in cache while C's row is updated.
 * Integers accumulate in the unsigned twin: wraps like NumPy, no UB. */
#define KBLOCK 128
#define GEMM_REF(SUF, T, U)                                                        \
    static void gemm_##SUF(int64_t n, int64_t k, int64_t m, const T *A, int64_t asr, \
                           int64_t asc, const T *B, int64_t bsr, int64_t bsc, T *C)  \
    {                                                                              \
        memset(C, 0, sizeof(T) * (size_t)(n * m));                                 \
        for (int64_t p0 = 0; p0 < k; p0 += KBLOCK) {                               \
            int64_t p1 = p0 + KBLOCK < k ? p0 + KBLOCK : k;                        \
            for (int64_t i = 0; i < n; i++) {                                      \
                T *restrict c = C + i * m;                                         \
                for (int64_t p = p0; p < p1; p++) {                                \
                    U av = (U)A[i * asr + p * asc];                                \
                    const T *restrict b = B + p * bsr;                             \
                    if (bsc == 1) {                                                \
                        for (int64_t j = 0; j < m; j++) {                          \
                            c[j] = (T)((U)c[j] + av * (U)b[j]);                    \
                        }                                                          \
                    } else {                                                       \
                        for (int64_t j = 0; j < m; j++) {                          \
                            c[j] = (T)((U)c[j] + av * (U)b[j * bsc]);              \
                        }                                                          \
                    }                                                              \
                }                                                                  \
            }                                                                      \
        }                                                                          \
    }
GEMM_REF(i32, int32_t, uint32_t)
GEMM_REF(i64, int64_t, uint64_t)
GEMM_REF(f32, float, float)
GEMM_REF(f64, double, double)

/* ------------------------------------------------------------------ BLAS */

/* The BLAS form of a rows x cols matrix with element strides sr, sc: 0 for
 * row-major ("no transpose", leading dimension sr), 1 for column-major
 * ("transpose", leading dimension sc), -1 if BLAS cannot take it (then the
 * caller makes it contiguous). A dimension of size 1 may have any stride. */
static int blas_form(int64_t rows, int64_t cols, int64_t sr, int64_t sc, int64_t *ld)
{
    if ((cols <= 1 || sc == 1) && (rows <= 1 || sr >= cols)) {
        *ld = rows <= 1 ? (cols > 1 ? cols : 1) : sr;
        return 0;
    }
    if ((rows <= 1 || sr == 1) && (cols <= 1 || sc >= rows)) {
        *ld = cols <= 1 ? (rows > 1 ? rows : 1) : sc;
        return 1;
    }
    return -1;
}

#ifdef EV_HAVE_BLAS
/* BLAS thread policy. NumPy lets one large matmul use every core, and so do
 * we when it runs alone; but a gemm shares the cores with the other busy
 * workers and their split loops and BLAS calls, and OpenBLAS threads per
 * call would oversubscribe them. So a large gemm takes its threads from the
 * core budget of the intra-op pool (ev__parallel_enter: the CPUs divided by
 * the busy kernels, less what the other large ops hold). The OpenBLAS
 * setting is process-wide and applies to calls that start after it, so a
 * call already running keeps its threads until it returns: the budget
 * bounds what each call asks for when it starts. Known cost: OpenBLAS's
 * sgemm/dgemm bits depend on its thread count (it partitions the product
 * differently), so a large gemm's last bits now depend on whether another
 * worker was busy when it started, as they did before on whether another
 * gemm was running. (Float32 products that our gemm takes do not: their
 * bits depend on the shape alone, see gemm_f32.h.) */
/* Under ThreadSanitizer, OpenBLAS runs single-threaded: its threads hand
 * work over through spin flags in uninstrumented code, which TSan cannot see
 * and reports as races on our buffers. On the calling worker the accesses
 * are ordered by the engine, which TSan does see. */
#if defined(__SANITIZE_THREAD__)
#define EV_BLAS_ONE_THREAD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EV_BLAS_ONE_THREAD 1
#endif
#endif

static atomic_int blas_threads;   /* last count given to OpenBLAS; 0: never set */

static int ncores(void)
{
    static atomic_int cached;
    /* Relaxed: every thread computes the same value. */
    int n = atomic_load_explicit(&cached, memory_order_relaxed);
    if (n == 0) {
        long v = sysconf(_SC_NPROCESSORS_ONLN);
        n = v > 0 ? (int)v : 1;
        atomic_store_explicit(&cached, n, memory_order_relaxed);
    }
    return n;
}

/* Below this many multiply-adds a gemm runs on one thread: splitting it
 * costs more than it gains, and its worker's peers are the parallelism
 * (two Threads each running a loop of small matmuls). */
#define BLAS_SPLIT_MIN ((int64_t)1 << 22)

/* Sets OpenBLAS's threads for the call that follows; returns the grant to
 * hand to blas_leave (0: none taken). */
static int blas_enter(int64_t macs)
{
    int grant = macs < BLAS_SPLIT_MIN ? 0 : ev__parallel_enter();
    /* More threads than CPUs (EAGERVM_INTRAOP_THREADS set high) would only
     * oversubscribe them: OpenBLAS's own default is one per CPU. */
    int want = grant > ncores() ? ncores() : grant;
    want = want < 1 ? 1 : want;
#ifdef EV_BLAS_ONE_THREAD
    want = 1;
#endif
    /* Relaxed: the last value set, to skip a call that changes nothing; no
     * memory is published through it. */
    if (atomic_exchange_explicit(&blas_threads, want, memory_order_relaxed) != want) {
        openblas_set_num_threads(want);
    }
    return grant;
}

static void blas_leave(int grant)
{
    if (grant > 0) {
        ev__parallel_leave(grant);
    }
}
#endif

/* ------------------------------------------------------- our float32 gemm */

/* 1 if our gemm computes a float32 product with C rows x cols and depth k:
 * the CPU runs its AVX-512 kernel and the shape reuses the packed panels.
 * Measured against OpenBLAS 0.3.21 on one thread (bench/gemm_f32.c, Zen 5
 * EPYC): ours is 1.7-2x faster from 32^3 to 1024^3 and on the MLP's
 * matmuls, 1.3-1.5x with 10 columns, even at 8 columns and at 4 rows;
 * BLAS wins for fewer columns (a tile is mostly padding: 0.75x at 1 and
 * 2) and for one row on a large B, which packing only copies (gemv's
 * stream: 0.65x at 1 x 4096 x 4096). Depends on the shape and the CPU
 * only, so the issuing side and the kernel agree. */
static int own_sgemm(int64_t rows, int64_t cols, int64_t k)
{
    return k > 0 && rows >= 4 && cols >= 8 && ev__sgemm_supported();
}

/* The least multiply-adds a task of a split product gets, so a product
 * splits from twice this (2^19, a 64 x 128 x 64 product, ~4 us on one
 * core): a 64 x 64 x 64 product already ran ~1.4x faster on the two cores
 * in a loop of them, but a hand-off costs a few microseconds when the
 * helper has parked or the other core is busy, and the MLP step's small
 * products (128 x 256 x 10) showed no clear gain from splitting on this
 * shared machine. On more cores it keeps small products from being cut
 * into slivers. */
#define SGEMM_TASK_MIN ((int64_t)1 << 18)

/* The packing workspace of each thread that issues our gemm: every chunk
 * of tasks running for a call uses its own slice of the calling thread's
 * block, so the helpers that run some of them need none of their own. Kept between calls (a
 * training step would otherwise allocate a few hundred KB per matmul) and
 * freed when the thread exits. */
static EV_TLS_FAST float *sgemm_ws;
static EV_TLS_FAST size_t sgemm_ws_floats;
static pthread_key_t sgemm_ws_key;
static pthread_once_t sgemm_ws_once = PTHREAD_ONCE_INIT;

static void sgemm_ws_key_create(void)
{
    pthread_key_create(&sgemm_ws_key, ev__free);
}

/* The calling thread's workspace of at least floats floats (64-byte
 * aligned); NULL when it cannot grow (then the caller takes another path). */
static float *sgemm_workspace(size_t floats)
{
    if (sgemm_ws_floats >= floats) {
        return sgemm_ws;
    }
    pthread_once(&sgemm_ws_once, sgemm_ws_key_create);
    /* A little more than asked, so that slowly growing shapes do not
     * reallocate every time. */
    floats += floats / 4;
    float *p = ev__aligned_malloc(64, floats * sizeof(float));
    if (!p || pthread_setspecific(sgemm_ws_key, p) != 0) {
        ev__free(p);
        return NULL; /* the old block stays registered and in use */
    }
    ev__free(sgemm_ws);
    sgemm_ws = p;
    sgemm_ws_floats = floats;
    return p;
}

/* Slices of the workspace: at most one per thread of the process's intra-
 * op budget (MAX_SLICES bounds it), claimed by a chunk of tasks while it
 * runs; so a call needs threads slices, not one per task. */
#define MAX_SLICES 16

typedef struct sgemm_job {
    const ev__sgemm *g;      /* borrowed from the caller's frame */
    ev__sgemm_grid grid;
    float *work;             /* the caller's workspace, cut in slices */
    size_t slice;            /* floats per slice */
    uint32_t slices;         /* slices in work (<= MAX_SLICES) */
    _Atomic uint32_t busy;   /* bit s: slice s is in use by a running chunk */
} sgemm_job;

static void sgemm_range(int64_t lo, int64_t hi, void *ctx)
{
    sgemm_job *j = ctx;
    /* No more chunks run at once than there are slices (one per thread
     * that may run a chunk), so a free one exists. acquire on success,
     * pairing with the release of the chunk that gave the slice back: its
     * reads of the slice happen before our writes. Relaxed on failure and
     * for the first load: they only pick the bit to try. */
    uint32_t busy = atomic_load_explicit(&j->busy, memory_order_relaxed), s;
    do {
        s = (uint32_t)__builtin_ctz(~busy);
    } while (!atomic_compare_exchange_weak_explicit(&j->busy, &busy, busy | 1u << s,
                                                    memory_order_acquire,
                                                    memory_order_relaxed));
    EV_ASSERT(s < j->slices);
    for (int64_t t = lo; t < hi; t++) {
        ev__sgemm_task(j->g, &j->grid, t, j->work + s * j->slice);
    }
    atomic_fetch_and_explicit(&j->busy, ~(1u << s), memory_order_release);
}

/* C (n x m, contiguous) = A B with our gemm, split over the intra-op
 * threads when large (the grid's tasks are claimed by whichever threads
 * the core budget grants; the bits do not depend on which, see
 * gemm_f32.h). upper: only the upper triangle is wanted (see
 * ev__sgemm.upper). Returns -1, having written nothing, if the workspace
 * cannot be had. */
static int sgemm_own(int64_t n, int64_t k, int64_t m, const float *A, int64_t asr, int64_t asc,
                     const float *B, int64_t bsr, int64_t bsc, float *C, int upper)
{
    ev__sgemm g = {
        .m = n, .n = m, .k = k, .a = A, .a_rs = asr, .a_cs = asc,
        .b = B, .b_rs = bsr, .b_cs = bsc, .c = C, .ldc = m, .beta = 0.0f, .upper = upper,
    };
    /* The triangle's tiles are uneven (those on the diagonal are half
     * work, those below none): more tasks than threads even it out. */
    int64_t max_tasks = (int64_t)ev__intraop_threads() * (upper ? 4 : 1);
    int64_t by_size = n * k * m / SGEMM_TASK_MIN;
    max_tasks = by_size < max_tasks ? (by_size > 1 ? by_size : 1) : max_tasks;
    sgemm_job job = {.g = &g, .grid = ev__sgemm_grid_for(&g, (int)max_tasks)};
    int64_t tasks = job.grid.rows * job.grid.cols;
    int threads = ev__intraop_threads();
    job.slices = (uint32_t)(tasks < threads ? tasks : threads);
    EV_ASSERT(job.slices <= MAX_SLICES);
    /* Slices stay 64-byte aligned. */
    job.slice = (ev__sgemm_work_floats(&g, &job.grid) + 15) / 16 * 16;
    job.work = sgemm_workspace(job.slice * job.slices);
    if (!job.work) {
        return -1;
    }
    if (tasks == 1) {
        ev__sgemm_run(&g, job.work);
    } else {
        ev__parallel_for(tasks, 1, sgemm_range, &job);
    }
    return 0;
}

/* ------------------------------------------------------------ instruction */

typedef struct mm_arg {
    ev_tensor *a, *b;        /* referenced; both have the output's dtype */
    /* The output by value, not referenced: the engine keeps its storage
     * until the kernel ran, and a product the program drops at once then
     * leaves its block to the stream's next allocation (stream-ordered
     * reuse) instead of holding it until the worker gets there. */
    char *out_ptr;
    ev_dtype out_dtype;
    int out_ndim;
    int64_t out_numel;
    int64_t out_shape[EV_MAX_DIMS];
    int64_t n, k, m;
    int a1d, b1d;            /* operand was 1-D (promoted to a row/column) */
    int use_blas;            /* float dtype and BLAS available */
    int use_own;             /* float32 through our gemm (own_sgemm) */
} mm_arg;
_Static_assert(sizeof(mm_arg) <= EV_INLINE_ARG_SIZE, "mm_arg must travel inline");

static void mm_drop(void *p)
{
    mm_arg *a = p;
    ev_tensor_unref(a->a);
    ev_tensor_unref(a->b);
}

/* Matrix strides (elements) of operand t: the last two dims, or a 1-D
 * vector taken as a row (as_row) or a column. */
static void mat_strides(const ev_tensor *t, int is1d, int as_row, int64_t *sr, int64_t *sc)
{
    if (is1d) {
        *sr = as_row ? 0 : t->strides[0];
        *sc = as_row ? t->strides[0] : 0;
    } else {
        *sr = t->strides[t->ndim - 2];
        *sc = t->strides[t->ndim - 1];
    }
}

/* C = A A^T when B is A's transpose (x @ x.T, a Gram matrix): the product
 * is symmetric, so syrk (or our gemm told so) computes one triangle with
 * half gemm's multiply-adds and the other is mirrored, as NumPy's matmul
 * does. The mirror copy goes in tiles so that both sides stay in cache. */
#define MIRROR_TILE 64
/* Below this many multiply-adds (a 128 x 128 x 128 product) syrk's fixed
 * costs and the mirror outweigh the halved work: plain gemm. */
#define GRAM_MIN_MACS ((int64_t)1 << 21)
static void mirror_upper(char *C, int64_t n, size_t esz)
{
    for (int64_t i0 = 0; i0 < n; i0 += MIRROR_TILE) {
        for (int64_t j0 = 0; j0 <= i0; j0 += MIRROR_TILE) {
            int64_t i1 = i0 + MIRROR_TILE < n ? i0 + MIRROR_TILE : n;
            int64_t j1 = j0 + MIRROR_TILE < n ? j0 + MIRROR_TILE : n;
            for (int64_t i = i0; i < i1; i++) {
                for (int64_t j = j0; j < j1 && j < i; j++) {
                    memcpy(C + (size_t)(i * n + j) * esz, C + (size_t)(j * n + i) * esz, esz);
                }
            }
        }
    }
}

#ifdef EV_HAVE_BLAS
static void gram(const mm_arg *a, ev_dtype dt, enum CBLAS_TRANSPOSE TA, int64_t lda,
                 const char *A, char *C)
{
    int64_t n = a->n, k = a->k;
    int grant = blas_enter(n * k * n / 2);
    if (dt == EV_FLOAT32) {
        cblas_ssyrk(CblasRowMajor, CblasUpper, TA, (blasint)n, (blasint)k, 1.0f,
                    (const float *)A, (blasint)lda, 0.0f, (float *)C, (blasint)n);
    } else {
        cblas_dsyrk(CblasRowMajor, CblasUpper, TA, (blasint)n, (blasint)k, 1.0,
                    (const double *)A, (blasint)lda, 0.0, (double *)C, (blasint)n);
    }
    blas_leave(grant);
    mirror_upper(C, n, ev__dsize(dt));
}
#endif

static void gemm_one(const mm_arg *a, ev_dtype dt, const char *A, const char *B, char *C)
{
    int64_t n = a->n, k = a->k, m = a->m;
    int64_t asr, asc, bsr, bsc;
    mat_strides(a->a, a->a1d, 1, &asr, &asc);
    mat_strides(a->b, a->b1d, 0, &bsr, &bsc);
    if (k == 0) {
        memset(C, 0, ev__dsize(dt) * (size_t)(n * m));
        return;
    }
    int is_gram = A == B && n == m && n * n * k >= GRAM_MIN_MACS && asr == bsc && asc == bsr;
    if (a->use_own &&
        sgemm_own(n, k, m, (const float *)A, asr, asc, (const float *)B, bsr, bsc, (float *)C,
                  is_gram) == 0) {
        if (is_gram) {
            mirror_upper(C, n, sizeof(float));
        }
        return;
    }
#ifdef EV_HAVE_BLAS
    int64_t lda = 0, ldb = 0;
    int ta = a->use_blas ? blas_form(n, k, asr, asc, &lda) : -1;
    int tb = a->use_blas ? blas_form(k, m, bsr, bsc, &ldb) : -1;
    /* ta, tb >= 0 unless our gemm was to take the product: the issuing
     * side made the operand contiguous otherwise. */
    enum CBLAS_TRANSPOSE TA = ta > 0 ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE TB = tb > 0 ? CblasTrans : CblasNoTrans;
    if (ta >= 0 && is_gram) {
        gram(a, dt, TA, lda, A, C);
        return;
    }
    if (ta >= 0 && tb >= 0) {
        int grant = blas_enter(n * k * m);
        if (dt == EV_FLOAT32) {
            cblas_sgemm(CblasRowMajor, TA, TB, (blasint)n, (blasint)m, (blasint)k, 1.0f,
                        (const float *)A, (blasint)lda, (const float *)B, (blasint)ldb, 0.0f,
                        (float *)C, (blasint)(m > 1 ? m : 1));
        } else {
            cblas_dgemm(CblasRowMajor, TA, TB, (blasint)n, (blasint)m, (blasint)k, 1.0,
                        (const double *)A, (blasint)lda, (const double *)B, (blasint)ldb, 0.0,
                        (double *)C, (blasint)(m > 1 ? m : 1));
        }
        blas_leave(grant);
        return;
    }
#endif
    switch (dt) {
    case EV_INT32:
        gemm_i32(n, k, m, (const int32_t *)A, asr, asc, (const int32_t *)B, bsr, bsc,
                 (int32_t *)C);
        break;
    case EV_INT64:
        gemm_i64(n, k, m, (const int64_t *)A, asr, asc, (const int64_t *)B, bsr, bsc,
                 (int64_t *)C);
        break;
    case EV_FLOAT32:
        gemm_f32(n, k, m, (const float *)A, asr, asc, (const float *)B, bsr, bsc, (float *)C);
        break;
    default:
        gemm_f64(n, k, m, (const double *)A, asr, asc, (const double *)B, bsr, bsc,
                 (double *)C);
        break;
    }
}

static int mm_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    mm_arg *a = p;
    const ev_tensor *ta = a->a, *tb = a->b;
    if (a->out_numel == 0) {
        return 0;
    }
    ev_dtype dt = a->out_dtype;
    int64_t esz = (int64_t)ev__dsize(dt);
    /* Batch dimensions: the output's leading ones; each operand's own batch
     * dims align at the right, and a size-1 or missing one broadcasts. */
    int nb = a->out_ndim - (a->a1d ? 0 : 1) - (a->b1d ? 0 : 1);
    int64_t sa[EV_MAX_DIMS] = {0}, sb[EV_MAX_DIMS] = {0};
    int nba = a->a1d ? 0 : ta->ndim - 2, nbb = a->b1d ? 0 : tb->ndim - 2;
    for (int i = 0; i < nba; i++) {
        int d = nb - nba + i;
        sa[d] = ta->shape[i] == 1 ? 0 : ta->strides[i] * esz;
    }
    for (int i = 0; i < nbb; i++) {
        int d = nb - nbb + i;
        sb[d] = tb->shape[i] == 1 ? 0 : tb->strides[i] * esz;
    }
    int64_t nbatch = 1;
    for (int d = 0; d < nb; d++) {
        nbatch *= a->out_shape[d];
    }
    /* An empty operand (k == 0) has no storage block: never offset it. */
    char *A = ev__tensor_ptr(ta), *B = ev__tensor_ptr(tb), *C = a->out_ptr;
    int64_t idx[EV_MAX_DIMS] = {0}, offa = 0, offb = 0;
    int64_t cstep = a->n * a->m * esz;
    for (int64_t bi = 0; bi < nbatch; bi++) {
        gemm_one(a, dt, A ? A + offa : NULL, B ? B + offb : NULL, C + bi * cstep);
        for (int d = nb - 1; d >= 0; d--) {
            offa += sa[d];
            offb += sb[d];
            if (++idx[d] < a->out_shape[d]) {
                break;
            }
            offa -= sa[d] * a->out_shape[d];
            offb -= sb[d] * a->out_shape[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* Replaces *t (a reference the caller owns) by a contiguous copy, dropping
 * the old reference. */
static int make_contiguous(const ev_exec *ex, ev_tensor **t)
{
    ev_tensor *c;
    int rc = ev_contiguous(ex, *t, &c);
    if (rc == 0) {
        ev_tensor_unref(*t);
        *t = c;
    }
    return rc;
}

int ev_matmul(const ev_exec *ex, ev_tensor *a, ev_tensor *b, ev_tensor **out)
{
    const char *name = "matmul";
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "a", a)) ||
        (rc = ev__check_tensor(name, "b", b))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    /* The shapes are formatted only for an error message (a tiny matmul
     * would spend a tenth of its time printing them). */
    char sa[EV__SHAPE_STR_SIZE], sb[EV__SHAPE_STR_SIZE];
#define SHAPES() (ev__shape_str(a->ndim, a->shape, sa, sizeof sa), \
                  ev__shape_str(b->ndim, b->shape, sb, sizeof sb))
    if (a->ndim == 0 || b->ndim == 0) {
        SHAPES();
        return ev__set_message(EV_EINVAL, "%s: operands must be at least 1-d (shapes %s and "
                               "%s); use mul for scalars", name, sa, sb);
    }
    ev_dtype r = ev_promote_types(a->dtype, b->dtype);
    if (r == EV_DTYPE_COUNT || r == EV_BOOL) {
        return ev__set_message(EV_ETYPE, "%s: not supported for dtypes %s and %s", name,
                               ev_dtype_name(a->dtype), ev_dtype_name(b->dtype));
    }
    /* Computed in the compute dtype, then cast to the result dtype when
     * they differ (uint8 computes in int32: wrapping to 8 bits at the end
     * gives what a uint8 accumulator would). */
    ev_dtype res = r;
    r = ev_dtype_get_info(r)->compute;
    int a1d = a->ndim == 1, b1d = b->ndim == 1;
    int64_t n = a1d ? 1 : a->shape[a->ndim - 2];
    int64_t k = a->shape[a->ndim - 1];
    int64_t kb = b1d ? b->shape[0] : b->shape[b->ndim - 2];
    int64_t m = b1d ? 1 : b->shape[b->ndim - 1];
    if (k != kb) {
        SHAPES();
        return ev__set_message(EV_EINVAL, "%s: shapes %s and %s are not aligned: dimension "
                               "%lld of a (size %lld) != dimension %d of b (size %lld)",
                               name, sa, sb, (long long)(a->ndim - 1), (long long)k,
                               b1d ? 0 : b->ndim - 2, (long long)kb);
    }
    int nd = 0;
    int64_t shape[EV_MAX_DIMS];
    if (ev_broadcast_shapes(a1d ? 0 : a->ndim - 2, a->shape, b1d ? 0 : b->ndim - 2, b->shape,
                            &nd, shape) != 0) {
        SHAPES();
        return ev__set_message(EV_EINVAL, "%s: the batch dimensions of shapes %s and %s cannot "
                               "be broadcast together", name, sa, sb);
    }
    if (!a1d) {
        shape[nd++] = n;
    }
    if (!b1d) {
        shape[nd++] = m;
    }
#undef SHAPES
    if (nd > EV_MAX_DIMS) {
        return ev__set_message(EV_EINVAL, "%s: result would have more than %d dimensions", name,
                               EV_MAX_DIMS);
    }
    int use_blas = 0;
#ifdef EV_HAVE_BLAS
    /* BLAS takes int dimensions (blasint); beyond that, our kernel. */
    use_blas = ev_dtype_is_float(r) && n <= INT_MAX && k <= INT_MAX && m <= INT_MAX;
#endif
    /* Operands in the result dtype, and for BLAS in a layout it takes (a
     * transposed view is fine; other strides are copied, here, as
     * instructions ordered before the matmul). */
    ev_tensor *ta = ev_tensor_ref(a), *tb = ev_tensor_ref(b), *dst = NULL;
    ev_tensor *c;
    if (ta->dtype != r) {
        if ((rc = ev_cast(ex, ta, r, &c))) {
            goto fail;
        }
        ev_tensor_unref(ta);
        ta = c;
    }
    if (tb->dtype != r) {
        if ((rc = ev_cast(ex, tb, r, &c))) {
            goto fail;
        }
        ev_tensor_unref(tb);
        tb = c;
    }
    /* Our gemm reads any strides (it packs its operands). */
    int use_own = r == EV_FLOAT32 && own_sgemm(n, m, k);
    if (use_blas && k > 0 && !use_own) {
        int64_t sr, sc, ld;
        mat_strides(ta, a1d, 1, &sr, &sc);
        if (blas_form(n, k, sr, sc, &ld) < 0 && (rc = make_contiguous(ex, &ta))) {
            goto fail;
        }
        mat_strides(tb, b1d, 0, &sr, &sc);
        if (blas_form(k, m, sr, sc, &ld) < 0 && (rc = make_contiguous(ex, &tb))) {
            goto fail;
        }
    }
    if ((rc = ev__tensor_new(name, ex, r, nd, shape, &dst))) {
        goto fail;
    }
    mm_arg arg = {
        .a = ta, .b = tb, .out_ptr = ev__tensor_ptr(dst), .out_dtype = r, .out_ndim = nd,
        .out_numel = dst->numel, .n = n, .k = k, .m = m, .a1d = a1d, .b1d = b1d,
        .use_blas = use_blas, .use_own = use_own,
    };
    memcpy(arg.out_shape, dst->shape, sizeof(int64_t) * (size_t)nd);
    ev_tensor *reads[2] = {ta, tb};
    /* The argument now owns ta and tb; ev__submit drops it on failure. */
    rc = ev__submit(ex, name, mm_kernel, &arg, sizeof arg, mm_drop, reads, 2, &dst, 1);
    if (rc) {
        ev_tensor_unref(dst);
        return rc;
    }
    if (res != r) {
        ev_tensor *wide = dst;
        rc = ev_cast(ex, wide, res, &dst);
        ev_tensor_unref(wide);
        if (rc) {
            return rc;
        }
    }
    *out = dst;
    return 0;

fail:
    ev_tensor_unref(ta);
    ev_tensor_unref(tb);
    return rc;
}
