/* Profiling: per-worker chunks of instruction records, read back in one
 * array sorted by issue time. Costs nothing unless switched on. */
#include <stdlib.h>
#include <string.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

enum { CHUNK_RECORDS = 4096 };

/* Records of finished instructions; a worker's list of them (w->prof,
 * guarded by w->prof_lock) holds the newest first. */
typedef struct ev_prof_chunk {
    ev__link link;
    size_t n;
    ev_prof_record records[CHUNK_RECORDS];
} ev_prof_chunk;

void ev_vm_profile_enable(ev_vm *vm, int on)
{
    if (!vm) {
        return;
    }
    ev__lock_acquire(&vm->submit_lock);
    if (on && vm->prof_base_ns == 0) {
        vm->prof_base_ns = ev__now_ns();
        vm->prof_base_ticks = ev__prof_ticks();
    }
    atomic_store_explicit(&vm->profiling, on != 0, memory_order_relaxed);
    ev__lock_release(&vm->submit_lock);
}

/* Converts the records' tick stamps to nanoseconds, scaling by the ticks
 * and nanoseconds that passed since profiling was first switched on (the
 * longer the span, the finer the scale). */
static void ticks_to_ns(ev_vm *vm, ev_prof_record *r, size_t n)
{
    ev__lock_acquire(&vm->submit_lock);
    int64_t base_ns = vm->prof_base_ns, base_ticks = vm->prof_base_ticks;
    ev__lock_release(&vm->submit_lock);
    int64_t now_ns = ev__now_ns(), now_ticks = ev__prof_ticks();
    double scale = 1.0;
    if (now_ticks > base_ticks && now_ns > base_ns) {
        scale = (double)(now_ns - base_ns) / (double)(now_ticks - base_ticks);
    }
#if !defined(__x86_64__)
    scale = 1.0; /* ticks are nanoseconds already */
    base_ticks = base_ns;
#endif
    for (size_t i = 0; i < n; i++) {
        r[i].issue_ns = base_ns + (int64_t)((double)(r[i].issue_ns - base_ticks) * scale);
        r[i].start_ns = base_ns + (int64_t)((double)(r[i].start_ns - base_ticks) * scale);
        r[i].end_ns = base_ns + (int64_t)((double)(r[i].end_ns - base_ticks) * scale);
    }
}

#define CHUNK_OF(l) EV_CONTAINER_OF(l, ev_prof_chunk, link)

void ev__profile_record(ev_worker *w, const ev_instr *ins, int64_t start, int64_t end, int failed)
{
    pthread_mutex_lock(&w->prof_lock);
    ev__link *top = ev__lifo_peek(&w->prof);
    ev_prof_chunk *c = top ? CHUNK_OF(top) : NULL;
    if (!c || c->n == CHUNK_RECORDS) {
        c = ev__malloc(sizeof *c);
        if (!c) {
            pthread_mutex_unlock(&w->prof_lock);
            return; /* a lost record is better than a failed instruction */
        }
        c->n = 0;
        ev__lifo_push(&w->prof, &c->link);
    }
    c->records[c->n++] = (ev_prof_record){
        .name = ins->name,
        .site = ins->site,
        .stream = ins->stream,
        .seq = ins->seq,
        .issue_ns = ins->issue_ns,
        .start_ns = start,
        .end_ns = end,
        .failed = failed,
    };
    pthread_mutex_unlock(&w->prof_lock);
}

void ev__profile_free(ev_worker *w)
{
    ev__link *l;
    while ((l = ev__lifo_pop(&w->prof))) {
        ev__free(CHUNK_OF(l));
    }
}

static int by_issue(const void *a, const void *b)
{
    const ev_prof_record *x = a, *y = b;
    return (x->issue_ns > y->issue_ns) - (x->issue_ns < y->issue_ns);
}

int ev_vm_profile_take(ev_vm *vm, ev_prof_record **records_out, size_t *count_out)
{
    if (!vm || !records_out || !count_out) {
        return ev__set_message(EV_EINVAL, "ev_vm_profile_take: NULL argument");
    }
    *records_out = NULL;
    *count_out = 0;
    /* Waits without taking any error: a profile is not a sync point. */
    ev__wait_all(vm, -1);
    /* Each worker's chunks are counted, copied and freed under its lock in
     * one go, so records added meanwhile are neither lost nor duplicated. */
    ev_prof_record *out = NULL;
    size_t n = 0;
    for (uint32_t u = 0; u < vm->n_lanes; u++) {
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
        if (!w) {
            continue;
        }
        pthread_mutex_lock(&w->prof_lock);
        size_t mine = 0;
        for (ev__link *l = ev__lifo_peek(&w->prof); l; l = l->next) {
            mine += CHUNK_OF(l)->n;
        }
        ev_prof_record *grown = mine ? ev__realloc(out, (n + mine) * sizeof *out) : out;
        if (mine && !grown) {
            pthread_mutex_unlock(&w->prof_lock);
            ev__free(out);
            return ev__set_message(EV_ENOMEM,
                                   "ev_vm_profile_take: out of memory for %zu records",
                                   n + mine);
        }
        out = grown;
        for (ev__link *l = ev__lifo_peek(&w->prof); l; l = l->next) {
            ev_prof_chunk *c = CHUNK_OF(l);
            memcpy(out + n, c->records, c->n * sizeof *out);
            n += c->n;
        }
        ev__profile_free(w);
        pthread_mutex_unlock(&w->prof_lock);
    }
    if (n) {
        ticks_to_ns(vm, out, n);
        qsort(out, n, sizeof *out, by_issue);
    }
    *records_out = out;
    *count_out = n;
    return 0;
}
