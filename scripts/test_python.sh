#!/usr/bin/env bash
# Builds the eagervm._C extension in place (into python/eagervm/) and runs the
# Python tests against it with /usr/bin/python3, without installing anything.
# Extra arguments go to pytest (e.g. -k asyncs, -x).
# EAGERVM_SANITIZE=address,undefined builds an ASan/UBSan module instead (run
# with LD_PRELOAD of libasan, see the note at the end of this file).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
$PY setup.py -q build_ext --inplace >/dev/null
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
exec $PY -m pytest tests/python -q "$@"
# ASan run (sketch): EAGERVM_SANITIZE=address,undefined $PY setup.py build_ext --inplace --force
#   LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
#   PYTHONPATH=python $PY -m pytest tests/python -q
