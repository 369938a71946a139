/* The N-d iterator every kernel walks its operands with, and the buffered
 * driver that runs a contiguous loop over operands of any strides and dtypes. */
#include <string.h>

#include "tensor/tensor-impl.h"

/* Elements per buffered block: small enough that the buffers of four operands
 * (8 KiB each at 8 bytes) stay in L1, large enough to amortise the call (at
 * 256, x * 2 on 1e5 floats took twice as long). */
#define BLOCK 1024

static void iter_setup(ev__iter *it, int nops, int ndim, const int64_t *shape,
                       char *const *data, const int64_t (*strides)[EV_MAX_DIMS], int reorder)
{
    it->nops = nops;
    it->numel = 1;
    for (int d = 0; d < ndim; d++) {
        it->numel *= shape[d];
    }
    for (int k = 0; k < nops; k++) {
        it->data[k] = data[k];
    }
    /* The dimensions innermost first: in C order, or (reorder) ordered by
     * operand 0's strides when its memory runs in another order (a
     * transposed result of transposed inputs: the loop then walks memory,
     * as NumPy's and PyTorch's iterators reorder; an operand 0 with a zero
     * stride keeps C order). Dimensions of size 1 are dropped (their
     * strides do not matter). */
    int order[EV_MAX_DIMS], m = 0, sortable = reorder;
    for (int d = 0; d < ndim; d++) {
        sortable &= shape[d] == 1 || strides[0][d] != 0; /* an operand 0 read as broadcast */
    }
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] == 1) {
            continue;
        }
        if (!sortable) {
            order[m++] = d;
            continue;
        }
        int64_t key = strides[0][d] < 0 ? -strides[0][d] : strides[0][d];
        int j = m++;
        for (; j > 0; j--) {
            int64_t kj = strides[0][order[j - 1]];
            if ((kj < 0 ? -kj : kj) <= key) {
                break;
            }
            order[j] = order[j - 1];
        }
        order[j] = d;
    }
    /* Merging a dimension into the one inside it when every operand steps
     * over both as one. */
    int n = 0;
    for (int i = 0; i < m; i++) {
        int d = order[i];
        int merge = n > 0;
        for (int k = 0; merge && k < nops; k++) {
            merge = strides[k][d] == it->strides[k][n - 1] * it->shape[n - 1];
        }
        if (merge) {
            it->shape[n - 1] *= shape[d];
            continue;
        }
        it->shape[n] = shape[d];
        for (int k = 0; k < nops; k++) {
            it->strides[k][n] = strides[k][d];
        }
        n++;
    }
    if (n == 0) {
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) {
            it->strides[k][0] = 0;
        }
        n = 1;
    }
    it->ndim = n;
}

void ev__iter_init_raw(ev__iter *it, int nops, int ndim, const int64_t *shape,
                       char *const *data, const int64_t (*strides)[EV_MAX_DIMS])
{
    iter_setup(it, nops, ndim, shape, data, strides, 0);
}

static void iter_init(ev__iter *it, int nops, ev_tensor *const *ops, int reorder)
{
    char *data[EV__ITER_MAX_OPS];
    int64_t strides[EV__ITER_MAX_OPS][EV_MAX_DIMS];
    for (int k = 0; k < nops; k++) {
        int64_t size = (int64_t)ev__dsize(ops[k]->dtype);
        data[k] = ev__tensor_ptr(ops[k]);
        for (int d = 0; d < ops[0]->ndim; d++) {
            strides[k][d] = ops[k]->strides[d] * size;
        }
    }
    iter_setup(it, nops, ops[0]->ndim, ops[0]->shape, data,
               (const int64_t(*)[EV_MAX_DIMS])strides, reorder);
}

void ev__iter_init(ev__iter *it, int nops, ev_tensor *const *ops)
{
    iter_init(it, nops, ops, 0);
}

void ev__iter_init_by_output(ev__iter *it, int nops, ev_tensor *const *ops)
{
    iter_init(it, nops, ops, 1);
}

void ev__iter_rows(const ev__iter *it, ev__row_fn fn, void *user)
{
    if (it->numel == 0) {
        return;
    }
    int64_t idx[EV_MAX_DIMS] = {0};
    int64_t off[EV__ITER_MAX_OPS] = {0};
    int64_t inner[EV__ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++) {
        inner[k] = it->strides[k][0];
    }
    for (;;) {
        char *ptrs[EV__ITER_MAX_OPS];
        for (int k = 0; k < it->nops; k++) {
            ptrs[k] = it->data[k] + off[k];
        }
        fn(ptrs, inner, it->shape[0], user);
        /* Odometer over the outer dimensions. */
        int d = 1;
        for (; d < it->ndim; d++) {
            for (int k = 0; k < it->nops; k++) {
                off[k] += it->strides[k][d];
            }
            if (++idx[d] < it->shape[d]) {
                break;
            }
            for (int k = 0; k < it->nops; k++) {
                off[k] -= it->strides[k][d] * it->shape[d];
            }
            idx[d] = 0;
        }
        if (d == it->ndim) {
            return;
        }
    }
}

/* ------------------------------------------------------------ loop driver */

typedef struct loop_state {
    const ev_dtype *dt;   /* dtype of each operand, [0] the output */
    int nops;
    ev_dtype loop_in, loop_out;
    int64_t in_size, out_size;
    ev__loop_fn loop;
    ev__loop_ctx *ctx;
} loop_state;

static void loop_row(char **p, const int64_t *s, int64_t n, void *user)
{
    loop_state *st = user;
    int out_direct = st->dt[0] == st->loop_out && s[0] == st->out_size;
    int in_direct[EV__ITER_MAX_OPS];
    int all = out_direct;
    for (int k = 1; k < st->nops; k++) {
        in_direct[k] = st->dt[k] == st->loop_in && s[k] == st->in_size;
        all = all && in_direct[k];
    }
    const void *in[EV__ITER_MAX_OPS];
    if (all) {
        for (int k = 1; k < st->nops; k++) {
            in[k - 1] = p[k];
        }
        st->loop(p[0], in, n, st->ctx);
        return;
    }
    /* Some operand is strided or of another dtype: convert it block by block
     * into a contiguous buffer of the loop's dtype. */
    _Alignas(64) char buf[EV__ITER_MAX_OPS][BLOCK * 8];
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t m = n - i < BLOCK ? n - i : BLOCK;
        for (int k = 1; k < st->nops; k++) {
            char *src = p[k] + i * s[k];
            if (in_direct[k]) {
                in[k - 1] = src;
            } else if (s[k] == 0 && i > 0) {
                /* A broadcast value (a scalar operand): the first block's
                 * buffer already holds it, converted. */
                in[k - 1] = buf[k];
            } else {
                ev__cast_strided(buf[k], st->loop_in, st->in_size, src, st->dt[k], s[k], m);
                in[k - 1] = buf[k];
            }
        }
        char *dst = p[0] + i * s[0];
        st->loop(out_direct ? dst : buf[0], in, m, st->ctx);
        if (!out_direct) {
            ev__cast_strided(dst, st->dt[0], s[0], buf[0], st->loop_out, st->out_size, m);
        }
    }
}

/* ------------------------------------------------------- tiled loop driver
 *
 * An input far apart along dimension 0 (the rows the loop runs along) and
 * close along dimension 1 -- a transposed input of a contiguous output --
 * read row by row touches a cache line and a page per element, and its
 * lines, a power of two apart, fight over a few cache sets: neg of a
 * transposed 1024 x 1024 float32 took 2 ms. Such inputs are converted a
 * tile of TILE_COLS rows by TILE_ROWS at a time into a buffer, reading
 * along dimension 1; the loop then runs along the tile's rows. */
#define TILE_COLS 128 /* elements along dimension 0: one loop call */
#define TILE_ROWS 32  /* along dimension 1: two cache lines of float32 (of the
                         shapes tried, 64-256 x 8-64, the fastest) */

enum { IN_DIRECT, IN_TILE, IN_ROW };

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* 1 if some input steps more than a cache line along dimension 0 and less
 * along dimension 1. */
static int wants_tiles(const ev__iter *it, const loop_state *st)
{
    if (it->ndim < 2 || it->shape[0] < 8 || it->shape[1] < 8) {
        return 0;
    }
    for (int k = 1; k < st->nops; k++) {
        int64_t s0 = abs64(it->strides[k][0]), s1 = abs64(it->strides[k][1]);
        if (s0 > 64 && s1 < s0) {
            return 1;
        }
    }
    return 0;
}

/* One tile: columns [i0, i0 + m0) of dimension 0, rows [i1, i1 + m1) of
 * dimension 1, at byte offsets off[k] of the outer position. tile[k - 1]
 * is input k's buffer, row[k] operand k's row buffer. */
static void run_tile(const ev__iter *it, const loop_state *st, const int *kind,
                     const int64_t *off, int64_t i0, int64_t m0, int64_t i1, int64_t m1,
                     char (*tile)[TILE_COLS * TILE_ROWS * 8], char (*row)[TILE_COLS * 8])
{
    int64_t isz = st->in_size, osz = st->out_size;
    for (int k = 1; k < st->nops; k++) {
        if (kind[k] != IN_TILE) {
            continue;
        }
        const char *src = it->data[k] + off[k] + i0 * it->strides[k][0] + i1 * it->strides[k][1];
        int64_t s0 = it->strides[k][0];
        if (st->dt[k] == st->loop_in && it->strides[k][1] == isz && s0 % isz == 0) {
            /* No conversion: the copies' tiled transpose. */
            ev__transpose_block(tile[k - 1], TILE_COLS, src, s0 / isz, m1, m0, (size_t)isz);
            continue;
        }
        for (int64_t c = 0; c < m0; c++) {
            /* Column c of the tile: m1 elements along dimension 1. */
            ev__cast_strided(tile[k - 1] + c * isz, st->loop_in, TILE_COLS * isz,
                             src + c * it->strides[k][0], st->dt[k], it->strides[k][1], m1);
        }
    }
    int out_direct = st->dt[0] == st->loop_out && it->strides[0][0] == osz;
    for (int64_t r = 0; r < m1; r++) {
        const void *in[EV__ITER_MAX_OPS];
        for (int k = 1; k < st->nops; k++) {
            const char *p = it->data[k] + off[k] + i0 * it->strides[k][0] +
                            (i1 + r) * it->strides[k][1];
            if (kind[k] == IN_DIRECT) {
                in[k - 1] = p;
            } else if (kind[k] == IN_TILE) {
                in[k - 1] = tile[k - 1] + r * TILE_COLS * isz;
            } else {
                ev__cast_strided(row[k], st->loop_in, isz, p, st->dt[k], it->strides[k][0], m0);
                in[k - 1] = row[k];
            }
        }
        char *dst = it->data[0] + off[0] + i0 * it->strides[0][0] + (i1 + r) * it->strides[0][1];
        st->loop(out_direct ? dst : row[0], in, m0, st->ctx);
        if (!out_direct) {
            ev__cast_strided(dst, st->dt[0], it->strides[0][0], row[0], st->loop_out, osz, m0);
        }
    }
}

static void run_tiled(const ev__iter *it, const loop_state *st)
{
    _Alignas(64) char tile[EV__ITER_MAX_OPS - 1][TILE_COLS * TILE_ROWS * 8]; /* 96 KiB */
    _Alignas(64) char row[EV__ITER_MAX_OPS][TILE_COLS * 8];
    int kind[EV__ITER_MAX_OPS] = {IN_DIRECT};
    for (int k = 1; k < st->nops; k++) {
        int64_t s0 = it->strides[k][0], s1 = it->strides[k][1];
        if (st->dt[k] == st->loop_in && s0 == st->in_size) {
            kind[k] = IN_DIRECT;
        } else if (abs64(s0) > 64 && abs64(s1) < abs64(s0)) {
            kind[k] = IN_TILE;
        } else {
            kind[k] = IN_ROW; /* converted row by row (broadcast ones too) */
        }
    }
    int64_t idx[EV_MAX_DIMS] = {0};
    int64_t off[EV__ITER_MAX_OPS] = {0};
    int64_t n0 = it->shape[0], n1 = it->shape[1];
    for (;;) {
        for (int64_t i0 = 0; i0 < n0; i0 += TILE_COLS) {
            int64_t m0 = n0 - i0 < TILE_COLS ? n0 - i0 : TILE_COLS;
            for (int64_t i1 = 0; i1 < n1; i1 += TILE_ROWS) {
                int64_t m1 = n1 - i1 < TILE_ROWS ? n1 - i1 : TILE_ROWS;
                run_tile(it, st, kind, off, i0, m0, i1, m1, tile, row);
            }
        }
        /* Odometer over the dimensions outside the tiles. */
        int d = 2;
        for (; d < it->ndim; d++) {
            for (int k = 0; k < it->nops; k++) {
                off[k] += it->strides[k][d];
            }
            if (++idx[d] < it->shape[d]) {
                break;
            }
            for (int k = 0; k < it->nops; k++) {
                off[k] -= it->strides[k][d] * it->shape[d];
            }
            idx[d] = 0;
        }
        if (d >= it->ndim) {
            return;
        }
    }
}

void ev__run_loop(const ev__iter *it, const ev_dtype *op_dtypes, ev_dtype loop_in,
                  ev_dtype loop_out, ev__loop_fn loop, ev__loop_ctx *ctx)
{
    loop_state st = {
        .dt = op_dtypes,
        .nops = it->nops,
        .loop_in = loop_in,
        .loop_out = loop_out,
        .in_size = (int64_t)ev__dsize(loop_in),
        .out_size = (int64_t)ev__dsize(loop_out),
        .loop = loop,
        .ctx = ctx,
    };
    /* The loops are elementwise: the order of the elements does not
     * matter. */
    if (it->numel > 0 && wants_tiles(it, &st)) {
        run_tiled(it, &st);
    } else {
        ev__iter_rows(it, loop_row, &st);
    }
}
