#include "generator/llvm/register_tile.hpp"

#include <llvm/IR/IntrinsicsX86.h>

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

llvm::Value* RegisterTiles::group_multiply_add(DotInputs inputs, llvm::Value* sum, llvm::Value* a, llvm::Value* b) {
  const auto dot = inputs == DotInputs::BF16 ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512
                   : lanes_ == 16            ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                                             : llvm::Intrinsic::x86_avx512_vpdpbusd_256;
  return b_.CreateIntrinsic(dot, {}, {sum, a, b});
}

LoopValues RegisterTiles::dot_step(LoopValues acc, const std::vector<llvm::Value*>& rows,
                                   const std::vector<llvm::Value*>& cols, llvm::Value* p, llvm::Value* mask,
                                   DotInputs inputs) {
  const std::size_t nr = cols.size();
  std::function<llvm::Value*(llvm::Value*)> load;
  std::function<llvm::Value*(llvm::Value*, llvm::Value*, llvm::Value*)> multiply_add;
  if (inputs == DotInputs::BF16 || inputs == DotInputs::U8I8) {
    // 64 bytes of K per step (32 bf16 or 64 int8 bytes on AVX-512), read as the instruction's operand type.
    const bool int8 = inputs == DotInputs::U8I8;
    llvm::Type* element = int8 ? b_.getInt8Ty() : b_.getInt16Ty();
    auto* bytes = llvm::FixedVectorType::get(element, static_cast<unsigned>((int8 ? 4 : 2) * lanes_));
    auto* words = int8 ? llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(lanes_))
                       : llvm::FixedVectorType::get(b_.getBFloatTy(), static_cast<unsigned>(2 * lanes_));
    const llvm::Align align(int8 ? 1 : 2);
    load = [=, this](llvm::Value* base) {
      llvm::Value* at = b_.CreateGEP(element, base, p);
      llvm::Value* v = all_true(mask)
                           ? static_cast<llvm::Value*>(b_.CreateAlignedLoad(bytes, at, align))
                           : b_.CreateMaskedLoad(bytes, at, align, mask, llvm::Constant::getNullValue(bytes));
      return b_.CreateBitCast(v, words);
    };
    multiply_add = [=, this](llvm::Value* sum, llvm::Value* a, llvm::Value* b) {
      return group_multiply_add(inputs, sum, a, b);
    };
  } else {
    load = [=, this](llvm::Value* base) {
      return inputs == DotInputs::BF16Widened ? load_masked_bf16(b_.CreateGEP(b_.getInt16Ty(), base, p), mask)
                                              : load_masked(gep(base, p), mask);
    };
    multiply_add = [this](llvm::Value* sum, llvm::Value* a, llvm::Value* b) {
      return b_.CreateIntrinsic(llvm::Intrinsic::fma, {vec_}, {a, b, sum});
    };
  }
  std::vector<llvm::Value*> av;
  for (llvm::Value* row : rows) av.push_back(load(row));
  for (std::size_t c = 0; c < nr; ++c) {
    llvm::Value* bv = load(cols[c]);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      auto& slot = acc[r * nr + c];
      slot = multiply_add(slot, av[r], bv);
    }
  }
  return acc;
}

LoopValues RegisterTiles::dot_k_loop(LoopValues acc, const std::vector<llvm::Value*>& rows,
                                     const std::vector<llvm::Value*>& cols, llvm::Value* kc, int unroll,
                                     DotInputs inputs) {
  // K elements per vector step: f32 lanes, two bf16 or four bytes per 32-bit lane.
  const int step = inputs == DotInputs::U8I8 ? 4 * lanes_ : inputs == DotInputs::BF16 ? 2 * lanes_ : lanes_;
  llvm::Value* all = llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), step));
  const std::int64_t unrolled = static_cast<std::int64_t>(step) * unroll;
  llvm::Value* k_unrolled = b_.CreateAnd(kc, i64c(~(unrolled - 1)));
  llvm::Value* k_vectors = b_.CreateAnd(kc, i64c(~static_cast<std::int64_t>(step - 1)));
  acc = emit_for(
      b_, i64c(0), k_unrolled, i64c(unrolled), acc,
      [&](llvm::Value* p, const LoopValues& carried) {
        LoopValues values = carried;
        for (int u = 0; u < unroll; ++u)
          values = dot_step(values, rows, cols, b_.CreateAdd(p, i64c(u * step)), all, inputs);
        return values;
      },
      "k");
  acc = emit_for(
      b_, k_unrolled, k_vectors, i64c(step), acc,
      [&](llvm::Value* p, const LoopValues& carried) { return dot_step(carried, rows, cols, p, all, inputs); },
      "k.vectors");
  return emit_for(
      b_, k_vectors, kc, i64c(step), acc,
      [&](llvm::Value* p, const LoopValues& carried) {
        return dot_step(carried, rows, cols, p, lane_mask(step, b_.CreateSub(kc, p)), inputs);
      },
      "k.tail");
}

LoopValues RegisterTiles::dot_lane_sums(const LoopValues& acc, int rows, int cols) {
  // Per row, a tree of shuffles and adds instead of a reduction per column: vectors are combined in pairs, each
  // result holding the halves-summed partials of both (groups of lanes, one per column), until one vector holds
  // every column's partials in groups; then each group is folded onto its first lanes. For 8 columns of 16 lanes
  // this is 15 adds and 30 two-source shuffles instead of 8 reductions of 4 shuffle-add steps and 8 inserts.
  const int lanes = lanes_;
  int width = 1;  // columns rounded up to a power of two (missing ones are zero vectors)
  while (width < cols) width *= 2;
  llvm::Type* type = acc.front()->getType();  // f32 or i32 lanes
  const bool integer = type->isIntOrIntVectorTy();
  const auto add = [&](llvm::Value* x, llvm::Value* y) { return integer ? b_.CreateAdd(x, y) : b_.CreateFAdd(x, y); };
  llvm::Value* zero = llvm::Constant::getNullValue(type);
  LoopValues sums;
  for (int r = 0; r < rows; ++r) {
    std::vector<llvm::Value*> level;
    for (int c = 0; c < width; ++c) level.push_back(c < cols ? acc[static_cast<std::size_t>(r * cols + c)] : zero);
    int groups = 1, size = lanes;  // each vector: `groups` groups of `size` lanes
    while (level.size() > 1 && size > 1) {
      const int half = size / 2;
      std::vector<int> lo(static_cast<std::size_t>(lanes)), hi(lo.size());
      for (int i = 0; i < lanes; ++i) {
        // Result group g of `half` lanes: the first vector's groups, then the second's, in order.
        const int group = i / half, offset = i % half;
        const int source = (group / groups) * lanes + (group % groups) * size + offset;
        lo[static_cast<std::size_t>(i)] = source;
        hi[static_cast<std::size_t>(i)] = source + half;
      }
      std::vector<llvm::Value*> next;
      for (std::size_t i = 0; i < level.size(); i += 2)
        next.push_back(add(b_.CreateShuffleVector(level[i], level[i + 1], lo),
                           b_.CreateShuffleVector(level[i], level[i + 1], hi)));
      level = std::move(next);
      groups *= 2;
      size = half;
    }
    // Fewer lanes than columns cannot happen (cols <= lanes); fold the groups of the one vector down to one lane.
    llvm::Value* v = level[0];
    while (size > 1) {
      const int half = size / 2;
      std::vector<int> lo(static_cast<std::size_t>(lanes)), hi(lo.size());
      for (int i = 0; i < lanes; ++i) {
        const int group = i / half < groups ? i / half : 0, offset = i % half;
        lo[static_cast<std::size_t>(i)] = group * size + offset;
        hi[static_cast<std::size_t>(i)] = group * size + offset + half;
      }
      v = add(b_.CreateShuffleVector(v, lo), b_.CreateShuffleVector(v, hi));
      size = half;
    }
    // Lane c now holds column c's dot product; lanes past `cols` are zero.
    if (width > cols) {
      std::vector<int> keep(static_cast<std::size_t>(lanes));
      for (int i = 0; i < lanes; ++i) keep[static_cast<std::size_t>(i)] = i < cols ? i : lanes;
      v = b_.CreateShuffleVector(v, zero, keep);
    }
    sums.push_back(v);
  }
  return sums;
}

LoopValues RegisterTiles::grouped_k_loop(LoopValues acc, const std::vector<llvm::Value*>& a_rows, llvm::Value* bp,
                                         llvm::Value* kc, int nr, DotInputs inputs, int unroll) {
  const bool int8 = inputs == DotInputs::U8I8;
  const int rows = static_cast<int>(a_rows.size()), nv = static_cast<int>(acc.size()) / rows, G = int8 ? 4 : 2;
  llvm::Type* element = int8 ? b_.getInt8Ty() : b_.getInt16Ty();
  auto* b_vec = int8 ? llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(lanes_))
                     : llvm::FixedVectorType::get(b_.getBFloatTy(), static_cast<unsigned>(2 * lanes_));
  auto* a_group_ty = llvm::FixedVectorType::get(element, static_cast<unsigned>(G));
  const auto at = [&](llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(element, base, index); };
  // `partial`: the mask of A's elements within K in a last, partial group.
  const auto step = [&](llvm::Value* q, LoopValues values, llvm::Value* partial) {
    llvm::Value* b_group_row = at(bp, b_.CreateMul(q, i64c(G * nr)));
    std::vector<llvm::Value*> bv;
    for (int v = 0; v < nv; ++v)
      bv.push_back(b_.CreateAlignedLoad(b_vec, at(b_group_row, i64c(G * v * lanes_)), llvm::Align(64)));
    for (int r = 0; r < rows; ++r) {
      llvm::Value* a_at = at(a_rows[static_cast<std::size_t>(r)], b_.CreateMul(q, i64c(G)));
      const llvm::Align align(int8 ? 1 : 2);
      llvm::Value* word = partial ? b_.CreateBitCast(b_.CreateMaskedLoad(a_group_ty, a_at, align, partial,
                                                                         llvm::Constant::getNullValue(a_group_ty)),
                                                     b_.getInt32Ty())
                                  : b_.CreateAlignedLoad(b_.getInt32Ty(), a_at, align);
      llvm::Value* a_vec = b_.CreateBitCast(b_.CreateVectorSplat(lanes_, word), b_vec);
      for (int v = 0; v < nv; ++v) {
        auto& slot = values[static_cast<std::size_t>(r * nv + v)];
        slot = group_multiply_add(inputs, slot, a_vec, bv[static_cast<std::size_t>(v)]);
      }
    }
    return values;
  };
  llvm::Value* groups = b_.CreateLShr(kc, i64c(G == 2 ? 1 : 2));
  llvm::Value* groups_main = b_.CreateAnd(groups, i64c(~static_cast<std::int64_t>(unroll - 1)));
  acc = emit_for(
      b_, i64c(0), groups_main, i64c(unroll), acc,
      [&](llvm::Value* q, const LoopValues& carried) {
        LoopValues values = carried;
        for (int u = 0; u < unroll; ++u) values = step(b_.CreateAdd(q, i64c(u)), values, nullptr);
        return values;
      },
      "kgroup");
  acc = emit_for(
      b_, groups_main, groups, i64c(1), acc,
      [&](llvm::Value* q, const LoopValues& carried) { return step(q, carried, nullptr); }, "kgroup.tail");
  // The last, partial group, if any: a loop of zero or one iteration.
  llvm::Value* within = lane_mask(G, b_.CreateSub(kc, b_.CreateMul(groups, i64c(G))), 0);
  return emit_for(
      b_, groups, b_.CreateLShr(b_.CreateAdd(kc, i64c(G - 1)), i64c(G == 2 ? 1 : 2)), i64c(1), acc,
      [&](llvm::Value* q, const LoopValues& carried) { return step(q, carried, within); }, "kgroup.partial");
}

}  // namespace tessera
