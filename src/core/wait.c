/* Host-side waits: for an object, an instruction, or everything; stall
 * reports when a wait lasts too long. Waits spin briefly, then park. */
#include <stdio.h>
#include <string.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

/* Waits for d, printing a stall report each time stall_timeout_ms passes.
 * Returns false only when deadline (absolute ns, or -1) passed. */
static bool host_wait(ev_vm *vm, ev_dep d, int64_t deadline)
{
    if (d.seq == 0) {
        return true;
    }
    /* Done already (the common case of a sync point): no clock read. */
    if (ev__dep_done(vm, d)) {
        ev__note_completed(atomic_load_explicit(&vm->workers[d.uid], memory_order_relaxed),
                           d.seq);
        return true;
    }
    for (;;) {
        int64_t step = -1;
        if (vm->stall_timeout_ms) {
            step = (int64_t)vm->stall_timeout_ms * 1000000;
        }
        if (deadline >= 0) {
            int64_t left = deadline - ev__now_ns();
            if (left <= 0) {
                return ev__dep_done(vm, d);
            }
            if (step < 0 || left < step) {
                step = left;
            }
        }
        if (ev__wait_dep(vm, d, step)) {
            /* Releases after this wait then know the work is over. */
            ev__note_completed(atomic_load_explicit(&vm->workers[d.uid], memory_order_relaxed),
                               d.seq);
            return true;
        }
        if (deadline >= 0 && ev__now_ns() >= deadline) {
            return false;
        }
        char report[4096];
        ev_vm_stall_report(vm, report, sizeof report);
        fprintf(stderr,
                "eagervm: a wait for instruction %u:%llu has lasted over %u ms "
                "(EAGERVM_STALL_TIMEOUT_MS)\n%s",
                d.uid, (unsigned long long)d.seq, vm->stall_timeout_ms, report);
    }
}

static int hand_out(ev_error *err, ev_error **err_out)
{
    atomic_store_explicit(&err->reported, 1, memory_order_relaxed);
    if (err_out) {
        ev_error_ref(err);
        *err_out = err;
    }
    return err->code == EV_EPOISON ? EV_EPOISON : err->code;
}

/* Absolute deadline for a timeout in ms (UINT32_MAX = none). */
static int64_t deadline_after(uint32_t timeout_ms)
{
    /* 0: a poll, whose deadline has passed already (0 ns), with no clock read. */
    return timeout_ms == UINT32_MAX ? -1
           : timeout_ms == 0        ? 0
                                    : ev__now_ns() + (int64_t)timeout_ms * 1000000;
}

int ev_wait_obj(ev_vm *vm, ev_obj *obj, ev_error **err_out)
{
    return ev_wait_obj_timeout(vm, obj, UINT32_MAX, err_out);
}

int ev_wait_obj_timeout(ev_vm *vm, ev_obj *obj, uint32_t timeout_ms, ev_error **err_out)
{
    if (err_out) {
        *err_out = NULL;
    }
    if (!vm || !obj) {
        return ev__set_message(EV_EINVAL, "ev_wait_obj: vm and obj must not be NULL");
    }
    ev__lock_acquire(&vm->submit_lock);
    ev_dep d = obj->last_writer;
    ev__lock_release(&vm->submit_lock);
    if (!host_wait(vm, d, deadline_after(timeout_ms))) {
        return ev__set_message(EV_ETIMEDOUT, "ev_wait_obj: not ready after %u ms", timeout_ms);
    }
    ev_error *err = atomic_load_explicit(&obj->poison, memory_order_acquire);
    if (!err) {
        return 0;
    }
    hand_out(err, err_out);
    char buf[512];
    ev_error_format(err, buf, sizeof buf);
    return ev__set_message(EV_EPOISON, "%s", buf);
}

int ev_wait_ticket(ev_vm *vm, ev_ticket t, ev_error **err_out)
{
    if (err_out) {
        *err_out = NULL;
    }
    if (!vm || t.thread_uid > vm->limit || t.stream_type >= EV_STREAM_TYPE_COUNT ||
        t.seq == 0) {
        return ev__set_message(EV_EINVAL, "ev_wait_ticket: not a ticket of this runtime");
    }
    uint32_t lane = ev__lane_of(vm->limit, (ev_stream){.type = t.stream_type,
                                                       .thread_uid = t.thread_uid});
    ev_worker *w = atomic_load_explicit(&vm->workers[lane], memory_order_acquire);
    if (!w || t.seq > atomic_load_explicit(&w->issued, memory_order_acquire)) {
        return ev__set_message(EV_EINVAL, "ev_wait_ticket: ticket %u:%llu was never issued (on "
                               "the %s stream)", t.thread_uid, (unsigned long long)t.seq,
                               ev_stream_type_name(t.stream_type));
    }
    host_wait(vm, (ev_dep){lane, t.seq}, -1);
    ev_error *found = NULL;
    pthread_mutex_lock(&w->recent_lock);
    for (size_t i = 0; i < sizeof w->recent_errors / sizeof w->recent_errors[0]; i++) {
        if (w->recent_errors[i].err && w->recent_errors[i].seq == t.seq) {
            found = w->recent_errors[i].err;
            ev_error_ref(found);
            break;
        }
    }
    pthread_mutex_unlock(&w->recent_lock);
    if (!found) {
        return 0;
    }
    int rc = hand_out(found, err_out);
    char buf[512];
    ev_error_format(found, buf, sizeof buf);
    ev_error_unref(found);
    return ev__set_message(rc, "%s", buf);
}

bool ev__wait_all(ev_vm *vm, int64_t deadline)
{
    ev__run_deferred(vm);
    /* Up to the highest started uid: a worker starts, under the submit lock,
     * before its first instruction is issued, so the bound is as fresh as
     * what it bounds. */
    uint32_t top = atomic_load_explicit(&vm->top_uid, memory_order_relaxed);
    for (uint32_t u = 0; u < top && u < vm->n_lanes; u++) {
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
        if (!w) {
            continue;
        }
        /* Anything issued before this call began was stored under the submit
         * lock that its issuer released, so this read sees it. */
        ev_dep d = {u, atomic_load_explicit(&w->issued, memory_order_acquire)};
        if (!host_wait(vm, d, deadline)) {
            return false;
        }
    }
    ev__run_deferred(vm); /* what the work waited for handed back */
    ev__reap_released(vm);
    return true;
}

/* Takes the earliest failure no wait has handed out yet. */
static ev_error *take_unreported(ev_vm *vm)
{
    /* No failure yet: nothing listed, and no lock taken. A worker counts a
     * failure before it lists it and before it marks the instruction done,
     * which the caller's wait has seen (acquire). */
    if (!atomic_load_explicit(&vm->n_failed, memory_order_relaxed)) {
        return NULL;
    }
    pthread_mutex_lock(&vm->err_lock);
    ev_error *e = NULL;
    ev__link *l;
    while ((l = ev__fifo_pop(&vm->unreported))) {
        e = EV_CONTAINER_OF(l, ev_error, unreported_link);
        e->listed = false;
        if (!atomic_load_explicit(&e->reported, memory_order_relaxed)) {
            break;
        }
        ev_error_unref(e);
        e = NULL;
    }
    pthread_mutex_unlock(&vm->err_lock);
    return e; /* the list's reference moves to the caller */
}

int ev_synchronize_timeout(ev_vm *vm, uint32_t timeout_ms, ev_error **err_out)
{
    if (err_out) {
        *err_out = NULL;
    }
    if (!vm) {
        return ev__set_message(EV_EINVAL, "ev_synchronize: vm is NULL");
    }
    if (!ev__wait_all(vm, deadline_after(timeout_ms))) {
        return ev__set_message(EV_ETIMEDOUT, "ev_synchronize: still busy after %u ms",
                               timeout_ms);
    }
    ev_error *err = take_unreported(vm);
    if (!err) {
        return 0;
    }
    int rc = hand_out(err, err_out);
    char buf[512];
    ev_error_format(err, buf, sizeof buf);
    ev_error_unref(err);
    return ev__set_message(rc, "%s", buf);
}

int ev_wait_all(ev_vm *vm, uint32_t timeout_ms)
{
    if (!vm) {
        return ev__set_message(EV_EINVAL, "ev_wait_all: vm is NULL");
    }
    if (!ev__wait_all(vm, deadline_after(timeout_ms))) {
        return ev__set_message(EV_ETIMEDOUT, "ev_wait_all: still busy after %u ms", timeout_ms);
    }
    return 0;
}

int ev_wait_thread(ev_vm *vm, uint32_t uid, uint32_t timeout_ms)
{
    if (!vm || uid > vm->limit) {
        return ev__set_message(EV_EINVAL, "ev_wait_thread: no thread uid %u in this runtime",
                               uid);
    }
    ev__run_deferred(vm);
    int64_t deadline = deadline_after(timeout_ms);
    /* Every stream of the uid: its compute lane and its lanes of other types. */
    for (uint32_t type = 0; type < EV_STREAM_TYPE_COUNT; type++) {
        uint32_t lane = type * (vm->limit + 1) + uid;
        ev_worker *w = atomic_load_explicit(&vm->workers[lane], memory_order_acquire);
        if (!w) {
            continue;
        }
        ev_dep d = {lane, atomic_load_explicit(&w->issued, memory_order_acquire)};
        if (!host_wait(vm, d, deadline)) {
            return ev__set_message(EV_ETIMEDOUT, "ev_wait_thread: thread %u still busy after "
                                   "%u ms", uid, timeout_ms);
        }
    }
    ev__run_deferred(vm);
    ev__reap_released(vm);
    return 0;
}

int ev_synchronize(ev_vm *vm, ev_error **err_out)
{
    return ev_synchronize_timeout(vm, UINT32_MAX, err_out);
}

/* ------------------------------------------------------------- stalls */

int ev_vm_stall_report(ev_vm *vm, char *buf, size_t size)
{
    if (!vm || (!buf && size)) {
        return ev__set_message(EV_EINVAL, "ev_vm_stall_report: vm is NULL or buf is NULL");
    }
    size_t len = 0;
#define APPEND(...)                                                                 \
    do {                                                                            \
        int n_ = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, \
                          __VA_ARGS__);                                             \
        if (n_ > 0) {                                                               \
            len += (size_t)n_;                                                      \
        }                                                                           \
    } while (0)
    if (size) {
        buf[0] = 0;
    }
    for (uint32_t u = 0; u < vm->n_lanes; u++) {
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
        if (!w) {
            continue;
        }
        uint64_t issued = atomic_load_explicit(&w->issued, memory_order_acquire);
        uint64_t done = atomic_load_explicit(&w->completed, memory_order_acquire);
        const char *name = atomic_load_explicit(&w->running_name, memory_order_relaxed);
        uint64_t seq = atomic_load_explicit(&w->running_seq, memory_order_relaxed);
        uint64_t wseq = atomic_load_explicit(&w->waiting_seq, memory_order_relaxed);
        uint32_t wuid = atomic_load_explicit(&w->waiting_uid, memory_order_relaxed);
        /* Instructions are named lane:seq; a compute stream's lane is its uid. */
        APPEND("  thread %u (cpu %s stream): %llu queued", w->thread_uid,
               ev_stream_type_name(w->stream_type), (unsigned long long)(issued - done));
        uint32_t in_flight = atomic_load_explicit(&w->n_inflight, memory_order_relaxed);
        if (in_flight) {
            APPEND(", %u in flight (started, not yet complete)", in_flight);
        }
        if (issued == done || !name) {
            APPEND(", idle\n");
        } else if (wseq && wseq > 0) {
            APPEND(", instruction %u:%llu '%s' waits for instruction %u:%llu\n", u,
                   (unsigned long long)seq, name, wuid, (unsigned long long)wseq);
        } else {
            APPEND(", running instruction %u:%llu '%s'\n", u, (unsigned long long)seq, name);
        }
    }
#undef APPEND
    return (int)len;
}
