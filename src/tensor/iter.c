/* The N-d iterator every kernel walks its operands with, and the buffered
 * driver that runs a contiguous loop over operands of any strides and dtypes. */
#include <string.h>

#include "tensor/tensor-impl.h"

/* Elements per buffered block: small enough that the buffers of four operands
 * (8 KiB each at 8 bytes) stay in L1, large enough to amortise the call (at
 * 256, x * 2 on 1e5 floats took twice as long). */
#define BLOCK 1024

void ev__iter_init_raw(ev__iter *it, int nops, int ndim, const int64_t *shape,
                       char *const *data, const int64_t (*strides)[EV_MAX_DIMS])
{
    it->nops = nops;
    it->numel = 1;
    for (int d = 0; d < ndim; d++) {
        it->numel *= shape[d];
    }
    for (int k = 0; k < nops; k++) {
        it->data[k] = data[k];
    }
    /* Innermost first, dropping dimensions of size 1 (their strides do not
     * matter) and merging a dimension into the one inside it when every
     * operand steps over both as one. */
    int n = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] == 1) {
            continue;
        }
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

void ev__iter_init(ev__iter *it, int nops, ev_tensor *const *ops)
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
    ev__iter_init_raw(it, nops, ops[0]->ndim, ops[0]->shape, data,
                      (const int64_t(*)[EV_MAX_DIMS])strides);
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
    ev__iter_rows(it, loop_row, &st);
}
