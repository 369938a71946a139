/* eagervm autograd layer: reverse-mode automatic differentiation on top of
 * the ops in ops.h, with PyTorch's meanings.
 *
 * A tensor requires grad when it is a leaf marked with
 * ev_ag_set_requires_grad(), or the result of a differentiable op recorded
 * while grad mode was on and some input required grad. Each recorded op
 * makes a node of the graph: its backward function, the edges to the nodes
 * of its inputs, the tensors it saved and the exec (thread uid and site) it
 * was issued on. A leaf's edge ends in its accumulator, which adds incoming
 * gradients into the leaf's .grad.
 *
 * ev_ag_backward() walks the graph on the calling thread. It never waits for
 * a kernel: every backward op is an ordinary instruction issued on the thread
 * uid of its forward op, with the forward op's site, so a failure in it names
 * the backward and the forward line, and the engine's dependency inference
 * orders everything. Nodes whose saved tensors were modified in place since
 * they were saved raise EV_ESTATE naming both ops and lines.
 *
 * The ev_ag_* op functions take the arguments of the ops of the same name in
 * ops.h / tensor.h, run the op, and record it when needed; without grad
 * mode or without an input that requires grad they cost one check.
 *
 * Conventions as in tensor.h: 0 or a negative EV_E* code, the message in
 * ev_last_message(); produced tensors are new references. Autograd state of
 * one tensor may be read and changed from several threads; the backward of
 * one graph must not run on two threads at once (as in PyTorch, backward on
 * disjoint graphs may).
 */
#ifndef EAGERVM_AUTOGRAD_H
#define EAGERVM_AUTOGRAD_H

#include "ops.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ev_ag_node ev_ag_node;

/* ------------------------------------------------------------- grad mode */

/* Whether ops issued by the calling OS thread are recorded (on by default). */
EV_API int ev_ag_is_grad_enabled(void);
/* Sets it for the calling OS thread; returns the previous setting. */
EV_API int ev_ag_set_grad_enabled(int enabled);

/* ------------------------------------------------------ tensor state */

/* 1 if t requires grad (a marked leaf or a recorded result). */
EV_API int ev_ag_requires_grad(const ev_tensor *t);
/* Marks a leaf (on) or unmarks it (off). Errors: EV_EINVAL for a non-leaf
 * (use a detached copy) and for a dtype that is not a float. */
EV_API int ev_ag_set_requires_grad(ev_tensor *t, int on);
/* 1 if t is a leaf: it has no grad_fn (it does not require grad, or was
 * marked by the user). */
EV_API int ev_ag_is_leaf(const ev_tensor *t);
/* The accumulated gradient of a leaf, as a new reference, or NULL. */
EV_API ev_tensor *ev_ag_grad(const ev_tensor *t);
/* Replaces t's gradient (NULL clears it). Errors: EV_EINVAL when grad's
 * shape or dtype differ from t's. */
EV_API int ev_ag_set_grad(ev_tensor *t, ev_tensor *grad);
/* The node that made t (borrowed, valid while t lives), or NULL for a leaf. */
EV_API ev_ag_node *ev_ag_grad_fn(const ev_tensor *t);
/* A new tensor sharing t's elements that does not require grad. */
EV_API int ev_ag_detach(ev_tensor *t, ev_tensor **out);

/* ------------------------------------------------------------------ nodes */

/* The node's name: the op's with "_backward" ("mul_backward"), or
 * "AccumulateGrad" for a leaf's accumulator. */
EV_API const char *ev_ag_node_name(const ev_ag_node *n);
/* The site of the forward op that made it (may be NULL). */
EV_API const ev_site *ev_ag_node_site(const ev_ag_node *n);
/* Its number of next edges, and edge i's node (borrowed; NULL where that
 * input needs no gradient). */
EV_API int ev_ag_node_n_next(const ev_ag_node *n);
EV_API ev_ag_node *ev_ag_node_next(const ev_ag_node *n, int i);
EV_API void ev_ag_node_ref(ev_ag_node *n);
/* Drops a reference; long chains are freed iteratively. Accepts NULL. */
EV_API void ev_ag_node_unref(ev_ag_node *n);

/* ------------------------------------------------------------------ hooks */

/* A hook on the gradient of a tensor. It gets the gradient (borrowed) and
 * may return a replacement (a new reference) in *out, of the gradient's
 * shape and dtype, or leave *out NULL to keep it; a nonzero return aborts
 * the backward with that code (the hook sets the message), as does a
 * replacement of another shape or dtype (EV_EINVAL). */
typedef int (*ev_ag_grad_hook)(void *ctx, ev_tensor *grad, ev_tensor **out);
/* Called with the leaf after its .grad was accumulated. */
typedef int (*ev_ag_leaf_hook)(void *ctx, ev_tensor *leaf);

/* Runs fn on every gradient computed for t, before it is used (for a leaf:
 * before it is accumulated). free_ctx (may be NULL) runs on ctx when the
 * hook goes: with t's autograd state, or the node it is attached to.
 * Errors: EV_EINVAL if t does not require grad. */
EV_API int ev_ag_register_hook(ev_tensor *t, ev_ag_grad_hook fn, void *ctx,
                               void (*free_ctx)(void *));
/* Runs fn after each accumulation into the leaf t's .grad. Errors:
 * EV_EINVAL if t is not a leaf that requires grad. */
EV_API int ev_ag_register_post_accumulate_hook(ev_tensor *t, ev_ag_leaf_hook fn, void *ctx,
                                               void (*free_ctx)(void *));

/* --------------------------------------------------------------- backward */

/* Computes the gradients of outputs with respect to the leaves of their
 * graph and accumulates them into the leaves' .grad. grads[i] is the
 * gradient of outputs[i] (NULL means ones: allowed for a one-element
 * output only). retain_graph keeps the saved tensors for another backward;
 * otherwise they are released as soon as each node ran, and a second
 * backward through those nodes fails with EV_ESTATE. ex gives the vm; each
 * backward op runs on its forward op's thread uid. Errors: EV_EINVAL (an
 * output that does not require grad, a gradient of another shape),
 * EV_ESTATE (a saved tensor modified in place; a freed graph). On error no
 * .grad has been changed by this call only if the error came before the
 * first accumulation (argument errors); later errors leave what was
 * accumulated. */
EV_API int ev_ag_backward(const ev_exec *ex, int n, ev_tensor *const *outputs,
                          ev_tensor *const *grads, int retain_graph);

/* Returns the gradients of outputs with respect to inputs[0..n_inputs) in
 * results[] (new references) without touching any .grad. An input the
 * outputs do not depend on (or one that does not require grad) gives
 * EV_EINVAL unless allow_unused, and then NULL. Otherwise as
 * ev_ag_backward. */
EV_API int ev_ag_grad_of(const ev_exec *ex, int n, ev_tensor *const *outputs,
                         ev_tensor *const *grads, int n_inputs, ev_tensor *const *inputs,
                         int retain_graph, int allow_unused, ev_tensor **results);

/* ------------------------------------------------------- differentiable ops
 *
 * Each records the op when grad mode is on and an input requires grad. */

EV_API int ev_ag_binary(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b, ev_tensor **out);
EV_API int ev_ag_binary_(const ev_exec *ex, int op, ev_tensor *a, ev_tensor *b);
EV_API int ev_ag_unary(const ev_exec *ex, int op, ev_tensor *x, ev_tensor **out);
EV_API int ev_ag_unary_(const ev_exec *ex, int op, ev_tensor *x);
EV_API int ev_ag_reduce(const ev_exec *ex, int op, ev_tensor *x, int ndims, const int *dims,
                        int keepdim, ev_tensor **out);
EV_API int ev_ag_matmul(const ev_exec *ex, ev_tensor *a, ev_tensor *b, ev_tensor **out);
EV_API int ev_ag_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out);
EV_API int ev_ag_log_softmax(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out);
EV_API int ev_ag_cross_entropy(const ev_exec *ex, ev_tensor *logits, ev_tensor *target,
                               int reduction, ev_tensor **out);
EV_API int ev_ag_var(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims,
                     double correction, int keepdim, int take_sqrt, ev_tensor **out);
EV_API int ev_ag_clamp(const ev_exec *ex, ev_tensor *x, const ev_scalar *min,
                       const ev_scalar *max, ev_tensor **out);
EV_API int ev_ag_where(const ev_exec *ex, ev_tensor *cond, ev_tensor *x, ev_tensor *y,
                       ev_tensor **out);
EV_API int ev_ag_cast(const ev_exec *ex, ev_tensor *x, ev_dtype dtype, ev_tensor **out);
EV_API int ev_ag_contiguous(const ev_exec *ex, ev_tensor *x, int always_copy, ev_tensor **out);
EV_API int ev_ag_cat(const ev_exec *ex, ev_tensor *const *tensors, int n, int dim, int new_dim,
                     ev_tensor **out);
EV_API int ev_ag_index_select(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                              ev_tensor **out);
EV_API int ev_ag_gather(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                        ev_tensor **out);

EV_API int ev_ag_flip(const ev_exec *ex, ev_tensor *x, int ndims, const int *dims,
                      ev_tensor **out);
EV_API int ev_ag_roll(const ev_exec *ex, ev_tensor *x, int nshifts, const int64_t *shifts,
                      int ndims, const int *dims, ev_tensor **out);
/* ev_tril (upper 0) or ev_triu (upper 1). */
EV_API int ev_ag_tri(const ev_exec *ex, ev_tensor *x, int64_t diagonal, int upper,
                     ev_tensor **out);
EV_API int ev_ag_take(const ev_exec *ex, ev_tensor *x, ev_tensor *index, ev_tensor **out);
EV_API int ev_ag_scatter_add(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                             ev_tensor *src, ev_tensor **out);
EV_API int ev_ag_cumsum(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype,
                        ev_tensor **out);
/* The values require grad (their gradient goes back to where each came
 * from); the indices never do. */
EV_API int ev_ag_sort(const ev_exec *ex, ev_tensor *x, int dim, int descending, int stable,
                      ev_tensor **values, ev_tensor **indices);
EV_API int ev_ag_topk(const ev_exec *ex, ev_tensor *x, int64_t k, int dim, int largest,
                      int sorted, ev_tensor **values, ev_tensor **indices);

/* In place (the tensor takes the op's node as its grad_fn; a leaf that
 * requires grad, or a tensor sharing its elements with a view, is refused
 * while recording: EV_ESTATE). */
EV_API int ev_ag_copy_(const ev_exec *ex, ev_tensor *dst, ev_tensor *src);
EV_API int ev_ag_fill_(const ev_exec *ex, ev_tensor *t, ev_scalar value);
/* base[...] = src: copies src into view, a view of base's elements (made
 * by indexing base, recorded or not). When src requires grad and base does
 * not, base's graph starts here (a CopySlices node: src's gradient is
 * base's on the view's elements). Errors: EV_EINVAL for NULL arguments or a
 * view of other elements, and ev_copy_'s. */
EV_API int ev_ag_assign_(const ev_exec *ex, ev_tensor *base, ev_tensor *view, ev_tensor *src);
EV_API int ev_ag_clamp_(const ev_exec *ex, ev_tensor *x, const ev_scalar *min,
                        const ev_scalar *max);
EV_API int ev_ag_scatter_add_(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor *index,
                              ev_tensor *src);
EV_API int ev_ag_tri_(const ev_exec *ex, ev_tensor *x, int64_t diagonal, int upper);
EV_API int ev_ag_cumsum_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype);
EV_API int ev_ag_cumprod(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype,
                         ev_tensor **out);
EV_API int ev_ag_cumprod_(const ev_exec *ex, ev_tensor *x, int dim, ev_dtype dtype);
/* ev_uniform_(gen, t, p0, p1), or ev_normal_(gen, t, p0, p1) if normal. */
EV_API int ev_ag_random_(const ev_exec *ex, ev_generator *gen, ev_tensor *t, double p0,
                         double p1, int normal);

/* Views (as ev_view, ev_reshape, ... in tensor.h, which need no exec; ex
 * gives the thread uid and site a recorded view's backward runs with). A
 * view that requires grad cannot be changed in place yet (EV_ESTATE). */
EV_API int ev_ag_view(const ev_exec *ex, ev_tensor *x, int ndim, const int64_t *shape,
                      ev_tensor **out);
EV_API int ev_ag_reshape(const ev_exec *ex, ev_tensor *x, int ndim, const int64_t *shape,
                         ev_tensor **out);
EV_API int ev_ag_expand(const ev_exec *ex, ev_tensor *x, int ndim, const int64_t *shape,
                        ev_tensor **out);
EV_API int ev_ag_permute(const ev_exec *ex, ev_tensor *x, const int *dims, ev_tensor **out);
EV_API int ev_ag_transpose(const ev_exec *ex, ev_tensor *x, int dim0, int dim1,
                           ev_tensor **out);
EV_API int ev_ag_slice(const ev_exec *ex, ev_tensor *x, int dim, int64_t start, int64_t stop,
                       int64_t step, ev_tensor **out);
EV_API int ev_ag_squeeze(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out);
EV_API int ev_ag_squeeze_all(const ev_exec *ex, ev_tensor *x, ev_tensor **out);
EV_API int ev_ag_unsqueeze(const ev_exec *ex, ev_tensor *x, int dim, ev_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
