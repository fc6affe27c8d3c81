#include "generator/llvm/panel_packing.hpp"

#include <llvm/IR/Intrinsics.h>

#include <algorithm>

#include "generator/llvm/loops.hpp"

namespace tessera {

namespace {
// How many source rows ahead packing prefetches (a pack reading B row by row).
constexpr int kPackAhead = 8;
// Source rows a pack of unit-stride rows copies into each sliver per pass.
constexpr int kPackDepthBlock = 8;
}  // namespace

llvm::Function* PanelPacking::emit_pack(const std::string& name, int R, bool unit_row_stride, bool cs_is_one,
                                        bool bf16_source) {
  llvm::Function* fn = make_function(name, b_.getVoidTy(), {ptr_, i64_, i64_, i64_, i64_, i64_, i64_, ptr_}, false);
  auto arg = fn->arg_begin();
  PackArgs a;
  a.bf16 = bf16_source;
  a.src = arg++;
  a.r0 = arg++;
  a.c0 = arg++;
  a.nrows = arg++;
  llvm::Value* depth = arg++;
  a.rs = arg++;
  llvm::Value* cs = arg++;
  llvm::Value* dst = arg++;
  llvm::Value* slivers = b_.CreateSDiv(b_.CreateAdd(a.nrows, i64c(R - 1)), i64c(R));
  if (!unit_row_stride) {
    // Slivers outer, depth inner: R rows read along their length (R lines in L1 serve 16 steps of depth),
    // the destination written in order. Depth outer would touch a new line of every row per step: packing a
    // row-major A that way made 2048³ run at half speed.
    emit_for(
        b_, i64c(0), slivers, i64c(1),
        [&](llvm::Value* sl) {
          llvm::Value* first_row = b_.CreateMul(sl, i64c(R));
          llvm::Value* sliver_dst = gep(dst, b_.CreateMul(first_row, depth));
          llvm::Value* whole = b_.CreateAnd(depth, i64c(~static_cast<std::int64_t>(lanes_ - 1)));
          if (cs_is_one)
            emit_for(
                b_, i64c(0), whole, i64c(lanes_),
                [&](llvm::Value* p) { emit_pack_transposed(a, R, first_row, p, sliver_dst); }, "pack.block");
          emit_for(
              b_, cs_is_one ? whole : i64c(0), depth, i64c(1),
              [&](llvm::Value* p) {
                a.col_offset = b_.CreateMul(b_.CreateAdd(a.c0, p), cs);
                emit_pack_sliver(a, R, unit_row_stride, first_row, gep(sliver_dst, b_.CreateMul(p, i64c(R))));
              },
              "pack.k");
        },
        "pack.sliver");
    b_.CreateRetVoid();
    return fn;
  }
  // Blocks of kPackDepthBlock source rows outer, slivers, then the block's rows: the source is walked along its
  // rows (one page at a time for B), and each sliver gets whole lines at a time. (One row per pass wrote R values
  // into every sliver, whose starts lie depth·R floats apart, often a multiple of 4 KiB: all in one L1 set. A
  // column-major A packed into 8-row slivers that way ran 256³ Aᵀ·B at 144-150 GFLOP/s against 158 for the
  // row-major A's packing, on an Intel Xeon.)
  emit_for(
      b_, i64c(0), depth, i64c(kPackDepthBlock),
      [&](llvm::Value* p0) {
        llvm::Value* p_end = smin(b_.CreateAdd(p0, i64c(kPackDepthBlock)), depth);
        emit_for(
            b_, i64c(0), slivers, i64c(1),
            [&](llvm::Value* sl) {
              llvm::Value* first_row = b_.CreateMul(sl, i64c(R));
              llvm::Value* sliver_start = gep(dst, b_.CreateMul(first_row, depth));
              emit_for(
                  b_, p0, p_end, i64c(1),
                  [&](llvm::Value* p) {
                    a.col_offset = b_.CreateMul(b_.CreateAdd(a.c0, p), cs);
                    emit_pack_sliver(a, R, unit_row_stride, first_row, gep(sliver_start, b_.CreateMul(p, i64c(R))));
                    // The same columns kPackAhead source rows further on, into L1: each source row is a new stream
                    // (a new page, for N ≥ 1024), which the hardware prefetcher learns too late to hide DRAM's
                    // latency. A prefetch never faults, so rows past the block (or the matrix) need no test.
                    llvm::Value* ahead = b_.CreateAdd(a.r0, first_row);
                    ahead =
                        b_.CreateAdd(ahead, b_.CreateMul(b_.CreateAdd(a.c0, b_.CreateAdd(p, i64c(kPackAhead))), cs));
                    for (int line = 0; line < R; line += 16)
                      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr_},
                                         {gep(a.src, b_.CreateAdd(ahead, i64c(line))), b_.getInt32(0), b_.getInt32(3),
                                          b_.getInt32(1)});
                  },
                  "pack.k");
            },
            "pack.sliver");
      },
      "pack.block");
  b_.CreateRetVoid();
  return fn;
}

void PanelPacking::emit_pack_transposed(const PackArgs& a, int R, llvm::Value* first_row, llvm::Value* p,
                                        llvm::Value* dst) {
  llvm::Value* col = b_.CreateAdd(a.c0, p);
  llvm::Value* out = gep(dst, b_.CreateMul(p, i64c(R)));
  const int chunk = 8;  // 256-bit pieces: 16-row chunks compiled 30% slower for the same speed
  for (int r0 = 0; r0 < R; r0 += chunk) {
    const int rows_here = std::min(chunk, R - r0);
    std::vector<llvm::Value*> rows;
    for (int r = r0; r < r0 + rows_here; ++r) {
      llvm::Value* row = b_.CreateAdd(first_row, i64c(r));
      llvm::Value* valid = b_.CreateICmpSLT(row, a.nrows);
      llvm::Value* offset = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(a.r0, row), a.rs), col);
      rows.push_back(load_source(a, vec_, offset, b_.CreateVectorSplat(lanes_, valid)));
    }
    llvm::Value* columns = transpose_rows(std::move(rows), rows_here);
    if (rows_here == R) {
      b_.CreateAlignedStore(columns, out, llvm::Align(4));
      continue;
    }
    std::vector<int> piece(static_cast<std::size_t>(rows_here));
    for (int q = 0; q < lanes_; ++q) {
      for (int r = 0; r < rows_here; ++r) piece[static_cast<std::size_t>(r)] = q * rows_here + r;
      b_.CreateAlignedStore(b_.CreateShuffleVector(columns, piece), gep(out, i64c(q * R + r0)), llvm::Align(4));
    }
  }
}

void PanelPacking::emit_pack_sliver(const PackArgs& a, int R, bool unit_row_stride, llvm::Value* first_row,
                                    llvm::Value* dst) {
  const int piece = unit_row_stride && R % lanes_ == 0 ? lanes_ : R;
  auto* piece_ty = llvm::FixedVectorType::get(f32_, piece);
  for (int first = 0; first < R; first += piece) {
    llvm::Value* mask = lane_mask(piece, b_.CreateSub(a.nrows, first_row), first);
    llvm::Value* row = b_.CreateAdd(a.r0, b_.CreateAdd(first_row, i64c(first)));
    llvm::Value* offset = b_.CreateAdd(b_.CreateMul(row, a.rs), a.col_offset);
    llvm::Value* values;
    if (unit_row_stride) {
      values = load_source(a, piece_ty, offset, mask);
    } else {
      llvm::Value* lanes = b_.CreateMul(lane_indices(piece), b_.CreateVectorSplat(piece, a.rs));
      values = gather_source(a, piece_ty, b_.CreateAdd(b_.CreateVectorSplat(piece, offset), lanes), mask);
    }
    b_.CreateAlignedStore(values, gep(dst, i64c(first)), llvm::Align(4));
  }
}

llvm::Value* PanelPacking::load_source(const PackArgs& a, llvm::FixedVectorType* type, llvm::Value* offset,
                                       llvm::Value* mask) {
  if (!a.bf16)
    return b_.CreateMaskedLoad(type, gep(a.src, offset), llvm::Align(4), mask, llvm::Constant::getNullValue(type));
  auto* halves = llvm::FixedVectorType::get(b_.getInt16Ty(), type->getNumElements());
  llvm::Value* loaded = b_.CreateMaskedLoad(halves, b_.CreateGEP(b_.getInt16Ty(), a.src, offset), llvm::Align(2), mask,
                                            llvm::Constant::getNullValue(halves));
  return widen_bf16(loaded);
}

llvm::Value* PanelPacking::gather_source(const PackArgs& a, llvm::FixedVectorType* type, llvm::Value* offsets,
                                         llvm::Value* mask) {
  if (!a.bf16)
    return b_.CreateMaskedGather(type, gep(a.src, offsets), llvm::Align(4), mask, llvm::Constant::getNullValue(type));
  auto* halves = llvm::FixedVectorType::get(b_.getInt16Ty(), type->getNumElements());
  llvm::Value* loaded = b_.CreateMaskedGather(halves, b_.CreateGEP(b_.getInt16Ty(), a.src, offsets), llvm::Align(2),
                                              mask, llvm::Constant::getNullValue(halves));
  return widen_bf16(loaded);
}

llvm::Value* PanelPacking::grouped_depth(llvm::Value* depth, int G) {
  return G > 1 ? b_.CreateAnd(b_.CreateAdd(depth, i64c(G - 1)), i64c(-std::int64_t{G})) : depth;
}

void PanelPacking::emit_pack_groups_from_rows(const GroupPackArgs& a) {
  const int R = a.R, G = a.G;
  const auto at = [&](llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(a.element, base, index); };
  llvm::Value* depth_g = grouped_depth(a.depth, a.padded_to());
  llvm::Value* groups = b_.CreateLShr(depth_g, i64c(G == 2 ? 1 : 2));  // zero groups past depth up to depth_g
  llvm::Value* slivers = b_.CreateSDiv(b_.CreateAdd(a.ncols, i64c(R - 1)), i64c(R));
  emit_for(
      b_, i64c(0), groups, i64c(1),
      [&](llvm::Value* q) {
        llvm::Value* k = b_.CreateAdd(a.k0, b_.CreateMul(q, i64c(G)));
        std::vector<llvm::Value*> has_row;  // rows of the group within depth
        for (int i = 0; i < G; ++i)
          has_row.push_back(b_.CreateICmpSLT(b_.CreateAdd(b_.CreateMul(q, i64c(G)), i64c(i)), a.depth));
        emit_for(
            b_, i64c(0), slivers, i64c(1),
            [&](llvm::Value* sl) {
              llvm::Value* first_col = b_.CreateMul(sl, i64c(R));
              llvm::Value* out =
                  at(a.dst, b_.CreateAdd(b_.CreateMul(first_col, depth_g), b_.CreateMul(q, i64c(G * R))));
              // A whole sliver of a whole group (all but the edges): one unmasked load of R elements per row, the
              // rows interleaved in registers. Masked loads of one vector's columns at a time made this pack, not
              // the products, what a skinny int8 GEMM waited for.
              llvm::Value* whole = b_.CreateAnd(b_.CreateICmpSLE(b_.CreateAdd(first_col, i64c(R)), a.ncols),
                                                has_row[static_cast<std::size_t>(G - 1)]);
              emit_if_else(
                  b_, whole,
                  [&] {
                    auto* sliver_row = llvm::FixedVectorType::get(a.element, static_cast<unsigned>(R));
                    llvm::Value* col = b_.CreateAdd(a.n0, first_col);
                    std::vector<llvm::Value*> rows;
                    for (int i = 0; i < G; ++i)
                      rows.push_back(b_.CreateAlignedLoad(
                          sliver_row, at(a.src, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(k, i64c(i)), a.ld), col)),
                          llvm::Align(1)));
                    b_.CreateAlignedStore(interleave_rows(rows), out, llvm::Align(1));
                  },
                  [&] { emit_group_sliver_edge(a, k, has_row, first_col, out); }, "pack.whole");
            },
            "pack.sliver");
      },
      "pack.group");
}

void PanelPacking::emit_group_sliver_edge(const GroupPackArgs& a, llvm::Value* k,
                                          const std::vector<llvm::Value*>& has_row, llvm::Value* first_col,
                                          llvm::Value* out) {
  const int R = a.R, G = a.G;
  const auto at = [&](llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(a.element, base, index); };
  auto* row_ty = llvm::FixedVectorType::get(a.element, lanes_);
  llvm::Value* zero = llvm::Constant::getNullValue(row_ty);
  for (int piece = 0; piece < R; piece += lanes_) {
    llvm::Value* mask = lane_mask(lanes_, b_.CreateSub(a.ncols, first_col), piece);
    llvm::Value* col = b_.CreateAdd(a.n0, b_.CreateAdd(first_col, i64c(piece)));
    std::vector<llvm::Value*> rows;
    for (int i = 0; i < G; ++i) {
      llvm::Value* row_mask = b_.CreateAnd(mask, b_.CreateVectorSplat(lanes_, has_row[i]));  // padded groups too
      rows.push_back(b_.CreateMaskedLoad(row_ty,
                                         at(a.src, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(k, i64c(i)), a.ld), col)),
                                         llvm::Align(1), row_mask, zero));
    }
    b_.CreateAlignedStore(interleave_rows(rows), at(out, i64c(G * piece)), llvm::Align(1));
  }
}

void PanelPacking::emit_pack_groups_from_columns(const GroupPackArgs& a) {
  const int R = a.R, G = a.G, block = lanes_, chunk = 8;  // block: groups (words) per vector load
  const auto at = [&](llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(a.element, base, index); };
  auto* bytes_ty = llvm::FixedVectorType::get(a.element, static_cast<unsigned>(G * block));
  auto* words_ty = llvm::FixedVectorType::get(f32_, static_cast<unsigned>(block));  // the words' bits, as f32
  llvm::Value* depth_g = grouped_depth(a.depth, a.padded_to());
  llvm::Value* groups = b_.CreateLShr(depth_g, i64c(G == 2 ? 1 : 2));  // zero groups past depth up to depth_g
  llvm::Value* slivers = b_.CreateSDiv(b_.CreateAdd(a.ncols, i64c(R - 1)), i64c(R));
  emit_for(
      b_, i64c(0), groups, i64c(block),
      [&](llvm::Value* q0) {
        llvm::Value* k_first = b_.CreateMul(q0, i64c(G));  // the block's first K step within depth
        llvm::Value* in_k = lane_mask(G * block, b_.CreateSub(a.depth, k_first), 0);
        emit_for(
            b_, i64c(0), slivers, i64c(1),
            [&](llvm::Value* sl) {
              llvm::Value* first_col = b_.CreateMul(sl, i64c(R));
              llvm::Value* out = at(a.dst, b_.CreateMul(first_col, depth_g));
              // `whole`: every column of the sliver and every group of the block real, so no load is masked and no
              // store guarded (the edges take the masked code).
              const auto pack = [&](bool whole) {
                for (int c0 = 0; c0 < R; c0 += chunk) {
                  std::vector<llvm::Value*> rows;
                  for (int c = c0; c < c0 + chunk; ++c) {
                    llvm::Value* col = b_.CreateAdd(first_col, i64c(c));
                    llvm::Value* src = at(
                        a.src, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(a.n0, col), a.ld), b_.CreateAdd(a.k0, k_first)));
                    const llvm::Align align(G == 2 ? 2 : 1);
                    llvm::Value* loaded =
                        whole ? static_cast<llvm::Value*>(b_.CreateAlignedLoad(bytes_ty, src, align))
                              : b_.CreateMaskedLoad(
                                    bytes_ty, src, align,
                                    b_.CreateAnd(in_k, b_.CreateVectorSplat(G * block, b_.CreateICmpSLT(col, a.ncols))),
                                    llvm::Constant::getNullValue(bytes_ty));
                    rows.push_back(b_.CreateBitCast(loaded, words_ty));
                  }
                  llvm::Value* columns = transpose_rows(std::move(rows), chunk);  // [g·chunk + c]
                  std::vector<int> piece(static_cast<std::size_t>(chunk));
                  for (int g = 0; g < block; ++g) {
                    for (int c = 0; c < chunk; ++c) piece[static_cast<std::size_t>(c)] = g * chunk + c;
                    llvm::Value* q = b_.CreateAdd(q0, i64c(g));
                    const auto store = [&] {
                      b_.CreateAlignedStore(b_.CreateShuffleVector(columns, piece),
                                            at(out, b_.CreateAdd(b_.CreateMul(q, i64c(G * R)), i64c(G * c0))),
                                            llvm::Align(4));
                    };
                    if (whole)
                      store();
                    else
                      emit_if(b_, b_.CreateICmpSLT(q, groups), store, "pack.group");
                  }
                }
              };
              llvm::Value* whole = b_.CreateAnd(b_.CreateICmpSLE(b_.CreateAdd(k_first, i64c(G * block)), a.depth),
                                                b_.CreateICmpSLE(b_.CreateAdd(first_col, i64c(R)), a.ncols));
              emit_if_else(
                  b_, whole, [&] { pack(true); }, [&] { pack(false); }, "pack.whole");
            },
            "pack.sliver");
      },
      "pack.block");
}

llvm::Value* PanelPacking::interleave_rows(std::vector<llvm::Value*> rows) {
  auto* type = llvm::cast<llvm::FixedVectorType>(rows[0]->getType());
  const int n = static_cast<int>(type->getNumElements());
  const int bits = static_cast<int>(type->getElementType()->getPrimitiveSizeInBits());
  const int G = static_cast<int>(rows.size());
  if ((G == 2 || G == 4) && n * bits % 128 == 0) return interleave_rows_by_lanes(rows);
  while (rows.size() > 1) {
    std::vector<llvm::Value*> next;
    for (std::size_t i = 0; i < rows.size(); i += 2) {
      auto* row_type = llvm::cast<llvm::FixedVectorType>(rows[i]->getType());
      const int elements = static_cast<int>(row_type->getNumElements());
      std::vector<int> order;
      for (int e = 0; e < elements; ++e) order.insert(order.end(), {e, e + elements});
      llvm::Value* pair = b_.CreateShuffleVector(rows[i], rows[i + 1], order);
      const unsigned wide_bits = 2 * row_type->getElementType()->getPrimitiveSizeInBits();
      next.push_back(rows.size() == 2
                         ? pair
                         : b_.CreateBitCast(pair, llvm::FixedVectorType::get(b_.getIntNTy(wide_bits),
                                                                             static_cast<unsigned>(elements))));
    }
    rows = std::move(next);
  }
  return rows[0];
}

// The x86 unpack instructions interleave the low or high halves of each 128-bit lane; a whole-vector interleave
// written as one shuffle of wide rows is lowered to cross-lane permutes of every piece. So: log2(G) rounds of
// lane-wise unpacks (rows 0,1 and 2,3 by elements, then those pairs by double elements), after which vector j's lane
// l holds the j-th G-th of lane l's columns, and one gather of 128-bit lanes into column order.
llvm::Value* PanelPacking::interleave_rows_by_lanes(const std::vector<llvm::Value*>& rows) {
  auto* type = llvm::cast<llvm::FixedVectorType>(rows[0]->getType());
  llvm::Type* element = type->getElementType();
  const int n = static_cast<int>(type->getNumElements()), G = static_cast<int>(rows.size());
  const int bits = static_cast<int>(element->getPrimitiveSizeInBits()), lanes = n * bits / 128;
  const auto unpack = [&](llvm::Value* x, llvm::Value* y, int width, bool high) {
    const int count = n * bits / width, per_lane = 128 / width;
    auto* ty = llvm::FixedVectorType::get(b_.getIntNTy(static_cast<unsigned>(width)), static_cast<unsigned>(count));
    std::vector<int> order;
    for (int l = 0; l < lanes; ++l)
      for (int i = 0; i < per_lane / 2; ++i) {
        const int e = l * per_lane + i + (high ? per_lane / 2 : 0);
        order.insert(order.end(), {e, e + count});
      }
    // The result has count elements of `width` bits: viewed as count / 2 elements twice as wide.
    llvm::Value* pair = b_.CreateShuffleVector(b_.CreateBitCast(x, ty), b_.CreateBitCast(y, ty), order);
    return b_.CreateBitCast(pair, llvm::FixedVectorType::get(b_.getIntNTy(static_cast<unsigned>(2 * width)),
                                                             static_cast<unsigned>(count / 2)));
  };
  std::vector<llvm::Value*> parts;  // parts[j]: the j-th G-th of every lane's columns, G elements per column
  if (G == 2) {
    parts = {unpack(rows[0], rows[1], bits, false), unpack(rows[0], rows[1], bits, true)};
  } else {
    llvm::Value* lo01 = unpack(rows[0], rows[1], bits, false);
    llvm::Value* hi01 = unpack(rows[0], rows[1], bits, true);
    llvm::Value* lo23 = unpack(rows[2], rows[3], bits, false);
    llvm::Value* hi23 = unpack(rows[2], rows[3], bits, true);
    parts = {unpack(lo01, lo23, 2 * bits, false), unpack(lo01, lo23, 2 * bits, true),
             unpack(hi01, hi23, 2 * bits, false), unpack(hi01, hi23, 2 * bits, true)};
  }
  // Lane l of the result's G·lanes lanes: parts[l % G]'s lane l / G. Lanes as pairs of i64.
  auto* quads = llvm::FixedVectorType::get(b_.getInt64Ty(), static_cast<unsigned>(2 * lanes));
  for (auto& part : parts) part = b_.CreateBitCast(part, quads);
  const auto concat = [&](llvm::Value* x, llvm::Value* y) {
    const int count = static_cast<int>(llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements());
    std::vector<int> order(static_cast<std::size_t>(2 * count));
    for (int i = 0; i < 2 * count; ++i) order[static_cast<std::size_t>(i)] = i;
    return b_.CreateShuffleVector(x, y, order);
  };
  llvm::Value* all =
      G == 2 ? concat(parts[0], parts[1]) : concat(concat(parts[0], parts[1]), concat(parts[2], parts[3]));
  std::vector<int> order;
  for (int l = 0; l < G * lanes; ++l) {
    const int source = (l % G) * 2 * lanes + 2 * (l / G);  // part l % G, its lane l / G
    order.insert(order.end(), {source, source + 1});
  }
  llvm::Value* gathered = b_.CreateShuffleVector(all, order);
  return b_.CreateBitCast(gathered, llvm::FixedVectorType::get(element, static_cast<unsigned>(G * n)));
}

}  // namespace tessera
