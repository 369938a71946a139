#!/usr/bin/env bash
# Installs what eagervm needs to build, test and benchmark on Debian 12.
# Idempotent: installs only packages that are missing.
set -euo pipefail

packages=(
    build-essential cmake pkg-config clang libclang-rt-14-dev
    libopenblas-dev libstarpu-dev
    python3-dev python3-setuptools python3-numpy python3-pytest python3-hypothesis
    python3-matplotlib dataset-fashion-mnist
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
