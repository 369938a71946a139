/* Internal contract of the distributed layer: the process group, the
 * descriptor every collective carries, and what group.c, collectives.c,
 * check.c and watchdog.c share. Never installed. Only built with MPI.
 *
 * Threads: the group's MPI state (communicators, sequence numbers,
 * heartbeats, the broken flag) is touched only on ev_dist_stream()'s thread,
 * by kernels and polls, so it needs no lock; rank, size and the settings are
 * written before ev_pg_create returns and read-only afterwards. */
#ifndef EV_DIST_IMPL_H
#define EV_DIST_IMPL_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "eagervm/distributed.h"
#include "tensor/tensor-impl.h"

/* ------------------------------------------------------------- descriptor */

/* Bytes of an issuing file name kept in descriptors and heartbeats (the end
 * of the path when it is longer). */
#define EV__DIST_FILE_MAX 96

/* What one collective is, as the ranks compare it (EAGERVM_DISTRIBUTED_DEBUG)
 * and report it: fixed size, plain bytes on the wire (all ranks run this
 * build on one kind of machine). */
typedef struct ev__coll_desc {
    uint64_t seq;        /* 1, 2, ... on the group, in stream order */
    int32_t kind;        /* enum ev_coll_kind */
    int32_t op;          /* enum ev_dist_op, or -1 */
    int32_t root;        /* broadcast's src, or -1 */
    int32_t dtype;       /* ev_dtype, or -1 (barrier) */
    int32_t ndim;
    int32_t line;
    int32_t skipped;     /* heartbeats: 1 if the sender skipped it (its input
                            was poisoned), so the peers fail at once */
    int32_t pad;
    int64_t shape[EV_MAX_DIMS];
    char file[EV__DIST_FILE_MAX]; /* NUL-terminated */
} ev__coll_desc;

/* Formats "all_reduce float32[4] op=sum at t.py:9" into buf; returns buf. */
char *ev__coll_desc_str(const ev__coll_desc *d, char *buf, size_t size);
/* Fills d's site fields from site (NULL: "?" and 0). */
void ev__coll_desc_site(ev__coll_desc *d, const ev_site *site);

/* ------------------------------------------------------------ heartbeats */

/* A heartbeat send in flight: its message and one request per peer. */
typedef struct ev__beat {
    struct ev__beat *next;
    ev__coll_desc msg;
    int n_reqs;
    MPI_Request reqs[]; /* size - 1 */
} ev__beat;

/* ---------------------------------------------------------- process group */

struct ev_pg {
    ev_vm *vm;               /* borrowed: outlives the group */
    int rank, size;
    double timeout_s;
    int debug;
    int mpi_owned;           /* 1 if we initialised MPI (and so finalise it) */
    MPI_Comm data;           /* the collectives' (owned dup of WORLD) */
    MPI_Comm check;          /* the debug descriptors' (owned dup) */
    MPI_Comm beat;           /* the heartbeats' (owned dup) */
    /* ev_dist_stream()'s thread only: */
    uint64_t seq;            /* the last collective started */
    int broken;              /* 1 after a timeout, an MPI failure or a skip */
    uint64_t broken_seq;     /* the first collective that cannot complete */
    char broken_why[512];
    ev__coll_desc *last;     /* [size]: the last collective each rank started
                                (owned; seq 0 = none heard of) */
    ev__beat *beats;         /* sends in flight (owned list) */
    int peer_skipped;        /* a peer skipped collective skip.seq: */
    ev__coll_desc skip;      /* what it skipped (from its heartbeat) */
    int skip_rank;
    int n_beats;
    int64_t last_drain_ns;
};

/* Formats MPI's message for error code mpi_rc into buf; returns buf. */
const char *ev__mpi_error_str(int mpi_rc, char *buf, size_t size);

/* Sends d to every peer as rank `rank`'s latest collective (non-blocking),
 * and collects the sends that finished. ev_dist_stream()'s thread only. */
void ev__beat_send(ev_pg *pg, const ev__coll_desc *d);
/* Receives the heartbeats that arrived (non-blocking); one that says a peer
 * skipped a collective sets pg->peer_skipped. */
void ev__beat_drain(ev_pg *pg);
/* Cancels and frees the sends still in flight (at destroy). */
void ev__beat_free_all(ev_pg *pg);
/* The timeout report for collective d, which has waited waited_s: which
 * ranks have not joined it, with the last collective each started. Also
 * written to stderr. Returns buf. */
char *ev__timeout_report(ev_pg *pg, const ev__coll_desc *d, double waited_s, char *buf,
                         size_t size);

/* Debug check: all-gathers the descriptors on pg->check. Starts it: gathered
 * must hold size descriptors and stay alive until the request completes. */
int ev__check_start(ev_pg *pg, const ev__coll_desc *mine, ev__coll_desc *gathered,
                    MPI_Request *req);
/* After the gather: 0 if every rank issued the same collective, else
 * EV_ESTATE with "collective k differs across ranks: rank 0 ...; rank 1 ..."
 * in buf. */
int ev__check_compare(const ev_pg *pg, const ev__coll_desc *gathered, char *buf, size_t size);

#endif
