// The IR building blocks every CPU kernel emitter composes: functions with the target's ISA attributes, masked
// vector loads and stores, lane masks, tensor arguments (data pointer and strides), loads along an output row, and
// in-register transposes. A kernel emitter (GEMM's, and the attention and sparse ones) derives from IrKit and adds
// its argument struct and loop structure.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generator/core/cpu_target.hpp"
#include "generator/core/expr.hpp"
#include "generator/core/layout.hpp"

namespace tessera {

// A tensor argument as a kernel loads it: the fields of the ABI's TensorArg (data, row, column and batch strides).
struct TensorFields {
  llvm::Value* data;
  llvm::Value* rs;
  llvm::Value* cs;
  llvm::Value* bs;
};

class IrKit {
 public:
  // A module named `module_name` for `target`; `target_features` (e.g. "+avx512bf16") go on every function.
  IrKit(llvm::LLVMContext& ctx, const std::string& module_name, const CpuTarget& target, std::string target_features);

 protected:
  // A function of the module with the target's ISA attributes, its builder positioned in its entry block.
  llvm::Function* make_function(const std::string& name, llvm::Type* ret, std::vector<llvm::Type*> params,
                                bool external);

  // Marks `fn` for the backend's unoptimised path (optnone: fast instruction selection and register allocation), for
  // a driver whose time is spent in the functions it calls: it compiles in a quarter of the time.
  static void unoptimised(llvm::Function* fn);

  // The finished module, checked by LLVM's verifier; throws CompileError naming `emitter` when it is invalid.
  std::unique_ptr<llvm::Module> verified_module(const char* emitter);

  llvm::Value* i64c(std::int64_t v);

  llvm::Value* gep(llvm::Value* base, llvm::Value* index);

  // `value` through an empty inline asm: the same register, but no longer an expression loop strength reduction
  // can see through (it would fold a stepped pointer back into a base + index from the loop counter).
  llvm::Value* opaque(llvm::Value* value);

  llvm::Value* smin(llvm::Value* x, llvm::Value* y);

  llvm::Value* smax(llvm::Value* x, llvm::Value* y);

  // Masked vector accesses become plain ones when the mask is all true at generation time (full tiles): a masked
  // load of B read in place cost 15-20% of a GEMV's time.
  static bool all_true(llvm::Value* mask);

  llvm::Value* load_masked(llvm::Value* ptr, llvm::Value* mask);
  // bf16 values (16-bit integer lanes) widened to f32: the top half of each f32's bits.
  llvm::Value* widen_bf16(llvm::Value* halves);
  // `lanes_` bf16 values at ptr (lanes off in `mask` zero), widened to f32.
  llvm::Value* load_masked_bf16(llvm::Value* ptr, llvm::Value* mask);

  void store_masked(llvm::Value* value, llvm::Value* ptr, llvm::Value* mask, llvm::Align align = llvm::Align(4));
  // Lanes [0, n) of `value` at ptr, n known at generation time, by plain stores of pieces of 2^i lanes. AVX2's masked
  // stores (vmaskmovps) are microcoded on AMD's cores (Zen 3: an SpMM tile ran 1.9x faster once its stores were
  // plain).
  void store_first_lanes(llvm::Value* value, llvm::Value* ptr, int n, llvm::Align align = llvm::Align(4));
  // Lanes [0, count) of `value` at ptr (count may exceed the lanes, or be 0 or less): on AVX2 a branch to a whole
  // store or to the plain stores of each partial count, on AVX-512 one masked store.
  void store_lanes(llvm::Value* value, llvm::Value* ptr, llvm::Value* count, llvm::Align align = llvm::Align(4));

  llvm::Constant* lane_indices(int n);

  // Lanes i with i + first < limit.
  llvm::Value* lane_mask(int n, llvm::Value* limit, std::int64_t first = 0);

  TensorFields load_tensor(llvm::Value* tensor_ptr);

  // A fixed-size matrix of `rows`×`cols` stored contiguously in its layout: its leading dimension as a constant.
  TensorFields dense(TensorFields t, const Layout& l, std::int64_t rows, std::int64_t cols);

  // Whether t's leading dimension is the one dense() assumes (true for the layouts it leaves alone).
  llvm::Value* is_dense(const TensorFields& t, const Layout& l, std::int64_t rows, std::int64_t cols);

  // Rows of `lanes_` values (at most `lanes_` of them, the first `rows_here` real) as columns: element q·rows_here + r
  // of the result is element q of row r. Concatenated pairwise (padded with zero vectors to a power of two), then
  // one shuffle picks element (r, q) for (q, r).
  llvm::Value* transpose_rows(std::vector<llvm::Value*> rows, int rows_here);

  // Loads `lanes_` values of a tensor along the output row: lane i at offset(row, col + i).
  llvm::Value* load_lanes(const TensorFields& t, llvm::Value* offset, const Expr& col_stride, llvm::Value* stride,
                          llvm::Value* mask);

  llvm::Value* lane_pointers(llvm::Value* base, llvm::Value* offset, llvm::Value* stride);

  // At most 8 vectors of `lanes_` values (rows) as their `lanes_` columns, each of 4 values (up to 4 rows) or 8
  // (up to 8), the rows past the given ones zero. Staged two-source shuffles that each match one instruction:
  // unpacks of 32-bit and 64-bit pairs within 128-bit lanes leave, in 128-bit lane L of u[i], column 4L + i of
  // rows 0-3 (u[4 + i]: of rows 4-7); one more shuffle joins the two halves of 8-row columns. A 6×64 tile of a
  // column-major D in one shuffle per chunk (LLVM expanded it to ~2,500 instructions) ran a fixed 64³×64 at 116
  // GFLOP/s against 155 with a row-major D.
  std::vector<llvm::Value*> columns_of_rows(std::vector<llvm::Value*> rows);

  // 16 vectors of 16 floats as their 16 columns, in four rounds of two-source shuffles that each match one
  // instruction: unpack of 32-bit and of 64-bit pairs within 128-bit lanes, then two rounds of 128-bit lane
  // selects (vshuff32x4). 64 shuffles, no constant vectors.
  std::vector<llvm::Value*> transpose16(const std::vector<llvm::Value*>& rows);

  CpuTarget target_;
  std::string target_features_;
  int lanes_;  // f32 lanes of a vector register
  llvm::LLVMContext& ctx_;
  std::unique_ptr<llvm::Module> module_;
  llvm::IRBuilder<> b_;
  llvm::Type* f32_;
  llvm::Type* i64_;
  llvm::Type* ptr_;
  llvm::FixedVectorType* vec_;
  llvm::StructType* tensor_ty_;  // the ABI's TensorArg
};

}  // namespace tessera
