/* eagervm engine: an asynchronous instruction runtime.
 *
 * The engine knows nothing of tensors. A program creates *objects* (the unit
 * of dependency tracking), then submits *instructions*: a kernel, its argument,
 * the *stream* it runs on, and the objects it reads and writes. Submission
 * returns at once; the engine orders instructions by what they access
 * (read-after-write, write-after-read and write-after-write make edges), runs
 * them on worker threads, and lets the caller wait for an object, an
 * instruction, or everything.
 *
 * Conventions: every function that can fail returns 0 or a negative EV_E*
 * code; on failure a message for the calling OS thread is kept and read with
 * ev_last_message(). Nothing here aborts on bad input. All functions are
 * thread-safe unless noted. Kernels run on worker threads and must not submit
 * to or wait on the runtime that runs them.
 */
#ifndef EAGERVM_VM_H
#define EAGERVM_VM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(EV_BUILDING_LIBRARY)
#define EV_API __attribute__((visibility("default")))
#else
#define EV_API
#endif

/* ------------------------------------------------------------------ errors */

/* X-macro list of error codes: name, value, description. Append only. */
#define EV_ERRNO_MAP(X)                                                     \
    X(EINVAL, -1, "invalid argument")                                       \
    X(ENOMEM, -2, "out of memory")                                          \
    X(EINDEX, -3, "index out of range")                                     \
    X(ELIMIT, -4, "resource limit reached")                                 \
    X(ETHREAD, -5, "cannot start worker thread")                            \
    X(EPOISON, -6, "input poisoned by an earlier failed instruction")       \
    X(EKERNEL, -7, "kernel failed")                                         \
    X(ETIMEDOUT, -8, "timed out")                                           \
    X(EINTR, -9, "interrupted")                                             \
    X(ESTATE, -10, "invalid state")                                         \
    X(ETYPE, -11, "wrong type")                                             \
    X(EVALUE, -12, "invalid value")

enum {
#define EV_ERRNO_ENUM(name, val, desc) EV_##name = (val),
    EV_ERRNO_MAP(EV_ERRNO_ENUM)
#undef EV_ERRNO_ENUM
    EV_ERRNO_COUNT = 12
};

/* Static description of an error code ("unknown error" for others). */
EV_API const char *ev_strerror(int code);
/* Name of an error code, e.g. "EV_EINDEX". */
EV_API const char *ev_err_name(int code);

/* The message of the last failed call made by this OS thread (never NULL;
 * valid until this thread's next eagervm call). */
EV_API const char *ev_last_message(void);

/* Where an instruction was issued. The engine only borrows it: the caller
 * keeps it alive for as long as the runtime may report it (interning sites for
 * the life of the process is the expected use). */
typedef struct ev_site {
    const char *file;
    const char *function;
    int line;
} ev_site;

/* The record of a failed instruction, shared by every object it poisoned.
 * Reference counted; immutable once published. */
typedef struct ev_error ev_error;

typedef struct ev_error_info {
    int code;              /* EV_E* returned by the kernel */
    const char *message;   /* the kernel's message */
    const char *name;      /* the failed instruction's name */
    const ev_site *site;   /* where it was issued, or NULL */
    uint32_t thread_uid;   /* the thread uid of its stream */
    uint64_t seq;          /* its sequence number on that stream */
    uint8_t stream_type;   /* its stream's type */
} ev_error_info;

/* Fills *info with pointers that stay valid while err is referenced. */
EV_API void ev_error_get(const ev_error *err, ev_error_info *info);
EV_API void ev_error_ref(ev_error *err);
/* Drops one reference; accepts NULL. */
EV_API void ev_error_unref(ev_error *err);
/* Formats "name failed at file:line in function: message" into buf (always
 * NUL-terminated when size > 0); returns the length it wanted. */
EV_API int ev_error_format(const ev_error *err, char *buf, size_t size);

/* ----------------------------------------------------------------- streams */

enum ev_device_type { EV_DEVICE_CPU = 0, EV_DEVICE_CUDA = 1, EV_DEVICE_TYPE_COUNT };

enum ev_stream_type {
    EV_STREAM_COMPUTE = 0,
    EV_STREAM_H2D,
    EV_STREAM_D2H,
    EV_STREAM_CCL,
    EV_STREAM_BARRIER,
    EV_STREAM_TYPE_COUNT
};

EV_API const char *ev_stream_type_name(int type);

/* A stream is named by value. Instructions on one stream start in submission
 * order. On the cpu each stream runs on an OS thread of its own, started when
 * it is first used: a thread uid's compute stream, and, apart from it, each of
 * the uid's streams of another type (so a collective in flight on the ccl
 * stream of uid t never holds back compute on t). Dependencies between any
 * two streams are inferred alike. */
typedef struct ev_stream {
    uint8_t device_type;   /* enum ev_device_type */
    uint8_t device_index;
    uint8_t type;          /* enum ev_stream_type */
    uint8_t index;         /* more than one stream per triple, later */
    uint32_t thread_uid;
} ev_stream;

/* The compute stream of the cpu on thread uid `uid`. */
static inline ev_stream ev_cpu_stream(uint32_t uid)
{
    ev_stream s = {EV_DEVICE_CPU, 0, EV_STREAM_COMPUTE, 0, uid};
    return s;
}

/* ----------------------------------------------------------------- runtime */

typedef struct ev_vm ev_vm;

/* Zero fields take the environment's value, then the default. */
typedef struct ev_vm_config {
    /* Thread uids beyond the default uid 0
     * (EAGERVM_WORKER_THREAD_LIMIT, default 16). */
    uint32_t worker_thread_limit;
    /* Queued instructions past which submitters wait
     * (EAGERVM_MAX_PENDING, default 8192). */
    uint32_t max_pending;
    /* A host wait longer than this prints a stall report to stderr
     * (EAGERVM_STALL_TIMEOUT_MS, default 0 = never). */
    uint32_t stall_timeout_ms;
} ev_vm_config;

/* Creates a runtime; cfg may be NULL. No OS thread starts until a thread uid
 * is first used. Errors: EV_EINVAL (bad environment value), EV_ENOMEM. */
EV_API int ev_vm_create(const ev_vm_config *cfg, ev_vm **out);

/* Finishes every queued instruction, runs pending free callbacks, joins the
 * workers and frees the runtime. Accepts NULL. The caller guarantees that no
 * other thread uses vm during or after the call. */
EV_API void ev_vm_destroy(ev_vm *vm);

/* The limit of thread uids in force (not counting uid 0). */
EV_API uint32_t ev_vm_thread_limit(const ev_vm *vm);

/* Whether submitters may run instructions marked EV_SUBMIT_MAY_RUN_HERE
 * themselves (on: 1, the default unless EAGERVM_RUN_HERE=0; off: 0, every
 * instruction goes to its worker). Returns the previous setting, or
 * EV_EINVAL for a NULL vm or another value than 0 or 1. */
EV_API int ev_vm_set_run_here(ev_vm *vm, int on);

/* Takes a free thread uid (1..limit) from the pool. Errors: EV_ELIMIT when
 * all are taken; the message names EAGERVM_WORKER_THREAD_LIMIT. */
EV_API int ev_vm_thread_acquire(ev_vm *vm, uint32_t *uid_out);

/* Gives a uid back to the pool. Work already issued on it still runs; a later
 * acquire may hand the uid out again. Errors: EV_EINVAL for uid 0 or a uid
 * not taken. */
EV_API int ev_vm_thread_release(ev_vm *vm, uint32_t uid);

/* ----------------------------------------------------------------- objects */

typedef struct ev_obj ev_obj;

/* Called once, after every instruction that touched the object finished: on
 * the releasing thread, on a worker, or on a thread that later submits to or
 * waits on the vm (an object whose pending accesses all run on one worker
 * waits on that worker's released list; submits free those finished in
 * batches, waits and ev_vm_destroy all that finished). Must not submit to
 * or wait on the vm. */
typedef void (*ev_free_fn)(void *data);

/* Creates an object. The caller owns the handle until ev_obj_release. */
EV_API int ev_obj_create(ev_vm *vm, ev_obj **out);

/* Creates an object whose every access is ordered after all the instructions
 * issued so far on thread uid's cpu stream, as if the last of them had
 * written it (free for accesses issued on that stream, which keeps the order
 * anyway). With ev_obj_pending_uid it serves stream-ordered reuse: memory
 * whose pending uses all run on one stream may back a new object at once,
 * before those uses finish. Errors: EV_EINVAL (NULL vm or out, uid beyond
 * the limit), EV_ENOMEM. */
EV_API int ev_obj_create_after(ev_vm *vm, uint32_t uid, ev_obj **out);

/* Where the unfinished instructions touching obj run: returns 0 if every one
 * issued so far has finished, 1 if the unfinished ones all run on one thread
 * uid (stored in *uid), 2 if on several. A worker counts its running
 * instruction as finished. Same contract as ev_obj_release: no submit naming
 * obj may run concurrently. Returns EV_EINVAL (negative) for NULL arguments. */
EV_API int ev_obj_pending_uid(ev_vm *vm, const ev_obj *obj, uint32_t *uid);

/* Lets go of an object. free_fn (may be NULL) runs with data once every
 * instruction issued so far that touches obj has finished; if none is
 * pending it runs before this call returns. The handle must not be used
 * afterwards, not even by instructions issued later. Accepts obj == NULL. */
EV_API int ev_obj_release(ev_vm *vm, ev_obj *obj, ev_free_fn free_fn, void *data);

/* ------------------------------------------------------------ instructions */

typedef struct ev_kctx ev_kctx;

/* A kernel returns 0, or the result of ev_kctx_fail. */
typedef int (*ev_kernel_fn)(void *arg, ev_kctx *kc);

/* Records a failure of the running kernel; returns code (which must be a
 * negative EV_E*; others become EV_EKERNEL). printf-style message. */
EV_API int ev_kctx_fail(ev_kctx *kc, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The thread uid of the worker running the kernel. */
EV_API uint32_t ev_kctx_thread_uid(const ev_kctx *kc);

/* ------------------------------------------------ asynchronous completion */

/* Checks whether work a kernel started has completed: returns 1 when it has,
 * 0 while it is still going, or the result of ev_kctx_fail(kc, ...) when it
 * failed. Called on the stream's own thread, between other instructions,
 * until it returns non-zero. Must not block, submit or wait. */
typedef int (*ev_poll_fn)(void *state, ev_kctx *kc);

/* Lets the running instruction finish after its kernel returns: the kernel
 * starts the work (a non-blocking MPI call, later a CUDA launch whose event
 * poll reads), calls this, and returns 0. The stream then runs the
 * instructions after it while the poll of the earliest unfinished
 * instruction is called now and then (one poll is expected to drive the
 * work of those after it, as an MPI test does); the instruction finishes
 * when poll returns non-zero (its arg_drop runs then,
 * its outputs become ready, or poisoned if poll failed). Instructions of one
 * stream finish in submission order, so a later one that is done waits for
 * the earlier ones to be seen done; one that reads what an unfinished one
 * writes starts only after it finished. state must live until then (the
 * instruction's argument does). While anything is in flight the stream
 * polls, busy at first, then yielding, then sleeping in growing steps up to
 * 1 ms; ev_stream_notify ends a sleep early (a completion signalled from
 * another thread). Only streams of a type other than compute may do this on
 * the cpu: elsewhere it fails with EV_ESTATE and a message. */
EV_API int ev_kctx_complete_later(ev_kctx *kc, ev_poll_fn poll, void *state);

enum ev_access { EV_READ = 1, EV_WRITE = 2, EV_READ_WRITE = 3 };

typedef struct ev_operand {
    ev_obj *obj;
    int access; /* enum ev_access */
} ev_operand;

/* Arguments up to this size travel inside the instruction (no allocation). */
#define EV_INLINE_ARG_SIZE 192
/* Operands up to this count travel inside the instruction. */
#define EV_INLINE_OPERANDS 6

typedef struct ev_instr_desc {
    ev_kernel_fn kernel;        /* required */
    const void *arg;            /* copied (arg_size bytes) into the instruction */
    size_t arg_size;
    /* Runs on the copy exactly once, on the stream's own thread (or on the
     * submitter's, see EV_SUBMIT_MAY_RUN_HERE), after the
     * kernel ran (and, if it completes later, completed) or was skipped
     * (poisoned input, or runtime destroyed); may be NULL. */
    void (*arg_drop)(void *arg);
    ev_stream stream;
    const ev_operand *operands; /* an object may appear more than once */
    size_t n_operands;
    const char *name;           /* static string (borrowed forever); NULL = "instruction" */
    const ev_site *site;        /* borrowed, see ev_site; may be NULL */
    unsigned flags;             /* enum ev_submit_flags; 0 for none */
} ev_instr_desc;

enum ev_submit_flags {
    /* The kernel is cheap (a few microseconds at most): when its stream is
     * a compute stream whose worker is parked with nothing queued, and all
     * its inputs are ready, ev_submit runs it, and then its arg_drop, on
     * the calling thread before returning, instead of waking the worker
     * (a wake costs 10-250 us, far more than such a kernel). Everything
     * else is as if the worker ran it: the same sequence number on the
     * same stream, the same errors (reported at a later sync, poisoning
     * its outputs), the same profile record. A kernel so marked must not
     * wait for other instructions. EAGERVM_RUN_HERE=0 turns this off. */
    EV_SUBMIT_MAY_RUN_HERE = 1u << 0,
};

/* Names one instruction: its stream's thread uid and type, and its sequence
 * number on that stream. */
typedef struct ev_ticket {
    uint32_t thread_uid;
    uint64_t seq;
    uint8_t stream_type;   /* enum ev_stream_type; 0 (compute) when left out */
} ev_ticket;

/* Submits an instruction and returns at once (unless EAGERVM_MAX_PENDING
 * instructions are queued: then it waits until the queue drains to 3/4).
 * Every object must be live. ticket_out may be NULL. On error nothing is
 * queued and arg_drop is not called. Errors: EV_EINVAL (bad stream, NULL
 * kernel or object), EV_ETHREAD, EV_ENOMEM. */
EV_API int ev_submit(ev_vm *vm, const ev_instr_desc *desc, ev_ticket *ticket_out);

/* Submits a barrier on `stream`: it runs after every instruction issued
 * before it (on every stream) and before every instruction issued after it.
 * kernel may be NULL (a pure fence). */
EV_API int ev_submit_barrier(ev_vm *vm, ev_stream stream, ev_kernel_fn kernel, const void *arg,
                             size_t arg_size, const char *name, ev_ticket *ticket_out);

/* ------------------------------------------------------------------- waits */

/* Waits until obj is ready for reading (its last writer issued so far has
 * finished). Returns 0, or EV_EPOISON with *err_out (if not NULL) set to a new
 * reference to the first error that poisoned it; that error counts as
 * reported. Spins briefly, then parks. */
EV_API int ev_wait_obj(ev_vm *vm, ev_obj *obj, ev_error **err_out);

/* Like ev_wait_obj but gives up after timeout_ms (UINT32_MAX = never) with
 * EV_ETIMEDOUT; then nothing is reported. Lets a caller wait in slices, e.g.
 * to notice a signal between them. */
EV_API int ev_wait_obj_timeout(ev_vm *vm, ev_obj *obj, uint32_t timeout_ms, ev_error **err_out);

/* Waits for one instruction. Returns 0, or EV_EPOISON/kernel's code with
 * *err_out set when it failed or was skipped (as long as the failure is one of
 * the last 1024 on its worker; older failures read as success). */
EV_API int ev_wait_ticket(ev_vm *vm, ev_ticket ticket, ev_error **err_out);

/* Waits for every instruction issued so far by any thread. Returns 0, or the
 * code of the earliest failure not yet reported by any wait (marking it
 * reported) with *err_out set to a new reference. */
EV_API int ev_synchronize(ev_vm *vm, ev_error **err_out);

/* Waits for every instruction issued so far, like ev_synchronize, but takes
 * no error: failures stay for the next ev_synchronize. EV_ETIMEDOUT after
 * timeout_ms (UINT32_MAX = never). */
EV_API int ev_wait_all(ev_vm *vm, uint32_t timeout_ms);

/* Waits for every instruction issued so far on thread uid's streams (work
 * they wait for on other threads included), taking no error. EV_EINVAL for a
 * uid out of range, EV_ETIMEDOUT after timeout_ms (UINT32_MAX = never). */
EV_API int ev_wait_thread(ev_vm *vm, uint32_t uid, uint32_t timeout_ms);

/* Like ev_synchronize but gives up after timeout_ms with EV_ETIMEDOUT. */
EV_API int ev_synchronize_timeout(ev_vm *vm, uint32_t timeout_ms, ev_error **err_out);

/* Wakes the thread of `stream` if it sleeps waiting for work in flight to
 * complete (see ev_kctx_complete_later); for a thread that signals a
 * completion. Does nothing if the stream has no thread yet. EV_EINVAL for a
 * bad stream. */
EV_API int ev_stream_notify(ev_vm *vm, ev_stream stream);

/* Writes a text report of what every worker is doing and waiting for: the
 * running instruction, its stream, the instruction it waits on, and the queue
 * depth. Returns the length it wanted (like snprintf), or EV_EINVAL for a NULL
 * vm (or a NULL buf with size > 0). */
EV_API int ev_vm_stall_report(ev_vm *vm, char *buf, size_t size);

/* --------------------------------------------------------------- profiling */

typedef struct ev_prof_record {
    const char *name;
    const ev_site *site;
    ev_stream stream;
    uint64_t seq;
    int64_t issue_ns; /* CLOCK_MONOTONIC */
    int64_t start_ns;
    int64_t end_ns;
    int failed;       /* 1 failed, 2 skipped because of poison */
} ev_prof_record;

/* Turns recording on or off for instructions issued from now on. */
EV_API void ev_vm_profile_enable(ev_vm *vm, int on);

/* Waits for all work, then moves every record so far into a new array
 * (sorted by issue time) that the caller frees with ev_free. */
EV_API int ev_vm_profile_take(ev_vm *vm, ev_prof_record **records_out, size_t *count_out);

/* --------------------------------------------------------------- statistics */

typedef struct ev_vm_stats {
    uint64_t submitted;        /* instructions, barriers and releases included */
    uint64_t completed;
    uint64_t failed;           /* kernels that failed */
    uint64_t skipped;          /* kernels not run because an input was poisoned */
    uint64_t cross_edges;      /* edges to producers on another worker */
    uint64_t stream_edges;     /* edges covered by the stream's own order */
    uint64_t pending;          /* submitted - completed, right now */
    uint64_t backpressure_waits;
    uint32_t workers_started;
    uint64_t worker_wakes;     /* submissions that had to wake a parked worker */
    uint64_t ran_here;         /* instructions run by their submitter
                                * (EV_SUBMIT_MAY_RUN_HERE) */
    uint64_t cpu_moves;        /* times a worker moved off a CPU it shared with the
                                * worker it waited for (scheduling health) */
} ev_vm_stats;

/* Fills *out (zeros for a NULL vm; does nothing for a NULL out). */
EV_API void ev_vm_get_stats(ev_vm *vm, ev_vm_stats *out);

/* Memory handed out by eagervm (records, arrays) goes back through this. */
EV_API void ev_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
