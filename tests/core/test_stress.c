/* Randomised stress: random programs over a few objects and up to 8 thread
 * uids, every instruction a small deterministic computation on its objects,
 * checked bit for bit against running the same program sequentially.
 * Objects are released and replaced along the way; their free callbacks
 * check the final value. EV_TEST_CONCURRENCY */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/engine_util.h"

enum { N_OBJECTS = 12, N_UIDS = 8, MAX_OPERANDS = 3 };

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: the program depends on the seed alone. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

typedef struct step {
    uint64_t id;
    uint32_t n;
    uint64_t *cells[MAX_OPERANDS];
    int access[MAX_OPERANDS];
} step;

/* The computation, run by the engine's kernel and by the reference alike. */
static void apply(const step *s)
{
    uint64_t h = s->id;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->access[i] & EV_READ) {
            h = mix(h, *s->cells[i]);
        }
    }
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->access[i] == EV_WRITE) {
            *s->cells[i] = mix(h, i);
        } else if (s->access[i] == EV_READ_WRITE) {
            *s->cells[i] = mix(h, *s->cells[i] + i);
        }
    }
}

static int step_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    apply(arg);
    return 0;
}

typedef struct slot {
    ev_obj *obj;
    uint64_t *cell; /* the engine's copy; freed by the release callback */
    uint64_t ref;   /* the sequential program's copy */
} slot;

typedef struct release_check {
    uint64_t *cell;
    uint64_t expect;
    _Atomic long *checked;
    _Atomic long *wrong;
} release_check;

static void check_on_release(void *data)
{
    release_check *rc = data;
    if (*rc->cell != rc->expect) {
        atomic_fetch_add(rc->wrong, 1);
    }
    atomic_fetch_add(rc->checked, 1);
    free(rc->cell);
    free(rc);
}

static void slot_new(ev_vm *vm, slot *s, uint64_t init)
{
    CHECK_OK(ev_obj_create(vm, &s->obj));
    s->cell = malloc(sizeof *s->cell);
    *s->cell = init;
    s->ref = init;
}

static void slot_release(ev_vm *vm, slot *s, _Atomic long *checked, _Atomic long *wrong)
{
    release_check *rc = malloc(sizeof *rc);
    *rc = (release_check){s->cell, s->ref, checked, wrong};
    CHECK_OK(ev_obj_release(vm, s->obj, check_on_release, rc));
}

static void run_program(uint64_t seed, long n_instr, uint32_t n_uids)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    slot slots[N_OBJECTS];
    uint64_t rng = seed;
    _Atomic long checked = 0, wrong = 0;
    long released = 0;
    for (int i = 0; i < N_OBJECTS; i++) {
        slot_new(vm, &slots[i], rng_next(&rng));
    }
    for (long k = 0; k < n_instr; k++) {
        uint64_t r = rng_next(&rng);
        if (r % 5000 == 0) {
            ev_stream bs = {EV_DEVICE_CPU, 0, EV_STREAM_BARRIER, 0, (uint32_t)(r >> 20) % n_uids};
            CHECK_OK(ev_submit_barrier(vm, bs, NULL, NULL, 0, "barrier", NULL));
            continue;
        }
        if (r % 997 == 1) {
            int i = (int)((r >> 16) % N_OBJECTS);
            slot_release(vm, &slots[i], &checked, &wrong);
            released++;
            slot_new(vm, &slots[i], r);
            continue;
        }
        step s = {.id = (uint64_t)k, .n = 1 + (uint32_t)((r >> 8) % MAX_OPERANDS)};
        ev_operand ops[MAX_OPERANDS];
        uint64_t *ref_cells[MAX_OPERANDS];
        int used[N_OBJECTS] = {0};
        uint32_t n = 0;
        for (uint32_t i = 0; i < s.n; i++) {
            int o = (int)(rng_next(&rng) % N_OBJECTS);
            if (used[o]) {
                continue; /* each object once per step keeps the kernel well defined */
            }
            used[o] = 1;
            static const int modes[] = {EV_READ, EV_READ, EV_WRITE, EV_READ_WRITE};
            s.access[n] = modes[rng_next(&rng) % 4];
            s.cells[n] = slots[o].cell;
            ref_cells[n] = &slots[o].ref;
            ops[n] = (ev_operand){slots[o].obj, s.access[n]};
            n++;
        }
        s.n = n;
        uint32_t uid = (uint32_t)((r >> 32) % n_uids);
        ev_instr_desc d = {.kernel = step_kernel,
                           .arg = &s,
                           .arg_size = sizeof s,
                           .stream = ev_cpu_stream(uid),
                           .operands = ops,
                           .n_operands = n,
                           .name = "step"};
        CHECK_OK(ev_submit(vm, &d, NULL));
        step ref = s;
        for (uint32_t i = 0; i < n; i++) {
            ref.cells[i] = ref_cells[i];
        }
        apply(&ref);
        /* Now and then a host wait in the middle of the program. */
        if (r % 20011 == 7) {
            int o = (int)((r >> 40) % N_OBJECTS);
            CHECK_OK(ev_wait_obj(vm, slots[o].obj, NULL));
            CHECK_EQ(*slots[o].cell, slots[o].ref);
        }
    }
    CHECK_OK(ev_synchronize(vm, NULL));
    for (int i = 0; i < N_OBJECTS; i++) {
        if (*slots[i].cell != slots[i].ref) {
            fprintf(stderr, "seed %llu: object %d is %llx, sequential run gave %llx\n",
                    (unsigned long long)seed, i, (unsigned long long)*slots[i].cell,
                    (unsigned long long)slots[i].ref);
            exit(1);
        }
        slot_release(vm, &slots[i], &checked, &wrong);
        released++;
    }
    ev_vm_destroy(vm);
    CHECK_EQ(atomic_load(&checked), released);
    CHECK_EQ(atomic_load(&wrong), 0);
}

int main(int argc, char **argv)
{
    long n = ev_test_scaled(argc > 1 ? atol(argv[1]) : 1000000);
    const uint64_t seeds[] = {1, 0xdeadbeef, 20261129};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        uint32_t uids = (uint32_t)(2 + i * 3); /* 2, 5 and 8 workers */
        fprintf(stderr, "-- seed %llu: %ld instructions over %u thread uids\n",
                (unsigned long long)seeds[i], n, uids);
        run_program(seeds[i], n, uids);
    }
    fprintf(stderr, "all passed\n");
    return 0;
}
