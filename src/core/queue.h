/* Intrusive lists of the engine: a link embedded in each struct that goes on
 * a list (found back with EV_CONTAINER_OF), and the four shapes of list the
 * engine uses, each with its invariants and memory orders written once:
 *
 *   ev__lifo         a stack; one thread at a time (its owner's lock)
 *   ev__fifo         a queue with head and tail; one thread at a time
 *   ev__atomic_lifo  any thread pushes, one takes every node at once
 *   ev__mpsc         Vyukov's queue: any thread pushes, one pops, in order
 *
 * Nothing here allocates, and a node's link belongs to the list it is on
 * until it is popped or taken. Header-only: every function is static inline,
 * as they sit on the submit and worker paths. Never installed. */
#ifndef EV_CORE_QUEUE_H
#define EV_CORE_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* The struct of type `type` whose member `member` is at ptr (not NULL). */
#define EV_CONTAINER_OF(ptr, type, member)                                     \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* The link of ev__lifo, ev__fifo and ev__atomic_lifo. */
typedef struct ev__link {
    struct ev__link *next;
} ev__link;

/* ------------------------------------------------------------------ lifo */

/* A stack: top is the node pushed last; NULL when empty. */
typedef struct ev__lifo {
    ev__link *top;
} ev__lifo;

static inline bool ev__lifo_empty(const ev__lifo *s)
{
    return s->top == NULL;
}

static inline void ev__lifo_push(ev__lifo *s, ev__link *n)
{
    n->next = s->top;
    s->top = n;
}

/* The top node, left on the stack, or NULL. */
static inline ev__link *ev__lifo_peek(const ev__lifo *s)
{
    return s->top;
}

/* Unlinks and returns the top node, or NULL. Its link is left as it was. */
static inline ev__link *ev__lifo_pop(ev__lifo *s)
{
    ev__link *n = s->top;
    if (n) {
        s->top = n->next;
    }
    return n;
}

/* Unlinks n wherever it is (a walk: for short or cold lists); returns
 * whether it was there. */
static inline bool ev__lifo_remove(ev__lifo *s, ev__link *n)
{
    for (ev__link **p = &s->top; *p; p = &(*p)->next) {
        if (*p == n) {
            *p = n->next;
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------ fifo */

/* A queue: head is the oldest node, tail the newest; both NULL when empty,
 * and tail->next is NULL. */
typedef struct ev__fifo {
    ev__link *head;
    ev__link *tail;
} ev__fifo;

static inline bool ev__fifo_empty(const ev__fifo *q)
{
    return q->head == NULL;
}

/* Appends n at the tail. */
static inline void ev__fifo_push(ev__fifo *q, ev__link *n)
{
    n->next = NULL;
    if (q->tail) {
        q->tail->next = n;
    } else {
        q->head = n;
    }
    q->tail = n;
}

/* Puts n before the head (a list that grows at its front but must be
 * spliced whole, as ev__atomic_lifo_push_all does, keeps its tail so). */
static inline void ev__fifo_push_front(ev__fifo *q, ev__link *n)
{
    n->next = q->head;
    if (!q->head) {
        q->tail = n;
    }
    q->head = n;
}

/* The head node, left in the queue, or NULL. */
static inline ev__link *ev__fifo_peek(const ev__fifo *q)
{
    return q->head;
}

/* Unlinks and returns the head node, or NULL. */
static inline ev__link *ev__fifo_pop(ev__fifo *q)
{
    ev__link *n = q->head;
    if (n) {
        q->head = n->next;
        if (!q->head) {
            q->tail = NULL;
        }
    }
    return n;
}

/* ----------------------------------------------------------- atomic lifo */

/* A Treiber stack that is only ever emptied whole: with no single pop,
 * there is no ABA problem, and a push is one CAS loop. What a thread wrote
 * into a node before pushing it is visible to the thread that takes it. */
typedef struct ev__atomic_lifo {
    _Atomic(ev__link *) top;
} ev__atomic_lifo;

static inline void ev__atomic_lifo_init(ev__atomic_lifo *s)
{
    atomic_init(&s->top, NULL);
}

/* Pushes the nodes of chain in one step (chain's head ends on top, its order
 * kept) and leaves chain empty. chain must not be empty. */
static inline void ev__atomic_lifo_push_all(ev__atomic_lifo *s, ev__fifo *chain)
{
    ev__link *first = chain->head, *last = chain->tail;
    ev__link *top = atomic_load_explicit(&s->top, memory_order_relaxed);
    do {
        last->next = top;
        /* release: the taker sees the links and the nodes' contents. */
    } while (!atomic_compare_exchange_weak_explicit(&s->top, &top, first, memory_order_release,
                                                    memory_order_relaxed));
    chain->head = chain->tail = NULL;
}

static inline void ev__atomic_lifo_push(ev__atomic_lifo *s, ev__link *n)
{
    ev__link *top = atomic_load_explicit(&s->top, memory_order_relaxed);
    do {
        n->next = top;
        /* release: the taker sees the link and the node's contents. */
    } while (!atomic_compare_exchange_weak_explicit(&s->top, &top, n, memory_order_release,
                                                    memory_order_relaxed));
}

/* Takes every node pushed so far, newest on top, as a plain stack that the
 * caller then owns. */
static inline ev__lifo ev__atomic_lifo_take_all(ev__atomic_lifo *s)
{
    /* acquire: pairs with the pushes' release. */
    return (ev__lifo){atomic_exchange_explicit(&s->top, NULL, memory_order_acquire)};
}

/* A hint, with no ordering: false means that take_all would (very likely)
 * find nothing, so a taker can skip its locked instruction. */
static inline bool ev__atomic_lifo_maybe_nonempty(ev__atomic_lifo *s)
{
    return atomic_load_explicit(&s->top, memory_order_relaxed) != NULL;
}

/* ------------------------------------------------------------------ mpsc */

/* Vyukov's intrusive multi-producer single-consumer queue, in push order.
 * The consumer's end (head) is always a node already taken: the stub at
 * first, then the node popped last, which stays there until the one after
 * it is popped. The consumer never pushes (not even the stub back), so when
 * the queue runs empty the producers' tail line stays with the producers.
 * The ends are separate types, to be placed where their threads want them
 * (on separate cache lines). */
typedef struct ev__mpsc_link {
    _Atomic(struct ev__mpsc_link *) next;
} ev__mpsc_link;

typedef struct ev__mpsc_head {
    _Atomic(ev__mpsc_link *) node; /* touched by the consumer only */
} ev__mpsc_head;

typedef struct ev__mpsc_tail {
    _Atomic(ev__mpsc_link *) node; /* the node pushed last */
} ev__mpsc_tail;

static inline void ev__mpsc_init(ev__mpsc_head *h, ev__mpsc_tail *t, ev__mpsc_link *stub)
{
    atomic_init(&stub->next, NULL);
    atomic_init(&h->node, stub);
    atomic_init(&t->node, stub);
}

/* Any thread. */
static inline void ev__mpsc_push(ev__mpsc_tail *t, ev__mpsc_link *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    /* seq_cst: orders the exchange before the producer's later seq_cst load
     * (of a "consumer sleeps" flag), against the consumer's seq_cst store of
     * that flag and its load of the tail in ev__mpsc_maybe_nonempty. */
    ev__mpsc_link *prev = atomic_exchange_explicit(&t->node, n, memory_order_seq_cst);
    /* release: the consumer that follows the link sees the filled-in node.
     * Until this store, the queue looks empty from the head. */
    atomic_store_explicit(&prev->next, n, memory_order_release);
}

/* The consumer's current head: the node it took last, or the stub. */
static inline ev__mpsc_link *ev__mpsc_head_node(ev__mpsc_head *h)
{
    return atomic_load_explicit(&h->node, memory_order_relaxed);
}

/* The node linked after n, or NULL. acquire: its contents are visible. */
static inline ev__mpsc_link *ev__mpsc_next(ev__mpsc_link *n)
{
    return atomic_load_explicit(&n->next, memory_order_acquire);
}

/* The same without ordering, to prefetch the node only: its contents may
 * not be visible yet. */
static inline ev__mpsc_link *ev__mpsc_next_hint(ev__mpsc_link *n)
{
    return atomic_load_explicit(&n->next, memory_order_relaxed);
}

/* Consumer. The next node, or NULL when none is linked yet. The node it
 * returns becomes the head; *retired receives the head before it (NULL if
 * that was stub), which the queue no longer references. */
static inline ev__mpsc_link *ev__mpsc_pop(ev__mpsc_head *h, const ev__mpsc_link *stub,
                                          ev__mpsc_link **retired)
{
    ev__mpsc_link *head = atomic_load_explicit(&h->node, memory_order_relaxed);
    ev__mpsc_link *next = ev__mpsc_next(head);
    if (!next) {
        return NULL;
    }
    atomic_store_explicit(&h->node, next, memory_order_relaxed);
    *retired = head == stub ? NULL : head;
    return next;
}

/* Consumer. False only if the queue is empty: no node linked after the
 * head, and no push under way (a producer that has exchanged the tail but
 * not yet linked its node makes this true while pop still finds nothing). */
static inline bool ev__mpsc_maybe_nonempty(ev__mpsc_head *h, ev__mpsc_tail *t)
{
    ev__mpsc_link *head = atomic_load_explicit(&h->node, memory_order_relaxed);
    return atomic_load_explicit(&t->node, memory_order_seq_cst) != head ||
           ev__mpsc_next(head) != NULL;
}

#endif
