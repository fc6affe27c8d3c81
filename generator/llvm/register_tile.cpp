#include "generator/llvm/register_tile.hpp"

#include <llvm/IR/Intrinsics.h>

namespace tessera {

void RegisterTiles::outer_product_step(LoopValues& acc, std::size_t first, int rows, const std::vector<llvm::Value*>& b,
                                       const std::function<llvm::Value*(int r)>& a) {
  const int nv = static_cast<int>(b.size());
  for (int r = 0; r < rows; ++r) {
    llvm::Value* splat = b_.CreateVectorSplat(lanes_, a(r));
    for (int v = 0; v < nv; ++v) {
      const std::size_t i = first + static_cast<std::size_t>(r * nv + v);
      acc[i] = b_.CreateIntrinsic(llvm::Intrinsic::fma, {vec_}, {splat, b[static_cast<std::size_t>(v)], acc[i]});
    }
  }
}

LoopValues RegisterTiles::dot_step(LoopValues acc, const std::vector<llvm::Value*>& rows,
                                   const std::vector<llvm::Value*>& cols, llvm::Value* p, llvm::Value* mask) {
  const std::size_t nr = cols.size();
  std::vector<llvm::Value*> av;
  for (llvm::Value* row : rows) av.push_back(load_masked(gep(row, p), mask));
  for (std::size_t c = 0; c < nr; ++c) {
    llvm::Value* bv = load_masked(gep(cols[c], p), mask);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      auto& slot = acc[r * nr + c];
      slot = b_.CreateIntrinsic(llvm::Intrinsic::fma, {vec_}, {av[r], bv, slot});
    }
  }
  return acc;
}

LoopValues RegisterTiles::dot_k_loop(LoopValues acc, const std::vector<llvm::Value*>& rows,
                                     const std::vector<llvm::Value*>& cols, llvm::Value* kc, int unroll) {
  llvm::Value* all = llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), lanes_));
  const std::int64_t unrolled = static_cast<std::int64_t>(lanes_) * unroll;
  llvm::Value* k_unrolled = b_.CreateAnd(kc, i64c(~(unrolled - 1)));
  llvm::Value* k_vectors = b_.CreateAnd(kc, i64c(~static_cast<std::int64_t>(lanes_ - 1)));
  acc = emit_for(
      b_, i64c(0), k_unrolled, i64c(unrolled), acc,
      [&](llvm::Value* p, const LoopValues& carried) {
        LoopValues values = carried;
        for (int u = 0; u < unroll; ++u) values = dot_step(values, rows, cols, b_.CreateAdd(p, i64c(u * lanes_)), all);
        return values;
      },
      "k");
  acc = emit_for(
      b_, k_unrolled, k_vectors, i64c(lanes_), acc,
      [&](llvm::Value* p, const LoopValues& carried) { return dot_step(carried, rows, cols, p, all); }, "k.vectors");
  return emit_for(
      b_, k_vectors, kc, i64c(lanes_), acc,
      [&](llvm::Value* p, const LoopValues& carried) {
        return dot_step(carried, rows, cols, p, lane_mask(lanes_, b_.CreateSub(kc, p)));
      },
      "k.tail");
}

LoopValues RegisterTiles::dot_lane_sums(const LoopValues& acc, int rows, int cols) {
  LoopValues sums;
  for (int r = 0; r < rows; ++r) {
    llvm::Value* row = llvm::Constant::getNullValue(vec_);
    for (int c = 0; c < cols; ++c) {
      auto* sum = llvm::cast<llvm::Instruction>(
          b_.CreateFAddReduce(llvm::ConstantFP::getNegativeZero(f32_), acc[static_cast<std::size_t>(r * cols + c)]));
      sum->setHasAllowReassoc(true);  // a tree across lanes, not lane 0 + lane 1 + ...
      row = b_.CreateInsertElement(row, sum, static_cast<std::uint64_t>(c));
    }
    sums.push_back(row);
  }
  return sums;
}

}  // namespace tessera
