/* eagervm distributed layer: collectives over MPI, on the ccl stream.
 *
 * A process group is the MPI world of this process (one per process, made
 * by ev_pg_create). Every MPI call runs on one OS thread: the ccl stream of
 * thread uid 0, ev_dist_stream() (MPI_THREAD_FUNNELED). A collective is an
 * instruction on that stream: its kernel starts a non-blocking MPI call and
 * the stream polls it (ev_kctx_complete_later) while compute goes on. Its
 * tensors take part in dependency analysis like any op's: the in-place
 * tensor of an all-reduce is read and written, an all-gather's input read and
 * its output written, so reading a result waits by itself. Because every
 * collective goes on one stream, collectives start in the order this process
 * issued them, from whichever thread uid; one whose input is not ready holds
 * back the later ones.
 *
 * Every collective carries its sequence number on the group, its kind, op,
 * dtype, shape and the site (file:line) that issued it:
 *   - EAGERVM_DISTRIBUTED_DEBUG=1: before each collective the ranks compare
 *     these (an all-gather of a fixed-size descriptor on a communicator of
 *     its own); a mismatch fails the collective on every rank with a message
 *     naming each rank's collective and line.
 *   - EAGERVM_COLLECTIVE_TIMEOUT=seconds (default 300): a collective that
 *     waits longer prints to stderr which ranks have not joined it and the
 *     last collective each of them started (heartbeats every rank sends to
 *     its peers when it starts one), then fails. The group is unusable
 *     afterwards (its MPI state is lost): later collectives fail at once.
 * A failed collective poisons its outputs (DESIGN rule 6): the error is
 * raised at the next sync point that touches them. A collective whose input
 * is poisoned is skipped on that rank like any instruction; that rank then
 * tells its peers (a heartbeat saying so), which fail it at once instead of
 * at the timeout, and the group is unusable on every rank afterwards.
 *
 * Built only when CMake finds MPI (EV_HAVE_MPI); otherwise every function
 * here fails with EV_ESTATE saying so, and ev_dist_available() returns 0.
 * Conventions as in vm.h and tensor.h: 0 or a negative EV_E* code, with a
 * message for the calling OS thread (ev_last_message()). All functions are
 * thread-safe unless noted.
 */
#ifndef EAGERVM_DISTRIBUTED_H
#define EAGERVM_DISTRIBUTED_H

#include <stdint.h>

#include "tensor.h"
#include "vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stream every collective (and MPI's init and finalize) runs on. */
static inline ev_stream ev_dist_stream(void)
{
    ev_stream s = {EV_DEVICE_CPU, 0, EV_STREAM_CCL, 0, 0};
    return s;
}

/* Reduction ops (eagervm.distributed.ReduceOp has these values). Append
 * only. On bool, SUM and MAX are a logical or, PRODUCT and MIN a logical
 * and; AVG (SUM divided by the world size) takes float dtypes only. */
#define EV_DIST_OP_MAP(X) \
    X(SUM, "sum")         \
    X(AVG, "avg")         \
    X(PRODUCT, "product") \
    X(MIN, "min")         \
    X(MAX, "max")

enum ev_dist_op {
#define EV_DIST_OP_ENUM(id, name) EV_DIST_##id,
    EV_DIST_OP_MAP(EV_DIST_OP_ENUM)
#undef EV_DIST_OP_ENUM
    EV_DIST_OP_COUNT
};

/* The kinds of collective. Append only. */
#define EV_COLL_MAP(X)                    \
    X(ALL_REDUCE, "all_reduce")           \
    X(BROADCAST, "broadcast")             \
    X(ALL_GATHER, "all_gather")           \
    X(REDUCE_SCATTER, "reduce_scatter")   \
    X(BARRIER, "barrier")

enum ev_coll_kind {
#define EV_COLL_ENUM(id, name) EV_COLL_##id,
    EV_COLL_MAP(EV_COLL_ENUM)
#undef EV_COLL_ENUM
    EV_COLL_COUNT
};

/* "sum", ...; "invalid" for a value out of range. Pure. */
EV_API const char *ev_dist_op_name(int op);
/* "all_reduce", ...; "invalid" for a value out of range. Pure. */
EV_API const char *ev_coll_name(int kind);

/* 1 if this build has MPI, else 0. Pure. */
EV_API int ev_dist_available(void);

/* ---------------------------------------------------------- process group */

typedef struct ev_pg ev_pg;

/* Zero fields take the environment's value, then the default. */
typedef struct ev_pg_config {
    /* Seconds a collective may wait (EAGERVM_COLLECTIVE_TIMEOUT, default
     * 300). */
    double timeout_s;
    /* 1: compare every collective across ranks first
     * (EAGERVM_DISTRIBUTED_DEBUG, default 0); -1 forces it off. */
    int debug;
} ev_pg_config;

/* Initialises MPI (MPI_Init_thread, MPI_THREAD_FUNNELED) as an instruction on
 * ev_dist_stream() and waits for it (blocks; collective: every rank must call
 * it), then makes the group's communicators (duplicates of MPI_COMM_WORLD
 * with MPI_ERRORS_RETURN). Rank and size come from MPI (mpirun sets them).
 * libmpi is first loaded RTLD_GLOBAL, which Open MPI's plug-ins need when
 * libeagervm itself was loaded privately (a Python extension). cfg may be
 * NULL. The caller owns *out until ev_pg_destroy; vm must outlive it.
 * Errors: EV_ESTATE (a group exists, MPI was finalised, or no MPI in this
 * build), EV_EINVAL (bad environment value), EV_EKERNEL (MPI failed),
 * EV_ENOMEM. */
EV_API int ev_pg_create(ev_vm *vm, const ev_pg_config *cfg, ev_pg **out);

/* Waits for every instruction issued so far, frees the communicators and
 * finalises MPI on ev_dist_stream() (blocks; collective, unless the group is
 * broken by a timeout or an MPI failure: then MPI is left as it is, since a
 * finalise could hang on the lost peer). MPI cannot be initialised again in
 * this process. Accepts NULL. No other call may use pg during or after. */
EV_API void ev_pg_destroy(ev_pg *pg);

/* This process's rank and the number of ranks. Never block. */
EV_API int ev_pg_rank(const ev_pg *pg);
EV_API int ev_pg_size(const ev_pg *pg);

/* ------------------------------------------------------------------- work */

/* The completion of one collective, for polling (PyTorch's Work). */
typedef struct ev_dist_work ev_dist_work;

/* 1 once the collective finished (done, failed or skipped), else 0. Never
 * blocks. Wait on its output tensors to get the result or the error. */
EV_API int ev_dist_work_is_completed(const ev_dist_work *w);
/* Waits until the collective finished (blocks, without a time limit of its
 * own: the collective timeout bounds it). Returns 0, or the failure's code
 * with *err_out (if not NULL) set to a new reference to the error, which
 * then counts as reported. */
EV_API int ev_dist_work_wait(ev_dist_work *w, ev_error **err_out);
/* Drops the caller's reference; accepts NULL. */
EV_API void ev_dist_work_unref(ev_dist_work *w);

/* ------------------------------------------------------------ collectives
 *
 * Each issues one instruction on ev_dist_stream() and returns at once; ex gives
 * the runtime and the site reported (its thread uid does not matter). Every
 * rank must issue the same collectives in the same order. Tensors must be
 * contiguous, with at most INT_MAX elements per rank (MPI's counts). work_out
 * may be NULL; else it receives a new reference. Errors (nothing is issued):
 * EV_EINVAL (NULL or non-contiguous tensor, wrong sizes, src out of range),
 * EV_ETYPE (dtypes differ), EV_EVALUE (AVG on a bool or integer dtype),
 * EV_ESTATE (the group is destroyed or broken), and the engine's submit
 * errors. */

/* t <- op over every rank's t, in place. */
EV_API int ev_all_reduce_(const ev_exec *ex, ev_pg *pg, ev_tensor *t, int op,
                          ev_dist_work **work_out);
/* t <- rank src's t, in place. */
EV_API int ev_broadcast_(const ev_exec *ex, ev_pg *pg, ev_tensor *t, int src,
                         ev_dist_work **work_out);
/* out <- every rank's in, concatenated in rank order: out has world size
 * times in's elements (any shape), in's dtype. */
EV_API int ev_all_gather_into(const ev_exec *ex, ev_pg *pg, ev_tensor *out, ev_tensor *in,
                              ev_dist_work **work_out);
/* out <- block `rank` of op over every rank's in, where in holds world size
 * blocks of out's element count (any shapes), out's dtype. */
EV_API int ev_reduce_scatter_into(const ev_exec *ex, ev_pg *pg, ev_tensor *out, ev_tensor *in,
                                  int op, ev_dist_work **work_out);
/* Completes once every rank started it. token may be NULL; else the barrier
 * counts as writing it (its contents stay), so a wait on token (ev_wait_obj
 * on its object) waits for the barrier. Or wait with ev_dist_work_wait. */
EV_API int ev_barrier(const ev_exec *ex, ev_pg *pg, ev_tensor *token, ev_dist_work **work_out);

#ifdef __cplusplus
}
#endif
#endif
