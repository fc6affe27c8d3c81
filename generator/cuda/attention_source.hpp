// The CUDA source of an attention spec: the FlashAttention-2 template instantiated with the spec's types, head
// dimension, key block, warps, alignment and masking, behind one extern "C" entry, and the entry that merges split
// keys' partial rows (flash-decoding).
#pragma once

#include <string>

#include "generator/attention/cuda_attention_spec.hpp"

namespace tessera {

struct CudaAttentionSource {
  std::string code, kernel, combine_kernel;
  int threads = 0, shared_bytes = 0;
};

CudaAttentionSource emit_cuda_attention(const CudaAttentionSpec& spec);

}  // namespace tessera
