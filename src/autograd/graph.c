/* The graph: a tensor's autograd state, nodes and their edges, saved tensors
 * and the version check, grad mode, hooks, and the interned sites backward
 * ops report. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd-impl.h"

/* -------------------------------------------------------------- grad mode */

static EV_TLS_FAST bool grad_disabled;

int ev_ag_is_grad_enabled(void)
{
    return !grad_disabled;
}

int ev_ag_set_grad_enabled(int enabled)
{
    int was = !grad_disabled;
    grad_disabled = !enabled;
    return was;
}

bool ev__ag_recording(void)
{
    return !grad_disabled;
}

/* ------------------------------------------------------------------ nodes */

/* Node creation order, a Lamport clock per thread: a node's seq is above
 * its inputs' nodes' and above every node its thread made before, which is
 * all the walk needs (see ev_ag_node.seq), without a shared counter's
 * atomic add on every op. */
static EV_TLS_FAST uint64_t node_clock;

/* Nodes freed while another node is being freed wait here, so a chain of a
 * million nodes is freed in a loop rather than by a million nested calls. */
static EV_TLS_FAST ev_ag_node *free_list;
static EV_TLS_FAST bool freeing;
/* The saved tensors of the nodes being freed, dropped a batch at a time so
 * that the misses of freeing each one overlap (ev_tensor_unref_n). */
enum { FREE_BATCH = 32 };
static EV_TLS_FAST ev_tensor *free_batch[FREE_BATCH];
static EV_TLS_FAST int free_batch_len;

static void hooks_free(ev__ag_hook *h)
{
    while (h) {
        ev__ag_hook *next = h->next;
        if (h->free_ctx) {
            h->free_ctx(h->ctx);
        }
        free(h);
        h = next;
    }
}

/* The lines of the node that freeing it reads past the first (which its
 * last unref just brought in): the saved tensors and the edges. */
static void node_prefetch_rest(const ev_ag_node *n)
{
    for (size_t off = 64; off < EV__AG_NODE_HOT_BYTES; off += 64) {
        __builtin_prefetch((const char *)n + off, 1);
    }
}

/* Drops the batch. A tensor's last reference can free its state and so
 * unref a node, which only joins free_list (freeing is set): nothing joins
 * the batch meanwhile. */
static void free_batch_drop(void)
{
    ev_tensor_unref_n(free_batch, (size_t)free_batch_len);
    free_batch_len = 0;
}

/* Frees n; called only while freeing, so the nodes it unrefs join
 * free_list rather than being freed here. */
static void node_free_one(ev_ag_node *n)
{
    /* A graph is freed by walking it: each node's edges lead to the next
     * ones, and its saved tensors to their storages, every step a miss
     * once the graph has left the caches. So the edges go first (their
     * nodes' lines are asked for as they join free_list), and the saved
     * tensors join a batch, each fetched as it joins. */
    for (int i = 0; i < n->n_next; i++) {
        ev__ag_node_unref(n->next[i].node);
    }
    for (int i = 0; i < n->n_saved; i++) {
        if (n->saved[i].t) {
            if (free_batch_len == FREE_BATCH) {
                free_batch_drop();
            }
            __builtin_prefetch(n->saved[i].t, 1);
            free_batch[free_batch_len++] = n->saved[i].t;
            n->saved[i].t = NULL;
        }
    }
    if (n->cold & EV__AG_COLD_LEAF) {
        ev__ag_meta *m = ev__ag_meta_of(n->leaf);
        if (m) {
            ev__lock_acquire(&m->lock);
            ev__ag_leaf *l = m->leaf; /* made before n was */
            if (l->accumulator == n) {
                l->accumulator = NULL;
            }
            ev__lock_release(&m->lock);
        }
        ev_tensor_unref(n->leaf);
    }
    hooks_free(n->hooks);
    ev__ag_node_unref(ev__ag_node_inner(n));
    if (n->next != n->inline_next) {
        free(n->next);
        free(n->big_inputs);
    }
    ev__cache_free(EV__AG_CACHE_NODE, n);
}

void ev_ag_node_ref(ev_ag_node *n)
{
    if (n) {
        /* relaxed: made from an existing reference. */
        atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
    }
}

void ev_ag_node_unref(ev_ag_node *n)
{
    ev__ag_node_unref(n);
}

void ev__ag_node_free(ev_ag_node *n)
{
    n->free_next = free_list;
    free_list = n;
    node_prefetch_rest(n);
    if (freeing) {
        return;
    }
    freeing = true;
    while (free_list || free_batch_len) {
        if (free_list) {
            ev_ag_node *f = free_list;
            free_list = f->free_next;
            node_free_one(f);
        } else {
            free_batch_drop();
        }
    }
    freeing = false;
}

/* A reference to the node if it is still alive (a weak pointer's upgrade). */
static ev_ag_node *node_try_ref(ev_ag_node *n)
{
    int r = atomic_load_explicit(&n->refs, memory_order_relaxed);
    while (r > 0) {
        if (atomic_compare_exchange_weak_explicit(&n->refs, &r, r + 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
            return n;
        }
    }
    return NULL;
}

_Static_assert(offsetof(ev_ag_node, out_meta) == 192, "an output's state is the node's 4th line");
_Static_assert(offsetof(ev_ag_node, leaf) <= EV__AG_NODE_HOT_BYTES,
               "what every node uses fits the lines the struct cache prefetches");
_Static_assert(EV_DTYPE_COUNT <= 256 && EV_MAX_DIMS <= 127, "an input's dtype and ndim fit a byte");

_Static_assert(sizeof(ev__ag_meta) <= 64, "an op's output state fits one line");

static ev_ag_node *node_alloc(int n_next)
{
    ev_ag_node *n = ev__cache_alloc(EV__AG_CACHE_NODE, sizeof(ev_ag_node));
    if (!n) {
        ev__set_message(EV_ENOMEM, "autograd: out of memory for a graph node");
        return NULL;
    }
    /* Field by field, the hot lines only (see EV__AG_NODE_HOT_BYTES): a
     * memset of the whole node cost more than the rest of recording. */
    n->fn = NULL;
    n->vm = NULL;
    n->thread_uid = 0;
    n->site = n->bw_site = NULL;
    n->hooks = NULL;
    n->n_saved = 0;
    n->released = false;
    n->layout_only = 0;
    n->cold = 0;
    n->shape_is_out = 0;
    for (int i = 0; i < EV__AG_MAX_SAVED; i++) {
        n->saved[i].t = NULL;
    }
    n->next = n->inline_next;
    if (n_next > EV__AG_INLINE_NEXT) {
        n->next = calloc((size_t)n_next, sizeof(*n->next));
        n->big_inputs = calloc((size_t)n_next, sizeof(*n->big_inputs));
        if (!n->next || !n->big_inputs) {
            free(n->next);
            free(n->big_inputs);
            ev__cache_free(EV__AG_CACHE_NODE, n);
            ev__set_message(EV_ENOMEM, "autograd: out of memory for a graph node");
            return NULL;
        }
    } else {
        for (int i = 0; i < n_next; i++) { /* a loop: memset's call cost more */
            n->inline_next[i] = (ev__ag_edge){NULL, 0};
        }
    }
    atomic_init(&n->refs, 1);
    n->n_next = n_next;
    n->seq = ++node_clock;
    return n;
}

static const ev__ag_fn accumulate_fn = {"AccumulateGrad", NULL};

/* The accumulator of a leaf that requires grad (a new reference). */
static ev_ag_node *leaf_accumulator(ev_tensor *t, ev__ag_meta *m)
{
    ev__lock_acquire(&m->lock);
    ev__ag_leaf *l = ev__ag_leaf_get(m);
    ev_ag_node *acc = l && l->accumulator ? node_try_ref(l->accumulator) : NULL;
    if (l && !acc) {
        acc = node_alloc(0);
        if (acc) {
            acc->fn = &accumulate_fn;
            ev__ag_node_set_leaf(acc, ev_tensor_ref(t));
            l->accumulator = acc;
        }
    }
    ev__lock_release(&m->lock);
    return acc;
}

void ev__ag_node_set_leaf(ev_ag_node *n, ev_tensor *leaf)
{
    n->leaf = leaf;
    n->cold |= EV__AG_COLD_LEAF;
}

void ev__ag_node_set_inner(ev_ag_node *n, ev_ag_node *inner)
{
    n->inner = inner;
    n->cold |= EV__AG_COLD_INNER;
}

static void copy_shape(int64_t *to, int ndim, const int64_t *from)
{
    for (int d = 0; d < ndim; d++) { /* a loop: most shapes are short */
        to[d] = from[d];
    }
}

/* Keeps input i's dtype and shape in n; the shape only if it is not out's. */
static void input_of(ev_ag_node *n, int i, const ev_tensor *t, const ev_tensor *out)
{
    int ndim = ev_tensor_ndim(t);
    const int64_t *shape = ev_tensor_shape(t);
    if (n->next != n->inline_next) {
        ev__ag_input *in = &n->big_inputs[i];
        in->dtype = ev_tensor_dtype(t);
        in->ndim = ndim;
        copy_shape(in->shape, ndim, shape);
        return;
    }
    n->in_dtype[i] = (uint8_t)ev_tensor_dtype(t);
    n->in_ndim[i] = (int8_t)ndim;
    bool same = out && ev_tensor_ndim(out) == ndim;
    const int64_t *oshape = same ? ev_tensor_shape(out) : NULL;
    for (int d = 0; same && d < ndim; d++) { /* a loop: memcmp's call cost more */
        same = shape[d] == oshape[d];
    }
    if (same) {
        n->shape_is_out |= (uint8_t)(1u << i);
    } else {
        copy_shape(n->in_shape[i], ndim, shape);
    }
}

const ev__ag_input *ev__ag_inputs_of(ev_ag_node *n, const ev_tensor *g,
                                     ev__ag_input small[EV__AG_INLINE_NEXT])
{
    if (n->next != n->inline_next) {
        return n->big_inputs;
    }
    for (int i = 0; i < n->n_next; i++) {
        small[i].dtype = (ev_dtype)n->in_dtype[i];
        small[i].ndim = n->in_ndim[i];
        bool from_g = n->shape_is_out & (1u << i);
        /* The gradient is shaped like the output (the engine checks a
         * given one, and shapes every other by its tensor). */
        copy_shape(small[i].shape, small[i].ndim, from_g ? ev_tensor_shape(g) : n->in_shape[i]);
    }
    return small;
}

/* ev__ag_edge_of for a t whose view node is fresh. */
static int fresh_edge_of(ev_tensor *t, ev__ag_edge *e)
{
    e->node = NULL;
    e->output_nr = 0;
    ev__ag_meta *m = t ? ev__ag_meta_of(t) : NULL;
    if (!m || !m->requires_grad) {
        return 0;
    }
    ev__lock_acquire(&m->lock);
    ev_ag_node *fn = m->grad_fn;
    if (fn) {
        ev_ag_node_ref(fn);
        e->output_nr = m->output_nr;
    }
    ev__lock_release(&m->lock);
    e->node = fn ? fn : leaf_accumulator(t, m);
    return e->node ? 0 : EV_ENOMEM;
}

int ev__ag_edge_of(ev_tensor *t, ev__ag_edge *e)
{
    int rc = t ? ev__ag_refresh_view(t) : 0;
    if (rc) {
        e->node = NULL;
        e->output_nr = 0;
        return rc;
    }
    return fresh_edge_of(t, e);
}

ev_ag_node *ev__ag_node_new(const ev_exec *ex, const ev__ag_fn *fn, int n,
                            ev_tensor *const *inputs, const ev_tensor *out)
{
    /* Stale views' nodes are remade first: a node must be newer than the
     * nodes it points to (the walk orders and prunes by creation). */
    for (int i = 0; i < n; i++) {
        if (inputs[i] && ev__ag_refresh_view(inputs[i]) != 0) {
            return NULL;
        }
    }
    ev_ag_node *node = node_alloc(n);
    if (!node) {
        return NULL;
    }
    node->fn = fn;
    node->vm = ex->vm;
    node->thread_uid = ex->thread_uid;
    node->site = ex->site;
    for (int i = 0; i < n; i++) {
        if (inputs[i]) {
            input_of(node, i, inputs[i], out);
            if (fresh_edge_of(inputs[i], &node->next[i]) != 0) {
                ev__ag_node_unref(node);
                return NULL;
            }
            const ev_ag_node *in = node->next[i].node;
            if (in && in->seq >= node->seq) { /* made on another thread */
                node->seq = in->seq + 1;
            }
        } else if (node->next == node->inline_next) {
            node->in_dtype[i] = 0;
            node->in_ndim[i] = 0;
        }
    }
    if (node->seq > node_clock) {
        node_clock = node->seq;
    }
    return node;
}

int ev__ag_save(ev_ag_node *n, int i, ev_tensor *t, bool is_output)
{
    ev_tensor *s = t;
    if (is_output) {
        int rc = ev_tensor_alias(t, &s);
        if (rc) {
            return rc;
        }
    } else {
        ev_tensor_ref(t);
    }
    n->saved[i].t = s;
    n->saved[i].version = ev_tensor_version(t);
    if (i >= n->n_saved) {
        n->n_saved = (uint8_t)(i + 1);
    }
    return 0;
}

int ev__ag_save_layout(ev_ag_node *n, int i, ev_tensor *t)
{
    ev_tensor *s = NULL;
    int rc = ev_tensor_alias(t, &s);
    if (rc) {
        return rc;
    }
    n->saved[i].t = s;
    n->layout_only |= (uint8_t)(1u << i);
    if (i >= n->n_saved) {
        n->n_saved = (uint8_t)(i + 1);
    }
    return 0;
}

void ev__ag_rebase(ev_tensor *base)
{
    ev__ag_meta *m = ev__ag_meta_of(base);
    if (m) {
        __atomic_add_fetch(&m->base_gen, 1, __ATOMIC_RELAXED);
    }
}

static void meta_release_embedded(ev_tensor_ext *ext);

/* The node whose out_meta m is, or NULL if m was allocated by itself. */
static ev_ag_node *meta_host(const ev__ag_meta *m)
{
    return m->ext.release == meta_release_embedded
               ? (ev_ag_node *)((char *)m - offsetof(ev_ag_node, out_meta))
               : NULL;
}

/* Drops m's reference on old, a grad_fn it no longer has, unless old is
 * its host: m's memory is that node's, so m keeps it until it goes. */
static void meta_drop_grad_fn(ev__ag_meta *m, ev_ag_node *old)
{
    if (old != meta_host(m)) {
        ev__ag_node_unref(old);
    }
}

int ev__ag_remake_view(ev_tensor *t, ev__ag_meta *m)
{
    ev__ag_meta *bm = ev__ag_meta_of(m->view_base);
    uint64_t gen = bm ? __atomic_load_n(&bm->base_gen, __ATOMIC_RELAXED) : 0;
    ev__lock_acquire(&m->lock);
    bool stale = m->view_gen != gen;
    ev_ag_node *old = stale && m->grad_fn ? m->grad_fn : NULL;
    ev_exec ex = {old ? old->vm : NULL, old ? old->thread_uid : 0, old ? old->site : NULL};
    ev__lock_release(&m->lock);
    if (!stale) {
        return 0;
    }
    if (!ex.vm) {
        ev_ag_node *bfn = bm ? bm->grad_fn : NULL;
        ex = (ev_exec){bfn ? bfn->vm : NULL, bfn ? bfn->thread_uid : 0, bfn ? bfn->site : NULL};
    }
    if (!ex.vm) {
        return 0; /* neither has a graph: nothing to remake */
    }
    /* Made outside t's lock: making it takes the base's. */
    ev_ag_node *n = ev__ag_view_node(&ex, t, m->view_base);
    if (!n) {
        return EV_ENOMEM;
    }
    ev__lock_acquire(&m->lock);
    old = m->grad_fn;
    m->grad_fn = n;
    m->output_nr = 0;
    m->view_gen = gen;
    ev__lock_release(&m->lock);
    meta_drop_grad_fn(m, old);
    return 0;
}

/* ------------------------------------------------------------ tensor state */

/* Drops what m holds but its memory. */
static void meta_clear(ev__ag_meta *m)
{
    ev_tensor_unref(m->view_base);
    if (m->leaf) {
        ev_tensor_unref(m->leaf->grad);
        hooks_free(m->leaf->hooks);
        hooks_free(m->leaf->post_hooks);
        free(m->leaf);
    }
}

static void meta_release(ev_tensor_ext *ext)
{
    ev__ag_meta *m = (ev__ag_meta *)ext;
    ev__ag_node_unref(m->grad_fn);
    meta_clear(m);
    ev__cache_free(EV__AG_CACHE_META, m);
}

/* The release of a node's out_meta: its grad_fn, if another, and then the
 * node (which frees m's memory). */
static void meta_release_embedded(ev_tensor_ext *ext)
{
    ev__ag_meta *m = (ev__ag_meta *)ext;
    ev_ag_node *host = meta_host(m);
    meta_drop_grad_fn(m, m->grad_fn);
    meta_clear(m);
    ev__ag_node_unref(host);
}

/* A new, unpublished state (NULL when out of memory, with the message set). */
static ev__ag_meta *meta_new(void)
{
    ev__ag_meta *m = ev__cache_alloc(EV__AG_CACHE_META, sizeof(*m));
    if (!m) {
        ev__set_message(EV_ENOMEM, "autograd: out of memory for a tensor's state");
        return NULL;
    }
    memset(m, 0, sizeof(*m)); /* the lock too: all zero is free */
    m->ext.release = meta_release;
    return m;
}

/* Frees a state that lost the race to be t's (it holds nothing). */
static void meta_discard(ev__ag_meta *m)
{
    ev__cache_free(EV__AG_CACHE_META, m);
}

ev__ag_meta *ev__ag_meta_get(ev_tensor *t)
{
    ev__ag_meta *m = ev__ag_meta_of(t);
    if (m) {
        return m;
    }
    if (!(m = meta_new())) {
        return NULL;
    }
    ev__ag_meta *won = (ev__ag_meta *)ev_tensor_ext_set(t, &m->ext);
    if (won != m) {
        meta_discard(m);
    }
    return won;
}

ev__ag_leaf *ev__ag_leaf_get(ev__ag_meta *m)
{
    ev__ag_leaf *l = m->leaf;
    if (!l) {
        l = ev__calloc(1, sizeof *l);
        if (!l) {
            ev__set_message(EV_ENOMEM, "autograd: out of memory for a leaf tensor's state");
            return NULL;
        }
        /* release: readers without the lock see its fields (ev__ag_leaf_of). */
        __atomic_store_n(&m->leaf, l, __ATOMIC_RELEASE);
    }
    return l;
}

int ev__ag_set_output(ev_ag_node *n, ev_tensor *out, ev_tensor *view_of)
{
    /* A view's base is what its input views, or the input itself. */
    ev__ag_meta *im = view_of ? ev__ag_meta_of(view_of) : NULL;
    ev_tensor *base = im && im->view_base ? im->view_base : view_of;
    ev__ag_meta *bm = base ? ev__ag_meta_of(base) : NULL;
    uint64_t gen = bm ? __atomic_load_n(&bm->base_gen, __ATOMIC_RELAXED) : 0;
    ev__ag_meta *m = ev__ag_meta_of(out);
    if (!m) {
        /* A new output (the common case): its state is filled in before it
         * is published, so no lock is needed. It is the node's out_meta
         * unless that is taken, and it takes over the node's reference. */
        bool own = !(n->cold & EV__AG_OUT_META_USED);
        if (own) {
            m = &n->out_meta;
            memset(m, 0, sizeof(*m)); /* the lock too: all zero is free */
            m->ext.release = meta_release_embedded;
            n->cold |= EV__AG_OUT_META_USED;
        } else if (!(m = meta_new())) {
            ev__ag_node_unref(n);
            return EV_ENOMEM;
        }
        m->grad_fn = n;
        m->requires_grad = true;
        if (base) {
            m->is_view = true;
            m->view_base = ev_tensor_ref(base);
            m->view_gen = gen;
        }
        ev__ag_meta *won = (ev__ag_meta *)ev_tensor_ext_set(out, &m->ext);
        if (won == m) {
            return 0;
        }
        ev_tensor_unref(m->view_base);
        if (own) {
            n->cold &= (uint8_t)~EV__AG_OUT_META_USED;
        } else {
            meta_discard(m);
        }
        m = won; /* another thread gave it a state first: set it as below */
    }
    ev__lock_acquire(&m->lock);
    ev_ag_node *old = m->grad_fn;
    m->grad_fn = n;
    m->output_nr = 0;
    if (base && !m->view_base) {
        m->is_view = true;
        m->view_base = ev_tensor_ref(base);
        m->view_gen = gen;
    }
    __atomic_store_n(&m->requires_grad, true, __ATOMIC_RELAXED);
    ev__lock_release(&m->lock);
    meta_drop_grad_fn(m, old);
    return 0;
}

int ev_ag_requires_grad(const ev_tensor *t)
{
    return t && ev__ag_tracks(t);
}

int ev_ag_set_requires_grad(ev_tensor *t, int on)
{
    if (!t) {
        return ev__set_message(EV_EINVAL, "requires_grad_: the tensor is NULL");
    }
    ev__ag_meta *m = ev__ag_meta_of(t);
    if (m && m->grad_fn) {
        if (on) {
            return 0;
        }
        return ev__set_message(EV_EINVAL,
                               "requires_grad_(False): the tensor is not a leaf (it was made "
                               "by %s); use detach() for a tensor without a graph",
                               m->grad_fn->fn->name);
    }
    if (on && ev_dtype_get_info(ev_tensor_dtype(t))->kind != EV_KIND_FLOAT) {
        return ev__set_message(EV_EINVAL,
                               "requires_grad_: only float tensors can require grad, not %s",
                               ev_dtype_name(ev_tensor_dtype(t)));
    }
    if (!m && !on) {
        return 0;
    }
    if (!m && !(m = ev__ag_meta_get(t))) {
        return EV_ENOMEM;
    }
    __atomic_store_n(&m->requires_grad, on != 0, __ATOMIC_RELAXED);
    return 0;
}

int ev_ag_is_leaf(const ev_tensor *t)
{
    ev__ag_meta *m = ev__ag_meta_of(t);
    return !m || !m->grad_fn;
}

ev_tensor *ev_ag_grad(const ev_tensor *t)
{
    ev__ag_meta *m = ev__ag_meta_of(t);
    if (!m) {
        return NULL;
    }
    ev__lock_acquire(&m->lock);
    ev_tensor *g = m->leaf ? ev_tensor_ref(m->leaf->grad) : NULL;
    ev__lock_release(&m->lock);
    return g;
}

int ev_ag_set_grad(ev_tensor *t, ev_tensor *grad)
{
    if (!t) {
        return ev__set_message(EV_EINVAL, "grad: the tensor is NULL");
    }
    if (grad) {
        if (ev_tensor_dtype(grad) != ev_tensor_dtype(t) || !ev__ag_same_shape(grad, t)) {
            char got[256], want[256];
            ev__ag_layout_str(grad, got, sizeof got);
            ev__ag_layout_str(t, want, sizeof want);
            return ev__set_message(EV_EINVAL,
                                   "grad: the gradient must have the tensor's shape and dtype "
                                   "(%s), got %s", want, got);
        }
    }
    ev__ag_meta *m = grad ? ev__ag_meta_get(t) : ev__ag_meta_of(t);
    if (!m) {
        return grad ? EV_ENOMEM : 0;
    }
    ev__lock_acquire(&m->lock);
    ev__ag_leaf *l = grad ? ev__ag_leaf_get(m) : m->leaf;
    if (!l) {
        ev__lock_release(&m->lock);
        return grad ? EV_ENOMEM : 0;
    }
    ev_tensor *old = l->grad;
    l->grad = ev_tensor_ref(grad);
    ev__lock_release(&m->lock);
    ev_tensor_unref(old);
    return 0;
}

ev_ag_node *ev_ag_grad_fn(const ev_tensor *t)
{
    /* Not const in effect: a view's stale grad_fn is remade (out of memory
     * keeps the old one). */
    ev__ag_refresh_view((ev_tensor *)t);
    ev__ag_meta *m = ev__ag_meta_of(t);
    return m ? m->grad_fn : NULL;
}

int ev_ag_detach(ev_tensor *t, ev_tensor **out)
{
    return ev_tensor_alias(t, out);
}

const char *ev_ag_node_name(const ev_ag_node *n)
{
    return n->fn->name;
}

const ev_site *ev_ag_node_site(const ev_ag_node *n)
{
    return n->site;
}

int ev_ag_node_n_next(const ev_ag_node *n)
{
    return n->n_next;
}

ev_ag_node *ev_ag_node_next(const ev_ag_node *n, int i)
{
    return i >= 0 && i < n->n_next ? n->next[i].node : NULL;
}

/* ------------------------------------------------------------------ hooks */

static ev__ag_hook *hook_new(void *ctx, void (*free_ctx)(void *))
{
    ev__ag_hook *h = calloc(1, sizeof(*h));
    if (!h) {
        ev__set_message(EV_ENOMEM, "register_hook: out of memory");
        return NULL;
    }
    h->ctx = ctx;
    h->free_ctx = free_ctx;
    return h;
}

static void hook_append(ev__ag_hook **list, ev__ag_hook *h)
{
    while (*list) {
        list = &(*list)->next;
    }
    *list = h;
}

int ev_ag_register_hook(ev_tensor *t, ev_ag_grad_hook fn, void *ctx, void (*free_ctx)(void *))
{
    if (!t || !fn) {
        return ev__set_message(EV_EINVAL, "register_hook: the tensor or the hook is NULL");
    }
    ev__ag_meta *m = ev__ag_meta_of(t);
    if (!m || !m->requires_grad) {
        return ev__set_message(EV_EINVAL, "register_hook: the tensor does not require grad, so "
                                          "no gradient will reach it");
    }
    ev__ag_hook *h = hook_new(ctx, free_ctx);
    if (!h) {
        return EV_ENOMEM;
    }
    h->fn.grad = fn;
    ev__lock_acquire(&m->lock);
    /* A non-leaf's hooks ride on the node that makes it; a leaf's on its
     * state, run by its accumulator. */
    ev__ag_leaf *l = m->grad_fn ? NULL : ev__ag_leaf_get(m);
    if (!m->grad_fn && !l) {
        ev__lock_release(&m->lock);
        free(h); /* the caller keeps ctx */
        return EV_ENOMEM;
    }
    hook_append(m->grad_fn ? &m->grad_fn->hooks : &l->hooks, h);
    ev__lock_release(&m->lock);
    return 0;
}

int ev_ag_register_post_accumulate_hook(ev_tensor *t, ev_ag_leaf_hook fn, void *ctx,
                                        void (*free_ctx)(void *))
{
    if (!t || !fn) {
        return ev__set_message(EV_EINVAL,
                               "register_post_accumulate_grad_hook: the tensor or hook is NULL");
    }
    ev__ag_meta *m = ev__ag_meta_of(t);
    if (!m || !m->requires_grad || m->grad_fn) {
        return ev__set_message(EV_EINVAL, "register_post_accumulate_grad_hook: only a leaf "
                                          "that requires grad accumulates a gradient");
    }
    ev__ag_hook *h = hook_new(ctx, free_ctx);
    if (!h) {
        return EV_ENOMEM;
    }
    h->fn.leaf = fn;
    ev__lock_acquire(&m->lock);
    ev__ag_leaf *l = ev__ag_leaf_get(m);
    if (l) {
        hook_append(&l->post_hooks, h);
    }
    ev__lock_release(&m->lock);
    if (!l) {
        free(h); /* the caller keeps ctx */
        return EV_ENOMEM;
    }
    return 0;
}

/* ------------------------------------------------------- saved tensors */

bool ev__ag_same_shape(const ev_tensor *a, const ev_tensor *b)
{
    int nd = ev_tensor_ndim(a);
    return ev_tensor_ndim(b) == nd &&
           !memcmp(ev_tensor_shape(a), ev_tensor_shape(b), sizeof(int64_t) * (size_t)nd);
}

void ev__ag_layout_str(const ev_tensor *t, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    const int64_t *shape = ev_tensor_shape(t);
    for (int d = 0; d < ev_tensor_ndim(t) && len < size; d++) {
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "",
                                (long long)shape[d]);
    }
    if (len < size) {
        snprintf(buf + len, size - len, "] %s", ev_dtype_name(ev_tensor_dtype(t)));
    }
}

static void site_str(const ev_site *s, char *buf, size_t size)
{
    if (s && s->file) {
        snprintf(buf, size, "%s:%d", s->file, s->line);
    } else {
        snprintf(buf, size, "an unknown line");
    }
}

int ev__ag_saved_get(ev_ag_node *n, int i, ev_tensor **out)
{
    if (n->released) {
        char at[512];
        site_str(n->site, at, sizeof at);
        return ev__set_message(EV_ESTATE,
                               "backward: trying to go through the graph a second time (%s, "
                               "made at %s); its saved tensors were freed by the first "
                               "backward. Pass retain_graph=True to the first backward to "
                               "keep them.",
                               n->fn->name, at);
    }
    ev__ag_saved *s = &n->saved[i];
    uint64_t now = ev_tensor_version(s->t);
    if (!(n->layout_only & (1u << i)) && now != s->version) {
        const char *wname;
        const ev_site *wsite;
        ev_tensor_last_write(s->t, &wname, &wsite);
        char at[512], wat[512];
        site_str(n->site, at, sizeof at);
        site_str(wsite, wat, sizeof wat);
        return ev__set_message(
            EV_ESTATE,
            "backward: a tensor saved by %s at %s was modified in place by %s at %s before "
            "backward used it (its version is %llu, it was saved at version %llu). Use an "
            "out-of-place op there, or clone() the tensor before changing it.",
            n->fn->name, at, wname ? wname : "an in-place op", wat, (unsigned long long)now,
            (unsigned long long)s->version);
    }
    *out = s->t;
    return 0;
}

/* ----------------------------------------------------------------- sites */

/* Backward ops report the forward op's file and line, with the backward's
 * name where the function goes: "mul failed at train.py:12 in
 * MulBackward0". Interned for the process, as the engine borrows sites. */
typedef struct bw_site {
    ev_site site;
    const char *name;
    const ev_site *fwd;
    struct bw_site *next;
} bw_site;

#define BW_SITE_BUCKETS 1024
static bw_site *bw_sites[BW_SITE_BUCKETS];
static pthread_mutex_t bw_sites_lock = PTHREAD_MUTEX_INITIALIZER;

/* A small direct-mapped cache in front of the table (and its lock), per
 * thread; small, as it lives in the static TLS block. */
#define BW_SITE_CACHE 16
static EV_TLS_FAST bw_site *bw_site_cache[BW_SITE_CACHE];

const ev_site *ev__ag_backward_site(const char *name, const ev_site *fwd)
{
    uintptr_t h = ((uintptr_t)name * 31u + (uintptr_t)fwd) >> 4;
    bw_site **slot = &bw_site_cache[h % BW_SITE_CACHE];
    if (*slot && (*slot)->name == name && (*slot)->fwd == fwd) {
        return &(*slot)->site;
    }
    bw_site **bucket = &bw_sites[h % BW_SITE_BUCKETS];
    pthread_mutex_lock(&bw_sites_lock);
    bw_site *s = *bucket;
    while (s && (s->name != name || s->fwd != fwd)) {
        s = s->next;
    }
    if (!s && (s = calloc(1, sizeof(*s))) != NULL) {
        s->name = name;
        s->fwd = fwd;
        s->site.file = fwd ? fwd->file : NULL;
        s->site.line = fwd ? fwd->line : 0;
        s->site.function = name;
        s->next = *bucket;
        *bucket = s;
    }
    pthread_mutex_unlock(&bw_sites_lock);
    if (s) {
        *slot = s;
    }
    return s ? &s->site : fwd;
}
