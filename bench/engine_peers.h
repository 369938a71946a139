/* Peer runtimes (OpenMP tasks, StarPU) for the bench/engine comparison cases. */
#ifndef EAGERVM_BENCH_ENGINE_PEERS_H
#define EAGERVM_BENCH_ENGINE_PEERS_H

/* case_name is one of "chain_same_stream", "chain_cross_thread",
 * "independent", "fan_out_in". */

/* Each returns nanoseconds per task for the named case with n tasks
 * (rounds*66 for fan_out_in), or a negative value if the peer is
 * unavailable/failed. */
double peer_omp_run(const char *case_name, long n);
int peer_starpu_init(void);      /* 0 ok, -1 unavailable */
double peer_starpu_run(const char *case_name, long n);
void peer_starpu_shutdown(void);

#endif
