#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GoogleTest suites, the CLI checks, the README example).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 900
