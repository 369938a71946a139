#!/usr/bin/env bash
# Compares two git revisions of libeagervm in one process (bench/ab_libs.c):
# on a shared machine whose speed drifts minute to minute, builds run one
# after the other cannot be compared, alternated in one process they can.
#   bash scripts/ab_builds.sh [REV_A] [REV_B] [ROUNDS]
# REV_A defaults to HEAD, REV_B to the working tree ("WORKTREE").
set -euo pipefail
cd "$(dirname "$0")/.."
rev_a=${1:-HEAD}
rev_b=${2:-WORKTREE}
rounds=${3:-15}
out=$(mktemp -d /tmp/eagervm-ab.XXXXXX)
trap 'rm -rf "$out"; git worktree prune' EXIT

build_rev() { # rev dir
    local src=$PWD
    if [ "$1" != WORKTREE ]; then
        git worktree add -q --detach "$2/src" "$1"
        src=$2/src
    fi
    cmake -S "$src" -B "$2/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEV_BUILD_BENCH=OFF \
        >/dev/null
    cmake --build "$2/build" -j"$(nproc)" --target eagervm >/dev/null
    if [ "$1" != WORKTREE ]; then
        git worktree remove --force "$2/src"
    fi
}

build_rev "$rev_a" "$out/a"
build_rev "$rev_b" "$out/b"
cc -O2 -Iinclude -o "$out/ab_libs" bench/ab_libs.c -ldl
echo "A = $rev_a, B = $rev_b"
"$out/ab_libs" "$out/a/build/libeagervm.so" "$out/b/build/libeagervm.so" "$rounds"
