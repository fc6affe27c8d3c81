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

  // What a dot tile multiplies: f32 lanes (FMA); bf16 pairs per f32 lane (vdpbf16ps; K offsets count bf16
  // elements); bf16 lanes widened to f32 (FMA, for targets without avx512_bf16; K offsets count bf16 elements); or
  // u8 rows × i8 columns, four bytes per i32 lane summed exactly by vpdpbusd (K offsets count bytes; the accumulators
  // are i32 vectors).
  // AMX tiles also multiply the other signednesses of bytes: i8 A × u8 B, i8 × i8, u8 × u8.
  enum class DotInputs { F32, BF16, BF16Widened, U8I8, I8U8, I8I8, U8U8 };
  static bool byte_inputs(DotInputs d) {
    return d == DotInputs::U8I8 || d == DotInputs::I8U8 || d == DotInputs::I8I8 || d == DotInputs::U8U8;
  }

  // One K step of an outer-product tile: acc[first + r·b.size() + v] += broadcast(a(r)) · b[v] for r < rows, with
  // the A value of row r loaded by `a` just before its row's FMAs.
  void outer_product_step(LoopValues& acc, std::size_t first, int rows, const std::vector<llvm::Value*>& b,
                          const std::function<llvm::Value*(int r)>& a);

  // sum + a·b by the group instruction of `inputs` (BF16: vdpbf16ps; U8I8: vpdpbusd of the target's width).
  llvm::Value* group_multiply_add(DotInputs inputs, llvm::Value* sum, llvm::Value* a, llvm::Value* b);

  // One K vector of a dot tile: acc[r·cols.size() + c] += A row r · B column c over the lanes of `mask` at K
  // offset p, the rows and columns given by their first element.
  LoopValues dot_step(LoopValues acc, const std::vector<llvm::Value*>& rows, const std::vector<llvm::Value*>& cols,
                      llvm::Value* p, llvm::Value* mask, DotInputs inputs = DotInputs::F32);

  // The dot tile over K = [0, kc): vectors `unroll` at a time, then single vectors, then one masked step for the
  // last kc % (elements per vector).
  LoopValues dot_k_loop(LoopValues acc, const std::vector<llvm::Value*>& rows, const std::vector<llvm::Value*>& cols,
                        llvm::Value* kc, int unroll, DotInputs inputs = DotInputs::F32);

  // An outer-product tile whose K steps come in groups (inputs BF16: pairs by vdpbf16ps into f32 sums; U8I8: quads by
  // vpdpbusd into exact i32 sums): acc[r·nv + v] += A row r · B over K = [0, kc), per group A's elements (adjacent in
  // its row at a_rows[r]) broadcast as one 32-bit word against the nv = acc.size() / rows vectors of the packed
  // groups at bp (emit_pack_groups_*: nr columns per sliver, 64-byte aligned). A last partial group reads only A's
  // elements within kc, and the panel holds zeros beside them.
  LoopValues grouped_k_loop(LoopValues acc, const std::vector<llvm::Value*>& a_rows, llvm::Value* bp, llvm::Value* kc,
                            int nr, DotInputs inputs, int unroll);

  // A dot tile's sums across lanes: per row, one vector whose lane c is column c's dot product (cols ≤ lanes); i32
  // sums are added as integers.
  LoopValues dot_lane_sums(const LoopValues& acc, int rows, int cols);
};

}  // namespace tessera
