// The CUDA source of an attention spec: the FlashAttention-2 template (or on sm_90a the wgmma one) instantiated with
// the spec's types, head dimension, key block, warps, alignment and masking, behind one extern "C" entry, and for
// FlashAttention-2 the entry that merges split keys' partial rows (flash-decoding).
#pragma once

#include <string>

#include "generator/attention/cuda_attention_spec.hpp"

namespace tessera {

struct CudaAttentionSource {
  std::string code, kernel, combine_kernel;  // combine_kernel empty: the kernel never splits keys
  int threads = 0, shared_bytes = 0;
};

CudaAttentionSource emit_cuda_attention(const CudaAttentionSpec& spec);

}  // namespace tessera
