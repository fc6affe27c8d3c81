#!/usr/bin/env bash
# Installs the Debian packages tessera needs to build and test; idempotent (does nothing when all are present).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git clang-format clang libclang-rt-14-dev
  llvm-19-dev libzstd-dev zlib1g-dev libedit-dev libffi-dev libxml2-dev libcurl4-openssl-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  libgtest-dev libgmock-dev libboost-context-dev libsqlite3-dev sqlite3 libxgboost-dev
  libdnnl-dev libopenblas-dev libblis-dev libxsmm-dev libeigen3-dev librsb-dev libtorch-dev
  python3-dev python3-pybind11 python3-numpy python3-pytest python3-torch
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
