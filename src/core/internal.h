/* Internal contracts of the engine (src/core): the structures shared by its
 * files, and the services the layers above do not use. Never installed. */
#ifndef EV_CORE_INTERNAL_H
#define EV_CORE_INTERNAL_H

/* The engine's own files define EV_ENGINE_INTERNALS first; the layers above
 * include core/services.h, so the engine's internals can change without
 * them compiling against these structures. */
#ifndef EV_ENGINE_INTERNALS
#error "core/internal.h is for src/core only: include core/services.h"
#endif

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "core/queue.h"
#include "core/services.h"
#include "eagervm/vm.h"

#define EV_CACHELINE 64
#define EV_UNUSED(x) ((void)(x))

/* ------------------------------------------------------ memory + messages */

/* The rest of the allocation gate (services.h has malloc, calloc, aligned
 * malloc, free). */
void *ev__realloc(void *p, size_t size);

/* ev__cache_free of an object, shaped for ev__call_deferred. */
void ev__cache_free_obj(void *p);

/* Test hook: the allocation after `n` more successful ones fails (and every
 * one after that, until reset with n < 0). Exported for tests only. */
EV_API void ev__fail_alloc_after(long n);

/* Work handed from a worker to the next submitting thread (see
 * ev__call_deferred): frees of memory the submitting thread allocated (it
 * reuses it from its own cache at once, and no allocator lock is
 * contended). Calls are collected by value in batches, so neither side
 * touches the memory being freed on the way: each touch would be a cache
 * miss on a line the other core wrote last. */
#define EV__DEFER_BATCH 62

typedef struct ev__defer_batch {
    ev__link link;                /* on vm->deferred or vm->defer_spares */
    uint32_t n;
    struct {
        void (*fn)(void *p);
        void *p;
    } calls[EV__DEFER_BATCH];
} ev__defer_batch;

/* Runs every deferred call handed over so far. */
void ev__run_deferred(ev_vm *vm);
/* Hands the calling worker's partial batch over (before it idles). */
struct ev_worker;
void ev__flush_deferred(struct ev_worker *w);
void ev__free_defer_spares(ev_vm *vm);

/* The profiler's clock: raw ticks, cheap to read (the time-stamp counter on
 * x86-64, which Linux itself uses as its clock source where it is invariant;
 * nanoseconds elsewhere). Profile records are stamped in ticks and converted
 * to CLOCK_MONOTONIC nanoseconds when they are taken (profile.c). */
static inline int64_t ev__prof_ticks(void)
{
#if defined(__x86_64__)
    return (int64_t)__builtin_ia32_rdtsc();
#else
    return ev__now_ns();
#endif
}

/* ---------------------------------------------------------------- errors */

struct ev_error {
    _Atomic int refs;
    _Atomic int reported;   /* set once a wait has handed it to its caller */
    int code;
    const char *name;       /* borrowed (static) */
    const ev_site *site;    /* borrowed (see ev_site) */
    uint32_t thread_uid;
    uint8_t stream_type;
    uint64_t seq;
    ev__link unreported_link; /* on vm->unreported; guarded by vm->err_lock */
    bool listed;            /* on that list; guarded by vm->err_lock */
    char message[];         /* owned, inline */
};

ev_error *ev__error_new(int code, const char *message, const char *name, const ev_site *site,
                        uint32_t uid, uint8_t stream_type, uint64_t seq);

/* ------------------------------------------------------------- structures */

/* (worker, seq) pairs an instruction must see finished before it runs. */
typedef struct ev_dep {
    uint32_t uid;
    uint64_t seq;
} ev_dep;

#define EV_INLINE_DEPS 4

/* Laid out in the order the submitter writes and the worker reads it, so
 * that an instruction touches as few cache lines as it can (each line is a
 * transfer between cores): line 0, then the small fields, the operands in
 * use, and the argument right after them; the dependency array, empty for
 * work on one stream, comes last. */
typedef struct ev_instr ev_instr;
struct ev_instr {
    /* line 0 */
    _Alignas(EV_CACHELINE) ev__mpsc_link queue_link; /* on its worker's queue */
    ev__link free_link;         /* on vm->free_instrs or a worker's returned lists */
    ev_kernel_fn kernel;
    void *arg;                  /* points at inline_arg or an owned heap copy */
    void (*arg_drop)(void *arg);
    const char *name;
    uint64_t seq;               /* position on its worker's queue */
    ev_operand *operands;       /* inline_operands or owned heap array */
    /* line 1 on */
    ev_dep *deps;               /* inline_deps or owned heap array */
    uint16_t n_operands;
    uint16_t n_deps;
    uint32_t flags;
    const ev_site *site;        /* read only on failure or when profiling */
    ev_stream stream;
    int64_t issue_ns;
    ev_operand inline_operands[EV_INLINE_OPERANDS];
    _Alignas(16) unsigned char inline_arg[EV_INLINE_ARG_SIZE];
    ev_dep inline_deps[EV_INLINE_DEPS];
    /* Read only on lanes that complete later (see ev_kctx_complete_later). */
    ev_poll_fn poll;            /* set while the instruction is pending */
    void *poll_state;
    int64_t start_ticks, end_ticks; /* profiling, when the finish is deferred */
    int status;                 /* 0 ok, 1 failed, 2 skipped (for the profile) */
};

enum {
    EV_INSTR_ALWAYS_RUN = 1u << 0, /* release callbacks run even on poison */
    EV_INSTR_PROFILE = 1u << 1,
    EV_INSTR_RELEASE = 1u << 2,    /* frees operands[0].obj after running */
    /* On its worker's in-flight list: its kernel ran, but it has not
     * finished (it completes later, or one issued before it does). */
    EV_INSTR_INFLIGHT = 1u << 3,
    EV_INSTR_PENDING = 1u << 4,    /* its completion has not been seen yet */
    EV_INSTR_RETIRED = 1u << 5,    /* the queue let go of it while in flight */
};

/* A lane is what one worker (OS thread) runs: on the cpu, a thread uid's
 * compute stream, or one of its streams of another type. Lanes 0..limit are
 * the compute streams, so ev_dep.uid of compute work is its thread uid. */
static inline uint32_t ev__lane_of(uint32_t limit, ev_stream s)
{
    return (uint32_t)s.type * (limit + 1) + s.thread_uid;
}

static inline uint32_t ev__lane_uid(uint32_t limit, uint32_t lane)
{
    return lane % (limit + 1);
}

static inline uint8_t ev__lane_type(uint32_t limit, uint32_t lane)
{
    return (uint8_t)(lane / (limit + 1));
}

static inline ev_stream ev__lane_stream(uint32_t limit, uint32_t lane)
{
    ev_stream s = {EV_DEVICE_CPU, 0, ev__lane_type(limit, lane), 0, ev__lane_uid(limit, lane)};
    return s;
}

/* Lanes of streams other than compute may complete instructions after their
 * kernels return; their own order then no longer implies completion. */
static inline bool ev__lane_completes_later(uint32_t limit, uint32_t lane)
{
    return lane > limit;
}

/* Readers of one object since its last write, by worker: the highest seq is
 * enough because a worker finishes its queue in order. */
#define EV_INLINE_READERS 4

struct ev_obj {
    /* All fields but `poison` are guarded by vm->submit_lock. The first
     * line holds what ev_obj_create writes, the second the first readers:
     * an op's output, read once, touches 2 lines (objects are line-aligned,
     * ev__cache_alloc). */
    ev_dep last_writer;            /* seq 0 = none */
    uint32_t n_readers;
    uint32_t more_cap;
    ev_dep *more_readers;          /* owned; worker-indexed, lazily allocated */
    _Atomic(ev_error *) poison;    /* owned reference; first error wins */
    ev_free_fn free_fn;            /* set at release */
    void *free_data;
    /* Released while its unfinished accesses all run on one worker: on that
     * worker's released list until they finish (guarded by submit_lock). */
    ev__link released_link;
    uint64_t released_seq;         /* the last of those accesses; set with the link */
    ev_dep readers[EV_INLINE_READERS];
};
_Static_assert(offsetof(struct ev_obj, released_seq) == 64, "what creating an object writes is one line");

typedef struct ev_worker {
    /* Consumer side: touched by the worker thread. */
    _Alignas(EV_CACHELINE) _Atomic uint64_t completed; /* highest finished seq */
    _Atomic uint32_t done_epoch;    /* futex word for waiters */
    _Atomic uint32_t n_waiters;
    _Atomic uint64_t wake_at;       /* smallest seq a parked waiter waits for */
    _Atomic int cpu;                /* where the worker last ran an instruction */
    _Atomic int waiter_cpu;         /* where a thread last began to wait for it */

    _Alignas(EV_CACHELINE) ev__mpsc_head head; /* the queue's consumer end */
    ev__fifo returned_local;         /* finished instrs, batched before publishing */
    int64_t moved_ns;                /* when the worker last moved off a shared CPU */
    uint32_t returned_count;
    ev__defer_batch *defer_fill;     /* owned; deferred calls being collected */
    uint64_t *seen_done;             /* owned; [uid] = a completed seq seen there */
    /* What the worker is doing, for stall reports. */
    _Atomic(const char *) running_name;
    /* 1 while a kernel runs (ev__vm_busy_workers); a hint, relaxed. */
    _Atomic bool in_kernel;
    _Atomic uint64_t running_seq;
    _Atomic uint32_t waiting_uid;
    _Atomic uint64_t waiting_seq;   /* 0 = not waiting on a dependency */
    ev__lifo prof;                  /* owned chunks of records (profile.c) */
    /* Instructions whose kernel ran but which have not finished, in seq
     * order (lanes that complete later only; worker thread only). */
    ev__fifo inflight;
    _Atomic uint32_t n_inflight;    /* its length, for stall reports (relaxed) */
    int64_t idle_since;             /* when polling them last made progress */
    pthread_mutex_t prof_lock;      /* guards prof against ev_vm_profile_take */
    struct {
        uint64_t seq;               /* the failed or skipped instruction */
        ev_error *err;              /* owned reference */
    } recent_errors[1024];          /* ring, indexed by failure count */
    uint64_t n_recent_errors;
    pthread_mutex_t recent_lock;
    /* Owned reference to a record made at start (code EV_ENOMEM, fixed
     * text) that stands in for a kernel failure whose own record cannot be
     * allocated, so its outputs are still poisoned and it is still reported. */
    ev_error *oom_error;

    /* Producer side: guarded by vm->submit_lock. */
    _Alignas(EV_CACHELINE) ev__mpsc_tail tail; /* the queue's producer end */
    _Atomic uint64_t issued;        /* highest seq pushed */
    /* Futex word: 1 while parked on an empty queue, 2 once asked to wake
     * (ev__worker_wake_ahead) until it runs, else 0. */
    _Atomic uint32_t sleeping;
    uint32_t run_here_streak;       /* instructions its submitters ran in a row */
    ev__fifo released;              /* objects waiting on this worker, in release order */
    /* A completed seq some submitting or waiting thread has seen (at most
     * `completed`): lets a release tell its object's accesses are over
     * without reading `completed`, a line the worker keeps writing. */
    _Atomic uint64_t completed_hint;
    /* Finished instructions for the submitter to take back; its own line,
     * as the worker writes it while the submitter writes the tail. */
    _Alignas(EV_CACHELINE) ev__atomic_lifo returned;

    /* Read-mostly fields, on a line of their own so that `returned` keeps
     * its line (as when the stub was a whole, aligned instruction). */
    _Alignas(EV_CACHELINE) ev__mpsc_link stub; /* the queue's first head */
    struct ev_vm *vm;
    uint32_t uid;                   /* the lane: index in vm->workers, ev_dep.uid */
    uint32_t thread_uid;            /* the lane's thread uid and stream type */
    uint8_t stream_type;
    _Atomic bool stop;
    pthread_t thread;
} ev_worker;

struct ev_vm {
    ev__lock submit_lock;         /* dependency analysis and queue pushes */
    _Atomic(ev_worker *) *workers; /* [lane], owned; set lazily under submit_lock */
    uint32_t limit;               /* uids beyond 0 */
    uint32_t n_lanes;             /* (limit + 1) per stream type */
    uint32_t max_pending;
    uint32_t stall_timeout_ms;
    bool run_here;                /* EV_SUBMIT_MAY_RUN_HERE honoured (EAGERVM_RUN_HERE) */
    _Atomic bool profiling;
    /* Tick and nanosecond readings taken together when profiling was first
     * switched on; with a second pair at take time they convert ticks. */
    int64_t prof_base_ticks, prof_base_ns;

    ev__lifo free_instrs;         /* of ev_instr.free_link; guarded by submit_lock */
    uint32_t drain_next;          /* worker whose returns to take next; submit_lock */
    void **slabs;                 /* owned instruction slabs */
    size_t n_slabs;

    ev_dep barrier;               /* last barrier, seq 0 = none; submit_lock */

    pthread_mutex_t pool_lock;
    unsigned char *uid_taken;     /* [limit+1] */

    pthread_mutex_t err_lock;
    ev__fifo unreported;          /* ev_error references owned; guarded by err_lock */

    /* Read by every worker for every instruction, written rarely. */
    _Alignas(EV_CACHELINE) _Atomic uint64_t n_poisoned; /* 0 skips input checks */
    /* Batches of calls for a submitter; its own line, as workers push to it
     * while the submitter takes it. */
    _Alignas(EV_CACHELINE) ev__atomic_lifo deferred;
    /* Emptied batches for the workers to reuse: taken and given back once
     * per batch, so a plain lock is cheap enough. */
    pthread_mutex_t spares_lock;
    ev__lifo defer_spares;        /* owned batches; guarded by spares_lock */

    /* Counted by workers, rarely. */
    _Alignas(EV_CACHELINE) _Atomic uint64_t n_failed, n_skipped, n_backpressure, n_cpu_moves;
    /* Counted under submit_lock: plain adds, no bus-locked instruction. */
    uint64_t n_submitted, n_cross_edges, n_stream_edges, n_wakes, n_ran_here;
    uint32_t workers_started;     /* guarded by submit_lock */
    /* Objects on the workers' released lists; written under submit_lock,
     * read without it by waits that reap them. */
    _Atomic uint32_t n_released;
    ev__link live_link;           /* on the process-wide list of runtimes (vm.c) */
    /* Layers' per-runtime state (services.h); installed under pool_lock. */
    _Atomic(void *) ext[EV__EXT_COUNT];
    void (*ext_destroy[EV__EXT_COUNT])(void *p);
    /* 1 + the highest lane whose worker started: where a scan of workers
     * may stop. Raised under submit_lock, read without it. */
    _Atomic uint32_t top_uid;
};

/* worker.c */
/* The worker the calling thread is, or NULL for other threads. */
extern EV_TLS_FAST ev_worker *ev__current_worker;
int ev__worker_start(ev_vm *vm, uint32_t uid, ev_worker **out);
void ev__worker_stop(ev_worker *w);
void ev__worker_push(ev_worker *w, ev_instr *ins);
/* Wakes a parked worker without giving it work: its submitters, which
 * run cheap instructions themselves while it is parked, see a long run of
 * them and call this so that it is awake by the time the burst goes on
 * (a wake takes 10-250 us). They go on running them until it is. Under
 * submit_lock. */
void ev__worker_wake_ahead(ev_worker *w);
/* Runs ins, which ev_submit numbered on w's lane but did not queue, on the
 * calling thread: its kernel, arg_drop and profile record, then publishes
 * it done and gives it back. Called without submit_lock. */
void ev__worker_run_here(ev_vm *vm, ev_worker *w, ev_instr *ins);
/* Frees an object's memory and drops its poison. */
void ev__obj_free(ev_vm *vm, ev_obj *obj);
bool ev__dep_done(ev_vm *vm, ev_dep d);
/* Moves the calling thread to another CPU it may run on, then lets it run
 * anywhere it could before (its affinity ends as it was). Returns false,
 * changing nothing, when it may run on one CPU only or a call fails. */
bool ev__move_off_cpu(void);
/* Waits until worker uid has finished seq. timeout_ns < 0 waits forever;
 * returns false on timeout. Called by workers and host threads. */
bool ev__wait_dep(ev_vm *vm, ev_dep d, int64_t timeout_ns);

/* Raises w->completed_hint to seq, which the caller read from `completed`
 * with acquire (release here: a thread that reads the hint with acquire
 * sees what the worker did before seq). */
static inline void ev__note_completed(ev_worker *w, uint64_t seq)
{
    uint64_t h = atomic_load_explicit(&w->completed_hint, memory_order_relaxed);
    while (h < seq && !atomic_compare_exchange_weak_explicit(&w->completed_hint, &h, seq,
                                                             memory_order_release,
                                                             memory_order_relaxed)) {
    }
}

/* Frees the released objects whose last access has finished (submit.c):
 * a thread that waited calls it, so what it waited for is freed. */
void ev__reap_released(ev_vm *vm);

/* wait.c: waits for everything issued so far; false if deadline (absolute
 * ns, or -1 for none) passed first. */
bool ev__wait_all(ev_vm *vm, int64_t deadline);

/* profile.c */
void ev__profile_record(ev_worker *w, const ev_instr *ins, int64_t start, int64_t end, int failed);
void ev__profile_free(ev_worker *w);

/* errors.c */
void ev__vm_add_unreported(ev_vm *vm, ev_error *err);
void ev__worker_remember_error(ev_worker *w, uint64_t seq, ev_error *err);

#endif
