/* Where the time of bench_engine's chain_cross_thread goes. The chain
 * alternates between thread uids 0 and 1; each kernel stamps the time it ran
 * into an array. Per run it prints:
 *
 *   - ns per instruction, as bench_engine measures it;
 *   - the hand-off: the time from one kernel to the next (median, p10,
 *     p90), and the ns per instruction spent in hand-offs of each length;
 *     fast ones are the cross-core hand-off, 100 µs and more are the
 *     submitter's bursts (the chain waits while it refills the queue), and
 *     runs of 1-10 µs are workers sharing one CPU and handing over by
 *     context switch;
 *   - the involuntary context switches of each worker (/proc), how often a
 *     worker moved off a CPU it shared with its peer (ev_vm_stats), and the
 *     share of the machine's CPU time the hypervisor gave to other guests.
 *
 * Reading it: a slow run whose hand-off median is also up (250 ns instead
 * of 65 on the 2-vCPU VM) while switches and moves stay low is the machine:
 * its two CPUs are farther apart for a while (the host placed them on
 * different core complexes, no steal reported). Many involuntary switches
 * or 1-10 µs hand-offs point at scheduling in the runtime instead.
 *
 * Usage: chain_anatomy [N] [RUNS]   (defaults 1000000 and 3) */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eagervm/vm.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static int64_t *kernel_ticks; /* [i] = when kernel i ran */
static double ticks_per_ns = 1;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The stamp must cost little next to a ~60 ns hand-off: the TSC where
 * there is one (clock_gettime costs 20-40 ns in a VM). */
static int64_t ticks(void)
{
#if defined(__x86_64__)
    return (int64_t)__rdtsc();
#else
    return now_ns();
#endif
}

static void calibrate(void)
{
    int64_t n0 = now_ns(), t0 = ticks();
    while (now_ns() - n0 < 20000000) {
    }
    ticks_per_ns = (double)(ticks() - t0) / (double)(now_ns() - n0);
}

static int stamp_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    kernel_ticks[*(long *)arg] = ticks();
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Involuntary context switches of the thread named name, or -1. */
static long involuntary_switches(const char *name)
{
    DIR *dir = opendir("/proc/self/task");
    long found = -1;
    struct dirent *e;
    while (dir && (e = readdir(dir)) != NULL && found < 0) {
        char path[300], comm[64] = "", line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) {
            continue;
        }
        if (fgets(comm, sizeof comm, f)) {
            comm[strcspn(comm, "\n")] = 0;
        }
        fclose(f);
        if (strcmp(comm, name) != 0) {
            continue;
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) {
            sscanf(line, "nonvoluntary_ctxt_switches: %ld", &found);
        }
        if (f) {
            fclose(f);
        }
    }
    if (dir) {
        closedir(dir);
    }
    return found;
}

/* CPU time of the whole machine and the part the hypervisor stole (gave to
 * other guests), in clock ticks, from /proc/stat; zeros if unreadable. */
static void cpu_ticks(unsigned long long *total, unsigned long long *steal)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                     &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
        v[0] = v[1] = v[2] = v[3] = v[4] = v[5] = v[6] = v[7] = 0;
    }
    if (f) {
        fclose(f);
    }
    *total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    *steal = v[7];
}

static void die(const char *what)
{
    fprintf(stderr, "chain_anatomy: %s: %s\n", what, ev_last_message());
    exit(1);
}

static void run_once(long n)
{
    ev_vm *vm;
    ev_obj *obj;
    if (ev_vm_create(NULL, &vm) != 0 || ev_obj_create(vm, &obj) != 0) {
        die("setup");
    }
    long index = 0;
    ev_operand op = {obj, EV_READ_WRITE};
    ev_instr_desc d = {.kernel = stamp_kernel, .arg = &index, .arg_size = sizeof index,
                       .operands = &op, .n_operands = 1, .name = "stamp"};
    for (uint32_t u = 0; u < 2; u++) { /* start both workers */
        d.stream = ev_cpu_stream(u);
        if (ev_submit(vm, &d, NULL) != 0) {
            die("submit");
        }
    }
    ev_synchronize(vm, NULL);
    long sw0 = involuntary_switches("ev-worker-0"), sw1 = involuntary_switches("ev-worker-1");
    unsigned long long total0, steal0, total1, steal1;
    cpu_ticks(&total0, &steal0);

    int64_t t0 = now_ns();
    for (index = 0; index < n; index++) {
        d.stream = ev_cpu_stream((uint32_t)(index & 1));
        if (ev_submit(vm, &d, NULL) != 0) {
            die("submit");
        }
    }
    if (ev_synchronize(vm, NULL) != 0) {
        die("synchronize");
    }
    double total = (double)(now_ns() - t0) / (double)n;
    cpu_ticks(&total1, &steal1);
    double steal_pct = total1 > total0 ? 100.0 * (double)(steal1 - steal0) /
                                             (double)(total1 - total0) : 0;
    sw0 = involuntary_switches("ev-worker-0") - sw0;
    sw1 = involuntary_switches("ev-worker-1") - sw1;
    ev_vm_stats stats;
    ev_vm_get_stats(vm, &stats);

    static const int64_t edges[] = {150, 1000, 10000, 100000, INT64_MAX};
    static const char *const names[] = {"<150ns", "<1us", "<10us", "<100us", ">=100us"};
    enum { BUCKETS = sizeof edges / sizeof edges[0] };
    double in_bucket[BUCKETS] = {0};
    long count[BUCKETS] = {0};
    int64_t *gaps = malloc((size_t)n * sizeof *gaps);
    if (!gaps) {
        die("memory");
    }
    for (long i = 1; i < n; i++) {
        int64_t g = (int64_t)((double)(kernel_ticks[i] - kernel_ticks[i - 1]) / ticks_per_ns);
        gaps[i - 1] = g;
        int b = 0;
        while (g >= edges[b]) {
            b++;
        }
        in_bucket[b] += (double)g;
        count[b]++;
    }
    qsort(gaps, (size_t)(n - 1), sizeof *gaps, cmp_i64);
    printf("%.1f ns/instr; hand-off median %lld p10 %lld p90 %lld ns; involuntary switches "
           "%ld + %ld; moves off a shared CPU %llu; CPU stolen by the host %.1f%%\n"
           "  ns/instr in hand-offs", total, (long long)gaps[n / 2], (long long)gaps[n / 10],
           (long long)gaps[n * 9 / 10], sw0, sw1, (unsigned long long)stats.cpu_moves, steal_pct);
    for (int b = 0; b < BUCKETS; b++) {
        printf("  %s: %.1f (%ld)", names[b], in_bucket[b] / (double)n, count[b]);
    }
    printf("\n");
    free(gaps);
    ev_obj_release(vm, obj, NULL, NULL);
    ev_vm_destroy(vm);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 10 || runs < 1) {
        fprintf(stderr, "usage: chain_anatomy [N >= 10] [RUNS >= 1]\n");
        return 2;
    }
    kernel_ticks = malloc((size_t)n * sizeof *kernel_ticks);
    if (!kernel_ticks) {
        die("memory");
    }
    memset(kernel_ticks, 0, (size_t)n * sizeof *kernel_ticks); /* fault the pages in now */
    calibrate();
    printf("chain_cross_thread anatomy: %ld instructions, %d runs\n", n, runs);
    for (int r = 0; r < runs; r++) {
        run_once(n);
    }
    free(kernel_ticks);
    return 0;
}
