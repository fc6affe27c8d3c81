#include "generator/llvm/sparse_emitter.hpp"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <cstddef>
#include <stdexcept>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_epilogue_binding.hpp"
#include "generator/llvm/expr_llvm.hpp"
#include "generator/llvm/loops.hpp"
#include "generator/llvm/output_tile.hpp"
#include "generator/sparse/sparse_abi.hpp"

namespace tessera {

namespace {

static_assert(offsetof(SpmmKernelArgs, b) == 56 && offsetof(SpmmKernelArgs, inputs) == 152 &&
              offsetof(SpmmKernelArgs, accumulate) == 168 && offsetof(SpmmKernelArgs, n_begin) == 176 &&
              sizeof(SpmmKernelArgs) == 192);
static_assert(offsetof(SddmmKernelArgs, a) == 56 && offsetof(SddmmKernelArgs, out) == 120 &&
              offsetof(SddmmKernelArgs, accumulate) == 140 && sizeof(SddmmKernelArgs) == 152);

// The fields both argument structs start with.
enum PatternField : unsigned { kM, kN, kK, kEntries, kOffsets, kIndices, kValues };

// The pattern arrays and the loads every sparse kernel makes of them.
class SparseKernelEmitter : protected OutputTiles {
 protected:
  SparseKernelEmitter(llvm::LLVMContext& ctx, const std::string& name, const CpuTarget& target,
                      const SparseSignature& sparse)
      : OutputTiles(ctx, name, target, ""), sparse_(sparse), index_ty_(b_.getIntNTy(sparse.index_bits)) {}

  llvm::Value* field(unsigned index, llvm::Type* t) {
    return b_.CreateLoad(t, b_.CreateStructGEP(args_ty_, args_, index));
  }
  void load_pattern() {
    m_ = field(kM, i64_);
    n_ = field(kN, i64_);
    k_ = field(kK, i64_);
    entries_ = field(kEntries, i64_);
    offsets_ = field(kOffsets, ptr_);
    indices_ = field(kIndices, ptr_);
    values_ = field(kValues, ptr_);
  }
  // Element i of an index array, as i64 (the binding proved every index non-negative).
  llvm::Value* load_index(llvm::Value* array, llvm::Value* i) {
    llvm::Value* v = b_.CreateLoad(index_ty_, b_.CreateGEP(index_ty_, array, i));
    return sparse_.index_bits == 64 ? v : b_.CreateSExt(v, i64_);
  }
  // Lanes of an index array from element i, as i64, lanes off in `mask` 0.
  llvm::Value* load_indices(llvm::Value* array, llvm::Value* i, llvm::Value* mask) {
    auto* type = llvm::FixedVectorType::get(index_ty_, static_cast<unsigned>(lanes_));
    llvm::Value* v = b_.CreateMaskedLoad(type, b_.CreateGEP(index_ty_, array, i), llvm::Align(sparse_.index_bits / 8),
                                         mask, llvm::Constant::getNullValue(type));
    return sparse_.index_bits == 64 ? v : b_.CreateSExt(v, llvm::FixedVectorType::get(i64_, lanes_));
  }
  // A stored value as f32.
  llvm::Value* load_value(llvm::Value* i) {
    if (sparse_.value == DType::f32) return b_.CreateLoad(f32_, gep(values_, i));
    llvm::Value* half = b_.CreateLoad(b_.getInt16Ty(), b_.CreateGEP(b_.getInt16Ty(), values_, i));
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(half, b_.getInt32Ty()), 16), f32_);
  }
  // Lanes of stored values from element i as f32, lanes off in `mask` 0.
  llvm::Value* load_values(llvm::Value* i, llvm::Value* mask) {
    if (sparse_.value == DType::f32) return load_masked(gep(values_, i), mask);
    auto* halves = llvm::FixedVectorType::get(b_.getInt16Ty(), lanes_);
    llvm::Value* v = b_.CreateMaskedLoad(halves, b_.CreateGEP(b_.getInt16Ty(), values_, i), llvm::Align(2), mask,
                                         llvm::Constant::getNullValue(halves));
    auto* words = llvm::FixedVectorType::get(b_.getInt32Ty(), lanes_);
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, words), 16), vec_);
  }
  void prefetch(llvm::Value* address) {
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr_}, {address, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
  }

  SparseSignature sparse_;
  llvm::Type* index_ty_;
  llvm::StructType* args_ty_ = nullptr;
  llvm::Value* args_ = nullptr;
  llvm::Value *m_ = nullptr, *n_ = nullptr, *k_ = nullptr, *entries_ = nullptr;
  llvm::Value *offsets_ = nullptr, *indices_ = nullptr, *values_ = nullptr;
};

enum SpmmField : unsigned {
  kSpmmB = kValues + 1,
  kSpmmC,
  kSpmmD,
  kSpmmInputs,
  kSpmmAlpha,
  kSpmmBeta,
  kSpmmAccumulate,
  kSpmmFinish,
  kSpmmNBegin,
  kSpmmNEnd
};

class CpuSpmmEmitter : SparseKernelEmitter {
 public:
  CpuSpmmEmitter(const CpuSpmmSpec& spec, llvm::LLVMContext& ctx)
      : SparseKernelEmitter(ctx, spec.name(), spec.target, spec.signature.a),
        spec_(spec),
        sig_(spec.signature.dense),
        cfg_(spec.config),
        rows_(spec.signature.a.block_rows),
        cols_(spec.signature.a.block_cols) {
    std::vector<llvm::Type*> fields{i64_, i64_, i64_, i64_, ptr_, ptr_, ptr_};
    fields.insert(fields.end(),
                  {tensor_ty_, tensor_ty_, tensor_ty_, ptr_, f32_, f32_, b_.getInt32Ty(), b_.getInt32Ty(), i64_, i64_});
    args_ty_ = llvm::StructType::create(ctx, fields, "tessera.SpmmKernelArgs");
  }

  std::unique_ptr<llvm::Module> emit() {
    llvm::Function* fn = make_function(spec_.name(), b_.getVoidTy(), {ptr_, i64_, i64_}, true);
    args_ = fn->getArg(0);
    load_pattern();
    b_tensor_ = load_tensor(b_.CreateStructGEP(args_ty_, args_, kSpmmB));
    operands_.c = load_tensor(b_.CreateStructGEP(args_ty_, args_, kSpmmC));
    operands_.d = load_tensor(b_.CreateStructGEP(args_ty_, args_, kSpmmD));
    llvm::Value* inputs = field(kSpmmInputs, ptr_);
    for (std::size_t i = 0; i < sig_.inputs.size(); ++i)
      operands_.inputs.push_back(load_tensor(b_.CreateGEP(tensor_ty_, inputs, i64c(static_cast<std::int64_t>(i)))));
    operands_.alpha = b_.CreateVectorSplat(lanes_, field(kSpmmAlpha, f32_));
    // As GEMM's: a C the binding does not read is only ever scaled by beta = 0.
    operands_.beta = !sig_.c.layout.reads_memory() ? llvm::Constant::getNullValue(vec_)
                                                   : b_.CreateVectorSplat(lanes_, field(kSpmmBeta, f32_));
    last_entry_ = b_.CreateSub(entries_, i64c(1));
    accumulate_ = b_.CreateICmpNE(field(kSpmmAccumulate, b_.getInt32Ty()), b_.getInt32(0));
    finish_ = b_.CreateICmpNE(field(kSpmmFinish, b_.getInt32Ty()), b_.getInt32(0));

    const std::int64_t width = std::int64_t{cfg_.nv} * lanes_;
    llvm::Value* n_begin = field(kSpmmNBegin, i64_);
    n_end_ = field(kSpmmNEnd, i64_);
    llvm::Value* n_full =
        b_.CreateAdd(n_begin, b_.CreateMul(b_.CreateSDiv(b_.CreateSub(n_end_, n_begin), i64c(width)), i64c(width)));
    emit_for(
        b_, fn->getArg(1), fn->getArg(2), i64c(1),
        [&](llvm::Value* block_row) {
          llvm::Value* first = load_index(offsets_, block_row);
          llvm::Value* end = load_index(offsets_, b_.CreateAdd(block_row, i64c(1)));
          llvm::Value* row0 = b_.CreateMul(block_row, i64c(rows_));
          llvm::Value* rows = smin(i64c(rows_), b_.CreateSub(m_, row0));
          emit_for(
              b_, n_begin, n_full, i64c(width),
              [&](llvm::Value* n0) { emit_tile(first, end, row0, rows, n0, cfg_.nv, false); }, "n.tiles");
          // The edge tile by its count of vectors: each case loads and stores all but the last unmasked and masks
          // only that one (with every vector masked, the masks took registers from the accumulators, which spilled).
          emit_if(
              b_, b_.CreateICmpSLT(n_full, n_end_),
              [&] {
                llvm::Value* last_vector =
                    b_.CreateSDiv(b_.CreateSub(b_.CreateSub(n_end_, n_full), i64c(1)), i64c(lanes_));
                llvm::Function* kernel = b_.GetInsertBlock()->getParent();
                auto* done = llvm::BasicBlock::Create(b_.getContext(), "n.edge.done", kernel);
                llvm::SwitchInst* choice = b_.CreateSwitch(last_vector, done, static_cast<unsigned>(cfg_.nv));
                for (int f = 0; f < cfg_.nv; ++f) {
                  auto* block = llvm::BasicBlock::Create(b_.getContext(), "n.edge.vectors", kernel);
                  choice->addCase(b_.getInt64(static_cast<std::uint64_t>(f)), block);
                  b_.SetInsertPoint(block);
                  emit_tile(first, end, row0, rows, n_full, f + 1, true);
                  b_.CreateBr(done);
                }
                b_.SetInsertPoint(done);
              },
              "n.edge");
        },
        "block.rows");
    b_.CreateRetVoid();
    return verified_module("sparse emitter");
  }

 private:
  // One output tile: rows × nv vectors of N from n0, over the block row's entries [first, end). An edge tile's
  // last vector holds the columns left (1 to lanes of them), the others are whole.
  void emit_tile(llvm::Value* first, llvm::Value* end, llvm::Value* row0, llvm::Value* rows, llvm::Value* n0, int nv,
                 bool edge) {
    const int chains = cfg_.chains;
    const std::size_t tile = static_cast<std::size_t>(rows_ * nv);
    // An inner tile's columns are a constant, so that its masks fold away: AVX2's masked stores (vmaskmovps) are
    // microcoded on AMD's cores and were the most costly part of a tile.
    llvm::Value* cols = edge ? b_.CreateSub(n_end_, n0) : i64c(std::int64_t{nv} * lanes_);
    // Only an edge tile's last vector may be partial: the others store whole, with no per-count stores (on AVX2 a
    // switch each, which multiplied the kernel's compile time).
    const int whole = edge ? nv - 1 : nv;
    std::vector<llvm::Value*> masks;
    for (int v = 0; v < nv; ++v)
      masks.push_back(edge && v == nv - 1
                          ? lane_mask(lanes_, cols, std::int64_t{v} * lanes_)
                          : llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), lanes_)));
    LoopValues acc(tile * static_cast<std::size_t>(chains), llvm::Constant::getNullValue(vec_));
    // A later column panel starts from the partial sums the earlier ones left in D.
    const LoopValues start = emit_select_values(
        b_, accumulate_,
        [&] {
          LoopValues partial;
          for (int r = 0; r < rows_; ++r) {
            llvm::Value* valid = row_valid(r, rows);
            for (int v = 0; v < nv; ++v)
              partial.push_back(load_masked(gep(operands_.d.data, partial_offset(row0, r, n0, v)),
                                            b_.CreateAnd(masks[static_cast<std::size_t>(v)], valid)));
          }
          return partial;
        },
        [&] { return LoopValues(tile, llvm::Constant::getNullValue(vec_)); }, "partial");
    std::copy(start.begin(), start.end(), acc.begin());
    llvm::Value* count = b_.CreateSub(end, first);
    llvm::Value* main_end = b_.CreateAdd(first, b_.CreateMul(b_.CreateSDiv(count, i64c(chains)), i64c(chains)));
    acc = emit_for(
        b_, first, main_end, i64c(chains), acc,
        [&](llvm::Value* p, const LoopValues& carried) {
          LoopValues values = carried;
          for (int ch = 0; ch < chains; ++ch)
            emit_entry(values, tile * static_cast<std::size_t>(ch), b_.CreateAdd(p, i64c(ch)), n0, masks);
          return values;
        },
        "entries");
    if (chains > 1)
      acc = emit_for(
          b_, main_end, end, i64c(1), acc,
          [&](llvm::Value* p, const LoopValues& carried) {
            LoopValues values = carried;
            emit_entry(values, 0, p, n0, masks);
            return values;
          },
          "entries.rest");
    LoopValues sum(acc.begin(), acc.begin() + static_cast<std::ptrdiff_t>(tile));
    for (int ch = 1; ch < chains; ++ch)
      for (std::size_t i = 0; i < tile; ++i)
        sum[i] = b_.CreateFAdd(sum[i], acc[tile * static_cast<std::size_t>(ch) + i]);
    emit_if_else(
        b_, finish_, [&] { store_output_tile(sig_, operands_, sum, rows_, row0, n0, rows, cols, i64c(0), whole); },
        [&] {
          // Rows past M (in the last block row) are skipped by a branch, not a lane mask.
          for (int r = 0; r < rows_; ++r) {
            const auto store_row = [&] {
              for (int v = 0; v < nv; ++v)
                store_lanes(sum[static_cast<std::size_t>(r * nv + v)],
                            gep(operands_.d.data, partial_offset(row0, r, n0, v)),
                            v < whole ? i64c(lanes_) : b_.CreateSub(cols, i64c(std::int64_t{v} * lanes_)));
            };
            if (r == 0)
              store_row();
            else
              emit_if(b_, b_.CreateICmpSLT(i64c(r), rows), store_row, "partial.row");
          }
        },
        "finish");
  }

  // Row r of a block row is within M: the first always is.
  llvm::Value* row_valid(int r, llvm::Value* rows) {
    if (r == 0) return llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), lanes_));
    return b_.CreateVectorSplat(lanes_, b_.CreateICmpSLT(i64c(r), rows));
  }

  // Element (row0 + r, n0 + v·lanes) of a row-major D: where a panel's partial sums live.
  llvm::Value* partial_offset(llvm::Value* row0, int r, llvm::Value* n0, int v) {
    return b_.CreateAdd(b_.CreateMul(b_.CreateAdd(row0, i64c(r)), operands_.d.rs),
                        b_.CreateAdd(n0, i64c(std::int64_t{v} * lanes_)));
  }

  // acc[first ...] += the block of entry p times the B rows its block column names (nv vectors from n0).
  void emit_entry(LoopValues& acc, std::size_t first, llvm::Value* p, llvm::Value* n0,
                  const std::vector<llvm::Value*>& masks) {
    llvm::Value* col0 = b_.CreateMul(load_index(indices_, p), i64c(cols_));
    if (cfg_.prefetch > 0) {
      // The B rows of an entry `prefetch` ahead (it may be in a later row: the pattern runs on).
      llvm::Value* ahead = smin(b_.CreateAdd(p, i64c(cfg_.prefetch)), last_entry_);
      llvm::Value* row = b_.CreateMul(load_index(indices_, ahead), i64c(cols_));
      // Addressed in B's own elements (a bf16 B has 32 a line).
      const int element = dtype_bytes(sig_.b.dtype), per_line = 64 / element;
      llvm::Type* element_ty = element == 4 ? f32_ : b_.getInt16Ty();
      const int lines = std::max(1, static_cast<int>(masks.size()) * lanes_ * element / 64);
      for (int c = 0; c < cols_; ++c) {
        llvm::Value* at = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(row, i64c(c)), b_tensor_.rs), n0);
        for (int l = 0; l < lines; ++l)
          prefetch(b_.CreateGEP(element_ty, b_tensor_.data, b_.CreateAdd(at, i64c(std::int64_t{l} * per_line))));
      }
    }
    llvm::Value* base = b_.CreateMul(p, i64c(std::int64_t{rows_} * cols_));
    const auto column = [&](llvm::Value* c) {
      llvm::Value* brow = b_.CreateAdd(col0, c);
      llvm::Value* at = b_.CreateAdd(b_.CreateMul(brow, b_tensor_.rs), n0);
      std::vector<llvm::Value*> bv;
      for (std::size_t v = 0; v < masks.size(); ++v) {
        llvm::Value* offset = b_.CreateAdd(at, i64c(static_cast<std::int64_t>(v) * lanes_));
        bv.push_back(load_b(offset, masks[static_cast<std::size_t>(v)]));
      }
      outer_product_step(acc, first, rows_, bv, [&](int r) {
        return load_value(b_.CreateAdd(base, b_.CreateAdd(i64c(std::int64_t{r} * cols_), c)));
      });
    };
    if (cols_ == 1) {
      column(i64c(0));
      return;
    }
    // A block reaching past K (the last block column of a K that is not a multiple of the block's columns) reads
    // only B's real rows, in a loop (the unrolled copy is for whole blocks); its values past K count as zeros.
    llvm::Value* whole = b_.CreateICmpSLE(b_.CreateAdd(col0, i64c(cols_)), k_);
    const LoopValues before = acc;
    acc = emit_select_values(
        b_, whole,
        [&] {
          acc = before;
          for (int c = 0; c < cols_; ++c) column(i64c(c));
          return acc;
        },
        [&] {
          return emit_for(
              b_, i64c(0), b_.CreateSub(k_, col0), i64c(1), before,
              [&](llvm::Value* c, const LoopValues& carried) {
                acc = carried;
                column(c);
                return acc;
              },
              "block.edge");
        },
        "block");
  }

  llvm::Value* load_b(llvm::Value* offset, llvm::Value* mask) {
    if (sig_.b.dtype == DType::f32) return load_masked(gep(b_tensor_.data, offset), mask);
    PackArgs source{b_tensor_.data, nullptr, nullptr, nullptr, nullptr, nullptr, true};
    return load_source(source, vec_, offset, mask);
  }

  const CpuSpmmSpec& spec_;
  const GemmSignature& sig_;
  CpuSpmmConfig cfg_;
  int rows_, cols_;
  TensorFields b_tensor_{};
  EpilogueOperands operands_{};
  llvm::Value* last_entry_ = nullptr;
  llvm::Value* n_end_ = nullptr;
  llvm::Value *accumulate_ = nullptr, *finish_ = nullptr;
};

// Cache lines of a prefetched B row at most (a longer row's later lines follow the hardware prefetcher).
constexpr int kPrefetchLines = 4;

enum SddmmField : unsigned {
  kSddmmA = kValues + 1,
  kSddmmB,
  kSddmmOut,
  kSddmmInputs,
  kSddmmAlpha,
  kSddmmAccumulate,
  kSddmmFinish
};

class CpuSddmmEmitter : SparseKernelEmitter {
 public:
  CpuSddmmEmitter(const CpuSddmmSpec& spec, llvm::LLVMContext& ctx)
      : SparseKernelEmitter(ctx, spec.name(), spec.target, spec.signature.pattern),
        spec_(spec),
        sig_(spec.signature.dense),
        cfg_(spec.config) {
    std::vector<llvm::Type*> fields{i64_, i64_, i64_, i64_, ptr_, ptr_, ptr_};
    fields.insert(fields.end(), {tensor_ty_, tensor_ty_, ptr_, ptr_, f32_, b_.getInt32Ty(), b_.getInt32Ty()});
    args_ty_ = llvm::StructType::create(ctx, fields, "tessera.SddmmKernelArgs");
  }

  std::unique_ptr<llvm::Module> emit() {
    llvm::Function* fn = make_function(spec_.name(), b_.getVoidTy(), {ptr_, i64_, i64_}, true);
    args_ = fn->getArg(0);
    load_pattern();
    a_ = load_tensor(b_.CreateStructGEP(args_ty_, args_, kSddmmA));
    bt_ = load_tensor(b_.CreateStructGEP(args_ty_, args_, kSddmmB));
    out_ = field(kSddmmOut, ptr_);
    llvm::Value* inputs = field(kSddmmInputs, ptr_);
    for (std::size_t i = 0; i < sig_.inputs.size(); ++i)
      inputs_.push_back(load_tensor(b_.CreateGEP(tensor_ty_, inputs, i64c(static_cast<std::int64_t>(i)))));
    alpha_ = b_.CreateVectorSplat(lanes_, field(kSddmmAlpha, f32_));
    if (cfg_.k_panel > 0) {
      accumulate_ = b_.CreateICmpNE(field(kSddmmAccumulate, b_.getInt32Ty()), b_.getInt32(0));
      finish_ = b_.CreateICmpNE(field(kSddmmFinish, b_.getInt32Ty()), b_.getInt32(0));
    }
    const int cols = cfg_.cols;
    emit_for(
        b_, fn->getArg(1), fn->getArg(2), i64c(1),
        [&](llvm::Value* row) {
          llvm::Value* first = load_index(offsets_, row);
          llvm::Value* end = load_index(offsets_, b_.CreateAdd(row, i64c(1)));
          llvm::Value* a_row = gep(a_.data, b_.CreateMul(row, a_.rs));
          llvm::Value* count = b_.CreateSub(end, first);
          llvm::Value* main_end = b_.CreateAdd(first, b_.CreateMul(b_.CreateSDiv(count, i64c(cols)), i64c(cols)));
          emit_for(
              b_, first, main_end, i64c(cols), [&](llvm::Value* p) { emit_group(row, a_row, p, i64c(cols)); },
              "entries");
          emit_if(
              b_, b_.CreateICmpSLT(main_end, end),
              [&] { emit_group(row, a_row, main_end, b_.CreateSub(end, main_end)); }, "entries.rest");
        },
        "rows");
    b_.CreateRetVoid();
    return verified_module("sparse emitter");
  }

 private:
  // Entries [p, p + count) of pattern row `row` (count ≤ cols): their dot products, epilogue and stores.
  void emit_group(llvm::Value* row, llvm::Value* a_row, llvm::Value* p, llvm::Value* count) {
    const int cols = cfg_.cols;
    llvm::Value* last = b_.CreateSub(b_.CreateAdd(p, count), i64c(1));
    std::vector<llvm::Value*> b_rows;
    for (int c = 0; c < cols; ++c) {
      // Past the group's real entries the last one is read again (its result is not stored).
      llvm::Value* e = c == 0 ? p : smin(b_.CreateAdd(p, i64c(c)), last);
      b_rows.push_back(gep(bt_.data, b_.CreateMul(load_index(indices_, e), bt_.rs)));
    }
    if (cfg_.prefetch > 0) {
      // The B rows of the entries `prefetch` ahead (the pattern runs on past this row), their first lines.
      llvm::Value* last_entry = b_.CreateSub(entries_, i64c(1));
      for (int c = 0; c < cols; ++c) {
        llvm::Value* e = smin(b_.CreateAdd(p, i64c(cfg_.prefetch + c)), last_entry);
        llvm::Value* row_at = b_.CreateMul(load_index(indices_, e), bt_.rs);
        // A prefetch never faults: lines past a short row cost an instruction, not a branch.
        for (int line = 0; line < kPrefetchLines; ++line)
          prefetch(gep(bt_.data, b_.CreateAdd(row_at, i64c(16 * line))));
      }
    }
    LoopValues acc(static_cast<std::size_t>(cols), llvm::Constant::getNullValue(vec_));
    acc = dot_k_loop(acc, {a_row}, b_rows, k_, cfg_.unroll);
    llvm::Value* sums = dot_lane_sums(acc, 1, cols)[0];
    llvm::Value* mask = lane_mask(lanes_, count);
    const auto store = [&](llvm::Value* value) { store_lanes(value, gep(out_, p), count); };
    if (cfg_.k_panel == 0) {
      store(epilogue(row, p, mask, sums));
      return;
    }
    // A later K panel adds to the partial sums the earlier ones left in out; only the last applies the epilogue.
    sums = emit_select_values(
        b_, accumulate_, [&] { return LoopValues{b_.CreateFAdd(sums, load_masked(gep(out_, p), mask))}; },
        [&] { return LoopValues{sums}; }, "partial")[0];
    emit_if_else(
        b_, finish_, [&] { store(epilogue(row, p, mask, sums)); }, [&] { store(sums); }, "finish");
  }

  // The epilogue of the dot products `sums` of entries [p, p + lanes of mask) of pattern row `row`.
  llvm::Value* epilogue(llvm::Value* row, llvm::Value* p, llvm::Value* mask, llvm::Value* sums) {
    llvm::Value* columns = nullptr;  // the entries' column indices, loaded when the epilogue reads a [n] tensor
    const Expr row_e = var("row", ExprType::Int), col_e = var("col", ExprType::Int), batch_e = int_constant(0);
    const auto fields_of = [&](const std::string& prefix) -> const TensorFields& {
      for (std::size_t i = 0; i < sig_.inputs.size(); ++i)
        if (prefix == "in." + sig_.inputs[i].name) return inputs_[i];
      throw std::logic_error("sddmm: unknown tensor " + prefix);
    };
    const auto int_leaf = [&](const ExprNode& node) -> llvm::Value* {
      if (node.name == "row") return row;
      if (node.name == "col") {
        if (!columns) columns = load_indices(indices_, p, mask);
        return columns;
      }
      if (node.name == "batch") return i64c(0);
      const auto dot = node.name.rfind('.');
      const TensorFields& t = fields_of(node.name.substr(0, dot));
      const std::string part = node.name.substr(dot + 1);
      return part == "rs" ? t.rs : part == "cs" ? t.cs : t.bs;
    };
    const auto leaf = [&](const ExprNode& node) -> llvm::Value* {
      if (node.op == ExprOp::Var && node.name == "acc") return sums;
      if (node.op == ExprOp::Var && node.name == "alpha") return alpha_;
      if (node.op == ExprOp::Var && node.name == "s") return load_values(p, mask);
      const EpilogueRead read = bind_epilogue_leaf(sig_, node, row_e, col_e, batch_e);
      const TensorFields& t = inputs_[read.input];
      llvm::Value* offset = emit_expr(b_, read.offset, f32_, int_leaf);
      if (!offset->getType()->isVectorTy())
        return b_.CreateVectorSplat(lanes_, b_.CreateLoad(f32_, gep(t.data, offset)));
      return b_.CreateMaskedGather(vec_, gep(t.data, offset), llvm::Align(4), mask, llvm::Constant::getNullValue(vec_));
    };
    return emit_expr(b_, sig_.epilogue.tree(), vec_, leaf);
  }

  const CpuSddmmSpec& spec_;
  const GemmSignature& sig_;
  CpuSddmmConfig cfg_;
  TensorFields a_{}, bt_{};
  llvm::Value* out_ = nullptr;
  llvm::Value* alpha_ = nullptr;
  llvm::Value *accumulate_ = nullptr, *finish_ = nullptr;
  std::vector<TensorFields> inputs_;
};

}  // namespace

std::unique_ptr<llvm::Module> emit_spmm_llvm(const CpuSpmmSpec& spec, llvm::LLVMContext& context) {
  validate(spec.signature, spec.config, spec.target);
  return CpuSpmmEmitter(spec, context).emit();
}

CpuModuleSource cpu_module_source(const CpuSpmmSpec& spec) {
  validate(spec.signature, spec.config, spec.target);
  return {spec.name(), spec.hash(), [spec](llvm::LLVMContext& context) { return emit_spmm_llvm(spec, context); }};
}

std::unique_ptr<llvm::Module> emit_sddmm_llvm(const CpuSddmmSpec& spec, llvm::LLVMContext& context) {
  validate(spec.signature, spec.config, spec.target);
  return CpuSddmmEmitter(spec, context).emit();
}

CpuModuleSource cpu_module_source(const CpuSddmmSpec& spec) {
  validate(spec.signature, spec.config, spec.target);
  return {spec.name(), spec.hash(), [spec](llvm::LLVMContext& context) { return emit_sddmm_llvm(spec, context); }};
}

}  // namespace tessera
