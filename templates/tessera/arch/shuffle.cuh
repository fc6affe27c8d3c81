// Device bodies: warp shuffles and votes (all lanes of `mask` must execute them).
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

TESSERA_DEVICE float shfl_xor(unsigned mask, float value, int lane_mask) {
  return __shfl_xor_sync(mask, value, lane_mask);
}
TESSERA_DEVICE float shfl_down(unsigned mask, float value, unsigned delta) {
  return __shfl_down_sync(mask, value, delta);
}
TESSERA_DEVICE float shfl_idx(unsigned mask, float value, int lane) { return __shfl_sync(mask, value, lane); }
TESSERA_DEVICE void syncwarp(unsigned mask = 0xffffffffu) { __syncwarp(mask); }
TESSERA_DEVICE bool vote_all(unsigned mask, bool predicate) { return __all_sync(mask, predicate); }
TESSERA_DEVICE bool vote_any(unsigned mask, bool predicate) { return __any_sync(mask, predicate); }
TESSERA_DEVICE unsigned ballot(unsigned mask, bool predicate) { return __ballot_sync(mask, predicate); }

}  // namespace tessera
