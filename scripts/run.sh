#!/usr/bin/env bash
# The main job: sets up, builds the Python module in place, and trains the
# Fashion-MNIST MLP with its input pipeline on its own worker thread, writing
# a Chrome trace and a timeline picture of one epoch (extra arguments go to
# examples/fashion_mnist.py, e.g. --epochs 2 --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
/usr/bin/python3 setup.py -q build_ext --inplace >/dev/null
exec /usr/bin/python3 examples/fashion_mnist.py "$@"
