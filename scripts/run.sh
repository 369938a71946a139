#!/usr/bin/env bash
# The main job: sets up, builds, and runs the engine benchmark beside its
# peers (OpenMP tasks, StarPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target bench_engine >/dev/null
./build/bench/bench_engine "$@"
