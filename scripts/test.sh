#!/usr/bin/env bash
# Sets up, builds and runs every test: the C suite in the normal build
# (warnings are errors), under AddressSanitizer + UndefinedBehaviorSanitizer,
# and its concurrency tests under ThreadSanitizer (smaller stress sizes);
# coverage-guided fuzzing of the C API from a fixed seed; then the Python suite
# against an ASan/UBSan build of the module and, last,
# against the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

jobs=$(nproc)
build() { # dir, cmake options...
    local dir=$1
    shift
    cmake -S . -B "$dir" -DEV_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j"$jobs" >/dev/null
}

echo "== normal build"
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
ctest --test-dir build --output-on-failure --timeout 900

echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
build build-asan -DCMAKE_BUILD_TYPE=Debug -DEV_ASAN=ON -DEV_UBSAN=ON -DEV_BUILD_BENCH=OFF \
    -DEV_STRESS_SCALE=0.2
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure --timeout 1800

echo "== ThreadSanitizer (concurrency tests)"
build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEV_TSAN=ON -DEV_BUILD_BENCH=OFF \
    -DEV_STRESS_SCALE=0.1
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build-tsan -L concurrency --output-on-failure --timeout 1800

# A gate must not fail by luck: CI replays a fixed seed for a fixed number of
# inputs (as far as worker threads let coverage repeat). Exploring goes on
# in longer runs with fresh seeds: tests/fuzz/run.sh SECONDS.
echo "== libFuzzer on the C API, 60,000 inputs from seed 1"
bash tests/fuzz/run.sh 120 -seed=1 -runs=60000 2>&1 | tail -n 12

echo "== Python module under AddressSanitizer + UndefinedBehaviorSanitizer"
EAGERVM_SANITIZE=address,undefined,float-cast-overflow \
    /usr/bin/python3 setup.py -q build_ext --inplace --force >/dev/null
LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
    ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    PYTHONPATH="$PWD/python" /usr/bin/python3 -m pytest tests/python -q -p no:cacheprovider

echo "== Python module"
/usr/bin/python3 setup.py -q build_ext --inplace --force >/dev/null
PYTHONPATH="$PWD/python" /usr/bin/python3 -m pytest tests/python -q -p no:cacheprovider
