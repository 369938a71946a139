#!/usr/bin/env bash
# The main job: sets up, builds (scripts/build.sh: the library and the Python
# module, in place), and trains the Fashion-MNIST MLP with its input pipeline
# on its own worker thread, writing a Chrome trace and a timeline picture of
# one epoch (extra arguments go to examples/fashion_mnist.py, e.g. --epochs 2
# --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo
exec /usr/bin/python3 examples/fashion_mnist.py "$@"
