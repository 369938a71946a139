/* Walking tensors line by line along one dimension, for the ops that need a
 * whole line at once (scans, sorts, top-k): byte offsets of each line's first
 * element in every operand, by an odometer over the other dimensions. */
#include "ops/ops-impl.h"

void ev__lines_init(ev__lines *l, int nops, ev_tensor *const *ops, int dim)
{
    const ev_tensor *t0 = ops[0];
    l->nops = nops;
    l->nd = 0;
    l->count = 1;
    for (int d = 0; d < t0->ndim; d++) {
        if (d == dim) {
            continue;
        }
        l->shape[l->nd] = t0->shape[d];
        l->count *= t0->shape[d];
        for (int k = 0; k < nops; k++) {
            const ev_tensor *t = ops[k];
            l->strides[k][l->nd] = t ? t->strides[d] * (int64_t)ev__dsize(t->dtype) : 0;
        }
        l->nd++;
    }
    for (int k = 0; k < nops; k++) {
        const ev_tensor *t = ops[k];
        l->data[k] = t ? ev__tensor_ptr(t) : NULL;
        if (!t || dim < 0) {
            l->len[k] = 1;
            l->step[k] = 0;
        } else {
            l->len[k] = t->shape[dim];
            l->step[k] = t->strides[dim] * (int64_t)ev__dsize(t->dtype);
        }
    }
}

void ev__lines_seek(const ev__lines *l, int64_t line, int64_t *idx, int64_t *off)
{
    for (int k = 0; k < l->nops; k++) {
        off[k] = 0;
    }
    for (int d = l->nd - 1; d >= 0; d--) {
        idx[d] = line % l->shape[d];
        line /= l->shape[d];
        for (int k = 0; k < l->nops; k++) {
            off[k] += idx[d] * l->strides[k][d];
        }
    }
}

void ev__lines_next(const ev__lines *l, int64_t *idx, int64_t *off)
{
    for (int d = l->nd - 1; d >= 0; d--) {
        for (int k = 0; k < l->nops; k++) {
            off[k] += l->strides[k][d];
        }
        if (++idx[d] < l->shape[d]) {
            return;
        }
        for (int k = 0; k < l->nops; k++) {
            off[k] -= l->strides[k][d] * l->shape[d];
        }
        idx[d] = 0;
    }
}

int ev__norm_dim0(const char *fn, int dim, const ev_tensor *x, int *out)
{
    if (x->ndim == 0) {
        if (dim != 0 && dim != -1) {
            return ev__set_message(EV_EINDEX, "%s: dimension %d is out of range [-1, 0] for a "
                                   "0-d tensor", fn, dim);
        }
        *out = -1;
        return 0;
    }
    return ev__norm_dim(fn, dim, x->ndim, out);
}
