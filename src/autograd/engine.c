/* The backward walk: finds the nodes reachable from the outputs, counts
 * each node's consumers, and runs every node once all the gradients for it
 * have arrived, latest node first (so a node's saved tensors go as early as
 * possible and gradients of the last layers are ready first). It only
 * issues instructions: nothing here waits for a kernel. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd-impl.h"

typedef struct entry {
    ev_ag_node *node;   /* owned reference; NULL: a free slot */
    int deps;           /* consumers whose gradient has not arrived yet */
    int capture;        /* index into the grad_of inputs, or -1 */
    bool needed;        /* grad_of: leads to an input */
    uint32_t uid;       /* the thread uid of the last gradient sent here */
    bool fresh;         /* buf is the walk's alone: no user tensor, other
                           buffer or saved tensor shares its elements */
    ev_tensor *buf;     /* the gradient summed so far (owned) */
} entry;

typedef struct walk {
    ev_vm *vm;
    bool retain;
    bool grad_of;       /* ev_ag_grad_of: capture, never accumulate */
    size_t cap, count;
    entry *slots;
    ev_ag_node **heap;  /* ready nodes, by priority() (largest first) */
    size_t heap_n;
} walk;

static size_t slot_hash(const ev_ag_node *n, size_t cap)
{
    uintptr_t h = (uintptr_t)n;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static entry *lookup(walk *w, const ev_ag_node *n)
{
    size_t i = slot_hash(n, w->cap);
    while (w->slots[i].node && w->slots[i].node != n) {
        i = (i + 1) & (w->cap - 1);
    }
    return &w->slots[i];
}

static int grow(walk *w)
{
    size_t cap = w->cap ? w->cap * 2 : 64;
    entry *old = w->slots;
    size_t old_cap = w->cap;
    w->slots = calloc(cap, sizeof(entry));
    ev_ag_node **heap = realloc(w->heap, cap * sizeof(*heap));
    if (!w->slots || !heap) {
        free(w->slots);
        w->slots = old;
        if (heap) {
            w->heap = heap;
        }
        return ev__set_message(EV_ENOMEM, "backward: out of memory for the graph walk");
    }
    w->heap = heap;
    w->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].node) {
            *lookup(w, old[i].node) = old[i];
        }
    }
    free(old);
    return 0;
}

/* The entry of n, added (with a reference) if new; *added says which. */
static entry *find_or_add(walk *w, ev_ag_node *n, bool *added)
{
    if ((w->count + 1) * 2 > w->cap && grow(w) != 0) {
        return NULL;
    }
    entry *e = lookup(w, n);
    *added = !e->node;
    if (!e->node) {
        ev_ag_node_ref(n);
        e->node = n;
        e->capture = -1;
        w->count++;
    }
    return e;
}

/* The order ready nodes run in: latest made first, but a leaf's
 * accumulator as soon as it is ready (as PyTorch ranks AccumulateGrad), so
 * post-accumulate hooks fire while backward goes on (data-parallel training
 * starts its all-reduces there). Made early, an accumulator would run last
 * otherwise: a leaf keeps it from the first step on. */
static uint64_t priority(const ev_ag_node *n)
{
    return n->fn->backward ? n->seq : UINT64_MAX;
}

static void heap_push(walk *w, ev_ag_node *n)
{
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (priority(w->heap[p]) >= priority(n)) {
            break;
        }
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = n;
}

static ev_ag_node *heap_pop(walk *w)
{
    ev_ag_node *top = w->heap[0];
    ev_ag_node *last = w->heap[--w->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->heap_n) {
            break;
        }
        if (c + 1 < w->heap_n && priority(w->heap[c + 1]) > priority(w->heap[c])) {
            c++;
        }
        if (priority(w->heap[c]) <= priority(last)) {
            break;
        }
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->heap_n) {
        w->heap[i] = last;
    }
    return top;
}

/* Adds every node reachable from the roots, counting consumers. */
static int discover(walk *w, ev_ag_node *const *roots, int n)
{
    size_t stack_cap = 64, sp = 0;
    ev_ag_node **stack = malloc(stack_cap * sizeof(*stack));
    if (!stack) {
        return ev__set_message(EV_ENOMEM, "backward: out of memory for the graph walk");
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        bool added;
        entry *e = find_or_add(w, roots[i], &added);
        if (!e) {
            rc = EV_ENOMEM;
        } else if (added) {
            stack[sp++] = roots[i];
        }
        while (sp > 0 && !rc) {
            ev_ag_node *node = stack[--sp];
            for (int k = 0; k < node->n_next && !rc; k++) {
                ev_ag_node *child = node->next[k].node;
                if (!child) {
                    continue;
                }
                entry *c = find_or_add(w, child, &added);
                if (!c) {
                    rc = EV_ENOMEM;
                    break;
                }
                c->deps++;
                if (added) {
                    if (sp == stack_cap) {
                        ev_ag_node **s = realloc(stack, 2 * stack_cap * sizeof(*stack));
                        if (!s) {
                            rc = ev__set_message(EV_ENOMEM, "backward: out of memory");
                            break;
                        }
                        stack = s;
                        stack_cap *= 2;
                    }
                    stack[sp++] = child;
                }
            }
        }
    }
    free(stack);
    return rc;
}

static int by_seq(const void *a, const void *b)
{
    const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
    /* Accumulators (no inputs) first: a node's inputs come before it. */
    uint64_t sx = x->node->fn->backward ? x->node->seq : 0;
    uint64_t sy = y->node->fn->backward ? y->node->seq : 0;
    return sx < sy ? -1 : sx > sy;
}

/* grad_of: marks the nodes that lead to a captured input, and counts only
 * the consumers among them (the others never run). */
static int mark_needed(walk *w)
{
    entry **order = malloc(w->count * sizeof(*order));
    if (!order) {
        return ev__set_message(EV_ENOMEM, "backward: out of memory for the graph walk");
    }
    size_t k = 0;
    for (size_t i = 0; i < w->cap; i++) {
        if (w->slots[i].node) {
            order[k++] = &w->slots[i];
        }
    }
    qsort(order, k, sizeof(*order), by_seq);
    for (size_t i = 0; i < k; i++) {
        entry *e = order[i];
        e->needed = e->capture >= 0;
        e->deps = 0;
        for (int j = 0; j < e->node->n_next && !e->needed; j++) {
            ev_ag_node *child = e->node->next[j].node;
            e->needed = child && lookup(w, child)->needed;
        }
    }
    for (size_t i = 0; i < k; i++) {
        entry *e = order[i];
        for (int j = 0; e->needed && j < e->node->n_next; j++) {
            ev_ag_node *child = e->node->next[j].node;
            entry *c = child ? lookup(w, child) : NULL;
            if (c && c->needed) {
                c->deps++;
            }
        }
    }
    free(order);
    return 0;
}

/* buf += g (a new tensor; either may be shared with others); *fresh says
 * whether buf is then the walk's alone (g_fresh: g was). */
static int add_into(ev_vm *vm, uint32_t uid, const ev_site *site, ev_tensor **buf, ev_tensor *g,
                    bool g_fresh, bool *fresh)
{
    if (!*buf) {
        *buf = ev_tensor_ref(g);
        *fresh = g_fresh;
        return 0;
    }
    *fresh = true;
    ev_exec ex = {vm, uid, site};
    ev_tensor *sum;
    int rc = ev_binary(&ex, EV_OP_ADD, *buf, g, &sum);
    if (rc) {
        return rc;
    }
    ev_tensor_unref(*buf);
    *buf = sum;
    return 0;
}

/* A hook's replacement must be a gradient of the same tensor: the walk
 * shapes and casts each gradient by its tensor's layout, so another one
 * would reach .grad with the wrong shape (PyTorch refuses it too). */
static int check_hook_result(const ev_tensor *rep, const ev_tensor *g)
{
    if (ev_tensor_dtype(rep) == ev_tensor_dtype(g) && ev__ag_same_shape(rep, g)) {
        return 0;
    }
    char got[256], want[256];
    ev__ag_layout_str(rep, got, sizeof got);
    ev__ag_layout_str(g, want, sizeof want);
    return ev__set_message(EV_EINVAL,
                           "backward: a gradient hook returned a tensor of %s for a gradient of "
                           "%s (a hook may change a gradient's values, not its shape or dtype)",
                           got, want);
}

/* Hooks see the gradient (a hook may keep it), so afterwards it is no
 * longer the walk's alone. */
static int run_hooks(ev__ag_hook *h, ev_tensor **g, bool *fresh)
{
    if (h) {
        *fresh = false;
    }
    for (; h; h = h->next) {
        ev_tensor *rep = NULL;
        int rc = h->fn.grad(h->ctx, *g, &rep);
        if (rc) {
            return rc;
        }
        if (rep && (rc = check_hook_result(rep, *g)) != 0) {
            ev_tensor_unref(rep);
            return rc;
        }
        if (rep) {
            ev_tensor_unref(*g);
            *g = rep;
        }
    }
    return 0;
}

/* .grad += g for the accumulator's leaf, as PyTorch's AccumulateGrad: the
 * first gradient is taken as it is when nothing else can reach it (made
 * in this walk and shared with nothing, or held by nothing else), else
 * copied, so .grad never aliases another tensor. */
static int accumulate(walk *w, entry *e)
{
    ev_tensor *leaf = ev__ag_node_leaf(e->node);
    ev__ag_meta *m = ev__ag_meta_of(leaf);
    /* Made with the accumulator, before it. */
    ev__ag_leaf *l = ev__ag_leaf_of(m);
    ev_exec ex = {w->vm, e->uid, NULL};
    int rc = run_hooks(l->hooks, &e->buf, &e->fresh);
    if (rc) {
        return rc;
    }
    ev__lock_acquire(&m->lock);
    if (!l->grad) {
        ev_tensor *g = e->buf;
        if ((e->fresh || ev_tensor_is_unique(g)) && ev_tensor_is_contiguous(g) &&
            ev_tensor_dtype(g) == ev_tensor_dtype(leaf)) {
            l->grad = ev_tensor_ref(g);
        } else {
            ev_tensor *copy;
            rc = ev_empty(&ex, ev_tensor_dtype(leaf), ev_tensor_ndim(leaf),
                          ev_tensor_shape(leaf), &copy);
            if (!rc && (rc = ev_copy_(&ex, copy, g)) != 0) {
                ev_tensor_unref(copy);
            }
            if (!rc) {
                l->grad = copy;
            }
        }
    } else {
        rc = ev_binary_(&ex, EV_OP_ADD, l->grad, e->buf);
    }
    ev__lock_release(&m->lock);
    for (ev__ag_hook *h = l->post_hooks; h && !rc; h = h->next) {
        rc = h->fn.leaf(h->ctx, leaf);
    }
    return rc;
}

/* Whether grads[i], made by node's backward from e's buffer, is the
 * walk's alone: it shares elements with no saved tensor, and with the
 * buffer only if that was fresh and no other of the node's gradients
 * shares them too (add passes one gradient to both inputs). */
static bool grad_is_fresh(const ev_ag_node *node, const entry *e, ev_tensor *const *grads, int i)
{
    for (int k = 0; k < node->n_saved; k++) {
        if (node->saved[k].t && ev_tensor_same_storage(grads[i], node->saved[k].t)) {
            return false;
        }
    }
    for (int k = 0; k < node->n_next; k++) {
        if (k != i && grads[k] && ev_tensor_same_storage(grads[i], grads[k])) {
            return false;
        }
    }
    return !ev_tensor_same_storage(grads[i], e->buf) || e->fresh;
}

static int run_node(walk *w, entry *e)
{
    ev_ag_node *node = e->node;
    int rc = run_hooks(node->hooks, &e->buf, &e->fresh);
    if (rc) {
        return rc;
    }
    if (!node->fn->backward) {
        return w->grad_of ? 0 : accumulate(w, e);
    }
    ev_tensor *small[8] = {NULL};
    ev_tensor **grads = node->n_next <= 8 ? small : calloc((size_t)node->n_next, sizeof(*grads));
    if (!grads) {
        return ev__set_message(EV_ENOMEM, "backward: out of memory");
    }
    rc = ev__ag_run_backward(node, e->buf, grads);
    for (int i = 0; i < node->n_next; i++) {
        ev_ag_node *child = node->next[i].node;
        entry *c = child ? lookup(w, child) : NULL;
        if (!rc && c && grads[i] && (!w->grad_of || c->needed)) {
            rc = add_into(w->vm, node->thread_uid, node->bw_site, &c->buf, grads[i],
                          grad_is_fresh(node, e, grads, i), &c->fresh);
            c->uid = node->thread_uid;
        }
    }
    for (int i = 0; i < node->n_next; i++) {
        ev_tensor_unref(grads[i]);
    }
    if (grads != small) {
        free(grads);
    }
    if (!rc && !w->retain) {
        node->released = true;
        for (int i = 0; i < node->n_saved; i++) {
            ev_tensor_unref(node->saved[i].t);
            node->saved[i].t = NULL;
        }
    }
    return rc;
}

static int execute(walk *w)
{
    for (size_t i = 0; i < w->cap; i++) {
        entry *e = &w->slots[i];
        if (e->node && e->deps == 0 && (!w->grad_of || e->needed)) {
            heap_push(w, e->node);
        }
    }
    int rc = 0;
    while (w->heap_n && !rc) {
        entry *e = lookup(w, heap_pop(w));
        if (e->buf) {
            if (e->capture >= 0 && !e->node->fn->backward) {
                ev_tensor *leaf = ev__ag_node_leaf(e->node);
                rc = run_hooks(leaf ? ev__ag_leaf_of(ev__ag_meta_of(leaf))->hooks : NULL,
                               &e->buf, &e->fresh);
            } else {
                rc = run_node(w, e);
            }
            if (e->capture < 0) {
                /* Used: drop it now, so that what it shared with goes too. */
                ev_tensor_unref(e->buf);
                e->buf = NULL;
            }
        }
        for (int j = 0; j < e->node->n_next; j++) {
            ev_ag_node *child = e->node->next[j].node;
            entry *c = child ? lookup(w, child) : NULL;
            if (c && (!w->grad_of || c->needed) && --c->deps == 0) {
                heap_push(w, child);
            }
        }
    }
    return rc;
}

static void walk_free(walk *w)
{
    for (size_t i = 0; i < w->cap; i++) {
        ev_tensor_unref(w->slots[i].buf);
        ev__ag_node_unref(w->slots[i].node);
    }
    free(w->slots);
    free(w->heap);
}

/* The node a gradient of t enters the graph at (a new reference). */
static ev_ag_node *entry_node(ev_tensor *t, uint32_t *nr)
{
    ev__ag_meta *m = ev__ag_meta_of(t);
    ev__ag_edge e = {NULL, 0};
    if (m && m->requires_grad) {
        ev__lock_acquire(&m->lock);
        if (m->grad_fn) {
            e.node = m->grad_fn;
            ev_ag_node_ref(e.node);
            e.output_nr = m->output_nr;
        } else if (m->leaf && m->leaf->accumulator) {
            /* Only an existing accumulator: a leaf no op used has none. */
            ev_ag_node *acc = m->leaf->accumulator;
            int r = atomic_load_explicit(&acc->refs, memory_order_relaxed);
            while (r > 0 && !atomic_compare_exchange_weak_explicit(
                                &acc->refs, &r, r + 1, memory_order_acquire,
                                memory_order_relaxed)) {
            }
            e.node = r > 0 ? acc : NULL;
        }
        ev__lock_release(&m->lock);
    }
    *nr = e.output_nr;
    return e.node;
}

static int root_grad(const ev_exec *ex, const char *fn, int i, ev_tensor *out, ev_tensor *g,
                     ev_tensor **res)
{
    if (!g) {
        if (ev_tensor_numel(out) != 1) {
            return ev__set_message(EV_EINVAL,
                                   "%s: grad can be implicitly created only for outputs with "
                                   "one element; output %d has %lld (pass a gradient)",
                                   fn, i, (long long)ev_tensor_numel(out));
        }
        ev_scalar one = {.dtype = EV_FLOAT64, .v.f = 1.0};
        return ev_full(ex, ev_tensor_dtype(out), ev_tensor_ndim(out), ev_tensor_shape(out), one,
                       res);
    }
    if (!ev__ag_same_shape(g, out)) {
        char got[256], want[256];
        ev__ag_layout_str(g, got, sizeof got);
        ev__ag_layout_str(out, want, sizeof want);
        return ev__set_message(EV_EINVAL, "%s: gradient %d has another shape than its output: "
                               "%s for an output of %s", fn, i, got, want);
    }
    if (ev_tensor_dtype(g) != ev_tensor_dtype(out)) {
        return ev_cast(ex, g, ev_tensor_dtype(out), res);
    }
    *res = ev_tensor_ref(g);
    return 0;
}

static int walk_run(const ev_exec *ex, const char *fn, int n, ev_tensor *const *outputs,
                    ev_tensor *const *grads, int n_inputs, ev_tensor *const *inputs,
                    int retain_graph, int allow_unused, ev_tensor **results)
{
    if (!ex || !ex->vm || n < 1 || !outputs) {
        return ev__set_message(EV_EINVAL, "%s: needs an exec and at least one output", fn);
    }
    walk w = {.vm = ex->vm, .retain = retain_graph != 0, .grad_of = inputs != NULL};
    ev_ag_node *small[8];
    ev_ag_node **roots = n <= 8 ? small : calloc((size_t)n, sizeof(*roots));
    if (!roots) {
        return ev__set_message(EV_ENOMEM, "%s: out of memory", fn);
    }
    int rc = 0, nroots = 0;
    for (int i = 0; i < n && !rc; i++) {
        ev__ag_edge edge;
        if (!outputs[i]) {
            rc = ev__set_message(EV_EINVAL, "%s: output %d is NULL", fn, i);
        } else if (!ev_ag_requires_grad(outputs[i])) {
            rc = ev__set_message(EV_EINVAL, "%s: output %d does not require grad and has no "
                                            "grad_fn",
                                 fn, i);
        } else if (ev__ag_edge_of(outputs[i], &edge) != 0) {
            rc = EV_ENOMEM;
        } else {
            roots[nroots++] = edge.node;
        }
    }
    rc = rc ? rc : discover(&w, roots, nroots);
    for (int i = 0; i < n_inputs && !rc; i++) {
        uint32_t nr;
        ev_ag_node *node = inputs[i] ? entry_node(inputs[i], &nr) : NULL;
        entry *e = node ? lookup(&w, node) : NULL;
        if (e && e->node) {
            e->capture = i;
        } else if (!allow_unused && !ev_ag_requires_grad(inputs[i])) {
            rc = ev__set_message(EV_EINVAL,
                                 "%s: input %d does not require grad, so it has no gradient "
                                 "(call requires_grad_() on it before computing the outputs, or "
                                 "pass allow_unused=True to get None for it)",
                                 fn, i);
        } else if (!allow_unused) {
            rc = ev__set_message(EV_EINVAL,
                                 "%s: input %d is not used to compute the outputs (pass "
                                 "allow_unused=True to get None for it)",
                                 fn, i);
        }
        ev__ag_node_unref(node);
    }
    if (!rc && w.grad_of) {
        rc = mark_needed(&w);
    }
    for (int i = 0; i < n && !rc; i++) {
        ev_tensor *g;
        rc = root_grad(ex, fn, i, outputs[i], grads ? grads[i] : NULL, &g);
        if (!rc) {
            entry *e = lookup(&w, roots[i]);
            /* A gradient the caller passed is theirs; ones made here are not. */
            rc = add_into(ex->vm, ex->thread_uid, ex->site, &e->buf, g,
                          !(grads && grads[i]), &e->fresh);
            e->uid = ex->thread_uid;
            ev_tensor_unref(g);
        }
    }
    if (!rc) {
        /* Backward ops are never recorded (no create_graph). */
        int was = ev_ag_set_grad_enabled(0);
        rc = execute(&w);
        ev_ag_set_grad_enabled(was);
    }
    if (w.grad_of) {
        for (int i = 0; i < n_inputs; i++) {
            results[i] = NULL;
        }
        for (size_t i = 0; i < w.cap && !rc; i++) {
            entry *e = &w.slots[i];
            if (e->node && e->capture >= 0) {
                results[e->capture] = ev_tensor_ref(e->buf);
            }
        }
        for (int i = 0; i < n_inputs && !rc; i++) {
            if (!results[i] && inputs[i] && !allow_unused) {
                rc = ev__set_message(EV_EINVAL, "%s: no gradient reached input %d", fn, i);
            }
        }
        if (rc) {
            for (int i = 0; i < n_inputs; i++) {
                ev_tensor_unref(results[i]);
                results[i] = NULL;
            }
        }
    }
    for (int i = 0; i < nroots; i++) {
        ev__ag_node_unref(roots[i]);
    }
    if (roots != small) {
        free(roots);
    }
    walk_free(&w);
    return rc;
}

int ev_ag_backward(const ev_exec *ex, int n, ev_tensor *const *outputs, ev_tensor *const *grads,
                   int retain_graph)
{
    return walk_run(ex, "backward", n, outputs, grads, 0, NULL, retain_graph, 0, NULL);
}

int ev_ag_grad_of(const ev_exec *ex, int n, ev_tensor *const *outputs, ev_tensor *const *grads,
                  int n_inputs, ev_tensor *const *inputs, int retain_graph, int allow_unused,
                  ev_tensor **results)
{
    if (n_inputs < 1 || !inputs || !results) {
        return ev__set_message(EV_EINVAL, "grad: needs at least one input");
    }
    return walk_run(ex, "grad", n, outputs, grads, n_inputs, inputs, retain_graph, allow_unused,
                    results);
}
