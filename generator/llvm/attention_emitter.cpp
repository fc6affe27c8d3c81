#include "generator/llvm/attention_emitter.hpp"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <cstddef>
#include <numbers>

#include "generator/attention/attention_abi.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/llvm/amx_tiles.hpp"
#include "generator/llvm/expr_llvm.hpp"
#include "generator/llvm/loops.hpp"
#include "generator/llvm/vector_math.hpp"

namespace tessera {

namespace {

static_assert(offsetof(AttentionBlockArgs, rows) == 112 && offsetof(AttentionBlockArgs, kv_packed) == 208 &&
              offsetof(AttentionBlockArgs, scale) == 232 && sizeof(AttentionBlockArgs) == 240);
static_assert(sizeof(ModifierTensorArg) == 40);
enum ArgsField : unsigned {
  kQ,
  kQRs,
  kQDs,
  kK,
  kKRs,
  kKDs,
  kV,
  kVRs,
  kVDs,
  kO,
  kORs,
  kODs,
  kLse,
  kLseRs,
  kRows,
  kSeqQ,
  kSeqKv,
  kI0,
  kBatchIndex,
  kHead,
  kPositions,
  kQHs,
  kOHs,
  kLseHs,
  kKvBegin,
  kKvStop,
  kKvPacked,
  kTensors,
  kScalars,
  kScale,
  kOF32
};

// Steps of the head-dimension loop of S = Q·Kᵀ emitted per iteration.
constexpr int kDepthUnroll = 4;
// Keys of the P·V loop per iteration.
constexpr int kKeyUnroll = 4;
// How far ahead reads of K and V in place prefetch, in keys.
constexpr std::int64_t kPrefetchKeys = 16;
// Keys per chunk of P·V when V is read in place by several column tiles (32 keys of d 128 f32: 16 KiB of V).
constexpr std::int64_t kPvChunkKeys = 32;

// The ISA extensions beyond the target's base ISA that the kernel's products use.
std::string attention_features(const CpuAttentionSpec& spec) {
  std::string features = spec.signature.dtype == DType::bf16 && spec.target.avx512_bf16 ? "+avx512bf16" : "";
  if (spec.config.amx == CpuAttentionConfig::kAmxTiles) features += ",+amx-tile,+amx-bf16";
  return features;
}

class CpuAttentionEmitter : AmxTiles {
 public:
  CpuAttentionEmitter(const CpuAttentionSpec& spec, llvm::LLVMContext& ctx)
      : AmxTiles(ctx, spec.name(), spec.target, attention_features(spec)),
        spec_(spec),
        sig_(spec.signature),
        cfg_(spec.config),
        nr_(spec.config.nr(spec.target)),
        dqk_(spec.signature.head_dim_qk),
        dv_(spec.signature.head_dim_v),
        dv_padded_(round_up(spec.signature.head_dim_v, spec.config.nr(spec.target))),
        bf16_(spec.signature.dtype == DType::bf16),
        grouped_(spec.config.grouped(spec.signature, spec.target)),
        amx_(spec.config.amx != CpuAttentionConfig::kAmxNone),
        dqk_packed_(spec.config.packed_head_dim_qk(spec.signature)) {
    mod_tensor_ty_ = llvm::StructType::create(ctx, {ptr_, i64_, i64_, i64_, i64_}, "tessera.ModifierTensorArg");
    std::vector<llvm::Type*> fields;
    for (int i = 0; i < 4; ++i) fields.insert(fields.end(), {ptr_, i64_, i64_});  // q, k, v, o
    fields.insert(fields.end(), {ptr_, i64_});                                    // lse
    for (int i = 0; i < 12; ++i) fields.push_back(i64_);                          // rows … kv_stop
    fields.insert(fields.end(), {ptr_, ptr_, ptr_, f32_, b_.getInt32Ty()});
    args_ty_ = llvm::StructType::create(ctx, fields, "tessera.AttentionBlockArgs");
  }

  std::unique_ptr<llvm::Module> emit() {
    // Q in slivers of mr rows along the head dimension (the tile's broadcast operand), K in slivers of nr keys (its
    // vector operand), V in slivers of nr head-dimension columns along the keys: GEMM's A and B panels.
    // bf16 tensors are widened to f32 as they are packed; everything after is f32.
    // bf16 with avx512_bf16 (grouped_): K and V packed in bf16 pairs along their reduction dimension (d for K, the
    // keys for V), Q read in place and P rounded to bf16, both products on vdpbf16ps into f32 sums.
    const bool bf16 = sig_.dtype == DType::bf16;
    llvm::Function* pack_q = emit_pack("pack_q", cfg_.mr, false, sig_.q_unit_d && !bf16, bf16);
    llvm::Function* pack_k =
        grouped_ ? emit_group_pack("pack_k", true) : emit_pack("pack_k", nr_, false, sig_.k_unit_d && !bf16, bf16);
    llvm::Function* pack_v =
        grouped_ ? emit_group_pack("pack_v", false) : emit_pack("pack_v", nr_, sig_.v_unit_d, false, bf16);
    emit_pack_entry(pack_k, pack_v);
    llvm::Function* fn = make_function(spec_.name(), b_.getVoidTy(), {ptr_, ptr_}, true);
    args_ = fn->getArg(0);
    carve_workspace(fn->getArg(1));
    emit_body(pack_q, pack_k, pack_v);
    b_.CreateRetVoid();
    return verified_module("emit_attention_llvm");
  }

 private:
  llvm::Value* field(unsigned index, llvm::Type* t) {
    return b_.CreateLoad(t, b_.CreateStructGEP(args_ty_, args_, index));
  }
  // A read prefetch (it never faults, so addresses past the tensor need no test), non-temporal or into L2 as the
  // config says. Decoding streams every key from DRAM, and its loops spend several FMAs per byte: the out-of-order
  // window fills with them and the hardware prefetchers alone keep too few lines in flight. On Zen 5 prefetches into
  // L2 (T1) still held the core's few L1 miss buffers and NTA ones did not; on Zen 4 the reverse
  // (CpuAttentionConfig::prefetch_l2). Each line is read a few keys after its prefetch.
  void prefetch(llvm::Value* address) {
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr_},
                       {address, b_.getInt32(0), b_.getInt32(cfg_.prefetch_l2 ? 2 : 0), b_.getInt32(1)});
  }
  llvm::Value* fconst(double v) { return llvm::ConstantFP::get(f32_, v); }
  // Element `index` of a Q, K, V or O tensor (f32 or bf16) read in place.
  llvm::Value* tensor_gep(llvm::Value* base, llvm::Value* index) {
    return bf16_ ? b_.CreateGEP(b_.getInt16Ty(), base, index) : gep(base, index);
  }
  // The cache lines of a row of `elements` tensor elements starting at `row`.
  void prefetch_row(llvm::Value* row, std::int64_t elements) { prefetch_columns(row, 0, elements); }
  // The cache lines of a row's elements [begin, end): one prefetch a line's worth of elements, and the last element.
  void prefetch_columns(llvm::Value* row, std::int64_t begin, std::int64_t end) {
    const std::int64_t per_line = bf16_ ? 32 : 16;
    for (std::int64_t d = begin; d < end; d += per_line) prefetch(tensor_gep(row, i64c(d)));
    if ((end - begin) % per_line != 0) prefetch(tensor_gep(row, i64c(end - 1)));
  }
  // How dot tiles read Q and K in place: f32; bf16 pairs by vdpbf16ps where the target has it, else widened.
  DotInputs dot_inputs() const {
    return !bf16_ ? DotInputs::F32 : target_.avx512_bf16 ? DotInputs::BF16 : DotInputs::BF16Widened;
  }
  // Where row r of the block lies in Q, O or LSE: (r % positions)·row stride + (r / positions)·head stride.
  llvm::Value* row_offset(llvm::Value* r, llvm::Value* rs, llvm::Value* hs) {
    return b_.CreateAdd(b_.CreateMul(b_.CreateSRem(r, positions_), rs), b_.CreateMul(b_.CreateSDiv(r, positions_), hs));
  }
  llvm::Value* splat(llvm::Value* scalar) { return b_.CreateVectorSplat(lanes_, scalar); }
  llvm::Value* load_f32(llvm::Value* base, llvm::Value* index) { return b_.CreateLoad(f32_, gep(base, index)); }
  llvm::Value* gep_i64(llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(i64_, base, index); }
  llvm::Value* load_i64(llvm::Value* base, llvm::Value* index) { return b_.CreateLoad(i64_, gep_i64(base, index)); }
  void store_f32(llvm::Value* value, llvm::Value* base, llvm::Value* index) { b_.CreateStore(value, gep(base, index)); }
  llvm::Value* load_vec(llvm::Value* base, llvm::Value* index) {
    return b_.CreateAlignedLoad(vec_, gep(base, index), llvm::Align(4));
  }
  void store_vec(llvm::Value* value, llvm::Value* base, llvm::Value* index) {
    b_.CreateAlignedStore(value, gep(base, index), llvm::Align(4));
  }

  // A pack function with emit_pack's arguments (src, r0, c0, nrows, depth, rs, cs, dst) that packs bf16 pairs along
  // the reduction dimension: K's keys are the columns (r0, nrows) and d the depth, read along K's rows (rs); V's
  // head-dimension columns (r0, nrows) and the keys the depth (c0), read along V's rows (cs).
  llvm::Function* emit_group_pack(const std::string& name, bool from_columns) {
    llvm::Function* fn = make_function(name, b_.getVoidTy(), {ptr_, i64_, i64_, i64_, i64_, i64_, i64_, ptr_}, false);
    auto arg = fn->arg_begin();
    GroupPackArgs a;
    a.src = arg++, a.n0 = arg++, a.k0 = arg++, a.ncols = arg++, a.depth = arg++;
    llvm::Value* rs = arg++;
    llvm::Value* cs = arg++;
    a.dst = arg++;
    a.ld = from_columns ? rs : cs;
    a.element = b_.getInt16Ty(), a.R = nr_, a.G = 2;
    a.depth_multiple = amx_ ? 32 : 0;  // AMX tiles read 64 bytes of the reduction dimension
    if (from_columns)
      emit_pack_groups_from_columns(a);
    else
      emit_pack_groups_from_rows(a);
    b_.CreateRetVoid();
    return fn;
  }

  // "<name>_pack"(args, block, dst): key block `block` of args' K and V packed into dst as emit_body reads it.
  void emit_pack_entry(llvm::Function* pack_k, llvm::Function* pack_v) {
    llvm::Function* fn = make_function(spec_.name() + "_pack", b_.getVoidTy(), {ptr_, i64_, ptr_}, true);
    args_ = fn->getArg(0);
    llvm::Value* kb = b_.CreateMul(fn->getArg(1), i64c(cfg_.block_kv));
    llvm::Value* dst = fn->getArg(2);
    llvm::Value* kn = smin(i64c(cfg_.block_kv), b_.CreateSub(field(kSeqKv, i64_), kb));
    b_.CreateCall(pack_k, {field(kK, ptr_), kb, i64c(0), kn, i64c(dqk_), field(kKRs, i64_), field(kKDs, i64_), dst});
    b_.CreateCall(pack_v, {field(kV, ptr_), i64c(0), kb, i64c(dv_), kn, field(kVDs, i64_), field(kVRs, i64_),
                           gep(dst, i64c(cfg_.k_area_floats(sig_)))});
    b_.CreateRetVoid();
  }

  // The per-thread scratch, in the order CpuAttentionConfig::workspace_bytes counts it, each area on a cache line.
  void carve_workspace(llvm::Value* workspace) {
    std::int64_t offset = 0;
    const auto area = [&](std::int64_t floats) {
      llvm::Value* p = gep(workspace, i64c(offset));
      offset += round_up(floats, 16);
      return p;
    };
    q_pack_ = area(cfg_.q_area_floats(sig_));
    k_pack_ = area(cfg_.k_area_floats(sig_));
    v_pack_ = area(std::int64_t{cfg_.block_kv} * dv_padded_);
    scores_ = area(std::int64_t{cfg_.block_q} * cfg_.block_kv);
    out_ = area(std::int64_t{cfg_.block_q} * dv_padded_);
    p16_ = area(std::int64_t{cfg_.block_q} * cfg_.block_kv / 2);
    row_max_ = area(cfg_.block_q);
    row_sum_ = area(cfg_.block_q);
    row_rescale_ = area(cfg_.block_q);
    q_row_at_ = area(2 * std::int64_t{cfg_.block_q});
  }

  // for (p = 0; p < end; ++p) body(p), `unroll` bodies per iteration and then one at a time.
  void for_unrolled(llvm::Value* end, int unroll, const std::function<void(llvm::Value*)>& body, const char* name) {
    llvm::Value* whole = b_.CreateMul(b_.CreateSDiv(end, i64c(unroll)), i64c(unroll));
    emit_for(
        b_, i64c(0), whole, i64c(unroll),
        [&](llvm::Value* p) {
          for (int u = 0; u < unroll; ++u) body(b_.CreateAdd(p, i64c(u)));
        },
        name);
    emit_for(b_, whole, end, i64c(1), body, name);
  }

  // Q packed as pack_q packs it, for a block of several heads' rows (row_offset): element by element, since the rows
  // are not evenly spaced. A few rows per head of few positions, read once per block against every key it sees.
  void emit_pack_stacked_q(llvm::Value* q, llvm::Value* q_rs, llvm::Value* q_ds, llvm::Value* padded_rows) {
    llvm::Value* q_hs = field(kQHs, i64_);
    emit_for(
        b_, i64c(0), padded_rows, i64c(1),
        [&](llvm::Value* r) {
          llvm::Value* real = b_.CreateICmpSLT(r, rows_);
          llvm::Value* row = row_offset(smin(r, b_.CreateSub(rows_, i64c(1))), q_rs, q_hs);
          llvm::Value* sliver = gep(
              q_pack_, b_.CreateAdd(b_.CreateMul(b_.CreateSDiv(r, i64c(cfg_.mr)), i64c(std::int64_t{cfg_.mr} * dqk_)),
                                    b_.CreateSRem(r, i64c(cfg_.mr))));
          emit_for(
              b_, i64c(0), i64c(dqk_), i64c(1),
              [&](llvm::Value* d) {
                llvm::Value* at = b_.CreateAdd(row, b_.CreateMul(d, q_ds));
                llvm::Value* x;
                if (sig_.dtype == DType::bf16) {
                  llvm::Value* half = b_.CreateLoad(b_.getInt16Ty(), b_.CreateGEP(b_.getInt16Ty(), q, at));
                  x = b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(half, b_.getInt32Ty()), 16), f32_);
                } else {
                  x = load_f32(q, at);
                }
                store_f32(b_.CreateSelect(real, x, fconst(0)), sliver, b_.CreateMul(d, i64c(cfg_.mr)));
              },
              "pack_q.d");
        },
        "pack_q.rows");
  }

  void emit_body(llvm::Function* pack_q, llvm::Function* pack_k, llvm::Function* pack_v) {
    rows_ = field(kRows, i64_);
    llvm::Value* seq_q = field(kSeqQ, i64_);
    seq_kv_ = field(kSeqKv, i64_);
    i0_ = field(kI0, i64_);
    batch_index_ = field(kBatchIndex, i64_);
    head_ = field(kHead, i64_);
    positions_ = field(kPositions, i64_);
    scale_ = field(kScale, f32_);
    tensors_ = field(kTensors, ptr_);
    scalars_ = field(kScalars, ptr_);
    diagonal_ = b_.CreateSub(seq_kv_, seq_q);
    groups_ = b_.CreateSDiv(b_.CreateAdd(rows_, i64c(cfg_.mr - 1)), i64c(cfg_.mr));
    llvm::Value* padded_rows = b_.CreateMul(groups_, i64c(cfg_.mr));
    if (cfg_.in_place || grouped_) {
      llvm::Value *q_rs = field(kQRs, i64_), *q_hs = field(kQHs, i64_);
      emit_for(
          b_, i64c(0), padded_rows, i64c(1),
          [&](llvm::Value* r) {
            b_.CreateStore(row_offset(smin(r, b_.CreateSub(rows_, i64c(1))), q_rs, q_hs), gep_i64(q_row_at_, r));
          },
          "q_rows");
    }
    if (amx_) {
      // Q's row tiles packed into AMX tiles once per block: every key block's S tiles read them.
      llvm::Value* q = field(kQ, ptr_);
      emit_for(
          b_, i64c(0), groups_, i64c(1),
          [&](llvm::Value* g) {
            std::vector<llvm::Value*> starts;
            for (int r = 0; r < cfg_.mr; ++r)
              starts.push_back(
                  tensor_gep(q, load_i64(q_row_at_, b_.CreateAdd(b_.CreateMul(g, i64c(cfg_.mr)), i64c(r)))));
            pack_a_tiles(starts, i64c(dqk_ * 2), q_sliver(g));
          },
          "pack_q.tiles");
    }

    if (!cfg_.in_place && !grouped_) {
      llvm::Value *q = field(kQ, ptr_), *q_rs = field(kQRs, i64_), *q_ds = field(kQDs, i64_);
      emit_if_else(
          b_, b_.CreateICmpSGE(positions_, rows_),
          [&] {
            b_.CreateCall(pack_q, {q, i64c(0), i64c(0), rows_, i64c(dqk_), q_rs, q_ds, q_pack_});
          },
          [&] { emit_pack_stacked_q(q, q_rs, q_ds, padded_rows); }, "pack_q");
    }
    emit_for(
        b_, i64c(0), padded_rows, i64c(1),
        [&](llvm::Value* r) {
          store_f32(fconst(-INFINITY), row_max_, r);
          store_f32(fconst(0), row_sum_, r);
          for (std::int64_t c = 0; c < dv_padded_; c += lanes_)
            store_vec(llvm::Constant::getNullValue(vec_), out_,
                      b_.CreateAdd(b_.CreateMul(r, i64c(dv_padded_)), i64c(c)));
        },
        "init");

    // Keys past the last row's causal bound are seen by no row of the block: those blocks are skipped.
    kv_end_ = seq_kv_;
    if (sig_.causal) {
      llvm::Value* last_position = b_.CreateAdd(i0_, b_.CreateSub(smin(rows_, positions_), i64c(1)));
      kv_end_ = smax(i64c(0), smin(seq_kv_, b_.CreateAdd(b_.CreateAdd(last_position, i64c(1)), diagonal_)));
    }
    // Blocks the modifier masks for every row (the runtime proved it) are skipped too.
    kv_end_ = smin(kv_end_, field(kKvStop, i64_));
    llvm::Value* kv_begin = field(kKvBegin, i64_);
    llvm::Value* k_ptr = field(kK, ptr_);
    llvm::Value *k_rs = field(kKRs, i64_), *k_ds = field(kKDs, i64_);
    llvm::Value* v_ptr = field(kV, ptr_);
    llvm::Value *v_rs = field(kVRs, i64_), *v_ds = field(kVDs, i64_);
    llvm::Value* kv_packed = field(kKvPacked, ptr_);
    llvm::Value* prepacked = b_.CreateICmpNE(kv_packed, llvm::ConstantPointerNull::get(b_.getPtrTy()));
    const std::int64_t packed_block_floats = cfg_.packed_block_floats(sig_, target_);
    emit_for(
        b_, kv_begin, kv_end_, i64c(cfg_.block_kv),
        [&](llvm::Value* kb) {
          llvm::Value* kn = smin(i64c(cfg_.block_kv), b_.CreateSub(kv_end_, kb));
          // Packed blocks hold every key of the sequence's block, also past a causal end: V's slivers are that deep.
          v_depth_ = smin(i64c(cfg_.block_kv), b_.CreateSub(seq_kv_, kb));
          kb_ = kb;
          if (cfg_.in_place) {
            emit_scores_in_place(kb, kn);
          } else {
            // The block as the pack entry left it, or packed now into the workspace.
            llvm::Value* packed_at = b_.CreateMul(b_.CreateSDiv(kb, i64c(cfg_.block_kv)), i64c(packed_block_floats));
            k_block_ = b_.CreateSelect(prepacked, gep(kv_packed, packed_at), k_pack_);
            v_block_ = b_.CreateSelect(
                prepacked, gep(kv_packed, b_.CreateAdd(packed_at, i64c(cfg_.k_area_floats(sig_)))), v_pack_);
            emit_if(
                b_, b_.CreateNot(prepacked),
                [&] {
                  b_.CreateCall(pack_k, {k_ptr, kb, i64c(0), kn, i64c(dqk_), k_rs, k_ds, k_pack_});
                  b_.CreateCall(pack_v, {v_ptr, i64c(0), kb, i64c(dv_), v_depth_, v_ds, v_rs, v_pack_});
                },
                "pack");
            llvm::Value* key_slivers = b_.CreateSDiv(b_.CreateAdd(kn, i64c(nr_ - 1)), i64c(nr_));
            emit_for(
                b_, i64c(0), groups_, i64c(1),
                [&](llvm::Value* g) {
                  emit_for(
                      b_, i64c(0), key_slivers, i64c(1), [&](llvm::Value* s) { emit_score_tile(g, s); }, "s.tile");
                },
                "s.group");
          }
          emit_for(
              b_, i64c(0), padded_rows, i64c(1), [&](llvm::Value* r) { emit_softmax_row(r, kb, kn); }, "softmax");
          emit_for(
              b_, i64c(0), groups_, i64c(1),
              [&](llvm::Value* g) {
                if (amx_) return emit_amx_output(g, kn);
                const std::int64_t tiles = dv_padded_ / nr_;
                if (!cfg_.in_place || grouped_ || tiles == 1) {
                  for (std::int64_t s = 0; s < tiles; ++s) emit_output_tile(g, s, i64c(0), kn, kn);
                  return;
                }
                // V in place, read by several column tiles: every tile over a chunk of keys before the next chunk,
                // so that the later tiles find the chunk's V rows in L1 and V streams in at one pace.
                emit_for(
                    b_, i64c(0), kn, i64c(kPvChunkKeys),
                    [&](llvm::Value* j0) {
                      llvm::Value* j1 = smin(b_.CreateAdd(j0, i64c(kPvChunkKeys)), kn);
                      for (std::int64_t s = 0; s < tiles; ++s) emit_output_tile(g, s, j0, j1, kn);
                    },
                    "pv.chunk");
              },
              "pv.group");
        },
        "kv");
    emit_for(
        b_, i64c(0), rows_, i64c(1), [&](llvm::Value* r) { emit_finish_row(r); }, "finish");
  }

  // S[r][j] = Σ_d Q[r][d]·K[kb + j][d] read in place: dot tiles of mr rows and a few keys, vectorised along the head
  // dimension and summed across lanes (GEMM's x·Wᵀ kernel). Keys outside, row groups inside: a few keys, read from
  // memory once, serve every row of the block from L1, so the block's demand on memory is spread evenly over its
  // compute. Rows and keys past the block's read the last real one, so every load is in bounds.
  void emit_scores_in_place(llvm::Value* kb, llvm::Value* kn) {
    const int mr = cfg_.mr;
    // Accumulators in three quarters of the registers, 1, 2 or 4 keys (they divide block_kv: stores stay in a row).
    const int cols = std::clamp(target_.vector_registers() * 3 / 4 / mr, 1, 4);
    const int keys = cols == 3 ? 2 : cols;
    llvm::Value* q = field(kQ, ptr_);
    llvm::Value *k = field(kK, ptr_), *k_rs = field(kKRs, i64_);
    llvm::Value *v = field(kV, ptr_), *v_rs = field(kVRs, i64_);
    emit_for(
        b_, i64c(0), kn, i64c(keys),
        [&](llvm::Value* j0) {
          std::vector<llvm::Value*> k_rows;
          for (int c = 0; c < keys; ++c) {
            llvm::Value* j = smin(b_.CreateAdd(j0, i64c(c)), b_.CreateSub(kn, i64c(1)));
            k_rows.push_back(tensor_gep(k, b_.CreateMul(b_.CreateAdd(kb, j), k_rs)));
          }
          // The rows kPrefetchKeys ahead of those read: K's within the block, then the first of V's, which P·V reads
          // next (it prefetches the rest of V and the next block's first K rows). Whole rows: the hardware
          // prefetchers leave a stream of key rows (each a few lines, a head's rows far apart in BSHD) waiting on
          // DRAM's latency.
          for (int c = 0; c < keys; ++c) {
            llvm::Value* t = b_.CreateAdd(j0, i64c(c + kPrefetchKeys));
            llvm::Value* k_row = tensor_gep(k, b_.CreateMul(b_.CreateAdd(kb, t), k_rs));
            llvm::Value* v_row = tensor_gep(v, b_.CreateMul(b_.CreateAdd(kb, b_.CreateSub(t, kn)), v_rs));
            prefetch_row(b_.CreateSelect(b_.CreateICmpSLT(t, kn), k_row, v_row), std::max(dqk_, dv_));
          }
          emit_for(
              b_, i64c(0), groups_, i64c(1),
              [&](llvm::Value* g) {
                std::vector<llvm::Value*> q_rows;
                for (int r = 0; r < mr; ++r)
                  q_rows.push_back(
                      tensor_gep(q, load_i64(q_row_at_, b_.CreateAdd(b_.CreateMul(g, i64c(mr)), i64c(r)))));
                LoopValues acc(static_cast<std::size_t>(mr * keys), llvm::Constant::getNullValue(vec_));
                acc = dot_k_loop(acc, q_rows, k_rows, i64c(dqk_), 2, dot_inputs());
                const LoopValues sums = dot_lane_sums(acc, mr, keys);
                for (int r = 0; r < mr; ++r) {
                  llvm::Value* at = b_.CreateAdd(
                      b_.CreateMul(b_.CreateAdd(b_.CreateMul(g, i64c(mr)), i64c(r)), i64c(cfg_.block_kv)), j0);
                  store_first_lanes(sums[static_cast<std::size_t>(r)], gep(scores_, at), keys);
                }
              },
              "s.group");
        },
        "s.keys");
  }

  // Where row tile g's Q sliver lies in q_pack_ on AMX (pack_a_tiles' layout, dqk_packed_ deep).
  llvm::Value* q_sliver(llvm::Value* g) {
    return b_.CreateGEP(b_.getInt8Ty(), q_pack_, b_.CreateMul(g, i64c(std::int64_t{cfg_.mr} * dqk_packed_ * 2)));
  }
  AmxProduct amx_product_of(int mr) {
    AmxProduct p;
    p.inputs = DotInputs::BF16;
    p.mr = mr, p.nr = nr_;
    p.emulated = cfg_.amx == CpuAttentionConfig::kAmxEmulated;
    return p;
  }

  // O[g·mr + r][:] = rescale[r]·O + P·V on AMX: the rows are rescaled in place, then each nr-column tile product
  // starts from them and adds P's bf16 rows (read in place from p16_, whose keys past kn are zeros up to a tile row)
  // times the V sliver's key pairs.
  void emit_amx_output(llvm::Value* g, llvm::Value* kn) {
    const int mr = cfg_.mr;
    llvm::Value* row0 = b_.CreateMul(g, i64c(mr));
    emit_for(
        b_, row0, b_.CreateAdd(row0, i64c(mr)), i64c(1),
        [&](llvm::Value* r) {
          llvm::Value* factor = splat(load_f32(row_rescale_, r));
          for (std::int64_t c = 0; c < dv_padded_; c += lanes_) {
            llvm::Value* at = b_.CreateAdd(b_.CreateMul(r, i64c(dv_padded_)), i64c(c));
            store_vec(b_.CreateFMul(load_vec(out_, at), factor), out_, at);
          }
        },
        "pv.rescale");
    const std::int64_t p_stride = std::int64_t{cfg_.block_kv} * 2;
    llvm::Value* p_rows = b_.CreateGEP(b_.getInt8Ty(), p16_, b_.CreateMul(row0, i64c(p_stride)));
    for (std::int64_t s = 0; s < dv_padded_ / nr_; ++s) {
      AmxProduct p = amx_product_of(mr);
      p.a = {p_rows, i64c(p_stride), 64, 16 * p_stride};
      p.b = amx_group_sliver(
          b_.CreateGEP(b_.getInt16Ty(), v_block_, b_.CreateMul(grouped_depth(v_depth_, 32), i64c(s * nr_))), nr_,
          DotInputs::BF16);
      p.blocks = b_.CreateSDiv(b_.CreateAdd(kn, i64c(31)), i64c(32));
      p.c_in = p.c_out = gep(out_, b_.CreateAdd(b_.CreateMul(row0, i64c(dv_padded_)), i64c(s * nr_)));
      p.c_stride = dv_padded_ * 4;
      amx_product(p);
    }
  }

  // S[g·mr + r][s·nr + c] = Σ_d Q[r][d]·K[c][d]: GEMM's micro-kernel over the head dimension.
  void emit_score_tile(llvm::Value* g, llvm::Value* s) {
    const int mr = cfg_.mr, nv = cfg_.nv;
    if (amx_) {
      AmxProduct p = amx_product_of(mr);
      p.a = amx_sliver(q_sliver(g), mr);
      p.b = amx_group_sliver(b_.CreateGEP(b_.getInt16Ty(), k_block_, b_.CreateMul(s, i64c(nr_ * dqk_packed_))), nr_,
                             DotInputs::BF16);
      p.blocks = i64c(dqk_packed_ / 32);
      p.c_out = gep(scores_,
                    b_.CreateAdd(b_.CreateMul(g, i64c(std::int64_t{mr} * cfg_.block_kv)), b_.CreateMul(s, i64c(nr_))));
      p.c_stride = std::int64_t{cfg_.block_kv} * 4;
      amx_product(p);
      return;
    }
    if (grouped_) {
      // Q's rows in place against the key sliver's d pairs.
      LoopValues acc(static_cast<std::size_t>(mr * nv), llvm::Constant::getNullValue(vec_));
      llvm::Value* k = b_.CreateGEP(b_.getInt16Ty(), k_block_, b_.CreateMul(s, i64c(nr_ * round_up(dqk_, 2))));
      acc = grouped_k_loop(acc, q_rows(g), k, i64c(dqk_), nr_, DotInputs::BF16, 2);
      store_score_tile(acc, g, s);
      return;
    }
    llvm::Value* q = gep(q_pack_, b_.CreateMul(g, i64c(std::int64_t{mr} * dqk_)));
    llvm::Value* k = gep(k_block_, b_.CreateMul(s, i64c(std::int64_t{nr_} * dqk_)));
    LoopValues acc(static_cast<std::size_t>(mr * nv), llvm::Constant::getNullValue(vec_));
    const auto step = [&](LoopValues& values, llvm::Value* d) {
      std::vector<llvm::Value*> bv;
      for (int v = 0; v < nv; ++v)
        bv.push_back(load_vec(k, b_.CreateAdd(b_.CreateMul(d, i64c(nr_)), i64c(v * lanes_))));
      outer_product_step(values, 0, mr, bv,
                         [&](int r) { return load_f32(q, b_.CreateAdd(b_.CreateMul(d, i64c(mr)), i64c(r))); });
    };
    const std::int64_t whole = round_down(dqk_, kDepthUnroll);
    acc = emit_for(
        b_, i64c(0), i64c(whole), i64c(kDepthUnroll), acc,
        [&](llvm::Value* d, const LoopValues& carried) {
          LoopValues values = carried;
          for (int u = 0; u < kDepthUnroll; ++u) step(values, b_.CreateAdd(d, i64c(u)));
          return values;
        },
        "s.d");
    for (std::int64_t d = whole; d < dqk_; ++d) step(acc, i64c(d));
    store_score_tile(acc, g, s);
  }

  // S[g·mr + r][s·nr + c] from a score tile's accumulators.
  void store_score_tile(const LoopValues& acc, llvm::Value* g, llvm::Value* s) {
    const int mr = cfg_.mr, nv = cfg_.nv;
    llvm::Value* row0 = b_.CreateMul(g, i64c(mr));
    for (int r = 0; r < mr; ++r)
      for (int v = 0; v < nv; ++v)
        store_vec(acc[static_cast<std::size_t>(r * nv + v)], scores_,
                  b_.CreateAdd(b_.CreateMul(b_.CreateAdd(row0, i64c(r)), i64c(cfg_.block_kv)),
                               b_.CreateAdd(b_.CreateMul(s, i64c(nr_)), i64c(v * lanes_))));
  }

  // Where the Q rows of row tile g start (rows past the block's read its last row).
  std::vector<llvm::Value*> q_rows(llvm::Value* g) {
    llvm::Value* q = field(kQ, ptr_);
    std::vector<llvm::Value*> rows;
    for (int r = 0; r < cfg_.mr; ++r)
      rows.push_back(tensor_gep(q, load_i64(q_row_at_, b_.CreateAdd(b_.CreateMul(g, i64c(cfg_.mr)), i64c(r)))));
    return rows;
  }

  // The score modifier on one vector of scores of row i, keys j (per lane); `valid` are the keys that exist.
  llvm::Value* emit_score_mod(llvm::Value* s, llvm::Value* i, llvm::Value* j, llvm::Value* h, llvm::Value* valid) {
    const ScoreModifier& mod = sig_.score_mod;
    std::function<llvm::Value*(const ExprNode&)> leaf = [&](const ExprNode& node) -> llvm::Value* {
      if (node.op == ExprOp::Var) {
        if (node.name == "s") return s;
        if (node.name == "i") return i;
        if (node.name == "j") return j;
        if (node.name == "h") return h;
        if (node.name == "b") return batch_index_;
        const auto& names = mod.scalars();
        const auto index = static_cast<std::int64_t>(std::find(names.begin(), names.end(), node.name) - names.begin());
        return splat(load_f32(scalars_, i64c(index)));
      }
      const auto& uses = mod.tensors();
      const auto t = static_cast<std::int64_t>(
          std::find_if(uses.begin(), uses.end(), [&](const auto& u) { return u.name == node.name; }) - uses.begin());
      llvm::Value* arg = b_.CreateGEP(mod_tensor_ty_, tensors_, i64c(t));
      llvm::Value* offset = i64c(0);
      for (std::size_t k = 0; k < node.args.size(); ++k) {
        llvm::Value* index = emit_expr(b_, node.args[k], vec_, leaf);
        llvm::Value* stride =
            b_.CreateLoad(i64_, b_.CreateStructGEP(mod_tensor_ty_, arg, static_cast<unsigned>(k + 1)));
        if (index->getType()->isVectorTy() && !offset->getType()->isVectorTy()) offset = splat(offset);
        if (!index->getType()->isVectorTy() && offset->getType()->isVectorTy()) index = splat(index);
        offset = b_.CreateAdd(offset, b_.CreateMul(index, offset->getType()->isVectorTy() ? splat(stride) : stride));
      }
      llvm::Value* data = b_.CreateLoad(ptr_, b_.CreateStructGEP(mod_tensor_ty_, arg, 0));
      if (!offset->getType()->isVectorTy()) return splat(load_f32(data, offset));
      // Per-key positions: a gather of the keys that exist (a masked key's index may lie outside the tensor).
      return b_.CreateMaskedGather(vec_, b_.CreateGEP(f32_, data, offset), llvm::Align(4), valid,
                                   llvm::Constant::getNullValue(vec_));
    };
    return emit_expr(b_, mod.tree(), vec_, leaf);
  }

  // The largest lane, by halving the vector with vmaxps (a max reduction without fast-math flags is a chain of
  // scalar maxnum, each with a NaN test: 48 dependent instructions per row and key block).
  llvm::Value* max_across_lanes(llvm::Value* v) {
    for (int width = lanes_ / 2; width >= 1; width /= 2) {
      std::vector<int> upper, lower;
      for (int i = 0; i < width; ++i) lower.push_back(i), upper.push_back(width + i);
      llvm::Value* a = b_.CreateShuffleVector(v, lower);
      llvm::Value* c = b_.CreateShuffleVector(v, upper);
      v = b_.CreateSelect(b_.CreateFCmpOGT(a, c), a, c);
    }
    return b_.CreateExtractElement(v, std::uint64_t{0});
  }

  // Online softmax of row r's new scores, in base 2 (t = score·log2 e, so each weight is one exp2): scale, modify
  // and mask the scores, raise the running max, turn them into 2^(t − max) in place, and leave the factor that
  // rescales the row's earlier sum and output. Where the row sees every key of the block, the modifier is the
  // identity and the scale positive, the max is taken on the raw dot products and t computed with the exponent.
  void emit_softmax_row(llvm::Value* r, llvm::Value* kb, llvm::Value* kn) {
    llvm::Value* i = b_.CreateAdd(i0_, b_.CreateSRem(r, positions_));
    llvm::Value* limit = kv_end_;  // keys [0, limit) are visible to this row
    if (sig_.causal) limit = smax(i64c(0), smin(kv_end_, b_.CreateAdd(b_.CreateAdd(i, diagonal_), i64c(1))));
    llvm::Value* chunks_end =
        b_.CreateMul(b_.CreateSDiv(b_.CreateAdd(kn, i64c(lanes_ - 1)), i64c(lanes_)), i64c(lanes_));
    if (!sig_.score_mod.is_identity()) return emit_softmax_row_body(r, i, kb, chunks_end, limit, false);
    llvm::Value* unmasked =
        b_.CreateAnd(b_.CreateICmpSLE(b_.CreateAdd(kb, chunks_end), limit), b_.CreateFCmpOGT(scale_, fconst(0)));
    emit_if_else(
        b_, unmasked, [&] { emit_softmax_row_body(r, i, kb, chunks_end, limit, true); },
        [&] { emit_softmax_row_body(r, i, kb, chunks_end, limit, false); }, "softmax");
  }

  // Over the chunks [0, end) of a score row, `lanes_` scores each (end a multiple of lanes_): two accumulators, the
  // even chunks' and the odd ones', so that the loop-carried max or sum waits on half as many of its own results.
  LoopValues reduce_chunks(llvm::Value* end, llvm::Value* init,
                           const std::function<llvm::Value*(llvm::Value* c, llvm::Value* carried)>& step,
                           const char* name) {
    llvm::Value* pairs_end = b_.CreateMul(b_.CreateSDiv(end, i64c(2 * lanes_)), i64c(2 * lanes_));
    const LoopValues both = emit_for(
        b_, i64c(0), pairs_end, i64c(2 * lanes_), {init, init},
        [&](llvm::Value* c, const LoopValues& carried) {
          llvm::Value* even = step(c, carried[0]);
          return LoopValues{even, step(b_.CreateAdd(c, i64c(lanes_)), carried[1])};
        },
        name);
    return emit_select_values(
        b_, b_.CreateICmpSLT(pairs_end, end),
        [&] {
          return LoopValues{step(pairs_end, both[0]), both[1]};
        },
        [&] { return both; }, "chunks.odd");
  }

  void emit_softmax_row_body(llvm::Value* r, llvm::Value* i, llvm::Value* kb, llvm::Value* chunks_end,
                             llvm::Value* limit, bool unmasked) {
    llvm::Value* row = gep(scores_, b_.CreateMul(r, i64c(cfg_.block_kv)));
    llvm::Value* neg_inf = splat(fconst(-INFINITY));
    llvm::Value* log2e = fconst(std::numbers::log2e);
    llvm::Value* exponent_scale = b_.CreateFMul(scale_, log2e);  // t = dot·scale·log2 e
    const auto larger = [&](llvm::Value* a, llvm::Value* s) { return b_.CreateSelect(b_.CreateFCmpOGT(a, s), a, s); };
    const LoopValues maxima = reduce_chunks(
        chunks_end, neg_inf,
        [&](llvm::Value* c, llvm::Value* carried) {
          llvm::Value* s = load_vec(row, c);
          if (!unmasked) {
            llvm::Value* j = b_.CreateAdd(splat(b_.CreateAdd(kb, c)), lane_indices(lanes_));
            llvm::Value* valid = b_.CreateICmpSLT(j, splat(limit));
            if (sig_.score_mod.is_identity()) {
              s = b_.CreateFMul(s, splat(exponent_scale));
            } else {
              llvm::Value* h = b_.CreateAdd(head_, b_.CreateSDiv(r, positions_));
              s = emit_score_mod(b_.CreateFMul(s, splat(scale_)), i, j, h, valid);
              s = b_.CreateFMul(s, splat(log2e));
            }
            s = b_.CreateSelect(valid, s, neg_inf);
            store_vec(s, row, c);
          }
          // vmaxps: a NaN score reaches the output through its own weight whatever the max does with it.
          return larger(carried, s);
        },
        "softmax.max");
    llvm::Value* block_max = max_across_lanes(larger(maxima[0], maxima[1]));
    if (unmasked) block_max = b_.CreateFMul(block_max, exponent_scale);
    llvm::Value* old_max = load_f32(row_max_, r);
    llvm::Value* new_max = b_.CreateIntrinsic(llvm::Intrinsic::maxnum, {f32_}, {old_max, block_max});
    // A row with no visible score so far keeps max −inf; exponents are then taken against 0 (all give 0).
    llvm::Value* base = b_.CreateSelect(b_.CreateFCmpOEQ(new_max, fconst(-INFINITY)), fconst(0), new_max);
    llvm::Value* vbase = splat(base);
    // Grouped products multiply P rounded to bf16: its exponents need no more than bf16's 8 bits.
    const int weight_bits = grouped_ ? 8 : 24;
    const LoopValues sums = reduce_chunks(
        chunks_end, llvm::Constant::getNullValue(vec_),
        [&](llvm::Value* c, llvm::Value* carried) {
          llvm::Value* t = load_vec(row, c);
          llvm::Value* p;
          if (unmasked) {
            p = emit_exp2(
                b_, b_.CreateIntrinsic(llvm::Intrinsic::fma, {vec_}, {t, splat(exponent_scale), b_.CreateFNeg(vbase)}),
                weight_bits);
          } else {
            p = emit_exp2(b_, b_.CreateFSub(t, vbase), weight_bits);
            p = b_.CreateSelect(b_.CreateFCmpOEQ(t, neg_inf), llvm::Constant::getNullValue(vec_), p);
          }
          if (!grouped_) store_vec(p, row, c);  // grouped products read P in bf16 only
          if (grouped_)
            b_.CreateAlignedStore(
                to_bf16_by_instruction(p),
                b_.CreateGEP(b_.getInt16Ty(), p16_, b_.CreateAdd(b_.CreateMul(r, i64c(cfg_.block_kv)), c)),
                llvm::Align(2));
          return b_.CreateFAdd(carried, p);
        },
        "softmax.exp");
    if (amx_)  // tile products read P's keys in rows of 32: those past the block's chunks are zeros
      emit_if(
          b_, b_.CreateICmpNE(b_.CreateAnd(chunks_end, i64c(31)), i64c(0)),
          [&] {
            auto* halves = llvm::FixedVectorType::get(b_.getInt16Ty(), static_cast<unsigned>(lanes_));
            b_.CreateAlignedStore(
                llvm::Constant::getNullValue(halves),
                b_.CreateGEP(b_.getInt16Ty(), p16_, b_.CreateAdd(b_.CreateMul(r, i64c(cfg_.block_kv)), chunks_end)),
                llvm::Align(2));
          },
          "softmax.tail");
    llvm::Value* rescale = b_.CreateSelect(b_.CreateFCmpOEQ(old_max, fconst(-INFINITY)), fconst(0),
                                           emit_exp2(b_, b_.CreateFSub(old_max, base)));
    auto* sum = llvm::cast<llvm::Instruction>(b_.CreateFAddReduce(fconst(-0.0), b_.CreateFAdd(sums[0], sums[1])));
    sum->setHasAllowReassoc(true);
    store_f32(b_.CreateIntrinsic(llvm::Intrinsic::fma, {f32_}, {load_f32(row_sum_, r), rescale, sum}), row_sum_, r);
    store_f32(new_max, row_max_, r);
    store_f32(rescale, row_rescale_, r);
  }

  // O[g·mr + r][s·nr + c] = rescale[r]·O + Σ_j P[r][j]·V[j][c]: GEMM's micro-kernel over the key block.
  // Keys [j_begin, j_end) of the block's kn; the block's first chunk applies the rows' rescale factors.
  void emit_output_tile(llvm::Value* g, std::int64_t s, llvm::Value* j_begin, llvm::Value* j_end, llvm::Value* kn) {
    const int mr = cfg_.mr, nv = cfg_.nv;
    llvm::Value* row0 = b_.CreateMul(g, i64c(mr));
    LoopValues acc;
    std::vector<llvm::Value*> out_index;
    llvm::Value* first = b_.CreateICmpEQ(j_begin, i64c(0));
    for (int r = 0; r < mr; ++r) {
      llvm::Value* row = b_.CreateAdd(row0, i64c(r));
      llvm::Value* rescale = splat(b_.CreateSelect(first, load_f32(row_rescale_, row), fconst(1)));
      for (int v = 0; v < nv; ++v) {
        out_index.push_back(b_.CreateAdd(b_.CreateMul(row, i64c(dv_padded_)), i64c(s * nr_ + v * lanes_)));
        acc.push_back(b_.CreateFMul(load_vec(out_, out_index.back()), rescale));
      }
    }
    if (grouped_) {
      // P's rows (bf16) against the V sliver's key pairs.
      std::vector<llvm::Value*> p_rows;
      for (int r = 0; r < mr; ++r)
        p_rows.push_back(
            b_.CreateGEP(b_.getInt16Ty(), p16_, b_.CreateMul(b_.CreateAdd(row0, i64c(r)), i64c(cfg_.block_kv))));
      llvm::Value* v_sliver =
          b_.CreateGEP(b_.getInt16Ty(), v_block_, b_.CreateMul(grouped_depth(v_depth_, 2), i64c(s * nr_)));
      acc = grouped_k_loop(acc, p_rows, v_sliver, kn, nr_, DotInputs::BF16, 2);
      for (std::size_t t = 0; t < acc.size(); ++t) store_vec(acc[t], out_, out_index[t]);
      return;
    }
    llvm::Value* p = gep(scores_, b_.CreateMul(row0, i64c(cfg_.block_kv)));
    // Read before the loop: its prefetches may touch memory as far as LLVM knows, so it would not hoist them.
    llvm::Value *v_base = field(kV, ptr_), *v_rs = field(kVRs, i64_);
    llvm::Value *k_base = field(kK, ptr_), *k_rs = field(kKRs, i64_);
    const auto step = [&](LoopValues& values, llvm::Value* j) {
      std::vector<llvm::Value*> bv;
      if (cfg_.in_place) {
        // V's row kb + j where it lies; columns past head_dim_v read as zeros.
        llvm::Value* row = tensor_gep(v_base, b_.CreateMul(b_.CreateAdd(kb_, j), v_rs));
        // V's rows ahead, then the next block's first K rows. One column tile: whole rows kPrefetchKeys ahead.
        // Several (the keys in chunks, emit_body): each tile its own columns of the row a chunk ahead, which it reads
        // next, so that prefetches issue at one pace through every tile rather than in a burst in the first.
        const std::int64_t tiles = dv_padded_ / nr_, width = std::max(dqk_, dv_);
        if (tiles == 1 || s * nr_ < width) {
          llvm::Value* t = b_.CreateAdd(j, i64c(tiles == 1 ? kPrefetchKeys : kPvChunkKeys));
          llvm::Value* at = b_.CreateAdd(kb_, t);
          llvm::Value* ahead = b_.CreateSelect(b_.CreateICmpSLT(t, kn), tensor_gep(v_base, b_.CreateMul(at, v_rs)),
                                               tensor_gep(k_base, b_.CreateMul(at, k_rs)));
          if (tiles == 1)
            prefetch_row(ahead, width);
          else
            prefetch_columns(ahead, s * nr_, s == tiles - 1 ? width : std::min(width, (s + 1) * nr_));
        }
        for (int v = 0; v < nv; ++v) {
          const std::int64_t col = s * nr_ + v * lanes_;
          if (col >= dv_)
            bv.push_back(llvm::Constant::getNullValue(vec_));
          else {
            llvm::Value* mask = col + lanes_ <= dv_ ? llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(
                                                          b_.getInt1Ty(), static_cast<unsigned>(lanes_)))
                                                    : lane_mask(lanes_, i64c(dv_ - col));
            llvm::Value* at = tensor_gep(row, i64c(col));
            bv.push_back(bf16_ ? load_masked_bf16(at, mask) : load_masked(at, mask));
          }
        }
      } else {
        llvm::Value* v_sliver = gep(v_block_, b_.CreateMul(v_depth_, i64c(s * nr_)));
        for (int v = 0; v < nv; ++v)
          bv.push_back(load_vec(v_sliver, b_.CreateAdd(b_.CreateMul(j, i64c(nr_)), i64c(v * lanes_))));
      }
      outer_product_step(values, 0, mr, bv,
                         [&](int r) { return load_f32(p, b_.CreateAdd(i64c(std::int64_t{r} * cfg_.block_kv), j)); });
    };
    llvm::Value* whole = b_.CreateAdd(
        j_begin, b_.CreateMul(b_.CreateSDiv(b_.CreateSub(j_end, j_begin), i64c(kKeyUnroll)), i64c(kKeyUnroll)));
    acc = emit_for(
        b_, j_begin, whole, i64c(kKeyUnroll), acc,
        [&](llvm::Value* j, const LoopValues& carried) {
          LoopValues values = carried;
          for (int u = 0; u < kKeyUnroll; ++u) step(values, b_.CreateAdd(j, i64c(u)));
          return values;
        },
        "pv.j");
    acc = emit_for(
        b_, whole, j_end, i64c(1), acc,
        [&](llvm::Value* j, const LoopValues& carried) {
          LoopValues values = carried;
          step(values, j);
          return values;
        },
        "pv.j.tail");
    for (std::size_t t = 0; t < acc.size(); ++t) store_vec(acc[t], out_, out_index[t]);
  }

  // f32 lanes rounded to the nearest bf16 by vcvtneps2bf16 (avx512_bf16: ties to even, NaN quiet, denormal inputs to
  // zero, where P's weights are far below rounding), as 16-bit integers: one instruction for round_to_bf16's seven.
  llvm::Value* to_bf16_by_instruction(llvm::Value* value) {
    auto* bf16_ty = llvm::FixedVectorType::get(b_.getBFloatTy(), static_cast<unsigned>(lanes_));
    auto* halves_ty = llvm::FixedVectorType::get(b_.getInt16Ty(), static_cast<unsigned>(lanes_));
    return b_.CreateBitCast(b_.CreateFPTrunc(value, bf16_ty), halves_ty);
  }

  // f32 lanes rounded to the nearest bf16, ties to even, as 16-bit integers (NaN stays NaN), as to_bf16 does.
  llvm::Value* round_to_bf16(llvm::Value* value) {
    auto* words_ty = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(lanes_));
    auto* halves_ty = llvm::FixedVectorType::get(b_.getInt16Ty(), static_cast<unsigned>(lanes_));
    const auto word = [&](std::uint32_t v) { return llvm::ConstantInt::get(words_ty, v); };
    llvm::Value* bits = b_.CreateBitCast(value, words_ty);
    llvm::Value* rounded =
        b_.CreateAdd(bits, b_.CreateAdd(word(0x7fff), b_.CreateAnd(b_.CreateLShr(bits, 16), word(1))));
    llvm::Value* quiet_nan = b_.CreateOr(bits, word(0x00400000));
    llvm::Value* chosen = b_.CreateSelect(b_.CreateFCmpUNO(value, value), quiet_nan, rounded);
    return b_.CreateTrunc(b_.CreateLShr(chosen, 16), halves_ty);
  }

  // O row r = accumulated / sum (0 for a row that saw no key), and its log-sum-exp.
  void emit_finish_row(llvm::Value* r) {
    llvm::Value* sum = load_f32(row_sum_, r);
    llvm::Value* seen = b_.CreateFCmpOGT(sum, fconst(0));
    llvm::Value* inverse = splat(b_.CreateSelect(seen, b_.CreateFDiv(fconst(1), sum), fconst(0)));
    llvm::Value* o = field(kO, ptr_);
    llvm::Value* o_row = row_offset(r, field(kORs, i64_), field(kOHs, i64_));
    llvm::Value* o_ds = field(kODs, i64_);
    // O row r: in the signature's type, or (a split call's partial output, bf16 signatures) as f32.
    const auto store_row = [&](bool as_f32) {
      const bool bf16 = sig_.dtype == DType::bf16 && !as_f32;
      const bool unit = sig_.o_unit_d || as_f32;
      for (std::int64_t c = 0; c < dv_; c += lanes_) {
        llvm::Value* value =
            b_.CreateFMul(load_vec(out_, b_.CreateAdd(b_.CreateMul(r, i64c(dv_padded_)), i64c(c))), inverse);
        const std::int64_t count = std::min<std::int64_t>(lanes_, dv_ - c);
        if (bf16) {
          llvm::Value* halves = round_to_bf16(value);
          for (std::int64_t l = 0; l < count; ++l)
            if (unit && count == lanes_ && l == 0) {
              b_.CreateAlignedStore(halves, b_.CreateGEP(b_.getInt16Ty(), o, b_.CreateAdd(o_row, i64c(c))),
                                    llvm::Align(2));
              break;
            } else {
              b_.CreateAlignedStore(
                  b_.CreateExtractElement(halves, static_cast<std::uint64_t>(l)),
                  b_.CreateGEP(b_.getInt16Ty(), o, b_.CreateAdd(o_row, b_.CreateMul(i64c(c + l), o_ds))),
                  llvm::Align(2));
            }
        } else if (unit) {
          store_first_lanes(value, gep(o, b_.CreateAdd(o_row, i64c(c))), static_cast<int>(count));
        } else {
          for (std::int64_t l = 0; l < count; ++l)
            store_f32(b_.CreateExtractElement(value, static_cast<std::uint64_t>(l)), o,
                      b_.CreateAdd(o_row, b_.CreateMul(i64c(c + l), o_ds)));
        }
      }
    };
    if (sig_.dtype == DType::f32)
      store_row(false);
    else
      emit_if_else(
          b_, b_.CreateICmpNE(field(kOF32, b_.getInt32Ty()), b_.getInt32(0)), [&] { store_row(true); },
          [&] { store_row(false); }, "o");
    // The log-sum-exp when the call asks for it: the signature's, or a chunk's of a split call (key_chunks.hpp).
    llvm::Value* lse_out = field(kLse, ptr_);
    emit_if(
        b_, b_.CreateICmpNE(lse_out, llvm::ConstantPointerNull::get(b_.getPtrTy())),
        [&] {
          // The running max is in base 2: lse = max·ln 2 + ln(sum).
          llvm::Value* lse =
              b_.CreateSelect(seen,
                              b_.CreateIntrinsic(llvm::Intrinsic::fma, {f32_},
                                                 {load_f32(row_max_, r), fconst(std::numbers::ln2), emit_log(b_, sum)}),
                              fconst(-INFINITY));
          store_f32(lse, lse_out, row_offset(r, field(kLseRs, i64_), field(kLseHs, i64_)));
        },
        "lse");
  }

  const CpuAttentionSpec& spec_;
  const AttentionSignature& sig_;
  const CpuAttentionConfig& cfg_;
  const int nr_;
  const std::int64_t dqk_, dv_, dv_padded_;
  const bool bf16_;     // Q, K, V and O hold bf16 (widened as packed or read in place; scores and sums stay f32)
  const bool grouped_;  // bf16 products on vdpbf16ps from K and V packed in pairs (CpuAttentionConfig::grouped)
  const bool amx_;      // grouped_ products on AMX tiles (CpuAttentionConfig::amx)
  const std::int64_t dqk_packed_;  // the head dimension of packed Q and K slivers (padded to 32 on AMX)
  llvm::StructType *args_ty_ = nullptr, *mod_tensor_ty_ = nullptr;
  llvm::Value* args_ = nullptr;
  llvm::Value *q_pack_ = nullptr, *k_pack_ = nullptr, *v_pack_ = nullptr, *scores_ = nullptr, *out_ = nullptr;
  llvm::Value *row_max_ = nullptr, *row_sum_ = nullptr, *row_rescale_ = nullptr;
  llvm::Value* q_row_at_ = nullptr;
  llvm::Value* p16_ = nullptr;  // grouped_: P rounded to bf16, block_q rows of block_kv  // in place: where each row of
                                // Q starts (row_offset), computed once
  llvm::Value *rows_ = nullptr, *seq_kv_ = nullptr, *i0_ = nullptr, *batch_index_ = nullptr, *head_ = nullptr;
  llvm::Value *scale_ = nullptr, *tensors_ = nullptr, *scalars_ = nullptr, *diagonal_ = nullptr, *groups_ = nullptr;
  llvm::Value* kv_end_ = nullptr;
  llvm::Value* positions_ = nullptr;
  llvm::Value *k_block_ = nullptr, *v_block_ = nullptr;  // the current key block's packed K and V
  llvm::Value* v_depth_ = nullptr;                       // keys in each of its V slivers
  llvm::Value* kb_ = nullptr;                            // in place: the current key block's first key
};

}  // namespace

std::unique_ptr<llvm::Module> emit_attention_llvm(const CpuAttentionSpec& spec, llvm::LLVMContext& context) {
  validate(spec.signature, spec.config, spec.target);
  return CpuAttentionEmitter(spec, context).emit();
}

CpuModuleSource cpu_module_source(const CpuAttentionSpec& spec) {
  validate(spec.signature, spec.config, spec.target);
  return {spec.name(), spec.hash(),
          [spec](llvm::LLVMContext& context) { return CpuAttentionEmitter(spec, context).emit(); }};
}

}  // namespace tessera
