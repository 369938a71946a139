#!/usr/bin/env bash
# Builds the normal configuration into build/ (scripts/build.sh, which puts
# the module next to python/eagervm/*.py) and runs the Python tests against
# it with /usr/bin/python3, without installing anything. Extra arguments go
# to pytest (e.g. -k asyncs, -x).
# EAGERVM_SANITIZE=1 builds and tests the ASan/UBSan configuration
# (build-asan/) instead, as scripts/test.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${EAGERVM_SANITIZE:-}" ]; then
    bash scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DEV_ASAN=ON -DEV_UBSAN=ON \
        -DEV_BUILD_BENCH=OFF -DEV_STRESS_SCALE=0.2 -DEV_WERROR=ON
    LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
        ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        exec /usr/bin/python3 -m pytest tests/python -q "$@"
fi
bash scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEV_WERROR=ON
exec /usr/bin/python3 -m pytest tests/python -q "$@"
