// The multiply-add steps of register tiles, over vector accumulators any kernel carries through its K loop: the
// outer-product tile (rows of broadcast A values × vectors of B columns: GEMM's micro-kernel, attention's P·V) and
// the dot tile (rows of A · columns of B, vectorised along K and summed across lanes at the end: GEMM's x·Wᵀ kernel,
// SDDMM, attention's Q·Kᵀ).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "generator/llvm/loops.hpp"
#include "generator/llvm/panel_packing.hpp"

namespace tessera {

class RegisterTiles : protected PanelPacking {
 protected:
  using PanelPacking::PanelPacking;

  // One K step of an outer-product tile: acc[first + r·b.size() + v] += broadcast(a(r)) · b[v] for r < rows, with
  // the A value of row r loaded by `a` just before its row's FMAs.
  void outer_product_step(LoopValues& acc, std::size_t first, int rows, const std::vector<llvm::Value*>& b,
                          const std::function<llvm::Value*(int r)>& a);

  // One K vector of a dot tile: acc[r·cols.size() + c] += A row r · B column c over the lanes of `mask` at K
  // offset p, the rows and columns given by their first element.
  LoopValues dot_step(LoopValues acc, const std::vector<llvm::Value*>& rows, const std::vector<llvm::Value*>& cols,
                      llvm::Value* p, llvm::Value* mask);

  // The dot tile over K = [0, kc): vectors `unroll` at a time, then single vectors, then one masked step for the
  // last kc % lanes.
  LoopValues dot_k_loop(LoopValues acc, const std::vector<llvm::Value*>& rows, const std::vector<llvm::Value*>& cols,
                        llvm::Value* kc, int unroll);

  // A dot tile's sums across lanes: per row, one vector whose lane c is column c's dot product (cols ≤ lanes).
  LoopValues dot_lane_sums(const LoopValues& acc, int rows, int cols);
};

}  // namespace tessera
