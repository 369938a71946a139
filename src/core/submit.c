/* Submission: dependency analysis on the issuing thread, instruction
 * allocation from slabs, barriers and object release. All of it runs under
 * vm->submit_lock; workers never take that lock. */
#include <string.h>

#define EV_ENGINE_INTERNALS /* a file of the engine (or its test) */
#include "core/internal.h"

enum { SLAB_INSTRS = 256, BACKPRESSURE_CHECK_EVERY = 256 };
/* After this many cheap instructions run by their submitters in a row, the
 * program is issuing a burst: wake the worker to take over the rest (in
 * parallel with the submitter), while a short burst never pays a wake. */
enum { RUN_HERE_WAKE_AFTER = 16 };

/* ------------------------------------------------------ deferred calls */

#define BATCH_OF(l) EV_CONTAINER_OF(l, ev__defer_batch, link)

void ev__flush_deferred(ev_worker *w)
{
    if (w->defer_fill && w->defer_fill->n) {
        ev__atomic_lifo_push(&w->vm->deferred, &w->defer_fill->link);
        w->defer_fill = NULL;
    }
}

void ev__call_deferred(ev_vm *vm, void (*fn)(void *p), void *p)
{
    ev_worker *self = ev__current_worker;
    if (!self || self->vm != vm) {
        fn(p);
        return;
    }
    ev__defer_batch *b = self->defer_fill;
    if (!b) {
        pthread_mutex_lock(&vm->spares_lock);
        ev__link *spare = ev__lifo_pop(&vm->defer_spares);
        pthread_mutex_unlock(&vm->spares_lock);
        b = spare ? BATCH_OF(spare) : NULL;
        if (!b) {
            b = ev__malloc(sizeof *b);
            if (!b) {
                fn(p); /* out of memory: free here, contended but correct */
                return;
            }
        }
        b->n = 0;
        self->defer_fill = b;
    }
    b->calls[b->n].fn = fn;
    b->calls[b->n].p = p;
    if (++b->n == EV__DEFER_BATCH) {
        ev__flush_deferred(self);
    }
}

void ev__run_deferred(ev_vm *vm)
{
    if (!ev__atomic_lifo_maybe_nonempty(&vm->deferred)) {
        return;
    }
    ev__lifo taken = ev__atomic_lifo_take_all(&vm->deferred);
    ev__link *l;
    while ((l = ev__lifo_pop(&taken))) {
        ev__defer_batch *b = BATCH_OF(l);
        for (uint32_t i = 0; i < b->n; i++) {
            b->calls[i].fn(b->calls[i].p);
        }
        b->n = 0;
        pthread_mutex_lock(&vm->spares_lock);
        ev__lifo_push(&vm->defer_spares, &b->link);
        pthread_mutex_unlock(&vm->spares_lock);
    }
}

/* Frees the spare batches (ev_vm_destroy, after the workers stopped). */
void ev__free_defer_spares(ev_vm *vm)
{
    ev__link *l;
    while ((l = ev__lifo_pop(&vm->defer_spares))) {
        ev__free(BATCH_OF(l));
    }
}

/* -------------------------------------------------------- instructions */

static int grow_slabs(ev_vm *vm)
{
    void **slabs = ev__realloc(vm->slabs, (vm->n_slabs + 1) * sizeof *slabs);
    if (!slabs) {
        return EV_ENOMEM;
    }
    vm->slabs = slabs;
    ev_instr *block = ev__aligned_malloc(EV_CACHELINE, SLAB_INSTRS * sizeof(ev_instr));
    if (!block) {
        return EV_ENOMEM;
    }
    vm->slabs[vm->n_slabs++] = block;
    for (int i = 0; i < SLAB_INSTRS; i++) {
        ev__lifo_push(&vm->free_instrs, &block[i].free_link);
    }
    return 0;
}

#define FREE_INSTR_OF(l) EV_CONTAINER_OF(l, ev_instr, free_link)

static ev_instr *instr_alloc(ev_vm *vm)
{
    if (ev__lifo_empty(&vm->free_instrs)) {
        /* Take back one worker's finished instructions, whole: walking the
         * list here would miss the cache once per node, as the worker wrote
         * them last. Start where the last drain stopped, to spread reuse. */
        for (uint32_t k = 0; k < vm->n_lanes && ev__lifo_empty(&vm->free_instrs); k++) {
            uint32_t u = (vm->drain_next + k) % vm->n_lanes;
            ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_relaxed);
            if (w) {
                vm->free_instrs = ev__atomic_lifo_take_all(&w->returned);
                vm->drain_next = u + 1;
            }
        }
        if (ev__lifo_empty(&vm->free_instrs) && grow_slabs(vm) != 0) {
            return NULL;
        }
    }
    ev_instr *ins = FREE_INSTR_OF(ev__lifo_pop(&vm->free_instrs));
    ev__link *next = ev__lifo_peek(&vm->free_instrs);
    if (next) {
        /* The next instruction's lines were last written by a worker: ask
         * for them now, for writing, so the next submit finds them here. */
        for (size_t off = 0; off < sizeof(ev_instr); off += EV_CACHELINE) {
            __builtin_prefetch((char *)FREE_INSTR_OF(next) + off, 1);
        }
    }
    return ins;
}

static void instr_unalloc(ev_vm *vm, ev_instr *ins)
{
    ev__lifo_push(&vm->free_instrs, &ins->free_link);
}

/* --------------------------------------------------------- dependencies */

/* Adds "wait for d" unless the lane's own order already covers it: on a
 * lane whose instructions may complete after their kernels return, order
 * of start is not order of completion, so its own edges are kept. */
static int add_dep(ev_vm *vm, ev_instr *ins, uint32_t uid, ev_dep d, uint32_t *cap)
{
    if (d.seq == 0) {
        return 0;
    }
    if (d.uid == uid) {
        vm->n_stream_edges++;
        if (!ev__lane_completes_later(vm->limit, uid)) {
            return 0;
        }
    }
    for (uint32_t i = 0; i < ins->n_deps; i++) {
        if (ins->deps[i].uid == d.uid) {
            if (ins->deps[i].seq < d.seq) {
                ins->deps[i].seq = d.seq;
            }
            return 0;
        }
    }
    if (ins->n_deps == *cap) {
        if (*cap >= 0x8000) {
            return EV_ENOMEM; /* n_deps is 16 bits; cannot happen below 32768 workers */
        }
        uint32_t ncap = *cap * 2;
        ev_dep *nd = ev__malloc(ncap * sizeof *nd);
        if (!nd) {
            return EV_ENOMEM;
        }
        memcpy(nd, ins->deps, ins->n_deps * sizeof *nd);
        if (ins->deps != ins->inline_deps) {
            ev__free(ins->deps);
        }
        ins->deps = nd;
        *cap = ncap;
    }
    vm->n_cross_edges += d.uid != uid;
    ins->deps[ins->n_deps++] = d;
    return 0;
}

/* Makes sure add_reader cannot fail for obj read on `lane`. Past the inline
 * slots, readers go in a table indexed by lane, as long as the lanes started
 * so far (most are never used: every stream type has its lanes). */
static int reserve_readers(ev_vm *vm, ev_obj *obj, uint32_t lane)
{
    if (obj->n_readers < EV_INLINE_READERS || lane < obj->more_cap) {
        return 0;
    }
    uint32_t top = atomic_load_explicit(&vm->top_uid, memory_order_relaxed);
    uint32_t cap = top > lane ? top : lane + 1;
    ev_dep *table = ev__realloc(obj->more_readers, cap * sizeof *table);
    if (!table) {
        return EV_ENOMEM;
    }
    memset(table + obj->more_cap, 0, (cap - obj->more_cap) * sizeof *table);
    obj->more_readers = table;
    obj->more_cap = cap;
    return 0;
}

static void add_reader(ev_obj *obj, ev_dep d)
{
    for (uint32_t i = 0; i < obj->n_readers; i++) {
        if (obj->readers[i].uid == d.uid) {
            obj->readers[i].seq = d.seq;
            return;
        }
    }
    if (obj->n_readers < EV_INLINE_READERS) {
        obj->readers[obj->n_readers++] = d;
        return;
    }
    /* Many reading workers: a table indexed by lane (seq 0 = none). */
    EV_ASSERT(obj->more_readers && d.uid < obj->more_cap);
    obj->more_readers[d.uid] = d;
}

static void clear_readers(ev_obj *obj)
{
    obj->n_readers = 0;
    if (obj->more_readers) {
        memset(obj->more_readers, 0, obj->more_cap * sizeof(ev_dep));
    }
}

/* Deps of an access: a read follows the last writer; a write also follows
 * every read since then. */
static int deps_of_access(ev_vm *vm, ev_instr *ins, uint32_t uid, const ev_obj *obj, int access,
                          uint32_t *cap)
{
    int rc = add_dep(vm, ins, uid, obj->last_writer, cap);
    if (rc == 0 && (access & EV_WRITE)) {
        for (uint32_t i = 0; i < obj->n_readers && rc == 0; i++) {
            rc = add_dep(vm, ins, uid, obj->readers[i], cap);
        }
        for (uint32_t i = 0; obj->more_readers && i < obj->more_cap && rc == 0; i++) {
            rc = add_dep(vm, ins, uid, obj->more_readers[i], cap);
        }
    }
    return rc;
}

/* ----------------------------------------------------------- validation */

static int check_stream(const ev_vm *vm, ev_stream s)
{
    if (s.device_type != EV_DEVICE_CPU || s.device_index != 0) {
        return ev__set_message(EV_EINVAL,
                               "stream device %s:%u is not available (only cpu:0 is built in)",
                               s.device_type == EV_DEVICE_CUDA ? "cuda" : "?",
                               (unsigned)s.device_index);
    }
    if (s.type >= EV_STREAM_TYPE_COUNT) {
        return ev__set_message(EV_EINVAL, "stream type %u is unknown (expected 0..%d)",
                               (unsigned)s.type, EV_STREAM_TYPE_COUNT - 1);
    }
    if (s.thread_uid > vm->limit) {
        return ev__set_message(EV_EINVAL,
                               "thread uid %u is out of range (expected 0..%u; "
                               "EAGERVM_WORKER_THREAD_LIMIT is %u)",
                               s.thread_uid, vm->limit, vm->limit);
    }
    return 0;
}

static int check_desc(const ev_vm *vm, const ev_instr_desc *d)
{
    if (!d || !d->kernel) {
        return ev__set_message(EV_EINVAL, "ev_submit: the instruction has no kernel");
    }
    if (d->arg_size && !d->arg) {
        return ev__set_message(EV_EINVAL, "ev_submit: arg is NULL but arg_size is %zu",
                               d->arg_size);
    }
    if (d->n_operands && !d->operands) {
        return ev__set_message(EV_EINVAL, "ev_submit: operands is NULL but n_operands is %zu",
                               d->n_operands);
    }
    if (d->n_operands > 0xffff) {
        return ev__set_message(EV_EINVAL, "ev_submit: %zu operands (at most 65535)",
                               d->n_operands);
    }
    for (size_t i = 0; i < d->n_operands; i++) {
        int a = d->operands[i].access;
        if (!d->operands[i].obj) {
            return ev__set_message(EV_EINVAL, "ev_submit: operand %zu has no object", i);
        }
        if (a != EV_READ && a != EV_WRITE && a != EV_READ_WRITE) {
            return ev__set_message(EV_EINVAL,
                                   "ev_submit: operand %zu has access %d (expected EV_READ, "
                                   "EV_WRITE or EV_READ_WRITE)",
                                   i, a);
        }
    }
    if (d->flags & ~(unsigned)EV_SUBMIT_MAY_RUN_HERE) {
        return ev__set_message(EV_EINVAL, "ev_submit: unknown flags 0x%x (expected a "
                               "combination of enum ev_submit_flags)",
                               d->flags & ~(unsigned)EV_SUBMIT_MAY_RUN_HERE);
    }
    return check_stream(vm, d->stream);
}

/* ------------------------------------------------------------- helpers */

static ev_worker *worker_for(ev_vm *vm, uint32_t uid, int *rc)
{
    ev_worker *w = atomic_load_explicit(&vm->workers[uid], memory_order_relaxed);
    if (!w) {
        *rc = ev__worker_start(vm, uid, &w);
        if (*rc != 0) {
            return NULL;
        }
        /* release: a worker that reads this slot sees the initialised worker. */
        atomic_store_explicit(&vm->workers[uid], w, memory_order_release);
        vm->workers_started++;
    }
    return w;
}

static uint64_t pending_now(ev_vm *vm)
{
    uint64_t n = 0;
    uint32_t top = atomic_load_explicit(&vm->top_uid, memory_order_relaxed);
    for (uint32_t u = 0; u < top; u++) {
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
        if (w) {
            n += atomic_load_explicit(&w->issued, memory_order_relaxed) -
                 atomic_load_explicit(&w->completed, memory_order_relaxed);
        }
    }
    return n;
}

/* Waits, without the lock, until the queued work drains to 3/4 of the limit
 * (a short wait keeps the burst of frees that follows it small):
 * each round waits (spin, then park) on the worker with the longest queue
 * until it has finished enough of it. */
static void wait_for_room(ev_vm *vm)
{
    atomic_fetch_add_explicit(&vm->n_backpressure, 1, memory_order_relaxed);
    for (;;) {
        uint64_t total = 0, longest = 0;
        ev_dep target = {0, 0};
        uint32_t top = atomic_load_explicit(&vm->top_uid, memory_order_relaxed);
        for (uint32_t u = 0; u < top; u++) {
            ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_acquire);
            if (!w) {
                continue;
            }
            uint64_t done = atomic_load_explicit(&w->completed, memory_order_acquire);
            uint64_t queued = atomic_load_explicit(&w->issued, memory_order_relaxed) - done;
            total += queued;
            if (queued > longest) {
                longest = queued;
                target = (ev_dep){u, done};
            }
        }
        uint64_t low = vm->max_pending - vm->max_pending / 4;
        if (total <= low) {
            return;
        }
        uint64_t excess = total - low;
        target.seq += excess < longest ? excess : longest;
        ev__wait_dep(vm, target, -1);
    }
}

static void maybe_wait_for_room(ev_vm *vm)
{
    /* Checking costs a read of every worker's counters, so do it now and then:
     * the limit is a memory bound, it need not be exact. */
    static EV_TLS_FAST uint32_t since_check;
    if (++since_check < BACKPRESSURE_CHECK_EVERY) {
        return;
    }
    since_check = 0;
    if (pending_now(vm) > vm->max_pending) {
        wait_for_room(vm);
    }
}

/* Copies a kernel argument into the instruction: the built-in ops pass 8
 * to 112 bytes, and at those sizes a library call costs more than the copy
 * (5% of a tiny op). Constant-size memcpy calls compile to plain moves; a
 * switch, not a loop, so the compiler does not turn it back into a call. */
static inline void copy_arg(unsigned char *d, const unsigned char *s, size_t n)
{
    if (n > EV_INLINE_ARG_SIZE) {
        memcpy(d, s, n);
        return;
    }
    _Static_assert(EV_INLINE_ARG_SIZE <= 12 * 16, "copy_arg's switch covers 12 chunks");
    size_t k = n / 16;
#define CHUNK(i) memcpy(d + 16 * ((i) - 1), s + 16 * ((i) - 1), 16)
    switch (k) {
    case 12: CHUNK(12); /* fall through */
    case 11: CHUNK(11); /* fall through */
    case 10: CHUNK(10); /* fall through */
    case 9: CHUNK(9); /* fall through */
    case 8: CHUNK(8); /* fall through */
    case 7: CHUNK(7); /* fall through */
    case 6: CHUNK(6); /* fall through */
    case 5: CHUNK(5); /* fall through */
    case 4: CHUNK(4); /* fall through */
    case 3: CHUNK(3); /* fall through */
    case 2: CHUNK(2); /* fall through */
    case 1: CHUNK(1); /* fall through */
    default: break;
    }
#undef CHUNK
    d += 16 * k, s += 16 * k;
    if (n & 8) {
        memcpy(d, s, 8);
        d += 8, s += 8;
    }
    if (n & 4) {
        memcpy(d, s, 4);
        d += 4, s += 4;
    }
    if (n & 2) {
        memcpy(d, s, 2);
        d += 2, s += 2;
    }
    if (n & 1) {
        *d = *s;
    }
}

/* Fills the common part of an instruction from a descriptor. */
static int instr_init(ev_instr *ins, const ev_instr_desc *d)
{
    ins->kernel = d->kernel;
    ins->arg_drop = d->arg_drop;
    ins->name = d->name ? d->name : "instruction";
    ins->site = d->site;
    ins->stream = d->stream;
    ins->n_deps = 0;
    ins->deps = ins->inline_deps;
    ins->flags = 0;
    ins->arg = ins->inline_arg;
    if (d->arg_size > EV_INLINE_ARG_SIZE) {
        ins->arg = ev__malloc(d->arg_size);
        if (!ins->arg) {
            return EV_ENOMEM;
        }
    }
    copy_arg(ins->arg, d->arg, d->arg_size);
    ins->n_operands = (uint16_t)d->n_operands;
    ins->operands = ins->inline_operands;
    if (d->n_operands > EV_INLINE_OPERANDS) {
        ins->operands = ev__malloc(d->n_operands * sizeof(ev_operand));
        if (!ins->operands) {
            if (ins->arg != ins->inline_arg) {
                ev__free(ins->arg);
            }
            return EV_ENOMEM;
        }
    }
    /* A loop, not memcpy: ops have one to three operands, and a library
     * call for 16-48 bytes costs more than the copy. */
    for (size_t i = 0; i < d->n_operands; i++) {
        ins->operands[i] = d->operands[i];
    }
    return 0;
}

static void instr_fini_unsubmitted(ev_vm *vm, ev_instr *ins)
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
    instr_unalloc(vm, ins);
}

/* Assigns the next seq of w, stamps profiling, and queues the instruction,
 * unless `here`: then the caller runs it (ev__worker_run_here). */
static void instr_push(ev_vm *vm, ev_worker *w, ev_instr *ins, bool here, ev_ticket *ticket_out)
{
    uint64_t seq = atomic_load_explicit(&w->issued, memory_order_relaxed) + 1;
    ins->seq = seq;
    if (atomic_load_explicit(&vm->profiling, memory_order_relaxed)) {
        ins->flags |= EV_INSTR_PROFILE;
        ins->issue_ns = ev__prof_ticks();
    }
    atomic_store_explicit(&w->issued, seq, memory_order_relaxed);
    vm->n_submitted++;
    if (here) {
        vm->n_ran_here++;
        if (++w->run_here_streak == RUN_HERE_WAKE_AFTER) {
            w->run_here_streak = 0;
            ev__worker_wake_ahead(w);
        }
    } else {
        ev__worker_push(w, ins);
    }
    if (ticket_out) {
        *ticket_out = (ev_ticket){w->thread_uid, seq, w->stream_type};
    }
}

/* Whether the submitter may run ins itself: it asked to, its worker is
 * parked with everything before it finished (so the lane's order holds),
 * and every producer it waits for is done. A worker that wakes meanwhile finds nothing
 * queued; one given a later instruction waits for this one (start_instr). */
static bool may_run_here(ev_vm *vm, ev_worker *w, const ev_instr_desc *d, const ev_instr *ins)
{
    if (!(d->flags & EV_SUBMIT_MAY_RUN_HERE) || !vm->run_here || ev__current_worker ||
        !atomic_load_explicit(&w->sleeping, memory_order_relaxed) ||
        ev__lane_completes_later(vm->limit, w->uid)) {
        return false;
    }
    /* acquire: what the finished instructions wrote is visible to the
     * kernel that runs here. */
    if (atomic_load_explicit(&w->completed, memory_order_acquire) !=
        atomic_load_explicit(&w->issued, memory_order_relaxed)) {
        return false;
    }
    for (uint32_t i = 0; i < ins->n_deps; i++) {
        if (!ev__dep_done(vm, ins->deps[i])) {
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------- released objects */

/* Past this many released objects, a submit or release that holds the lock
 * anyway frees those that are done: checking reads each worker's completed
 * count, a line the worker writes, so do it for many objects at once. */
enum { REAP_BATCH = 32 };

#define RELEASED_OF(l) EV_CONTAINER_OF(l, ev_obj, released_link)

static void free_released(ev_vm *vm, ev_obj *obj, ev_free_fn free_fn, void *data);

/* Unlinks every released object whose last access has finished and returns
 * them as a list. Caller holds submit_lock. */
static ev__lifo take_done_released(ev_vm *vm)
{
    ev__lifo done_list = {NULL};
    uint32_t n = 0;
    uint32_t top = atomic_load_explicit(&vm->top_uid, memory_order_relaxed);
    for (uint32_t u = 0; u < top; u++) {
        ev_worker *w = atomic_load_explicit(&vm->workers[u], memory_order_relaxed);
        if (!w || ev__fifo_empty(&w->released)) {
            continue;
        }
        /* acquire: the accesses' effects happen before the frees. */
        uint64_t completed = atomic_load_explicit(&w->completed, memory_order_acquire);
        ev__note_completed(w, completed);
        /* In release order, which is seq order but for releases racing on
         * several threads: one out of order only waits for the one before. */
        ev__link *l;
        while ((l = ev__fifo_peek(&w->released)) && RELEASED_OF(l)->released_seq <= completed) {
            ev__fifo_pop(&w->released);
            ev__lifo_push(&done_list, l);
            n++;
        }
    }
    if (n) {
        atomic_store_explicit(&vm->n_released,
                              atomic_load_explicit(&vm->n_released, memory_order_relaxed) - n,
                              memory_order_relaxed);
    }
    return done_list;
}

/* Runs the callbacks of objects from take_done_released, without the lock
 * (a callback may free memory, take the allocator's lock...). */
static void free_done_released(ev_vm *vm, ev__lifo *list)
{
    ev__link *l;
    while ((l = ev__lifo_pop(list))) {
        ev_obj *obj = RELEASED_OF(l);
        free_released(vm, obj, obj->free_fn, obj->free_data);
    }
}

void ev__reap_released(ev_vm *vm)
{
    if (!atomic_load_explicit(&vm->n_released, memory_order_relaxed)) {
        return;
    }
    ev__lock_acquire(&vm->submit_lock);
    ev__lifo done_list = take_done_released(vm);
    ev__lock_release(&vm->submit_lock);
    free_done_released(vm, &done_list);
}

/* Takes the done released objects if enough have gathered. Caller holds
 * submit_lock and passes the list to free_done_released after unlocking. */
static ev__lifo take_done_released_batch(ev_vm *vm)
{
    if (atomic_load_explicit(&vm->n_released, memory_order_relaxed) < REAP_BATCH) {
        return (ev__lifo){NULL};
    }
    return take_done_released(vm);
}

/* --------------------------------------------------------------- submit */

int ev_submit(ev_vm *vm, const ev_instr_desc *d, ev_ticket *ticket_out)
{
    if (!vm) {
        return ev__set_message(EV_EINVAL, "ev_submit: vm is NULL");
    }
    int rc = check_desc(vm, d);
    if (rc != 0) {
        return rc;
    }
    maybe_wait_for_room(vm);
    ev__run_deferred(vm);

    ev__lock_acquire(&vm->submit_lock);
    uint32_t uid = ev__lane_of(vm->limit, d->stream);
    ev_worker *w = worker_for(vm, uid, &rc);
    ev_instr *ins = w ? instr_alloc(vm) : NULL;
    if (!ins) {
        ev__lock_release(&vm->submit_lock);
        return w ? ev__set_message(EV_ENOMEM, "ev_submit: out of memory for an instruction") : rc;
    }
    if (instr_init(ins, d) != 0) {
        instr_unalloc(vm, ins);
        ev__lock_release(&vm->submit_lock);
        return ev__set_message(EV_ENOMEM, "ev_submit: out of memory copying %s", ins->name);
    }

    uint32_t cap = EV_INLINE_DEPS;
    rc = add_dep(vm, ins, uid, vm->barrier, &cap);
    for (uint32_t i = 0; i < ins->n_operands && rc == 0; i++) {
        rc = deps_of_access(vm, ins, uid, ins->operands[i].obj, ins->operands[i].access, &cap);
    }
    /* Reserve reader slots before changing any object, so an allocation
     * failure leaves every object as it was. */
    ev_dep me = {uid, atomic_load_explicit(&w->issued, memory_order_relaxed) + 1};
    for (uint32_t i = 0; i < ins->n_operands && rc == 0; i++) {
        if (ins->operands[i].access == EV_READ) {
            rc = reserve_readers(vm, ins->operands[i].obj, uid);
        }
    }
    if (rc != 0) {
        instr_fini_unsubmitted(vm, ins);
        ev__lock_release(&vm->submit_lock);
        return ev__set_message(rc, "ev_submit: out of memory analysing %s", ins->name);
    }
    /* Reads first, then writes: an object both read and written ends with
     * this instruction as its last writer and no readers. */
    for (uint32_t i = 0; i < ins->n_operands; i++) {
        if (ins->operands[i].access == EV_READ) {
            add_reader(ins->operands[i].obj, me);
        }
    }
    for (uint32_t i = 0; i < ins->n_operands; i++) {
        if (ins->operands[i].access & EV_WRITE) {
            ins->operands[i].obj->last_writer = me;
            clear_readers(ins->operands[i].obj);
        }
    }
    bool here = may_run_here(vm, w, d, ins);
    instr_push(vm, w, ins, here, ticket_out);
    ev__lifo done_list = take_done_released_batch(vm);
    ev__lock_release(&vm->submit_lock);
    free_done_released(vm, &done_list);
    if (here) {
        ev__worker_run_here(vm, w, ins);
    }
    return 0;
}

static int noop_kernel(void *arg, ev_kctx *kc)
{
    EV_UNUSED(arg);
    EV_UNUSED(kc);
    return 0;
}

int ev_submit_barrier(ev_vm *vm, ev_stream stream, ev_kernel_fn kernel, const void *arg,
                      size_t arg_size, const char *name, ev_ticket *ticket_out)
{
    if (!vm) {
        return ev__set_message(EV_EINVAL, "ev_submit_barrier: vm is NULL");
    }
    ev_instr_desc d = {
        .kernel = kernel ? kernel : noop_kernel,
        .arg = arg,
        .arg_size = arg_size,
        .stream = stream,
        .name = name ? name : "barrier",
    };
    int rc = check_desc(vm, &d);
    if (rc != 0) {
        return rc;
    }
    maybe_wait_for_room(vm);
    ev__lock_acquire(&vm->submit_lock);
    uint32_t lane = ev__lane_of(vm->limit, stream);
    ev_worker *w = worker_for(vm, lane, &rc);
    ev_instr *ins = w ? instr_alloc(vm) : NULL;
    if (!ins || instr_init(ins, &d) != 0) {
        if (ins) {
            instr_unalloc(vm, ins);
        }
        ev__lock_release(&vm->submit_lock);
        return w ? ev__set_message(EV_ENOMEM, "ev_submit_barrier: out of memory") : rc;
    }
    /* After everything issued so far on every worker: each worker finishes
     * in order, so its last issued seq stands for all of its work. */
    uint32_t cap = EV_INLINE_DEPS;
    rc = add_dep(vm, ins, lane, vm->barrier, &cap);
    uint32_t top = atomic_load_explicit(&vm->top_uid, memory_order_relaxed);
    for (uint32_t u = 0; u < top && rc == 0; u++) {
        ev_worker *o = atomic_load_explicit(&vm->workers[u], memory_order_relaxed);
        if (o) {
            rc = add_dep(vm, ins, lane,
                         (ev_dep){u, atomic_load_explicit(&o->issued, memory_order_relaxed)},
                         &cap);
        }
    }
    if (rc != 0) {
        instr_fini_unsubmitted(vm, ins);
        ev__lock_release(&vm->submit_lock);
        return ev__set_message(rc, "ev_submit_barrier: out of memory");
    }
    ins->flags |= EV_INSTR_ALWAYS_RUN;
    instr_push(vm, w, ins, false, ticket_out);
    vm->barrier = (ev_dep){lane, ins->seq};
    ev__lock_release(&vm->submit_lock);
    return 0;
}

/* -------------------------------------------------------------- objects */

int ev_obj_create(ev_vm *vm, ev_obj **out)
{
    if (!vm || !out) {
        return ev__set_message(EV_EINVAL, "ev_obj_create: vm and out must not be NULL");
    }
    ev_obj *obj = ev__cache_alloc(EV__CACHE_OBJ, sizeof *obj);
    if (!obj) {
        return ev__set_message(EV_ENOMEM, "ev_obj_create: out of memory");
    }
    /* Field by field: a memset of the struct costs more than the stores. */
    obj->last_writer = (ev_dep){0, 0};
    obj->n_readers = 0;
    obj->more_readers = NULL;
    obj->more_cap = 0;
    atomic_init(&obj->poison, NULL);
    obj->free_fn = NULL;
    obj->free_data = NULL;
    obj->released_link.next = NULL;
    *out = obj;
    return 0;
}

int ev_obj_create_after(ev_vm *vm, uint32_t uid, ev_obj **out)
{
    if (!vm || !out || uid > vm->limit) {
        return ev__set_message(EV_EINVAL, "ev_obj_create_after: vm and out must not be NULL "
                               "and uid (%u) at most %u", uid, vm ? vm->limit : 0);
    }
    int rc = ev_obj_create(vm, out);
    ev_worker *w = atomic_load_explicit(&vm->workers[uid], memory_order_acquire);
    if (rc == 0 && w) {
        /* As if the last instruction issued on uid had written the object.
         * Relaxed suffices: whatever the caller orders after (it saw the
         * instructions issued) is at or below this seq. */
        uint64_t seq = atomic_load_explicit(&w->issued, memory_order_relaxed);
        (*out)->last_writer = (ev_dep){seq ? uid : 0, seq};
    }
    return rc;
}

typedef struct release_arg {
    ev_free_fn fn;
    void *data;
} release_arg;

static int release_kernel(void *arg, ev_kctx *kc)
{
    EV_UNUSED(kc);
    release_arg *ra = arg;
    if (ra->fn) {
        ra->fn(ra->data);
    }
    return 0;
}

/* Frees an object whose accessors have all finished. */
static void free_released(ev_vm *vm, ev_obj *obj, ev_free_fn free_fn, void *data)
{
    if (free_fn) {
        free_fn(data);
    }
    ev__obj_free(vm, obj);
}

/* Calls fn on every access recorded on obj (writer, then readers). */
#define FOR_EACH_ACCESS(obj, d, body)                                          \
    do {                                                                       \
        if ((obj)->last_writer.seq) {                                          \
            ev_dep d = (obj)->last_writer;                                     \
            body;                                                              \
        }                                                                      \
        for (uint32_t i_ = 0; i_ < (obj)->n_readers; i_++) {                   \
            ev_dep d = (obj)->readers[i_];                                     \
            body;                                                              \
        }                                                                      \
        for (uint32_t i_ = 0; (obj)->more_readers && i_ < (obj)->more_cap; i_++) { \
            ev_dep d = (obj)->more_readers[i_];                                \
            if (d.seq) {                                                       \
                body;                                                          \
            }                                                                  \
        }                                                                      \
    } while (0)

/* Whether access d has finished, counting as finished the instruction the
 * calling worker runs now (a release from its arg_drop comes after its
 * kernel) and everything before it on that worker. */
static bool access_over(ev_vm *vm, ev_worker *self, ev_dep d)
{
    if (self && d.uid == self->uid &&
        d.seq <= atomic_load_explicit(&self->running_seq, memory_order_relaxed)) {
        return true;
    }
    return ev__dep_done(vm, d);
}

int ev_obj_pending_uid(ev_vm *vm, const ev_obj *obj, uint32_t *uid)
{
    if (!vm || !obj || !uid) {
        return ev__set_message(EV_EINVAL, "ev_obj_pending_uid: vm, obj and uid must not be "
                               "NULL");
    }
    ev_worker *self = ev__current_worker;
    if (self && self->vm != vm) {
        self = NULL;
    }
    /* No lock, as in ev_obj_release: no submit naming obj runs meanwhile.
     * A lane other than a compute stream counts as several: the caller
     * orders new work after a uid's compute stream only. */
    int where = 0;
    FOR_EACH_ACCESS(obj, d, {
        if (where < 2 && !access_over(vm, self, d)) {
            if (d.uid > vm->limit) {
                where = 2;
            } else if (where == 0) {
                *uid = d.uid;
                where = 1;
            } else if (d.uid != *uid) {
                where = 2;
            }
        }
    });
    return where;
}

int ev_obj_release(ev_vm *vm, ev_obj *obj, ev_free_fn free_fn, void *data)
{
    if (!obj) {
        return 0;
    }
    if (!vm) {
        return ev__set_message(EV_EINVAL, "ev_obj_release: vm is NULL");
    }
    ev_worker *self = ev__current_worker;
    if (self && self->vm != vm) {
        self = NULL;
    }
    /* No lock to read the accesses: every submit naming obj happened before
     * this call (the caller's contract), and none can come after it. */
    bool any = false, all_done = true, one_worker = true;
    uint32_t uid = 0;
    uint64_t last_seq = 0;
    FOR_EACH_ACCESS(obj, d, {
        uid = any ? uid : d.uid;
        any = true;
        one_worker &= d.uid == uid;
        last_seq = d.seq > last_seq ? d.seq : last_seq;
    });
    if (one_worker && any) {
        /* Decided without reading the worker's completed count, which it
         * writes after every instruction: a read would miss the cache. */
        ev_worker *w = atomic_load_explicit(&vm->workers[uid], memory_order_relaxed);
        all_done = (self && self == w &&
                    last_seq <= atomic_load_explicit(&self->running_seq, memory_order_relaxed)) ||
                   last_seq <= atomic_load_explicit(&w->completed_hint, memory_order_acquire);
    } else if (any) {
        one_worker = true;
        last_seq = 0;
        FOR_EACH_ACCESS(obj, d, {
            if (!access_over(vm, self, d)) {
                if (all_done) {
                    uid = d.uid;
                }
                one_worker &= d.uid == uid;
                last_seq = d.seq > last_seq ? d.seq : last_seq;
                all_done = false;
            }
        });
    }
    if (all_done) {
        free_released(vm, obj, free_fn, data);
        return 0;
    }
    ev__lock_acquire(&vm->submit_lock);
    if (one_worker) {
        /* The worker finishes in order: once it is past last_seq nothing
         * touches obj. Wait on its released list for a thread that submits
         * or waits to see that, instead of queueing a release instruction
         * for the worker to run (which costs as much as an op). */
        ev_worker *w = atomic_load_explicit(&vm->workers[uid], memory_order_relaxed);
        obj->free_fn = free_fn;
        obj->free_data = data;
        obj->released_seq = last_seq;
        ev__fifo_push(&w->released, &obj->released_link);
        atomic_store_explicit(&vm->n_released,
                              atomic_load_explicit(&vm->n_released, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        ev__lifo done_list = take_done_released_batch(vm);
        ev__lock_release(&vm->submit_lock);
        free_done_released(vm, &done_list);
        return 0;
    }
    /* The release runs on the worker of an unfinished accessor and waits for
     * every other one, so the callback never overlaps an instruction. */
    release_arg ra = {free_fn, data};
    ev_operand op = {obj, EV_WRITE};
    ev_instr_desc d = {
        .kernel = release_kernel,
        .arg = &ra,
        .arg_size = sizeof ra,
        .stream = ev__lane_stream(vm->limit, uid),
        .operands = &op,
        .n_operands = 1,
        .name = "release",
    };
    ev_worker *w = atomic_load_explicit(&vm->workers[uid], memory_order_relaxed);
    ev_instr *ins = instr_alloc(vm);
    uint32_t cap = EV_INLINE_DEPS;
    int rc = ins ? instr_init(ins, &d) : EV_ENOMEM;
    if (rc == 0) {
        rc = deps_of_access(vm, ins, uid, obj, EV_WRITE, &cap);
        if (rc != 0) {
            instr_fini_unsubmitted(vm, ins);
        }
    } else if (ins) {
        instr_unalloc(vm, ins);
    }
    if (rc != 0) {
        /* Out of memory: nothing else can free it safely, so wait here. On a
         * worker (a release from arg_drop), its own accesses are the running
         * instruction, whose kernel is over, or earlier ones: skip them. */
        ev__lock_release(&vm->submit_lock);
        FOR_EACH_ACCESS(obj, dep, {
            if (!self || dep.uid != self->uid) {
                ev__wait_dep(vm, dep, -1);
            }
        });
        free_released(vm, obj, free_fn, data);
        return 0;
    }
    ins->flags |= EV_INSTR_RELEASE | EV_INSTR_ALWAYS_RUN;
    instr_push(vm, w, ins, false, NULL);
    ev__lock_release(&vm->submit_lock);
    return 0;
}
