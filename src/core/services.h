/* The engine's services to the layers above it (src/tensor, src/ops):
 * assertions, allocation through the fault-injection gate, per-thread struct
 * caches, deferred frees, per-thread messages, the clock and parking. Only
 * what those layers use: the engine's structures stay in internal.h (which
 * includes this file), so the engine can change them without the layers
 * above compiling against them. Never installed. */
#ifndef EV_CORE_SERVICES_H
#define EV_CORE_SERVICES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eagervm/vm.h"

/* ------------------------------------------------------------- assertions */

/* Cheap internal invariants, always on. Never used on user input. */
#define EV_ASSERT(cond)                                                        \
    do {                                                                       \
        if (!(cond)) {                                                         \
            ev__assert_fail(#cond, __FILE__, __LINE__);                        \
        }                                                                      \
    } while (0)

void ev__assert_fail(const char *cond, const char *file, int line) __attribute__((noreturn));

/* Small per-thread variables read on every op. In a shared library (the
 * Python module is one, loaded with dlopen) the default TLS model calls
 * __tls_get_addr on each access; initial-exec is a plain load. It takes a
 * few bytes of the static TLS surplus glibc keeps for dlopened libraries,
 * so keep it to small variables. */
#define EV_TLS_FAST _Thread_local __attribute__((tls_model("initial-exec")))

/* ------------------------------------------------------ memory + messages */

/* Every internal allocation goes through these (internal.h has the rest of
 * the family), so tests can make the Nth allocation fail
 * (ev__fail_alloc_after) and walk each error path. */
void *ev__malloc(size_t size);
void *ev__calloc(size_t n, size_t size);
/* Aligned allocation, released with ev__free. */
void *ev__aligned_malloc(size_t align, size_t size);
void ev__free(void *p);

/* Per-thread caches of fixed-size structs that come and go with every op
 * (tensors, storages, objects). A struct is usually freed on the submitting
 * thread (see ev__call_deferred) and reused there at once; glibc's own cache
 * holds too few of each size for a burst. Counted by fault injection. */
enum ev__cache_kind {
    EV__CACHE_OBJ,
    EV__CACHE_TENSOR,
    EV__CACHE_STORAGE,
    /* Two kinds for the layers above, whose structs also come and go with
     * every op (autograd: graph nodes and tensors' states). */
    EV__CACHE_UPPER_A,
    EV__CACHE_UPPER_B,
    EV__CACHE_COUNT
};
/* size must be the same for every call with one kind. */
void *ev__cache_alloc(int kind, size_t size);
void ev__cache_free(int kind, void *p);

/* Calls fn(p) now, or, on a worker thread of vm, on the next thread that
 * submits to or waits on vm (which usually allocated p, and reuses it from
 * its own cache at once). */
void ev__call_deferred(ev_vm *vm, void (*fn)(void *p), void *p);

/* Whether the calling thread is a worker thread of some runtime. */
bool ev__on_worker_thread(void);

/* Records the calling thread's message for ev_last_message(); returns code. */
int ev__set_message(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic clock in nanoseconds. */
int64_t ev__now_ns(void);

/* -------------------------------------------------------------- parking */

/* Sleeps while *word == expected (futex). Spurious wakeups are possible. */
void ev__park(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns);
void ev__wake_all(_Atomic uint32_t *word);
void ev__wake_one(_Atomic uint32_t *word);

static inline void ev__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ------------------------------------------------------------ the lock */

/* A lock whose release is a plain store. pthread_mutex_unlock is a locked
 * instruction, which waits until every store before it has reached the
 * cache: after a submit, that includes the link the worker is polling,
 * whose line must first be taken back from the worker's core. A plain
 * store lets that transfer finish while the submitting thread goes on.
 * The price: an unlock can miss a waiter that is just going to sleep, so
 * waiters sleep at most 1 ms at a time (contention is rare: submitting
 * threads hold the lock for a few hundred nanoseconds, and a tensor's
 * autograd state is locked about as briefly). */
typedef struct ev__lock {
    _Atomic uint32_t state;   /* 0 free, 1 held; futex word */
    _Atomic uint32_t waiters; /* threads in ev__lock_slow's sleep loop */
} ev__lock;

void ev__lock_slow(ev__lock *l);

static inline void ev__lock_acquire(ev__lock *l)
{
    uint32_t free_state = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &free_state, 1,
                                                 memory_order_acquire, memory_order_relaxed)) {
        ev__lock_slow(l);
    }
}

static inline void ev__lock_release(ev__lock *l)
{
    atomic_store_explicit(&l->state, 0, memory_order_release);
    if (atomic_load_explicit(&l->waiters, memory_order_relaxed)) {
        ev__wake_one(&l->state);
    }
}

/* ------------------------------------------------- per-runtime extensions */

/* State a layer above keeps per runtime, which the engine holds without
 * knowing what it is (the tensor layer's intra-op pool). */
enum ev__vm_ext_slot { EV__EXT_INTRAOP, EV__EXT_COUNT };

/* The runtime whose worker the calling thread is, or NULL on other threads. */
ev_vm *ev__current_vm(void);

/* The state in vm's slot, or NULL before ev__vm_ext_install. Anything the
 * installer wrote to it before installing is visible. */
void *ev__vm_ext(ev_vm *vm, int slot);

/* Installs p in vm's slot unless one is there already; returns what the
 * slot holds after the call (p, or the state a racing caller installed:
 * then the caller frees its own p). ev_vm_destroy calls destroy(p) after
 * every worker of vm has stopped, so no kernel uses p then. */
void *ev__vm_ext_install(ev_vm *vm, int slot, void *p, void (*destroy)(void *p));

/* Workers of vm running a kernel now (not idle, not waiting for a producer
 * on another worker): a snapshot read without locks, for policies that
 * share the cores between busy workers. */
int ev__vm_busy_workers(ev_vm *vm);

#endif
