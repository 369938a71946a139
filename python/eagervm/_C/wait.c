/* Sync points: waits for a tensor or for everything with the GIL released,
 * interruptible by Ctrl-C, raising kernel failures as Python exceptions.
 *
 * The engine's ev_wait_obj has no timeout, and only the main thread receives
 * KeyboardInterrupt. So the main thread hands an object wait to a small pool
 * of waiter threads and sleeps on its own condition variable in slices,
 * checking signals (with the GIL) between slices; on Ctrl-C it abandons the
 * request, which the waiter finishes and frees later. Other Python threads
 * cannot receive KeyboardInterrupt and wait on the engine directly. When the
 * runtime has nothing in flight no wait is needed at all (the fast path).
 * A C API ev_wait_obj_timeout would remove the pool (see the report).
 *
 * Lock order: pool.lock, then a request's lock; never both with the GIL
 * released by anyone but their holder. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "evpy.h"

/* How long the main thread sleeps between two checks for Ctrl-C. */
#define SLICE_MS 20
/* Waiter threads beyond this are not started: requests then queue. */
#define MAX_WAITERS 64

/* One object wait. Owned by two references: the requester and the waiter;
 * the last to let go frees it. `t` is a tensor reference that keeps the
 * object alive until the waiter is done. */
typedef struct wait_req {
    struct wait_req *next; /* in pool.queue; guarded by pool.lock */
    ev_vm *vm;
    ev_tensor *t;          /* owned */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;              /* guarded by lock */
    int refs;              /* guarded by lock */
    ev_error *err;         /* owned; set by the waiter */
} wait_req;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* work for idle waiters */
    wait_req *head, *tail;
    int idle;
    int started;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0};

static unsigned long main_ident;
static int main_ident_set;

static void req_unref(wait_req *r)
{
    pthread_mutex_lock(&r->lock);
    int left = --r->refs;
    pthread_mutex_unlock(&r->lock);
    if (left == 0) {
        ev_tensor_unref(r->t);
        ev_error_unref(r->err);
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->cond);
        free(r);
    }
}

static void *waiter_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&pool.lock);
        while (!pool.head) {
            /* Parked waiters cost nothing (DESIGN rule 7). */
            pool.idle++;
            pthread_cond_wait(&pool.cond, &pool.lock);
            pool.idle--;
        }
        wait_req *r = pool.head;
        pool.head = r->next;
        if (!pool.head) {
            pool.tail = NULL;
        }
        pthread_mutex_unlock(&pool.lock);

        ev_error *err = NULL;
        ev_wait_obj(r->vm, ev_tensor_obj(r->t), &err);
        pthread_mutex_lock(&r->lock);
        r->err = err;
        r->done = 1;
        pthread_cond_signal(&r->cond);
        pthread_mutex_unlock(&r->lock);
        req_unref(r);
    }
    return NULL;
}

/* Queues r (the pool takes one reference); 0, or -1 if no waiter exists and
 * none could be started. */
static int pool_push(wait_req *r)
{
    pthread_mutex_lock(&pool.lock);
    if (pool.idle == 0 && pool.started < MAX_WAITERS) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* A waiter only calls into the engine: a small stack is plenty. */
        pthread_attr_setstacksize(&attr, 256 * 1024);
        if (pthread_create(&th, &attr, waiter_main, NULL) == 0) {
            pool.started++;
        }
        pthread_attr_destroy(&attr);
    }
    if (pool.started == 0) {
        pthread_mutex_unlock(&pool.lock);
        return -1;
    }
    r->next = NULL;
    if (pool.tail) {
        pool.tail->next = r;
    } else {
        pool.head = r;
    }
    pool.tail = r;
    pthread_cond_signal(&pool.cond);
    pthread_mutex_unlock(&pool.lock);
    return 0;
}

void evpy_wait_atfork_prepare(void)
{
    pthread_mutex_lock(&pool.lock);
}

void evpy_wait_atfork_parent(void)
{
    pthread_mutex_unlock(&pool.lock);
}

void evpy_wait_atfork_child(void)
{
    /* The waiters did not survive the fork; their requests are leaked. The
     * forking thread is the child's main thread. */
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.cond, NULL);
    pool.head = pool.tail = NULL;
    pool.idle = 0;
    pool.started = 0;
    main_ident = PyThread_get_thread_ident();
    main_ident_set = 1;
}

static int is_main_thread(void)
{
    if (!main_ident_set) {
        PyObject *threading = PyImport_ImportModule("threading");
        PyObject *mt = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
        PyObject *ident = mt ? PyObject_GetAttrString(mt, "ident") : NULL;
        if (ident && PyLong_Check(ident)) {
            main_ident = PyLong_AsUnsignedLong(ident);
            main_ident_set = 1;
        }
        Py_XDECREF(ident);
        Py_XDECREF(mt);
        Py_XDECREF(threading);
        PyErr_Clear();
        if (!main_ident_set) {
            return 0;
        }
    }
    return PyThread_get_thread_ident() == main_ident;
}

/* Nothing issued is unfinished: every object is ready. */
static int runtime_idle(ev_vm *vm)
{
    ev_vm_stats s;
    ev_vm_get_stats(vm, &s);
    return s.pending == 0;
}

static void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += ts->tv_nsec / 1000000000L;
        ts->tv_nsec %= 1000000000L;
    }
}

int evpy_wait_tensor(ev_tensor *t)
{
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return -1;
    }
    ev_error *err = NULL;
    if (runtime_idle(vm) || !is_main_thread()) {
        /* Ready already (no block), or a thread Ctrl-C cannot reach. */
        Py_BEGIN_ALLOW_THREADS
        ev_wait_obj(vm, ev_tensor_obj(t), &err);
        Py_END_ALLOW_THREADS
        if (err) {
            evpy_raise_error(err);
            return -1;
        }
        return 0;
    }
    wait_req *r = calloc(1, sizeof *r);
    if (!r) {
        PyErr_NoMemory();
        return -1;
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->vm = vm;
    r->t = ev_tensor_ref(t);
    r->refs = 2;
    if (pool_push(r) != 0) {
        /* No waiter thread: wait here, uninterruptibly rather than not at all. */
        r->refs = 1;
        req_unref(r);
        Py_BEGIN_ALLOW_THREADS
        ev_wait_obj(vm, ev_tensor_obj(t), &err);
        Py_END_ALLOW_THREADS
        return err ? (evpy_raise_error(err), -1) : 0;
    }
    for (;;) {
        int done;
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts;
        deadline_in(&ts, SLICE_MS);
        pthread_mutex_lock(&r->lock);
        while (!r->done) {
            if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) == ETIMEDOUT) {
                break;
            }
        }
        done = r->done;
        if (done) {
            err = r->err;
            r->err = NULL;
        }
        pthread_mutex_unlock(&r->lock);
        Py_END_ALLOW_THREADS
        if (done) {
            break;
        }
        if (PyErr_CheckSignals() != 0) {
            req_unref(r); /* the waiter frees it when the object is ready */
            return -1;
        }
    }
    req_unref(r);
    if (err) {
        evpy_raise_error(err);
        return -1;
    }
    return 0;
}

int evpy_synchronize(void)
{
    ev_vm *vm = evpy_vm();
    if (!vm) {
        return -1;
    }
    int main = is_main_thread();
    ev_error *err = NULL;
    for (;;) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = ev_synchronize_timeout(vm, main ? SLICE_MS : UINT32_MAX, &err);
        Py_END_ALLOW_THREADS
        if (rc != EV_ETIMEDOUT) {
            break;
        }
        if (PyErr_CheckSignals() != 0) {
            return -1;
        }
    }
    if (evpy_stashed_error) {
        /* Taken by a fork-time drain before any later failure. */
        ev_error *stashed = evpy_stashed_error;
        evpy_stashed_error = NULL;
        ev_error_unref(err);
        err = stashed;
    }
    if (err) {
        evpy_raise_error(err);
        return -1;
    }
    return 0;
}
