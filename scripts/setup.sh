#!/usr/bin/env bash
# Installs what eagervm needs to build, test and benchmark on Debian 12.
# Idempotent: installs only packages that are missing.
set -euo pipefail

packages=(
    build-essential cmake pkg-config clang libclang-rt-14-dev
    libopenblas-dev libstarpu-dev libopenmpi-dev openmpi-bin
    python3-dev python3-pip python3-numpy python3-pytest python3-hypothesis
    python3-matplotlib dataset-fashion-mnist
)
# The Python build backend (pyproject.toml). Debian 12 has it in
# bookworm-backports only; later releases have it in main.
backend=python3-scikit-build-core

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${packages[@]}"; do
    installed "$p" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! installed "$backend"; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    if [ "$codename" = bookworm ]; then
        list=/etc/apt/sources.list.d/eagervm-bookworm-backports.sources
        if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
            echo "setup: adding Debian's bookworm-backports (for $backend) in $list"
            printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" \
                "Suites: bookworm-backports" "Components: main" \
                "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
                $SUDO tee "$list" >/dev/null
        fi
        echo "setup: installing $backend from bookworm-backports"
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq -t bookworm-backports "$backend" >/dev/null
    else
        echo "setup: installing $backend"
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq "$backend" >/dev/null
    fi
fi
