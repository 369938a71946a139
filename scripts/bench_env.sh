#!/usr/bin/env bash
# Makes the virtual environment of bench/ops.py's second set of peers: the
# newest NumPy, PyTorch and SciPy that PyPI serves, beside Debian's packages
# (--system-site-packages, from /usr/bin/python3, so eagervm's module, built
# for that interpreter, imports in it). Idempotent: a present environment
# with all three is left as it is.
#   bash scripts/bench_env.sh [DIR]     (default: $EAGERVM_BENCH_VENV or .venv-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-${EAGERVM_BENCH_VENV:-.venv-bench}}
if [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c "import numpy, torch, scipy.special" 2>/dev/null; then
    echo "bench_env: $venv has NumPy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')" \
        "and PyTorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
    exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$venv"
# PyTorch's wheels on PyPI carry its CUDA libraries (several GB); the CPU
# code used here is the same.
"$venv/bin/pip" install -q --upgrade numpy torch scipy
echo "bench_env: made $venv"
