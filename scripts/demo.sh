#!/usr/bin/env bash
# Sets up, builds and runs the main job: `tessera demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/bin/tessera demo
