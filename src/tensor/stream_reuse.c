/* Stream-ordered reuse of storage memory, as cudaFreeAsync does for a CUDA
 * stream. A storage whose last tensor goes while instructions still use it
 * is normally freed when they finish. But when all of them run on one
 * stream, an op issued later on that stream runs after them anyway: its
 * output may take the block now. A chain `y = y + x` on large tensors then
 * cycles through two blocks that stay in the CPU caches, instead of taking
 * fresh memory for every op issued ahead of the worker.
 *
 * The parked storages form one process-wide list, newest first. A storage
 * leaves it when its block is taken or when its release runs (the block
 * then goes to the allocator's cache as usual). Lock order: the reuse lock
 * is a leaf, like the allocator's. */
#include <pthread.h>

#include "tensor/tensor-impl.h"

/* How many parked storages a take looks at: the newest fit best (their
 * memory is the most recently touched), and the list is short in practice. */
#define TAKE_SCAN 16

static pthread_mutex_t reuse_lock = PTHREAD_MUTEX_INITIALIZER;
/* Written under reuse_lock, read there and by the unlocked peek in
 * ev__reuse_take; every access is an __atomic one, so the peek is no data
 * race. All relaxed: the lock orders what the list links to (the storages'
 * fields), and the peek only decides whether taking the lock may pay. */
static ev__storage *parked_head;

static ev__storage *head_get(void)
{
    return __atomic_load_n(&parked_head, __ATOMIC_RELAXED); /* see parked_head */
}

static void head_set(ev__storage *s)
{
    __atomic_store_n(&parked_head, s, __ATOMIC_RELAXED); /* see parked_head */
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&reuse_lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&reuse_lock);
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

static void unlink_parked(ev__storage *s)
{
    if (s->park_prev) {
        s->park_prev->park_next = s->park_next;
    } else {
        head_set(s->park_next);
    }
    if (s->park_next) {
        s->park_next->park_prev = s->park_prev;
    }
    s->parked = false;
}

int ev__reuse_park(ev__storage *s)
{
    if (!s->block || s->block->size < EV__REUSE_MIN) {
        return 0;
    }
    uint32_t uid;
    if (ev_obj_pending_uid(s->vm, s->obj, &uid) != 1) {
        return 0; /* finished (the cache takes it now) or used on several streams */
    }
    s->park_uid = uid;
    s->was_parked = true;
    pthread_mutex_lock(&reuse_lock);
    s->parked = true;
    s->park_prev = NULL;
    s->park_next = head_get();
    if (s->park_next) {
        s->park_next->park_prev = s;
    }
    head_set(s);
    pthread_mutex_unlock(&reuse_lock);
    return 1;
}

ev__block *ev__reuse_take(ev_vm *vm, uint32_t uid, size_t nbytes)
{
    /* An unlocked peek: a take that misses a storage parked this instant
     * only allocates as it would have without reuse. */
    if (!head_get()) {
        return NULL;
    }
    ev__block *b = NULL;
    pthread_mutex_lock(&reuse_lock);
    int n = 0;
    for (ev__storage *s = head_get(); s && n < TAKE_SCAN; s = s->park_next, n++) {
        if (s->vm == vm && s->park_uid == uid && ev__block_fits(s->block, nbytes)) {
            unlink_parked(s);
            b = s->block;
            s->block = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&reuse_lock);
    if (b) {
        ev__alloc_count_reuse(b);
    }
    return b;
}

ev__block *ev__reuse_unpark(ev__storage *s)
{
    pthread_mutex_lock(&reuse_lock);
    if (s->parked) {
        unlink_parked(s);
    }
    ev__block *b = s->block;
    s->block = NULL;
    pthread_mutex_unlock(&reuse_lock);
    return b;
}
