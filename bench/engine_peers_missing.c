/* Stand-ins for peers that were not found at build time: each reports
 * "unavailable" so bench_engine prints that instead of a figure. */
#include "engine_peers.h"

#ifndef EV_HAVE_OPENMP
double peer_omp_run(const char *case_name, long n)
{
    (void)case_name;
    (void)n;
    return -1;
}
#endif

#ifndef EV_HAVE_STARPU
int peer_starpu_init(void)
{
    return -1;
}

double peer_starpu_run(const char *case_name, long n)
{
    (void)case_name;
    (void)n;
    return -1;
}

void peer_starpu_shutdown(void)
{
}
#endif
