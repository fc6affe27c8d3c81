#include "generator/llvm/amx_tiles.hpp"

#include <llvm/IR/IntrinsicsX86.h>

namespace tessera {

llvm::Value* AmxTiles::tile_buffer(const char* name) {
  llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
  llvm::IRBuilder<> at_entry(&entry, entry.begin());
  auto* buffer = at_entry.CreateAlloca(b_.getInt8Ty(), i64c(kTileRows * kTileBytes), name);
  buffer->setAlignment(llvm::Align(64));
  return buffer;
}

// Native tiles travel between the AMX intrinsics as <256 x i32> values, as Clang's __tile1024i does: LLVM's AMX
// lowering folds the casts away and keeps loop-carried accumulators in tile registers.
AmxTiles::Tile AmxTiles::tile_zero(bool emulated) {
  if (emulated) {
    llvm::Value* buffer = tile_buffer("tile.c");
    b_.CreateMemSet(buffer, b_.getInt8(0), kTileRows * kTileBytes, llvm::MaybeAlign(64));
    return buffer;
  }
  llvm::Value* tile =
      b_.CreateIntrinsic(llvm::Intrinsic::x86_tilezero_internal, {}, {b_.getInt16(kTileRows), b_.getInt16(kTileBytes)});
  auto* vec = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
  return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {vec}, {tile});
}

AmxTiles::Tile AmxTiles::tile_load(llvm::Value* base, llvm::Value* stride, bool emulated) {
  llvm::Value* rows16 = b_.getInt16(kTileRows);
  if (emulated) {
    llvm::Value* buffer = tile_buffer("tile.in");
    auto* row_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), kTileBytes);
    emit_for(
        b_, i64c(0), i64c(kTileRows), i64c(1),
        [&](llvm::Value* r) {
          llvm::Value* row =
              b_.CreateAlignedLoad(row_ty, b_.CreateGEP(b_.getInt8Ty(), base, b_.CreateMul(r, stride)), llvm::Align(1));
          b_.CreateAlignedStore(row, b_.CreateGEP(b_.getInt8Ty(), buffer, b_.CreateMul(r, i64c(kTileBytes))),
                                llvm::Align(64));
        },
        "tile.load");
    return buffer;
  }
  llvm::Value* tile = b_.CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64_internal, {},
                                         {rows16, b_.getInt16(kTileBytes), base, stride});
  auto* vec = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
  return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {vec}, {tile});
}

AmxTiles::Tile AmxTiles::tile_multiply_add(DotInputs inputs, Tile c, Tile a, Tile b, bool emulated) {
  llvm::Value* rows16 = b_.getInt16(kTileRows);
  const bool int8 = byte_inputs(inputs);
  if (!emulated) {
    const auto to_tile = [&](llvm::Value* v) {
      return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_vector_to_tile, {v->getType()}, {v});
    };
    // Shapes in bytes: M rows of C and A, N bytes of C's rows, K bytes of A's rows.
    const llvm::Intrinsic::ID product = inputs == DotInputs::U8I8   ? llvm::Intrinsic::x86_tdpbusd_internal
                                        : inputs == DotInputs::I8U8 ? llvm::Intrinsic::x86_tdpbsud_internal
                                        : inputs == DotInputs::I8I8 ? llvm::Intrinsic::x86_tdpbssd_internal
                                        : inputs == DotInputs::U8U8 ? llvm::Intrinsic::x86_tdpbuud_internal
                                                                    : llvm::Intrinsic::x86_tdpbf16ps_internal;
    llvm::Value* sum = b_.CreateIntrinsic(
        product, {}, {rows16, b_.getInt16(kTileBytes), b_.getInt16(kTileBytes), to_tile(c), to_tile(a), to_tile(b)});
    return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {c->getType()}, {sum});
  }
  // The instructions' definition (Intel SDM, TDPB[SU][SU]D / TDPBF16PS), row m of C over the 16 groups of A's row m:
  // int8: c[n] += Σ_i a[m][4k+i] · b[k][4n+i], each byte signed or not as the instruction says, in wrapping i32; bf16:
  // c[n] += a[m][2k]·b[k][2n], then
  // += a[m][2k+1]·b[k][2n+1] (each product exact in f32, each sum rounded).
  const int G = int8 ? 4 : 2;
  llvm::Type* sum_elem = int8 ? b_.getInt32Ty() : f32_;
  auto* sums_ty = llvm::FixedVectorType::get(sum_elem, kTileBytes / 4);
  const int products = kTileBytes / (int8 ? 1 : 2);  // elements of a B row: 64 bytes or 32 bf16
  const auto pick = [&](llvm::Value* v, int first, int step, int count) {
    std::vector<int> order;
    for (int i = 0; i < count; ++i) order.push_back(first + i * step);
    return b_.CreateShuffleVector(v, order);
  };
  emit_for(
      b_, i64c(0), i64c(kTileRows), i64c(1),
      [&](llvm::Value* m) {
        llvm::Value* c_row_ptr = b_.CreateGEP(b_.getInt8Ty(), c, b_.CreateMul(m, i64c(kTileBytes)));
        llvm::Value* a_row_ptr = b_.CreateGEP(b_.getInt8Ty(), a, b_.CreateMul(m, i64c(kTileBytes)));
        LoopValues row = {b_.CreateAlignedLoad(sums_ty, c_row_ptr, llvm::Align(64))};
        row = emit_for(
            b_, i64c(0), i64c(kTileRows), i64c(1), row,
            [&](llvm::Value* k, const LoopValues& carried) {
              llvm::Value* a_group_ptr = b_.CreateGEP(b_.getInt8Ty(), a_row_ptr, b_.CreateMul(k, i64c(4)));
              llvm::Value* b_row_ptr = b_.CreateGEP(b_.getInt8Ty(), b, b_.CreateMul(k, i64c(kTileBytes)));
              llvm::Value* sum = carried[0];
              if (int8) {
                auto* a_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), 4);
                auto* b_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), products);
                auto* wide = llvm::FixedVectorType::get(b_.getInt32Ty(), products);
                const bool a_signed = inputs == DotInputs::I8U8 || inputs == DotInputs::I8I8;
                const bool b_signed = inputs == DotInputs::U8I8 || inputs == DotInputs::I8I8;
                const auto extend = [&](llvm::Value* v, llvm::Type* t, bool is_signed) {
                  return is_signed ? b_.CreateSExt(v, t) : b_.CreateZExt(v, t);
                };
                llvm::Value* a4 = extend(b_.CreateAlignedLoad(a_ty, a_group_ptr, llvm::Align(4)),
                                         llvm::FixedVectorType::get(b_.getInt32Ty(), 4), a_signed);
                llvm::Value* b_row = extend(b_.CreateAlignedLoad(b_ty, b_row_ptr, llvm::Align(64)), wide, b_signed);
                std::vector<int> repeat;  // A's group against each column's group
                for (int i = 0; i < products; ++i) repeat.push_back(i % 4);
                llvm::Value* prod = b_.CreateMul(b_.CreateShuffleVector(a4, repeat), b_row);
                for (int i = 0; i < G; ++i) sum = b_.CreateAdd(sum, pick(prod, i, G, products / G));
              } else {
                auto* a_ty = llvm::FixedVectorType::get(b_.getInt16Ty(), 2);
                auto* b_ty = llvm::FixedVectorType::get(b_.getInt16Ty(), products);
                llvm::Value* a2 = widen_bf16(b_.CreateAlignedLoad(a_ty, a_group_ptr, llvm::Align(4)));
                llvm::Value* b_row = widen_bf16(b_.CreateAlignedLoad(b_ty, b_row_ptr, llvm::Align(64)));
                std::vector<int> repeat;
                for (int i = 0; i < products; ++i) repeat.push_back(i % 2);
                llvm::Value* prod = b_.CreateFMul(b_.CreateShuffleVector(a2, repeat), b_row);
                for (int i = 0; i < G; ++i) sum = b_.CreateFAdd(sum, pick(prod, i, G, products / G));
              }
              return LoopValues{sum};
            },
            "tile.k");
        b_.CreateAlignedStore(row[0], c_row_ptr, llvm::Align(64));
      },
      "tile.m");
  return c;
}

void AmxTiles::tile_store(Tile t, llvm::Value* base, llvm::Value* stride, bool emulated) {
  llvm::Value* rows16 = b_.getInt16(kTileRows);
  if (emulated) {
    auto* row_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), kTileBytes);
    emit_for(
        b_, i64c(0), i64c(kTileRows), i64c(1),
        [&](llvm::Value* r) {
          llvm::Value* row = b_.CreateAlignedLoad(
              row_ty, b_.CreateGEP(b_.getInt8Ty(), t, b_.CreateMul(r, i64c(kTileBytes))), llvm::Align(64));
          b_.CreateAlignedStore(row, b_.CreateGEP(b_.getInt8Ty(), base, b_.CreateMul(r, stride)), llvm::Align(1));
        },
        "tile.store");
    return;
  }
  llvm::Value* tile = b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_vector_to_tile, {t->getType()}, {t});
  b_.CreateIntrinsic(llvm::Intrinsic::x86_tilestored64_internal, {},
                     {rows16, b_.getInt16(kTileBytes), base, stride, tile});
}

llvm::Value* AmxTiles::pack_a_tiles(llvm::Value* a, llvm::Value* stride, llvm::Value* rows, llvm::Value* kc_bytes,
                                    int mr, llvm::Value* dst) {
  std::vector<llvm::Value*> sources;
  llvm::Value* last_row = b_.CreateSub(rows, i64c(1));
  for (int r = 0; r < mr; ++r)
    sources.push_back(b_.CreateGEP(b_.getInt8Ty(), a, b_.CreateMul(smin(i64c(r), last_row), stride)));
  return pack_a_tiles(sources, kc_bytes, dst);
}

llvm::Value* AmxTiles::pack_a_tiles(const std::vector<llvm::Value*>& sources, llvm::Value* kc_bytes, llvm::Value* dst) {
  const int mr = static_cast<int>(sources.size()), T = mr / kTileRows;
  auto* row_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), kTileBytes);
  // Block q's row r at dst + ((q·T + r / 16)·16 + r % 16)·64 = dst + q·T·1024 + r·64.
  const auto copy_block = [&](llvm::Value* q, llvm::Value* mask) {
    llvm::Value* offset = b_.CreateMul(q, i64c(kTileBytes));
    llvm::Value* out =
        b_.CreateGEP(b_.getInt8Ty(), dst, b_.CreateMul(q, i64c(std::int64_t{T} * kTileRows * kTileBytes)));
    for (int r = 0; r < mr; ++r) {
      llvm::Value* src = b_.CreateGEP(b_.getInt8Ty(), sources[static_cast<std::size_t>(r)], offset);
      llvm::Value* row = mask ? static_cast<llvm::Value*>(b_.CreateMaskedLoad(row_ty, src, llvm::Align(1), mask,
                                                                              llvm::Constant::getNullValue(row_ty)))
                              : b_.CreateAlignedLoad(row_ty, src, llvm::Align(1));
      b_.CreateAlignedStore(row, b_.CreateGEP(b_.getInt8Ty(), out, i64c(std::int64_t{r} * kTileBytes)),
                            llvm::Align(64));
    }
  };
  llvm::Value* full = b_.CreateLShr(kc_bytes, i64c(6));
  llvm::Value* tail = b_.CreateAnd(kc_bytes, i64c(kTileBytes - 1));
  emit_for(
      b_, i64c(0), full, i64c(1), [&](llvm::Value* q) { copy_block(q, nullptr); }, "pack.a.tiles");
  // The last partial block, or the one block of zeros of an empty K.
  llvm::Value* partial = b_.CreateOr(b_.CreateICmpNE(tail, i64c(0)), b_.CreateICmpEQ(full, i64c(0)));
  emit_if(
      b_, partial, [&] { copy_block(full, lane_mask(kTileBytes, tail)); }, "pack.a.tail");
  return b_.CreateAdd(full, b_.CreateZExt(partial, i64_));
}

AmxTiles::AmxOperand AmxTiles::amx_sliver(llvm::Value* base, int mr) {
  return {base, i64c(kTileBytes), std::int64_t{mr} * kTileBytes, kTileRows * kTileBytes};
}

AmxTiles::AmxOperand AmxTiles::amx_group_sliver(llvm::Value* base, int nr, DotInputs inputs) {
  const bool int8 = byte_inputs(inputs);
  const std::int64_t row_bytes = std::int64_t{int8 ? 4 : 2} * nr * (int8 ? 1 : 2);  // one group row of the sliver
  return {base, i64c(row_bytes), kTileRows * row_bytes, kTileBytes};
}

void AmxTiles::amx_product(const AmxProduct& p) {
  const int T = p.mr / kTileRows, J = p.nr / kTileRows;
  const auto bytes = [&](llvm::Value* base, std::int64_t offset) {
    return b_.CreateGEP(b_.getInt8Ty(), base, i64c(offset));
  };
  llvm::Value* c_stride = i64c(p.c_stride);
  const auto c_tile = [&](llvm::Value* c, int t, int j) {
    return bytes(c, std::int64_t{t} * kTileRows * p.c_stride + std::int64_t{j} * kTileBytes);
  };
  LoopValues init;
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < J; ++j)
      init.push_back(p.c_in ? tile_load(c_tile(p.c_in, t, j), c_stride, p.emulated) : tile_zero(p.emulated));

  // One loop over the blocks (at least one trip), without a guard: the accumulators are the only values it carries,
  // and a loop of that plain shape keeps them in tile registers (behind a zero-trip guard, LLVM's AMX lowering
  // passed them through memory and ran out of tile registers for 32×32).
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* before = b_.GetInsertBlock();
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "amx.k", fn);
  llvm::BasicBlock* after = llvm::BasicBlock::Create(ctx_, "amx.k.end", fn);
  b_.CreateBr(body);
  b_.SetInsertPoint(body);
  llvm::PHINode* q = b_.CreatePHI(i64_, 2, "q");
  q->addIncoming(i64c(0), before);
  std::vector<llvm::PHINode*> carried;
  LoopValues acc;
  for (llvm::Value* v : init) {
    carried.push_back(b_.CreatePHI(v->getType(), 2));
    carried.back()->addIncoming(v, before);
    acc.push_back(carried.back());
  }
  const auto operand_block = [&](const AmxOperand& o) {
    return b_.CreateGEP(b_.getInt8Ty(), o.base, b_.CreateMul(q, i64c(o.block_bytes)));
  };
  llvm::Value* a_block = operand_block(p.a);
  llvm::Value* b_block = operand_block(p.b);
  std::vector<Tile> a, bt;
  for (int t = 0; t < T; ++t) a.push_back(tile_load(bytes(a_block, t * p.a.tile_bytes), p.a.stride, p.emulated));
  for (int j = 0; j < J; ++j) bt.push_back(tile_load(bytes(b_block, j * p.b.tile_bytes), p.b.stride, p.emulated));
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < J; ++j) {
      auto& c = acc[static_cast<std::size_t>(t * J + j)];
      c = tile_multiply_add(p.inputs, c, a[static_cast<std::size_t>(t)], bt[static_cast<std::size_t>(j)], p.emulated);
    }
  llvm::Value* next = b_.CreateAdd(q, i64c(1));
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  q->addIncoming(next, latch);
  for (std::size_t i = 0; i < acc.size(); ++i) carried[i]->addIncoming(acc[i], latch);
  b_.CreateCondBr(b_.CreateICmpSLT(next, p.blocks), body, after);
  b_.SetInsertPoint(after);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < J; ++j)
      tile_store(acc[static_cast<std::size_t>(t * J + j)], c_tile(p.c_out, t, j), c_stride, p.emulated);
}

}  // namespace tessera
