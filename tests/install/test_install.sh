#!/bin/sh
# The C install, used as a C user would: installs the build into a fresh
# prefix, then builds the README's C example (taken from README.md, so the
# two cannot drift apart) out of tree against that prefix, once with
# pkg-config and once with CMake's find_package(eagervm), and runs both.
# Usage (CTest runs it): test_install.sh BUILD_DIR SOURCE_DIR CC CMAKE
set -eu
build=$1
src=$2
cc=$3
cmake=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/eagervm-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

"$cmake" --install "$build" --prefix "$prefix" --component c >/dev/null
for f in include/eagervm/vm.h include/eagervm/eagervm.h include/eagervm/config.h; do
    [ -f "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
pc=$(find "$prefix" -name eagervm.pc)
config=$(find "$prefix" -name eagervmConfig.cmake)
lib=$(find "$prefix" -name 'libeagervm.so.*.*.*')
[ -n "$pc" ] && [ -n "$config" ] && [ -n "$lib" ] || {
    echo "FAIL: eagervm.pc, eagervmConfig.cmake or libeagervm.so.X.Y.Z missing under $prefix"
    find "$prefix"
    exit 1
}
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
case $soname in
    libeagervm.so.[0-9]*) ;;
    *) echo "FAIL: $lib has SONAME '$soname', not libeagervm.so.N"; exit 1 ;;
esac
libdir=$(dirname "$lib")

# The fenced C block under the README's "A short example (C" heading.
awk '/^## A short example \(C/ {sec = 1; next}
     sec && /^```c/ {code = 1; next}
     code && /^```/ {exit}
     code {print}' "$src/README.md" >"$work/example.c"
[ -s "$work/example.c" ] || { echo "FAIL: no C example found in README.md"; exit 1; }

check_run() { # what, program
    out=$(LD_LIBRARY_PATH="$libdir" "$2")
    [ "$out" = "value = 42" ] || { echo "FAIL ($1): printed '$out', expected 'value = 42'"; exit 1; }
    echo "ok ($1): $out"
}

# 1. pkg-config
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs eagervm)
[ "$(pkg-config --modversion eagervm)" = "$(awk -F'"' '/define EAGERVM_VERSION "/ {print $2}' \
    "$src/include/eagervm/version.h")" ] || { echo "FAIL: pkg-config version"; exit 1; }
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -o "$work/example_pc" "$work/example.c" $flags
check_run pkg-config "$work/example_pc"

# 2. find_package
mkdir -p "$work/cmake_app"
cp "$work/example.c" "$work/cmake_app/example.c"
cat >"$work/cmake_app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(eagervm 0.1 REQUIRED)
add_executable(example example.c)
target_link_libraries(example PRIVATE eagervm::eagervm)
CMAKE
"$cmake" -S "$work/cmake_app" -B "$work/cmake_app/build" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
"$cmake" --build "$work/cmake_app/build" >/dev/null
check_run find_package "$work/cmake_app/build/example"
