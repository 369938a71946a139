/* The distributed API of a build without MPI: every entry point fails with
 * EV_ESTATE saying so (CMake compiles this file instead of the MPI ones). */
#include "core/services.h"
#include "eagervm/distributed.h"

#define EV__NO_MPI(fn)                                                                  \
    ev__set_message(EV_ESTATE, "%s: eagervm was built without MPI (CMake did not find " \
                    "it at build time; install libopenmpi-dev and rebuild)", fn)

int ev_dist_available(void)
{
    return 0;
}

int ev_pg_create(ev_vm *vm, const ev_pg_config *cfg, ev_pg **out)
{
    (void)vm, (void)cfg, (void)out;
    return EV__NO_MPI("ev_pg_create");
}

void ev_pg_destroy(ev_pg *pg)
{
    (void)pg;
}

int ev_pg_rank(const ev_pg *pg)
{
    (void)pg;
    return 0;
}

int ev_pg_size(const ev_pg *pg)
{
    (void)pg;
    return 1;
}

int ev_dist_work_is_completed(const ev_dist_work *w)
{
    (void)w;
    return 1;
}

int ev_dist_work_wait(ev_dist_work *w, ev_error **err_out)
{
    (void)w, (void)err_out;
    return 0;
}

void ev_dist_work_unref(ev_dist_work *w)
{
    (void)w;
}

int ev_all_reduce_(const ev_exec *ex, ev_pg *pg, ev_tensor *t, int op, ev_dist_work **work_out)
{
    (void)ex, (void)pg, (void)t, (void)op, (void)work_out;
    return EV__NO_MPI("all_reduce");
}

int ev_broadcast_(const ev_exec *ex, ev_pg *pg, ev_tensor *t, int src, ev_dist_work **work_out)
{
    (void)ex, (void)pg, (void)t, (void)src, (void)work_out;
    return EV__NO_MPI("broadcast");
}

int ev_all_gather_into(const ev_exec *ex, ev_pg *pg, ev_tensor *out, ev_tensor *in,
                       ev_dist_work **work_out)
{
    (void)ex, (void)pg, (void)out, (void)in, (void)work_out;
    return EV__NO_MPI("all_gather");
}

int ev_reduce_scatter_into(const ev_exec *ex, ev_pg *pg, ev_tensor *out, ev_tensor *in, int op,
                           ev_dist_work **work_out)
{
    (void)ex, (void)pg, (void)out, (void)in, (void)op, (void)work_out;
    return EV__NO_MPI("reduce_scatter");
}

int ev_barrier(const ev_exec *ex, ev_pg *pg, ev_tensor *token, ev_dist_work **work_out)
{
    (void)ex, (void)pg, (void)token, (void)work_out;
    return EV__NO_MPI("barrier");
}
