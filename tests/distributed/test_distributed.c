/* The distributed layer from C: the group's life, every collective on a few
 * dtypes against values computed here, Work handles, argument errors, and
 * the debug descriptors. Runs as one process (an MPI singleton: world size
 * 1) under CTest, and on 2 ranks under mpirun (test_distributed_np2). In a
 * build without MPI it checks that every entry point says so. */
#include <stdbool.h>

#include "eagervm/distributed.h"
#include "tensor/tensor_test.h"

/* Open MPI keeps its start-up allocations to the end: not our leaks. Its
 * plug-ins stay loaded (see main) and malloc stacks are unwound fully (the
 * libraries have no frame pointers), so its frames can be matched. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\n"
           "leak:libhwloc.so\nleak:libevent\nleak:mca_\nleak:ompi_\nleak:opal_\nleak:orte_\n";
}

static ev_pg *pg;
static int rank, world;

static ev_tensor *from_i32(const int32_t *v, int64_t n)
{
    ev_tensor *t;
    CHECK_OK(ev_from_host(&EX, EV_INT32, 1, &n, v, &t));
    return t;
}

static void read_back(ev_tensor *t, void *dst)
{
    CHECK_OK(ev_to_host(&EX, t, dst));
}

static void test_names(void)
{
    CHECK(!strcmp(ev_dist_op_name(EV_DIST_AVG), "avg"));
    CHECK(!strcmp(ev_dist_op_name(EV_DIST_OP_COUNT), "invalid"));
    CHECK(!strcmp(ev_coll_name(EV_COLL_REDUCE_SCATTER), "reduce_scatter"));
    CHECK(!strcmp(ev_coll_name(-1), "invalid"));
}

static void test_all_reduce(void)
{
    int32_t v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = i + rank;
    }
    static const int ops[] = {EV_DIST_SUM, EV_DIST_PRODUCT, EV_DIST_MIN, EV_DIST_MAX};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        ev_tensor *t = from_i32(v, 5);
        ev_dist_work *w = NULL;
        CHECK_OK(ev_all_reduce_(&EX, pg, t, ops[k], &w));
        CHECK_OK(ev_dist_work_wait(w, NULL));
        CHECK(ev_dist_work_is_completed(w));
        ev_dist_work_unref(w);
        int32_t got[5];
        read_back(t, got);
        for (int i = 0; i < 5; i++) {
            int64_t want = ops[k] == EV_DIST_PRODUCT ? 1 : 0;
            for (int r = 0; r < world; r++) {
                int64_t x = i + r;
                switch (ops[k]) {
                case EV_DIST_SUM:
                    want += x;
                    break;
                case EV_DIST_PRODUCT:
                    want *= x;
                    break;
                case EV_DIST_MIN:
                    want = r == 0 || x < want ? x : want;
                    break;
                default:
                    want = r == 0 || x > want ? x : want;
                }
            }
            CHECK_EQ(got[i], want);
        }
        ev_tensor_unref(t);
    }
    /* AVG on float64; bool's sum is an or. */
    int64_t n = 3;
    ev_tensor *f;
    CHECK_OK(ev_full(&EX, EV_FLOAT64, 1, &n, ev_scalar_float(rank + 1.0), &f));
    CHECK_OK(ev_all_reduce_(&EX, pg, f, EV_DIST_AVG, NULL));
    double fd[3];
    read_back(f, fd);
    CHECK(fd[0] == (world + 1) / 2.0 && fd[2] == fd[0]);
    ev_tensor_unref(f);
    ev_tensor *b;
    CHECK_OK(ev_full(&EX, EV_BOOL, 1, &n, ev_scalar_bool(rank == 0), &b));
    CHECK_OK(ev_all_reduce_(&EX, pg, b, EV_DIST_SUM, NULL));
    uint8_t bd[3];
    read_back(b, bd);
    CHECK_EQ(bd[1], 1);
    CHECK_OK(ev_all_reduce_(&EX, pg, b, EV_DIST_MIN, NULL));
    read_back(b, bd);
    CHECK_EQ(bd[1], 1);
    ev_tensor_unref(b);
}

static void test_broadcast_gather_scatter(void)
{
    int32_t v[4] = {rank, rank * 10, rank * 100, -rank};
    ev_tensor *t = from_i32(v, 4);
    CHECK_OK(ev_broadcast_(&EX, pg, t, world - 1, NULL));
    int32_t got[4];
    read_back(t, got);
    CHECK_EQ(got[1], (world - 1) * 10);
    ev_tensor_unref(t);

    t = from_i32(v, 4);
    int64_t big = 4 * (int64_t)world;
    ev_tensor *out;
    CHECK_OK(ev_empty(&EX, EV_INT32, 1, &big, &out));
    CHECK_OK(ev_all_gather_into(&EX, pg, out, t, NULL));
    int32_t *all = malloc(sizeof(int32_t) * (size_t)big);
    read_back(out, all);
    for (int r = 0; r < world; r++) {
        CHECK_EQ(all[4 * r + 2], r * 100);
    }
    /* Reduce-scatter of the gathered blocks: block `rank` summed over ranks. */
    ev_tensor *mine;
    int64_t four = 4;
    CHECK_OK(ev_empty(&EX, EV_INT32, 1, &four, &mine));
    CHECK_OK(ev_reduce_scatter_into(&EX, pg, mine, out, EV_DIST_SUM, NULL));
    read_back(mine, got);
    CHECK_EQ(got[1], world * rank * 10);
    free(all);
    ev_tensor_unref(mine);
    ev_tensor_unref(out);
    ev_tensor_unref(t);

    ev_dist_work *w = NULL;
    CHECK_OK(ev_barrier(&EX, pg, NULL, &w));
    CHECK_OK(ev_dist_work_wait(w, NULL));
    ev_dist_work_unref(w);
}

static void test_errors(void)
{
    int64_t n = 4, shape2[2] = {2, 3};
    ev_tensor *t, *m, *tr, *i64;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 1, &n, &t));
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 2, shape2, &m));
    CHECK_OK(ev_transpose(m, 0, 1, &tr));
    CHECK_OK(ev_zeros(&EX, EV_INT64, 1, &n, &i64));
    CHECK_EQ(ev_all_reduce_(&EX, NULL, t, EV_DIST_SUM, NULL), EV_ESTATE);
    CHECK_STR_CONTAINS(ev_last_message(), "not initialised");
    CHECK_EQ(ev_all_reduce_(&EX, pg, tr, EV_DIST_SUM, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "contiguous");
    CHECK_EQ(ev_all_reduce_(&EX, pg, i64, EV_DIST_AVG, NULL), EV_EVALUE);
    CHECK_STR_CONTAINS(ev_last_message(), "int64");
    CHECK_EQ(ev_all_reduce_(&EX, pg, t, 99, NULL), EV_EINVAL);
    CHECK_EQ(ev_broadcast_(&EX, pg, t, world, NULL), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "out of range");
    CHECK_EQ(ev_all_gather_into(&EX, pg, i64, t, NULL), EV_ETYPE);
    CHECK_EQ(ev_all_gather_into(&EX, pg, t, t, NULL), EV_EINVAL);
    CHECK_EQ(ev_reduce_scatter_into(&EX, pg, m, t, EV_DIST_SUM, NULL), EV_EINVAL);
    ev_pg *second = NULL;
    CHECK_EQ(ev_pg_create(test_vm, NULL, &second), EV_ESTATE);
    CHECK_STR_CONTAINS(ev_last_message(), "exists already");
    ev_pg_config bad = {.timeout_s = -1};
    CHECK_EQ(ev_pg_create(test_vm, &bad, &second), EV_EINVAL);
    ev_tensor_unref(t);
    ev_tensor_unref(m);
    ev_tensor_unref(tr);
    ev_tensor_unref(i64);
}

/* Many collectives in flight, their inputs made on other thread uids. */
static void test_in_flight(void)
{
    enum { K = 16 };
    ev_tensor *ts[K];
    int64_t n = 1000;
    for (int k = 0; k < K; k++) {
        ev_exec ex = EX;
        ex.thread_uid = (uint32_t)(k % 3);
        CHECK_OK(ev_full(&ex, EV_FLOAT32, 1, &n, ev_scalar_float(k + rank), &ts[k]));
        CHECK_OK(ev_all_reduce_(&ex, pg, ts[k], EV_DIST_MAX, NULL));
    }
    for (int k = 0; k < K; k++) {
        float v[1000];
        read_back(ts[k], v);
        CHECK(v[0] == (float)(k + world - 1) && v[999] == v[0]);
        ev_tensor_unref(ts[k]);
    }
}

static void test_without_mpi(void)
{
    ev_pg *p = NULL;
    CHECK_EQ(ev_pg_create(test_vm, NULL, &p), EV_ESTATE);
    CHECK_STR_CONTAINS(ev_last_message(), "without MPI");
    int64_t n = 2;
    ev_tensor *t;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT32, 1, &n, &t));
    CHECK_EQ(ev_all_reduce_(&EX, NULL, t, EV_DIST_SUM, NULL), EV_ESTATE);
    ev_tensor_unref(t);
}

int main(void)
{
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 0);
    test_setup();
    RUN_TEST(test_names);
    if (!ev_dist_available()) {
        RUN_TEST(test_without_mpi);
        test_teardown();
        return 0;
    }
    CHECK_OK(ev_pg_create(test_vm, NULL, &pg));
    rank = ev_pg_rank(pg);
    world = ev_pg_size(pg);
    RUN_TEST(test_all_reduce);
    RUN_TEST(test_broadcast_gather_scatter);
    RUN_TEST(test_errors);
    RUN_TEST(test_in_flight);
    ev_pg_destroy(pg);
    ev_pg *again = NULL;
    CHECK_EQ(ev_pg_create(test_vm, NULL, &again), EV_ESTATE);
    CHECK_STR_CONTAINS(ev_last_message(), "finalised");
    test_teardown();
    return 0;
}
