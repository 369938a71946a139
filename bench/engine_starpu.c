/* StarPU peer for bench/engine: the same four cases as eagervm, via data handles. */
#define _POSIX_C_SOURCE 200809L

#include "engine_peers.h"

/* StarPU 1.3 headers declare some functions as f() (no prototype); silence
 * that here so the bench builds warning-free without -isystem. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <starpu.h>
#pragma GCC diagnostic pop

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Two CPU workers because the benchmark machine (and eagervm side) has two. */
#define SP_WORKERS 2
/* Must match the eagervm side: task i of "independent" writes object i % 1024. */
#define INDEP_OBJECTS 1024
/* One writer, 64 readers, one writer per fan_out_in round. */
#define FAN_READERS 64
#define FAN_ROUND (FAN_READERS + 2)

static int sp_ready;
/* Worker ids of two CPU workers, for pinning the cross-thread chain; -1 when
 * fewer than two CPU workers exist (then the chain is left unpinned). */
static int sp_cpu_worker[2] = { -1, -1 };
/* Registered once at init so that registration is not part of the timing. */
static char sp_chain_obj;
static char sp_indep_obj[INDEP_OBJECTS];
static starpu_data_handle_t sp_chain_handle;
static starpu_data_handle_t sp_indep_handle[INDEP_OBJECTS];

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void empty_cpu(void *buffers[], void *cl_arg)
{
    (void)buffers;
    (void)cl_arg;
}

/* nbuffers is STARPU_VARIABLE_NBUFFERS so one codelet serves every access
 * mode; the mode comes from starpu_task_insert's arguments. No perfmodel, so
 * StarPU does no calibration. */
static struct starpu_codelet empty_cl = {
    .cpu_funcs = { empty_cpu },
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "eagervm_bench_empty",
};

int peer_starpu_init(void)
{
    struct starpu_conf conf;
    int cpus[SP_WORKERS];
    int ncpu;

    if (sp_ready) {
        return 0;
    }
    /* Without this StarPU prints its banner and warnings into bench output. */
    setenv("STARPU_SILENT", "1", 1);
    if (starpu_conf_init(&conf) != 0) {
        return -1;
    }
    conf.ncpus = SP_WORKERS;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    if (starpu_init(&conf) != 0) {
        return -1;
    }

    ncpu = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, cpus, SP_WORKERS);
    if (ncpu >= 2) {
        sp_cpu_worker[0] = cpus[0];
        sp_cpu_worker[1] = cpus[1];
    }

    starpu_variable_data_register(&sp_chain_handle, STARPU_MAIN_RAM,
                                  (uintptr_t)&sp_chain_obj, sizeof(sp_chain_obj));
    for (int i = 0; i < INDEP_OBJECTS; i++) {
        starpu_variable_data_register(&sp_indep_handle[i], STARPU_MAIN_RAM,
                                      (uintptr_t)&sp_indep_obj[i], sizeof(sp_indep_obj[i]));
    }
    /* StarPU 1.3 is built with non-blocking drivers: idle workers poll in a
     * tight loop and would eat both cores while eagervm or OpenMP is being
     * measured. Keep them paused except inside peer_starpu_run. */
    starpu_pause();
    sp_ready = 1;
    return 0;
}

void peer_starpu_shutdown(void)
{
    if (!sp_ready) {
        return;
    }
    /* Paused workers would never drain the queue, so resume first. */
    starpu_resume();
    starpu_task_wait_for_all();
    starpu_data_unregister(sp_chain_handle);
    for (int i = 0; i < INDEP_OBJECTS; i++) {
        starpu_data_unregister(sp_indep_handle[i]);
    }
    starpu_shutdown();
    sp_ready = 0;
}

static int run_chain(long n)
{
    for (long i = 0; i < n; i++) {
        if (starpu_task_insert(&empty_cl, STARPU_RW, sp_chain_handle, 0) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Alternates the chain between the two CPU workers so every RW edge crosses
 * threads, which is what eagervm's chain_cross_thread does with streams. */
static int run_chain_cross(long n)
{
    for (long i = 0; i < n; i++) {
        if (starpu_task_insert(&empty_cl, STARPU_RW, sp_chain_handle,
                               STARPU_EXECUTE_ON_WORKER, sp_cpu_worker[i & 1], 0) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Task i writes object i % 1024, i.e. 1024 chains of n/1024 tasks each, the
 * same rule as the eagervm side. */
static int run_independent(long n)
{
    for (long i = 0; i < n; i++) {
        if (starpu_task_insert(&empty_cl, STARPU_RW, sp_indep_handle[i % INDEP_OBJECTS], 0) != 0) {
            return -1;
        }
    }
    return 0;
}

static int run_fan(long rounds)
{
    for (long r = 0; r < rounds; r++) {
        if (starpu_task_insert(&empty_cl, STARPU_RW, sp_chain_handle, 0) != 0) {
            return -1;
        }
        for (int k = 0; k < FAN_READERS; k++) {
            if (starpu_task_insert(&empty_cl, STARPU_R, sp_chain_handle, 0) != 0) {
                return -1;
            }
        }
        if (starpu_task_insert(&empty_cl, STARPU_RW, sp_chain_handle, 0) != 0) {
            return -1;
        }
    }
    return 0;
}

double peer_starpu_run(const char *case_name, long n)
{
    long tasks = n;
    double t0;
    double t1;
    int rc;

    if (!sp_ready || case_name == NULL || n <= 0) {
        return -1.0;
    }
    /* Resumed before the clock starts: waking the workers is not per-task
     * cost, and the workers then run concurrently with submission as usual. */
    starpu_resume();
    t0 = now_ns();
    if (strcmp(case_name, "chain_same_stream") == 0) {
        rc = run_chain(n);
    } else if (strcmp(case_name, "chain_cross_thread") == 0) {
        /* Without two CPU workers there is nothing to alternate between. */
        rc = sp_cpu_worker[1] >= 0 ? run_chain_cross(n) : run_chain(n);
    } else if (strcmp(case_name, "independent") == 0) {
        rc = run_independent(n);
    } else if (strcmp(case_name, "fan_out_in") == 0) {
        long rounds = n / FAN_ROUND;
        if (rounds < 1) {
            rounds = 1;
        }
        tasks = rounds * FAN_ROUND;
        rc = run_fan(rounds);
    } else {
        starpu_pause();
        return -1.0;
    }
    /* Wait even after a failed insert so no task outlives this call. */
    starpu_task_wait_for_all();
    t1 = now_ns();
    starpu_pause();
    if (rc != 0) {
        return -1.0;
    }
    return (t1 - t0) / (double)tasks;
}
