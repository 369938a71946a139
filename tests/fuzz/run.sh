#!/bin/sh
# Builds the libFuzzer harness into build-fuzz/ and fuzzes the C API for
# SECONDS (default 60) starting from a copy of tests/fuzz/corpus, so the
# committed seeds stay as they are. Fails (non-zero) on any crash, leak,
# timeout or sanitizer report; the reproducer lands in build-fuzz/artifacts/.
# Usage: tests/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
build="$root/build-fuzz"
cc=${CC:-$(command -v clang || command -v clang-14)}
cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
work="$build/corpus"
rm -rf "$work"
mkdir -p "$work" "$build/artifacts"
cp "$root"/tests/fuzz/corpus/* "$work"/
ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS
exec "$build/fuzz_api" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$@" "$work"
