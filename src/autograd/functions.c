/* The differentiable ops: each runs its op from ops.h / tensor.h and, when
 * grad mode is on and an input requires grad, records a node whose
 * backward is the derivative of the op table's grad column (elementwise
 * ops and reductions) or a hand-written one here (the EV_FUNC rows that say
 * FN(f) or VIEW). */
#include <string.h>

#include "autograd/backward_math.h"

_Static_assert(sizeof(ev__ag_reduce_arg) <= EV__AG_ARG_SIZE, "a node keeps its arguments inline");

#define NEED(i) (c->node->next[(i)].node != NULL)
#define OUT(i, e)                                  \
    do {                                           \
        if (NEED(i)) {                             \
            ev_tensor *t_ = (e);                   \
            c->grads_in[(i)] = ev_tensor_ref(t_);  \
        }                                          \
    } while (0)

enum { SAVE_X = 1, SAVE_Y = 2, SAVE_R = 4 };
#define SAVES_NONE 0
#define SAVES_X SAVE_X
#define SAVES_Y SAVE_Y
#define SAVES_R SAVE_R
#define SAVES_XY (SAVE_X | SAVE_Y)
#define SAVES_XR (SAVE_X | SAVE_R)
#define SAVES_XYR (SAVE_X | SAVE_Y | SAVE_R)

enum { KIND_NONDIFF, KIND_NOT_YET, KIND_DIFF };

/* What the op table's grad column says about one elementwise op or
 * reduction. */
typedef struct op_grad {
    ev__ag_fn fn;
    int kind;
    int saves;
} op_grad;

#define KIND_OF_NONDIFF KIND_NONDIFF
#define KIND_OF_NOT_YET KIND_NOT_YET
#define KIND_OF_D1(...) KIND_DIFF
#define KIND_OF_D2(...) KIND_DIFF
#define KIND_OF_DR(...) KIND_DIFF
#define KIND_OF_FN(f) KIND_DIFF
#define SAVES_OF_NONDIFF 0
#define SAVES_OF_NOT_YET 0
#define SAVES_OF_D1(saves, ...) SAVES_##saves
#define SAVES_OF_D2(saves, ...) SAVES_##saves
#define SAVES_OF_DR(saves, ...) SAVES_##saves
#define SAVES_OF_FN(f) SAVES_X
#define BODY_NONDIFF
#define BODY_NOT_YET
#define BODY_D1(saves, dx) OUT(0, dx);
#define BODY_D2(saves, dx, dy) \
    OUT(0, dx);                \
    OUT(1, dy);
#define BODY_DR(saves, dx) OUT(0, dx);
/* A reduction row whose derivative is written by hand here. */
#define BODY_FN(f) return f##_backward(c);

static int prod_backward(ev__ag_ctx *c);

/* The backward of each row, from its grad column. */
#define EV_BINARY(ID, name, rule, inplace, doc, ref, domain, bench, grad) \
    static int name##_backward(ev__ag_ctx *c)                             \
    {                                                                     \
        BODY_##grad return c->rc;                                         \
    }
#define EV_UNARY EV_BINARY
#define EV_REDUCE(ID, name, rule, doc, ref, domain, bench, grad) \
    static int name##_reduce_backward(ev__ag_ctx *c)             \
    {                                                            \
        BODY_##grad return c->rc;                                \
    }
#include "eagervm/ops.def"

/* PyTorch's node names: "MulBackward0". */
static const op_grad binary_grads[EV_BINARY_OP_COUNT] = {
#define EV_BINARY(ID, name, rule, inplace, doc, ref, domain, bench, grad) \
    [EV_OP_##ID] = {{#name "_backward", name##_backward}, KIND_OF_##grad, SAVES_OF_##grad},
#include "eagervm/ops.def"
};
static const op_grad unary_grads[EV_UNARY_OP_COUNT] = {
#define EV_UNARY(ID, name, rule, inplace, doc, ref, domain, bench, grad) \
    [EV_OP_##ID] = {{#name "_backward", name##_backward}, KIND_OF_##grad, SAVES_OF_##grad},
#include "eagervm/ops.def"
};
static const op_grad reduce_grads[EV_REDUCE_OP_COUNT] = {
#define EV_REDUCE(ID, name, rule, doc, ref, domain, bench, grad)                          \
    [EV_REDUCE_##ID] = {{#name "_backward", name##_reduce_backward}, KIND_OF_##grad, \
                        SAVES_OF_##grad},
#include "eagervm/ops.def"
};

/* ------------------------------------------------------------- recording */

/* dim counted from 0 (a 0-d x takes 0 and -1 as dimension 0). */
static int arg_dim(const ev_tensor *x, int dim)
{
    int nd = ev_tensor_ndim(x);
    return dim < 0 ? dim + (nd ? nd : 1) : dim;
}

static bool any_tracks(int n, ev_tensor *const *ts)
{
    if (!ev__ag_recording()) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (ev__ag_tracks(ts[i])) {
            return true;
        }
    }
    return false;
}

static bool is_float(const ev_tensor *t)
{
    return ev_dtype_get_info(ev_tensor_dtype(t))->kind == EV_KIND_FLOAT;
}

static int not_yet(const char *op)
{
    return ev__set_message(EV_ESTATE,
                           "autograd: %s has no derivative yet, and an input requires grad "
                           "(compute it under no_grad(), or on detach()ed inputs)",
                           op);
}

/* Records out = fn(inputs) (a new node; saved tensors by slot: inputs[0] as
 * X, inputs[1] as Y, out as R per the saves mask). On failure drops *out. */
static int record_as(const ev_exec *ex, const ev__ag_fn *fn, int n, ev_tensor *const *inputs,
                     int saves, const void *arg, size_t arg_size, bool is_view, ev_tensor **out)
{
    ev_ag_node *node = ev__ag_node_new(ex, fn, n, inputs, *out);
    int rc = node ? 0 : EV_ENOMEM;
    if (node && arg) {
        memcpy(node->arg, arg, arg_size);
    }
    if (!rc && (saves & SAVE_X)) {
        rc = ev__ag_save(node, 0, inputs[0], false);
    }
    if (!rc && (saves & SAVE_Y)) {
        rc = ev__ag_save(node, 1, inputs[1], false);
    }
    if (!rc && (saves & SAVE_R)) {
        rc = ev__ag_save(node, 2, *out, true);
    }
    if (!rc) {
        /* Takes over the node's reference, also on failure. */
        rc = ev__ag_set_output(node, *out, is_view ? inputs[0] : NULL);
        if (!rc) {
            return 0;
        }
        node = NULL;
    }
    ev__ag_node_unref(node);
    ev_tensor_unref(*out);
    *out = NULL;
    return rc;
}

static int record(const ev_exec *ex, const ev__ag_fn *fn, int n, ev_tensor *const *inputs,
                  int saves, const void *arg, size_t arg_size, ev_tensor **out)
{
    return record_as(ex, fn, n, inputs, saves, arg, arg_size, false, out);
}

/* The checks of an in-place op on a that records. *base_out: the base
 * whose graph the op goes through when a is a recorded view (else NULL). */
static int inplace_check(const char *op, ev_tensor *a, ev_tensor **base_out)
{
    *base_out = NULL;
    ev__ag_meta *m = ev__ag_meta_of(a);
    if (m && m->requires_grad && !m->grad_fn) {
        return ev__set_message(EV_ESTATE,
                               "%s: a leaf tensor that requires grad cannot be changed in place "
                               "while grad mode is on (do it under no_grad(), or on a clone())",
                               op);
    }
    if (m && m->view_base) {
        ev__ag_meta *bm = ev__ag_meta_of(m->view_base);
        if (bm && bm->requires_grad && !bm->grad_fn) {
            return ev__set_message(EV_ESTATE,
                                   "%s: a view of a leaf tensor that requires grad cannot be "
                                   "changed in place while grad mode is on (change a clone() "
                                   "of the leaf, or do it under no_grad())",
                                   op);
        }
        *base_out = m->view_base;
        return 0;
    }
    if (ev_tensor_has_views(a) && !(m && m->grad_fn)) {
        /* Views made while a was not recorded would not see the change. */
        return ev__set_message(EV_ESTATE,
                               "%s: changing in place a tensor that shares its elements with "
                               "views made while it did not require grad, with an input that "
                               "requires grad, is not supported; use the out-of-place op (or "
                               "clone() first)",
                               op);
    }
    return 0;
}

/* After in-place op node f changed view v of base (the op's inputs:
 * inputs[0] == v, then the others): the base's graph becomes a CopySlices
 * node (the base's old gradient, with the view's elements replaced by what
 * f's backward makes of them) and v's grad_fn a view of it. */
static int rebase_through_view(const ev_exec *ex, ev_ag_node *f, int n,
                               ev_tensor *const *inputs, ev_tensor *base);

/* Records inputs[0] = fn(inputs) done in place by run(ex, ctx): X (the
 * tensor before the op) is a copy made before it, Y is inputs[1] and R the
 * tensor after it, as saves says. */
static int record_inplace_n(const ev_exec *ex, const ev__ag_fn *fn, int saves, const char *op,
                            int n, ev_tensor *const *inputs, const void *arg, size_t arg_size,
                            int (*run)(const ev_exec *, void *), void *ctx)
{
    ev_tensor *a = inputs[0], *base = NULL;
    int rc = inplace_check(op, a, &base);
    if (rc) {
        return rc;
    }
    ev_tensor *before = NULL;
    if (saves & SAVE_X) {
        rc = ev_cast(ex, a, ev_tensor_dtype(a), &before);  /* always a copy */
        if (rc) {
            return rc;
        }
    }
    ev_ag_node *node = ev__ag_node_new(ex, fn, n, inputs, a);
    if (!node) {
        ev_tensor_unref(before);
        return EV_ENOMEM;
    }
    if (arg) {
        memcpy(node->arg, arg, arg_size);
    }
    if (before) {
        node->saved[0].t = before;
        node->saved[0].version = ev_tensor_version(before);
        node->n_saved = 1;
    }
    if (n > 1 && (saves & SAVE_Y)) {
        rc = ev__ag_save(node, 1, inputs[1], false);
    }
    rc = rc ? rc : run(ex, ctx);
    if (!rc && (saves & SAVE_R)) {
        rc = ev__ag_save(node, 2, a, true);
    }
    if (rc) {
        ev__ag_node_unref(node);
        return rc;
    }
    if (base) {
        return rebase_through_view(ex, node, n, inputs, base);
    }
    bool viewed = ev_tensor_has_views(a);
    rc = ev__ag_set_output(node, a, NULL);
    if (!rc && viewed) {
        ev__ag_rebase(a); /* its views' graphs are remade from a's new one */
    }
    return rc;
}

typedef struct op_call {
    int (*run)(const ev_exec *, int, ev_tensor *, ev_tensor *);
    int op;
    ev_tensor *a, *b;
} op_call;

static int run_op_call(const ev_exec *ex, void *ctx)
{
    op_call *k = ctx;
    return k->run(ex, k->op, k->a, k->b);
}

/* The in-place form of an elementwise row. */
static int record_inplace(const ev_exec *ex, const op_grad *g, const char *op, ev_tensor *a,
                          ev_tensor *b, int (*run)(const ev_exec *, int, ev_tensor *, ev_tensor *),
                          int opcode)
{
    if (g->kind == KIND_NOT_YET) {
        ev_tensor *base;
        int rc = inplace_check(op, a, &base);
        return rc ? rc : not_yet(op);
    }
    ev_tensor *inputs[2] = {a, b};
    op_call k = {run, opcode, a, b};
    return record_inplace_n(ex, &g->fn, g->saves, op, b ? 2 : 1, inputs, NULL, 0, run_op_call,
                            &k);
}

/* ------------------------------------------------------------ elementwise */

int ev_ag_binary(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b, ev_tensor **out)
{
    int rc = ev_binary(ex, op, a, b, out);
    ev_tensor *in[2] = {a, b};
    if (rc || !any_tracks(2, in)) {
        return rc;
    }
    const op_grad *g = &binary_grads[op];
    if (g->kind == KIND_NONDIFF || !is_float(*out)) {
        return 0;
    }
    if (g->kind == KIND_NOT_YET) {
        ev_tensor_unref(*out);
        *out = NULL;
        return not_yet(ev_binary_op_name(op));
    }
    return record(ex, &g->fn, 2, in, g->saves, NULL, 0, out);
}

static int run_binary_(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b)
{
    return ev_binary_(ex, op, a, b);
}

static int run_unary_(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b)
{
    (void)b;
    return ev_unary_(ex, op, a);
}

int ev_ag_binary_(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b)
{
    ev_tensor *in[2] = {a, b};
    if (op < 0 || op >= EV_BINARY_OP_COUNT || !a || !b || !any_tracks(2, in) ||
        binary_grads[op].kind == KIND_NONDIFF || !is_float(a)) {
        return ev_binary_(ex, op, a, b);
    }
    return record_inplace(ex, &binary_grads[op], ev_binary_op_name(op), a, b, run_binary_, op);
}

int ev_ag_unary(const ev_exec *ex, int op, ev_tensor *x, ev_tensor **out)
{
    int rc = ev_unary(ex, op, x, out);
    if (rc || !any_tracks(1, &x)) {
        return rc;
    }
    const op_grad *g = &unary_grads[op];
    if (g->kind == KIND_NONDIFF || !is_float(*out)) {
        return 0;
    }
    if (g->kind == KIND_NOT_YET) {
        ev_tensor_unref(*out);
        *out = NULL;
        return not_yet(ev_unary_op_name(op));
    }
    return record(ex, &g->fn, 1, &x, g->saves, NULL, 0, out);
}

int ev_ag_unary_(const ev_exec *ex, int op, ev_tensor *x)
{
    if (op < 0 || op >= EV_UNARY_OP_COUNT || !x || !any_tracks(1, &x) ||
        unary_grads[op].kind == KIND_NONDIFF || !is_float(x)) {
        return ev_unary_(ex, op, x);
    }
    return record_inplace(ex, &unary_grads[op], ev_unary_op_name(op), x, NULL, run_unary_, op);
}

/* ------------------------------------------------------------- reductions */

/* The reduced dimensions of x, ascending (dims NULL: all). */
static void reduce_arg(const ev_tensor *x, int ndims, const int *dims, int keepdim,
                       ev__ag_reduce_arg *a)
{
    int nd = ev_tensor_ndim(x);
    bool on[EV_MAX_DIMS] = {false};
    memset(a, 0, sizeof(*a));
    for (int i = 0; i < (dims ? ndims : nd); i++) {
        int d = dims ? dims[i] : i;
        d = d < 0 ? d + nd : d;
        if (d >= 0 && d < nd) {
            on[d] = true;
        }
    }
    for (int i = 0; i < nd; i++) {
        if (on[i]) {
            a->dims[a->ndims++] = i;
        }
    }
    a->keepdim = keepdim;
}

int ev_ag_reduce(const ev_exec *ex, int op, ev_tensor *x, int ndims, const int *dims,
                 int keepdim, ev_tensor **out)
{
    int rc = ev_reduce(ex, op, x, ndims, dims, keepdim, out);
    if (rc || !any_tracks(1, &x)) {
        return rc;
    }
    const op_grad *g = &reduce_grads[op];
    if (g->kind == KIND_NONDIFF || !is_float(*out)) {
        return 0;
    }
    if (g->kind == KIND_NOT_YET) {
        ev_tensor_unref(*out);
        *out = NULL;
        return not_yet(ev_reduce_op_name(op));
    }
    ev__ag_reduce_arg a;
    reduce_arg(x, ndims, dims, keepdim, &a);
    return record(ex, &g->fn, 1, &x, g->saves, &a, sizeof a, out);
}

/* var, std: d var / dx = 2 (x - mean) / (N - correction); d std = d var /
 * (2 std). */
static int var_backward(ev__ag_ctx *c)
{
    const ev__ag_reduce_arg *a = (const ev__ag_reduce_arg *)c->node->arg;
    ev_tensor *x = X;
    ev_tensor *mean = NULL;
    if (x) {
        mean = ev__bw_keep(c, ev_reduce(&c->ex, EV_REDUCE_MEAN, x, a->ndims, a->dims, 1, &mean), &mean);
    }
    double dof = COUNT - a->correction;
    ev_tensor *dev = SUB(x, mean);
    ev_tensor *g = UNREDUCE(G);
    if (c->node->n_saved > 2) {
        /* std: saved its result. */
        OUT(0, DIV(MUL(g, dev), MUL(UNREDUCE(R), K(dof))));
    } else {
        OUT(0, DIV(MUL(g, MUL(dev, K(2))), K(dof)));
    }
    return c->rc;
}
static const ev__ag_fn var_fn = {"var_backward", var_backward};
static const ev__ag_fn std_fn = {"std_backward", var_backward};

int ev_ag_var(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, double correction,
              int keepdim, int take_sqrt, ev_tensor **out)
{
    int rc = take_sqrt ? ev_std(ex, x, ndims, dims, correction, keepdim, out)
                       : ev_var(ex, x, ndims, dims, correction, keepdim, out);
    if (rc || !any_tracks(1, &x)) {
        return rc;
    }
    ev__ag_reduce_arg a;
    reduce_arg(x, ndims, dims, keepdim, &a);
    a.correction = correction;
    return record(ex, take_sqrt ? &std_fn : &var_fn, 1, &x, take_sqrt ? SAVES_XR : SAVES_X, &a,
                  sizeof a, out);
}

/* ---------------------------------------------------------- softmax, loss */

typedef struct dim_arg {
    int dim;
    int reduction;
} dim_arg;
_Static_assert(sizeof(dim_arg) <= EV__AG_ARG_SIZE, "a node keeps its arguments inline");

static int softmax_backward(ev__ag_ctx *c)
{
    int dim = ((const dim_arg *)c->node->arg)->dim;
    ev_tensor *y = R;
    ev_tensor *gy = MUL(G, y);
    OUT(0, MUL(y, SUB(G, ev__bw_sum_dims(c, gy, 1, &dim))));
    return c->rc;
}

static int log_softmax_backward(ev__ag_ctx *c)
{
    int dim = ((const dim_arg *)c->node->arg)->dim;
    OUT(0, SUB(G, MUL(EXP(R), ev__bw_sum_dims(c, G, 1, &dim))));
    return c->rc;
}
static const ev__ag_fn softmax_fn = {"softmax_backward", softmax_backward};
static const ev__ag_fn log_softmax_fn = {"log_softmax_backward", log_softmax_backward};

static int softmax_common(const ev_exec *ex, ev_tensor *x, int dim, bool log, ev_tensor **out)
{
    int rc = log ? ev_log_softmax(ex, x, dim, out) : ev_softmax(ex, x, dim, out);
    if (rc || !any_tracks(1, &x)) {
        return rc;
    }
    dim_arg a = {arg_dim(x, dim), 0};
    return record(ex, log ? &log_softmax_fn : &softmax_fn, 1, &x, SAVES_R, &a, sizeof a, out);
}

int ev_ag_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out)
{
    return softmax_common(ex, x, dim, false, out);
}

int ev_ag_log_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out)
{
    return softmax_common(ex, x, dim, true, out);
}

/* d loss_n / d logits_n = softmax(logits_n) - onehot(target_n), times the
 * gradient of sample n's loss: one instruction of the ops layer. */
static int cross_entropy_backward(ev__ag_ctx *c)
{
    const dim_arg *a = (const dim_arg *)c->node->arg;
    ev_tensor *logits = X, *target = Y, *res = NULL;
    if (logits && target && G) {
        int rc = ev_cross_entropy_backward(&c->ex, logits, target, G, a->reduction, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn cross_entropy_fn = {"cross_entropy_backward", cross_entropy_backward};

int ev_ag_cross_entropy(const ev_exec *ex, ev_tensor *logits, ev_tensor *target, int reduction,
                        ev_tensor **out)
{
    int rc = ev_cross_entropy(ex, logits, target, reduction, out);
    if (rc || !any_tracks(1, &logits)) {
        return rc;
    }
    dim_arg a = {1, reduction};
    ev_tensor *in[2] = {logits, target};
    return record(ex, &cross_entropy_fn, 2, in, SAVES_XY, &a, sizeof a, out);
}

/* ------------------------------------------------------------------ matmul */

static ev_tensor *bw_transpose(ev__ag_ctx *c, ev_tensor *t)
{
    ev_tensor *out = NULL;
    if (c->rc || !t) {
        return NULL;
    }
    return ev__bw_keep(c, ev_transpose(t, -1, -2, &out), &out);
}

static ev_tensor *bw_matmul(ev__ag_ctx *c, ev_tensor *a, ev_tensor *b)
{
    ev_tensor *out = NULL;
    if (c->rc || !a || !b) {
        return NULL;
    }
    return ev__bw_keep(c, ev_matmul(&c->ex, a, b, &out), &out);
}

static ev_tensor *bw_unsqueeze(ev__ag_ctx *c, ev_tensor *t, int dim)
{
    ev_tensor *out = NULL;
    if (c->rc || !t) {
        return NULL;
    }
    return ev__bw_keep(c, ev_unsqueeze(t, dim, &out), &out);
}

/* A 2-d matrix stored column by column (a transposed view). */
static bool is_transposed(const ev_tensor *t)
{
    if (ev_tensor_ndim(t) != 2) {
        return false;
    }
    const int64_t *s = ev_tensor_strides(t), *n = ev_tensor_shape(t);
    return s[0] == 1 && s[1] == n[0] && n[0] > 1 && n[1] > 1;
}

/* With a and b as matrices (a 1-d a as a row, a 1-d b as a column, the
 * gradient shaped to match): da = g b^T, db = a^T g, each summed back over
 * broadcast batch dimensions. */
static int matmul_backward(ev__ag_ctx *c)
{
    ev_tensor *a = X, *b = Y, *g = G;
    if (!a || !b) {
        return c->rc;
    }
    bool a1 = ev_tensor_ndim(a) == 1, b1 = ev_tensor_ndim(b) == 1;
    ev_tensor *am = a1 ? bw_unsqueeze(c, a, 0) : a;
    ev_tensor *bm = b1 ? bw_unsqueeze(c, b, -1) : b;
    ev_tensor *gm = g;
    if (a1 && b1) {
        int64_t one[2] = {1, 1};
        gm = ev__bw_reshape(c, g, 2, one);
    } else if (a1) {
        gm = bw_unsqueeze(c, g, -2);
    } else if (b1) {
        gm = bw_unsqueeze(c, g, -1);
    }
    if (NEED(0) && is_transposed(a)) {
        /* da in a's layout: (b gm^T)^T, so it goes on without a copy. */
        OUT(0, bw_transpose(c, bw_matmul(c, bm, bw_transpose(c, gm))));
    } else if (NEED(0)) {
        ev_tensor *da = bw_matmul(c, gm, bw_transpose(c, bm));
        if (da) {
            da = ev__bw_sum_to(c, da, ev_tensor_ndim(am), ev_tensor_shape(am));
        }
        OUT(0, ev__bw_reshape(c, da, ev_tensor_ndim(a), ev_tensor_shape(a)));
    }
    if (NEED(1) && is_transposed(b)) {
        /* db in b's layout (x @ w.T: the weight's gradient comes out of the
         * transpose's backward contiguous, and .grad takes it as it is). */
        OUT(1, bw_transpose(c, bw_matmul(c, bw_transpose(c, gm), am)));
    } else if (NEED(1)) {
        ev_tensor *db = bw_matmul(c, bw_transpose(c, am), gm);
        if (db) {
            db = ev__bw_sum_to(c, db, ev_tensor_ndim(bm), ev_tensor_shape(bm));
        }
        OUT(1, ev__bw_reshape(c, db, ev_tensor_ndim(b), ev_tensor_shape(b)));
    }
    return c->rc;
}
static const ev__ag_fn matmul_fn = {"matmul_backward", matmul_backward};

int ev_ag_matmul(const ev_exec *ex, ev_tensor *a, ev_tensor *b, ev_tensor **out)
{
    int rc = ev_matmul(ex, a, b, out);
    ev_tensor *in[2] = {a, b};
    if (rc || !any_tracks(2, in) || !is_float(*out)) {
        return rc;
    }
    return record(ex, &matmul_fn, 2, in, SAVES_XY, NULL, 0, out);
}

/* ---------------------------------------------------- clamp, where, copies */

typedef struct clamp_arg {
    bool has_min, has_max;
    ev_scalar min, max;
} clamp_arg;
_Static_assert(sizeof(clamp_arg) <= EV__AG_ARG_SIZE, "a node keeps its arguments inline");

/* The gradient passes where min <= x <= max (NaN bounds pass nothing). */
static int clamp_backward(ev__ag_ctx *c)
{
    const clamp_arg *a = (const clamp_arg *)c->node->arg;
    ev_tensor *x = X, *mask = NULL;
    if (a->has_min) {
        mask = GE(x, K(a->min.dtype == EV_FLOAT64 ? a->min.v.f : (double)a->min.v.i));
    }
    if (a->has_max) {
        ev_tensor *le = GE(K(a->max.dtype == EV_FLOAT64 ? a->max.v.f : (double)a->max.v.i), x);
        mask = mask ? AND(mask, le) : le;
    }
    OUT(0, mask ? MUL(G, mask) : G);
    return c->rc;
}
static const ev__ag_fn clamp_fn = {"clamp_backward", clamp_backward};

int ev_ag_clamp(const ev_exec *ex, ev_tensor *x, const ev_scalar *min, const ev_scalar *max,
                ev_tensor **out)
{
    int rc = ev_clamp(ex, x, min, max, out);
    if (rc || !any_tracks(1, &x) || !is_float(*out)) {
        return rc;
    }
    clamp_arg a = {min != NULL, max != NULL, {0}, {0}};
    if (min) {
        a.min = *min;
    }
    if (max) {
        a.max = *max;
    }
    return record(ex, &clamp_fn, 1, &x, SAVES_X, &a, sizeof a, out);
}

static int where_backward(ev__ag_ctx *c)
{
    ev_tensor *cond = ev__bw_saved(c, 0);
    OUT(1, WHERE(cond, G, ZEROS));
    OUT(2, WHERE(cond, ZEROS, G));
    return c->rc;
}
static const ev__ag_fn where_fn = {"where_backward", where_backward};

int ev_ag_where(const ev_exec *ex, ev_tensor *cond, ev_tensor *x, ev_tensor *y, ev_tensor **out)
{
    int rc = ev_where(ex, cond, x, y, out);
    ev_tensor *in[3] = {cond, x, y};
    if (rc || !any_tracks(3, in) || !is_float(*out)) {
        return rc;
    }
    /* cond never requires grad (it is bool): its edge stays empty. */
    return record(ex, &where_fn, 3, in, SAVES_X, NULL, 0, out);
}

static int copy_backward(ev__ag_ctx *c)
{
    OUT(0, G);
    return c->rc;
}
static const ev__ag_fn copy_fn = {"copy_backward", copy_backward};

int ev_ag_cast(const ev_exec *ex, ev_tensor *x, ev_dtype dtype, ev_tensor **out)
{
    int rc = ev_cast(ex, x, dtype, out);
    if (rc || !any_tracks(1, &x) || !is_float(*out)) {
        return rc;
    }
    return record(ex, &copy_fn, 1, &x, 0, NULL, 0, out);
}

int ev_ag_contiguous(const ev_exec *ex, ev_tensor *x, int always_copy, ev_tensor **out)
{
    int rc;
    if (always_copy) {
        /* ev_cast to x's dtype: a new tensor in x's dense layout. */
        rc = ev_cast(ex, x, ev_tensor_dtype(x), out);
    } else {
        rc = ev_contiguous(ex, x, out);
    }
    /* contiguous() of a contiguous tensor is the tensor itself. */
    if (rc || *out == x || !any_tracks(1, &x)) {
        return rc;
    }
    return record(ex, &copy_fn, 1, &x, 0, NULL, 0, out);
}

/* ------------------------------------------------------------ joins, index */

typedef struct cat_arg {
    int dim;
    bool new_dim;
} cat_arg;
_Static_assert(sizeof(cat_arg) <= EV__AG_ARG_SIZE, "a node keeps its arguments inline");

static int cat_backward(ev__ag_ctx *c)
{
    const cat_arg *a = (const cat_arg *)c->node->arg;
    int64_t off = 0;
    for (int i = 0; i < c->node->n_next && !c->rc; i++) {
        const ev__ag_input *in = &c->inputs[i];
        int64_t len = a->new_dim ? 1 : in->shape[a->dim];
        if (NEED(i)) {
            ev_tensor *s = NULL;
            s = ev__bw_keep(c, ev_slice(G, a->dim, off, off + len, 1, &s), &s);
            OUT(i, ev__bw_reshape(c, s, in->ndim, in->shape));
        }
        off += len;
    }
    return c->rc;
}
static const ev__ag_fn cat_fn = {"cat_backward", cat_backward};
static const ev__ag_fn stack_fn = {"stack_backward", cat_backward};

int ev_ag_cat(const ev_exec *ex, ev_tensor *const *tensors, int n, int dim, int new_dim,
              ev_tensor **out)
{
    int rc = new_dim ? ev_stack(ex, tensors, n, dim, out) : ev_cat(ex, tensors, n, dim, out);
    if (rc || !any_tracks(n, tensors) || !is_float(*out)) {
        return rc;
    }
    int nd = ev_tensor_ndim(*out);
    cat_arg a = {dim < 0 ? dim + nd : dim, new_dim != 0};
    return record(ex, new_dim ? &stack_fn : &cat_fn, n, tensors, 0, &a, sizeof a, out);
}

typedef struct index_arg {
    int dim;
} index_arg;
_Static_assert(sizeof(index_arg) <= EV__AG_ARG_SIZE, "a node keeps its arguments inline");

/* zeros of x's shape with g added at index along dim (repeats add up). */
static int index_select_backward(ev__ag_ctx *c)
{
    int dim = ((const index_arg *)c->node->arg)->dim;
    ev_tensor *index = ev__bw_saved(c, 1), *g = G;
    if (!index || !g) {
        return c->rc;
    }
    int nd = ev_tensor_ndim(g);
    int64_t shape[EV_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        shape[i] = i == dim ? ev_tensor_numel(index) : 1;
    }
    ev_tensor *idx = ev__bw_reshape(c, index, nd, shape), *wide = NULL;
    if (idx) {
        wide = ev__bw_keep(c, ev_expand(idx, nd, ev_tensor_shape(g), &wide), &wide);
    }
    ev_tensor *z = ev__bw_zeros_input(c, 0), *res = NULL;
    if (z && wide) {
        res = ev__bw_keep(c, ev_scatter_add(&c->ex, z, dim, wide, g, &res), &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn index_select_fn = {"index_select_backward", index_select_backward};

static int gather_backward(ev__ag_ctx *c)
{
    int dim = ((const index_arg *)c->node->arg)->dim;
    ev_tensor *index = ev__bw_saved(c, 1), *z = ev__bw_zeros_input(c, 0), *res = NULL;
    if (index && z && G) {
        res = ev__bw_keep(c, ev_scatter_add(&c->ex, z, dim, index, G, &res), &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn gather_fn = {"gather_backward", gather_backward};

static int index_common(const ev_exec *ex, const ev__ag_fn *fn, ev_tensor *x, int dim,
                        ev_tensor *index, ev_tensor **out)
{
    index_arg a = {arg_dim(x, dim)};
    ev_tensor *in[2] = {x, index};
    return record(ex, fn, 2, in, SAVES_Y, &a, sizeof a, out);
}

int ev_ag_index_select(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                       ev_tensor **out)
{
    int rc = ev_index_select(ex, x, dim, index, out);
    if (rc || !any_tracks(1, &x) || !is_float(*out)) {
        return rc;
    }
    return index_common(ex, &index_select_fn, x, dim, index, out);
}

int ev_ag_gather(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor **out)
{
    int rc = ev_gather(ex, x, dim, index, out);
    if (rc || !any_tracks(1, &x) || !is_float(*out)) {
        return rc;
    }
    return index_common(ex, &gather_fn, x, dim, index, out);
}

/* ------------------------------------------------------------------ views */

typedef struct view_arg {
    int kind;
    int dims[EV_MAX_DIMS];       /* permute: the order */
    int dim;                     /* slice */
    int64_t start, stop, step;
} view_arg;
_Static_assert(sizeof(view_arg) <= EV__AG_ARG_SIZE, "a node keeps its arguments inline");

enum { VIEW_RESHAPE, VIEW_PERMUTE, VIEW_EXPAND, VIEW_SLICE };

static int view_backward(ev__ag_ctx *c)
{
    const view_arg *a = (const view_arg *)c->node->arg;
    const ev__ag_input *in = &c->inputs[0];
    ev_tensor *g = G, *res = NULL;
    switch (a->kind) {
    case VIEW_RESHAPE:
        res = ev__bw_reshape(c, g, in->ndim, in->shape);
        break;
    case VIEW_PERMUTE: {
        int inv[EV_MAX_DIMS];
        for (int i = 0; i < in->ndim; i++) {
            inv[a->dims[i]] = i;
        }
        res = ev__bw_keep(c, ev_permute(g, inv, &res), &res);
        break;
    }
    case VIEW_EXPAND:
        res = ev__bw_sum_to(c, g, in->ndim, in->shape);
        break;
    case VIEW_SLICE: {
        ev_tensor *z = ev__bw_zeros_input(c, 0), *part = NULL;
        if (z) {
            part = ev__bw_keep(c, ev_slice(z, a->dim, a->start, a->stop, a->step, &part), &part);
        }
        if (part) {
            int rc = ev_copy_(&c->ex, part, g);
            c->rc = c->rc ? c->rc : rc;
        }
        res = c->rc ? NULL : z;
        break;
    }
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn view_fns[] = {
    [VIEW_RESHAPE] = {"view_backward", view_backward},
    [VIEW_PERMUTE] = {"permute_backward", view_backward},
    [VIEW_EXPAND] = {"expand_backward", view_backward},
    [VIEW_SLICE] = {"slice_backward", view_backward},
};

/* ------------------------------------------------ in place through views
 *
 * A recorded view and its base share elements, so an in-place op on either
 * changes the other's graph. As PyTorch does: the base's graph becomes a
 * CopySlices node, and every recorded view of it takes its gradient from
 * the base's through an as_strided node, remade whenever the base's graph
 * changed since the view's was made (ev__ag_refresh_view). Both find the
 * view's elements inside the base from the layouts alone (offsets and
 * strides in the shared storage), kept as aliases whose values are never
 * read. */

/* The lowest element t reaches, counted like its offset. */
static int64_t lowest_element(const ev_tensor *t)
{
    const int64_t *shape = ev_tensor_shape(t), *strides = ev_tensor_strides(t);
    int64_t lo = ev_tensor_offset(t);
    for (int d = 0; d < ev_tensor_ndim(t); d++) {
        if (shape[d] > 1 && strides[d] < 0) {
            lo += (shape[d] - 1) * strides[d];
        }
    }
    return lo;
}

/* Zeros over the elements base spans, from its lowest one. */
static ev_tensor *span_zeros(ev__ag_ctx *c, const ev_tensor *base, int64_t lo)
{
    const int64_t *shape = ev_tensor_shape(base), *strides = ev_tensor_strides(base);
    int64_t hi = ev_tensor_offset(base), n = ev_tensor_numel(base) ? 1 : 0;
    for (int d = 0; d < ev_tensor_ndim(base) && n; d++) {
        if (shape[d] > 1 && strides[d] > 0) {
            hi += (shape[d] - 1) * strides[d];
        }
    }
    n = n ? hi - lo + 1 : 0;
    ev_tensor *z = NULL;
    return c->rc ? NULL : ev__bw_keep(c, ev_zeros(&c->ex, ev_tensor_dtype(base), 1, &n, &z), &z);
}

/* t's elements inside z, z starting at element lo of t's storage; dims of
 * stride 0 (an expanded view) taken once: the caller sums over them. */
static ev_tensor *place(ev__ag_ctx *c, ev_tensor *z, const ev_tensor *t, int64_t lo,
                        int64_t *shape)
{
    int nd = ev_tensor_ndim(t);
    const int64_t *strides = ev_tensor_strides(t);
    memcpy(shape, ev_tensor_shape(t), sizeof(int64_t) * (size_t)nd);
    for (int d = 0; d < nd; d++) {
        if (strides[d] == 0 && shape[d] > 1) {
            shape[d] = 1;
        }
    }
    ev_tensor *v = NULL;
    if (!z || c->rc) {
        return NULL;
    }
    return ev__bw_keep(c, ev_as_strided(z, nd, shape, strides, ev_tensor_offset(t) - lo, &v), &v);
}

/* Zeros laid out as the node's saved base (slot 0) in *res, and the
 * elements of its saved view (slot 1) inside them in *part, whose shape
 * (stride-0 dims taken once) goes to vshape. False if it failed. */
static bool view_in_zeros(ev__ag_ctx *c, ev_tensor **res, ev_tensor **part, int64_t *vshape)
{
    ev_tensor *base = ev__bw_saved(c, 0), *view = ev__bw_saved(c, 1);
    if (!base || !view || !G) {
        return false;
    }
    int64_t lo = lowest_element(base), bshape[EV_MAX_DIMS];
    ev_tensor *z = span_zeros(c, base, lo);
    *res = place(c, z, base, lo, bshape);
    *part = place(c, z, view, lo, vshape);
    return *res && *part;
}

/* The base's gradient of a view's: zeros but for the view's elements. */
static int as_strided_backward(ev__ag_ctx *c)
{
    ev_tensor *res, *part;
    int64_t vshape[EV_MAX_DIMS];
    if (!view_in_zeros(c, &res, &part, vshape)) {
        return c->rc;
    }
    ev_tensor *g = ev__bw_sum_to(c, G, ev_tensor_ndim(part), vshape);
    if (g) {
        int rc = ev_copy_(&c->ex, part, g);
        c->rc = c->rc ? c->rc : rc;
    }
    OUT(0, c->rc ? NULL : res);
    return c->rc;
}
static const ev__ag_fn as_strided_fn = {"as_strided_backward", as_strided_backward};

ev_ag_node *ev__ag_view_node(const ev_exec *ex, ev_tensor *view, ev_tensor *base)
{
    ev_ag_node *n = ev__ag_node_new(ex, &as_strided_fn, 1, &base, view);
    if (n && (ev__ag_save_layout(n, 0, base) || ev__ag_save_layout(n, 1, view))) {
        ev__ag_node_unref(n);
        n = NULL;
    }
    return n;
}

/* The base's gradient after an in-place op through a view: the base's
 * gradient, but on the view's elements what the op's backward (node->inner)
 * makes of them; the op's other inputs get theirs from that backward too. */
static int copy_slices_backward(ev__ag_ctx *c)
{
    ev_ag_node *f = ev__ag_node_inner(c->node);
    ev_tensor *res, *part;
    int64_t vshape[EV_MAX_DIMS];
    if (!view_in_zeros(c, &res, &part, vshape)) {
        return c->rc;
    }
    int rc = ev_copy_(&c->ex, res, G);
    /* The op's backward reads a copy of the view's gradient: what it
     * returns may be that very tensor, and part is overwritten next. */
    ev_tensor *gpart = NULL, *gf[EV__AG_INLINE_NEXT] = {NULL};
    if (!rc) {
        gpart = ev__bw_keep(c, ev_cast(&c->ex, part, ev_tensor_dtype(part), &gpart), &gpart);
        rc = gpart ? 0 : c->rc;
    }
    rc = rc ? rc : ev__ag_run_backward(f, gpart, gf);
    if (!rc) {
        rc = gf[0] ? ev_copy_(&c->ex, part, gf[0]) : ev_fill_(&c->ex, part, ev_scalar_int(0));
    }
    for (int i = 0; i < f->n_next; i++) {
        if (i > 0 && !rc && NEED(i)) {
            c->grads_in[i] = gf[i];
        } else {
            ev_tensor_unref(gf[i]);
        }
    }
    c->rc = c->rc ? c->rc : rc;
    OUT(0, c->rc ? NULL : res);
    return c->rc;
}
static const ev__ag_fn copy_slices_fn = {"CopySlices", copy_slices_backward};

static int rebase_through_view(const ev_exec *ex, ev_ag_node *f, int n,
                               ev_tensor *const *inputs, ev_tensor *base)
{
    if (n > EV__AG_INLINE_NEXT) {
        ev__ag_node_unref(f);
        return ev__set_message(EV_EINVAL, "autograd: an in-place op of %d inputs on a view", n);
    }
    ev_tensor *in[EV__AG_INLINE_NEXT] = {base};
    for (int i = 1; i < n; i++) {
        in[i] = inputs[i];
    }
    ev_ag_node *c = ev__ag_node_new(ex, &copy_slices_fn, n, in, base);
    if (!c) {
        ev__ag_node_unref(f);
        return EV_ENOMEM;
    }
    ev__ag_node_set_inner(c, f);
    int rc = ev__ag_save_layout(c, 0, base);
    rc = rc ? rc : ev__ag_save_layout(c, 1, inputs[0]);
    if (rc) {
        ev__ag_node_unref(c);
        return rc;
    }
    rc = ev__ag_set_output(c, base, NULL);
    if (rc) {
        return rc;
    }
    ev__ag_rebase(base);
    return ev__ag_refresh_view(inputs[0]);
}

static int record_view(const ev_exec *ex, ev_tensor *x, int rc, const view_arg *a,
                       ev_tensor **out)
{
    if (rc || !any_tracks(1, &x) || *out == x) {
        return rc;
    }
    bool shares = ev_tensor_same_storage(x, *out);
    return record_as(ex, &view_fns[a->kind], 1, &x, 0, a, sizeof *a, shares, out);
}

int ev_ag_view(const ev_exec *ex, ev_tensor *x, int ndim, const int64_t *shape, ev_tensor **out)
{
    view_arg a = {.kind = VIEW_RESHAPE};
    return record_view(ex, x, ev_view(x, ndim, shape, out), &a, out);
}

int ev_ag_reshape(const ev_exec *ex, ev_tensor *x, int ndim, const int64_t *shape,
                  ev_tensor **out)
{
    view_arg a = {.kind = VIEW_RESHAPE};
    return record_view(ex, x, ev_reshape(ex, x, ndim, shape, out), &a, out);
}

int ev_ag_squeeze(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out)
{
    view_arg a = {.kind = VIEW_RESHAPE};
    return record_view(ex, x, ev_squeeze(x, dim, out), &a, out);
}

int ev_ag_squeeze_all(const ev_exec *ex, ev_tensor *x, ev_tensor **out)
{
    view_arg a = {.kind = VIEW_RESHAPE};
    return record_view(ex, x, ev_squeeze_all(x, out), &a, out);
}

int ev_ag_unsqueeze(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out)
{
    view_arg a = {.kind = VIEW_RESHAPE};
    return record_view(ex, x, ev_unsqueeze(x, dim, out), &a, out);
}

int ev_ag_expand(const ev_exec *ex, ev_tensor *x, int ndim, const int64_t *shape,
                 ev_tensor **out)
{
    view_arg a = {.kind = VIEW_EXPAND};
    return record_view(ex, x, ev_expand(x, ndim, shape, out), &a, out);
}

int ev_ag_permute(const ev_exec *ex, ev_tensor *x, const int *dims, ev_tensor **out)
{
    view_arg a = {.kind = VIEW_PERMUTE};
    int rc = ev_permute(x, dims, out);
    if (!rc) {
        int nd = ev_tensor_ndim(x);
        for (int i = 0; i < nd; i++) {
            a.dims[i] = dims[i] < 0 ? dims[i] + nd : dims[i];
        }
    }
    return record_view(ex, x, rc, &a, out);
}

int ev_ag_transpose(const ev_exec *ex, ev_tensor *x, int dim0, int dim1, ev_tensor **out)
{
    view_arg a = {.kind = VIEW_PERMUTE};
    int rc = ev_transpose(x, dim0, dim1, out);
    if (!rc) {
        int nd = ev_tensor_ndim(x);
        int d0 = dim0 < 0 ? dim0 + nd : dim0, d1 = dim1 < 0 ? dim1 + nd : dim1;
        for (int i = 0; i < nd; i++) {
            a.dims[i] = i == d0 ? d1 : i == d1 ? d0 : i;
        }
    }
    return record_view(ex, x, rc, &a, out);
}

int ev_ag_slice(const ev_exec *ex, ev_tensor *x, int dim, int64_t start, int64_t stop,
                int64_t step, ev_tensor **out)
{
    int nd = ev_tensor_ndim(x);
    view_arg a = {.kind = VIEW_SLICE, .dim = dim < 0 ? dim + nd : dim, .start = start,
                  .stop = stop, .step = step};
    return record_view(ex, x, ev_slice(x, dim, start, stop, step, out), &a, out);
}

/* --------------------------------------------- reorderings, scans, sorts */

typedef struct reorder_arg {
    int ndims;
    int dims[EV_MAX_DIMS];
    int64_t shifts[EV_MAX_DIMS];
    int64_t diagonal;
    bool upper;
} reorder_arg;
_Static_assert(sizeof(reorder_arg) <= EV__AG_ARG_SIZE, "a node keeps its arguments inline");

static int flip_backward(ev__ag_ctx *c)
{
    const reorder_arg *a = (const reorder_arg *)c->node->arg;
    ev_tensor *res = NULL;
    if (G) {
        int rc = ev_flip(&c->ex, G, a->ndims, a->dims, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn flip_fn = {"flip_backward", flip_backward};

int ev_ag_flip(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims, ev_tensor **out)
{
    int rc = ev_flip(ex, x, ndims, dims, out);
    if (rc || !any_tracks(1, &x) || ndims > EV_MAX_DIMS) {
        return rc;
    }
    reorder_arg a = {.ndims = ndims};
    if (ndims > 0) {
        memcpy(a.dims, dims, sizeof(int) * (size_t)ndims);
    }
    return record(ex, &flip_fn, 1, &x, 0, &a, sizeof a, out);
}

/* The gradient rolls back by the opposite shifts. */
static int roll_backward(ev__ag_ctx *c)
{
    const reorder_arg *a = (const reorder_arg *)c->node->arg;
    int64_t back[EV_MAX_DIMS];
    int n = a->ndims ? a->ndims : 1;
    for (int i = 0; i < n; i++) {
        back[i] = -a->shifts[i];
    }
    ev_tensor *res = NULL;
    if (G) {
        int rc = ev_roll(&c->ex, G, n, back, a->ndims, a->dims, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn roll_fn = {"roll_backward", roll_backward};

int ev_ag_roll(const ev_exec *ex, ev_tensor *x, int nshifts, const int64_t *shifts, int ndims,
               const int *dims, ev_tensor **out)
{
    int rc = ev_roll(ex, x, nshifts, shifts, ndims, dims, out);
    if (rc || !any_tracks(1, &x) || nshifts > EV_MAX_DIMS) {
        return rc;
    }
    reorder_arg a = {.ndims = ndims};
    if (ndims > 0) {
        memcpy(a.dims, dims, sizeof(int) * (size_t)ndims);
    }
    memcpy(a.shifts, shifts, sizeof(int64_t) * (size_t)nshifts);
    return record(ex, &roll_fn, 1, &x, 0, &a, sizeof a, out);
}

static int tri_backward(ev__ag_ctx *c)
{
    const reorder_arg *a = (const reorder_arg *)c->node->arg;
    ev_tensor *res = NULL;
    if (G) {
        int rc = a->upper ? ev_triu(&c->ex, G, a->diagonal, &res)
                          : ev_tril(&c->ex, G, a->diagonal, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn tril_fn = {"tril_backward", tri_backward};
static const ev__ag_fn triu_fn = {"triu_backward", tri_backward};

int ev_ag_tri(const ev_exec *ex, ev_tensor *x, int64_t diagonal, int upper, ev_tensor **out)
{
    int rc = upper ? ev_triu(ex, x, diagonal, out) : ev_tril(ex, x, diagonal, out);
    if (rc || !any_tracks(1, &x)) {
        return rc;
    }
    reorder_arg a = {.diagonal = diagonal, .upper = upper != 0};
    return record(ex, upper ? &triu_fn : &tril_fn, 1, &x, 0, &a, sizeof a, out);
}

/* take: the gradient added into zeros of x's size at the (wrapped) flat
 * indices, repeats adding up. */
static int take_backward(ev__ag_ctx *c)
{
    const ev__ag_input *in = &c->inputs[0];
    ev_tensor *index = ev__bw_saved(c, 1), *g = G;
    if (!index || !g) {
        return c->rc;
    }
    int64_t numel = 1;
    for (int i = 0; i < in->ndim; i++) {
        numel *= in->shape[i];
    }
    int64_t flat = ev_tensor_numel(index);
    ev_tensor *idx = ev__bw_reshape(c, index, 1, &flat);
    ev_tensor *zero = NULL, *n = NULL, *neg, *wrapped, *z = NULL, *res = NULL;
    int rc = ev_full(&c->ex, ev_tensor_dtype(index), 0, NULL, ev_scalar_int(0), &zero);
    zero = ev__bw_keep(c, rc, &zero);
    rc = ev_full(&c->ex, ev_tensor_dtype(index), 0, NULL, ev_scalar_int(numel), &n);
    n = ev__bw_keep(c, rc, &n);
    neg = ev__bw_binary(c, EV_OP_LT, idx, zero);
    wrapped = WHERE(neg, ADD(idx, n), idx);
    if (!c->rc) {
        rc = ev_zeros(&c->ex, in->dtype, 1, &numel, &z);
        z = ev__bw_keep(c, rc, &z);
    }
    ev_tensor *gf = ev__bw_reshape(c, g, 1, &flat);
    if (z && wrapped && gf) {
        rc = ev_scatter_add(&c->ex, z, 0, wrapped, gf, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, ev__bw_reshape(c, res, in->ndim, in->shape));
    return c->rc;
}
static const ev__ag_fn take_fn = {"take_backward", take_backward};

int ev_ag_take(const ev_exec *ex, ev_tensor *x, ev_tensor *index, ev_tensor **out)
{
    int rc = ev_take(ex, x, index, out);
    if (rc || !any_tracks(1, &x) || !is_float(*out)) {
        return rc;
    }
    ev_tensor *in[2] = {x, index};
    return record(ex, &take_fn, 2, in, SAVES_Y, NULL, 0, out);
}

/* scatter_add(x, dim, index, src): dx = g, dsrc = g gathered at index. */
static int scatter_add_backward(ev__ag_ctx *c)
{
    int dim = ((const index_arg *)c->node->arg)->dim;
    OUT(0, G);
    if (NEED(2)) {
        ev_tensor *index = ev__bw_saved(c, 1), *res = NULL;
        if (index && G) {
            int rc = ev_gather(&c->ex, G, dim, index, &res);
            res = ev__bw_keep(c, rc, &res);
        }
        OUT(2, res);
    }
    return c->rc;
}
static const ev__ag_fn scatter_add_fn = {"scatter_add_backward", scatter_add_backward};

int ev_ag_scatter_add(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index, ev_tensor *src,
                      ev_tensor **out)
{
    int rc = ev_scatter_add(ex, x, dim, index, src, out);
    ev_tensor *in[3] = {x, index, src};
    if (rc || !any_tracks(3, in) || !is_float(*out)) {
        return rc;
    }
    index_arg a = {arg_dim(x, dim)};
    return record(ex, &scatter_add_fn, 3, in, SAVES_Y, &a, sizeof a, out);
}

/* cumsum: the gradient summed from the end: flip(cumsum(flip(g))). */
static int cumsum_backward(ev__ag_ctx *c)
{
    int dim = ((const index_arg *)c->node->arg)->dim;
    ev_tensor *f = NULL, *s = NULL, *res = NULL;
    if (G && c->inputs[0].ndim > 0) {
        int rc = ev_flip(&c->ex, G, 1, &dim, &f);
        f = ev__bw_keep(c, rc, &f);
        if (f) {
            rc = ev_cumsum(&c->ex, f, dim, EV_DTYPE_NONE, &s);
            s = ev__bw_keep(c, rc, &s);
        }
        if (s) {
            rc = ev_flip(&c->ex, s, 1, &dim, &res);
            res = ev__bw_keep(c, rc, &res);
        }
    } else {
        res = G;
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn cumsum_fn = {"cumsum_backward", cumsum_backward};

int ev_ag_cumsum(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype, ev_tensor **out)
{
    int rc = ev_cumsum(ex, x, dim, dtype, out);
    if (rc || !any_tracks(1, &x) || !is_float(*out)) {
        return rc;
    }
    index_arg a = {arg_dim(x, dim)};
    return record(ex, &cumsum_fn, 1, &x, 0, &a, sizeof a, out);
}

/* sort and topk: the values' gradient goes back to where each value came
 * from (the indices output, saved). */
static int sort_backward(ev__ag_ctx *c)
{
    int dim = ((const index_arg *)c->node->arg)->dim;
    ev_tensor *index = ev__bw_saved(c, 1), *z = ev__bw_zeros_input(c, 0), *res = NULL;
    if (index && z && G) {
        int rc = c->inputs[0].ndim == 0 ? ev_binary(&c->ex, EV_OP_ADD, z, G, &res)
                                               : ev_scatter_add(&c->ex, z, dim, index, G, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn sort_fn = {"sort_backward", sort_backward};
static const ev__ag_fn topk_fn = {"topk_backward", sort_backward};

static int record_sorted(const ev_exec *ex, const ev__ag_fn *fn, ev_tensor *x, int dim,
                         ev_tensor *indices, ev_tensor **values)
{
    index_arg a = {arg_dim(x, dim)};
    ev_tensor *in[2] = {x, indices};
    return record(ex, fn, 2, in, SAVES_Y, &a, sizeof a, values);
}

int ev_ag_sort(const ev_exec *ex, ev_tensor *x, int dim, int descending, int stable,
               ev_tensor **values, ev_tensor **indices)
{
    int rc = ev_sort(ex, x, dim, descending, stable, values, indices);
    if (rc || !any_tracks(1, &x) || !is_float(*values)) {
        return rc;
    }
    rc = record_sorted(ex, &sort_fn, x, dim, *indices, values);
    if (rc) {
        ev_tensor_unref(*indices);
        *indices = NULL;
    }
    return rc;
}

int ev_ag_topk(const ev_exec *ex, ev_tensor *x, int64_t k, int dim, int largest, int sorted,
               ev_tensor **values, ev_tensor **indices)
{
    int rc = ev_topk(ex, x, k, dim, largest, sorted, values, indices);
    if (rc || !any_tracks(1, &x) || !is_float(*values)) {
        return rc;
    }
    rc = record_sorted(ex, &topk_fn, x, dim, *indices, values);
    if (rc) {
        ev_tensor_unref(*indices);
        *indices = NULL;
    }
    return rc;
}

/* prod: d/dx_i = g * (the product of the other elements), as the product
 * of those before i times those after it (exclusive cumulative products
 * from each end), so zeros among the inputs are exact. The reduced
 * dimensions are moved last and flattened: lines of N elements. */
static ev_tensor *bw_cat2(ev__ag_ctx *c, ev_tensor *a, ev_tensor *b)
{
    ev_tensor *both[2] = {a, b}, *out = NULL;
    if (c->rc || !a || !b) {
        return NULL;
    }
    int rc = ev_cat(&c->ex, both, 2, 1, &out);
    return ev__bw_keep(c, rc, &out);
}

static ev_tensor *bw_cols(ev__ag_ctx *c, ev_tensor *t, int64_t lo, int64_t hi)
{
    ev_tensor *out = NULL;
    if (c->rc || !t) {
        return NULL;
    }
    int rc = ev_slice(t, 1, lo, hi, 1, &out);
    return ev__bw_keep(c, rc, &out);
}

static ev_tensor *bw_scan(ev__ag_ctx *c, ev_tensor *t, bool reverse)
{
    ev_tensor *f = NULL, *s = NULL, *out = NULL;
    int dim = 1, rc;
    if (c->rc || !t) {
        return NULL;
    }
    if (reverse) {
        rc = ev_flip(&c->ex, t, 1, &dim, &f);
        t = f = ev__bw_keep(c, rc, &f);
        if (!t) {
            return NULL;
        }
    }
    rc = ev_cumprod(&c->ex, t, 1, EV_DTYPE_NONE, &s);
    s = ev__bw_keep(c, rc, &s);
    if (!reverse || !s) {
        return s;
    }
    rc = ev_flip(&c->ex, s, 1, &dim, &out);
    return ev__bw_keep(c, rc, &out);
}

static int prod_backward(ev__ag_ctx *c)
{
    const ev__ag_reduce_arg *a = (const ev__ag_reduce_arg *)c->node->arg;
    const ev__ag_input *in = &c->inputs[0];
    ev_tensor *x = X;
    if (!x || !G) {
        return c->rc;
    }
    if (in->ndim == 0 || a->ndims == 0) {
        OUT(0, G);
        return c->rc;
    }
    int perm[EV_MAX_DIMS], inv[EV_MAX_DIMS], k = 0;
    int64_t m = 1, n = 1, pshape[EV_MAX_DIMS];
    bool reduced[EV_MAX_DIMS] = {false};
    for (int i = 0; i < a->ndims; i++) {
        reduced[a->dims[i]] = true;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < in->ndim; i++) {
            if (reduced[i] == (pass == 1)) {
                perm[k] = i;
                pshape[k++] = in->shape[i];
                *(pass ? &n : &m) *= in->shape[i];
            }
        }
    }
    for (int i = 0; i < in->ndim; i++) {
        inv[perm[i]] = i;
    }
    if (n == 0 || m == 0) {
        OUT(0, ev__bw_zeros_input(c, 0));
        return c->rc;
    }
    ev_tensor *xp = NULL;
    int rc = ev_permute(x, perm, &xp);
    xp = ev__bw_keep(c, rc, &xp);
    int64_t lines[2] = {m, n}, col[2] = {m, 1};
    ev_tensor *x2 = ev__bw_reshape(c, xp, 2, lines), *ones = NULL;
    rc = ev_ones(&c->ex, in->dtype, 2, col, &ones);
    ones = ev__bw_keep(c, rc, &ones);
    ev_tensor *before = bw_scan(c, bw_cat2(c, ones, bw_cols(c, x2, 0, n - 1)), false);
    ev_tensor *after = bw_scan(c, bw_cat2(c, bw_cols(c, x2, 1, n), ones), true);
    ev_tensor *g2 = ev__bw_reshape(c, G, 2, col);
    ev_tensor *d = MUL(MUL(before, after), g2);
    ev_tensor *dp = ev__bw_reshape(c, d, in->ndim, pshape), *res = NULL;
    if (dp) {
        rc = ev_permute(dp, inv, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, res);
    return c->rc;
}

/* ------------------------------------------------------- in-place forms */

typedef struct inplace_call {
    int kind;
    ev_tensor *x, *src, *index;
    int dim;
    int64_t diagonal;
    const ev_scalar *min, *max;
    ev_scalar value;
    ev_dtype dtype;
} inplace_call;

enum { IP_COPY, IP_FILL, IP_CLAMP, IP_SCATTER_ADD, IP_TRI, IP_TRIU, IP_CUMSUM };

static int run_inplace(const ev_exec *ex, void *ctx)
{
    inplace_call *k = ctx;
    switch (k->kind) {
    case IP_COPY:
        return ev_copy_(ex, k->x, k->src);
    case IP_FILL:
        return ev_fill_(ex, k->x, k->value);
    case IP_CLAMP:
        return ev_clamp_(ex, k->x, k->min, k->max);
    case IP_SCATTER_ADD:
        return ev_scatter_add_(ex, k->x, k->dim, k->index, k->src);
    case IP_TRI:
        return ev_tril_(ex, k->x, k->diagonal);
    case IP_TRIU:
        return ev_triu_(ex, k->x, k->diagonal);
    default:
        return ev_cumsum_(ex, k->x, k->dim, k->dtype);
    }
}

/* copy_: the old values are gone (no gradient); src's gradient is g, summed
 * over the broadcast and cast back by the layer. fill_: nothing flows. */
static int copy_into_backward(ev__ag_ctx *c)
{
    if (c->node->n_next > 1) {
        OUT(1, G);
    }
    return c->rc;
}
static const ev__ag_fn copy_into_fn = {"copy__backward", copy_into_backward};
static const ev__ag_fn fill_fn = {"fill__backward", copy_into_backward};

int ev_ag_copy_(const ev_exec *ex, ev_tensor *dst, ev_tensor *src)
{
    ev_tensor *in[2] = {dst, src};
    if (!dst || !src || !any_tracks(2, in) || !is_float(dst)) {
        return ev_copy_(ex, dst, src);
    }
    inplace_call k = {.kind = IP_COPY, .x = dst, .src = src};
    return record_inplace_n(ex, &copy_into_fn, 0, "copy_", 2, in, NULL, 0, run_inplace, &k);
}

int ev_ag_assign_(const ev_exec *ex, ev_tensor *base, ev_tensor *view, ev_tensor *src)
{
    if (!base || !view || !src) {
        return ev__set_message(EV_EINVAL, "assign: base, view and src must not be NULL");
    }
    if (!ev_tensor_same_storage(base, view)) {
        return ev__set_message(EV_EINVAL, "assign: view does not share base's elements");
    }
    /* A view that records (base does) goes through copy_'s own rebase. */
    if (ev__ag_tracks(view) || !ev__ag_tracks(src) || !ev__ag_recording() || !is_float(view)) {
        return ev_ag_copy_(ex, view, src);
    }
    ev_tensor *in[2] = {view, src};
    ev_ag_node *f = ev__ag_node_new(ex, &copy_into_fn, 2, in, view);
    if (!f) {
        return EV_ENOMEM;
    }
    int rc = ev_copy_(ex, view, src);
    if (rc) {
        ev__ag_node_unref(f);
        return rc;
    }
    return rebase_through_view(ex, f, 2, in, base);
}

int ev_ag_fill_(const ev_exec *ex, ev_tensor *t, ev_scalar value)
{
    if (!t || !any_tracks(1, &t) || !is_float(t)) {
        return ev_fill_(ex, t, value);
    }
    inplace_call k = {.kind = IP_FILL, .x = t, .value = value};
    return record_inplace_n(ex, &fill_fn, 0, "fill_", 1, &t, NULL, 0, run_inplace, &k);
}

int ev_ag_clamp_(const ev_exec *ex, ev_tensor *x, const ev_scalar *min, const ev_scalar *max)
{
    if (!x || !any_tracks(1, &x) || !is_float(x)) {
        return ev_clamp_(ex, x, min, max);
    }
    clamp_arg a = {min != NULL, max != NULL, {0}, {0}};
    if (min) {
        a.min = *min;
    }
    if (max) {
        a.max = *max;
    }
    inplace_call k = {.kind = IP_CLAMP, .x = x, .min = min, .max = max};
    return record_inplace_n(ex, &clamp_fn, SAVES_X, "clamp_", 1, &x, &a, sizeof a, run_inplace,
                            &k);
}

int ev_ag_scatter_add_(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                       ev_tensor *src)
{
    ev_tensor *in[3] = {x, index, src};
    if (!x || !index || !src || !any_tracks(3, in) || !is_float(x)) {
        return ev_scatter_add_(ex, x, dim, index, src);
    }
    index_arg a = {arg_dim(x, dim)};
    inplace_call k = {.kind = IP_SCATTER_ADD, .x = x, .dim = dim, .index = index, .src = src};
    return record_inplace_n(ex, &scatter_add_fn, SAVES_Y, "scatter_add_", 3, in, &a, sizeof a,
                            run_inplace, &k);
}

int ev_ag_tri_(const ev_exec *ex, ev_tensor *x, int64_t diagonal, int upper)
{
    if (!x || !any_tracks(1, &x) || !is_float(x)) {
        return upper ? ev_triu_(ex, x, diagonal) : ev_tril_(ex, x, diagonal);
    }
    reorder_arg a = {.diagonal = diagonal, .upper = upper != 0};
    inplace_call k = {.kind = upper ? IP_TRIU : IP_TRI, .x = x, .diagonal = diagonal};
    return record_inplace_n(ex, upper ? &triu_fn : &tril_fn, 0, upper ? "triu_" : "tril_", 1, &x,
                            &a, sizeof a, run_inplace, &k);
}

int ev_ag_cumsum_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype)
{
    if (!x || !any_tracks(1, &x) || !is_float(x)) {
        return ev_cumsum_(ex, x, dim, dtype);
    }
    index_arg a = {arg_dim(x, dim)};
    inplace_call k = {.kind = IP_CUMSUM, .x = x, .dim = dim, .dtype = dtype};
    return record_inplace_n(ex, &cumsum_fn, 0, "cumsum_", 1, &x, &a, sizeof a, run_inplace, &k);
}

/* cumprod: one instruction of the ops layer (exact with zeros). */
static int cumprod_backward(ev__ag_ctx *c)
{
    int dim = ((const index_arg *)c->node->arg)->dim;
    ev_tensor *x = X, *res = NULL;
    if (x && G) {
        int rc = ev_cumprod_backward(&c->ex, x, G, dim, &res);
        res = ev__bw_keep(c, rc, &res);
    }
    OUT(0, res);
    return c->rc;
}
static const ev__ag_fn cumprod_fn = {"cumprod_backward", cumprod_backward};

int ev_ag_cumprod(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype, ev_tensor **out)
{
    int rc = ev_cumprod(ex, x, dim, dtype, out);
    if (rc || !any_tracks(1, &x) || !is_float(*out)) {
        return rc;
    }
    index_arg a = {arg_dim(x, dim)};
    return record(ex, &cumprod_fn, 1, &x, SAVES_X, &a, sizeof a, out);
}

typedef struct cumprod_call {
    ev_tensor *x;
    int dim;
    ev_dtype dtype;
} cumprod_call;

static int run_cumprod_(const ev_exec *ex, void *ctx)
{
    cumprod_call *k = ctx;
    return ev_cumprod_(ex, k->x, k->dim, k->dtype);
}

int ev_ag_cumprod_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype)
{
    if (!x || !any_tracks(1, &x) || !is_float(x)) {
        return ev_cumprod_(ex, x, dim, dtype);
    }
    index_arg a = {arg_dim(x, dim)};
    cumprod_call k = {x, dim, dtype};
    return record_inplace_n(ex, &cumprod_fn, SAVES_X, "cumprod_", 1, &x, &a, sizeof a,
                            run_cumprod_, &k);
}

/* uniform_, normal_: the old values are overwritten (nothing flows back). */
typedef struct random_call {
    ev_generator *gen;
    ev_tensor *t;
    double p0, p1;
    bool normal;
} random_call;

static int run_random_(const ev_exec *ex, void *ctx)
{
    random_call *k = ctx;
    return k->normal ? ev_normal_(ex, k->gen, k->t, k->p0, k->p1)
                     : ev_uniform_(ex, k->gen, k->t, k->p0, k->p1);
}
static const ev__ag_fn uniform_fn = {"uniform__backward", copy_into_backward};
static const ev__ag_fn normal_fn = {"normal__backward", copy_into_backward};

int ev_ag_random_(const ev_exec *ex, ev_generator *gen, ev_tensor *t, double p0, double p1,
                  int normal)
{
    random_call k = {gen, t, p0, p1, normal != 0};
    if (!t || !any_tracks(1, &t) || !is_float(t)) {
        return run_random_(ex, &k);
    }
    return record_inplace_n(ex, normal ? &normal_fn : &uniform_fn, 0,
                            normal ? "normal_" : "uniform_", 1, &t, NULL, 0, run_random_, &k);
}
