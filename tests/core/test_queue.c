/* The engine's intrusive lists (src/core/queue.h): order and emptiness of
 * the plain stack and queue, and, with threads, that the atomic stack and
 * the MPSC queue hand every node over exactly once, in order, with what its
 * producer wrote in it visible to the consumer.
 * EV_TEST_CONCURRENCY: also run under TSan. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "core/queue.h"
#include "test.h"

typedef struct item {
    long value;
    ev__link link;
} item;

#define ITEM(l) EV_CONTAINER_OF(l, item, link)

/* ------------------------------------------------------- single thread */

static void test_lifo_order_and_remove(void)
{
    item it[5];
    ev__lifo s = {NULL};
    CHECK(ev__lifo_empty(&s));
    CHECK(ev__lifo_pop(&s) == NULL);
    for (int i = 0; i < 5; i++) {
        it[i].value = i;
        ev__lifo_push(&s, &it[i].link);
    }
    CHECK_EQ(ITEM(ev__lifo_peek(&s))->value, 4);
    CHECK(ev__lifo_remove(&s, &it[2].link)); /* the middle */
    CHECK(ev__lifo_remove(&s, &it[4].link)); /* the top */
    CHECK(ev__lifo_remove(&s, &it[0].link)); /* the bottom */
    CHECK(!ev__lifo_remove(&s, &it[2].link)); /* not there any more */
    CHECK_EQ(ITEM(ev__lifo_pop(&s))->value, 3);
    CHECK_EQ(ITEM(ev__lifo_pop(&s))->value, 1);
    CHECK(ev__lifo_pop(&s) == NULL);
    CHECK(ev__lifo_empty(&s));
}

static void test_fifo_order(void)
{
    item it[6];
    ev__fifo q = {NULL, NULL};
    CHECK(ev__fifo_empty(&q));
    CHECK(ev__fifo_pop(&q) == NULL);
    for (int i = 0; i < 6; i++) {
        it[i].value = i;
    }
    ev__fifo_push(&q, &it[1].link);
    ev__fifo_push(&q, &it[2].link);
    ev__fifo_push_front(&q, &it[0].link);
    CHECK_EQ(ITEM(ev__fifo_peek(&q))->value, 0);
    CHECK_EQ(ITEM(ev__fifo_pop(&q))->value, 0);
    CHECK_EQ(ITEM(ev__fifo_pop(&q))->value, 1);
    CHECK_EQ(ITEM(ev__fifo_pop(&q))->value, 2);
    CHECK(ev__fifo_pop(&q) == NULL);
    CHECK(q.tail == NULL);
    /* Emptied, it works again from either end. */
    ev__fifo_push_front(&q, &it[4].link);
    CHECK(q.tail == &it[4].link);
    ev__fifo_push(&q, &it[5].link);
    ev__fifo_push_front(&q, &it[3].link);
    CHECK(q.tail == &it[5].link && it[5].link.next == NULL);
    for (int v = 3; v <= 5; v++) {
        CHECK_EQ(ITEM(ev__fifo_pop(&q))->value, v);
    }
    CHECK(ev__fifo_empty(&q));
}

static void test_atomic_lifo_take_all(void)
{
    item it[5];
    ev__atomic_lifo s;
    ev__atomic_lifo_init(&s);
    CHECK(!ev__atomic_lifo_maybe_nonempty(&s));
    ev__lifo none = ev__atomic_lifo_take_all(&s);
    CHECK(ev__lifo_empty(&none));
    for (int i = 0; i < 5; i++) {
        it[i].value = i;
    }
    ev__atomic_lifo_push(&s, &it[0].link);
    /* A chain keeps its order: built at its front, newest first. */
    ev__fifo chain = {NULL, NULL};
    for (int i = 1; i <= 3; i++) {
        ev__fifo_push_front(&chain, &it[i].link);
    }
    ev__atomic_lifo_push_all(&s, &chain);
    CHECK(ev__fifo_empty(&chain) && chain.tail == NULL);
    ev__atomic_lifo_push(&s, &it[4].link);
    CHECK(ev__atomic_lifo_maybe_nonempty(&s));
    ev__lifo taken = ev__atomic_lifo_take_all(&s);
    CHECK(!ev__atomic_lifo_maybe_nonempty(&s));
    for (int v = 4; v >= 0; v--) {
        ev__link *l = ev__lifo_pop(&taken);
        CHECK(l != NULL);
        CHECK_EQ(ITEM(l)->value, v);
    }
    CHECK(ev__lifo_empty(&taken));
}

static void test_mpsc_single_thread(void)
{
    ev__mpsc_head h;
    ev__mpsc_tail t;
    ev__mpsc_link stub, n[3];
    ev__mpsc_init(&h, &t, &stub);
    ev__mpsc_link *retired = &stub;
    CHECK(!ev__mpsc_maybe_nonempty(&h, &t));
    CHECK(ev__mpsc_pop(&h, &stub, &retired) == NULL);
    CHECK(retired == &stub); /* untouched when nothing is popped */
    for (int i = 0; i < 3; i++) {
        ev__mpsc_push(&t, &n[i]);
    }
    CHECK(ev__mpsc_maybe_nonempty(&h, &t));
    CHECK(ev__mpsc_next_hint(&n[0]) == &n[1]);
    CHECK(ev__mpsc_pop(&h, &stub, &retired) == &n[0]);
    CHECK(retired == NULL); /* the stub is never handed out */
    CHECK(ev__mpsc_pop(&h, &stub, &retired) == &n[1]);
    CHECK(retired == &n[0]);
    CHECK(ev__mpsc_pop(&h, &stub, &retired) == &n[2]);
    CHECK(retired == &n[1]);
    /* n[2] stays as the head until another node comes. */
    CHECK(ev__mpsc_head_node(&h) == &n[2]);
    CHECK(!ev__mpsc_maybe_nonempty(&h, &t));
    CHECK(ev__mpsc_pop(&h, &stub, &retired) == NULL);
    ev__mpsc_push(&t, &n[0]); /* a retired node may come again */
    CHECK(ev__mpsc_pop(&h, &stub, &retired) == &n[0]);
    CHECK(retired == &n[2]);
}

/* ------------------------------------------------------------ threads */

enum { PRODUCERS = 3, CHAIN = 4 };

typedef struct node {
    ev__link link;          /* atomic stack */
    ev__mpsc_link qlink;    /* mpsc queue */
    uint32_t producer;
    long seq;               /* 0, 1, ... per producer */
    long payload;           /* written plainly before the push */
    int seen;               /* consumer only */
} node;

typedef struct shared {
    long per_producer;
    node *nodes[PRODUCERS];
    ev__atomic_lifo stack;
    ev__mpsc_head head;
    ev__mpsc_tail tail;
    ev__mpsc_link stub;
    uint32_t id_next;
    pthread_mutex_t id_lock;
} shared;

static long payload_of(uint32_t p, long seq)
{
    return (long)p * 1000003 + seq * 7 + 1;
}

static uint32_t take_id(shared *sh)
{
    pthread_mutex_lock(&sh->id_lock);
    uint32_t id = sh->id_next++;
    pthread_mutex_unlock(&sh->id_lock);
    return id;
}

static void fill(node *n, uint32_t p, long seq)
{
    n->producer = p;
    n->seq = seq;
    n->payload = payload_of(p, seq);
    n->seen = 0;
}

/* Pushes singly and in chains built at their front (as the worker batches
 * finished instructions), so each take holds every producer's nodes newest
 * first. */
static void *stack_producer(void *arg)
{
    shared *sh = arg;
    uint32_t p = take_id(sh);
    node *mine = sh->nodes[p];
    long i = 0;
    while (i < sh->per_producer) {
        if (i % 3 == 0 && i + CHAIN <= sh->per_producer) {
            ev__fifo chain = {NULL, NULL};
            for (int k = 0; k < CHAIN; k++, i++) {
                fill(&mine[i], p, i);
                ev__fifo_push_front(&chain, &mine[i].link);
            }
            ev__atomic_lifo_push_all(&sh->stack, &chain);
        } else {
            fill(&mine[i], p, i);
            ev__atomic_lifo_push(&sh->stack, &mine[i].link);
            i++;
        }
    }
    return NULL;
}

static void *mpsc_producer(void *arg)
{
    shared *sh = arg;
    uint32_t p = take_id(sh);
    for (long i = 0; i < sh->per_producer; i++) {
        fill(&sh->nodes[p][i], p, i);
        ev__mpsc_push(&sh->tail, &sh->nodes[p][i].qlink);
    }
    return NULL;
}

static void shared_init(shared *sh, long per_producer)
{
    memset(sh, 0, sizeof *sh);
    sh->per_producer = per_producer;
    for (int p = 0; p < PRODUCERS; p++) {
        sh->nodes[p] = calloc((size_t)per_producer, sizeof(node));
        CHECK(sh->nodes[p] != NULL);
    }
    ev__atomic_lifo_init(&sh->stack);
    ev__mpsc_init(&sh->head, &sh->tail, &sh->stub);
    pthread_mutex_init(&sh->id_lock, NULL);
}

static void shared_fini(shared *sh)
{
    for (int p = 0; p < PRODUCERS; p++) {
        for (long i = 0; i < sh->per_producer; i++) {
            CHECK_EQ(sh->nodes[p][i].seen, 1);
        }
        free(sh->nodes[p]);
    }
    pthread_mutex_destroy(&sh->id_lock);
}

static void check_node(const node *n)
{
    CHECK_LT(n->producer, PRODUCERS);
    CHECK_EQ(n->payload, payload_of(n->producer, n->seq));
    CHECK_EQ(n->seen, 0);
}

static void test_atomic_lifo_threads(void)
{
    shared sh;
    shared_init(&sh, ev_test_scaled(200000));
    pthread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        CHECK_EQ(pthread_create(&th[p], NULL, stack_producer, &sh), 0);
    }
    long total = 0, takes = 0;
    while (total < PRODUCERS * sh.per_producer) {
        if (!ev__atomic_lifo_maybe_nonempty(&sh.stack)) {
            sched_yield();
            continue;
        }
        ev__lifo taken = ev__atomic_lifo_take_all(&sh.stack);
        long last[PRODUCERS];
        for (int p = 0; p < PRODUCERS; p++) {
            last[p] = sh.per_producer;
        }
        ev__link *l;
        while ((l = ev__lifo_pop(&taken))) {
            node *n = EV_CONTAINER_OF(l, node, link);
            check_node(n);
            /* Newest on top: each producer's seqs go down within a take. */
            CHECK_LT(n->seq, last[n->producer]);
            last[n->producer] = n->seq;
            n->seen = 1;
            total++;
        }
        takes++;
    }
    for (int p = 0; p < PRODUCERS; p++) {
        pthread_join(th[p], NULL);
    }
    CHECK_EQ(total, PRODUCERS * sh.per_producer);
    CHECK(!ev__atomic_lifo_maybe_nonempty(&sh.stack));
    CHECK_GE(takes, 1);
    shared_fini(&sh);
}

static void test_mpsc_threads(void)
{
    shared sh;
    shared_init(&sh, ev_test_scaled(200000));
    pthread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        CHECK_EQ(pthread_create(&th[p], NULL, mpsc_producer, &sh), 0);
    }
    long next_seq[PRODUCERS] = {0};
    long total = 0;
    node *prev = NULL;
    while (total < PRODUCERS * sh.per_producer) {
        ev__mpsc_link *retired = &sh.stub;
        ev__mpsc_link *l = ev__mpsc_pop(&sh.head, &sh.stub, &retired);
        if (!l) {
            sched_yield();
            continue;
        }
        node *n = EV_CONTAINER_OF(l, node, qlink);
        check_node(n);
        /* Each producer's nodes come in the order it pushed them. */
        CHECK_EQ(n->seq, next_seq[n->producer]);
        next_seq[n->producer]++;
        /* The node popped before is handed back now, and only now. */
        CHECK(retired == (prev ? &prev->qlink : NULL));
        n->seen = 1;
        prev = n;
        total++;
    }
    for (int p = 0; p < PRODUCERS; p++) {
        pthread_join(th[p], NULL);
    }
    ev__mpsc_link *retired = NULL;
    CHECK(ev__mpsc_pop(&sh.head, &sh.stub, &retired) == NULL);
    CHECK(!ev__mpsc_maybe_nonempty(&sh.head, &sh.tail));
    CHECK(ev__mpsc_head_node(&sh.head) == &prev->qlink);
    shared_fini(&sh);
}

int main(void)
{
    RUN_TEST(test_lifo_order_and_remove);
    RUN_TEST(test_fifo_order);
    RUN_TEST(test_atomic_lifo_take_all);
    RUN_TEST(test_mpsc_single_thread);
    RUN_TEST(test_atomic_lifo_threads);
    RUN_TEST(test_mpsc_threads);
    fprintf(stderr, "all passed\n");
    return 0;
}
