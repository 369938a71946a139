/* Copies between tensors of any layout and dtype (copy_, contiguous), fill_,
 * and the host transfers (from_host, to_host, the sync point). */
/* GCC's -O2 cost model leaves the fill and tile loops scalar. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif

#include "tensor/tensor-impl.h"

/* ------------------------------------------------------------------- copy */

/* The instruction's argument: both tensors referenced until drop. */
typedef struct copy_arg {
    ev_tensor *dst;
    ev_tensor *src; /* already broadcast to dst's shape */
} copy_arg;

static void copy_drop(void *p)
{
    copy_arg *a = p;
    ev_tensor_unref(a->dst);
    ev_tensor_unref(a->src);
}

static void copy_row(char **p, const int64_t *s, int64_t n, void *user)
{
    const ev_dtype *dt = user;
    ev__cast_strided(p[0], dt[0], s[0], p[1], dt[1], s[1], n);
}

/* Bytes written below which a copy or fill runs on its worker alone: the
 * hand-off to the pool costs more than it saves on what fits in L2 (a copy
 * of 512 KiB took 10 us alone, 16-25 us split in two). */
#define COPY_GRAIN_BYTES ((int64_t)1 << 20)
/* A transposing copy moves fewer bytes a microsecond: its chunks can be
 * smaller. */
#define TRANSPOSE_GRAIN_BYTES ((int64_t)1 << 18)

/* Output bytes from which a transposing copy writes past the caches. Its
 * destination lines are written whole, so reading them first (what a
 * cached store does) only doubles the write traffic; and an output this
 * large seldom stays in cache for the next op anyway (1024 x 1024 float32
 * from a cold cache: 420-500 us cached, 265-370 streamed, about a plain
 * copy's time; a transpose followed by an add took no longer). */
#define STREAM_MIN_BYTES ((int64_t)4 << 20)

/* The edge of a transposing copy's square tiles, in elements: a tile's source
 * lines (TILE of them, TILE elements each) stay in L1 while its destination
 * lines are written whole. */
#define TILE 32

/* dst[i * ds + j] = src[i + j * ss] over an n x m block of elements of type
 * T (strides in elements): dst walks along its rows, src down its columns,
 * tile by tile. */
#define TRANSPOSE_LOOP(T)                                                              \
    do {                                                                               \
        T *d_ = (T *)(void *)dst;                                                      \
        const T *s_ = (const T *)(const void *)src;                                    \
        for (int64_t i0 = 0; i0 < n; i0 += TILE) {                                     \
            int64_t ie = i0 + TILE < n ? i0 + TILE : n;                                \
            for (int64_t j0 = 0; j0 < m; j0 += TILE) {                                 \
                int64_t je = j0 + TILE < m ? j0 + TILE : m;                            \
                for (int64_t i = i0; i < ie; i++) {                                    \
                    for (int64_t j = j0; j < je; j++) {                                \
                        d_[i * ds + j] = s_[i + j * ss];                               \
                    }                                                                  \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    } while (0)

#ifdef __SSE2__
/* TRANSPOSE_LOOP for 4-byte elements, in 4 x 4 blocks of SSE registers
 * (four loads, eight shuffles, four stores for 16 elements, where the scalar
 * loop makes 16 loads and 16 stores); the ragged edges element by element. */
static void transpose_block4(float *d, int64_t ds, const float *s, int64_t ss, int64_t n,
                             int64_t m)
{
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
        int64_t ie = i0 + TILE < n ? i0 + TILE : n;
        for (int64_t j0 = 0; j0 < m; j0 += TILE) {
            int64_t je = j0 + TILE < m ? j0 + TILE : m;
            int64_t i = i0;
            for (; i + 4 <= ie; i += 4) {
                int64_t j = j0;
                for (; j + 4 <= je; j += 4) {
                    __m128 r0 = _mm_loadu_ps(s + i + j * ss);
                    __m128 r1 = _mm_loadu_ps(s + i + (j + 1) * ss);
                    __m128 r2 = _mm_loadu_ps(s + i + (j + 2) * ss);
                    __m128 r3 = _mm_loadu_ps(s + i + (j + 3) * ss);
                    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                    _mm_storeu_ps(d + i * ds + j, r0);
                    _mm_storeu_ps(d + (i + 1) * ds + j, r1);
                    _mm_storeu_ps(d + (i + 2) * ds + j, r2);
                    _mm_storeu_ps(d + (i + 3) * ds + j, r3);
                }
                for (; j < je; j++) {
                    for (int64_t k = 0; k < 4; k++) {
                        d[(i + k) * ds + j] = s[i + k + j * ss];
                    }
                }
            }
            for (; i < ie; i++) {
                for (int64_t j = j0; j < je; j++) {
                    d[i * ds + j] = s[i + j * ss];
                }
            }
        }
    }
}

/* The same for 8-byte elements in 2 x 2 blocks (two loads, two unpacks,
 * two stores for 4 elements). */
static void transpose_block8(double *d, int64_t ds, const double *s, int64_t ss, int64_t n,
                             int64_t m)
{
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
        int64_t ie = i0 + TILE < n ? i0 + TILE : n;
        for (int64_t j0 = 0; j0 < m; j0 += TILE) {
            int64_t je = j0 + TILE < m ? j0 + TILE : m;
            int64_t i = i0;
            for (; i + 2 <= ie; i += 2) {
                int64_t j = j0;
                for (; j + 2 <= je; j += 2) {
                    __m128d r0 = _mm_loadu_pd(s + i + j * ss);
                    __m128d r1 = _mm_loadu_pd(s + i + (j + 1) * ss);
                    _mm_storeu_pd(d + i * ds + j, _mm_unpacklo_pd(r0, r1));
                    _mm_storeu_pd(d + (i + 1) * ds + j, _mm_unpackhi_pd(r0, r1));
                }
                for (; j < je; j++) {
                    d[i * ds + j] = s[i + j * ss];
                    d[(i + 1) * ds + j] = s[i + 1 + j * ss];
                }
            }
            for (; i < ie; i++) {
                for (int64_t j = j0; j < je; j++) {
                    d[i * ds + j] = s[i + j * ss];
                }
            }
        }
    }
}
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_TRANSPOSE16 1
/* One 16 x 16 block of 4-byte elements in AVX-512 registers: sixteen loads
 * of whole source lines, four rounds of sixteen shuffles, sixteen stores of
 * whole destination lines (each line is touched once, where the 4 x 4 SSE
 * blocks touch it four times, while rows 4 KiB apart evict each other from
 * L1). */
__attribute__((target("avx512f"))) static inline void transpose16(float *d, int64_t ds,
                                                                  const float *s, int64_t ss,
                                                                  bool stream)
{
    __m512 r[16], t[16];
    for (int k = 0; k < 16; k++) {
        r[k] = _mm512_loadu_ps(s + k * ss);
    }
    for (int k = 0; k < 16; k += 2) {
        t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 16; k += 4) {
        r[k] = _mm512_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[k + 1] = _mm512_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[k + 2] = _mm512_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[k + 3] = _mm512_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_f32x4(r[k], r[k + 4], 0x88);
        t[k + 4] = _mm512_shuffle_f32x4(r[k], r[k + 4], 0xdd);
        t[k + 8] = _mm512_shuffle_f32x4(r[k + 8], r[k + 12], 0x88);
        t[k + 12] = _mm512_shuffle_f32x4(r[k + 8], r[k + 12], 0xdd);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
        r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xdd);
        r[k + 4] = _mm512_shuffle_f32x4(t[k + 4], t[k + 12], 0x88);
        r[k + 12] = _mm512_shuffle_f32x4(t[k + 4], t[k + 12], 0xdd);
    }
    for (int k = 0; k < 16; k++) {
        if (stream) {
            _mm512_stream_ps(d + k * ds, r[k]);
        } else {
            _mm512_storeu_ps(d + k * ds, r[k]);
        }
    }
}

/* Tiles of this many elements a side bound the pages and lines a stretch of
 * 16 x 16 blocks touches. */
#define TILE16 128

/* transpose_block4's loop on the CPUs with AVX-512: 16 x 16 blocks within
 * tiles, the ragged edges by transpose_block4 (1024 x 1024 float32 alone:
 * about 230 us, against 280-400 with 4 x 4 blocks). */
__attribute__((target("avx512f"))) static void transpose_block4_avx512(float *d, int64_t ds,
                                                                      const float *s,
                                                                      int64_t ss, int64_t n,
                                                                      int64_t m, bool stream)
{
    int64_t n16 = n & ~(int64_t)15, m16 = m & ~(int64_t)15;
    for (int64_t i1 = 0; i1 < n16; i1 += TILE16) {
        int64_t ie = i1 + TILE16 < n16 ? i1 + TILE16 : n16;
        for (int64_t j1 = 0; j1 < m16; j1 += TILE16) {
            int64_t je = j1 + TILE16 < m16 ? j1 + TILE16 : m16;
            for (int64_t i = i1; i < ie; i += 16) {
                /* The source rows lie a page or more apart, too many at once
                 * for the hardware's stream prefetchers: each block asks for
                 * the lines the block 16 columns on reads (in this tile, or
                 * at its last columns in the next tile down), about 8 blocks
                 * ahead. */
                int64_t pi = i + 16 < ie ? i + 16 : i1;
                int64_t pj = i + 16 < ie ? 0 : TILE16;
                for (int64_t j = j1; j < je; j += 16) {
                    if (j + pj + 16 <= m16) {
                        const float *p = s + pi + (j + pj) * ss;
                        for (int k = 0; k < 16; k++) {
                            __builtin_prefetch(p + k * ss);
                        }
                    }
                    transpose16(d + i * ds + j, ds, s + i + j * ss, ss, stream);
                }
            }
        }
    }
    if (m16 < m) {
        transpose_block4(d + m16, ds, s + m16 * ss, ss, n16, m - m16);
    }
    if (n16 < n) {
        transpose_block4(d + n16 * ds, ds, s + n16, ss, n - n16, m);
    }
}
#endif

/* ev__transpose_block; stream: dst's lines may be written past the caches
 * (non-temporal stores, where they are aligned; the caller fences). */
static void transpose_block(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                            int64_t m, size_t esz, bool stream)
{
#ifdef HAVE_TRANSPOSE16
    /* (Small blocks stay on SSE: 32 x 32 took 0.39 us there, 0.34 on SSE.) */
    if (esz == 4 && n >= 16 && m >= 16 && n * m >= 64 * 64 && __builtin_cpu_supports("avx512f")) {
        /* Streaming needs every 16-element store on a line of its own. */
        stream = stream && ((uintptr_t)dst & 63) == 0 && ds % 16 == 0;
        transpose_block4_avx512((float *)(void *)dst, ds, (const float *)(const void *)src, ss,
                                n, m, stream);
        return;
    }
#else
    (void)stream;
#endif
    switch (esz) {
    case 1: TRANSPOSE_LOOP(uint8_t); break;
    case 2: TRANSPOSE_LOOP(uint16_t); break;
#ifdef __SSE2__
    /* Moved as floats and doubles: bits pass through loads, shuffles and
     * stores as they are (no arithmetic touches them). */
    case 4: transpose_block4((float *)(void *)dst, ds, (const float *)(const void *)src, ss, n, m); break;
#else
    case 4: TRANSPOSE_LOOP(uint32_t); break;
#endif
#ifdef __SSE2__
    default: transpose_block8((double *)(void *)dst, ds, (const double *)(const void *)src, ss, n, m); break;
#else
    default: TRANSPOSE_LOOP(uint64_t); break;
#endif
    }
}

void ev__transpose_block(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                         int64_t m, size_t esz)
{
    transpose_block(dst, ds, src, ss, n, m, esz, false);
}

/* A copy between two layouts, cut along the iterator's outermost dimension
 * into chunks for the pool. */
typedef struct copy_job {
    ev__iter it;
    ev_dtype dt[2];
    int tdim;        /* transposing: the iterator dimension along which src is
                        contiguous (dst is along dimension 0); else -1 */
    bool stream;     /* transposing into a dst of STREAM_MIN_BYTES or more */
} copy_job;

/* The operands' offsets of the position pos, in C order, over every
 * iterator dimension but 0 and skip. */
static void outer_offsets(const ev__iter *it, int skip, int64_t pos, int64_t *off)
{
    off[0] = off[1] = 0;
    for (int d = 1; d < it->ndim; d++) {
        if (d == skip) {
            continue;
        }
        int64_t i = pos % it->shape[d];
        pos /= it->shape[d];
        off[0] += i * it->strides[0][d];
        off[1] += i * it->strides[1][d];
    }
}

/* Slices [lo, hi) along the iterator's outermost dimension. */
/* A transposing copy that converts: blocks of src transposed into a buffer
 * in src's dtype, then converted into dst's rows (contiguous both sides). */
#define CAST_BLOCK_ROWS 32
#define CAST_BLOCK_COLS 128

static void transpose_cast(const ev__iter *it, int tdim, const ev_dtype *dt, char *dst,
                           const char *src)
{
    _Alignas(64) char buf[CAST_BLOCK_ROWS * CAST_BLOCK_COLS * 8];
    int64_t de = (int64_t)ev__dsize(dt[0]), se = (int64_t)ev__dsize(dt[1]);
    int64_t n = it->shape[tdim], m = it->shape[0];
    int64_t ds = it->strides[0][tdim], ss = it->strides[1][0] / se; /* bytes; elements */
    for (int64_t i0 = 0; i0 < n; i0 += CAST_BLOCK_ROWS) {
        int64_t ni = n - i0 < CAST_BLOCK_ROWS ? n - i0 : CAST_BLOCK_ROWS;
        for (int64_t j0 = 0; j0 < m; j0 += CAST_BLOCK_COLS) {
            int64_t mj = m - j0 < CAST_BLOCK_COLS ? m - j0 : CAST_BLOCK_COLS;
            ev__transpose_block(buf, CAST_BLOCK_COLS, src + (i0 + j0 * ss) * se, ss, ni, mj,
                                (size_t)se);
            for (int64_t i = 0; i < ni; i++) {
                ev__cast_strided(dst + (i0 + i) * ds + j0 * de, dt[0], de,
                                 buf + i * CAST_BLOCK_COLS * se, dt[1], se, mj);
            }
        }
    }
}

static void copy_chunk(int64_t lo, int64_t hi, void *ctx)
{
    const copy_job *j = ctx;
    ev__iter it = j->it;
    int top = it.ndim - 1;
    for (int k = 0; k < it.nops; k++) {
        it.data[k] += lo * it.strides[k][top];
    }
    it.numel = it.numel / it.shape[top] * (hi - lo);
    it.shape[top] = hi - lo;
    if (j->tdim < 0) {
        ev__iter_rows(&it, copy_row, (void *)j->dt);
        return;
    }
    /* Tiles over dimensions 0 and tdim, for every position of the others. */
    size_t esz = ev__dsize(j->dt[0]);
    int64_t rest = it.numel / (it.shape[0] * it.shape[j->tdim]);
    for (int64_t q = 0; q < rest; q++) {
        int64_t off[2];
        outer_offsets(&it, j->tdim, q, off);
        if (j->dt[0] == j->dt[1]) {
            transpose_block(it.data[0] + off[0], it.strides[0][j->tdim] / (int64_t)esz,
                            it.data[1] + off[1], it.strides[1][0] / (int64_t)esz,
                            it.shape[j->tdim], it.shape[0], esz, j->stream);
        } else {
            transpose_cast(&it, j->tdim, j->dt, it.data[0] + off[0], it.data[1] + off[1]);
        }
    }
#if defined(__SSE2__)
    if (j->stream) {
        /* Non-temporal stores are not ordered by the release that publishes
         * the chunk's end: make them visible first. */
        _mm_sfence();
    }
#endif
}

/* The iterator dimension (not 0) along which src is contiguous when dst is
 * contiguous along dimension 0 and src is not: a copy that transposes. -1
 * otherwise. The strides used must be whole elements and positive. */
static int transpose_dim(const ev__iter *it, ev_dtype dd, ev_dtype sd)
{
    int64_t de = (int64_t)ev__dsize(dd), se = (int64_t)ev__dsize(sd);
    if (it->ndim < 2 || it->strides[0][0] != de || it->strides[1][0] == se ||
        it->strides[1][0] <= 0 || it->strides[1][0] % se != 0) {
        return -1;
    }
    for (int d = 1; d < it->ndim; d++) {
        if (it->strides[1][d] == se && it->strides[0][d] > 0 && it->strides[0][d] % de == 0) {
            return d;
        }
    }
    return -1;
}

/* The iteration of a copy of src (broadcast to dst's shape) into dst, and
 * whether it transposes. False for an empty copy. */
static bool plan_copy(copy_job *j, ev_tensor *dst, ev_tensor *src)
{
    ev_tensor *ops[2] = {dst, src};
    j->dt[0] = dst->dtype;
    j->dt[1] = src->dtype;
    ev__iter_init_by_output(&j->it, 2, ops);
    if (j->it.numel == 0) {
        return false;
    }
    j->tdim = transpose_dim(&j->it, j->dt[0], j->dt[1]);
    j->stream = j->tdim >= 0 && dst->numel * (int64_t)ev__dsize(dst->dtype) >= STREAM_MIN_BYTES;
    return true;
}

static void run_copy(copy_job *j)
{
    int64_t len = j->it.shape[j->it.ndim - 1];
    int64_t per = j->it.numel / len * (int64_t)ev__dsize(j->dt[0]); /* bytes a slice writes */
    int64_t grain_bytes = j->tdim >= 0 ? TRANSPOSE_GRAIN_BYTES : COPY_GRAIN_BYTES;
    /* (The pool's chunks are multiples of 64 slices: when they cut along
     * tdim, each still holds whole tiles.) */
    ev__parallel_for(len, (grain_bytes + per - 1) / per, copy_chunk, j);
}

static int copy_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    copy_arg *a = p;
    copy_job j;
    if (plan_copy(&j, a->dst, a->src)) {
        run_copy(&j);
    }
    return 0;
}

/* A large strided copy planned at issue: only its iteration (pointers and
 * strides) travels, as a dense copy's pointers do (below), so an output the
 * program drops at once (x.T.contiguous() in a loop) leaves its block to the
 * stream's next large allocation instead of holding it until the worker
 * gets there. (The iteration does not fit inline: worth its allocation only
 * for copies large enough for that reuse.) */
static int planned_copy_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    run_copy(p);
    return 0;
}

/* A copy between two tensors of one dense layout (contiguous, or permuted
 * alike: a cast of a transposed tensor): only pointers travel,
 * as dense elementwise ops do (src/ops/elementwise.c). The engine keeps both
 * storages until the instruction has run, so the tensors are dropped on the
 * issuing thread: an output the program drops at once (clone(x), cat, a
 * cast) then leaves its block to the next large op of the stream (stream-
 * ordered reuse) instead of holding it until the worker gets there. */
typedef struct dense_copy_arg {
    char *dst;
    const char *src;
    int64_t numel;
    ev_dtype ddt, sdt;
} dense_copy_arg;

static void dense_copy_chunk(int64_t lo, int64_t hi, void *p)
{
    const dense_copy_arg *a = p;
    int64_t ds = (int64_t)ev__dsize(a->ddt), ss = (int64_t)ev__dsize(a->sdt);
    if (a->ddt == a->sdt) {
        memmove(a->dst + lo * ds, a->src + lo * ss, (size_t)((hi - lo) * ds));
    } else {
        ev__cast_strided(a->dst + lo * ds, a->ddt, ds, a->src + lo * ss, a->sdt, ss, hi - lo);
    }
}

static int dense_copy_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    dense_copy_arg *a = p;
    int64_t per = (int64_t)ev__dsize(a->ddt);
    ev__parallel_for(a->numel, (COPY_GRAIN_BYTES + per - 1) / per, dense_copy_chunk, a);
    return 0;
}

int ev__copy(const ev_exec *ex, const char *name, ev_tensor *dst, ev_tensor *src)
{
    copy_arg a;
    int rc = ev__broadcast_to(name, src, dst->ndim, dst->shape, &a.src);
    if (rc) {
        return rc;
    }
    a.dst = ev_tensor_ref(dst);
    if (ev__tensor_is_dense(dst) && ev__same_strides(dst, a.src)) {
        dense_copy_arg d = {ev__tensor_ptr(dst), ev__tensor_ptr(a.src), dst->numel, dst->dtype,
                            a.src->dtype};
        rc = ev__submit(ex, name, dense_copy_kernel, &d, sizeof d, NULL, &a.src, 1, &a.dst, 1);
        copy_drop(&a);
        return rc;
    }
    if ((size_t)dst->numel * ev__dsize(dst->dtype) >= EV__REUSE_MIN) {
        copy_job j;
        rc = plan_copy(&j, a.dst, a.src)
                 ? ev__submit(ex, name, planned_copy_kernel, &j, sizeof j, NULL, &a.src, 1, &a.dst, 1)
                 : 0;
        copy_drop(&a);
        return rc;
    }
    return ev__submit(ex, name, copy_kernel, &a, sizeof a, copy_drop, &a.src, 1, &a.dst, 1);
}

/* A contiguous copy of t, issued on ex. */
static int clone_tensor(const ev_exec *ex, const char *name, ev_tensor *t, ev_tensor **out)
{
    ev_tensor *c;
    int rc = ev__tensor_new(name, ex, t->dtype, t->ndim, t->shape, &c);
    if (rc) {
        return rc;
    }
    rc = ev__copy(ex, name, c, t);
    if (rc) {
        ev_tensor_unref(c);
        return rc;
    }
    *out = c;
    return 0;
}

int ev_copy_(const ev_exec *ex, ev_tensor *dst, ev_tensor *src)
{
    int rc;
    if ((rc = ev__check_exec("copy_", ex)) || (rc = ev__check_tensor("copy_", "dst", dst)) ||
        (rc = ev__check_tensor("copy_", "src", src))) {
        return rc;
    }
    if (ev__has_internal_overlap(dst)) {
        return ev__set_message(EV_EINVAL, "copy_: dst is an expanded tensor (some of its "
                               "elements share memory); copy into a contiguous tensor");
    }
    int nd;
    int64_t shape[EV_MAX_DIMS];
    rc = ev_broadcast_shapes(dst->ndim, dst->shape, src->ndim, src->shape, &nd, shape);
    if (rc || nd != dst->ndim) {
        char a[EV__SHAPE_STR_SIZE], b[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "copy_: src of shape %s cannot be broadcast to dst "
                               "of shape %s", ev__shape_str(src->ndim, src->shape, a, sizeof a),
                               ev__shape_str(dst->ndim, dst->shape, b, sizeof b));
    }
    if (ev__same_layout(dst, src)) {
        return 0;
    }
    if (ev__may_overlap(dst, src)) {
        /* Read all of src before writing any of dst, as if src were copied
         * first: that is what a sequential program means. */
        ev_tensor *tmp;
        rc = clone_tensor(ex, "copy_", src, &tmp);
        if (rc) {
            return rc;
        }
        rc = ev__copy(ex, "copy_", dst, tmp);
        ev_tensor_unref(tmp);
        return rc;
    }
    return ev__copy(ex, "copy_", dst, src);
}

int ev_contiguous(const ev_exec *ex, ev_tensor *t, ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec("contiguous", ex)) ||
        (rc = ev__check_tensor("contiguous", "the tensor", t))) {
        return rc;
    }
    if (!out) {
        return ev__set_message(EV_EINVAL, "contiguous: out is NULL");
    }
    if (ev_tensor_is_contiguous(t)) {
        *out = ev_tensor_ref(t);
        return 0;
    }
    return clone_tensor(ex, "contiguous", t, out);
}

/* ------------------------------------------------------------------- fill */

typedef struct fill_arg {
    ev_tensor *t;
    _Alignas(8) unsigned char value[8]; /* in t's dtype */
} fill_arg;

static void fill_drop(void *p)
{
    ev_tensor_unref(((fill_arg *)p)->t);
}

/* dst[i * ds] = value (esz bytes) for n elements: memset for zeros, else a
 * store loop of the element's width, which vectorizes when contiguous. */
#define FILL_LOOP(T)                                                                   \
    do {                                                                               \
        T v_;                                                                          \
        memcpy(&v_, value, sizeof v_);                                                 \
        if (ds == (int64_t)sizeof(T)) {                                                \
            T *d_ = (T *)(void *)dst;                                                  \
            for (int64_t i = 0; i < n; i++) {                                          \
                d_[i] = v_;                                                            \
            }                                                                          \
        } else {                                                                       \
            for (int64_t i = 0; i < n; i++) {                                          \
                memcpy(dst + i * ds, &v_, sizeof v_);                                  \
            }                                                                          \
        }                                                                              \
    } while (0)

/* Built for AVX2 and AVX-512 too (as the ops' loops, see EV__SIMD_CLONES in
 * src/ops/ops-impl.h): the baseline stores 16 bytes a step, memset 64. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define FILL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FILL_CLONES
#endif

FILL_CLONES static void fill_run(char *dst, int64_t ds, const unsigned char *value, int64_t n,
                                 size_t esz)
{
    static const unsigned char zero[8];
    if (ds == (int64_t)esz && memcmp(value, zero, esz) == 0) {
        memset(dst, 0, (size_t)n * esz);
        return;
    }
    switch (esz) {
    case 1: FILL_LOOP(uint8_t); break;
    case 2: FILL_LOOP(uint16_t); break;
    case 4: FILL_LOOP(uint32_t); break;
    default: FILL_LOOP(uint64_t); break;
    }
}

static void fill_row(char **p, const int64_t *s, int64_t n, void *user)
{
    fill_arg *a = user;
    fill_run(p[0], s[0], a->value, n, ev__dsize(a->t->dtype));
}

typedef struct fill_job {
    ev__iter it;
    fill_arg *a;
} fill_job;

/* Slices [lo, hi) along the iterator's outermost dimension. */
static void fill_chunk(int64_t lo, int64_t hi, void *ctx)
{
    const fill_job *j = ctx;
    ev__iter it = j->it;
    int top = it.ndim - 1;
    it.data[0] += lo * it.strides[0][top];
    it.numel = it.numel / it.shape[top] * (hi - lo);
    it.shape[top] = hi - lo;
    ev__iter_rows(&it, fill_row, j->a);
}

static int fill_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    fill_job j = {.a = p};
    ev__iter_init_by_output(&j.it, 1, &j.a->t);
    if (j.it.numel == 0) {
        return 0;
    }
    int64_t len = j.it.shape[j.it.ndim - 1];
    int64_t per = j.it.numel / len * (int64_t)ev__dsize(j.a->t->dtype);
    ev__parallel_for(len, (COPY_GRAIN_BYTES + per - 1) / per, fill_chunk, &j);
    return 0;
}

typedef struct dense_fill_arg {
    char *dst;
    int64_t numel;
    size_t esz;
    _Alignas(8) unsigned char value[8];
} dense_fill_arg;

static void dense_fill_chunk(int64_t lo, int64_t hi, void *p)
{
    const dense_fill_arg *a = p;
    fill_run(a->dst + lo * (int64_t)a->esz, (int64_t)a->esz, a->value, hi - lo, a->esz);
}

static int dense_fill_kernel(void *p, ev_kctx *kc)
{
    (void)kc;
    dense_fill_arg *a = p;
    int64_t per = (int64_t)a->esz;
    ev__parallel_for(a->numel, (COPY_GRAIN_BYTES + per - 1) / per, dense_fill_chunk, a);
    return 0;
}

int ev_fill_(const ev_exec *ex, ev_tensor *t, ev_scalar value)
{
    int rc;
    if ((rc = ev__check_exec("fill_", ex)) || (rc = ev__check_tensor("fill_", "the tensor", t))) {
        return rc;
    }
    if (!ev_dtype_get_info(value.dtype)) {
        return ev__set_message(EV_EINVAL, "fill_: the value has an invalid dtype %d",
                               (int)value.dtype);
    }
    fill_arg a;
    memset(&a, 0, sizeof a);
    a.t = ev_tensor_ref(t);
    ev__scalar_store(t->dtype, value, a.value);
    if (ev__tensor_is_dense(t)) {
        /* Pointers only, the tensor dropped here: see dense_copy_arg. */
        dense_fill_arg d = {ev__tensor_ptr(t), t->numel, ev__dsize(t->dtype), {0}};
        memcpy(d.value, a.value, sizeof d.value);
        rc = ev__submit(ex, "fill_", dense_fill_kernel, &d, sizeof d, NULL, NULL, 0, &a.t, 1);
        fill_drop(&a);
        return rc;
    }
    return ev__submit(ex, "fill_", fill_kernel, &a, sizeof a, fill_drop, NULL, 0, &a.t, 1);
}

/* ------------------------------------------------------------- host copies */

typedef struct host_copy_arg {
    char *dst;
    const char *src;
} host_copy_arg;

/* Bytes [lo, hi) of a copy from the host. */
static void host_copy_chunk(int64_t lo, int64_t hi, void *p)
{
    const host_copy_arg *a = p;
    memcpy(a->dst + lo, a->src + lo, (size_t)(hi - lo));
}

int ev_from_host(const ev_exec *ex, ev_dtype dtype, int ndim, const int64_t *shape,
                 const void *src, ev_tensor **out)
{
    if (!out) {
        return ev__set_message(EV_EINVAL, "from_host: out is NULL");
    }
    ev_tensor *t;
    int rc = ev_empty(ex, dtype, ndim, shape, &t);
    if (rc) {
        return rc;
    }
    if (t->numel > 0) {
        if (!src) {
            ev_tensor_unref(t);
            return ev__set_message(EV_EINVAL, "from_host: src is NULL");
        }
        /* No instruction uses the new storage, but its block may be one
         * that stream-ordered reuse handed over while the instructions of
         * its last tensor are still queued on this stream: the new object
         * is ordered after them, so wait for them before the host writes.
         * (A failure of theirs is not this tensor's: it is reported where
         * their results are read.) Smaller blocks are never handed over so,
         * and a scalar operand of a recorded op comes this way: no wait. */
        if (t->storage->nbytes >= EV__REUSE_MIN) {
            ev_wait_obj(ex->vm, t->storage->obj, NULL);
        }
        host_copy_arg a = {ev__tensor_ptr(t), src};
        ev__parallel_for_caller(ex->vm, t->numel * (int64_t)ev__dsize(dtype),
                                COPY_GRAIN_BYTES, host_copy_chunk, &a);
    }
    *out = t;
    return 0;
}

int ev_to_host(const ev_exec *ex, ev_tensor *t, void *dst)
{
    int rc;
    if ((rc = ev__check_exec("to_host", ex)) ||
        (rc = ev__check_tensor("to_host", "the tensor", t))) {
        return rc;
    }
    ev_error *err = NULL;
    rc = ev_wait_obj(ex->vm, t->storage->obj, &err);
    if (rc) {
        if (err) {
            char buf[512];
            ev_error_format(err, buf, sizeof buf);
            ev_error_unref(err);
            return ev__set_message(rc, "%s", buf);
        }
        return rc;
    }
    if (t->numel == 0) {
        return 0;
    }
    if (!dst) {
        return ev__set_message(EV_EINVAL, "to_host: dst is NULL");
    }
    int64_t size = (int64_t)ev__dsize(t->dtype);
    int64_t strides[2][EV_MAX_DIMS];
    int64_t st = size;
    for (int d = t->ndim - 1; d >= 0; d--) {
        strides[0][d] = st;
        strides[1][d] = t->strides[d] * size;
        st *= t->shape[d];
    }
    char *data[2] = {dst, ev__tensor_ptr(t)};
    ev_dtype dt[2] = {t->dtype, t->dtype};
    ev__iter it;
    ev__iter_init_raw(&it, 2, t->ndim, t->shape, data, (const int64_t(*)[EV_MAX_DIMS])strides);
    ev__iter_rows(&it, copy_row, dt);
    return 0;
}
