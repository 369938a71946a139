/* All-reduce through eagervm (ev_all_reduce_ on the ccl stream: submit, the
 * non-blocking MPI call, the stream's polls, the host's wait) against a bare
 * blocking MPI_Allreduce of the same buffer, in one process:
 *   mpirun -np 2 build/bench/bench_allreduce [--repeats 21] [--sizes-kb 1024,4096,...]
 * A third side, MPI_Iallreduce and MPI_Wait on the main thread, is the
 * non-blocking algorithm eagervm starts without the engine around it: the
 * gap between it and MPI_Allreduce is the algorithm's, the rest eagervm's.
 * All sides reduce the same float32 buffer in place; they take turns
 * (which goes first rotates too), each run starts after an MPI_Barrier,
 * and rank 0 prints medians in µs and the ratios bare/eagervm (above 1:
 * eagervm faster). The bench initialises MPI itself (MPI_THREAD_SERIALIZED:
 * its main thread calls MPI only while eagervm's ccl thread is idle) and so
 * sets the libnbc all-reduce algorithm that ev_pg_create sets when it
 * initialises MPI. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eagervm/distributed.h"
#include "eagervm/tensor.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static int check(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "bench_allreduce: %s: %s\n", what, ev_last_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return rc;
}

int main(int argc, char **argv)
{
    int repeats = 21;
    char sizes_arg[256] = "1024,4096,16384,65536";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) {
            repeats = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sizes-kb") && i + 1 < argc) {
            snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--repeats N] [--sizes-kb 1024,4096,16384,65536]\n",
                    argv[0]);
            return 2;
        }
    }
    if (repeats < 1 || repeats > 1000) {
        fprintf(stderr, "bench_allreduce: --repeats must be 1..1000\n");
        return 2;
    }
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (provided < MPI_THREAD_SERIALIZED) {
        fprintf(stderr, "bench_allreduce: MPI gives thread level %d, below SERIALIZED\n",
                provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    ev_vm *vm = NULL;
    ev_pg *pg = NULL;
    check(ev_vm_create(NULL, &vm), "ev_vm_create");
    check(ev_pg_create(vm, NULL, &pg), "ev_pg_create");
    ev_exec ex = {vm, 0, NULL};
    if (rank == 0) {
        printf("all-reduce (sum, float32, in place) on %d ranks, median of %d, µs\n", world,
               repeats);
        printf("%8s %12s %12s %14s %8s %10s\n", "KB", "eagervm", "MPI", "MPI_Iallreduce",
               "ratio", "ratio(I)");
    }
    double *t_ev = malloc(sizeof(double) * (size_t)repeats);
    double *t_mpi = malloc(sizeof(double) * (size_t)repeats);
    double *t_nb = malloc(sizeof(double) * (size_t)repeats);
    for (char *tok = strtok(sizes_arg, ","); tok; tok = strtok(NULL, ",")) {
        int kb = atoi(tok);
        int64_t n = (int64_t)kb << 8; /* float32 elements */
        if (kb <= 0) {
            continue;
        }
        ev_tensor *t = NULL;
        check(ev_zeros(&ex, EV_FLOAT32, 1, &n, &t), "ev_zeros");
        check(ev_wait_obj(vm, ev_tensor_obj(t), NULL), "wait");
        float *buf = ev_tensor_data(t); /* the same memory on both sides */
        for (int rep = -2; rep < repeats; rep++) { /* two warm-up rounds */
            for (int turn = 0; turn < 3; turn++) {
                int side = (turn + rep + 3) % 3; /* 0 eagervm, 1 blocking, 2 non-blocking */
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                if (side == 0) {
                    check(ev_all_reduce_(&ex, pg, t, EV_DIST_SUM, NULL), "ev_all_reduce_");
                    check(ev_wait_obj(vm, ev_tensor_obj(t), NULL), "wait");
                } else if (side == 1) {
                    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD);
                } else {
                    MPI_Request req;
                    MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD, &req);
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                }
                double dt = MPI_Wtime() - t0;
                if (rep >= 0) {
                    double *times[] = {t_ev, t_mpi, t_nb};
                    times[side][rep] = dt;
                }
            }
        }
        /* Rank 0 reports the slowest rank's view: the collective ends there. */
        double me[3] = {median(t_ev, repeats), median(t_mpi, repeats), median(t_nb, repeats)};
        double worst[3];
        MPI_Reduce(me, worst, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%8d %12.1f %12.1f %14.1f %8.3f %10.3f\n", kb, worst[0] * 1e6,
                   worst[1] * 1e6, worst[2] * 1e6, worst[1] / worst[0], worst[2] / worst[0]);
            fflush(stdout);
        }
        ev_tensor_unref(t);
    }
    free(t_ev);
    free(t_mpi);
    free(t_nb);
    ev_pg_destroy(pg); /* does not finalise: this program initialised MPI */
    ev_vm_destroy(vm);
    MPI_Finalize();
    return 0;
}
