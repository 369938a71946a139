/* Our float32 gemm (contract in gemm_f32.h): C = A B + beta C, blocked the
 * BLIS way. B is packed KC x NC at a time into NR-wide column panels, A
 * MC x KC at a time into MR-tall row panels, and a register-blocked AVX-512
 * micro-kernel computes one MR x NR tile of C from a row panel and a column
 * panel: per step of k it loads NR floats of B (two vectors) and broadcasts
 * MR floats of A into 2 MR accumulators. Panels are zero-padded at the
 * edges, so the kernel always runs a whole tile and stores only what lies
 * in C (masked columns, counted rows).
 *
 * Why our own: Debian's OpenBLAS 0.3.21 runs its Haswell (AVX2) kernels on
 * this Zen 5 CPU, half the vector width the cores have; and for the small
 * and middle sizes of a training step its per-call costs show. */
#include "ops/gemm_f32.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* The micro-tile: MR rows of C by NR columns (two 16-float vectors): 24
 * accumulators, two B vectors and the broadcast in 32 registers; enough
 * independent FMAs to cover their latency on two FMA pipes. */
#define MR 12
#define NR 32
/* Cache blocking for the Zen 5 EPYC (48 KB L1d, 1 MB L2): a KC x NR panel
 * of B (32 KB at most) stays in L1 while the MC x KC block of A (at most
 * 144 KB) streams from L2 past it; a KC x NC block of B (1 MB at most) is
 * read from L2/L3 once per block of A. Measured with bench/gemm_f32.c (the
 * -D overrides are for that): KC 384 or 512, MC 72 or 288 and NC 512 or
 * 2048 were no faster on the MLP's shapes and the 256..1024 cubes, MC 288
 * much slower on 512^3 and up (A's block leaves L2). */
#ifndef KC
#define KC 256
#endif
#ifndef MC
#define MC 144
#endif
#ifndef NC
#define NC 1024
#endif

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t round_up(int64_t v, int64_t to)
{
    return (v + to - 1) / to * to;
}

/* The k block: k cut into ceil(k / KC) equal blocks (no short last one to
 * pay a pass over C for little work). Depends on k alone, which keeps the
 * order of the sums fixed (see the header). */
static int64_t k_block(int64_t k)
{
    int64_t blocks = (k + KC - 1) / KC;
    return blocks > 0 ? (k + blocks - 1) / blocks : 0;
}

/* ---------------------------------------------------------------- packing */

/* Packing and the kernels exist for x86-64 only (AVX-512, chosen at run
 * time); elsewhere ev__sgemm_supported() is 0 and no product reaches them. */
#ifdef HAVE_X86
/* dst[p * ldd + r] = src[r * lds + p] for r < rows, p < cols (both <= 16),
 * as one 16 x 16 transpose in registers; each of the cols rows of dst gets
 * width (<= 16) floats, those past rows 0. Masked loads touch no memory
 * past rows and cols. */
__attribute__((target("avx512f"))) static void transpose16(const float *src, int64_t lds,
                                                           int64_t rows, int64_t cols,
                                                           float *dst, int64_t ldd,
                                                           int64_t width)
{
    __mmask16 lm = (__mmask16)(cols >= 16 ? 0xffffu : (1u << cols) - 1);
    __mmask16 sm = (__mmask16)(width >= 16 ? 0xffffu : (1u << width) - 1);
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        r[i] = i < rows ? _mm512_maskz_loadu_ps(lm, src + i * lds) : _mm512_setzero_ps();
    }
    /* Pairs of rows interleaved, then 4 x 4 blocks transposed inside each
     * 128-bit lane: r[4i + j] lane L holds rows 4i..4i+3 of column 4L + j. */
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    /* Then the lanes: column 4L + j is lane L of r[j], r[4 + j], r[8 + j],
     * r[12 + j]. */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512 v01 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
        __m512 v23 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xee);
        __m512 w01 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        __m512 w23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xee);
        t[j] = _mm512_shuffle_f32x4(v01, w01, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(v01, w01, 0xdd);
        t[8 + j] = _mm512_shuffle_f32x4(v23, w23, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(v23, w23, 0xdd);
    }
#pragma GCC unroll 16
    for (int p = 0; p < 16; p++) {
        if (p < cols) {
            _mm512_mask_storeu_ps(dst + p * ldd, sm, t[p]);
        }
    }
}

/* dst[p * width + j] = src[p * rs + j] for p < kc, j < cols <= width (16
 * or 32); 0 past cols. dst is 64-byte aligned. */
__attribute__((target("avx512f"))) static void copy_rows(int64_t kc, int64_t cols,
                                                         const float *src, int64_t rs,
                                                         float *dst, int64_t width)
{
    __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffffu : (1u << cols) - 1);
    __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffffu : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
    if (width == 16) {
        for (int64_t p = 0; p < kc; p++) {
            _mm512_store_ps(dst + p * 16, _mm512_maskz_loadu_ps(m0, src + p * rs));
        }
        return;
    }
    for (int64_t p = 0; p < kc; p++) {
        _mm512_store_ps(dst + p * 32, _mm512_maskz_loadu_ps(m0, src + p * rs));
        _mm512_store_ps(dst + p * 32 + 16, _mm512_maskz_loadu_ps(m1, src + p * rs + 16));
    }
}

/* dst[p * MR + r] = src[p * cs + r] for p < kc, r < rows <= MR; 0 past
 * rows. */
__attribute__((target("avx512f"))) static void copy_cols12(int64_t kc, int64_t rows,
                                                           const float *src, int64_t cs,
                                                           float *dst)
{
    _Static_assert(MR <= 16, "a panel step in one vector");
    __mmask16 lm = (__mmask16)((1u << rows) - 1), sm = (__mmask16)((1u << MR) - 1);
    for (int64_t p = 0; p < kc; p++) {
        _mm512_mask_storeu_ps(dst + p * MR, sm, _mm512_maskz_loadu_ps(lm, src + p * cs));
    }
}

/* mc x kc of A (at a, strides rs, cs) into row panels of MR: panel q holds,
 * for each p, rows q MR .. q MR + MR - 1 of column p; rows past mc are 0. */
static void pack_a(int64_t mc, int64_t kc, const float *a, int64_t rs, int64_t cs, float *dst)
{
    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        int64_t rows = min64(MR, mc - i0);
        const float *src = a + i0 * rs;
        if (rs == 1) {
            /* A transposed (a column of A is dense): MR floats per step. */
            copy_cols12(kc, rows, src, cs, dst);
        } else if (cs == 1) {
            /* Rows of A dense: 16 steps of k at a time, transposed. */
            for (int64_t p = 0; p < kc; p += 16) {
                transpose16(src + p, rs, rows, min64(16, kc - p), dst + p * MR, MR, MR);
            }
        } else {
            /* Any strides: row by row, so each row is read in order. */
            for (int64_t r = 0; r < MR; r++) {
                const float *s = src + r * rs;
                float *d = dst + r;
                for (int64_t p = 0; p < kc; p++) {
                    d[p * MR] = r < rows ? s[p * cs] : 0.0f;
                }
            }
        }
        dst += MR * kc;
    }
}

/* The width of the column panel that starts cols_left columns before the
 * end of B's block: NR, or 16 for a last panel of at most 16 columns (the
 * one-vector kernel then computes it, without the half tile of padding). */
static int64_t panel_width(int64_t cols_left)
{
    return cols_left <= 16 ? 16 : NR;
}

/* kc x nc of B (at b, strides rs, cs) into column panels: panel q, at
 * q NR kc floats, holds for each p columns q NR .. q NR + w - 1 of row p (w
 * = panel_width); columns past nc are 0. */
static void pack_b(int64_t kc, int64_t nc, const float *b, int64_t rs, int64_t cs, float *dst)
{
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        int64_t cols = min64(NR, nc - j0), width = panel_width(nc - j0);
        const float *src = b + j0 * cs;
        if (cs == 1) {
            /* Rows of B dense: a row of the panel per step, masked at the
             * edge. */
            copy_rows(kc, cols, src, rs, dst, width);
        } else if (rs == 1) {
            /* B transposed (a column of B is dense): 16 columns by 16 steps
             * of k at a time, transposed. */
            for (int64_t p = 0; p < kc; p += 16) {
                int64_t steps = min64(16, kc - p);
                for (int64_t h = 0; h < width; h += 16) {
                    transpose16(src + h * cs + p, cs, cols > h ? min64(16, cols - h) : 0, steps,
                                dst + p * width + h, width, 16);
                }
            }
        } else {
            /* Any strides: column by column, each read in order. */
            for (int64_t j = 0; j < width; j++) {
                const float *s = src + j * cs;
                float *d = dst + j;
                for (int64_t p = 0; p < kc; p++) {
                    d[p * width] = j < cols ? s[p * rs] : 0.0f;
                }
            }
        }
        dst += NR * kc;
    }
}

/* ------------------------------------------------------------ micro-kernel */

/* How a tile's sum goes into C: the first k block of a product with beta 0
 * overwrites (C is not read), with beta != 0 scales, later blocks add. */
enum { STORE_SET = 0, STORE_ADD = 1, STORE_BETA = 2 };

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
_Static_assert(MR == 12, "ROWS lists MR rows");

/* C tile (mr <= MR rows, nr <= NR columns, at c with row stride ldc) from
 * kc steps of the panels ap (MR floats a step) and bp (NR floats a step,
 * 64-byte aligned). */
__attribute__((target("avx512f"))) static void
kernel_avx512(int64_t kc, const float *restrict ap, const float *restrict bp, float *restrict c,
              int64_t ldc, int64_t mr, int64_t nr, int how, float beta)
{
#define DECL(r) __m512 c##r##a = _mm512_setzero_ps(), c##r##b = _mm512_setzero_ps();
    ROWS(DECL)
#undef DECL
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#define STEP(r)                                                                              \
    {                                                                                        \
        __m512 av = _mm512_set1_ps(ap[r]);                                                   \
        c##r##a = _mm512_fmadd_ps(av, b0, c##r##a);                                          \
        c##r##b = _mm512_fmadd_ps(av, b1, c##r##b);                                          \
    }
        ROWS(STEP)
#undef STEP
        ap += MR;
        bp += NR;
    }
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= NR ? (__mmask16)0xffff
                            : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : (__mmask16)0;
    __m512 vbeta = _mm512_set1_ps(beta);
#define STORE(r)                                                                             \
    if (r < mr) {                                                                            \
        float *cr = c + r * ldc;                                                             \
        __m512 va = c##r##a, vb = c##r##b;                                                   \
        if (how == STORE_ADD) {                                                              \
            va = _mm512_add_ps(va, _mm512_maskz_loadu_ps(m0, cr));                           \
            vb = _mm512_add_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16));                      \
        } else if (how == STORE_BETA) {                                                      \
            va = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m0, cr), va);                  \
            vb = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m1, cr + 16), vb);             \
        }                                                                                    \
        _mm512_mask_storeu_ps(cr, m0, va);                                                   \
        _mm512_mask_storeu_ps(cr + 16, m1, vb);                                              \
    }
    ROWS(STORE)
#undef STORE
}

/* The same for a panel 16 wide (nr <= 16; bp has 16 floats a step): one
 * vector a row. Each element is summed in the same order as above. */
__attribute__((target("avx512f"))) static void
kernel16_avx512(int64_t kc, const float *restrict ap, const float *restrict bp,
                float *restrict c, int64_t ldc, int64_t mr, int64_t nr, int how, float beta)
{
#define DECL(r) __m512 c##r##a = _mm512_setzero_ps();
    ROWS(DECL)
#undef DECL
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(bp);
#define STEP(r) c##r##a = _mm512_fmadd_ps(_mm512_set1_ps(ap[r]), b0, c##r##a);
        ROWS(STEP)
#undef STEP
        ap += MR;
        bp += 16;
    }
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
    __m512 vbeta = _mm512_set1_ps(beta);
#define STORE(r)                                                                             \
    if (r < mr) {                                                                            \
        float *cr = c + r * ldc;                                                             \
        __m512 va = c##r##a;                                                                 \
        if (how == STORE_ADD) {                                                              \
            va = _mm512_add_ps(va, _mm512_maskz_loadu_ps(m0, cr));                           \
        } else if (how == STORE_BETA) {                                                      \
            va = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m0, cr), va);                  \
        }                                                                                    \
        _mm512_mask_storeu_ps(cr, m0, va);                                                   \
    }
    ROWS(STORE)
#undef STORE
}
#undef ROWS
#endif /* HAVE_X86 */

int ev__sgemm_supported(void)
{
#ifdef HAVE_X86
    /* The CPU model is filled in by a constructor of libgcc; calling its
     * init first makes this safe from other constructors too (it does the
     * work once). The answer is the same for every thread. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 1 : 0;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------ tasks */

/* The packing blocks of a task of at most rows x cols of C, depth k: B's
 * first, whose size is a multiple of NR floats (64 bytes), so that A's
 * starts aligned too. */
static int64_t b_block_floats(int64_t k, int64_t cols)
{
    return k_block(k) * min64(NC, round_up(cols, NR));
}

size_t ev__sgemm_work_floats(const ev__sgemm *g, const ev__sgemm_grid *grid)
{
    int64_t rows = grid ? grid->rows_per : g->m, cols = grid ? grid->cols_per : g->n;
    return (size_t)(b_block_floats(g->k, cols) + k_block(g->k) * min64(MC, round_up(rows, MR))) +
           16;
}

ev__sgemm_grid ev__sgemm_grid_for(const ev__sgemm *g, int max_tasks)
{
    ev__sgemm_grid best = {1, 1, g->m > 0 ? g->m : 1, g->n > 0 ? g->n : 1};
    int64_t row_panels = (g->m + MR - 1) / MR, col_panels = (g->n + NR - 1) / NR;
    if (max_tasks <= 1 || row_panels * col_panels <= 1) {
        return best;
    }
    /* Each task packs the A rows and the B columns of its tile: a grid of
     * tr x tc tasks packs A tc times and B tr times. Take the grid of at
     * most max_tasks tiles with the most tasks, then the least packing. */
    int64_t best_tasks = 1, best_cost = INT64_MAX;
    for (int64_t tr = 1; tr <= max_tasks && tr <= row_panels; tr++) {
        int64_t tc = min64(max_tasks / tr, col_panels);
        int64_t rows_per = (row_panels + tr - 1) / tr * MR;
        int64_t cols_per = (col_panels + tc - 1) / tc * NR;
        int64_t rt = (g->m + rows_per - 1) / rows_per, ct = (g->n + cols_per - 1) / cols_per;
        int64_t tasks = rt * ct, cost = rt * g->n + ct * g->m;
        if (tasks > best_tasks || (tasks == best_tasks && cost < best_cost)) {
            best = (ev__sgemm_grid){rt, ct, rows_per, cols_per};
            best_tasks = tasks;
            best_cost = cost;
        }
    }
    return best;
}

/* C[i0:i1, j0:j1] = beta C + A[i0:i1, :] B[:, j0:j1]. */
static void tile(const ev__sgemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, float *work)
{
    if (g->k == 0) {
        for (int64_t i = i0; i < i1; i++) {
            float *c = g->c + i * g->ldc;
            for (int64_t j = j0; j < j1; j++) {
                c[j] = g->beta == 0.0f ? 0.0f : g->beta * c[j];
            }
        }
        return;
    }
#ifdef HAVE_X86
    int64_t kc = k_block(g->k);
    float *bp = (float *)(((uintptr_t)work + 63) & ~(uintptr_t)63);
    float *ap = bp + b_block_floats(g->k, j1 - j0);
    /* With upper, a block or micro-tile whose first row lies past its last
     * column is wholly below the diagonal: skipped. */
    int upper = g->upper != 0;
    for (int64_t jc = j0; jc < j1; jc += NC) {
        int64_t nc = min64(NC, j1 - jc);
        if (upper && i0 >= jc + nc) {
            continue;
        }
        for (int64_t pc = 0; pc < g->k; pc += kc) {
            int64_t kb = min64(kc, g->k - pc);
            pack_b(kb, nc, g->b + pc * g->b_rs + jc * g->b_cs, g->b_rs, g->b_cs, bp);
            int how = pc > 0 ? STORE_ADD : g->beta == 0.0f ? STORE_SET : STORE_BETA;
            for (int64_t ic = i0; ic < i1 && !(upper && ic >= jc + nc); ic += MC) {
                int64_t mc = min64(MC, i1 - ic);
                pack_a(mc, kb, g->a + ic * g->a_rs + pc * g->a_cs, g->a_rs, g->a_cs, ap);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    int64_t nr = min64(NR, nc - jr);
                    /* Micro-tiles from row ic + ir on: below the diagonal
                     * once ic + ir >= jc + jr + nr. */
                    int64_t ir_end = upper ? min64(mc, jc + jr + nr - ic) : mc;
                    float *c = g->c + ic * g->ldc + jc + jr;
                    const float *bq = bp + jr * kb;
                    if (panel_width(nc - jr) == 16) {
                        for (int64_t ir = 0; ir < ir_end; ir += MR) {
                            kernel16_avx512(kb, ap + ir * kb, bq, c + ir * g->ldc, g->ldc,
                                            min64(MR, mc - ir), nr, how, g->beta);
                        }
                    } else {
                        for (int64_t ir = 0; ir < ir_end; ir += MR) {
                            kernel_avx512(kb, ap + ir * kb, bq, c + ir * g->ldc, g->ldc,
                                          min64(MR, mc - ir), nr, how, g->beta);
                        }
                    }
                }
            }
        }
    }
#else
    (void)work;
#endif
}

void ev__sgemm_task(const ev__sgemm *g, const ev__sgemm_grid *grid, int64_t t, float *work)
{
    int64_t tr = t / grid->cols, tc = t % grid->cols;
    int64_t i0 = tr * grid->rows_per, j0 = tc * grid->cols_per;
    if (i0 < g->m && j0 < g->n && !(g->upper && i0 >= j0 + grid->cols_per)) {
        tile(g, i0, min64(g->m, i0 + grid->rows_per), j0, min64(g->n, j0 + grid->cols_per), work);
    }
}

void ev__sgemm_run(const ev__sgemm *g, float *work)
{
    if (g->m > 0 && g->n > 0) {
        tile(g, 0, g->m, 0, g->n, work);
    }
}
