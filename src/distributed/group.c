/* The process group: loading libmpi, MPI's init and finalize as instructions
 * on the ccl stream, the group's communicators and settings, and the names
 * of ops and collectives. Built only with MPI. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/dist-impl.h"

/* One group per process: MPI's world is a process resource. */
static _Atomic(ev_pg *) the_pg;
/* Set once MPI was finalised: it cannot be initialised again. */
static atomic_int mpi_finalized;

int ev_dist_available(void)
{
    return 1;
}

const char *ev__mpi_error_str(int mpi_rc, char *buf, size_t size)
{
    int len = 0;
    char s[MPI_MAX_ERROR_STRING];
    if (MPI_Error_string(mpi_rc, s, &len) != MPI_SUCCESS) {
        snprintf(s, sizeof s, "MPI error %d", mpi_rc);
    }
    snprintf(buf, size, "%s", s);
    return buf;
}

/* ----------------------------------------------------------------- config */

static int env_seconds(const char *name, double *out)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v > 0) || !isfinite(v)) {
        return ev__set_message(EV_EINVAL, "%s=%s is not a positive number of seconds", name, s);
    }
    *out = v;
    return 0;
}

static int env_flag(const char *name, int *out)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        return 0;
    }
    if (strcmp(s, "0") && strcmp(s, "1")) {
        return ev__set_message(EV_EINVAL, "%s=%s: expected 0 or 1", name, s);
    }
    *out = s[0] == '1';
    return 0;
}

/* Open MPI's plug-ins resolve symbols of libmpi: when libeagervm was loaded
 * with RTLD_LOCAL (a Python extension is), libmpi's symbols are not global
 * and MPI_Init fails to load them. Loading it again RTLD_GLOBAL promotes
 * them. A failure here is not one yet: a program linked to libmpi directly
 * does not need it. */
static void load_libmpi_global(void)
{
    static const char *const names[] = {"libmpi.so.40", "libmpi.so.12", "libmpi.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (dlopen(names[i], RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) ||
            dlopen(names[i], RTLD_NOW | RTLD_GLOBAL)) {
            return;
        }
    }
}

/* ------------------------------------------------------------ init, fini */

static int mpi_fail(ev_kctx *kc, const char *what, int mpi_rc)
{
    char msg[MPI_MAX_ERROR_STRING + 8];
    return ev_kctx_fail(kc, EV_EKERNEL, "%s failed: %s", what,
                        ev__mpi_error_str(mpi_rc, msg, sizeof msg));
}

static int init_kernel(void *arg, ev_kctx *kc)
{
    ev_pg *pg = *(ev_pg **)arg;
    int flag = 0;
    MPI_Finalized(&flag);
    if (flag) {
        return ev_kctx_fail(kc, EV_ESTATE, "MPI was finalised already in this process");
    }
    MPI_Initialized(&flag);
    if (!flag) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            return ev_kctx_fail(kc, EV_EKERNEL, "MPI_Init_thread failed (error %d)", rc);
        }
        pg->mpi_owned = 1;
        if (provided < MPI_THREAD_FUNNELED) {
            return ev_kctx_fail(kc, EV_EKERNEL,
                                "MPI provides thread level %d, below MPI_THREAD_FUNNELED",
                                provided);
        }
    }
    /* Errors come back as codes: a lost peer must fail a collective, not
     * abort the process. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &pg->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &pg->size);
    MPI_Comm *comms[] = {&pg->data, &pg->check, &pg->beat};
    for (size_t i = 0; i < 3; i++) {
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, comms[i]);
        if (rc != MPI_SUCCESS) {
            return mpi_fail(kc, "MPI_Comm_dup", rc);
        }
        MPI_Comm_set_errhandler(*comms[i], MPI_ERRORS_RETURN);
    }
    pg->last = ev__calloc((size_t)pg->size, sizeof *pg->last);
    if (!pg->last) {
        return ev_kctx_fail(kc, EV_ENOMEM, "out of memory for %d ranks", pg->size);
    }
    return 0;
}

static int fini_kernel(void *arg, ev_kctx *kc)
{
    (void)kc;
    ev_pg *pg = *(ev_pg **)arg;
    if (pg->broken) {
        /* A collective of the lost peer may still be posted: any MPI call
         * could progress it into freed memory, and freeing the
         * communicators or finalising could wait for the peer forever. */
        return 0;
    }
    ev__beat_drain(pg);
    ev__beat_free_all(pg);
    MPI_Comm *comms[] = {&pg->data, &pg->check, &pg->beat};
    for (size_t i = 0; i < 3; i++) {
        if (*comms[i] != MPI_COMM_NULL) {
            MPI_Comm_free(comms[i]);
        }
    }
    if (pg->mpi_owned) {
        MPI_Finalize();
        atomic_store_explicit(&mpi_finalized, 1, memory_order_relaxed);
    }
    return 0;
}

/* Runs kernel on ev_dist_stream() and waits for it; a failure's message
 * becomes the calling thread's. */
static int run_on_stream(ev_pg *pg, ev_kernel_fn kernel, const char *name)
{
    ev_instr_desc d = {
        .kernel = kernel,
        .arg = &pg,
        .arg_size = sizeof pg,
        .stream = ev_dist_stream(),
        .name = name,
    };
    ev_ticket ticket;
    int rc = ev_submit(pg->vm, &d, &ticket);
    if (rc) {
        return rc;
    }
    ev_error *err = NULL;
    rc = ev_wait_ticket(pg->vm, ticket, &err);
    if (rc && err) {
        ev_error_info info;
        ev_error_get(err, &info);
        rc = ev__set_message(info.code, "%s: %s", name, info.message);
        ev_error_unref(err);
    } else if (rc) {
        rc = ev__set_message(rc, "%s: %s", name, ev_strerror(rc));
    }
    return rc;
}

int ev_pg_create(ev_vm *vm, const ev_pg_config *cfg, ev_pg **out)
{
    if (!vm || !out) {
        return ev__set_message(EV_EINVAL, "ev_pg_create: %s is NULL", !vm ? "vm" : "out");
    }
    double timeout_s = cfg && cfg->timeout_s > 0 ? cfg->timeout_s : 0;
    int debug = cfg ? cfg->debug : 0;
    int rc = 0;
    if (cfg && (cfg->timeout_s < 0 || !isfinite(cfg->timeout_s))) {
        return ev__set_message(EV_EINVAL, "ev_pg_create: timeout_s is %g, expected > 0 "
                               "(or 0 for the default)", cfg->timeout_s);
    }
    if (timeout_s == 0) {
        timeout_s = 300;
        if ((rc = env_seconds("EAGERVM_COLLECTIVE_TIMEOUT", &timeout_s))) {
            return rc;
        }
    }
    if (debug == 0 && (rc = env_flag("EAGERVM_DISTRIBUTED_DEBUG", &debug))) {
        return rc;
    }
    if (atomic_load_explicit(&mpi_finalized, memory_order_relaxed)) {
        return ev__set_message(EV_ESTATE, "MPI was finalised by an earlier destroy; MPI "
                               "cannot be initialised twice in one process");
    }
    ev_pg *pg = ev__calloc(1, sizeof *pg);
    if (!pg) {
        return ev__set_message(EV_ENOMEM, "ev_pg_create: out of memory");
    }
    pg->vm = vm;
    pg->timeout_s = timeout_s;
    pg->debug = debug > 0;
    pg->data = pg->check = pg->beat = MPI_COMM_NULL;
    ev_pg *none = NULL;
    /* acq_rel: a group made after a destroy sees that destroy's writes. */
    if (!atomic_compare_exchange_strong_explicit(&the_pg, &none, pg, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        ev__free(pg);
        return ev__set_message(EV_ESTATE, "a process group exists already "
                               "(destroy it first)");
    }
    load_libmpi_global();
    /* libnbc's default all-reduce for large buffers is half as fast as the
     * blocking one; its Rabenseifner algorithm matches it (bench/allreduce).
     * Read by MPI_Init; a value the user set is kept. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    rc = run_on_stream(pg, init_kernel, "init_process_group");
    if (rc) {
        /* MPI is left as it is (it may be half up): no finalise. */
        ev__free(pg->last);
        ev__free(pg);
        atomic_store_explicit(&the_pg, NULL, memory_order_release);
        return rc;
    }
    *out = pg;
    return 0;
}

void ev_pg_destroy(ev_pg *pg)
{
    if (!pg) {
        return;
    }
    ev_wait_all(pg->vm, UINT32_MAX);
    run_on_stream(pg, fini_kernel, "destroy_process_group");
    ev__free(pg->last);
    ev__free(pg);
    /* release: the next create sees this group's end. */
    atomic_store_explicit(&the_pg, NULL, memory_order_release);
}

int ev_pg_rank(const ev_pg *pg)
{
    return pg ? pg->rank : 0;
}

int ev_pg_size(const ev_pg *pg)
{
    return pg ? pg->size : 1;
}
