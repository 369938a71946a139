/* Workers: one OS thread per thread uid, each draining an intrusive
 * multi-producer single-consumer queue of instructions in issue order.
 *
 * Lock order: vm->submit_lock, then worker->prof_lock or worker->recent_lock,
 * then vm->err_lock. A worker takes submit_lock only when an arg_drop
 * releases an object (the last reference to a tensor dropped by a kernel's
 * argument); no thread ever waits for a worker while holding that lock. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

/* How long a thread polls before it parks. Waking a parked thread costs
 * ~13 µs here, so a waiter must poll longer than that: otherwise two workers
 * handing a chain back and forth each park before the other, woken, can
 * answer, and every hand-off pays a wake. After a short busy phase a poller
 * yields between checks: with more runnable threads than cores (two workers
 * and a submitter on two cores) it hands its core to the thread that will
 * produce what it waits for, instead of burning it. */
#define SPIN_BUSY_NS 1000
/* Waiting for the very instruction the other worker runs now (a chain that
 * crosses threads), the answer comes within a kernel's time: poll busy for
 * longer before yielding, as a yield adds its own latency to each hand-off. */
#define SPIN_BUSY_NEXT_NS 10000
#define SPIN_DEP_NS 60000
/* An idle worker polls for new work for less time: a submitter that finds it
 * parked pays one wake, while a long poller keeps a core from others. */
#define SPIN_IDLE_NS 20000

/* A worker waiting for a peer that the scheduler queued on the same CPU
 * (it put them there when one woke the other and every CPU looked busy) can
 * only hand over by yielding, a context switch per instruction, while the
 * submitter may have the other CPU to itself. Moving off lets both run. At
 * most once per 200 µs, so a scheduler that keeps putting us back costs
 * little. Returns whether it moved. */
static bool move_off_shared_cpu(void)
{
    ev_worker *w = ev__current_worker;
    int64_t now = ev__now_ns();
    if (!w || now - w->moved_ns < 200000) {
        return false;
    }
    w->moved_ns = now;
    if (!ev__move_off_cpu()) {
        return false;
    }
    atomic_fetch_add_explicit(&w->vm->n_cpu_moves, 1, memory_order_relaxed);
    return true;
}

/* Polls ready(arg) until it holds or total_ns is up, busy for busy_ns (0:
 * not at all) and yielding between checks after that. peer_cpu (may be
 * NULL) is where the thread that will make ready() true last ran: if that
 * is this CPU, it cannot run until we let it, so a worker moves to another
 * CPU, and any other thread (or a worker that moved moments ago) skips the
 * busy phase. */
static bool spin_until(bool (*ready)(void *), void *arg, int64_t busy_ns, int64_t total_ns,
                       _Atomic int *peer_cpu)
{
    int64_t start = ev__now_ns();
    /* Already sharing the CPU with that thread (and staying): spinning at all
     * only delays it. */
    bool shared = busy_ns == 0 ||
                  (peer_cpu &&
                   atomic_load_explicit(peer_cpu, memory_order_relaxed) == sched_getcpu() &&
                   !move_off_shared_cpu());
    while (!shared) {
        for (int k = 0; k < 32; k++) {
            if (ready(arg)) {
                return true;
            }
            ev__cpu_relax();
        }
        int64_t spent = ev__now_ns() - start;
        if (spent > total_ns) {
            return false;
        }
        if (spent > busy_ns) {
            break;
        }
        if (peer_cpu && atomic_load_explicit(peer_cpu, memory_order_relaxed) == sched_getcpu() &&
            !move_off_shared_cpu()) {
            break;
        }
    }
    for (;;) {
        sched_yield();
        if (ready(arg)) {
            return true;
        }
        if (ev__now_ns() - start > total_ns) {
            return false;
        }
    }
}

/* ---------------------------------------------------------------- queue */

/* Each worker's instructions wait on an ev__mpsc queue (queue.h): the
 * submitters push under submit_lock, the worker pops. When it runs empty, as
 * it does after every op of a program the worker keeps up with, the
 * producers' tail line stays on the producers' core. */
#define INSTR_OF(l) EV_CONTAINER_OF(l, ev_instr, queue_link)

/* The next instruction, or NULL. It stays in the queue as its head until
 * the one after it is popped; then *retired receives it (NULL for the
 * stub), no longer referenced by the queue. */
static ev_instr *queue_pop(ev_worker *w, ev_instr **retired)
{
    ev__mpsc_link *old;
    ev__mpsc_link *next = ev__mpsc_pop(&w->head, &w->stub, &old);
    if (!next) {
        return NULL;
    }
    *retired = old ? INSTR_OF(old) : NULL;
    return INSTR_OF(next);
}

void ev__worker_push(ev_worker *w, ev_instr *ins)
{
    ev__mpsc_push(&w->tail, &ins->queue_link);
    w->run_here_streak = 0;
    /* Wake only a parked worker: an exchange costs far less than a futex
     * call. One asked to wake ahead (2) is woken already. */
    if (atomic_load_explicit(&w->sleeping, memory_order_seq_cst) &&
        atomic_exchange_explicit(&w->sleeping, 0, memory_order_seq_cst) == 1) {
        w->vm->n_wakes++; /* under submit_lock, like every push */
        ev__wake_one(&w->sleeping);
    }
}

void ev__worker_wake_ahead(ev_worker *w)
{
    uint32_t parked = 1;
    if (atomic_compare_exchange_strong_explicit(&w->sleeping, &parked, 2, memory_order_seq_cst,
                                                memory_order_relaxed)) {
        w->vm->n_wakes++;
        ev__wake_one(&w->sleeping);
    }
}

/* ------------------------------------------------------------- waiting */

bool ev__dep_done(ev_vm *vm, ev_dep d)
{
    ev_worker *w = atomic_load_explicit(&vm->workers[d.uid], memory_order_acquire);
    /* acquire: pairs with the worker's release of `completed`, so the
     * producer's writes are visible to whoever saw it done. */
    return atomic_load_explicit(&w->completed, memory_order_acquire) >= d.seq;
}

struct dep_probe {
    ev_worker *w;
    uint64_t seq;
};

static bool dep_ready(void *p)
{
    struct dep_probe *probe = p;
    return atomic_load_explicit(&probe->w->completed, memory_order_acquire) >= probe->seq;
}

/* On a cache line of its own start: a chain that crosses threads spends its
 * time in this poll loop, and its speed moved by 10-20% with where earlier
 * code happened to leave it (the same source, built with every function
 * and loop aligned to 64 bytes, showed no difference). */
__attribute__((aligned(64))) bool ev__wait_dep(ev_vm *vm, ev_dep d, int64_t timeout_ns)
{
    ev_worker *w = atomic_load_explicit(&vm->workers[d.uid], memory_order_acquire);
    struct dep_probe probe = {w, d.seq};
    uint64_t finished = atomic_load_explicit(&w->completed, memory_order_acquire);
    int64_t busy = finished + 1 >= d.seq ? SPIN_BUSY_NEXT_NS : SPIN_BUSY_NS;
    /* Tells w where we wait, so that once idle it hands this CPU over at
     * once if it is its own (a rank bound to one core). */
    int here = sched_getcpu();
    if (atomic_load_explicit(&w->waiter_cpu, memory_order_relaxed) != here) {
        atomic_store_explicit(&w->waiter_cpu, here, memory_order_relaxed);
    }
    if (spin_until(dep_ready, &probe, busy, SPIN_DEP_NS, &w->cpu)) {
        return true;
    }
    int64_t deadline = timeout_ns < 0 ? -1 : ev__now_ns() + timeout_ns;
    for (;;) {
        uint32_t epoch = atomic_load_explicit(&w->done_epoch, memory_order_acquire);
        /* Ask to be woken at d.seq, not at every completion: a parked waiter
         * woken per instruction costs the worker a syscall each time. The
         * field holds the smallest seq any waiter asked for. */
        uint64_t at = atomic_load_explicit(&w->wake_at, memory_order_relaxed);
        while (at > d.seq && !atomic_compare_exchange_weak_explicit(
                                 &w->wake_at, &at, d.seq, memory_order_relaxed,
                                 memory_order_relaxed)) {
        }
        /* seq_cst: either the finisher sees our waiter count (and, through
         * it, wake_at) and bumps the epoch, or we see its `completed` here. */
        atomic_fetch_add_explicit(&w->n_waiters, 1, memory_order_seq_cst);
        bool done = atomic_load_explicit(&w->completed, memory_order_seq_cst) >= d.seq;
        int64_t left = -1;
        if (!done && deadline >= 0) {
            left = deadline - ev__now_ns();
            if (left <= 0) {
                atomic_fetch_sub_explicit(&w->n_waiters, 1, memory_order_relaxed);
                return false;
            }
        }
        if (!done) {
            ev__park(&w->done_epoch, epoch, left);
        }
        atomic_fetch_sub_explicit(&w->n_waiters, 1, memory_order_relaxed);
        if (done || atomic_load_explicit(&w->completed, memory_order_acquire) >= d.seq) {
            return true;
        }
    }
}

/* ----------------------------------------------------------- execution */

struct ev_kctx {
    ev_worker *w;
    int code;
    ev_poll_fn poll;   /* set by ev_kctx_complete_later */
    void *poll_state;
    char message[400];
};

int ev_kctx_fail(ev_kctx *kc, int code, const char *fmt, ...)
{
    if (code >= 0 || code < -EV_ERRNO_COUNT) {
        code = EV_EKERNEL;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kc->message, sizeof kc->message, fmt, ap);
    va_end(ap);
    kc->code = code;
    return code;
}

uint32_t ev_kctx_thread_uid(const ev_kctx *kc)
{
    return kc->w->thread_uid;
}

int ev_kctx_complete_later(ev_kctx *kc, ev_poll_fn poll, void *state)
{
    if (!kc || !poll) {
        return kc ? ev_kctx_fail(kc, EV_EINVAL, "ev_kctx_complete_later: poll is NULL")
                  : EV_EINVAL;
    }
    if (!ev__lane_completes_later(kc->w->vm->limit, kc->w->uid)) {
        return ev_kctx_fail(kc, EV_ESTATE,
                            "ev_kctx_complete_later: an instruction on the cpu %s stream "
                            "must complete when its kernel returns (only streams of another "
                            "type, such as ccl, may complete later)",
                            ev_stream_type_name(kc->w->stream_type));
    }
    kc->poll = poll;
    kc->poll_state = state;
    return 0;
}

static bool poll_inflight(ev_vm *vm, ev_worker *w);
static void inflight_pause(ev_worker *w, bool for_work);

/* Waits for d on a worker with instructions in flight, which must keep
 * polling them meanwhile: d may be one of them, or work on another lane
 * that waits for one of them (a compute op reading a collective's result,
 * while the collective after it reads that op's output). */
static void wait_dep_polling(ev_vm *vm, ev_worker *w, ev_dep d)
{
    w->idle_since = ev__now_ns();
    while (!ev__dep_done(vm, d)) {
        if (ev__fifo_empty(&w->inflight)) {
            ev__wait_dep(vm, d, -1);
            return;
        }
        if (poll_inflight(vm, w)) {
            w->idle_since = ev__now_ns();
        } else if (d.uid == w->uid) {
            inflight_pause(w, false);
        } else {
            /* Parks on the producer (woken when d is done), but only for as
             * long as the work in flight may go unpolled. */
            int64_t waited = ev__now_ns() - w->idle_since;
            ev__wait_dep(vm, d, waited < 100000 ? 20000 : 1000000);
        }
    }
}

static void wait_deps(ev_vm *vm, ev_worker *w, const ev_instr *ins)
{
    for (uint32_t i = 0; i < ins->n_deps; i++) {
        ev_dep d = ins->deps[i];
        /* Known finished already: reading the producer's counter again would
         * miss the cache (its worker writes it on every instruction), and
         * readers of one output all ask about the same producer. */
        if (d.seq <= w->seen_done[d.uid]) {
            continue;
        }
        ev_worker *p = atomic_load_explicit(&vm->workers[d.uid], memory_order_acquire);
        /* acquire: what the producer wrote is visible from here on, to this
         * thread, which is why the remembered value can be trusted later. */
        uint64_t done = atomic_load_explicit(&p->completed, memory_order_acquire);
        if (done < d.seq) {
            atomic_store_explicit(&w->waiting_uid, d.uid, memory_order_relaxed);
            atomic_store_explicit(&w->waiting_seq, d.seq, memory_order_relaxed);
            if (ev__fifo_empty(&w->inflight)) {
                ev__wait_dep(vm, d, -1);
            } else {
                wait_dep_polling(vm, w, d);
            }
            atomic_store_explicit(&w->waiting_seq, 0, memory_order_relaxed);
            done = d.seq;
        }
        w->seen_done[d.uid] = done;
    }
}

void ev__obj_free(ev_vm *vm, ev_obj *obj)
{
    ev_error *poison = atomic_load_explicit(&obj->poison, memory_order_acquire);
    if (poison) {
        atomic_fetch_sub_explicit(&vm->n_poisoned, 1, memory_order_relaxed);
        ev_error_unref(poison);
    }
    ev__free(obj->more_readers);
    ev__call_deferred(vm, ev__cache_free_obj, obj);
}

/* Poisons every object ins writes with err (first error wins). */
static void poison_outputs(ev_vm *vm, const ev_instr *ins, ev_error *err)
{
    for (uint32_t i = 0; i < ins->n_operands; i++) {
        if (!(ins->operands[i].access & EV_WRITE)) {
            continue;
        }
        ev_error *expected = NULL;
        ev_error_ref(err);
        /* release: a reader that sees the poison sees the whole record. */
        if (!atomic_compare_exchange_strong_explicit(&ins->operands[i].obj->poison, &expected,
                                                     err, memory_order_release,
                                                     memory_order_relaxed)) {
            ev_error_unref(err);
        } else {
            atomic_fetch_add_explicit(&vm->n_poisoned, 1, memory_order_release);
        }
    }
}

static ev_error *first_poisoned_input(const ev_instr *ins)
{
    for (uint32_t i = 0; i < ins->n_operands; i++) {
        if (ins->operands[i].access & EV_READ) {
            ev_error *p = atomic_load_explicit(&ins->operands[i].obj->poison, memory_order_acquire);
            if (p) {
                return p;
            }
        }
    }
    return NULL;
}

static void release_storage(ev_instr *ins)
{
    if (ins->arg != ins->inline_arg) {
        ev__free(ins->arg);
    }
    if (ins->operands != ins->inline_operands) {
        ev__free(ins->operands);
    }
    if (ins->deps != ins->inline_deps) {
        ev__free(ins->deps);
    }
}

/* Records the failure of ins described by kc (code and message): its
 * outputs are poisoned and the error listed for waits. */
static void record_failure(ev_vm *vm, ev_worker *w, ev_instr *ins, ev_kctx *kc, int rc)
{
    if (kc->code == 0) {
        ev_kctx_fail(kc, rc, "%s", ev_strerror(rc));
    }
    ev_error *err = ev__error_new(kc->code, kc->message, ins->name, ins->site, w->thread_uid,
                                  w->stream_type, ins->seq);
    atomic_fetch_add_explicit(&vm->n_failed, 1, memory_order_relaxed);
    if (!err) {
        /* The failure must not be lost (its outputs would read as good):
         * record it as the worker's reserved EV_ENOMEM. */
        fprintf(stderr, "eagervm: out of memory recording the failure of %s: %s\n", ins->name,
                kc->message);
        err = w->oom_error;
        ev_error_ref(err);
    }
    poison_outputs(vm, ins, err);
    ev__vm_add_unreported(vm, err);
    ev__worker_remember_error(w, ins->seq, err);
    ev_error_unref(err);
}

/* Waits for seq, the instruction before ours on our lane, which its
 * submitter runs now: a kernel marked cheap, so poll before parking. */
static void wait_previous(ev_vm *vm, ev_worker *w, uint64_t seq)
{
    struct dep_probe probe = {w, seq};
    if (!spin_until(dep_ready, &probe, SPIN_BUSY_NEXT_NS, SPIN_DEP_NS, NULL)) {
        ev__wait_dep(vm, (ev_dep){w->uid, seq}, -1);
    }
}

/* Runs ins's kernel (or skips it for a poisoned input). Returns its status
 * (0 ran, 1 failed, 2 skipped), or -1 if it completes later: its kernel
 * handed over a poll function, now in ins->poll. Nothing is stored in the
 * instruction's last lines unless it completes later (those lines cost a
 * transfer per instruction otherwise). */
static int run_kernel(ev_vm *vm, ev_worker *w, ev_instr *ins, bool on_worker);

/* Runs ins's kernel once its dependencies are done, as run_kernel; *start
 * gets the profile's start tick. */
static int start_instr(ev_vm *vm, ev_worker *w, ev_instr *ins, int64_t *start)
{
    atomic_store_explicit(&w->running_name, ins->name, memory_order_relaxed);
    /* What ev_obj_release may count as finished from this thread: the
     * running instruction and those before it, but not one in flight. */
    ev__link *first = ev__fifo_peek(&w->inflight);
    uint64_t settled = first ? EV_CONTAINER_OF(first, ev_instr, free_link)->seq - 1 : ins->seq;
    atomic_store_explicit(&w->running_seq, settled, memory_order_relaxed);
    /* The instruction before may be running on its submitter (run_here):
     * the lane's order says wait for it. Otherwise it is done already: we
     * finished it, or, on a lane with work in flight, it is in flight. */
    if (ev__fifo_empty(&w->inflight) &&
        atomic_load_explicit(&w->completed, memory_order_relaxed) + 1 < ins->seq) {
        wait_previous(vm, w, ins->seq - 1);
    }
    wait_deps(vm, w, ins);
    *start = (ins->flags & EV_INSTR_PROFILE) ? ev__prof_ticks() : 0;
    return run_kernel(vm, w, ins, true);
}

static int run_kernel(ev_vm *vm, ev_worker *w, ev_instr *ins, bool on_worker)
{
    /* Checking inputs means reading each object's line, which the submitter
     * writes; skip it while no object of this runtime is poisoned. A poison
     * set by a producer is visible here: we run after it finished. */
    ev_error *poison = NULL;
    if (!(ins->flags & EV_INSTR_ALWAYS_RUN) &&
        atomic_load_explicit(&vm->n_poisoned, memory_order_acquire)) {
        poison = first_poisoned_input(ins);
    }
    if (poison) {
        atomic_fetch_add_explicit(&vm->n_skipped, 1, memory_order_relaxed);
        if (!(ins->flags & EV_INSTR_RELEASE)) {
            poison_outputs(vm, ins, poison);
        }
        ev__worker_remember_error(w, ins->seq, poison);
        return 2;
    }
    ev_kctx kc = {.w = w, .code = 0};
    /* Relaxed: read as a hint by large ops sharing the cores; the stores go
     * to a line only this worker writes (a submitter running a cheap
     * kernel leaves it alone). */
    if (on_worker) {
        atomic_store_explicit(&w->in_kernel, true, memory_order_relaxed);
    }
    int rc = ins->kernel(ins->arg, &kc);
    if (on_worker) {
        atomic_store_explicit(&w->in_kernel, false, memory_order_relaxed);
    }
    if (rc != 0) {
        record_failure(vm, w, ins, &kc, rc);
        return 1;
    }
    if (kc.poll) {
        ins->poll = kc.poll;
        ins->poll_state = kc.poll_state;
        return -1;
    }
    return 0;
}

/* What follows a finished instruction's kernel: its argument's drop, the
 * release it carries, its profile record. */
static void finish_instr(ev_vm *vm, ev_worker *w, ev_instr *ins, int64_t start_ticks,
                         int64_t end_ticks, int status)
{
    if (ins->arg_drop) {
        ins->arg_drop(ins->arg);
    }
    if (ins->flags & EV_INSTR_RELEASE) {
        ev__obj_free(vm, ins->operands[0].obj);
    }
    if (ins->flags & EV_INSTR_PROFILE) {
        ev__profile_record(w, ins, start_ticks, end_ticks, status);
    }
    release_storage(ins);
}

static void publish_done(ev_worker *w, uint64_t seq);

void ev__worker_run_here(ev_vm *vm, ev_worker *w, ev_instr *ins)
{
    int64_t start = (ins->flags & EV_INSTR_PROFILE) ? ev__prof_ticks() : 0;
    /* Never -1: ev_kctx_complete_later refuses on this lane. */
    int status = run_kernel(vm, w, ins, false);
    finish_instr(vm, w, ins, start, (ins->flags & EV_INSTR_PROFILE) ? ev__prof_ticks() : 0,
                 status);
    publish_done(w, ins->seq);
    /* Never queued, so no queue node refers to it: back to the submitters. */
    ev__atomic_lifo_push(&w->returned, &ins->free_link);
}

/* Publishes `seq` as finished and wakes whoever parked on it. */
static void publish_done(ev_worker *w, uint64_t seq)
{
    /* seq_cst exchange: releases the kernel's writes to whoever reads
     * `completed`, and orders this store before the load of n_waiters
     * against the waiter's increment-then-load (Dekker pairing). */
    atomic_exchange_explicit(&w->completed, seq, memory_order_seq_cst);
    if (atomic_load_explicit(&w->n_waiters, memory_order_seq_cst) &&
        seq >= atomic_load_explicit(&w->wake_at, memory_order_relaxed)) {
        /* Every waiter wakes, rechecks, and asks again for its own seq. */
        atomic_store_explicit(&w->wake_at, UINT64_MAX, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->done_epoch, 1, memory_order_release);
        ev__wake_all(&w->done_epoch);
    }
}

/* Hands finished instructions back to the submitters' free list in batches. */
static void flush_returned(ev_worker *w)
{
    if (ev__fifo_empty(&w->returned_local)) {
        return;
    }
    ev__atomic_lifo_push_all(&w->returned, &w->returned_local);
    w->returned_count = 0;
}

/* ------------------------------------------------------------ in flight */

#define INFLIGHT_OF(l) EV_CONTAINER_OF(l, ev_instr, free_link)

/* Gives an instruction no longer referenced back to the submitters. */
static void retire(ev_worker *w, ev_instr *ins)
{
    /* A list that knows its last node: walking 64 nodes to find it took a
     * few % of an instruction's time. */
    ev__fifo_push_front(&w->returned_local, &ins->free_link);
    if (++w->returned_count >= 64) {
        flush_returned(w);
    }
}

/* Queues ins, whose kernel ran (status < 0: it completes later), behind
 * the instructions in flight: it finishes after them. */
static void defer_finish(ev_worker *w, ev_instr *ins, int status, int64_t start)
{
    if (ev__fifo_empty(&w->inflight)) {
        w->idle_since = ev__now_ns();
    }
    ins->flags |= EV_INSTR_INFLIGHT | (status < 0 ? EV_INSTR_PENDING : 0);
    ins->status = status < 0 ? 0 : status;
    ins->start_ticks = start;
    ins->end_ticks = (ins->flags & EV_INSTR_PROFILE) && status >= 0 ? ev__prof_ticks() : 0;
    ev__fifo_push(&w->inflight, &ins->free_link);
    atomic_store_explicit(&w->n_inflight,
                          atomic_load_explicit(&w->n_inflight, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Finishes, in order, the instructions at the head of the in-flight list
 * that have completed. Only the first pending one is polled: one poll also
 * drives the work of those after it (as an MPI test progresses every
 * request). Returns whether any finished. */
static bool poll_inflight(ev_vm *vm, ev_worker *w)
{
    bool any = false;
    ev__link *l;
    while ((l = ev__fifo_peek(&w->inflight))) {
        ev_instr *ins = INFLIGHT_OF(l);
        if (ins->flags & EV_INSTR_PENDING) {
            ev_kctx kc = {.w = w, .code = 0};
            int r = ins->poll(ins->poll_state, &kc);
            if (r == 0) {
                break;
            }
            ins->flags &= ~(uint32_t)EV_INSTR_PENDING;
            if (ins->flags & EV_INSTR_PROFILE) {
                ins->end_ticks = ev__prof_ticks();
            }
            if (r < 0) {
                ins->status = 1;
                record_failure(vm, w, ins, &kc, r);
            }
        }
        ev__fifo_pop(&w->inflight);
        atomic_store_explicit(&w->n_inflight,
                              atomic_load_explicit(&w->n_inflight, memory_order_relaxed) - 1,
                              memory_order_relaxed);
        ins->flags &= ~(uint32_t)EV_INSTR_INFLIGHT;
        /* A release from its arg_drop may count it and those before it as
         * finished, not those still in flight after it. */
        atomic_store_explicit(&w->running_seq, ins->seq, memory_order_relaxed);
        finish_instr(vm, w, ins, ins->start_ticks, ins->end_ticks, ins->status);
        ev__flush_deferred(w);
        publish_done(w, ins->seq);
        if (ins->flags & EV_INSTR_RETIRED) {
            retire(w, ins);
        }
        any = true;
    }
    return any;
}

/* Pauses a worker whose instructions in flight have not completed yet:
 * busy at first (a collective over shared memory completes within
 * microseconds), then yielding, then sleeping in growing steps up to 1 ms,
 * so an idle wait costs no CPU. A push or ev_stream_notify ends a sleep;
 * for_work: return at once when work is queued (else only the in-flight
 * work matters, as when the next instruction waits for it). */
static void inflight_pause(ev_worker *w, bool for_work)
{
    int64_t waited = ev__now_ns() - w->idle_since;
    if (waited < 20000) {
        for (int k = 0; k < 32; k++) {
            ev__cpu_relax();
        }
        return;
    }
    if (waited < 200000) {
        sched_yield();
        return;
    }
    int64_t step = waited / 4 > 1000000 ? 1000000 : waited / 4;
    /* seq_cst pairs with ev__worker_push's exchange, as when parking idle. */
    atomic_store_explicit(&w->sleeping, 1, memory_order_seq_cst);
    if (!(for_work && ev__mpsc_maybe_nonempty(&w->head, &w->tail))) {
        ev__park(&w->sleeping, 1, step);
    }
    atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
}

int ev_stream_notify(ev_vm *vm, ev_stream stream)
{
    if (!vm || stream.device_type != EV_DEVICE_CPU || stream.device_index != 0 ||
        stream.type >= EV_STREAM_TYPE_COUNT || stream.thread_uid > vm->limit) {
        return ev__set_message(EV_EINVAL, "ev_stream_notify: no such stream in this runtime "
                               "(expected cpu:0, a known type and a uid up to the limit)");
    }
    ev_worker *w = atomic_load_explicit(&vm->workers[ev__lane_of(vm->limit, stream)],
                                        memory_order_acquire);
    if (w && atomic_exchange_explicit(&w->sleeping, 0, memory_order_seq_cst)) {
        ev__wake_one(&w->sleeping);
    }
    return 0;
}

/* Whether a node is linked after the queue node `last`. */
static bool link_ready(void *last)
{
    return ev__mpsc_next(last) != NULL;
}

EV_TLS_FAST ev_worker *ev__current_worker;

bool ev__on_worker_thread(void)
{
    return ev__current_worker != NULL;
}

ev_vm *ev__current_vm(void)
{
    return ev__current_worker ? ev__current_worker->vm : NULL;
}

int ev__vm_busy_workers(ev_vm *vm)
{
    /* All relaxed: a snapshot; nothing is read through it. A worker
     * waiting for a producer or polling for work does not count (it parks
     * soon). */
    uint32_t top = atomic_load_explicit(&vm->top_uid, memory_order_relaxed);
    int busy = 0;
    for (uint32_t u = 0; u < top && u < vm->n_lanes; u++) {
        /* acquire: pairs with worker_for's release, so the fields read
         * below are initialised. */
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
        if (w && atomic_load_explicit(&w->in_kernel, memory_order_relaxed)) {
            busy++;
        }
    }
    return busy;
}

static void *worker_main(void *p)
{
    ev_worker *w = p;
    ev__current_worker = w;
    ev_vm *vm = w->vm;
    char name[16];
    if (w->stream_type == EV_STREAM_COMPUTE) {
        snprintf(name, sizeof name, "ev-worker-%u", w->thread_uid);
    } else {
        snprintf(name, sizeof name, "ev-%s-%u", ev_stream_type_name(w->stream_type),
                 w->thread_uid);
    }
    pthread_setname_np(pthread_self(), name);

    for (;;) {
        ev_instr *retired = NULL;
        ev_instr *ins = queue_pop(w, &retired);
        if (ins) {
            /* The queue is usually deep: ask for the next instruction's
             * lines (written by a submitter on another core) while this one
             * runs. */
            ev__mpsc_link *after_link = ev__mpsc_next_hint(&ins->queue_link);
            if (after_link) {
                ev_instr *after = INSTR_OF(after_link);
                __builtin_prefetch(after);
                __builtin_prefetch((char *)after + EV_CACHELINE);
                __builtin_prefetch(after->inline_deps);
            }
            /* Where we run, for threads waiting on us (one load from rseq
             * data; stored only when it changed). */
            int cpu = sched_getcpu();
            if (cpu != atomic_load_explicit(&w->cpu, memory_order_relaxed)) {
                atomic_store_explicit(&w->cpu, cpu, memory_order_relaxed);
            }
            int64_t start;
            int status = start_instr(vm, w, ins, &start);
            if (status >= 0 && ev__fifo_empty(&w->inflight)) {
                finish_instr(vm, w, ins, start,
                             (ins->flags & EV_INSTR_PROFILE) ? ev__prof_ticks() : 0, status);
                /* Frees go over in batches, and all of them before the worker
                 * may idle: a waiter woken by this instruction then finds them. */
                if (w->defer_fill && !link_ready(&ins->queue_link)) {
                    ev__flush_deferred(w);
                }
                publish_done(w, ins->seq);
            } else {
                defer_finish(w, ins, status, start);
                if (poll_inflight(vm, w)) {
                    w->idle_since = ev__now_ns();
                }
            }
            /* After publishing: linking the retired instruction writes a
             * line its submitter wrote, and publish_done's exchange would
             * wait for that write while another thread waits for us. One
             * still in flight goes back when it finishes. */
            if (retired) {
                if (retired->flags & EV_INSTR_INFLIGHT) {
                    retired->flags |= EV_INSTR_RETIRED;
                } else {
                    retire(w, retired);
                }
            }
            continue;
        }
        if (!ev__fifo_empty(&w->inflight)) {
            if (poll_inflight(vm, w)) {
                w->idle_since = ev__now_ns();
            } else {
                inflight_pause(w, true);
            }
            continue;
        }
        flush_returned(w);
        atomic_store_explicit(&w->running_name, NULL, memory_order_relaxed);
        /* Poll the link the producer writes next, not its tail pointer,
         * so that spinning does not pull the producer's line away. */
        /* No busy phase when a thread waiting for this worker shares its CPU:
         * it can only see the result once we let it run. */
        int64_t busy = atomic_load_explicit(&w->waiter_cpu, memory_order_relaxed) ==
                               atomic_load_explicit(&w->cpu, memory_order_relaxed)
                           ? 0
                           : SPIN_BUSY_NS;
        if (spin_until(link_ready, ev__mpsc_head_node(&w->head), busy, SPIN_IDLE_NS, NULL) ||
            ev__mpsc_maybe_nonempty(&w->head, &w->tail)) {
            continue;
        }
        if (atomic_load_explicit(&w->stop, memory_order_acquire)) {
            break;
        }
        /* seq_cst pairs with ev__mpsc_push's exchange: either the producer
         * sees sleeping == 1 and wakes us, or we see its node below. */
        atomic_store_explicit(&w->sleeping, 1, memory_order_seq_cst);
        if (ev__mpsc_maybe_nonempty(&w->head, &w->tail) || atomic_load_explicit(&w->stop, memory_order_acquire)) {
            atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
            continue;
        }
        ev__park(&w->sleeping, 1, -1);
        /* Awake (woken, or asked to wake ahead, or spuriously): from here
         * on submitters queue work for us instead of running it. */
        atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
    }
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

int ev__worker_start(ev_vm *vm, uint32_t uid, ev_worker **out)
{
    /* uid is the lane; messages name the thread uid and stream type. */
    uint32_t tuid = ev__lane_uid(vm->limit, uid);
    const char *type = ev_stream_type_name(ev__lane_type(vm->limit, uid));
    void *mem = ev__aligned_malloc(EV_CACHELINE, sizeof(ev_worker));
    if (!mem) {
        return ev__set_message(EV_ENOMEM, "out of memory starting the %s worker of thread uid "
                               "%u", type, tuid);
    }
    ev_worker *w = memset(mem, 0, sizeof(ev_worker));
    char text[96];
    snprintf(text, sizeof text, "out of memory recording the failure of an instruction on "
             "thread uid %u", tuid);
    w->oom_error = ev__error_new(EV_ENOMEM, text, "instruction", NULL,
                                 tuid, ev__lane_type(vm->limit, uid), 0);
    w->seen_done = ev__calloc(vm->n_lanes, sizeof *w->seen_done);
    if (!w->oom_error || !w->seen_done) {
        ev_error_unref(w->oom_error);
        ev__free(w->seen_done);
        ev__free(mem);
        return ev__set_message(EV_ENOMEM, "out of memory starting the %s worker of thread uid "
                               "%u", type, tuid);
    }
    w->vm = vm;
    w->uid = uid;
    w->thread_uid = tuid;
    w->stream_type = ev__lane_type(vm->limit, uid);
    /* Relaxed: under submit_lock, the only writer; a scan that reads an old
     * bound misses a worker that has not run anything yet. */
    if (atomic_load_explicit(&vm->top_uid, memory_order_relaxed) < uid + 1) {
        atomic_store_explicit(&vm->top_uid, uid + 1, memory_order_relaxed);
    }
    ev__mpsc_init(&w->head, &w->tail, &w->stub);
    atomic_init(&w->cpu, -1);
    atomic_init(&w->waiter_cpu, -2);
    atomic_init(&w->wake_at, UINT64_MAX);
    pthread_mutex_init(&w->prof_lock, NULL);
    pthread_mutex_init(&w->recent_lock, NULL);
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        pthread_mutex_destroy(&w->prof_lock);
        pthread_mutex_destroy(&w->recent_lock);
        ev_error_unref(w->oom_error);
        ev__free(w->seen_done);
        ev__free(mem);
        return ev__set_message(EV_ETHREAD, "cannot start the %s worker of thread uid %u: %s",
                               type, tuid, strerror(rc));
    }
    *out = w;
    return 0;
}

/* Stops and frees a worker whose queue has drained. */
void ev__worker_stop(ev_worker *w)
{
    atomic_store_explicit(&w->stop, true, memory_order_release);
    atomic_store_explicit(&w->sleeping, 0, memory_order_seq_cst);
    ev__wake_one(&w->sleeping);
    pthread_join(w->thread, NULL);
    for (size_t i = 0; i < sizeof w->recent_errors / sizeof w->recent_errors[0]; i++) {
        ev_error_unref(w->recent_errors[i].err);
    }
    ev_error_unref(w->oom_error);
    ev__free(w->seen_done);
    if (w->defer_fill) {
        if (w->defer_fill->n) {
            ev__flush_deferred(w); /* ev_vm_destroy runs them next */
        } else {
            ev__free(w->defer_fill);
        }
    }
    ev__profile_free(w);
    pthread_mutex_destroy(&w->prof_lock);
    pthread_mutex_destroy(&w->recent_lock);
    ev__free(w);
}
