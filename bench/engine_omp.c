/* OpenMP-task peer for bench/engine: the same four cases as eagervm, via depend(). */
#define _POSIX_C_SOURCE 200809L

#include "engine_peers.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Two threads because the benchmark machine (and the eagervm side) uses two. */
#define OMP_THREADS 2
/* Must match the eagervm side: task i of "independent" writes object i % 1024. */
#define INDEP_OBJECTS 1024
/* One writer, 64 readers, one writer per fan_out_in round. */
#define FAN_READERS 64
#define FAN_ROUND (FAN_READERS + 2)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Task bodies are empty; only the depend() addresses matter, so the objects
 * are plain chars whose addresses stand for the dependency objects. */
static char chain_obj;
static char indep_obj[INDEP_OBJECTS];
static char fan_obj;

static void run_chain(long n)
{
    for (long i = 0; i < n; i++) {
#pragma omp task depend(inout: chain_obj)
        {
        }
    }
}

static void run_independent(long n)
{
    for (long i = 0; i < n; i++) {
#pragma omp task depend(inout: indep_obj[i % INDEP_OBJECTS])
        {
        }
    }
}

static void run_fan(long rounds)
{
    for (long r = 0; r < rounds; r++) {
#pragma omp task depend(inout: fan_obj)
        {
        }
        for (int k = 0; k < FAN_READERS; k++) {
#pragma omp task depend(in: fan_obj)
            {
            }
        }
#pragma omp task depend(inout: fan_obj)
        {
        }
    }
}

double peer_omp_run(const char *case_name, long n)
{
    int which;
    long tasks;
    double t0;
    double t1;

    if (case_name == NULL || n <= 0) {
        return -1.0;
    }
    if (strcmp(case_name, "chain_same_stream") == 0) {
        which = 0;
        tasks = n;
    } else if (strcmp(case_name, "chain_cross_thread") == 0) {
        /* OpenMP cannot pin a task to a thread, so this is the plain chain on
         * two threads; edges cross threads only when the runtime happens to
         * move the next task to the other thread. */
        which = 0;
        tasks = n;
    } else if (strcmp(case_name, "independent") == 0) {
        which = 1;
        tasks = n;
    } else if (strcmp(case_name, "fan_out_in") == 0) {
        which = 2;
        tasks = n / FAN_ROUND;
        if (tasks < 1) {
            tasks = 1;
        }
    } else {
        return -1.0;
    }

    t0 = 0.0;
    t1 = 0.0;
    /* One producer thread creates every task (single); the other thread of
     * the team runs them. The clock is read inside single so that starting
     * the team is not counted, only task creation up to taskwait. */
#pragma omp parallel num_threads(OMP_THREADS)
    {
#pragma omp single
        {
            t0 = now_ns();
            if (which == 0) {
                run_chain(tasks);
            } else if (which == 1) {
                run_independent(tasks);
            } else {
                run_fan(tasks);
            }
#pragma omp taskwait
            t1 = now_ns();
        }
    }

    if (which == 2) {
        tasks *= FAN_ROUND;
    }
    return (t1 - t0) / (double)tasks;
}
