/* ev_vm_destroy: it finishes every queued instruction (each kernel once, each
 * arg_drop once, in dependency order), runs every pending free callback once,
 * and only then returns; also right after create, and with releases still
 * pending. EV_TEST_CONCURRENCY */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/engine_util.h"

typedef struct opener {
    gate *g;
    int after_ms;
} opener;

static void *open_later(void *p)
{
    opener *o = p;
    sleep_ms(o->after_ms);
    gate_open(o->g);
    return NULL;
}

/* Shared by every queued instruction of the big test. */
typedef struct book {
    _Atomic unsigned char *ran;     /* [n]: kernel runs */
    _Atomic unsigned char *dropped; /* [n]: arg_drop calls */
    long *chain;                    /* [N_CHAINS]: steps seen so far, per object */
    _Atomic int out_of_order;
    _Atomic int freed[64 + 2];      /* free callbacks, per object */
    _Atomic int free_after_kernel;  /* a free callback ran before its last user */
    _Atomic int failed_runs, skipped_runs, side_drops;
} book;

enum { N_CHAINS = 61 }; /* prime: consecutive steps of a chain hop workers */

typedef struct step_arg {
    book *bk;
    long i;
} step_arg;

static int step_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    step_arg *a = arg;
    book *bk = a->bk;
    /* A little work, then an order check: step i is the (i / N_CHAINS)-th
     * write of chain i % N_CHAINS. */
    volatile uint64_t h = (uint64_t)a->i;
    for (int k = 0; k < 20; k++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
    }
    long c = a->i % N_CHAINS;
    if (bk->chain[c] != a->i / N_CHAINS) {
        atomic_store(&bk->out_of_order, 1);
    }
    bk->chain[c]++;
    atomic_fetch_add(&bk->ran[a->i], 1);
    return 0;
}

static void step_drop(void *arg)
{
    step_arg *a = arg;
    atomic_fetch_add(&a->bk->dropped[a->i], 1);
}

static int fail_kernel(void *arg, ev_kctx *kc)
{
    book *bk = *(book **)arg;
    atomic_fetch_add(&bk->failed_runs, 1);
    return ev_kctx_fail(kc, EV_EINDEX, "nobody waits for this failure");
}

static int skipped_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    book *bk = *(book **)arg;
    atomic_fetch_add(&bk->skipped_runs, 1);
    return 0;
}

static void side_drop(void *arg)
{
    book *bk = *(book **)arg;
    atomic_fetch_add(&bk->side_drops, 1);
}

typedef struct free_arg {
    book *bk;
    int index;
    long expect_steps; /* the chain's length when every user finished */
} free_arg;

static void on_free(void *data)
{
    free_arg *f = data;
    if (f->index < N_CHAINS && f->bk->chain[f->index] != f->expect_steps) {
        atomic_store(&f->bk->free_after_kernel, 1);
    }
    atomic_fetch_add(&f->bk->freed[f->index], 1);
}

static void test_destroy_with_work_queued(void)
{
    long n = ev_test_scaled(100000);
    ev_vm_config cfg = {.max_pending = 200000};
    ev_vm *vm;
    CHECK_OK(ev_vm_create(&cfg, &vm));
    book *bk = calloc(1, sizeof *bk);
    CHECK(bk != NULL);
    bk->ran = calloc((size_t)n, 1);
    bk->dropped = calloc((size_t)n, 1);
    bk->chain = calloc(N_CHAINS, sizeof(long));
    CHECK(bk->ran && bk->dropped && bk->chain);
    free_arg *fa = calloc(N_CHAINS + 2, sizeof *fa);
    CHECK(fa != NULL);

    gate g;
    gate_init(&g);
    gate *gp = &g;
    ev_obj *start, *chains[N_CHAINS], *failed;
    CHECK_OK(ev_obj_create(vm, &start));
    CHECK_OK(ev_obj_create(vm, &failed));
    for (int c = 0; c < N_CHAINS; c++) {
        CHECK_OK(ev_obj_create(vm, &chains[c]));
    }
    /* Everything below waits for the blocked first instruction. */
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, start, EV_WRITE, "blocked start");
    for (long i = 0; i < n; i++) {
        step_arg a = {bk, i};
        ev_operand ops[2] = {{start, EV_READ}, {chains[i % N_CHAINS], EV_READ_WRITE}};
        ev_instr_desc d = {.kernel = step_kernel,
                           .arg = &a,
                           .arg_size = sizeof a,
                           .arg_drop = step_drop,
                           .stream = ev_cpu_stream((uint32_t)(i % 4)),
                           .operands = ops,
                           .n_operands = 2,
                           .name = "step"};
        CHECK_OK(ev_submit(vm, &d, NULL));
    }
    /* A failure nobody waits for, and an instruction it poisons: destroy
     * must still drop the skipped one's argument and free the error. */
    ev_operand fops[2] = {{start, EV_READ}, {failed, EV_WRITE}};
    ev_instr_desc fd = {.kernel = fail_kernel,
                        .arg = &bk,
                        .arg_size = sizeof bk,
                        .arg_drop = side_drop,
                        .stream = ev_cpu_stream(2),
                        .operands = fops,
                        .n_operands = 2,
                        .name = "fails"};
    CHECK_OK(ev_submit(vm, &fd, NULL));
    ev_operand sops = {failed, EV_READ};
    ev_instr_desc sd = {.kernel = skipped_kernel,
                        .arg = &bk,
                        .arg_size = sizeof bk,
                        .arg_drop = side_drop,
                        .stream = ev_cpu_stream(3),
                        .operands = &sops,
                        .n_operands = 1,
                        .name = "poisoned"};
    CHECK_OK(ev_submit(vm, &sd, NULL));

    /* Release every object now: each free waits for its last user. */
    for (int c = 0; c < N_CHAINS; c++) {
        fa[c] = (free_arg){bk, c, (n - c + N_CHAINS - 1) / N_CHAINS};
        CHECK_OK(ev_obj_release(vm, chains[c], on_free, &fa[c]));
    }
    fa[N_CHAINS] = (free_arg){bk, N_CHAINS, 0};
    CHECK_OK(ev_obj_release(vm, start, on_free, &fa[N_CHAINS]));
    fa[N_CHAINS + 1] = (free_arg){bk, N_CHAINS + 1, 0};
    CHECK_OK(ev_obj_release(vm, failed, on_free, &fa[N_CHAINS + 1]));

    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    CHECK_EQ(atomic_load(&bk->ran[0]), 0);
    CHECK_GE(st.pending, (uint64_t)n); /* really queued, not run */
    CHECK_EQ(st.backpressure_waits, 0);
    for (int c = 0; c < N_CHAINS + 2; c++) {
        CHECK_EQ(atomic_load(&bk->freed[c]), 0);
    }

    opener o = {&g, 50};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, open_later, &o), 0);
    ev_vm_destroy(vm);
    /* Everything happened before destroy returned; the opener may still be
     * returning from gate_open, which touches nothing checked here. */
    for (long i = 0; i < n; i++) {
        if (atomic_load(&bk->ran[i]) != 1 || atomic_load(&bk->dropped[i]) != 1) {
            fprintf(stderr, "   step %ld: ran %d, dropped %d\n", i, atomic_load(&bk->ran[i]),
                    atomic_load(&bk->dropped[i]));
        }
        CHECK_EQ(atomic_load(&bk->ran[i]), 1);
        CHECK_EQ(atomic_load(&bk->dropped[i]), 1);
    }
    CHECK_EQ(atomic_load(&bk->out_of_order), 0);
    for (int c = 0; c < N_CHAINS; c++) {
        CHECK_EQ(bk->chain[c], fa[c].expect_steps);
    }
    for (int c = 0; c < N_CHAINS + 2; c++) {
        CHECK_EQ(atomic_load(&bk->freed[c]), 1);
    }
    CHECK_EQ(atomic_load(&bk->free_after_kernel), 0);
    CHECK_EQ(atomic_load(&bk->failed_runs), 1);
    CHECK_EQ(atomic_load(&bk->skipped_runs), 0);
    CHECK_EQ(atomic_load(&bk->side_drops), 2);
    CHECK_EQ(pthread_join(t, NULL), 0);
    gate_destroy(&g);
    free(fa);
    free(bk->ran);
    free(bk->dropped);
    free(bk->chain);
    free(bk);
}

static _Atomic int pending_freed;

static void count_free(void *data)
{
    (void)data;
    atomic_fetch_add(&pending_freed, 1);
}

static void test_destroy_right_after_create(void)
{
    ev_vm_destroy(NULL);
    for (int i = 0; i < 3; i++) {
        ev_vm *vm;
        CHECK_OK(ev_vm_create(NULL, &vm));
        if (i >= 1) {
            uint32_t uid;
            CHECK_OK(ev_vm_thread_acquire(vm, &uid)); /* still no thread */
        }
        if (i == 2) {
            ev_obj *obj;
            CHECK_OK(ev_obj_create(vm, &obj));
            /* Untouched: freed before the release returns. */
            CHECK_OK(ev_obj_release(vm, obj, count_free, NULL));
            CHECK_EQ(atomic_load(&pending_freed), 1);
            atomic_store(&pending_freed, 0);
        }
        ev_vm_stats st;
        ev_vm_get_stats(vm, &st);
        CHECK_EQ(st.workers_started, 0);
        ev_vm_destroy(vm);
    }
}

/* Objects released while their users are blocked: destroy runs the frees. */
static void test_destroy_with_release_pending(void)
{
    ev_vm *vm;
    CHECK_OK(ev_vm_create(NULL, &vm));
    gate g;
    gate_init(&g);
    gate *gp = &g;
    enum { OBJS = 8 };
    ev_obj *blocker, *objs[OBJS];
    CHECK_OK(ev_obj_create(vm, &blocker));
    submit1(vm, 1, gate_kernel, &gp, sizeof gp, blocker, EV_WRITE, "blocked");
    for (int i = 0; i < OBJS; i++) {
        CHECK_OK(ev_obj_create(vm, &objs[i]));
        /* Read the blocked output on uid 2 or 3, write the object. */
        ev_operand ops[2] = {{blocker, EV_READ}, {objs[i], EV_WRITE}};
        ev_instr_desc d = {.kernel = noop,
                           .stream = ev_cpu_stream((uint32_t)(2 + i % 2)),
                           .operands = ops,
                           .n_operands = 2,
                           .name = "user"};
        CHECK_OK(ev_submit(vm, &d, NULL));
        CHECK_OK(ev_obj_release(vm, objs[i], count_free, NULL));
    }
    CHECK_OK(ev_obj_release(vm, blocker, count_free, NULL));
    sleep_ms(10);
    CHECK_EQ(atomic_load(&pending_freed), 0);
    ev_vm_stats st;
    ev_vm_get_stats(vm, &st);
    /* An object used on one worker waits on that worker's released list;
     * the blocker, used on three, is released by an instruction. */
    CHECK_EQ(st.submitted, 1 + OBJS + 1);
    opener o = {&g, 50};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, open_later, &o), 0);
    ev_vm_destroy(vm);
    CHECK_EQ(atomic_load(&pending_freed), OBJS + 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    gate_destroy(&g);
}

int main(void)
{
    RUN_TEST(test_destroy_right_after_create);
    RUN_TEST(test_destroy_with_release_pending);
    RUN_TEST(test_destroy_with_work_queued);
    fprintf(stderr, "all passed\n");
    return 0;
}
