#!/usr/bin/env bash
# Sets up, builds, and runs the engine benchmark beside its peers (OpenMP
# tasks, StarPU): bench_engine [N] [N_OPENMP] [N_STARPU].
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target bench_engine >/dev/null
exec ./build/bench/bench_engine "$@"
