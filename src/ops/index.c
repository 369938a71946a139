/* Indexing ops whose index tensor is only read inside the kernel:
 * index_select, gather, take and scatter_add(_). Shapes and dtypes are
 * checked on the issuing thread; an index out of range fails the instruction
 * with EV_EINDEX naming the index, the dimension and its size (DESIGN rule 6),
 * which poisons the output (and, for scatter_add_, the tensor written). */
/* GCC's -O2 cost model leaves the index checks and element loops scalar. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=cheap")
#endif

#include <string.h>

#include "ops/ops-impl.h"

/* ---------------------------------------------------------------- helpers */

/* An index of any integer dtype (checked on the issuing side), widened. */
static inline int64_t load_index(const char *p, ev_dtype d)
{
    switch (d) {
    case EV_INT32: return *(const int32_t *)p;
    case EV_UINT8: return *(const uint8_t *)p;
    case EV_INT8: return *(const int8_t *)p;
    case EV_INT16: return *(const int16_t *)p;
    default: return *(const int64_t *)p;
    }
}

/* Advances the C-order multi-index idx over shape by one and the byte
 * offsets off[k] of nops operands by their strides str[k] (bytes). */
static inline void advance(int nd, const int64_t *shape, int64_t *idx, int nops,
                           const int64_t (*str)[EV_MAX_DIMS], int64_t *off)
{
    for (int d = nd - 1; d >= 0; d--) {
        for (int k = 0; k < nops; k++) {
            off[k] += str[k][d];
        }
        if (++idx[d] < shape[d]) {
            return;
        }
        for (int k = 0; k < nops; k++) {
            off[k] -= str[k][d] * shape[d];
        }
        idx[d] = 0;
    }
}

/* Byte strides of t, with stride 0 for dimension skip (-1: none). */
static void byte_strides(const ev_tensor *t, int skip, int64_t *out)
{
    int64_t esz = (int64_t)ev__dsize(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        out[d] = d == skip ? 0 : t->strides[d] * esz;
    }
}

/* Size and byte stride of x's dimension dim; a 0-d x counts as one element. */
static void dim_info(const ev_tensor *x, int dim, int64_t *size, int64_t *stride)
{
    if (x->ndim == 0) {
        *size = 1;
        *stride = 0;
    } else {
        *size = x->shape[dim];
        *stride = x->strides[dim] * (int64_t)ev__dsize(x->dtype);
    }
}

static int check_index_dtype(const char *name, const ev_tensor *index)
{
    if (ev_dtype_get_info(index->dtype)->kind != EV_KIND_INT) {
        return ev__set_message(EV_ETYPE, "%s: index must have an integer dtype, not %s", name,
                               ev_dtype_name(index->dtype));
    }
    return 0;
}

/* Normalises dim for x, accepting 0 and -1 for a 0-d x (as PyTorch). */
static int norm_dim0(const char *name, int dim, const ev_tensor *x, int *out)
{
    if (x->ndim == 0) {
        if (dim != 0 && dim != -1) {
            return ev__set_message(EV_EINDEX, "%s: dimension %d is out of range [-1, 0] for a "
                                   "0-d tensor", name, dim);
        }
        *out = 0;
        return 0;
    }
    return ev__norm_dim(name, dim, x->ndim, out);
}

/* The kernel argument of every op here. */
typedef struct idx_arg {
    ev_tensor *x, *index, *src, *out;  /* referenced; src only for scatter_add */
    int dim;
    const char *name;                  /* static */
    /* index_select's new output, by pointer only (out is NULL there): the
     * engine keeps its storage until the kernel has run, and a result the
     * program drops at once leaves its block to the stream's next op (see
     * dense_copy_arg in src/tensor/copy.c). Its shape is x's with
     * index->numel along dim. */
    char *O;
} idx_arg;
_Static_assert(sizeof(idx_arg) <= EV_INLINE_ARG_SIZE, "idx_arg must travel inline");

static void idx_drop(void *p)
{
    idx_arg *a = p;
    ev_tensor_unref(a->x);
    ev_tensor_unref(a->index);
    ev_tensor_unref(a->src);
    ev_tensor_unref(a->out);
}

#define OOB_FMT "%s: index %lld is out of bounds for dimension %d with size %lld"

/* --------------------------------------------------------------- kernels
 *
 * The fast paths read indices in blocks of IBLOCK widened to int64 (a
 * contiguous int64 index is read in place), check them (index_select and
 * scatter_add in a vectorised pass first, gather and take as they copy),
 * and copy with loops typed by the element size.
 * Large ops split over the intra-op pool: gather and take anywhere, index_select
 * by output rows, scatter_add along a dimension other than dim (so no two
 * threads add into one element, and each element's additions keep their
 * order). A chunk that meets an index out of range stops; the kernel then
 * finds the first such index in C order and reports it, as a serial loop
 * would. */

#define IBLOCK 512
/* Elements (picked or added) below which an op runs on its worker alone. */
#define INDEX_GRAIN ((int64_t)1 << 15)
/* Bytes of whole rows (index_select) below which the copy runs alone. Rows
 * from the caches copy at one thread's memcpy speed (128 random 4 KiB rows of
 * a 4 MiB tensor: 8 us), which two threads halve: split from 2 x 128 KiB on,
 * 512 KiB of rows took 12.5 us alone, 10 split (hand-off included). Rows
 * picked from a tensor much larger than the caches (a data set, as a data
 * loader's batches) come from memory and are latency-bound: there two
 * threads fetch twice as many at once (128 random rows of 60000 x 784
 * float32: 40 us alone, 34 split). */
#define ROWS_GRAIN_BYTES ((int64_t)1 << 17)

/* n indices at p (stride bytes apart, dtype d) as int64: p itself when it
 * already is a contiguous int64 run, else converted into buf. */
static const int64_t *index_block(const char *p, ev_dtype d, int64_t stride, int64_t n,
                                  int64_t *buf)
{
    if (d == EV_INT64 && (stride == 8 || n == 1)) {
        return (const int64_t *)(const void *)p;
    }
    ev__cast_strided(buf, EV_INT64, 8, p, d, stride, n);
    return buf;
}

/* 1 if some v[i] is outside [lo, lo + span) (span > 0 or 0: all outside).
 * Built for AVX2 and AVX-512 too: the baseline has no 64-bit compare, and
 * scalar this check took half of scatter_add's time. */
EV__SIMD_CLONES static int any_outside(const int64_t *v, int64_t n, int64_t lo, uint64_t span)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bad |= (uint64_t)v[i] - (uint64_t)lo >= span;
    }
    return bad;
}

/* The first index of ix in C order outside [lo, hi), in *v; 0 if none. */
static int first_outside(const ev_tensor *ix, int64_t lo, int64_t hi, int64_t *v)
{
    int64_t str[1][EV_MAX_DIMS] = {{0}};
    byte_strides(ix, -1, str[0]);
    const char *I = ev__tensor_ptr(ix);
    int64_t idx[EV_MAX_DIMS] = {0}, off[1] = {0};
    for (int64_t e = 0; e < ix->numel; e++) {
        int64_t x = load_index(I + off[0], ix->dtype);
        if (x < lo || x >= hi) {
            *v = x;
            return 1;
        }
        advance(ix->ndim, ix->shape, idx, 1, (const int64_t(*)[EV_MAX_DIMS])str, off);
    }
    return 0;
}

/* Copies n elements of esz bytes, dst[k * ds] = src[k * ss + f * vs], f
 * being v[k] (plus size when wrap and v[k] < 0), in one pass that also checks
 * that every f is in [0, size): one that is not reads element 0 instead (so
 * nothing is read out of bounds) and makes the result 1, for the caller to
 * fail with. */
#define PICK_LOOP(T)                                                                   \
    do {                                                                               \
        if (ds == (int64_t)sizeof(T) && ss == 0) {                                     \
            T *restrict o_ = (T *)(void *)dst;                                         \
            for (int64_t k = 0; k < n; k++) {                                          \
                int64_t f = v[k] + (wrap && v[k] < 0 ? size : 0);                      \
                int ok = (uint64_t)f < (uint64_t)size;                                 \
                bad |= !ok;                                                            \
                memcpy(&o_[k], src + (ok ? f : 0) * vs, sizeof(T));                    \
            }                                                                          \
        } else {                                                                       \
            for (int64_t k = 0; k < n; k++) {                                          \
                int64_t f = v[k] + (wrap && v[k] < 0 ? size : 0);                      \
                int ok = (uint64_t)f < (uint64_t)size;                                 \
                bad |= !ok;                                                            \
                memcpy(dst + k * ds, src + k * ss + (ok ? f : 0) * vs, sizeof(T));     \
            }                                                                          \
        }                                                                              \
    } while (0)

/* The common case of pick: out and the source line both contiguous (rows
 * of index_select with dim last, gather along the last dimension, take of
 * a contiguous x). */
#define DENSE_PICK(fname, T, WRAP)                                                     \
    static int fname(T *restrict o, const T *restrict x, const int64_t *restrict v,    \
                     int64_t n, int64_t size)                                          \
    {                                                                                  \
        int bad = 0;                                                                   \
        for (int64_t k = 0; k < n; k++) {                                              \
            int64_t f = v[k];                                                          \
            if (WRAP) {                                                                \
                f += f < 0 ? size : 0;                                                 \
            }                                                                          \
            int ok = (uint64_t)f < (uint64_t)size;                                     \
            bad |= !ok;                                                                \
            o[k] = x[ok ? f : 0];                                                      \
        }                                                                              \
        return bad;                                                                    \
    }
DENSE_PICK(dense_pick_u8, uint8_t, 0)
DENSE_PICK(dense_pick_u16, uint16_t, 0)
DENSE_PICK(scalar_pick_u32, uint32_t, 0)
DENSE_PICK(scalar_pick_u64, uint64_t, 0)
DENSE_PICK(dense_pick_wrap_u8, uint8_t, 1)
DENSE_PICK(dense_pick_wrap_u16, uint16_t, 1)
DENSE_PICK(scalar_pick_wrap_u32, uint32_t, 1)
DENSE_PICK(scalar_pick_wrap_u64, uint64_t, 1)

/* 4- and 8-byte elements with the CPU's gather instructions where it has
 * them (GCC does not vectorize the loop above into gathers): a gather of
 * 1M float32 along rows took 340 us with AVX-512, 575 us scalar. An index
 * out of range is masked off (AVX-512) or replaced by 0 (AVX2), so nothing
 * is read out of bounds. Not under sanitizers, whose shadow checks do not
 * see gathers. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#include <immintrin.h>
#define HW_GATHER 1

/* x[f] for 8 indices at v into 8 elements at o, of 4 (W4) or 8 bytes. */
#define GATHER512(W4)                                                                  \
    __m512i lim = _mm512_set1_epi64(size), zero = _mm512_setzero_si512();              \
    __mmask8 badm = 0;                                                                 \
    int64_t k = 0;                                                                     \
    for (; k + 8 <= n; k += 8) {                                                       \
        __m512i f = _mm512_loadu_si512((const void *)(v + k));                         \
        if (wrap) {                                                                    \
            f = _mm512_mask_add_epi64(f, _mm512_cmplt_epi64_mask(f, zero), f, lim);    \
        }                                                                              \
        __mmask8 ok = _mm512_cmplt_epu64_mask(f, lim);                                 \
        badm |= (__mmask8)~ok;                                                         \
        if (W4) {                                                                      \
            __m256i r = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), ok, f, x, 4); \
            _mm256_storeu_si256((__m256i *)(void *)((uint32_t *)o + k), r);            \
        } else {                                                                       \
            __m512i r = _mm512_mask_i64gather_epi64(zero, ok, f, x, 8);                \
            _mm512_storeu_si512((void *)((uint64_t *)o + k), r);                        \
        }                                                                              \
    }

__attribute__((target("avx512f"))) static int gather512_u32(uint32_t *o, const uint32_t *x,
                                                            const int64_t *v, int64_t n,
                                                            int64_t size, int wrap)
{
    GATHER512(1)
    int bad = badm != 0;
    return bad | (wrap ? scalar_pick_wrap_u32(o + k, x, v + k, n - k, size)
                       : scalar_pick_u32(o + k, x, v + k, n - k, size));
}

__attribute__((target("avx512f"))) static int gather512_u64(uint64_t *o, const uint64_t *x,
                                                            const int64_t *v, int64_t n,
                                                            int64_t size, int wrap)
{
    GATHER512(0)
    int bad = badm != 0;
    return bad | (wrap ? scalar_pick_wrap_u64(o + k, x, v + k, n - k, size)
                       : scalar_pick_u64(o + k, x, v + k, n - k, size));
}

/* The same with AVX2's four 64-bit lanes (signed compares only). */
#define GATHER256(W4)                                                                  \
    __m256i last = _mm256_set1_epi64x(size - 1), zero = _mm256_setzero_si256();        \
    __m256i sz = _mm256_set1_epi64x(size), acc = zero;                                 \
    int64_t k = 0;                                                                     \
    for (; k + 4 <= n; k += 4) {                                                       \
        __m256i f = _mm256_loadu_si256((const __m256i *)(const void *)(v + k));        \
        if (wrap) {                                                                    \
            f = _mm256_add_epi64(f, _mm256_and_si256(_mm256_cmpgt_epi64(zero, f), sz)); \
        }                                                                              \
        __m256i badv = _mm256_or_si256(_mm256_cmpgt_epi64(f, last),                    \
                                       _mm256_cmpgt_epi64(zero, f));                   \
        acc = _mm256_or_si256(acc, badv);                                              \
        f = _mm256_andnot_si256(badv, f);                                              \
        if (W4) {                                                                      \
            __m128i r = _mm256_i64gather_epi32((const int *)(const void *)x, f, 4);    \
            _mm_storeu_si128((__m128i *)(void *)((uint32_t *)o + k), r);               \
        } else {                                                                       \
            __m256i r = _mm256_i64gather_epi64((const long long *)(const void *)x, f, 8); \
            _mm256_storeu_si256((__m256i *)(void *)((uint64_t *)o + k), r);            \
        }                                                                              \
    }

__attribute__((target("avx2"))) static int gather256_u32(uint32_t *o, const uint32_t *x,
                                                         const int64_t *v, int64_t n,
                                                         int64_t size, int wrap)
{
    GATHER256(1)
    int bad = !_mm256_testz_si256(acc, acc);
    return bad | (wrap ? scalar_pick_wrap_u32(o + k, x, v + k, n - k, size)
                       : scalar_pick_u32(o + k, x, v + k, n - k, size));
}

__attribute__((target("avx2"))) static int gather256_u64(uint64_t *o, const uint64_t *x,
                                                         const int64_t *v, int64_t n,
                                                         int64_t size, int wrap)
{
    GATHER256(0)
    int bad = !_mm256_testz_si256(acc, acc);
    return bad | (wrap ? scalar_pick_wrap_u64(o + k, x, v + k, n - k, size)
                       : scalar_pick_u64(o + k, x, v + k, n - k, size));
}
#endif

static int dense_pick_u32(uint32_t *o, const uint32_t *x, const int64_t *v, int64_t n,
                          int64_t size, int wrap)
{
#ifdef HW_GATHER
    if (__builtin_cpu_supports("avx512f")) {
        return gather512_u32(o, x, v, n, size, wrap);
    }
    if (__builtin_cpu_supports("avx2")) {
        return gather256_u32(o, x, v, n, size, wrap);
    }
#endif
    return wrap ? scalar_pick_wrap_u32(o, x, v, n, size) : scalar_pick_u32(o, x, v, n, size);
}

static int dense_pick_u64(uint64_t *o, const uint64_t *x, const int64_t *v, int64_t n,
                          int64_t size, int wrap)
{
#ifdef HW_GATHER
    if (__builtin_cpu_supports("avx512f")) {
        return gather512_u64(o, x, v, n, size, wrap);
    }
    if (__builtin_cpu_supports("avx2")) {
        return gather256_u64(o, x, v, n, size, wrap);
    }
#endif
    return wrap ? scalar_pick_wrap_u64(o, x, v, n, size) : scalar_pick_u64(o, x, v, n, size);
}

static int pick(char *dst, int64_t ds, const char *src, int64_t ss, const int64_t *v,
                int64_t vs, int64_t n, size_t esz, int64_t size, int wrap)
{
    if (size <= 0) {
        /* An empty source (its data may be NULL): every index is out of
         * range, and there is no element 0 to read instead. */
        return n > 0;
    }
    int bad = 0;
    if (ds == (int64_t)esz && ss == 0 && vs == (int64_t)esz) {
        void *o = dst;
        const void *x = src;
        switch (esz) {
        case 1: return wrap ? dense_pick_wrap_u8(o, x, v, n, size) : dense_pick_u8(o, x, v, n, size);
        case 2: return wrap ? dense_pick_wrap_u16(o, x, v, n, size) : dense_pick_u16(o, x, v, n, size);
        case 4: return dense_pick_u32(o, x, v, n, size, wrap);
        default: return dense_pick_u64(o, x, v, n, size, wrap);
        }
    }
    switch (esz) {
    case 1: PICK_LOOP(uint8_t); break;
    case 2: PICK_LOOP(uint16_t); break;
    case 4: PICK_LOOP(uint32_t); break;
    default: PICK_LOOP(uint64_t); break;
    }
    return bad;
}

/* A walk over the elements of an index-shaped iteration, split along one
 * dimension into chunks that run on the pool. */
typedef struct split_walk {
    int nops, ndim, split;                   /* split: the dimension chunks divide */
    int64_t shape[EV_MAX_DIMS];
    int64_t strides[EV__ITER_MAX_OPS][EV_MAX_DIMS];
    char *data[EV__ITER_MAX_OPS];            /* borrowed */
    ev__row_fn row;
    void *user;
} split_walk;

static void split_chunk(int64_t lo, int64_t hi, void *ctx)
{
    const split_walk *w = ctx;
    int64_t shape[EV_MAX_DIMS];
    char *data[EV__ITER_MAX_OPS];
    memcpy(shape, w->shape, sizeof shape);
    for (int k = 0; k < w->nops; k++) {
        data[k] = w->data[k] + (w->ndim ? lo * w->strides[k][w->split] : 0);
    }
    if (w->ndim) {
        shape[w->split] = hi - lo;
    }
    ev__iter it;
    ev__iter_init_raw(&it, w->nops, w->ndim, shape, data, w->strides);
    ev__iter_rows(&it, w->row, w->user);
}

/* Runs w over everything: split along w->split when large enough. */
static void split_run(split_walk *w, int64_t numel)
{
    if (w->ndim == 0 || numel < 2 * INDEX_GRAIN) {
        split_chunk(0, w->ndim ? w->shape[w->split] : 1, w);
        return;
    }
    int64_t len = w->shape[w->split];
    int64_t per = numel / len; /* elements per slice */
    int64_t grain = (INDEX_GRAIN + per - 1) / per;
    ev__parallel_for(len, grain, split_chunk, w);
}

/* The largest dimension of t other than skip (-1: none), or 0. */
static int widest_dim(const ev_tensor *t, int skip)
{
    int best = -1;
    for (int d = 0; d < t->ndim; d++) {
        if (d != skip && (best < 0 || t->shape[d] > t->shape[best])) {
            best = d;
        }
    }
    return best < 0 ? 0 : best;
}

/* Per-kernel state the row functions read. */
typedef struct pick_state {
    size_t esz;
    ev_dtype idt;           /* the index's dtype */
    int64_t size;           /* the indexed extent */
    int64_t xs;             /* byte stride along the indexed dimension */
    ev_dtype dt;            /* scatter_add: the elements' dtype */
    const ev_tensor *x;     /* take of a non-contiguous x: unravelled per element */
    _Atomic int bad;        /* some chunk met an index out of range */
} pick_state;

/* --------------------------------------------------------- index_select */

typedef struct select_state {
    char *O;                /* borrowed */
    const char *X;
    size_t row_bytes;       /* bytes of one selected row: inner * esz */
    int64_t n_idx;
    const int64_t *v;       /* the checked indices (n_idx) */
    int64_t xs;             /* x's byte stride along dim */
    int64_t size;           /* x's size along dim */
    int outer_nd;           /* x's dimensions before dim */
    const int64_t *outer_shape, *outer_strides; /* x's, in bytes */
} select_state;

/* Output rows [lo, hi): row r is outer position r / n_idx, index r % n_idx. */
static void select_rows(int64_t lo, int64_t hi, void *ctx)
{
    const select_state *s = ctx;
    int64_t r = lo;
    while (r < hi) {
        int64_t o = r / s->n_idx, j = r % s->n_idx;
        int64_t m = s->n_idx - j < hi - r ? s->n_idx - j : hi - r;
        /* x's offset of outer position o (C order over the outer dims). */
        int64_t xo = 0;
        for (int d = s->outer_nd - 1; d >= 0; d--) {
            xo += (o % s->outer_shape[d]) * s->outer_strides[d];
            o /= s->outer_shape[d];
        }
        const char *X = s->X + xo;
        char *O = s->O + r * (int64_t)s->row_bytes;
        const int64_t *v = s->v + j;
        switch (s->row_bytes) {
        case 1: case 2: case 4: case 8:
            pick(O, (int64_t)s->row_bytes, X, 0, v, s->xs, m, s->row_bytes, s->size, 0);
            break;
        default:
            for (int64_t k = 0; k < m; k++) {
                memcpy(O + k * (int64_t)s->row_bytes, X + v[k] * s->xs, s->row_bytes);
            }
        }
        r += m;
    }
}

/* out[..., j, ...] = x[..., index[j], ...] along dim. When x's dimensions
 * after dim are one contiguous block, each selected block is one memcpy
 * (elements when dim is the last); otherwise element by element. */
static int index_select_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *x = a->x, *ix = a->index;
    int64_t n_idx = ix->numel;
    /* The output's (C-contiguous) shape: x's with n_idx along dim; a 0-d x
     * gives the index's. */
    int ond = x->ndim ? x->ndim : ix->ndim;
    int64_t oshape[EV_MAX_DIMS], onumel = 1;
    for (int d = 0; d < ond; d++) {
        oshape[d] = x->ndim && d != a->dim ? x->shape[d] : n_idx;
        onumel *= oshape[d];
    }
    if (onumel == 0) {
        return 0;
    }
    size_t esz = ev__dsize(x->dtype);
    int64_t size, xs;
    dim_info(x, a->dim, &size, &xs);
    int64_t istride = ix->ndim ? ix->strides[0] * (int64_t)ev__dsize(ix->dtype) : 0;
    char *X = ev__tensor_ptr(x), *O = a->O, *I = ev__tensor_ptr(ix);
    /* Every index is checked (and widened, when it is not a contiguous int64
     * run) once, before anything is copied. */
    int64_t *buf = NULL;
    const int64_t *v = (const int64_t *)(void *)I;
    if (!(ix->dtype == EV_INT64 && (istride == 8 || n_idx == 1))) {
        buf = ev__malloc(sizeof(int64_t) * (size_t)n_idx);
        if (!buf) {
            return ev_kctx_fail(kc, EV_ENOMEM, "%s: out of memory for %lld indices", a->name,
                                (long long)n_idx);
        }
        ev__cast_strided(buf, EV_INT64, 8, I, ix->dtype, istride, n_idx);
        v = buf;
    }
    if (any_outside(v, n_idx, 0, (uint64_t)size)) {
        int64_t bad = 0;
        for (int64_t j = 0; j < n_idx; j++) {
            if (v[j] < 0 || v[j] >= size) {
                bad = v[j];
                break;
            }
        }
        ev__free(buf);
        return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)bad, a->dim,
                            (long long)size);
    }
    /* Are x's dimensions after dim one C-contiguous block? */
    int64_t inner = 1;
    int contig = 1;
    for (int d = x->ndim - 1; d > a->dim; d--) {
        if (x->shape[d] != 1 && x->strides[d] != inner) {
            contig = 0;
        }
        inner *= x->shape[d];
    }
    if (contig && x->ndim > 0) {
        int64_t outer_str[EV_MAX_DIMS];
        for (int d = 0; d < a->dim; d++) {
            outer_str[d] = x->strides[d] * (int64_t)esz;
        }
        select_state s = {
            .O = O, .X = X, .row_bytes = (size_t)inner * esz, .n_idx = n_idx, .v = v,
            .xs = xs, .size = size, .outer_nd = a->dim, .outer_shape = x->shape, .outer_strides = outer_str,
        };
        int64_t rows = onumel / (inner > 0 ? inner : 1);
        int64_t row_bytes = inner * (int64_t)esz;
        int64_t grain = row_bytes >= 256 ? (ROWS_GRAIN_BYTES + row_bytes - 1) / row_bytes
                                         : (INDEX_GRAIN + inner - 1) / inner;
        ev__parallel_for(rows, grain, select_rows, &s);
        ev__free(buf);
        return 0;
    }
    int64_t str[2][EV_MAX_DIMS] = {{0}};
    int64_t ost = (int64_t)esz;
    for (int d = ond - 1; d >= 0; d--) {
        str[0][d] = ost;
        ost *= oshape[d];
    }
    byte_strides(x, a->dim, str[1]);
    int64_t idx[EV_MAX_DIMS] = {0}, off[2] = {0, 0};
    for (int64_t e = 0; e < onumel; e++) {
        int64_t j = ond ? idx[a->dim] : 0;
        ev__copy_elem(O + off[0], X + off[1] + v[j] * xs, esz);
        advance(ond, oshape, idx, 2, (const int64_t(*)[EV_MAX_DIMS])str, off);
    }
    ev__free(buf);
    return 0;
}

/* ----------------------------------------------------------------- gather */

/* One row of out, x (stride 0 along dim) and index. */
static void gather_row(char **p, const int64_t *s, int64_t n, void *user)
{
    pick_state *st = user;
    if (atomic_load_explicit(&st->bad, memory_order_relaxed)) {
        return;
    }
    int64_t buf[IBLOCK];
    for (int64_t i = 0; i < n; i += IBLOCK) {
        int64_t m = n - i < IBLOCK ? n - i : IBLOCK;
        const int64_t *v = index_block(p[2] + i * s[2], st->idt, s[2], m, buf);
        if (pick(p[0] + i * s[0], s[0], p[1] + i * s[1], s[1], v, st->xs, m, st->esz,
                 st->size, 0)) {
            atomic_store_explicit(&st->bad, 1, memory_order_relaxed);
            return;
        }
    }
}

/* out[i][j][k] = x[i][index[i][j][k]][k] (dim 1); walks index's elements. */
static int gather_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *x = a->x, *o = a->out, *ix = a->index;
    if (o->numel == 0) {
        return 0;
    }
    pick_state st = {.esz = ev__dsize(x->dtype), .idt = ix->dtype};
    dim_info(x, a->dim, &st.size, &st.xs);
    int64_t v;
    if (st.size == 0 && first_outside(ix, 0, 0, &v)) {
        /* x is empty (its data may be NULL): every index is out of range. */
        return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, a->dim, 0LL);
    }
    split_walk w = {
        .nops = 3, .ndim = ix->ndim, .split = widest_dim(ix, -1), .row = gather_row,
        .user = &st,
        .data = {ev__tensor_ptr(o), ev__tensor_ptr(x), ev__tensor_ptr(ix)},
    };
    memcpy(w.shape, ix->shape, sizeof(int64_t) * (size_t)ix->ndim);
    byte_strides(o, -1, w.strides[0]);
    byte_strides(x, a->dim, w.strides[1]);
    byte_strides(ix, -1, w.strides[2]);
    split_run(&w, ix->numel);
    if (atomic_load(&st.bad) && first_outside(ix, 0, st.size, &v)) {
        return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, a->dim,
                            (long long)st.size);
    }
    return 0;
}

/* ------------------------------------------------------------------- take */

/* One row of out and index. */
static void take_row(char **p, const int64_t *s, int64_t n, void *user)
{
    pick_state *st = user;
    if (atomic_load_explicit(&st->bad, memory_order_relaxed)) {
        return;
    }
    const ev_tensor *x = st->x;
    const char *X = ev__tensor_ptr(x);
    int contig = ev_tensor_is_contiguous(x);
    int64_t buf[IBLOCK], offs[IBLOCK];
    for (int64_t i = 0; i < n; i += IBLOCK) {
        int64_t m = n - i < IBLOCK ? n - i : IBLOCK;
        const int64_t *v = index_block(p[1] + i * s[1], st->idt, s[1], m, buf);
        if (contig) {
            if (pick(p[0] + i * s[0], s[0], X, 0, v, (int64_t)st->esz, m, st->esz, st->size,
                     1)) {
                atomic_store_explicit(&st->bad, 1, memory_order_relaxed);
                return;
            }
            continue;
        }
        /* A strided x: each flat index (negative ones counting from the
         * end) is unravelled into a byte offset, once checked. */
        if (any_outside(v, m, -st->size, 2 * (uint64_t)st->size)) {
            atomic_store_explicit(&st->bad, 1, memory_order_relaxed);
            return;
        }
        for (int64_t k = 0; k < m; k++) {
            int64_t flat = v[k] < 0 ? v[k] + st->size : v[k], xo = 0;
            for (int d = x->ndim - 1; d >= 0; d--) {
                xo += (flat % x->shape[d]) * x->strides[d];
                flat /= x->shape[d];
            }
            offs[k] = xo * (int64_t)st->esz; /* of any sign */
        }
        for (int64_t k = 0; k < m; k++) {
            ev__copy_elem(p[0] + (i + k) * s[0], X + offs[k], st->esz);
        }
    }
}

/* out[i] = x.flatten()[index[i]], negative indices counting from the end. */
static int take_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *x = a->x, *o = a->out, *ix = a->index;
    if (o->numel == 0) {
        return 0;
    }
    pick_state st = {.esz = ev__dsize(x->dtype), .idt = ix->dtype, .size = x->numel, .x = x};
    int64_t v;
    if (x->numel == 0 && first_outside(ix, 0, 0, &v)) {
        /* x is empty (its data may be NULL): every index is out of range. */
        return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, 0, 0LL);
    }
    split_walk w = {
        .nops = 2, .ndim = ix->ndim, .split = widest_dim(ix, -1), .row = take_row, .user = &st,
        .data = {ev__tensor_ptr(o), ev__tensor_ptr(ix)},
    };
    memcpy(w.shape, ix->shape, sizeof(int64_t) * (size_t)ix->ndim);
    byte_strides(o, -1, w.strides[0]);
    byte_strides(ix, -1, w.strides[1]);
    split_run(&w, ix->numel);
    if (atomic_load(&st.bad) && first_outside(ix, -x->numel, x->numel, &v)) {
        return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, 0,
                            (long long)x->numel);
    }
    return 0;
}

/* ------------------------------------------------------------ scatter_add */

/* dst[v[k] * vs + k * ds] += src[k * ss] for n elements of type T; integers
 * wrap like NumPy's, added unsigned (no signed overflow). */
#define SCATTER_LOOP(T, UT)                                                          \
    for (int64_t k = 0; k < n; k++) {                                                \
        T *d_ = (T *)(void *)(dst + k * ds + v[k] * vs);                             \
        T s_ = *(const T *)(const void *)(src + k * ss);                             \
        *d_ = (T)(UT)((UT)*d_ + (UT)s_);                                             \
    }
#define SCATTER_LOOP_F(T)                                                            \
    for (int64_t k = 0; k < n; k++) {                                                \
        *(T *)(void *)(dst + k * ds + v[k] * vs) += *(const T *)(const void *)(src + k * ss); \
    }

/* The common case: the line of x along dim and src's line both contiguous,
 * so x's offset is v[k] elements and src's k. */
#define SCATTER_DENSE(T, UT)                                                         \
    do {                                                                             \
        T *o_ = (T *)(void *)dst;                                                    \
        const T *s_ = (const T *)(const void *)src;                                  \
        for (int64_t k = 0; k < n; k++) {                                            \
            o_[v[k]] = (T)(UT)((UT)o_[v[k]] + (UT)s_[k]);                            \
        }                                                                            \
    } while (0)

static void scatter(char *dst, int64_t ds, const char *src, int64_t ss, const int64_t *v,
                    int64_t vs, int64_t n, ev_dtype dt)
{
    if (ds == 0 && ss == vs && vs == (int64_t)ev__dsize(dt)) {
        switch (dt) {
        case EV_FLOAT32: SCATTER_DENSE(float, float); return;
        case EV_FLOAT64: SCATTER_DENSE(double, double); return;
        case EV_INT32: SCATTER_DENSE(int32_t, uint32_t); return;
        case EV_INT64: SCATTER_DENSE(int64_t, uint64_t); return;
        default: break;
        }
    }
    switch (dt) {
    case EV_BOOL:
        for (int64_t k = 0; k < n; k++) {
            *(uint8_t *)(dst + k * ds + v[k] * vs) |= *(const uint8_t *)(src + k * ss);
        }
        break;
    case EV_INT32: SCATTER_LOOP(int32_t, uint32_t); break;
    case EV_INT64: SCATTER_LOOP(int64_t, uint64_t); break;
    case EV_UINT8: SCATTER_LOOP(uint8_t, uint8_t); break;
    case EV_INT8: SCATTER_LOOP(int8_t, uint8_t); break;
    case EV_INT16: SCATTER_LOOP(int16_t, uint16_t); break;
    case EV_FLOAT32: SCATTER_LOOP_F(float); break;
    default: SCATTER_LOOP_F(double); break;
    }
}

/* One row of x (stride 0 along dim), src and index. */
static void scatter_row(char **p, const int64_t *s, int64_t n, void *user)
{
    pick_state *st = user;
    if (atomic_load_explicit(&st->bad, memory_order_relaxed)) {
        return;
    }
    int64_t buf[IBLOCK];
    for (int64_t i = 0; i < n; i += IBLOCK) {
        int64_t m = n - i < IBLOCK ? n - i : IBLOCK;
        const int64_t *v = index_block(p[2] + i * s[2], st->idt, s[2], m, buf);
        if (any_outside(v, m, 0, (uint64_t)st->size)) {
            atomic_store_explicit(&st->bad, 1, memory_order_relaxed);
            return;
        }
        scatter(p[0] + i * s[0], s[0], p[1] + i * s[1], s[1], v, st->xs, m, st->dt);
    }
}

/* x[i][index[i][j][k]][k] += src[i][j][k] (dim 1), x being a->out. */
static int scatter_add_kernel(void *p, ev_kctx *kc)
{
    idx_arg *a = p;
    const ev_tensor *o = a->out, *ix = a->index, *s = a->src;
    if (ix->numel == 0) {
        return 0;
    }
    pick_state st = {.esz = ev__dsize(o->dtype), .idt = ix->dtype, .dt = o->dtype};
    dim_info(o, a->dim, &st.size, &st.xs);
    int64_t v;
    if (st.size == 0 && first_outside(ix, 0, 0, &v)) {
        /* x is empty (its data may be NULL): every index is out of range. */
        return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, a->dim, 0LL);
    }
    /* Chunks split a dimension other than dim: they add into disjoint parts
     * of x. A 1-d (or 0-d) index has none and runs whole. */
    int split = widest_dim(ix, a->dim);
    split_walk w = {
        .nops = 3, .ndim = ix->ndim, .split = split, .row = scatter_row, .user = &st,
        .data = {ev__tensor_ptr(o), ev__tensor_ptr(s), ev__tensor_ptr(ix)},
    };
    memcpy(w.shape, ix->shape, sizeof(int64_t) * (size_t)ix->ndim);
    byte_strides(o, a->dim, w.strides[0]);
    byte_strides(s, -1, w.strides[1]);
    byte_strides(ix, -1, w.strides[2]);
    if (ix->ndim <= 1) {
        split_chunk(0, ix->ndim ? ix->shape[0] : 1, &w);
    } else {
        split_run(&w, ix->numel);
    }
    if (atomic_load(&st.bad) && first_outside(ix, 0, st.size, &v)) {
        return ev_kctx_fail(kc, EV_EINDEX, OOB_FMT, a->name, (long long)v, a->dim,
                            (long long)st.size);
    }
    return 0;
}

/* ---------------------------------------------------------- issuing side */

static int issue(const ev_exec *ex, const char *name, ev_kernel_fn kernel, ev_tensor *x,
                 ev_tensor *index, ev_tensor *src, ev_tensor *out, int dim)
{
    idx_arg a = {
        .x = ev_tensor_ref(x),
        .index = ev_tensor_ref(index),
        .src = ev_tensor_ref(src),
        .out = ev_tensor_ref(out),
        .dim = dim,
        .name = name,
    };
    ev_tensor *reads[3] = {a.x, a.index, a.src};
    return ev__submit(ex, name, kernel, &a, sizeof a, idx_drop, reads, 3, &a.out, 1);
}

static int check_common(const char *name, const ev_exec *ex, ev_tensor *x, ev_tensor *index,
                        ev_tensor **out)
{
    int rc;
    if ((rc = ev__check_exec(name, ex)) || (rc = ev__check_tensor(name, "x", x)) ||
        (rc = ev__check_tensor(name, "index", index))) {
        return rc;
    }
    if (out == NULL) {
        return ev__set_message(EV_EINVAL, "%s: out is NULL", name);
    }
    return check_index_dtype(name, index);
}

int ev_index_select(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor **out)
{
    const char *name = "index_select";
    int rc, d;
    if ((rc = check_common(name, ex, x, index, out)) || (rc = norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    if (index->ndim > 1) {
        return ev__set_message(EV_EINVAL, "%s: index must be 0-d or 1-d, not %d-d", name,
                               index->ndim);
    }
    int64_t shape[EV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    int nd = x->ndim;
    if (nd > 0) {
        shape[d] = index->numel;
    } else if (index->ndim == 1) {
        /* A 0-d x indexed by a 1-d index gives a 1-d result (PyTorch). */
        shape[0] = index->numel;
        nd = 1;
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, nd, shape, &dst))) {
        return rc;
    }
    idx_arg a = {
        .x = ev_tensor_ref(x),
        .index = ev_tensor_ref(index),
        .dim = x->ndim ? d : 0,
        .name = name,
        .O = ev__tensor_ptr(dst),
    };
    ev_tensor *reads[2] = {x, index};
    if ((rc = ev__submit(ex, name, index_select_kernel, &a, sizeof a, idx_drop, reads, 2, &dst,
                         1))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_gather(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor **out)
{
    const char *name = "gather";
    int rc, d;
    if ((rc = check_common(name, ex, x, index, out)) || (rc = norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    char sx[EV__SHAPE_STR_SIZE], si[EV__SHAPE_STR_SIZE];
    ev__shape_str(x->ndim, x->shape, sx, sizeof sx);
    ev__shape_str(index->ndim, index->shape, si, sizeof si);
    if (index->ndim != x->ndim) {
        return ev__set_message(EV_EINVAL, "%s: index %s must have as many dimensions as x %s",
                               name, si, sx);
    }
    for (int i = 0; i < x->ndim; i++) {
        if (i != d && index->shape[i] > x->shape[i]) {
            return ev__set_message(EV_EINVAL, "%s: index %s is larger than x %s in dimension "
                                   "%d", name, si, sx, i);
        }
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, index->ndim, index->shape, &dst))) {
        return rc;
    }
    if ((rc = issue(ex, name, gather_kernel, x, index, NULL, dst, d))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_take(const ev_exec *ex, ev_tensor *x, ev_tensor *index, ev_tensor **out)
{
    const char *name = "take";
    int rc;
    if ((rc = check_common(name, ex, x, index, out))) {
        return rc;
    }
    ev_tensor *dst;
    if ((rc = ev__tensor_new(name, ex, x->dtype, index->ndim, index->shape, &dst))) {
        return rc;
    }
    if ((rc = issue(ex, name, take_kernel, x, index, NULL, dst, 0))) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

/* A private copy of t when it may share memory with w (so the kernel reads
 * it whole before writing w), else a new reference to t. */
static int unalias(const ev_exec *ex, const char *name, ev_tensor *t, ev_tensor *w,
                   ev_tensor **out)
{
    if (!ev__may_overlap(t, w)) {
        *out = ev_tensor_ref(t);
        return 0;
    }
    int rc = ev__tensor_new(name, ex, t->dtype, t->ndim, t->shape, out);
    if (rc == 0 && (rc = ev__copy(ex, name, *out, t)) != 0) {
        ev_tensor_unref(*out);
    }
    return rc;
}

static int scatter_add(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                       ev_tensor *src, int inplace, ev_tensor **out)
{
    const char *name = inplace ? "scatter_add_" : "scatter_add";
    int rc, d;
    ev_tensor *dummy;
    if ((rc = check_common(name, ex, x, index, inplace ? &dummy : out)) ||
        (rc = ev__check_tensor(name, "src", src)) || (rc = norm_dim0(name, dim, x, &d))) {
        return rc;
    }
    if (src->dtype != x->dtype) {
        return ev__set_message(EV_ETYPE, "%s: src dtype %s must equal x dtype %s", name,
                               ev_dtype_name(src->dtype), ev_dtype_name(x->dtype));
    }
    char sx[EV__SHAPE_STR_SIZE], si[EV__SHAPE_STR_SIZE], ss[EV__SHAPE_STR_SIZE];
    ev__shape_str(x->ndim, x->shape, sx, sizeof sx);
    ev__shape_str(index->ndim, index->shape, si, sizeof si);
    ev__shape_str(src->ndim, src->shape, ss, sizeof ss);
    if (index->ndim != x->ndim || src->ndim != x->ndim) {
        return ev__set_message(EV_EINVAL, "%s: x %s, index %s and src %s must have the same "
                               "number of dimensions", name, sx, si, ss);
    }
    for (int i = 0; i < x->ndim; i++) {
        if (index->shape[i] > src->shape[i] || (i != d && index->shape[i] > x->shape[i])) {
            return ev__set_message(EV_EINVAL, "%s: index %s is larger than src %s or x %s in "
                                   "dimension %d", name, si, ss, sx, i);
        }
    }
    ev_tensor *dst;
    if (inplace) {
        if (ev__has_internal_overlap(x)) {
            return ev__set_message(EV_EINVAL, "%s: x is an expanded tensor (some elements "
                                   "share memory)", name);
        }
        dst = ev_tensor_ref(x);
    } else {
        if ((rc = ev__tensor_new(name, ex, x->dtype, x->ndim, x->shape, &dst))) {
            return rc;
        }
        if ((rc = ev__copy(ex, name, dst, x))) {
            ev_tensor_unref(dst);
            return rc;
        }
    }
    ev_tensor *s2 = NULL, *i2 = NULL;
    if ((rc = unalias(ex, name, src, dst, &s2)) || (rc = unalias(ex, name, index, dst, &i2))) {
        goto done;
    }
    rc = issue(ex, name, scatter_add_kernel, NULL, i2, s2, dst, d);
done:
    ev_tensor_unref(s2);
    ev_tensor_unref(i2);
    if (rc || inplace) {
        ev_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    return 0;
}

int ev_scatter_add(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor *src,
                   ev_tensor **out)
{
    return scatter_add(ex, x, dim, index, src, 0, out);
}

int ev_scatter_add_(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor *src)
{
    return scatter_add(ex, x, dim, index, src, 1, NULL);
}
