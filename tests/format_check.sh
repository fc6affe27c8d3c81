#!/usr/bin/env bash
# Fails when a C++ or CUDA source tracked by git is not formatted as .clang-format says (clang-format --dry-run).
set -euo pipefail
cd "${1:?usage: format_check.sh path/to/repository}"
mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp' '*.cuh')
if ((${#files[@]} == 0)); then
  echo "format_check: no sources found in $(pwd)"
  exit 1
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "format_check: run clang-format -i on the files above"
  exit 1
fi
echo "format_check: ${#files[@]} files formatted"
