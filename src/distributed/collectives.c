/* The collectives: argument checks on the issuing thread, then one
 * instruction on ev_dist_stream() whose kernel starts a non-blocking MPI call
 * (after the debug check's descriptor gather, when on) and whose poll tests
 * it, watching the timeout. Built only with MPI. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "distributed/dist-impl.h"

/* ------------------------------------------------------------------- work */

struct ev_dist_work {
    atomic_int refs;
    atomic_int done;   /* set by the instruction's arg_drop */
    ev_vm *vm;         /* borrowed */
    ev_ticket ticket;  /* written before the work is handed out */
};

int ev_dist_work_is_completed(const ev_dist_work *w)
{
    /* acquire: pairs with the release in coll_drop, so a caller that saw
     * done sees the outputs' final state when it then waits on them. */
    return !w || atomic_load_explicit(&w->done, memory_order_acquire);
}

int ev_dist_work_wait(ev_dist_work *w, ev_error **err_out)
{
    if (!w) {
        return ev__set_message(EV_EINVAL, "ev_dist_work_wait: w is NULL");
    }
    return ev_wait_ticket(w->vm, w->ticket, err_out);
}

void ev_dist_work_unref(ev_dist_work *w)
{
    /* acq_rel: the last holder sees every write of the others. */
    if (w && atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1) {
        ev__free(w);
    }
}

/* ------------------------------------------------------------ MPI mapping */

static MPI_Datatype mpi_type(ev_dtype d)
{
    switch (d) {
    case EV_BOOL:
        return MPI_C_BOOL;
    case EV_INT32:
        return MPI_INT32_T;
    case EV_INT64:
        return MPI_INT64_T;
    case EV_FLOAT32:
        return MPI_FLOAT;
    case EV_FLOAT64:
        return MPI_DOUBLE;
    case EV_UINT8:
        return MPI_UINT8_T;
    case EV_INT8:
        return MPI_INT8_T;
    case EV_INT16:
        return MPI_INT16_T;
    default:
        return MPI_DATATYPE_NULL;
    }
}

/* bool takes MPI's logical ops (MPI allows no sum on MPI_C_BOOL): sum and
 * max are an or, product and min an and, as PyTorch gives. */
static MPI_Op mpi_op(ev_dtype d, int op)
{
    if (d == EV_BOOL) {
        return op == EV_DIST_SUM || op == EV_DIST_MAX ? MPI_LOR : MPI_LAND;
    }
    switch (op) {
    case EV_DIST_PRODUCT:
        return MPI_PROD;
    case EV_DIST_MIN:
        return MPI_MIN;
    case EV_DIST_MAX:
        return MPI_MAX;
    default:
        return MPI_SUM;
    }
}

/* ------------------------------------------------------------ instruction */

enum { PHASE_CHECK, PHASE_DATA };

/* The instruction's argument, and the poll's state (the engine keeps the copy
 * until arg_drop, which runs after the last poll). */
typedef struct coll_arg {
    ev_pg *pg;                  /* borrowed: outlives its collectives */
    ev__coll_desc desc;         /* seq set by the kernel */
    void *send, *recv;          /* borrowed: the operands' storages */
    int count;                  /* elements per rank */
    MPI_Datatype type;
    MPI_Op op;
    ev_dist_work *work;         /* one reference owned, or NULL */
    ev_tensor *keep[2];         /* references owned: the buffers MPI uses */
    int abandoned;              /* a request left in flight: keep the buffers */
    int ran;                    /* the kernel ran (else it was skipped) */
    /* The poll's state: */
    int phase;
    MPI_Request req;
    int64_t start_ns;
    int64_t all_in_ns;          /* when every rank was seen in it, or 0 */
    int64_t probe_ns;           /* the last look for heartbeats */
    ev__coll_desc *gathered;    /* the debug check's [size] (owned) */
} coll_arg;


static int start_data(coll_arg *a)
{
    ev_pg *pg = a->pg;
    switch (a->desc.kind) {
    case EV_COLL_ALL_REDUCE:
        return MPI_Iallreduce(MPI_IN_PLACE, a->recv, a->count, a->type, a->op, pg->data,
                              &a->req);
    case EV_COLL_BROADCAST:
        return MPI_Ibcast(a->recv, a->count, a->type, a->desc.root, pg->data, &a->req);
    case EV_COLL_ALL_GATHER:
        return MPI_Iallgather(a->send, a->count, a->type, a->recv, a->count, a->type, pg->data,
                              &a->req);
    case EV_COLL_REDUCE_SCATTER:
        return MPI_Ireduce_scatter_block(a->send, a->recv, a->count, a->type, a->op, pg->data,
                                         &a->req);
    default:
        return MPI_Ibarrier(pg->data, &a->req);
    }
}

/* Marks the group unusable from collective seq on and fails the
 * instruction with msg. */
static int break_group(ev_pg *pg, uint64_t seq, ev_kctx *kc, const char *msg)
{
    if (!pg->broken) {
        pg->broken = 1;
        pg->broken_seq = seq;
        size_t n = strlen(msg);
        n = n < sizeof pg->broken_why ? n : sizeof pg->broken_why - 1;
        memcpy(pg->broken_why, msg, n);
        pg->broken_why[n] = '\0';
    }
    return ev_kctx_fail(kc, EV_EKERNEL, "%s", msg);
}

/* A peer skipped a collective (its input was poisoned): this rank's
 * collectives from it on cannot complete. Fails the running one at once
 * instead of at the timeout, and breaks the group. */
static int peer_skipped(coll_arg *a, ev_kctx *kc, int posted)
{
    ev_pg *pg = a->pg;
    char d[256], s[256], msg[1024];
    snprintf(msg, sizeof msg, "rank %d: collective %llu (%s) cannot complete: rank %d skipped "
             "collective %llu (%s) because its input was poisoned by an earlier failure there",
             pg->rank, (unsigned long long)a->desc.seq, ev__coll_desc_str(&a->desc, d, sizeof d),
             pg->skip_rank, (unsigned long long)pg->skip.seq,
             ev__coll_desc_str(&pg->skip, s, sizeof s));
    fprintf(stderr, "eagervm: %s\n", msg);
    fflush(stderr);
    a->abandoned = posted;
    return break_group(pg, a->desc.seq, kc, msg);
}

static int mpi_failed(coll_arg *a, ev_kctx *kc, const char *what, int mpi_rc)
{
    a->abandoned = 1; /* whether MPI still holds the request is unknown */
    char d[256], e[MPI_MAX_ERROR_STRING + 8], msg[768];
    snprintf(msg, sizeof msg, "rank %d: collective %llu (%s): %s failed: %s", a->pg->rank,
             (unsigned long long)a->desc.seq, ev__coll_desc_str(&a->desc, d, sizeof d), what,
             ev__mpi_error_str(mpi_rc, e, sizeof e));
    return break_group(a->pg, a->desc.seq, kc, msg);
}

/* AVG: the sum divided by the world size (float dtypes only). */
static void finish_avg(coll_arg *a)
{
    int n = a->count;
    if (a->desc.kind == EV_COLL_ALL_REDUCE || a->desc.kind == EV_COLL_REDUCE_SCATTER) {
        if (a->desc.dtype == EV_FLOAT32) {
            float *x = a->recv, w = (float)a->pg->size;
            for (int i = 0; i < n; i++) {
                x[i] /= w;
            }
        } else {
            double *x = a->recv, w = (double)a->pg->size;
            for (int i = 0; i < n; i++) {
                x[i] /= w;
            }
        }
    }
}

/* How long a collective's tests go on without a pause. MPI moves data only
 * while it is called, so once every rank has started the collective (their
 * heartbeats say so) its tests spin, as a blocking MPI call does: with the
 * stream's growing sleeps between tests a 4 MB all-reduce took twice as
 * long, and ten times as long on a loaded machine when a late peer had used
 * up a budget fixed from the start (bench/allreduce.c). While a rank has
 * not started it, the tests spin only at first and leave the waiting to the
 * stream's backoff, so a late or lost peer costs no CPU. */
#define SPIN_WAIT_NS 50000
/* Every rank in: spin at most this long (a peer lost mid-way), then back
 * off until the timeout. */
#define SPIN_ALL_IN_NS 1000000000
/* In the kernel, the tests spin at most this long before the stream takes
 * over, so the collectives queued behind it start meanwhile. */
#define SPIN_KERNEL_NS 50000
/* Heartbeats are looked for at most this often while spinning. */
#define PROBE_NS 2000

/* 1 if every peer's heartbeat says it started collective seq. */
static int all_joined(const ev_pg *pg, uint64_t seq)
{
    for (int p = 0; p < pg->size; p++) {
        if (p != pg->rank && pg->last[p].seq < seq) {
            return 0;
        }
    }
    return 1;
}

/* When the tests of a should stop spinning (see SPIN_WAIT_NS). */
static int64_t spin_until(const coll_arg *a, int in_kernel)
{
    int64_t until = a->all_in_ns ? a->all_in_ns + SPIN_ALL_IN_NS : a->start_ns + SPIN_WAIT_NS;
    if (in_kernel && until > a->start_ns + SPIN_KERNEL_NS) {
        until = a->start_ns + SPIN_KERNEL_NS;
    }
    return until;
}

/* Tests the collective, spinning as spin_until says: 1 done, 0 not yet,
 * < 0 failed (see ev_poll_fn). */
static int progress(coll_arg *a, ev_kctx *kc, int in_kernel)
{
    ev_pg *pg = a->pg;
    if (pg->broken && a->desc.seq >= pg->broken_seq) {
        /* An earlier collective failed: this one cannot end well (the
         * ranks' orders no longer agree). Those before it go on. */
        a->abandoned = 1;
        return ev_kctx_fail(kc, EV_EKERNEL, "collective %llu: the process group became "
                            "unusable while it ran: %s", (unsigned long long)a->desc.seq,
                            pg->broken_why);
    }
    for (;;) {
        int flag = 0;
        int rc = MPI_Test(&a->req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            return mpi_failed(a, kc, a->phase == PHASE_CHECK ? "the debug check" : "MPI_Test",
                              rc);
        }
        if (!flag) {
            int64_t now = ev__now_ns();
            if (!a->all_in_ns && now - a->probe_ns >= PROBE_NS) {
                a->probe_ns = now;
                ev__beat_drain(pg);
                a->all_in_ns = all_joined(pg, a->desc.seq) ? now : 0;
            }
            if (now >= spin_until(a, in_kernel)) {
                break;
            }
            ev__cpu_relax();
            continue;
        }
        if (a->phase == PHASE_DATA) {
            if (a->desc.op == EV_DIST_AVG) {
                finish_avg(a);
            }
            return 1;
        }
        /* The descriptors are in: compare them, then start the data. A
         * mismatch fails every rank alike (each sees the same gather), and
         * none starts the data, so the group stays usable. */
        char msg[1024];
        if (ev__check_compare(pg, a->gathered, msg, sizeof msg)) {
            return ev_kctx_fail(kc, EV_ESTATE, "%s", msg);
        }
        a->phase = PHASE_DATA;
        if ((rc = start_data(a)) != MPI_SUCCESS) {
            return mpi_failed(a, kc, ev_coll_name(a->desc.kind), rc);
        }
    }
    int64_t now = ev__now_ns();
    if (now - pg->last_drain_ns > 20000000) {
        pg->last_drain_ns = now;
        ev__beat_drain(pg);
    }
    if (pg->peer_skipped && pg->skip.seq <= a->desc.seq) {
        return peer_skipped(a, kc, 1);
    }
    double waited = (double)(now - a->start_ns) * 1e-9;
    if (waited > pg->timeout_s) {
        char msg[2048];
        ev__timeout_report(pg, &a->desc, waited, msg, sizeof msg);
        /* MPI cannot cancel a collective: should the lost peer come back,
         * MPI would still write the buffers, so they are never freed. */
        a->abandoned = 1;
        return break_group(pg, a->desc.seq, kc, msg);
    }
    return 0;
}

static int coll_poll(void *state, ev_kctx *kc)
{
    return progress(state, kc, 0);
}

static int coll_kernel(void *arg, ev_kctx *kc)
{
    coll_arg *a = arg;
    ev_pg *pg = a->pg;
    a->ran = 1;
    a->desc.seq = ++pg->seq;
    if (pg->broken) {
        return ev_kctx_fail(kc, EV_ESTATE, "the process group is unusable after an earlier "
                            "failure: %s", pg->broken_why);
    }
    a->start_ns = ev__now_ns();
    ev__beat_drain(pg);
    if (pg->peer_skipped && pg->skip.seq <= a->desc.seq) {
        return peer_skipped(a, kc, 0);
    }
    ev__beat_send(pg, &a->desc);
    int rc;
    if (pg->debug) {
        a->gathered = ev__malloc(sizeof *a->gathered * (size_t)pg->size);
        if (!a->gathered) {
            return ev_kctx_fail(kc, EV_ENOMEM, "out of memory for %d descriptors", pg->size);
        }
        a->phase = PHASE_CHECK;
        rc = ev__check_start(pg, &a->desc, a->gathered, &a->req);
    } else {
        a->phase = PHASE_DATA;
        rc = start_data(a);
    }
    if (rc != MPI_SUCCESS) {
        return mpi_failed(a, kc, a->phase == PHASE_CHECK ? "the debug check"
                                                         : ev_coll_name(a->desc.kind), rc);
    }
    /* A small collective whose peers are there already ends at once:
     * skip the stream's polling then. */
    int done = progress(a, kc, 1);
    if (done) {
        return done < 0 ? done : 0;
    }
    return ev_kctx_complete_later(kc, coll_poll, a);
}

/* A collective skipped because its input was poisoned (its kernel did not
 * run; its drop runs on the stream's thread all the same): the peers would
 * wait for this rank until the timeout. Tell them at once, with a
 * heartbeat that says so, and break the group here: the ranks' orders of
 * collectives no longer agree. */
static void skipped(coll_arg *a)
{
    ev_pg *pg = a->pg;
    a->desc.seq = ++pg->seq;
    if (pg->broken) {
        return;
    }
    a->desc.skipped = 1;
    ev__beat_send(pg, &a->desc);
    char d[256], msg[512];
    snprintf(msg, sizeof msg, "rank %d skipped collective %llu (%s): its input was poisoned by "
             "an earlier failure", pg->rank, (unsigned long long)a->desc.seq,
             ev__coll_desc_str(&a->desc, d, sizeof d));
    pg->broken = 1;
    pg->broken_seq = a->desc.seq;
    snprintf(pg->broken_why, sizeof pg->broken_why, "%s", msg);
}

static void coll_drop(void *arg)
{
    coll_arg *a = arg;
    if (!a->ran) {
        skipped(a);
    }
    if (!a->abandoned) {
        ev__free(a->gathered);
        ev_tensor_unref(a->keep[0]);
        ev_tensor_unref(a->keep[1]);
    }
    if (a->work) {
        /* release: pairs with the acquire in ev_dist_work_is_completed. */
        atomic_store_explicit(&a->work->done, 1, memory_order_release);
        ev_dist_work_unref(a->work);
    }
}

/* ----------------------------------------------------------------- checks */

static int check_group(const char *fn, const ev_exec *ex, ev_pg *pg)
{
    int rc = ev__check_exec(fn, ex);
    if (rc) {
        return rc;
    }
    if (!pg) {
        return ev__set_message(EV_ESTATE, "%s: the process group is not initialised "
                               "(call init_process_group first)", fn);
    }
    if (ex->vm != pg->vm) {
        return ev__set_message(EV_EINVAL, "%s: the exec's runtime is not the process "
                               "group's", fn);
    }
    return 0;
}

static int check_buffer(const char *fn, const char *what, const ev_tensor *t)
{
    int rc = ev__check_tensor(fn, what, t);
    if (rc) {
        return rc;
    }
    if (!ev_tensor_is_contiguous(t)) {
        char s[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "%s: %s (%s%s) must be contiguous; call "
                               ".contiguous() first", fn, what, ev_dtype_name(t->dtype),
                               ev__shape_str(t->ndim, t->shape, s, sizeof s));
    }
    if (t->numel > INT_MAX) {
        return ev__set_message(EV_EINVAL, "%s: %s has %lld elements, more than MPI's counts "
                               "hold (%d)", fn, what, (long long)t->numel, INT_MAX);
    }
    return 0;
}

static int check_op(const char *fn, ev_dtype d, int op)
{
    if (op < 0 || op >= EV_DIST_OP_COUNT) {
        return ev__set_message(EV_EINVAL, "%s: op %d is not a ReduceOp (expected 0..%d)", fn,
                               op, EV_DIST_OP_COUNT - 1);
    }
    if (op == EV_DIST_AVG && !ev_dtype_is_float(d)) {
        return ev__set_message(EV_EVALUE, "%s: ReduceOp.AVG needs a float dtype, not %s (as "
                               "in PyTorch; use SUM and divide)", fn, ev_dtype_name(d));
    }
    return 0;
}

/* ----------------------------------------------------------------- submit */

static void desc_of(ev__coll_desc *d, int kind, int op, int root, const ev_tensor *t,
                    const ev_site *site)
{
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->op = op;
    d->root = root;
    d->dtype = t ? (int32_t)t->dtype : -1;
    d->ndim = t ? t->ndim : 0;
    for (int i = 0; t && i < t->ndim; i++) {
        d->shape[i] = t->shape[i];
    }
    ev__coll_desc_site(d, site);
}

/* Issues a (filled but for the poll state) on ev_dist_stream(): it reads
 * `reads` and writes `writes` (NULL: none). */
static int submit(const ev_exec *ex, coll_arg *a, ev_tensor *reads, ev_tensor *writes,
                  ev_dist_work **work_out)
{
    ev_operand ops[2];
    size_t n = 0;
    if (writes) {
        ops[n++] = (ev_operand){writes->storage->obj, reads == writes ? EV_READ_WRITE : EV_WRITE};
    }
    if (reads && reads != writes) {
        ops[n++] = (ev_operand){reads->storage->obj, EV_READ};
    }
    a->keep[0] = ev_tensor_ref(writes);
    a->keep[1] = reads != writes ? ev_tensor_ref(reads) : NULL;
    ev_dist_work *w = NULL;
    if (work_out) {
        w = ev__malloc(sizeof *w);
        if (!w) {
            ev_tensor_unref(a->keep[0]);
            ev_tensor_unref(a->keep[1]);
            return ev__set_message(EV_ENOMEM, "%s: out of memory", ev_coll_name(a->desc.kind));
        }
        atomic_init(&w->refs, 2); /* the caller's and the instruction's */
        atomic_init(&w->done, 0);
        w->vm = ex->vm;
        a->work = w;
    }
    const char *name = ev_coll_name(a->desc.kind);
    ev_instr_desc d = {
        .kernel = coll_kernel,
        .arg = a,
        .arg_size = sizeof *a,
        .arg_drop = coll_drop,
        .stream = ev_dist_stream(),
        .operands = ops,
        .n_operands = n,
        .name = name,
        .site = ex->site,
    };
    ev_ticket ticket;
    int rc = ev_submit(ex->vm, &d, &ticket);
    if (rc) {
        ev__free(w);
        ev_tensor_unref(a->keep[0]);
        ev_tensor_unref(a->keep[1]);
        return rc;
    }
    if (writes) {
        ev__storage_written(writes->storage, name, ex->site);
    }
    if (w) {
        w->ticket = ticket;
        *work_out = w;
    }
    return 0;
}

int ev_all_reduce_(const ev_exec *ex, ev_pg *pg, ev_tensor *t, int op, ev_dist_work **work_out)
{
    static const char fn[] = "all_reduce";
    int rc = check_group(fn, ex, pg);
    if (rc || (rc = check_buffer(fn, "tensor", t)) || (rc = check_op(fn, t->dtype, op))) {
        return rc;
    }
    coll_arg a = {.pg = pg, .recv = ev__tensor_ptr(t), .count = (int)t->numel,
                  .type = mpi_type(t->dtype), .op = mpi_op(t->dtype, op)};
    desc_of(&a.desc, EV_COLL_ALL_REDUCE, op, -1, t, ex->site);
    return submit(ex, &a, t, t, work_out);
}

int ev_broadcast_(const ev_exec *ex, ev_pg *pg, ev_tensor *t, int src, ev_dist_work **work_out)
{
    static const char fn[] = "broadcast";
    int rc = check_group(fn, ex, pg);
    if (rc || (rc = check_buffer(fn, "tensor", t))) {
        return rc;
    }
    if (src < 0 || src >= pg->size) {
        return ev__set_message(EV_EINVAL, "%s: src %d is out of range (the world has %d "
                               "ranks: 0..%d)", fn, src, pg->size, pg->size - 1);
    }
    coll_arg a = {.pg = pg, .recv = ev__tensor_ptr(t), .count = (int)t->numel,
                  .type = mpi_type(t->dtype), .op = MPI_OP_NULL};
    desc_of(&a.desc, EV_COLL_BROADCAST, -1, src, t, ex->site);
    return submit(ex, &a, t, t, work_out);
}

/* Shared checks of the gather and the scatter: `big` holds world size blocks
 * of `small`'s element count, in small's dtype, and shares no memory with it. */
static int check_blocks(const char *fn, ev_pg *pg, const ev_tensor *big, const char *big_name,
                        const ev_tensor *small, const char *small_name)
{
    int rc = check_buffer(fn, big_name, big);
    if (rc || (rc = check_buffer(fn, small_name, small))) {
        return rc;
    }
    if (big->dtype != small->dtype) {
        return ev__set_message(EV_ETYPE, "%s: %s is %s but %s is %s (they must match)", fn,
                               big_name, ev_dtype_name(big->dtype), small_name,
                               ev_dtype_name(small->dtype));
    }
    if (big->numel != small->numel * pg->size) {
        char s1[EV__SHAPE_STR_SIZE], s2[EV__SHAPE_STR_SIZE];
        return ev__set_message(EV_EINVAL, "%s: %s%s has %lld elements, expected world size "
                               "(%d) times the %lld of %s%s", fn, big_name,
                               ev__shape_str(big->ndim, big->shape, s1, sizeof s1),
                               (long long)big->numel, pg->size, (long long)small->numel,
                               small_name, ev__shape_str(small->ndim, small->shape, s2, sizeof s2));
    }
    if (ev__may_overlap(big, small)) {
        return ev__set_message(EV_EINVAL, "%s: %s and %s share memory", fn, big_name,
                               small_name);
    }
    return 0;
}

int ev_all_gather_into(const ev_exec *ex, ev_pg *pg, ev_tensor *out, ev_tensor *in,
                       ev_dist_work **work_out)
{
    static const char fn[] = "all_gather_into_tensor";
    int rc = check_group(fn, ex, pg);
    if (rc || (rc = check_blocks(fn, pg, out, "output_tensor", in, "input_tensor"))) {
        return rc;
    }
    coll_arg a = {.pg = pg, .send = ev__tensor_ptr(in), .recv = ev__tensor_ptr(out),
                  .count = (int)in->numel, .type = mpi_type(in->dtype), .op = MPI_OP_NULL};
    desc_of(&a.desc, EV_COLL_ALL_GATHER, -1, -1, in, ex->site);
    return submit(ex, &a, in, out, work_out);
}

int ev_reduce_scatter_into(const ev_exec *ex, ev_pg *pg, ev_tensor *out, ev_tensor *in, int op,
                           ev_dist_work **work_out)
{
    static const char fn[] = "reduce_scatter_tensor";
    int rc = check_group(fn, ex, pg);
    if (rc || (rc = check_blocks(fn, pg, in, "input", out, "output")) ||
        (rc = check_op(fn, in->dtype, op))) {
        return rc;
    }
    coll_arg a = {.pg = pg, .send = ev__tensor_ptr(in), .recv = ev__tensor_ptr(out),
                  .count = (int)out->numel, .type = mpi_type(in->dtype),
                  .op = mpi_op(in->dtype, op)};
    desc_of(&a.desc, EV_COLL_REDUCE_SCATTER, op, -1, in, ex->site);
    return submit(ex, &a, in, out, work_out);
}

int ev_barrier(const ev_exec *ex, ev_pg *pg, ev_tensor *token, ev_dist_work **work_out)
{
    int rc = check_group("barrier", ex, pg);
    if (rc || (token && (rc = ev__check_tensor("barrier", "token", token)))) {
        return rc;
    }
    coll_arg a = {.pg = pg, .type = MPI_DATATYPE_NULL, .op = MPI_OP_NULL};
    desc_of(&a.desc, EV_COLL_BARRIER, -1, -1, NULL, ex->site);
    return submit(ex, &a, NULL, token, work_out);
}
