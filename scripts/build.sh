#!/usr/bin/env bash
# Configures and builds one CMake build folder (the C library, its tests and
# benchmarks, and the Python module) and puts that folder's module next to
# python/eagervm/*.py, so PYTHONPATH=python imports exactly this build.
#   bash scripts/build.sh DIR [cmake options...]
# Each configuration gets its own folder (build, build-asan, ...); CMake
# recompiles whatever a changed option or flag touches, and configuring every
# time re-reads EAGERVM_NO_BLAS, so no object of another configuration is
# ever reused. The module is built for /usr/bin/python3 (Debian's).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/build.sh DIR [cmake options...]}
shift
mkdir -p "$dir"
cmake -S . -B "$dir" --no-warn-unused-cli -DPython3_EXECUTABLE=/usr/bin/python3 "$@" >"$dir/configure.log" 2>&1 || {
    cat "$dir/configure.log"
    exit 1
}
# Warnings of the configure step (no BLAS, no Python headers) are news.
grep -A4 "CMake Warning" "$dir/configure.log" || true
cmake --build "$dir" -j"$(nproc)" >/dev/null
rm -f python/eagervm/_C.*.so
for so in "$dir"/python/eagervm/_C.*.so; do
    if [ -e "$so" ]; then
        cp "$so" python/eagervm/
    fi
done
