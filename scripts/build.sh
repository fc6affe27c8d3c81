#!/usr/bin/env bash
# Installs what is missing, then configures and builds tessera into build/ (executables in build/bin/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --parallel "$(nproc)"
