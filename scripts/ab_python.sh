#!/usr/bin/env bash
# Compares the Python-level speed of two git revisions: builds each one's
# module (scripts/build.sh, in a folder of its own), then runs
# bench/python_overhead.py --quick for A and B alternately, ROUNDS times
# each, and prints per case the median eagervm figure of each and B/A. On a
# shared machine whose speed drifts minute to minute, runs of two builds one
# after the other cannot be compared; alternated they can.
#   bash scripts/ab_python.sh [REV_A] [REV_B] [ROUNDS]
# REV_A defaults to HEAD, REV_B to the working tree ("WORKTREE").
set -euo pipefail
cd "$(dirname "$0")/.."
rev_a=${1:-HEAD}
rev_b=${2:-WORKTREE}
rounds=${3:-7}
out=$(mktemp -d /tmp/eagervm-abpy.XXXXXX)
trap 'rm -rf "$out"; git worktree prune' EXIT

tree_of() { # rev dir -> prints the source tree holding that revision's module
    if [ "$1" = WORKTREE ]; then
        bash scripts/build.sh "$2/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEV_BUILD_TESTS=OFF \
            -DEV_BUILD_BENCH=OFF >/dev/null
        # build.sh put the module into this tree's python/; keep a copy aside.
        mkdir -p "$2/python"
        cp -r python/eagervm "$2/python/"
        echo "$2"
    else
        git worktree add -q --detach "$2/src" "$1"
        if [ -f "$2/src/scripts/build.sh" ]; then
            bash "$2/src/scripts/build.sh" "$2/src/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                -DEV_BUILD_TESTS=OFF -DEV_BUILD_BENCH=OFF >/dev/null
        else # revisions from before the CMake-built module
            (cd "$2/src" && /usr/bin/python3 setup.py -q build_ext --inplace >/dev/null)
        fi
        echo "$2/src"
    fi
}

a=$(tree_of "$rev_a" "$out/a")
b=$(tree_of "$rev_b" "$out/b")
for i in $(seq "$rounds"); do
    for side in a b; do
        dir=$a
        [ $side = b ] && dir=$b
        PYTHONPATH="$dir/python" /usr/bin/python3 bench/python_overhead.py --quick --repeats 3 \
            >"$out/$side.$i.txt"
    done
done
echo "A = $rev_a, B = $rev_b, $rounds alternated rounds of bench/python_overhead.py --quick"
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rows(path):
    res = {}
    for line in open(path):
        m = re.match(r"(.{28}) +(\S+) +([0-9.]+) ", line)
        if m and m.group(2) in ("ns/op", "us/op", "ms"):
            res[(m.group(1).strip(), m.group(2))] = float(m.group(3))
    return res
a = [rows(f"{out}/a.{i}.txt") for i in range(1, rounds + 1)]
b = [rows(f"{out}/b.{i}.txt") for i in range(1, rounds + 1)]
print(f"{'case':<28} {'unit':>5} {'A median':>10} {'B median':>10} {'B/A':>6}")
for key in a[0]:
    ma = statistics.median(r[key] for r in a)
    mb = statistics.median(r[key] for r in b)
    print(f"{key[0]:<28} {key[1]:>5} {ma:10.3f} {mb:10.3f} {mb / ma:6.2f}")
PY
