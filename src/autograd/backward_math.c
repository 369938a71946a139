/* The helpers derivatives are written with, and the call of a node's
 * backward, which sums each input's gradient back to the input's shape and
 * casts it to the input's dtype. */
#include <string.h>

#include "autograd/backward_math.h"

ev_tensor *ev__bw_keep(ev__ag_ctx *c, int rc, ev_tensor **made)
{
    /* made is read only here, after the call that set it has returned. */
    ev_tensor *t = rc ? NULL : *made;
    if (rc) {
        c->rc = c->rc ? c->rc : rc;
        return NULL;
    }
    if (c->ntmp == EV__AG_MAX_TMP) {
        ev_tensor_unref(t);
        c->rc = ev__set_message(EV_ELIMIT, "%s: derivative too long for the backward context",
                                c->node->fn->name);
        return NULL;
    }
    c->tmp[c->ntmp++] = t;
    return t;
}

ev_tensor *ev__bw_binary(ev__ag_ctx *c, int op, ev_tensor *a, ev_tensor *b)
{
    ev_tensor *out = NULL;
    if (c->rc || !a || !b) {
        return NULL;
    }
    return ev__bw_keep(c, ev_binary(&c->ex, op, a, b, &out), &out);
}

ev_tensor *ev__bw_unary(ev__ag_ctx *c, int op, ev_tensor *x)
{
    ev_tensor *out = NULL;
    if (c->rc || !x) {
        return NULL;
    }
    return ev__bw_keep(c, ev_unary(&c->ex, op, x, &out), &out);
}

ev_tensor *ev__bw_const(ev__ag_ctx *c, double v, ev_tensor *like)
{
    ev_tensor *out = NULL;
    if (c->rc || !like) {
        return NULL;
    }
    ev_dtype dt = ev_tensor_dtype(like);
    /* From host memory: a new storage filled during the call, so no
     * instruction is issued for a constant. */
    if (dt == EV_FLOAT32) {
        float f = (float)v;
        return ev__bw_keep(c, ev_from_host(&c->ex, dt, 0, NULL, &f, &out), &out);
    }
    if (dt == EV_FLOAT64) {
        return ev__bw_keep(c, ev_from_host(&c->ex, dt, 0, NULL, &v, &out), &out);
    }
    ev_scalar s = {.dtype = EV_FLOAT64, .v.f = v};
    return ev__bw_keep(c, ev_full(&c->ex, dt, 0, NULL, s, &out), &out);
}

ev_tensor *ev__bw_where(ev__ag_ctx *c, ev_tensor *cond, ev_tensor *x, ev_tensor *y)
{
    ev_tensor *out = NULL;
    if (c->rc || !cond || !x || !y) {
        return NULL;
    }
    return ev__bw_keep(c, ev_where(&c->ex, cond, x, y, &out), &out);
}

ev_tensor *ev__bw_zeros_like(ev__ag_ctx *c, ev_tensor *like)
{
    ev_tensor *out = NULL;
    if (c->rc || !like) {
        return NULL;
    }
    return ev__bw_keep(c, ev_zeros(&c->ex, ev_tensor_dtype(like), ev_tensor_ndim(like),
                                   ev_tensor_shape(like), &out), &out);
}

ev_tensor *ev__bw_zeros_input(ev__ag_ctx *c, int i)
{
    ev_tensor *out = NULL;
    if (c->rc) {
        return NULL;
    }
    const ev__ag_input *in = &c->inputs[i];
    return ev__bw_keep(c, ev_zeros(&c->ex, in->dtype, in->ndim, in->shape, &out), &out);
}

ev_tensor *ev__bw_saved(ev__ag_ctx *c, int i)
{
    ev_tensor *t = NULL;
    if (c->rc) {
        return NULL;
    }
    int rc = ev__ag_saved_get(c->node, i, &t);
    if (rc) {
        c->rc = rc;
        return NULL;
    }
    return t;
}

ev_tensor *ev__bw_sum_dims(ev__ag_ctx *c, ev_tensor *t, int ndims, const int *dims)
{
    ev_tensor *out = NULL;
    if (c->rc || !t) {
        return NULL;
    }
    return ev__bw_keep(c, ev_reduce(&c->ex, EV_REDUCE_SUM, t, ndims, dims, 1, &out), &out);
}

ev_tensor *ev__bw_reshape(ev__ag_ctx *c, ev_tensor *t, int ndim, const int64_t *shape)
{
    ev_tensor *out = NULL;
    if (c->rc || !t) {
        return NULL;
    }
    return ev__bw_keep(c, ev_reshape(&c->ex, t, ndim, shape, &out), &out);
}

ev_tensor *ev__bw_sum_to(ev__ag_ctx *c, ev_tensor *t, int ndim, const int64_t *shape)
{
    if (c->rc || !t) {
        return NULL;
    }
    int tn = ev_tensor_ndim(t);
    const int64_t *ts = ev_tensor_shape(t);
    int lead = tn - ndim, dims[EV_MAX_DIMS], nd = 0;
    for (int i = 0; i < tn; i++) {
        if (i < lead || (shape[i - lead] == 1 && ts[i] != 1)) {
            dims[nd++] = i;
        }
    }
    if (nd == 0 && lead == 0) {
        return t;
    }
    ev_tensor *s = nd ? ev__bw_sum_dims(c, t, nd, dims) : t;
    return ev__bw_reshape(c, s, ndim, shape);
}

ev_tensor *ev__bw_unreduce(ev__ag_ctx *c, ev_tensor *g)
{
    if (c->rc || !g) {
        return NULL;
    }
    const ev__ag_reduce_arg *a = (const ev__ag_reduce_arg *)c->node->arg;
    const ev__ag_input *in = &c->inputs[0];
    ev_tensor *t = g;
    if (!a->keepdim && in->ndim > 0) {
        /* The reduced dimensions back as size 1 (dims are ascending). */
        int64_t shape[EV_MAX_DIMS];
        for (int i = 0, k = 0; i < in->ndim; i++) {
            bool reduced = k < a->ndims && a->dims[k] == i;
            shape[i] = reduced ? 1 : in->shape[i];
            k += reduced;
        }
        t = ev__bw_reshape(c, t, in->ndim, shape);
        if (!t) {
            return NULL;
        }
    }
    ev_tensor *out = NULL;
    return ev__bw_keep(c, ev_expand(t, in->ndim, in->shape, &out), &out);
}

double ev__bw_reduced_count(ev__ag_ctx *c)
{
    const ev__ag_reduce_arg *a = (const ev__ag_reduce_arg *)c->node->arg;
    const ev__ag_input *in = &c->inputs[0];
    double n = 1;
    for (int k = 0; k < a->ndims; k++) {
        n *= (double)in->shape[a->dims[k]];
    }
    return n;
}

/* The gradient of input i in its shape and dtype (a new reference). */
static int fit_input(ev__ag_ctx *c, int i, ev_tensor *g, ev_tensor **out)
{
    const ev__ag_input *in = &c->inputs[i];
    ev_tensor *t = ev__bw_sum_to(c, g, in->ndim, in->shape);
    if (t && ev_tensor_dtype(t) != in->dtype) {
        ev_tensor *cast = NULL;
        t = ev__bw_keep(c, ev_cast(&c->ex, t, in->dtype, &cast), &cast);
    }
    if (!t) {
        return c->rc;
    }
    *out = ev_tensor_ref(t);
    return 0;
}

int ev__ag_run_backward(ev_ag_node *n, ev_tensor *g, ev_tensor **grads_in)
{
    if (!n->bw_site) {
        /* Named when first needed: recording stays cheap. */
        n->bw_site = ev__ag_backward_site(n->fn->name, n->site);
    }
    ev__ag_ctx c = {.ex = {n->vm, n->thread_uid, n->bw_site}, .node = n, .g = g,
                    .grads_in = grads_in};
    c.inputs = ev__ag_inputs_of(n, g, c.small_inputs);
    int rc = n->fn->backward(&c);
    rc = rc ? rc : c.rc;
    for (int i = 0; i < n->n_next && !rc; i++) {
        ev_tensor *raw = grads_in[i];
        grads_in[i] = NULL;
        if (raw && n->next[i].node) {
            rc = fit_input(&c, i, raw, &grads_in[i]);
        }
        ev_tensor_unref(raw);
    }
    if (rc) {
        for (int i = 0; i < n->n_next; i++) {
            ev_tensor_unref(grads_in[i]);
            grads_in[i] = NULL;
        }
    }
    for (int i = 0; i < c.ntmp; i++) {
        ev_tensor_unref(c.tmp[i]);
    }
    return rc;
}
