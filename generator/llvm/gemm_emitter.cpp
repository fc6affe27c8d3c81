#include "generator/llvm/gemm_emitter.hpp"

#include <fmt/format.h>

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <algorithm>
#include <cstddef>
#include <map>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_abi.hpp"
#include "generator/gemm/gemm_epilogue_binding.hpp"
#include "generator/llvm/expr_llvm.hpp"
#include "generator/llvm/loops.hpp"
#include "generator/llvm/output_tile.hpp"

namespace tessera {

namespace {

// Multiply-adds per micro-kernel call (MR·NR·KC) from which the driver around the calls is compiled unoptimised
// (IrKit::unoptimised): its loop overhead per call is then a few percent of the call at most. Optimised, the
// driver of an 8x32x192 tile took ~6 ms of the backend, more than its micro-kernel's part (Zen 4, 2 threads:
// 1024³ cold compile 10.1 -> 8.6 ms; run speed, alternated, within noise on 16 shapes, 1 and 2 threads).
constexpr std::int64_t kUnoptimisedDriverWork = 32768;

// The IR struct types below mirror these C layouts field by field.
static_assert(offsetof(TensorArg, bs) == 24 && sizeof(TensorArg) == 32);
static_assert(offsetof(GemmKernelArgs, tile_n) == 40 && offsetof(GemmKernelArgs, a) == 48 &&
              offsetof(GemmKernelArgs, inputs) == 176 && offsetof(GemmKernelArgs, alpha) == 184 &&
              offsetof(GemmKernelArgs, beta) == 188);
enum ArgsField : unsigned { kM, kN, kK, kBatch, kTileM, kTileN, kA, kB, kC, kD, kInputs, kAlpha, kBeta };

// The K steps and FMAs up to which a micro-kernel of constant K is emitted without a K loop (1 thread, 16³×256,
// GFLOP/s: A·Bᵀ 89-92 -> 102, A·B 145 -> 147). Longer ones loop: Zen 4, 1 thread, 32³×256 (8×16 tiles, 256 FMAs)
// 109 -> 112 GFLOP/s, column-major A and B 86 -> 92, 24³×64 the same, and its cold compile 23 -> 7 ms.
constexpr int kFullUnrollSteps = 16;
constexpr int kFullUnrollFmas = 256;

std::int64_t align64(std::int64_t bytes) { return (bytes + 63) / 64 * 64; }

// The ISA extension a kernel's multiply instructions need beyond its target's base ISA, as a feature string.
std::string extension_features(const CpuGemmSpec& spec) {
  const std::string_view extension = spec.required_extension();
  std::string features = extension.empty() ? std::string() : fmt::format("+{}", extension);
  if (spec.config.amx == CpuGemmConfig::kAmxTiles) features += ",+amx-tile,+amx-int8,+amx-bf16";
  return features;
}

class CpuGemmEmitter : OutputTiles {
 public:
  // `name` is the entry point's symbol: the requested spec's name, also when `spec` is its transposed product.
  CpuGemmEmitter(const CpuGemmSpec& spec, std::string name, llvm::LLVMContext& ctx)
      : OutputTiles(ctx, name, spec.target, extension_features(spec)),
        spec_(spec),
        name_(std::move(name)),
        sig_(spec.signature),
        cfg_(spec.config) {
    group_ = k_group(sig_);
    int8_ = is_int8(sig_);
    ab_elem_ = group_ == 1 ? f32_ : int8_ ? static_cast<llvm::Type*>(b_.getInt8Ty()) : b_.getInt16Ty();
    acc_vec_ = int8_ ? llvm::FixedVectorType::get(b_.getInt32Ty(), lanes_) : vec_;
    args_ty_ = llvm::StructType::create(
        ctx, {i64_, i64_, i64_, i64_, i64_, i64_, tensor_ty_, tensor_ty_, tensor_ty_, tensor_ty_, ptr_, f32_, f32_},
        "tessera.GemmKernelArgs");
  }

  std::unique_ptr<llvm::Module> emit() {
    const bool a_unit_rows =
        sig_.a.layout.row_stride("a")->op == ExprOp::Const && sig_.a.layout.row_stride("a")->value == 1;
    const bool b_unit_cols =
        sig_.b.layout.col_stride("b")->op == ExprOp::Const && sig_.b.layout.col_stride("b")->value == 1;
    // Packing reads along the source's rows (the panel's depth) where they are contiguous.
    llvm::Function* pack_a =
        emit_pack("pack_a", cfg_.mr, a_unit_rows, group_ == 1 && is_constant(sig_.a.layout.col_stride("a"), 1));
    llvm::Function* pack_b =
        group_ > 1 ? emit_pack_b_groups()
                   : emit_pack("pack_b", cfg_.nr, b_unit_cols, is_constant(sig_.b.layout.row_stride("b"), 1));
    if (cfg_.fixed()) {
      emit_fixed_entry(pack_b);
    } else if (cfg_.dot) {
      llvm::Function* dot = emit_dot_kernel();
      emit_entry([&](const MacroTile& t, const TensorFields& a, const TensorFields& bm, const Workspace& w,
                     llvm::Value* p0, llvm::Value* kc, llvm::Value* first, llvm::Value* last,
                     llvm::Value* args) { emit_dot_slab(t, a, bm, w, p0, kc, first, last, args, dot); });
    } else if (cfg_.amx) {
      llvm::Function* amx_slab = emit_amx_slab();
      emit_entry([&](const MacroTile& t, const TensorFields& a, const TensorFields& bm, const Workspace& w,
                     llvm::Value* p0, llvm::Value* kc, llvm::Value* first, llvm::Value* last, llvm::Value* args) {
        b_.CreateCall(pack_b, {t.b_src, t.j0, p0, t.nc, kc, bm.cs, bm.rs, w.b});
        b_.CreateCall(amx_slab, {gep_ab(t.a_src, b_.CreateAdd(b_.CreateMul(t.i0, a.rs), p0)), a.rs, w.b, kc, t.mc, t.nc,
                                 w.acc, first, last, t.i0, t.j0, t.batch, args, w.a});
      });
      unoptimised(module_->getFunction(name_));
    } else {
      const MicroKernels micro = emit_micro_kernels();
      emit_entry([&](const MacroTile& t, const TensorFields& a, const TensorFields& bm, const Workspace& w,
                     llvm::Value* p0, llvm::Value* kc, llvm::Value* first, llvm::Value* last,
                     llvm::Value* args) { emit_slab(t, a, bm, w, p0, kc, first, last, args, pack_a, pack_b, micro); });
      // GEMV tiles (KC 8 × 4 vectors) do 32 FMAs: the 15-argument call would cost as much, and takes window from
      // the loads that stream B (1×4096×4096, 1 thread, tessera / BLIS interleaved with the previous binary:
      // 0.95-1.06 -> 1.03-1.16). At M = 8 (320 FMAs per tile) inlining measured 0.9× and is not done.
      if (std::int64_t{cfg_.kc} * cfg_.mr * (cfg_.nr / lanes_) <= 128)
        for (llvm::CallInst* call : full_tile_calls_) {
          llvm::InlineFunctionInfo info;
          if (!llvm::InlineFunction(*call, info).isSuccess()) throw std::logic_error("emit_llvm: tile not inlined");
        }
      else if (std::int64_t{cfg_.kc} * cfg_.mr * cfg_.nr >= kUnoptimisedDriverWork)
        unoptimised(module_->getFunction(name_));
    }
    return verified_module("emit_llvm");
  }

 private:
  // What the AMX tiles multiply: bf16 pairs, or bytes of A's and B's signedness.
  DotInputs amx_inputs() const {
    if (!int8_) return DotInputs::BF16;
    const bool a_signed = sig_.a.dtype == DType::i8, b_signed = sig_.b.dtype == DType::i8;
    return a_signed ? (b_signed ? DotInputs::I8I8 : DotInputs::I8U8) : (b_signed ? DotInputs::U8I8 : DotInputs::U8U8);
  }

  // Addresses into A, B and the packed B panel, in their element type.
  llvm::Value* gep_ab(llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(ab_elem_, base, index); }
  // Partial sums of two K ranges: exact integer sums for int8.
  llvm::Value* add_sums(llvm::Value* x, llvm::Value* y) { return int8_ ? b_.CreateAdd(x, y) : b_.CreateFAdd(x, y); }
  // Elements of one packed B row sliver per K step: bf16 and int8 pack K in groups, so a slab is padded to whole
  // groups.
  // AMX tiles read B in blocks of 64 bytes of K: its panel is padded to them.
  int packed_depth_multiple() const { return cfg_.amx ? 64 / (int8_ ? 1 : 2) : group_; }
  llvm::Value* packed_depth(llvm::Value* kc) { return grouped_depth(kc, packed_depth_multiple()); }

  llvm::Value* args_field(llvm::Value* args, unsigned field, llvm::Type* t) {
    return b_.CreateLoad(t, b_.CreateStructGEP(args_ty_, args, field));
  }

  // bf16 and int8 B panel: K in groups of k_group (PanelPacking::emit_pack_groups_*), from B's rows or columns.
  llvm::Function* emit_pack_b_groups() {
    llvm::Function* fn =
        make_function("pack_b", b_.getVoidTy(), {ptr_, i64_, i64_, i64_, i64_, i64_, i64_, ptr_}, false);
    auto arg = fn->arg_begin();
    GroupPackArgs a;
    a.src = arg++, a.n0 = arg++, a.k0 = arg++, a.ncols = arg++, a.depth = arg++;
    llvm::Value* column_stride = arg++;
    llvm::Value* ldb = arg++;
    a.dst = arg++;
    a.element = ab_elem_, a.R = cfg_.nr, a.G = group_, a.depth_multiple = packed_depth_multiple();
    if (sig_.b.layout.kind() == LayoutKind::ColMajor) {
      a.ld = column_stride;
      emit_pack_groups_from_columns(a);
    } else {
      a.ld = ldb;
      emit_pack_groups_from_rows(a);
    }
    b_.CreateRetVoid();
    return fn;
  }

  // The MR×NR register tile: acc += A sliver ⊗ B sliver over kc, then either the partial sums go to the
  // workspace tile (more K slabs follow) or the epilogue is applied and D stored with edge masks.
  // A is read from its packed panel (a[p·MR + r]) or in place (a[r·a_rs + p·a_cs], rows past the edge clamped to
  // the last valid row: their results are never stored); B from its packed panel or in place with column masks.
  // fixed_rows/cols/kc > 0 (kc >= 0) generate a variant with those values as constants: its masks, row clamps
  // and K trip count fold at generation time, and it is one K slab (first and last).
  // `vectors` (0: all NR / lanes) narrows the tile to its first vectors, for edge tiles that need no more: the
  // columns past them are never loaded, multiplied or stored.
  llvm::Function* emit_micro_kernel(int fixed_rows = 0, int fixed_cols = 0, int fixed_kc = -1, int vectors = 0) {
    const int nv = vectors ? vectors : cfg_.nr / lanes_;
    const std::string name = fixed_rows
                                 ? "micro_kernel_" + std::to_string(fixed_rows) + "x" + std::to_string(fixed_cols)
                             : fixed_cols ? "micro_kernel_full"
                                          : "micro_kernel_edge" + std::to_string(nv);
    llvm::Function* fn = make_function(
        name, b_.getVoidTy(),
        {ptr_, i64_, i64_, ptr_, i64_, i64_, ptr_, b_.getInt1Ty(), b_.getInt1Ty(), i64_, i64_, i64_, i64_, i64_, ptr_},
        false);
    auto arg = fn->arg_begin();
    llvm::Value *ap = arg++, *a_rs_arg = arg++, *a_cs_arg = arg++, *bp = arg++, *b_rs = arg++, *kc = arg++,
                *acc_tile = arg++, *first = arg++, *last = arg++, *row0 = arg++, *col0 = arg++, *rows = arg++,
                *cols = arg++, *batch = arg++, *args = arg++;
    if (fixed_rows) rows = i64c(fixed_rows);
    if (fixed_cols) cols = i64c(fixed_cols);
    if (fixed_kc >= 0) {
      kc = i64c(fixed_kc);
      first = b_.getTrue();
      last = b_.getTrue();
    }
    const int mr = cfg_.mr;
    const auto acc_index = [&](int r, int v) { return static_cast<std::size_t>(r * nv + v); };
    const auto tile_ptr = [&](int r, int v) {
      return gep(acc_tile, i64c(static_cast<std::int64_t>(r) * cfg_.nr + v * lanes_));
    };
    const llvm::Align vec_align(static_cast<std::uint64_t>(lanes_) * 4);

    // In-place A: one pointer per row, unit strides folded in from the layout.
    const Layout& la = sig_.a.layout;
    llvm::Value* a_cs = la.kind() == LayoutKind::RowMajor ? i64c(1) : a_cs_arg;
    std::vector<llvm::Value*> a_rows, a_row_offsets;
    if (!cfg_.pack_a) {
      llvm::Value* a_rs = la.kind() == LayoutKind::ColMajor ? i64c(1) : a_rs_arg;
      llvm::Value* last_row = b_.CreateSub(rows, i64c(1));
      for (int r = 0; r < mr; ++r) {
        a_row_offsets.push_back(b_.CreateMul(smin(i64c(r), last_row), a_rs));
        a_rows.push_back(gep_ab(ap, a_row_offsets.back()));
      }
    }
    std::vector<llvm::Value*> b_masks;
    if (!cfg_.pack_b)
      for (int v = 0; v < nv; ++v) b_masks.push_back(lane_mask(lanes_, cols, v * lanes_));

    // The accumulators start from zero; the saved partial sums of earlier K slabs are only prefetched here and
    // added after the K loop, so that no FMA chain waits for them (the MC×NC partial-sum tile outgrows L2).
    const bool saved_sums = fixed_kc < 0;
    if (saved_sums) {
      llvm::BasicBlock* prefetch = llvm::BasicBlock::Create(ctx_, "prefetch", fn);
      llvm::BasicBlock* start = llvm::BasicBlock::Create(ctx_, "start", fn);
      b_.CreateCondBr(first, start, prefetch);
      b_.SetInsertPoint(prefetch);
      for (std::int64_t line = 0; line < std::int64_t{mr} * nv * lanes_ * 4; line += 64)
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr_},
                           {gep(acc_tile, i64c(line / 4)), b_.getInt32(1), b_.getInt32(3), b_.getInt32(1)});
      b_.CreateBr(start);
      b_.SetInsertPoint(start);
    }
    // The rows a fixed-size variant really has: it computes no more (the clamped rows past the edge would only repeat
    // the last one).
    const int live_rows = fixed_rows > 0 ? std::min(fixed_rows, mr) : mr;
    // Edge kernels run once per slab and row of tiles: compiled without unrolling, they cost half the compile time.
    int unroll = vectors && vectors < cfg_.nr / lanes_ ? 1 : cfg_.k_unroll;
    // A tile of few accumulators waits on the FMA latency: with fewer than 8 chains (two FMA pipes, four cycles each)
    // consecutive K steps feed separate sets of accumulators, summed after the loop. The 2-row edge of a 32-row
    // fixed kernel with 6-row tiles had 4 chains and took as long as a full tile.
    // (As many sets as the vector registers hold besides the tile's B vectors and A broadcast.)
    const int chains = live_rows * nv;
    int sets = group_ > 1 || chains >= 8 ? 1 : chains >= 4 ? 2 : 4;
    while (sets > 1 && sets * chains + nv + 1 > (lanes_ == 16 ? 32 : 16)) sets /= 2;
    unroll = std::max(unroll, sets);
    const std::size_t set_size = static_cast<std::size_t>(mr * nv);
    LoopValues acc(set_size * static_cast<std::size_t>(sets), llvm::Constant::getNullValue(acc_vec_));

    // One K step; an in-place A is read at a_column (A(0, p)) plus each row's offset.
    const auto step = [&](llvm::Value* p, LoopValues values, int set, llvm::Value* a_column) {
      std::vector<llvm::Value*> bv;
      if (cfg_.pack_b) {
        llvm::Value* b_row = gep(bp, b_.CreateMul(p, i64c(cfg_.nr)));
        for (int v = 0; v < nv; ++v) bv.push_back(b_.CreateAlignedLoad(vec_, gep(b_row, i64c(v * lanes_)), vec_align));
      } else {
        // No software prefetch: with full tiles unmasked and aligned, the hardware prefetcher keeps up, and fetching
        // one slab ahead slowed a GEMV (1×4096×4096, 1 thread: 16.2 vs 19.6 GFLOP/s).
        llvm::Value* b_row = gep(bp, b_.CreateMul(p, b_rs));
        for (int v = 0; v < nv; ++v) bv.push_back(load_masked(gep(b_row, i64c(v * lanes_)), b_masks[v]));
      }
      llvm::Value* a_col = cfg_.pack_a ? gep(ap, b_.CreateMul(p, i64c(mr))) : nullptr;
      outer_product_step(values, static_cast<std::size_t>(set) * set_size, live_rows, bv, [&](int r) {
        llvm::Value* a_ptr = cfg_.pack_a ? gep(a_col, i64c(r)) : gep(a_column, a_row_offsets[r]);
        return b_.CreateAlignedLoad(f32_, a_ptr, llvm::Align(4));
      });
      return values;
    };
    if (group_ > 1) {
      acc = grouped_k_loop(acc, a_rows, bp, kc, cfg_.nr, int8_ ? DotInputs::U8I8 : DotInputs::BF16, cfg_.k_unroll);
    } else if (fixed_kc > 0 && fixed_kc <= kFullUnrollSteps && fixed_kc * chains <= kFullUnrollFmas) {
      // A short constant K runs straight through, without the loop's counter and branch.
      for (int p = 0; p < fixed_kc; ++p)
        acc = step(i64c(p), acc, p % sets, cfg_.pack_a ? nullptr : gep(ap, b_.CreateMul(i64c(p), a_cs)));
      for (int set = 1; set < sets; ++set)
        for (std::size_t i = 0; i < set_size; ++i)
          acc[i] = b_.CreateFAdd(acc[i], acc[static_cast<std::size_t>(set) * set_size + i]);
      acc.resize(set_size);
    } else {
      // An in-place A's column pointer is carried past the accumulators, stepped by a_cs (through opaque(), or
      // loop strength reduction turns it back into an index): indexed from the K counter, the A broadcasts were
      // FMAs with an indexed memory operand, which issue as two micro-ops each (un-laminated). 1 thread, A·B,
      // GFLOP/s: 16×16×64×64 145 -> 164, 16×16×32×128 131 -> 147, 16³×256 121 -> 147 (LIBXSMM 141-158).
      const bool carry_a = !cfg_.pack_a;
      const auto k_loop = [&](llvm::Value* from, llvm::Value* to, int steps, LoopValues values, const char* loop_name) {
        if (carry_a) values.push_back(gep(ap, b_.CreateMul(from, a_cs)));
        values = emit_for(
            b_, from, to, i64c(steps), values,
            [&](llvm::Value* p, const LoopValues& carried) {
              LoopValues next(carried.begin(), carried.begin() + static_cast<std::ptrdiff_t>(acc.size()));
              llvm::Value* a_column = carry_a ? carried.back() : nullptr;
              for (int u = 0; u < steps; ++u)
                next = step(b_.CreateAdd(p, i64c(u)), next, u % sets,
                            carry_a ? gep(a_column, b_.CreateMul(i64c(u), a_cs)) : nullptr);
              if (carry_a) next.push_back(gep(opaque(a_column), b_.CreateMul(i64c(steps), a_cs)));
              return next;
            },
            loop_name);
        values.resize(acc.size());
        return values;
      };
      llvm::Value* k_main = b_.CreateAnd(kc, i64c(~static_cast<std::int64_t>(unroll - 1)));
      acc = k_loop(i64c(0), k_main, unroll, acc, "k");
      acc = k_loop(k_main, kc, 1, acc, "k.tail");
      for (int set = 1; set < sets; ++set)
        for (std::size_t i = 0; i < set_size; ++i)
          acc[i] = b_.CreateFAdd(acc[i], acc[static_cast<std::size_t>(set) * set_size + i]);
      acc.resize(set_size);
    }

    if (saved_sums) {
      llvm::BasicBlock* before = b_.GetInsertBlock();
      llvm::BasicBlock* resume = llvm::BasicBlock::Create(ctx_, "resume", fn);
      llvm::BasicBlock* summed = llvm::BasicBlock::Create(ctx_, "summed", fn);
      b_.CreateCondBr(first, summed, resume);
      b_.SetInsertPoint(resume);
      LoopValues total = acc;
      for (int r = 0; r < mr; ++r)
        for (int v = 0; v < nv; ++v)
          total[acc_index(r, v)] =
              add_sums(b_.CreateAlignedLoad(acc_vec_, tile_ptr(r, v), llvm::Align(4)), acc[acc_index(r, v)]);
      b_.CreateBr(summed);
      b_.SetInsertPoint(summed);
      for (std::size_t i = 0; i < acc.size(); ++i) {
        llvm::PHINode* phi = b_.CreatePHI(acc_vec_, 2);
        phi->addIncoming(acc[i], before);
        phi->addIncoming(total[i], resume);
        acc[i] = phi;
      }
    }
    llvm::BasicBlock* save = llvm::BasicBlock::Create(ctx_, "save", fn);
    llvm::BasicBlock* epilogue = llvm::BasicBlock::Create(ctx_, "epilogue", fn);
    b_.CreateCondBr(last, epilogue, save);
    b_.SetInsertPoint(save);
    for (int r = 0; r < mr; ++r)
      for (int v = 0; v < nv; ++v) b_.CreateAlignedStore(acc[acc_index(r, v)], tile_ptr(r, v), llvm::Align(4));
    b_.CreateRetVoid();

    b_.SetInsertPoint(epilogue);
    if (int8_)  // exact i32 sums, rounded once to f32 for the epilogue
      for (llvm::Value*& sum : acc) sum = b_.CreateSIToFP(sum, vec_);
    emit_epilogue(args, acc, row0, col0, rows, cols, batch);
    b_.CreateRetVoid();
    return fn;
  }

  void emit_epilogue(llvm::Value* args, const LoopValues& acc, llvm::Value* row0, llvm::Value* col0, llvm::Value* rows,
                     llvm::Value* cols, llvm::Value* batch) {
    llvm::Value* alpha = b_.CreateVectorSplat(lanes_, args_field(args, kAlpha, f32_));
    // C not read although the epilogue names it: the binding guarantees beta = 0 (c appears only scaled by beta),
    // so beta·c is the constant -0 and `x + beta·c` folds to x (the +0 it replaces changed only a -0's sign).
    const bool c_folds = !sig_.c.layout.reads_memory() && sig_.epilogue.reads_c();
    llvm::Value* beta =
        c_folds ? llvm::Constant::getNullValue(vec_) : b_.CreateVectorSplat(lanes_, args_field(args, kBeta, f32_));
    TensorFields c = load_tensor(b_.CreateStructGEP(args_ty_, args, kC));
    TensorFields d = load_tensor(b_.CreateStructGEP(args_ty_, args, kD));
    if (dense_cd_) {
      c = dense(c, sig_.c.layout, cfg_.fixed_m, cfg_.fixed_n);
      d = dense(d, sig_.d.layout, cfg_.fixed_m, cfg_.fixed_n);
    }
    llvm::Value* inputs_ptr = args_field(args, kInputs, ptr_);
    std::vector<TensorFields> inputs;
    for (std::size_t i = 0; i < sig_.inputs.size(); ++i)
      inputs.push_back(load_tensor(b_.CreateGEP(tensor_ty_, inputs_ptr, i64c(static_cast<std::int64_t>(i)))));

    store_output_tile(sig_, {c, d, std::move(inputs), alpha, beta}, acc, cfg_.mr, row0, col0, rows, cols, batch);
  }

  // The micro-kernels of a runtime-sized kernel. A packed B panel is zero-padded, so one kernel serves every tile
  // (only its final stores are masked). B read in place gets a kernel for full tiles, whose loads are unmasked,
  // and masked ones for edge tiles of 1 vector (the alignment peel), about half and all NR / lanes vectors: a
  // GEMV's 12-column peel and 4-column last tile through the NR = 240 kernel took a quarter of its time. Each
  // kernel costs 4-9 ms of compile time, hence not one per vector count.
  std::vector<llvm::CallInst*> full_tile_calls_;  // calls of the full micro-kernel, for inlining

  struct MicroKernels {
    llvm::Function* full;
    std::vector<std::pair<int, llvm::Function*>> edges;  // (vectors, kernel), by increasing vectors
  };
  MicroKernels emit_micro_kernels() {
    const int nv = cfg_.nr / lanes_;
    if (cfg_.pack_b) {
      llvm::Function* any = emit_micro_kernel();
      // AVX2 has no mask registers: a masked store is a vmaskmovps behind a mask built per row vector, so full tiles
      // get their own kernel with plain stores (and plain C and epilogue loads).
      if (lanes_ == 8) return {emit_micro_kernel(0, cfg_.nr), {{nv, any}}};
      return {any, {{nv, any}}};
    }
    MicroKernels k{emit_micro_kernel(0, cfg_.nr), {}};
    for (int v : {1, (nv + 1) / 2})
      if (v < nv && (k.edges.empty() || v > k.edges.back().first))
        k.edges.emplace_back(v, emit_micro_kernel(0, 0, -1, v));
    k.edges.emplace_back(nv, emit_micro_kernel());
    return k;
  }

  // One macro-tile's position and the operands as its slabs see them.
  struct MacroTile {
    llvm::Value *batch, *i0, *j0, *mc, *nc, *a_src, *b_src;
    llvm::Value* jr_begin;  // column of the first micro-tile: NR - s < 0 when the first s columns are a narrow tile
  };

  // Where a macro-tile's micro-tiles of B read in place start. When B streams from memory into a few rows of A
  // (at most 8, GEMV-like) and every row of B has the same alignment, the first tile takes just the s columns up
  // to a vector boundary, so every full tile loads whole cache lines: a GEMV over a B misaligned by 16 bytes (as
  // malloc returns large blocks) ran 20-30% slower than over an aligned one. Where B sits in L1/L2 and feeds many
  // rows, the extra narrow tiles cost more than split loads (256³: 199 vs 216 GFLOP/s), as they do in tiles of
  // fewer than 4 full micro-tiles.
  llvm::Value* first_micro_column(const TensorFields& bm, llvm::Value* b_at_j0, llvm::Value* mc, llvm::Value* nc) {
    if (cfg_.pack_b || cfg_.dot) return i64c(0);
    llvm::Value* address = b_.CreatePtrToInt(b_at_j0, i64_);
    llvm::Value* s = b_.CreateAnd(b_.CreateLShr(b_.CreateSub(i64c(0), address), i64c(2)), i64c(lanes_ - 1));
    llvm::Value* uniform = b_.CreateAnd(b_.CreateICmpEQ(b_.CreateAnd(bm.rs, i64c(lanes_ - 1)), i64c(0)),
                                        b_.CreateICmpEQ(b_.CreateAnd(address, i64c(3)), i64c(0)));
    llvm::Value* worth = b_.CreateAnd(b_.CreateICmpSLE(mc, i64c(8)), b_.CreateICmpSGE(nc, i64c(4 * cfg_.nr)));
    llvm::Value* shift = b_.CreateAnd(uniform, b_.CreateAnd(worth, b_.CreateICmpNE(s, i64c(0))));
    return b_.CreateSelect(shift, b_.CreateSub(s, i64c(cfg_.nr)), i64c(0));
  }

  // The external entry: walks macro-tiles [begin, end); per tile, per KC slab: `slab` (pack B, pack A, micro-tiles).
  template <class Slab>
  void emit_entry(const Slab& slab) {
    llvm::Function* fn = make_function(name_, b_.getVoidTy(), {ptr_, ptr_, i64_, i64_}, true);
    auto arg = fn->arg_begin();
    llvm::Value *args = arg++, *ws = arg++, *begin = arg++, *end = arg++;
    llvm::Value* m = args_field(args, kM, i64_);
    llvm::Value* n = args_field(args, kN, i64_);
    llvm::Value* k = args_field(args, kK, i64_);
    const TensorFields a = load_tensor(b_.CreateStructGEP(args_ty_, args, kA));
    const TensorFields bm = load_tensor(b_.CreateStructGEP(args_ty_, args, kB));
    const std::int64_t NC = cfg_.nc, KC = cfg_.kc;
    llvm::Value* tile_m = args_field(args, kTileM, i64_);
    llvm::Value* tile_n = args_field(args, kTileN, i64_);
    llvm::Value* tiles_m = b_.CreateSDiv(b_.CreateSub(b_.CreateAdd(m, tile_m), i64c(1)), tile_m);
    llvm::Value* tiles_n = b_.CreateSDiv(b_.CreateSub(b_.CreateAdd(n, tile_n), i64c(1)), tile_n);
    llvm::Value* per_batch = b_.CreateMul(tiles_m, tiles_n);
    // Regions as CpuGemmConfig::workspace_bytes lays them out: packed A and B only when packed, then partial sums.
    Workspace w{ws, b_.CreateGEP(b_.getInt8Ty(), ws, i64c(align64(cfg_.packed_a_floats() * 4))), nullptr};
    w.acc = b_.CreateGEP(b_.getInt8Ty(), w.b, i64c(cfg_.pack_b ? align64(KC * NC * 4) : 0));
    // K = 0 still runs one (empty) slab so that the epilogue writes D.
    llvm::Value* k_slabs = b_.CreateSDiv(b_.CreateAdd(k, i64c(KC - 1)), i64c(KC));
    k_slabs = b_.CreateSelect(b_.CreateICmpSLT(k_slabs, i64c(1)), i64c(1), k_slabs);

    emit_for(
        b_, begin, end, i64c(1),
        [&](llvm::Value* t) {
          MacroTile tile;
          tile.batch = b_.CreateSDiv(t, per_batch);
          llvm::Value* rest = b_.CreateSRem(t, per_batch);
          tile.i0 = b_.CreateMul(b_.CreateSDiv(rest, tiles_n), tile_m);
          tile.j0 = b_.CreateMul(b_.CreateSRem(rest, tiles_n), tile_n);
          tile.mc = smin(tile_m, b_.CreateSub(m, tile.i0));
          tile.nc = smin(tile_n, b_.CreateSub(n, tile.j0));
          tile.a_src = gep_ab(a.data, b_.CreateMul(tile.batch, a.bs));
          tile.b_src = gep_ab(bm.data, b_.CreateMul(tile.batch, bm.bs));
          tile.jr_begin = first_micro_column(bm, gep_ab(tile.b_src, tile.j0), tile.mc, tile.nc);
          emit_for(
              b_, i64c(0), k_slabs, i64c(1),
              [&](llvm::Value* q) {
                llvm::Value* p0 = b_.CreateMul(q, i64c(KC));
                llvm::Value* kc = smin(i64c(KC), b_.CreateSub(k, p0));
                llvm::Value* first = b_.CreateICmpEQ(q, i64c(0));
                llvm::Value* last = b_.CreateICmpEQ(q, b_.CreateSub(k_slabs, i64c(1)));
                slab(tile, a, bm, w, p0, kc, first, last, args);
              },
              "slab");
        },
        "tile");
    b_.CreateRetVoid();
  }

  // A fixed-size kernel: per batch item, loops over the full MR×NR tiles and the edge tiles, each loop running one
  // micro-kernel variant whose edges are constants, inlined. At most four variants (full, right edge, bottom
  // edge, corner), so the code stays small, and no tile pays a 15-argument call (1 thread, 64³×64: 102-108 ->
  // 112 GFLOP/s; 16³×1024: 82 -> 94-104, where the batch loop now loads the strides and scalars once). The rows
  // come in fixed_row_parts() parts; with tile_m below M a tile index is one part, so that two threads can share a
  // single matrix, otherwise one batch item.
  // Where A, B, C and D are contiguous matrices (leading dimensions K or M, N, N: a checked branch per call), the
  // kernel runs a copy compiled with those leading dimensions as constants, as LIBXSMM compiles them in: every A
  // broadcast and B row is then a base register plus a displacement (1 thread, 16³×256 from L2: 108-122 -> 128-130
  // GFLOP/s). A B without contiguous rows (column-major: A·Bᵀ, as Q·Kᵀ) is packed whole per item first.
  void emit_fixed_entry(llvm::Function* pack_b) {
    const std::int64_t M = cfg_.fixed_m, N = cfg_.fixed_n, K = cfg_.fixed_k, MR = cfg_.mr, NR = cfg_.nr;
    const std::int64_t parts = cfg_.fixed_row_parts(), part_rows = cfg_.fixed_part_rows();
    // Row (and column) ranges of equal tiles: [begin, end) in steps of `step` holding `size` rows each.
    struct Range {
      std::int64_t begin, end, size;
    };
    const auto ranges = [](std::int64_t begin, std::int64_t end, std::int64_t step) {
      std::vector<Range> r;
      const std::int64_t full = begin + (end - begin) / step * step;
      if (full > begin) r.push_back({begin, full, step});
      if (full < end) r.push_back({full, end, end - full});
      return r;
    };
    // Per part, its blocks of equal tiles, each with the index of its micro-kernel variant (shared between parts:
    // the second half's full tiles are the first's).
    struct Block {
      Range rows, cols;
      std::size_t variant;
    };
    std::vector<std::vector<Block>> part_blocks(static_cast<std::size_t>(parts));
    std::vector<std::pair<std::int64_t, std::int64_t>> tile_shapes;  // rows, columns of each variant
    std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> variant_of;
    for (std::int64_t part = 0; part < parts; ++part)
      for (const Range& rows : ranges(part * part_rows, std::min(M, (part + 1) * part_rows), MR))
        for (const Range& cols : ranges(0, N, NR)) {
          const auto [it, added] = variant_of.emplace(std::pair{rows.size, cols.size}, tile_shapes.size());
          if (added) tile_shapes.emplace_back(rows.size, cols.size);
          part_blocks[static_cast<std::size_t>(part)].push_back({rows, cols, it->second});
        }
    // The dense copy runs a whole item: blocks of one variant that continue each other down the rows (the halves'
    // full tiles) are one loop, so that the variant is inlined once for them (32³×256: 64 -> 37 ms cold compile).
    std::vector<Block> item_blocks;
    for (const auto& blocks : part_blocks)
      for (const Block& block : blocks) {
        const auto joins = [&](const Block& before) {
          return before.variant == block.variant && before.cols.begin == block.cols.begin &&
                 before.cols.end == block.cols.end && before.rows.end == block.rows.begin &&
                 before.rows.size == block.rows.size;
        };
        const auto it = std::find_if(item_blocks.begin(), item_blocks.end(), joins);
        if (it != item_blocks.end())
          it->rows.end = block.rows.end;
        else
          item_blocks.push_back(block);
      }
    // The strided copy's halves run one code where the second half's blocks are the first's, moved down by the
    // rows of a half.
    const auto shifted = [&](const Block& x, const Block& y) {
      return x.variant == y.variant && x.cols.begin == y.cols.begin && x.cols.end == y.cols.end &&
             x.rows.size == y.rows.size && y.rows.begin - x.rows.begin == part_rows &&
             y.rows.end - x.rows.end == part_rows;
    };
    const bool congruent_halves =
        parts == 2 && part_blocks[0].size() == part_blocks[1].size() &&
        std::equal(part_blocks[0].begin(), part_blocks[0].end(), part_blocks[1].begin(), shifted);
    std::vector<llvm::Function*> emitted;
    const auto emit_variants = [&](bool dense_cd) {
      dense_cd_ = dense_cd;
      std::vector<llvm::Function*> variants;
      for (const auto& [rows, cols] : tile_shapes)
        variants.push_back(emit_micro_kernel(static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(K),
                                             static_cast<int>((cols + lanes_ - 1) / lanes_)));
      dense_cd_ = false;
      emitted.insert(emitted.end(), variants.begin(), variants.end());
      return variants;
    };
    const std::vector<llvm::Function*> strided_variants = emit_variants(false), dense_variants = emit_variants(true);

    // The entry and the two copies (functions of their own, so that a split module compiles them side by side)
    // take the same arguments; these are the function's being emitted.
    llvm::Value *args = nullptr, *ws = nullptr, *begin = nullptr, *end = nullptr;
    TensorFields a{}, bm{};
    const auto start_function = [&](const std::string& name, bool external) {
      llvm::Function* f = make_function(name, b_.getVoidTy(), {ptr_, ptr_, i64_, i64_}, external);
      auto arg = f->arg_begin();
      args = arg++, ws = arg++, begin = arg++, end = arg++;
      a = load_tensor(b_.CreateStructGEP(args_ty_, args, kA));
      bm = load_tensor(b_.CreateStructGEP(args_ty_, args, kB));
      return f;
    };
    std::vector<llvm::CallInst*> calls;
    // A range of one tile is no loop: its position stays a constant (the IR is not optimised by default). `offset`
    // moves the range (rows of a half chosen at run time).
    const auto for_tiles = [&](const Range& r, std::int64_t step, llvm::Value* offset,
                               const std::function<void(llvm::Value*)>& body, const char* name) {
      const auto at = [&](std::int64_t x) { return offset ? b_.CreateAdd(offset, i64c(x)) : i64c(x); };
      if (r.end - r.begin <= step)
        body(at(r.begin));
      else
        emit_for(b_, at(r.begin), at(r.end), i64c(step), body, name);
    };
    // Where the micro-kernels read item t's B: in place, or packed whole into the workspace first (a B without
    // contiguous rows: slivers of NR columns, K deep, zero-filled past N).
    // The dense copy inlines the packing, its sizes and B's leading dimension constants (1 thread, A·Bᵀ, GFLOP/s:
    // 16³×256 67 -> 70, 32³×256 102 -> 103, 64³ 132 -> 135); the strided copy calls it, so that compile time grows
    // by one inlined packing, not three.
    const auto b_source = [&](const TensorFields& b_view, llvm::Value* b_src, bool inline_packing) {
      if (!cfg_.pack_b) return b_src;
      if (transposes_whole_b_in_registers()) {
        emit_fixed_pack_transposed(b_src, b_view.cs, ws);
        return ws;
      }
      llvm::CallInst* call =
          b_.CreateCall(pack_b, {b_src, i64c(0), i64c(0), i64c(N), i64c(K), b_view.cs, b_view.rs, ws});
      if (inline_packing) calls.push_back(call);
      return ws;
    };
    const auto emit_part = [&](const TensorFields& a_view, const TensorFields& b_view,
                               const std::vector<llvm::Function*>& variants, const std::vector<Block>& blocks,
                               llvm::Value* t, llvm::Value* a_src, llvm::Value* b_src, llvm::Value* row_offset) {
      for (const Block& block : blocks)
        for_tiles(
            block.rows, MR, row_offset,
            [&](llvm::Value* ir) {
              llvm::Value* a_tile = gep_ab(a_src, b_.CreateMul(ir, a_view.rs));
              for_tiles(
                  block.cols, NR, nullptr,
                  [&](llvm::Value* jr) {
                    calls.push_back(
                        b_.CreateCall(variants[block.variant],
                                      {a_tile, a_view.rs, a_view.cs,
                                       cfg_.pack_b ? gep(b_src, b_.CreateMul(jr, i64c(K))) : gep_ab(b_src, jr),
                                       b_view.rs, i64c(K), ws, b_.getTrue(), b_.getTrue(), ir, jr,
                                       i64c(block.rows.size), i64c(block.cols.size), t, args}));
                  },
                  "jr");
            },
            "ir");
    };
    const auto item = [&](const TensorFields& view, llvm::Value* t) {
      return gep_ab(view.data, b_.CreateMul(t, view.bs));
    };
    // Contiguous matrices, whole items: the dense copy. Item t's A and B are pointers carried from item to item, so
    // that every broadcast and B row addresses a base register plus a constant; from t·stride they addressed base +
    // index, and an FMA with an indexed memory operand issues as two micro-ops.
    const auto dense_items = [&] {
      const TensorFields a_dense = dense(a, sig_.a.layout, M, K);
      const TensorFields b_dense = dense(bm, sig_.b.layout, K, N);
      emit_for(
          b_, begin, end, i64c(1), {item(a_dense, begin), item(b_dense, begin)},
          [&](llvm::Value* t, const LoopValues& at) {
            llvm::Value* b_src = b_source(b_dense, at[1], true);
            emit_part(a_dense, b_dense, dense_variants, item_blocks, t, at[0], b_src, nullptr);
            return LoopValues{gep_ab(at[0], a_dense.bs), gep_ab(at[1], b_dense.bs)};
          },
          "batch");
    };
    // Everything else: the strided copy, over whole items or, with two parts, over halves: tile u is half u % 2 of
    // item u / 2, and where tile_m is M (whole items) the grid's tiles [begin, end) are the halves [2·begin, 2·end).
    // So each half's code exists once per copy (a loop over whole items beside it doubled the compile time).
    const auto strided_items = [&] {
      if (parts == 1) {
        emit_for(
            b_, begin, end, i64c(1),
            [&](llvm::Value* t) {
              emit_part(a, bm, strided_variants, part_blocks[0], t, item(a, t), b_source(bm, item(bm, t), false),
                        nullptr);
            },
            "batch");
        return;
      }
      llvm::Value* whole = b_.CreateICmpSGE(args_field(args, kTileM, i64_), i64c(M));
      emit_for(
          b_, b_.CreateSelect(whole, b_.CreateShl(begin, i64c(1)), begin),
          b_.CreateSelect(whole, b_.CreateShl(end, i64c(1)), end), i64c(1),
          [&](llvm::Value* u) {
            llvm::Value* t = b_.CreateLShr(u, i64c(1));
            llvm::Value* a_src = item(a, t);
            llvm::Value* b_src = b_source(bm, item(bm, t), false);  // both halves read all of B
            llvm::Value* half = b_.CreateAnd(u, i64c(1));
            if (congruent_halves) {
              emit_part(a, bm, strided_variants, part_blocks[0], t, a_src, b_src, b_.CreateMul(half, i64c(part_rows)));
              return;
            }
            emit_if_else(
                b_, b_.CreateICmpEQ(half, i64c(0)),
                [&] { emit_part(a, bm, strided_variants, part_blocks[0], t, a_src, b_src, nullptr); },
                [&] { emit_part(a, bm, strided_variants, part_blocks[1], t, a_src, b_src, nullptr); }, "half");
          },
          "half_tile");
    };
    llvm::Function* dense_copy = start_function("fixed_dense", false);
    dense_items();
    b_.CreateRetVoid();
    llvm::Function* strided_copy = start_function("fixed_strided", false);
    strided_items();
    b_.CreateRetVoid();
    // The dense copy is taken where every matrix is contiguous and the tiles are whole items (halves are asked for
    // only where there are fewer items than threads, and there a call is a few microseconds of fixed cost).
    start_function(name_, true);
    llvm::Value* dense_path = is_dense(a, sig_.a.layout, M, K);
    dense_path = b_.CreateAnd(dense_path, is_dense(bm, sig_.b.layout, K, N));
    const TensorFields d = load_tensor(b_.CreateStructGEP(args_ty_, args, kD));
    dense_path = b_.CreateAnd(dense_path, is_dense(d, sig_.d.layout, M, N));
    if (sig_.c.layout.reads_memory()) {
      const TensorFields c = load_tensor(b_.CreateStructGEP(args_ty_, args, kC));
      dense_path = b_.CreateAnd(dense_path, is_dense(c, sig_.c.layout, M, N));
    }
    if (parts > 1) dense_path = b_.CreateAnd(dense_path, b_.CreateICmpSGE(args_field(args, kTileM, i64_), i64c(M)));
    const auto call_copy = [&](llvm::Function* copy) {
      return [&, copy] { b_.CreateCall(copy, {args, ws, begin, end}); };
    };
    emit_if_else(b_, dense_path, call_copy(dense_copy), call_copy(strided_copy), "dense");
    b_.CreateRetVoid();
    for (llvm::CallInst* call : calls) {
      llvm::InlineFunctionInfo info;
      if (!llvm::InlineFunction(*call, info).isSuccess()) throw std::logic_error("emit_llvm: tile not inlined");
    }
    for (llvm::Function* micro : emitted) micro->eraseFromParent();
  }

  // Whether the dense copy of a fixed kernel packs its B (contiguous columns: a column-major B) by
  // emit_fixed_pack_transposed: f32 in 16-lane vectors, slivers of whole vectors.
  bool transposes_whole_b_in_registers() const {
    return cfg_.fixed() && cfg_.pack_b && group_ == 1 && lanes_ == 16 && cfg_.nr % 16 == 0 &&
           is_constant(sig_.b.layout.row_stride("b"), 1);
  }

  // A fixed kernel's whole K×N B with contiguous columns (B(k, n) at k + n·ldb), packed as the micro-kernels read
  // it (slivers of NR columns, K deep: B(p, j0 + c) at j0·K + p·NR + c), in blocks of 16 columns by 16 depths:
  // 16 loads of a column's 16 depths, a transpose in registers, 16 stores of a depth's 16 columns. Columns past N
  // (to the next 16) are zeros; depths past K are neither loaded nor stored. The whole blocks run as a loop, so that
  // 64×64 compiles one block, not 16 (unrolled, 64³ took 210 ms to compile instead of 92); the edge blocks follow.
  // (The general pack's loops, masks and 8-row pieces ran 16³×256 A·Bᵀ at 70 GFLOP/s against 90, one thread.)
  void emit_fixed_pack_transposed(llvm::Value* src, llvm::Value* ldb, llvm::Value* dst) {
    const std::int64_t N = cfg_.fixed_n, K = cfg_.fixed_k, NR = cfg_.nr;
    const std::int64_t whole_n = N / 16 * 16, whole_k = K / 16 * 16;
    llvm::Value* zero = llvm::Constant::getNullValue(vec_);
    // The block at columns n0, depths k0, with `columns` and `depths` of its 16 real.
    const auto block = [&](llvm::Value* n0, llvm::Value* k0, std::int64_t columns, std::int64_t depths) {
      llvm::Value* depth_mask = lane_mask(16, i64c(depths));
      std::vector<llvm::Value*> rows;
      for (std::int64_t r = 0; r < 16; ++r) {
        if (r >= columns) {
          rows.push_back(zero);
          continue;
        }
        llvm::Value* at = gep(src, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(n0, i64c(r)), ldb), k0));
        rows.push_back(depths == 16 ? static_cast<llvm::Value*>(b_.CreateAlignedLoad(vec_, at, llvm::Align(4)))
                                    : b_.CreateMaskedLoad(vec_, at, llvm::Align(4), depth_mask, zero));
      }
      const std::vector<llvm::Value*> out = transpose16(rows);
      llvm::Value* j0 = b_.CreateMul(b_.CreateUDiv(n0, i64c(NR)), i64c(NR));
      llvm::Value* base = b_.CreateAdd(b_.CreateMul(j0, i64c(K)), b_.CreateSub(n0, j0));
      for (std::int64_t p = 0; p < depths; ++p)
        b_.CreateAlignedStore(out[static_cast<std::size_t>(p)],
                              gep(dst, b_.CreateAdd(base, b_.CreateMul(b_.CreateAdd(k0, i64c(p)), i64c(NR)))),
                              llvm::Align(4));
    };
    // Blocks [0, end) of one dimension in steps of 16: a loop, or the one block without one.
    const auto over = [&](std::int64_t end, const std::function<void(llvm::Value*)>& body, const char* name) {
      if (end <= 16)
        body(i64c(0));
      else
        emit_for(b_, i64c(0), i64c(end), i64c(16), body, name);
    };
    if (whole_n > 0 && whole_k > 0)
      over(
          whole_n,
          [&](llvm::Value* n0) {
            over(
                whole_k, [&](llvm::Value* k0) { block(n0, k0, 16, 16); }, "pack.k");
          },
          "pack.n");
    if (whole_n > 0 && K > whole_k)
      over(
          whole_n, [&](llvm::Value* n0) { block(n0, i64c(whole_k), 16, K - whole_k); }, "pack.n.tail_k");
    if (N > whole_n) {
      if (whole_k > 0)
        over(
            whole_k, [&](llvm::Value* k0) { block(i64c(whole_n), k0, N - whole_n, 16); }, "pack.k.tail_n");
      if (K > whole_k) block(i64c(whole_n), i64c(whole_k), N - whole_n, K - whole_k);
    }
  }

  struct Workspace {
    llvm::Value *a, *b, *acc;
  };

  void emit_slab(const MacroTile& t, const TensorFields& a, const TensorFields& bm, const Workspace& w, llvm::Value* p0,
                 llvm::Value* kc, llvm::Value* first, llvm::Value* last, llvm::Value* args, llvm::Function* pack_a,
                 llvm::Function* pack_b, const MicroKernels& micro) {
    const std::int64_t MR = cfg_.mr, NR = cfg_.nr, tiles_per_row = cfg_.partial_sum_columns() / NR;
    // B is packed as Bᵀ (N rows, K deep): its row stride is B's column stride.
    if (cfg_.pack_b) b_.CreateCall(pack_b, {t.b_src, t.j0, p0, t.nc, kc, bm.cs, bm.rs, w.b});
    if (cfg_.pack_a) b_.CreateCall(pack_a, {t.a_src, t.i0, p0, t.mc, kc, a.rs, a.cs, w.a});
    // Rows of micro-tiles outer: the MR×KC sliver of A stays in L1 while the packed KC×NC panel of B streams from
    // L2 (contiguous, so unlike A read in place it cannot alias in the cache however large A's leading dimension).
    emit_for(
        b_, i64c(0), t.mc, i64c(MR),
        [&](llvm::Value* ir) {
          llvm::Value* a_tile =
              cfg_.pack_a
                  ? gep(w.a, b_.CreateMul(ir, kc))
                  : gep_ab(t.a_src, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(t.i0, ir), a.rs), b_.CreateMul(p0, a.cs)));
          // The partial sums of one row of micro-tiles are contiguous, in the order the loop below visits them.
          llvm::Value* acc_row = b_.CreateMul(b_.CreateSDiv(ir, i64c(MR)), i64c(tiles_per_row));
          emit_for(
              b_, t.jr_begin, t.nc, i64c(NR),
              [&](llvm::Value* jr) {
                llvm::Value* j = smax(jr, i64c(0));
                llvm::Value* cols = b_.CreateSub(smin(b_.CreateAdd(jr, i64c(NR)), t.nc), j);
                llvm::Value* b_tile =
                    cfg_.pack_b ? gep_ab(w.b, b_.CreateMul(jr, packed_depth(kc)))
                                : gep_ab(t.b_src, b_.CreateAdd(b_.CreateMul(p0, bm.rs), b_.CreateAdd(t.j0, j)));
                llvm::Value* acc_index = b_.CreateAdd(acc_row, b_.CreateSDiv(b_.CreateSub(jr, t.jr_begin), i64c(NR)));
                const std::vector<llvm::Value*> call_args{a_tile,
                                                          a.rs,
                                                          a.cs,
                                                          b_tile,
                                                          bm.rs,
                                                          kc,
                                                          gep(w.acc, b_.CreateMul(acc_index, i64c(MR * NR))),
                                                          first,
                                                          last,
                                                          b_.CreateAdd(t.i0, ir),
                                                          b_.CreateAdd(t.j0, j),
                                                          smin(i64c(MR), b_.CreateSub(t.mc, ir)),
                                                          cols,
                                                          t.batch,
                                                          args};
                // A full tile calls the full kernel; an edge tile the smallest kernel that covers its vectors (an
                // indirect call, predictable per slab).
                if (micro.edges.size() == 1 && micro.edges[0].second == micro.full) {
                  full_tile_calls_.push_back(b_.CreateCall(micro.full, call_args));
                } else {
                  emit_if_else(
                      b_, b_.CreateICmpEQ(cols, i64c(NR)),
                      [&] { full_tile_calls_.push_back(b_.CreateCall(micro.full, call_args)); },
                      [&] {
                        llvm::Value* vectors = b_.CreateSDiv(b_.CreateAdd(cols, i64c(lanes_ - 1)), i64c(lanes_));
                        llvm::Value* callee = micro.edges.back().second;
                        for (auto e = micro.edges.rbegin() + 1; e != micro.edges.rend(); ++e)
                          callee = b_.CreateSelect(b_.CreateICmpSLE(vectors, i64c(e->first)), e->second, callee);
                        b_.CreateCall(micro.full->getFunctionType(), callee, call_args);
                      },
                      "tile");
                }
              },
              "jr");
        },
        "ir");
  }

  // One K slab of a macro-tile on AMX tiles: per MR rows, A's sliver packed into tiles (it stays in L1 while the
  // NC columns of B's packed panel stream past it), then per NR columns the tile product, which starts from zeros
  // (the first slab) or the slab before's sums and ends in the workspace or, on the last slab, in a stack tile that
  // the epilogue reads as vectors. The tile shapes are constants, so the function loads the tile configuration once.
  // Arguments: A at the tile's first row and the slab's first K step, A's row stride (elements), the packed panel,
  // kc, the tile's rows and columns, the partial sums, first, last, the tile's first row and column, the batch item,
  // the kernel's arguments and the sliver's buffer.
  llvm::Function* emit_amx_slab() {
    llvm::Function* fn = make_function(
        "amx_slab", b_.getVoidTy(),
        {ptr_, i64_, ptr_, i64_, i64_, i64_, ptr_, b_.getInt1Ty(), b_.getInt1Ty(), i64_, i64_, i64_, ptr_, ptr_},
        false);
    auto arg = fn->arg_begin();
    llvm::Value *a = arg++, *a_rs = arg++, *bp = arg++, *kc = arg++, *mc = arg++, *nc = arg++, *partial = arg++,
                *first = arg++, *last = arg++, *i0 = arg++, *j0 = arg++, *batch = arg++, *args = arg++, *sliver = arg++;
    const std::int64_t MR = cfg_.mr, NR = cfg_.nr, tiles_per_row = cfg_.partial_sum_columns() / NR;
    const std::int64_t element_bytes = int8_ ? 1 : 2;
    const auto stack_tile = [&](const char* name) {
      auto* buffer = b_.CreateAlloca(b_.getInt8Ty(), i64c(MR * NR * 4), name);
      buffer->setAlignment(llvm::Align(64));
      return buffer;
    };
    llvm::Value* zeros = stack_tile("amx.zeros");  // the first slab's start, and an empty K's B
    llvm::Value* sums = stack_tile("amx.sums");    // the last slab's sums, for the epilogue
    b_.CreateMemSet(zeros, b_.getInt8(0), MR * NR * 4, llvm::MaybeAlign(64));
    llvm::Value* empty = b_.CreateICmpEQ(kc, i64c(0));
    llvm::Value* a_stride = b_.CreateMul(a_rs, i64c(element_bytes));
    llvm::Value* depth = packed_depth(kc);
    emit_for(
        b_, i64c(0), mc, i64c(MR),
        [&](llvm::Value* ir) {
          llvm::Value* rows = smin(i64c(MR), b_.CreateSub(mc, ir));
          llvm::Value* blocks = pack_a_tiles(gep_ab(a, b_.CreateMul(ir, a_rs)), a_stride, rows,
                                             b_.CreateMul(kc, i64c(element_bytes)), cfg_.mr, sliver);
          llvm::Value* acc_row = b_.CreateMul(b_.CreateSDiv(ir, i64c(MR)), i64c(tiles_per_row));
          emit_for(
              b_, i64c(0), nc, i64c(NR),
              [&](llvm::Value* jr) {
                llvm::Value* cols = smin(i64c(NR), b_.CreateSub(nc, jr));
                llvm::Value* acc_tile =
                    gep(partial, b_.CreateMul(b_.CreateAdd(acc_row, b_.CreateSDiv(jr, i64c(NR))), i64c(MR * NR)));
                AmxProduct product;
                product.inputs = amx_inputs();
                product.a = amx_sliver(sliver, cfg_.mr);
                product.b = amx_group_sliver(b_.CreateSelect(empty, zeros, gep_ab(bp, b_.CreateMul(jr, depth))),
                                             cfg_.nr, product.inputs);
                product.blocks = blocks;
                product.c_in = b_.CreateSelect(first, zeros, acc_tile);
                product.c_out = b_.CreateSelect(last, sums, acc_tile);
                product.c_stride = NR * 4;
                product.mr = cfg_.mr, product.nr = cfg_.nr;
                product.emulated = cfg_.amx == CpuGemmConfig::kAmxEmulated;
                amx_product(product);
                emit_if(
                    b_, last,
                    [&] {
                      LoopValues acc;
                      for (std::int64_t r = 0; r < MR; ++r)
                        for (std::int64_t v = 0; v < NR / lanes_; ++v) {
                          llvm::Value* sum =
                              b_.CreateAlignedLoad(acc_vec_, gep(sums, i64c(r * NR + v * lanes_)), llvm::Align(64));
                          // exact i32 sums, rounded once to f32 for the epilogue
                          acc.push_back(int8_ ? b_.CreateSIToFP(sum, vec_) : sum);
                        }
                      emit_epilogue(args, acc, b_.CreateAdd(i0, ir), b_.CreateAdd(j0, jr), rows, cols, batch);
                    },
                    "amx.epilogue");
              },
              "jr");
        },
        "ir");
    b_.CreateRetVoid();
    return fn;
  }

  // The dot tile: acc[r][c] += A[row r, p : p+lanes] · B[p : p+lanes, col c] over kc, lanes along K; between K
  // slabs the partial sums are saved as vectors; on the last slab each accumulator is summed across its lanes into
  // lane c of row r's result, which the epilogue stores like a micro-tile of one vector per row (cols ≤ NR ≤ lanes).
  // Arguments as the micro-kernel's, with B's column stride where that has B's row stride.
  llvm::Function* emit_dot_kernel() {
    llvm::Function* fn = make_function(
        "dot_kernel", b_.getVoidTy(),
        {ptr_, i64_, i64_, ptr_, i64_, i64_, ptr_, b_.getInt1Ty(), b_.getInt1Ty(), i64_, i64_, i64_, i64_, i64_, ptr_},
        false);
    auto arg = fn->arg_begin();
    llvm::Value *ap = arg++, *a_rs = arg++;
    ++arg;  // A's column stride: 1 (row-major A is required)
    llvm::Value *bp = arg++, *b_cs = arg++, *kc = arg++, *acc_tile = arg++, *first = arg++, *last = arg++,
                *row0 = arg++, *col0 = arg++, *rows = arg++, *cols = arg++, *batch = arg++, *args = arg++;
    const int mr = cfg_.mr, nr = cfg_.nr;
    // Rows past the edge read the last valid row, columns the last valid column: their sums are never stored.
    std::vector<llvm::Value*> a_rows, b_cols;
    for (int r = 0; r < mr; ++r)
      a_rows.push_back(gep_ab(ap, b_.CreateMul(smin(i64c(r), b_.CreateSub(rows, i64c(1))), a_rs)));
    for (int c = 0; c < nr; ++c)
      b_cols.push_back(gep_ab(bp, b_.CreateMul(smin(i64c(c), b_.CreateSub(cols, i64c(1))), b_cs)));
    const auto tile_ptr = [&](int i) { return gep(acc_tile, i64c(static_cast<std::int64_t>(i) * lanes_)); };

    llvm::BasicBlock* entry = b_.GetInsertBlock();
    llvm::BasicBlock* resume = llvm::BasicBlock::Create(ctx_, "resume", fn);
    llvm::BasicBlock* start = llvm::BasicBlock::Create(ctx_, "start", fn);
    b_.CreateCondBr(first, start, resume);
    b_.SetInsertPoint(resume);
    LoopValues saved;
    for (int i = 0; i < mr * nr; ++i) saved.push_back(b_.CreateAlignedLoad(acc_vec_, tile_ptr(i), llvm::Align(4)));
    b_.CreateBr(start);
    b_.SetInsertPoint(start);
    LoopValues acc;
    for (llvm::Value* value : saved) {
      llvm::PHINode* phi = b_.CreatePHI(acc_vec_, 2);
      phi->addIncoming(llvm::Constant::getNullValue(acc_vec_), entry);
      phi->addIncoming(value, resume);
      acc.push_back(phi);
    }
    acc = dot_k_loop(acc, a_rows, b_cols, kc, cfg_.k_unroll,
                     int8_         ? DotInputs::U8I8
                     : group_ == 2 ? DotInputs::BF16
                                   : DotInputs::F32);

    llvm::BasicBlock* save = llvm::BasicBlock::Create(ctx_, "save", fn);
    llvm::BasicBlock* epilogue = llvm::BasicBlock::Create(ctx_, "epilogue", fn);
    b_.CreateCondBr(last, epilogue, save);
    b_.SetInsertPoint(save);
    for (int i = 0; i < mr * nr; ++i)
      b_.CreateAlignedStore(acc[static_cast<std::size_t>(i)], tile_ptr(i), llvm::Align(4));
    b_.CreateRetVoid();

    b_.SetInsertPoint(epilogue);
    LoopValues sums = dot_lane_sums(acc, mr, nr);
    if (int8_)  // exact i32 sums, rounded once to f32 for the epilogue
      for (llvm::Value*& sum : sums) sum = b_.CreateSIToFP(sum, vec_);
    emit_epilogue(args, sums, row0, col0, rows, cols, batch);
    b_.CreateRetVoid();
    return fn;
  }

  // A KC slab of a dot kernel's macro-tile. Columns outer: the KC-deep sliver of NR columns of B stays in L1 while
  // every row of the tile passes over it (B, the large operand of x·Wᵀ, streams from memory once per slab).
  void emit_dot_slab(const MacroTile& t, const TensorFields& a, const TensorFields& bm, const Workspace& w,
                     llvm::Value* p0, llvm::Value* kc, llvm::Value* first, llvm::Value* last, llvm::Value* args,
                     llvm::Function* dot) {
    const std::int64_t MR = cfg_.mr, NR = cfg_.nr, tiles_per_column = cfg_.mc / MR;
    emit_for(
        b_, i64c(0), t.nc, i64c(NR),
        [&](llvm::Value* jr) {
          llvm::Value* j = b_.CreateAdd(t.j0, jr);
          llvm::Value* b_tile = gep_ab(t.b_src, b_.CreateAdd(b_.CreateMul(j, bm.cs), b_.CreateMul(p0, bm.rs)));
          llvm::Value* acc_column = b_.CreateMul(b_.CreateSDiv(jr, i64c(NR)), i64c(tiles_per_column));
          emit_for(
              b_, i64c(0), t.mc, i64c(MR),
              [&](llvm::Value* ir) {
                llvm::Value* i = b_.CreateAdd(t.i0, ir);
                llvm::Value* a_tile = gep_ab(t.a_src, b_.CreateAdd(b_.CreateMul(i, a.rs), b_.CreateMul(p0, a.cs)));
                llvm::Value* acc_index = b_.CreateAdd(acc_column, b_.CreateSDiv(ir, i64c(MR)));
                b_.CreateCall(dot, {a_tile, a.rs, a.cs, b_tile, bm.cs, kc,
                                    gep(w.acc, b_.CreateMul(acc_index, i64c(MR * NR * lanes_))), first, last, i, j,
                                    smin(i64c(MR), b_.CreateSub(t.mc, ir)), smin(i64c(NR), b_.CreateSub(t.nc, jr)),
                                    t.batch, args});
              },
              "ir");
        },
        "jr");
  }

  const CpuGemmSpec& spec_;
  const std::string name_;
  const GemmSignature& sig_;
  const CpuGemmConfig& cfg_;
  int group_ = 1;                  // K steps per multiply instruction (k_group): 2 for bf16 pairs, 4 for u8×i8 quads
  bool int8_ = false;              // u8 A, i8 B: vpdpbusd into i32 sums (acc_vec_), converted to f32 for the epilogue
  llvm::Type* acc_vec_ = nullptr;  // the accumulators' vector type: vec_, or lanes of i32 for int8
  // Set while a fixed-size kernel's dense branch is emitted: C's and D's leading dimensions are the constants of
  // contiguous M×N matrices (see emit_fixed_entry).
  bool dense_cd_ = false;
  llvm::Type* ab_elem_ = nullptr;  // element type of A and B in memory
  llvm::StructType* args_ty_;      // the ABI's GemmKernelArgs
};

}  // namespace

std::unique_ptr<llvm::Module> emit_llvm(const CpuGemmSpec& spec, llvm::LLVMContext& context) {
  validate(spec.signature, spec.config, spec.target);
  if (!spec.config.transpose) return CpuGemmEmitter(spec, spec.name(), context).emit();
  // Dᵀ = Bᵀ·Aᵀ: the kernel of the transposed product, under this spec's name; the caller transposes the arguments.
  const CpuGemmSpec product{transposed(spec.signature), spec.config.untransposed(), spec.target};
  return CpuGemmEmitter(product, spec.name(), context).emit();
}

CpuModuleSource cpu_module_source(const CpuGemmSpec& spec) {
  validate(spec.signature, spec.config, spec.target);
  return {spec.name(), spec.hash(), [spec](llvm::LLVMContext& context) { return emit_llvm(spec, context); }};
}

}  // namespace tessera
