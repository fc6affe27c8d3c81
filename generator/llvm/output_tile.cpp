#include "generator/llvm/output_tile.hpp"

#include <algorithm>
#include <stdexcept>

#include "generator/gemm/gemm_epilogue_binding.hpp"
#include "generator/llvm/expr_llvm.hpp"

namespace tessera {

llvm::Type* OutputTiles::d_element(const GemmSignature& sig) {
  switch (sig.d.dtype) {
    case DType::bf16:
      return b_.getInt16Ty();
    case DType::u8:
    case DType::i8:
      return b_.getInt8Ty();
    default:
      return f32_;
  }
}

llvm::Value* OutputTiles::to_d_type(const GemmSignature& sig, llvm::Value* value) {
  const auto n = llvm::cast<llvm::FixedVectorType>(value->getType())->getNumElements();
  const auto splat = [&](std::uint32_t x) {
    return llvm::ConstantInt::get(llvm::FixedVectorType::get(b_.getInt32Ty(), n), x);
  };
  switch (sig.d.dtype) {
    case DType::bf16: {
      // As to_bf16: add 0x7fff plus the kept part's lowest bit, keep the top half; a NaN keeps its top half, quieted.
      llvm::Value* bits = b_.CreateBitCast(value, llvm::FixedVectorType::get(b_.getInt32Ty(), n));
      llvm::Value* rounded =
          b_.CreateAdd(bits, b_.CreateAdd(splat(0x7fff), b_.CreateAnd(b_.CreateLShr(bits, splat(16)), splat(1))));
      llvm::Value* nan = b_.CreateICmpUGT(b_.CreateAnd(bits, splat(0x7fffffff)), splat(0x7f800000));
      llvm::Value* top = b_.CreateSelect(nan, b_.CreateOr(b_.CreateLShr(bits, splat(16)), splat(0x40)),
                                         b_.CreateLShr(rounded, splat(16)));
      return b_.CreateTrunc(top, llvm::FixedVectorType::get(b_.getInt16Ty(), n));
    }
    case DType::u8:
    case DType::i8: {
      const bool is_unsigned = sig.d.dtype == DType::u8;
      auto* type = llvm::cast<llvm::FixedVectorType>(value->getType());
      llvm::Value* lowest = llvm::ConstantFP::get(type, is_unsigned ? 0.0 : -128.0);
      llvm::Value* highest = llvm::ConstantFP::get(type, is_unsigned ? 255.0 : 127.0);
      llvm::Value* nearest = b_.CreateUnaryIntrinsic(llvm::Intrinsic::rint, value);
      // maxnum(NaN, lowest) is lowest.
      llvm::Value* clamped = b_.CreateBinaryIntrinsic(
          llvm::Intrinsic::minnum, b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, nearest, lowest), highest);
      return b_.CreateTrunc(b_.CreateFPToSI(clamped, llvm::FixedVectorType::get(b_.getInt32Ty(), n)),
                            llvm::FixedVectorType::get(b_.getInt8Ty(), n));
    }
    default:
      return value;
  }
}

void OutputTiles::store_output_tile(const GemmSignature& sig, const EpilogueOperands& ops, const LoopValues& acc,
                                    int mr, llvm::Value* row0, llvm::Value* col0, llvm::Value* rows, llvm::Value* cols,
                                    llvm::Value* batch, int whole_vectors) {
  const int nv = static_cast<int>(acc.size()) / mr;
  const TensorFields &c = ops.c, &d = ops.d;
  const std::vector<TensorFields>& inputs = ops.inputs;
  llvm::Value *alpha = ops.alpha, *beta = ops.beta;
  // Integer leaves of layout index expressions.
  llvm::Value *row = nullptr, *col = nullptr;
  const auto fields_of = [&](const std::string& prefix) -> const TensorFields& {
    if (prefix == "c") return c;
    if (prefix == "d") return d;
    for (std::size_t i = 0; i < sig.inputs.size(); ++i)
      if (prefix == "in." + sig.inputs[i].name) return inputs[i];
    throw std::logic_error("emit_llvm: unknown tensor " + prefix);
  };
  const auto int_leaf = [&](const ExprNode& node) -> llvm::Value* {
    if (node.name == "row") return row;
    if (node.name == "col") return col;
    if (node.name == "batch") return batch;
    const auto dot = node.name.rfind('.');
    const TensorFields& t = fields_of(node.name.substr(0, dot));
    const std::string field = node.name.substr(dot + 1);
    return field == "rs" ? t.rs : field == "cs" ? t.cs : t.bs;
  };
  const auto index = [&](const Expr& e) { return emit_expr(b_, e, f32_, int_leaf); };
  const Expr row_e = var("row", ExprType::Int), col_e = var("col", ExprType::Int),
             batch_e = var("batch", ExprType::Int), zero_e = int_constant(0);

  // A column-major D (the product of a transposed kernel, or asked for) is stored by columns: the tile's rows go
  // through a stack tile and are transposed in registers, MR contiguous values per column, instead of a scatter
  // per row vector (a transposed 1024³ ran 24% slower with scatters).
  const Layout& dl = sig.d.layout;
  const bool column_major_d = dl.kind() == LayoutKind::ColMajor;
  llvm::Value* tile = nullptr;
  if (column_major_d) {
    llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
    llvm::IRBuilder<> at_entry(&entry, entry.begin());
    auto* slots = at_entry.CreateAlloca(vec_, i64c(static_cast<std::int64_t>(mr) * nv), "d.tile");
    slots->setAlignment(llvm::Align(64));
    tile = slots;
  }
  // An epilogue with a transcendental function needs a dozen registers per vector; with the whole tile's
  // accumulators live across it, LLVM spilled its constants and temporaries. Such an epilogue parks the tile in
  // a stack array and runs as a loop over its rows, one row's vectors live at a time and the constants hoisted;
  // a cheap one stays unrolled in registers.
  llvm::Value* parked = nullptr;
  if (sig.epilogue.calls_transcendental()) {
    llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
    llvm::IRBuilder<> at_entry(&entry, entry.begin());
    auto* slots = at_entry.CreateAlloca(vec_, i64c(static_cast<std::int64_t>(acc.size())), "acc.tile");
    slots->setAlignment(llvm::Align(64));
    parked = slots;
    for (std::size_t i = 0; i < acc.size(); ++i)
      b_.CreateAlignedStore(acc[i], b_.CreateGEP(vec_, parked, i64c(static_cast<std::int64_t>(i))), llvm::Align(64));
  }
  // D's offset at the tile's first row and column, computed once: each row's blocks of the epilogue add their row
  // to it instead of evaluating the layout's offset again (at IR level 0 nothing hoists it; per row it was five
  // instructions with a multiply, for two stores).
  llvm::Value *d_base = nullptr, *d_rs = nullptr, *d_cs = nullptr;
  if (!column_major_d) {
    row = row0, col = col0;
    d_base = index(dl.offset("d", row_e, col_e, batch_e));
    d_rs = index(dl.row_stride("d"));
    d_cs = index(dl.col_stride("d"));
  }
  // Slot of row r's vector v in the tile (r constant when not parked).
  const auto slot = [&](llvm::Value* r, int v) { return b_.CreateAdd(b_.CreateMul(r, i64c(nv)), i64c(v)); };
  const auto accumulator = [&](llvm::Value* r, int v) -> llvm::Value* {
    if (!parked) return acc[static_cast<std::size_t>(llvm::cast<llvm::ConstantInt>(r)->getSExtValue() * nv + v)];
    return b_.CreateAlignedLoad(vec_, b_.CreateGEP(vec_, parked, slot(r, v)), llvm::Align(64));
  };
  // Each vector's column mask, once for the tile: every row has the same (made per row, they were a third of the
  // epilogue's instructions, and the backend's time follows them).
  std::vector<llvm::Value*> masks;
  for (int v = 0; v < nv; ++v)
    masks.push_back(v < whole_vectors
                        ? llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), lanes_))
                        : lane_mask(lanes_, cols, v * lanes_));
  const auto lanes_left = [&](int v) {
    return v < whole_vectors ? i64c(lanes_) : b_.CreateSub(cols, i64c(v * lanes_));
  };
  const auto emit_row = [&](llvm::Value* r) {
    row = b_.CreateAdd(row0, r);
    for (int v = 0; v < nv; ++v) {
      col = b_.CreateAdd(col0, i64c(v * lanes_));
      llvm::Value* mask = masks[static_cast<std::size_t>(v)];
      const auto leaf = [&](const ExprNode& node) -> llvm::Value* {
        const EpilogueRead read = bind_epilogue_leaf(sig, node, row_e, col_e, batch_e);
        switch (read.source) {
          case EpilogueSource::Accumulator:
            return accumulator(r, v);
          case EpilogueSource::Alpha:
            return alpha;
          case EpilogueSource::Beta:
            return beta;
          case EpilogueSource::ZeroC:
            return llvm::ConstantFP::getNegativeZero(vec_);
          case EpilogueSource::C:
          case EpilogueSource::Input:
            break;
        }
        const TensorFields& t = read.source == EpilogueSource::C ? c : inputs[read.input];
        return load_lanes(t, index(read.offset), read.column_step, read.broadcast ? nullptr : index(read.column_step),
                          mask);
      };
      llvm::Value* value = emit_expr(b_, sig.epilogue.tree(), vec_, leaf);
      if (column_major_d) {
        b_.CreateAlignedStore(value, b_.CreateGEP(vec_, tile, slot(r, v)), llvm::Align(4));
        continue;
      }
      llvm::Value* offset =
          b_.CreateAdd(b_.CreateAdd(d_base, b_.CreateMul(r, d_rs)),
                       is_constant(dl.col_stride("d"), 1) ? i64c(v * lanes_) : b_.CreateMul(i64c(v * lanes_), d_cs));
      llvm::Type* element = d_element(sig);
      const llvm::Align align(dtype_bytes(sig.d.dtype));
      if (is_constant(dl.col_stride("d"), 1)) {
        store_lanes(to_d_type(sig, value), b_.CreateGEP(element, d.data, offset), lanes_left(v), align);
      } else {
        llvm::Value* stride = index(dl.col_stride("d"));
        llvm::Value* lanes = b_.CreateAdd(b_.CreateVectorSplat(lanes_, offset),
                                          b_.CreateMul(lane_indices(lanes_), b_.CreateVectorSplat(lanes_, stride)));
        b_.CreateMaskedScatter(to_d_type(sig, value), b_.CreateGEP(element, d.data, lanes), align, mask);
      }
    }
  };
  if (parked) {
    llvm::Value* last = b_.CreateSelect(b_.CreateICmpSLT(rows, i64c(mr)), rows, i64c(mr));
    emit_for(
        b_, i64c(0), last, i64c(1), [&](llvm::Value* r) { emit_row(r); }, "epilogue.row");
  } else {
    for (int r = 0; r < mr; ++r)
      emit_if(
          b_, b_.CreateICmpSLT(i64c(r), rows), [&] { emit_row(i64c(r)); }, "row");
  }
  if (!column_major_d) return;
  // Per vector of columns and chunk of at most 8 rows: the chunk's columns by staged shuffles (columns_of_rows),
  // one store of the chunk's rows per column; rows past the edge, or past the tile's MR, are masked off, columns
  // past the edge store nothing.
  const int chunk = 8;
  for (int v = 0; v < nv; ++v)
    for (int r0 = 0; r0 < mr; r0 += chunk) {
      const int rows_here = std::min(chunk, mr - r0);
      std::vector<llvm::Value*> values;
      for (int r = r0; r < r0 + rows_here; ++r)
        values.push_back(b_.CreateAlignedLoad(vec_, b_.CreateGEP(vec_, tile, i64c(r * nv + v)), llvm::Align(4)));
      const std::vector<llvm::Value*> columns = columns_of_rows(std::move(values));
      const int piece = static_cast<int>(llvm::cast<llvm::FixedVectorType>(columns[0]->getType())->getNumElements());
      llvm::Value* row_mask = lane_mask(piece, b_.CreateSub(rows, i64c(r0)));
      if (rows_here < piece) row_mask = b_.CreateAnd(row_mask, lane_mask(piece, i64c(rows_here)));
      row = b_.CreateAdd(row0, i64c(r0));
      for (int q = 0; q < lanes_; ++q) {
        col = b_.CreateAdd(col0, i64c(v * lanes_ + q));
        llvm::Value* col_valid = b_.CreateVectorSplat(piece, b_.CreateICmpSLT(i64c(v * lanes_ + q), cols));
        llvm::Value* ptr = b_.CreateGEP(d_element(sig), d.data, index(dl.offset("d", row_e, col_e, batch_e)));
        b_.CreateMaskedStore(to_d_type(sig, columns[static_cast<std::size_t>(q)]), ptr,
                             llvm::Align(dtype_bytes(sig.d.dtype)), b_.CreateAnd(row_mask, col_valid));
      }
    }
}

}  // namespace tessera
