// The epilogue language's functions in f32, with the definitions of the CPU reference (generator/expr_eval.cpp).
// Emitted epilogues call these by name.
#pragma once

#include "tessera/platform.cuh"

namespace tessera {
namespace epi {

TESSERA_DEVICE float relu(float x) { return fmaxf(x, 0.0f); }
TESSERA_DEVICE float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
TESSERA_DEVICE float silu(float x) { return x / (1.0f + expf(-x)); }
TESSERA_DEVICE float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
TESSERA_DEVICE float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
TESSERA_DEVICE float clamp(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }

}  // namespace epi
}  // namespace tessera
