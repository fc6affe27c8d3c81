#!/usr/bin/env bash
# tessera-bench's cuBLAS comparison without a GPU: it must say why and exit 3, not crash or report numbers.
set -u
bench=${1:?usage: bench_cuda_test.sh path/to/tessera-bench}
if [[ -e /dev/nvidia0 ]]; then
  echo "a GPU is present; the no-device path is not what runs here"
  exit 0
fi
out=$("$bench" gemm --suite cutlass --target cuda:sm_80 --peers cublas --dtype f16 2>&1)
code=$?
if [[ $code -eq 3 && $out == *"no usable CUDA device"* && $out != *tflops* ]]; then
  echo "ok: $out"
  exit 0
fi
echo "FAIL: exit $code, output: $out"
exit 1
