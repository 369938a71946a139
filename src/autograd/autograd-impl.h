/* Internal contract of the autograd layer: a tensor's autograd state, graph
 * nodes and edges, and the context a backward function runs in. Never
 * installed. */
#ifndef EV_AUTOGRAD_IMPL_H
#define EV_AUTOGRAD_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/services.h"
#include "eagervm/autograd.h"

typedef struct ev__ag_ctx ev__ag_ctx;

/* What kind of node: its name, its backward and how many saved tensors it
 * keeps. Static storage. */
typedef struct ev__ag_fn {
    const char *name;
    /* Computes c->grads_in[i] for every i with c->needs[i] from c->grads_out.
     * NULL marks the accumulator of a leaf. */
    int (*backward)(ev__ag_ctx *c);
} ev__ag_fn;

/* A hook in a list (tensor hooks and post-accumulate hooks). */
typedef struct ev__ag_hook {
    struct ev__ag_hook *next;
    union {
        ev_ag_grad_hook grad;
        ev_ag_leaf_hook leaf;
    } fn;
    void *ctx;
    void (*free_ctx)(void *);
} ev__ag_hook;

/* An edge to the node that takes the gradient of one input: the node and
 * which of its outputs the input is. */
typedef struct ev__ag_edge {
    ev_ag_node *node;  /* owned reference; NULL: the input needs no gradient */
    uint32_t output_nr;
} ev__ag_edge;

/* The dtype and shape of an input, to shape and cast its gradient. */
typedef struct ev__ag_input {
    ev_dtype dtype;
    int ndim;
    int64_t shape[EV_MAX_DIMS];
} ev__ag_input;

/* A tensor a node saved and the storage version it saw then. */
typedef struct ev__ag_saved {
    ev_tensor *t;      /* owned; NULL once released */
    uint64_t version;
} ev__ag_saved;

#define EV__AG_MAX_SAVED 4
#define EV__AG_ARG_SIZE 128
/* Edges kept inside the node (more, for a cat of many, are allocated). */
#define EV__AG_INLINE_NEXT 3
#define EV__AG_CACHE_NODE EV__CACHE_UPPER_A
#define EV__AG_CACHE_META EV__CACHE_UPPER_B
/* The bytes that making and freeing a node of up to 3 inputs touch: its
 * first 4 lines, the last its output's state (the struct cache hands out
 * line-aligned structs and prefetches their first 256 bytes, errors.c).
 * What few nodes use (a leaf, an inner node, an input's shape that
 * differs from the output's, arguments) comes after, written only when
 * used: a graph of tiny ops is mostly these lines, and a chain of ops
 * brings them through the cache once each. */
#define EV__AG_NODE_HOT_BYTES 256

/* What few tensors have: a leaf's accumulator and hooks, a gradient kept
 * on the tensor. Kept apart so that every op's output state fits a line. */
typedef struct ev__ag_leaf {
    ev_ag_node *accumulator;  /* weak: cleared when it is freed */
    ev_tensor *grad;          /* owned */
    ev__ag_hook *hooks;       /* leaf: run before accumulating */
    ev__ag_hook *post_hooks;  /* leaf: run after */
} ev__ag_leaf;

/* A tensor's autograd state (its ev_tensor_ext): one line. */
typedef struct ev__ag_meta {
    ev_tensor_ext ext;
    ev__lock lock;            /* guards everything below */
    bool requires_grad;
    bool is_view;             /* made by a recorded view op */
    uint32_t output_nr;
    /* A recorded view: the tensor it views (owned; never itself a recorded
     * view), and base_gen's value when grad_fn was made. A base: bumped
     * whenever its graph changes under its views (an in-place op on it or
     * through one of them), so their grad_fns are remade from it. */
    ev_tensor *view_base;
    uint64_t view_gen;
    uint64_t base_gen;
    ev_ag_node *grad_fn;      /* owned; NULL for a leaf */
    /* Made on first use, under the lock, and kept until the state goes
     * (so a pointer read once stays good); NULL until then. */
    ev__ag_leaf *leaf;
} ev__ag_meta;

/* Bits of ev_ag_node.cold: which of the fields past the first 3 lines
 * hold something (the others are not even initialised). */
enum { EV__AG_COLD_LEAF = 1, EV__AG_COLD_INNER = 2, EV__AG_OUT_META_USED = 4 };

struct ev_ag_node {
    atomic_int refs;
    int n_next;
    const ev__ag_fn *fn;
    union {
        uint64_t seq;       /* above its inputs' nodes' seq (and, on one
                             * thread, creation order): higher runs first */
        ev_ag_node *free_next; /* once dead: the free list while freeing */
    };
    ev_vm *vm;
    const ev_site *site;    /* the forward op's site */
    const ev_site *bw_site; /* interned: the backward's name at that site */
    ev__ag_hook *hooks;     /* on the gradient of output 0, in order */
    uint32_t thread_uid;    /* the forward op's thread uid */
    uint8_t n_saved;
    uint8_t layout_only;    /* bit i: saved[i] is kept for its shape, strides
                             * and offset only (no version check) */
    bool released;          /* saved tensors dropped by a backward */
    uint8_t cold;           /* EV__AG_COLD_* */
    ev__ag_saved saved[EV__AG_MAX_SAVED];
    ev__ag_edge *next;      /* n_next entries: inline_next or allocated */
    ev__ag_edge inline_next[EV__AG_INLINE_NEXT];
    /* Inputs 0..2 of a node with inline edges: dtype and ndim, and bit i
     * of shape_is_out: input i's shape is the output's (so it is not
     * written; the gradient, shaped like the output, gives it). */
    uint8_t in_dtype[EV__AG_INLINE_NEXT];
    int8_t in_ndim[EV__AG_INLINE_NEXT];
    uint8_t shape_is_out;
    /* EV__AG_OUT_META_USED: the state of the node's output, when the
     * output had none (the common case), so that recording an op makes one
     * struct, not two. It holds the reference on the node that keeps this
     * memory alive (meta_host in graph.c). */
    ev__ag_meta out_meta;
    /* ---- cold: written only when used */
    ev_tensor *leaf;        /* EV__AG_COLD_LEAF: the accumulator's leaf (owned) */
    ev_ag_node *inner;      /* EV__AG_COLD_INNER: owned: the in-place op a
                             * CopySlices node applies */
    ev__ag_input *big_inputs; /* n_next > EV__AG_INLINE_NEXT: every input */
    int64_t in_shape[EV__AG_INLINE_NEXT][EV_MAX_DIMS]; /* unless shape_is_out */
    _Alignas(16) unsigned char arg[EV__AG_ARG_SIZE]; /* the op's arguments */
};

static inline ev_tensor *ev__ag_node_leaf(const ev_ag_node *n)
{
    return n->cold & EV__AG_COLD_LEAF ? n->leaf : NULL;
}
static inline ev_ag_node *ev__ag_node_inner(const ev_ag_node *n)
{
    return n->cold & EV__AG_COLD_INNER ? n->inner : NULL;
}

/* Frees n, whose last reference went (and the nodes that frees). */
void ev__ag_node_free(ev_ag_node *n);
/* ev_ag_node_unref, its common case inline. */
static inline void ev__ag_node_unref(ev_ag_node *n)
{
    /* acq_rel: every use of the node happens before its free. */
    if (n && atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) == 1) {
        ev__ag_node_free(n);
    }
}

/* The meta of t, or NULL if it has none. */
static inline ev__ag_meta *ev__ag_meta_of(const ev_tensor *t)
{
    return (ev__ag_meta *)ev_tensor_ext_get(t);
}
/* The meta of t, made if needed; NULL on out of memory (message set). */
ev__ag_meta *ev__ag_meta_get(ev_tensor *t);
/* m's leaf part, NULL if it has none yet (any thread). */
static inline ev__ag_leaf *ev__ag_leaf_of(ev__ag_meta *m)
{
    /* acquire: pairs with ev__ag_leaf_get's release, so its fields, set
     * before it was published, are seen. */
    return __atomic_load_n(&m->leaf, __ATOMIC_ACQUIRE);
}
/* m's leaf part, made if needed; m->lock held. NULL on out of memory
 * (message set). */
ev__ag_leaf *ev__ag_leaf_get(ev__ag_meta *m);

static inline bool ev__ag_tracks(const ev_tensor *t)
{
    ev__ag_meta *m = t ? ev__ag_meta_of(t) : NULL;
    /* requires_grad only goes from false to true while recording, on the
     * thread that owns the tensor: a relaxed read is enough here. */
    return m && __atomic_load_n(&m->requires_grad, __ATOMIC_RELAXED);
}

/* Whether the calling thread records now. */
bool ev__ag_recording(void);

/* Makes a node of fn for an op with n inputs (NULL entries allowed); edges
 * to the inputs that require grad. out: the op's output if made already
 * (its shape, shared by most inputs, need not be kept), else NULL. NULL on
 * out of memory. */
ev_ag_node *ev__ag_node_new(const ev_exec *ex, const ev__ag_fn *fn, int n,
                            ev_tensor *const *inputs, const ev_tensor *out);
/* n's inputs' dtypes and shapes, for a backward whose gradient is g:
 * node->big_inputs, or small filled in. */
const ev__ag_input *ev__ag_inputs_of(ev_ag_node *n, const ev_tensor *g,
                                     ev__ag_input small[EV__AG_INLINE_NEXT]);
/* Sets n's leaf (reference taken over) or inner node. */
void ev__ag_node_set_leaf(ev_ag_node *n, ev_tensor *leaf);
void ev__ag_node_set_inner(ev_ag_node *n, ev_ag_node *inner);
/* The edge a gradient for t follows: its grad_fn, or its accumulator (made
 * if needed) for a leaf that requires grad; node NULL otherwise. The node
 * is a new reference. */
int ev__ag_edge_of(ev_tensor *t, ev__ag_edge *e);
/* Saves t in slot i of n (an output is saved as an alias, so the node does
 * not keep its own output's state alive). */
int ev__ag_save(ev_ag_node *n, int i, ev_tensor *t, bool is_output);
/* Makes out the node's output 0: requires grad, grad_fn n (reference
 * taken over). view_of: the input out is a view of (NULL if none). */
int ev__ag_set_output(ev_ag_node *n, ev_tensor *out, ev_tensor *view_of);
/* Saves t in slot i for its layout only (see ev__ag_saved). */
int ev__ag_save_layout(ev_ag_node *n, int i, ev_tensor *t);
/* Records that base's graph changed under its views. */
void ev__ag_rebase(ev_tensor *base);
/* ev__ag_refresh_view for t, a recorded view with state m (graph.c). */
int ev__ag_remake_view(ev_tensor *t, ev__ag_meta *m);
/* If t is a recorded view whose base's graph changed since its grad_fn was
 * made, remakes it from the base's (see ev__ag_view_node). Inline: every
 * recorded op asks this of each input, and few inputs are views. */
static inline int ev__ag_refresh_view(ev_tensor *t)
{
    ev__ag_meta *m = ev__ag_meta_of(t);
    return m && m->view_base ? ev__ag_remake_view(t, m) : 0;
}
/* A node taking view's gradient from base's (functions.c). */
ev_ag_node *ev__ag_view_node(const ev_exec *ex, ev_tensor *view, ev_tensor *base);
/* The saved tensor i, checked against in-place changes since it was saved
 * (EV_ESTATE naming both ops and sites) and against a freed graph. */
int ev__ag_saved_get(ev_ag_node *n, int i, ev_tensor **out);

/* The backward context. */
#define EV__AG_MAX_TMP 48
struct ev__ag_ctx {
    ev_exec ex;                /* the forward op's thread uid, bw_site */
    ev_ag_node *node;
    /* The node's inputs' dtypes and shapes: node->big_inputs, or
     * small_inputs filled from the node and the gradient. */
    const ev__ag_input *inputs;
    ev__ag_input small_inputs[EV__AG_INLINE_NEXT];
    ev_tensor *g;              /* the gradient of output 0 (borrowed) */
    ev_tensor **grads_in;      /* one per next edge, to fill (owned refs) */
    int rc;                    /* the first error */
    int ntmp;
    ev_tensor *tmp[EV__AG_MAX_TMP];
};

/* Runs n's backward: grads_in[i] gets a new reference or NULL. */
int ev__ag_run_backward(ev_ag_node *n, ev_tensor *g, ev_tensor **grads_in);

/* Whether a and b have the same shape. */
bool ev__ag_same_shape(const ev_tensor *a, const ev_tensor *b);
/* t's shape and dtype for a message: "[2, 3] float32". */
void ev__ag_layout_str(const ev_tensor *t, char *buf, size_t size);

/* The interned site naming backward `name` at the forward site. */
const ev_site *ev__ag_backward_site(const char *name, const ev_site *fwd);

#endif
