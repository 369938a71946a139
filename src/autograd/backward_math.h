/* The small expression language the derivatives are written in (the grad
 * column of include/eagervm/ops.def and the hand-written backward
 * functions): each helper issues one op on the backward context's stream
 * and returns a tensor the context owns until the backward returns, or NULL
 * once any op failed (c->rc holds the first error, and every later helper
 * returns NULL at once). */
#ifndef EV_AUTOGRAD_BACKWARD_MATH_H
#define EV_AUTOGRAD_BACKWARD_MATH_H

#include "autograd/autograd-impl.h"

/* Keeps *made, what the op whose status is rc made, in the context. */
ev_tensor *ev__bw_keep(ev__ag_ctx *c, int rc, ev_tensor **made);
ev_tensor *ev__bw_binary(ev__ag_ctx *c, int op, ev_tensor *a, ev_tensor *b);
ev_tensor *ev__bw_unary(ev__ag_ctx *c, int op, ev_tensor *x);
/* A 0-d tensor of value v in the dtype of like (so it never promotes). */
ev_tensor *ev__bw_const(ev__ag_ctx *c, double v, ev_tensor *like);
ev_tensor *ev__bw_where(ev__ag_ctx *c, ev_tensor *cond, ev_tensor *x, ev_tensor *y);
ev_tensor *ev__bw_zeros_like(ev__ag_ctx *c, ev_tensor *like);
/* Zeros of input i's dtype and shape. */
ev_tensor *ev__bw_zeros_input(ev__ag_ctx *c, int i);
/* The saved tensor i, checked (see ev__ag_saved_get). */
ev_tensor *ev__bw_saved(ev__ag_ctx *c, int i);
/* t summed over the dimensions that broadcasting stretched to reach it
 * from shape (ndim, shape). */
ev_tensor *ev__bw_sum_to(ev__ag_ctx *c, ev_tensor *t, int ndim, const int64_t *shape);
ev_tensor *ev__bw_reshape(ev__ag_ctx *c, ev_tensor *t, int ndim, const int64_t *shape);
ev_tensor *ev__bw_sum_dims(ev__ag_ctx *c, ev_tensor *t, int ndims, const int *dims);
/* A reduction's gradient g (or any tensor of the reduced shape) laid back
 * over input 0's shape: the reduced dimensions restored (keepdim) and
 * stretched. */
ev_tensor *ev__bw_unreduce(ev__ag_ctx *c, ev_tensor *g);
/* The number of elements a reduction combined into each output. */
double ev__bw_reduced_count(ev__ag_ctx *c);

/* The reduction arguments a reduce node keeps (normalised dims). */
typedef struct ev__ag_reduce_arg {
    int ndims;         /* the reduced dimensions of the input, ascending */
    int dims[EV_MAX_DIMS];
    int keepdim;
    double correction; /* var and std */
} ev__ag_reduce_arg;

/* The names the grad column is written in. */
#define G (c->g)
#define X ev__bw_saved(c, 0)
#define Y ev__bw_saved(c, 1)
#define R ev__bw_saved(c, 2)
#define K(v) ev__bw_const(c, (v), c->g)
#define ADD(a, b) ev__bw_binary(c, EV_OP_ADD, (a), (b))
#define SUB(a, b) ev__bw_binary(c, EV_OP_SUB, (a), (b))
#define MUL(a, b) ev__bw_binary(c, EV_OP_MUL, (a), (b))
#define DIV(a, b) ev__bw_binary(c, EV_OP_DIV, (a), (b))
#define POW(a, b) ev__bw_binary(c, EV_OP_POW, (a), (b))
#define EQ(a, b) ev__bw_binary(c, EV_OP_EQ, (a), (b))
#define GT(a, b) ev__bw_binary(c, EV_OP_GT, (a), (b))
#define GE(a, b) ev__bw_binary(c, EV_OP_GE, (a), (b))
#define AND(a, b) ev__bw_binary(c, EV_OP_LOGICAL_AND, (a), (b))
#define NEG(a) ev__bw_unary(c, EV_OP_NEG, (a))
#define EXP(a) ev__bw_unary(c, EV_OP_EXP, (a))
#define LOG(a) ev__bw_unary(c, EV_OP_LOG, (a))
#define SQRT(a) ev__bw_unary(c, EV_OP_SQRT, (a))
#define SIN(a) ev__bw_unary(c, EV_OP_SIN, (a))
#define COS(a) ev__bw_unary(c, EV_OP_COS, (a))
#define SINH(a) ev__bw_unary(c, EV_OP_SINH, (a))
#define COSH(a) ev__bw_unary(c, EV_OP_COSH, (a))
#define SIGN(a) ev__bw_unary(c, EV_OP_SIGN, (a))
#define ERF(a) ev__bw_unary(c, EV_OP_ERF, (a))
#define SQUARE(a) ev__bw_unary(c, EV_OP_SQUARE, (a))
#define WHERE(k, a, b) ev__bw_where(c, (k), (a), (b))
#define ZEROS ev__bw_zeros_like(c, c->g)
/* Reductions: the gradient (or a reduced tensor) stretched back, and the
 * count of elements per output. */
#define UNREDUCE(t) ev__bw_unreduce(c, (t))
#define COUNT ev__bw_reduced_count(c)
#define SUMDIMS(t) ev__bw_sum_dims(c, (t), ((ev__ag_reduce_arg *)c->node->arg)->ndims, \
                                   ((ev__ag_reduce_arg *)c->node->arg)->dims)

#endif
