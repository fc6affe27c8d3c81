// The CUDA templates (templates/**/*.cuh) compiled into the binary, for NVRTC and the emulator.
#pragma once

#include <string_view>
#include <vector>

#include "generator/gemm/cpu_gemm_spec.hpp"

namespace tessera {

struct EmbeddedFile {
  std::string_view path;  // as included: "tessera/gemm_tensorop.cuh"
  std::string_view text;
};

const std::vector<EmbeddedFile>& embedded_templates();
// XXH3-128 over every path and text: part of any cache key for CUDA kernels.
Hash128 embedded_templates_hash();

}  // namespace tessera
