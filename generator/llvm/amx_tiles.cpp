#include "generator/llvm/amx_tiles.hpp"

#include <llvm/IR/IntrinsicsX86.h>

namespace tessera {

namespace {
constexpr int kTileRows = 16;   // rows of every tile (A, B's groups, the accumulators)
constexpr int kTileBytes = 64;  // bytes of every tile row: 16 f32 / i32 sums, 32 bf16 or 64 int8 K steps
}  // namespace

llvm::Value* AmxTiles::tile_buffer(const char* name) {
  llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
  llvm::IRBuilder<> at_entry(&entry, entry.begin());
  auto* buffer = at_entry.CreateAlloca(b_.getInt8Ty(), i64c(kTileRows * kTileBytes), name);
  buffer->setAlignment(llvm::Align(64));
  return buffer;
}

// Native tiles travel between the AMX intrinsics as <256 x i32> values, as Clang's __tile1024i does: LLVM's AMX
// lowering folds the casts away and keeps loop-carried accumulators in tile registers.
AmxTiles::Tile AmxTiles::tile_zero(llvm::Value* rows16, bool emulated) {
  if (emulated) {
    llvm::Value* buffer = tile_buffer("tile.c");
    b_.CreateMemSet(buffer, b_.getInt8(0), kTileRows * kTileBytes, llvm::MaybeAlign(64));
    return buffer;
  }
  llvm::Value* tile = b_.CreateIntrinsic(llvm::Intrinsic::x86_tilezero_internal, {}, {rows16, b_.getInt16(kTileBytes)});
  auto* vec = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
  return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {vec}, {tile});
}

AmxTiles::Tile AmxTiles::tile_load(llvm::Value* rows16, llvm::Value* base, llvm::Value* stride, bool emulated) {
  if (emulated) {
    // tileloadd: rows16 rows of 64 bytes; the rows past them read as zeros.
    llvm::Value* buffer = tile_buffer("tile.in");
    b_.CreateMemSet(buffer, b_.getInt8(0), kTileRows * kTileBytes, llvm::MaybeAlign(64));
    auto* row_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), kTileBytes);
    emit_for(
        b_, i64c(0), b_.CreateZExt(rows16, i64_), i64c(1),
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

AmxTiles::Tile AmxTiles::tile_multiply_add(DotInputs inputs, Tile c, Tile a, Tile b, llvm::Value* rows16,
                                           bool emulated) {
  const bool int8 = inputs == DotInputs::U8I8;
  if (!emulated) {
    const auto to_tile = [&](llvm::Value* v) {
      return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_vector_to_tile, {v->getType()}, {v});
    };
    // Shapes in bytes: M rows of C and A, N bytes of C's rows, K bytes of A's rows.
    llvm::Value* sum = b_.CreateIntrinsic(
        int8 ? llvm::Intrinsic::x86_tdpbusd_internal : llvm::Intrinsic::x86_tdpbf16ps_internal, {},
        {rows16, b_.getInt16(kTileBytes), b_.getInt16(kTileBytes), to_tile(c), to_tile(a), to_tile(b)});
    return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {c->getType()}, {sum});
  }
  // The instructions' definition (Intel SDM, TDPBUSD / TDPBF16PS), row m of C over the 16 groups of A's row m:
  // int8: c[n] += Σ_i u8(a[m][4k+i]) · s8(b[k][4n+i]) in wrapping i32; bf16: c[n] += a[m][2k]·b[k][2n], then
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
      b_, i64c(0), b_.CreateZExt(rows16, i64_), i64c(1),
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
                llvm::Value* a4 = b_.CreateZExt(b_.CreateAlignedLoad(a_ty, a_group_ptr, llvm::Align(4)),
                                                llvm::FixedVectorType::get(b_.getInt32Ty(), 4));
                llvm::Value* b_row = b_.CreateSExt(b_.CreateAlignedLoad(b_ty, b_row_ptr, llvm::Align(64)), wide);
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

void AmxTiles::tile_store(Tile t, llvm::Value* rows16, llvm::Value* base, llvm::Value* stride, bool emulated) {
  if (emulated) {
    auto* row_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), kTileBytes);
    emit_for(
        b_, i64c(0), b_.CreateZExt(rows16, i64_), i64c(1),
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

LoopValues AmxTiles::amx_k_loop(const AmxProduct& p) {
  const bool int8 = p.inputs == DotInputs::U8I8;
  const int G = int8 ? 4 : 2, element_bytes = int8 ? 1 : 2, block_k = kTileBytes / element_bytes;
  const int T = static_cast<int>(p.a_tiles.size()), J = p.nr / kTileRows, nv = p.nr / lanes_;
  const auto bytes = [&](llvm::Value* base, llvm::Value* offset) { return b_.CreateGEP(b_.getInt8Ty(), base, offset); };
  std::vector<llvm::Value*> rows16;  // rows of A tile t (and of its accumulators): clamp(rows - 16t, 1, 16)
  for (int t = 0; t < T; ++t)
    rows16.push_back(b_.CreateTrunc(smax(smin(b_.CreateSub(p.rows, i64c(kTileRows * t)), i64c(kTileRows)), i64c(1)),
                                    b_.getInt16Ty()));
  const std::int64_t b_row_bytes = std::int64_t{G} * p.nr * element_bytes;  // one group of the sliver
  llvm::Value* b_stride = i64c(b_row_bytes);
  const auto multiply = [&](LoopValues acc, const std::vector<Tile>& a, const std::vector<Tile>& b) {
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < J; ++j) {
        auto& c = acc[static_cast<std::size_t>(t * J + j)];
        c = tile_multiply_add(p.inputs, c, a[static_cast<std::size_t>(t)], b[static_cast<std::size_t>(j)],
                              rows16[static_cast<std::size_t>(t)], p.emulated);
      }
    return acc;
  };
  // The last K < 64 bytes: A's rows copied into zeroed 16×64 buffers first (nothing read past kc, so a partial group
  // reads no more of A than the vector kernels do); the panel holds zeros past kc.
  llvm::Value* blocks = b_.CreateLShr(p.kc, i64c(block_k == 64 ? 6 : 5));
  llvm::Value* tail = b_.CreateSub(p.kc, b_.CreateMul(blocks, i64c(block_k)));
  std::vector<llvm::Value*> a_tail;
  for (int t = 0; t < T; ++t) a_tail.push_back(tile_buffer("tile.a.tail"));
  emit_if_else(
      b_, b_.CreateICmpSGT(tail, i64c(0)),
      [&] {
        auto* row_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), kTileBytes);
        llvm::Value* within = lane_mask(kTileBytes, b_.CreateMul(tail, i64c(element_bytes)));
        for (int t = 0; t < T; ++t) {
          llvm::Value* last_row = b_.CreateSub(b_.CreateZExt(rows16[static_cast<std::size_t>(t)], i64_), i64c(1));
          for (int r = 0; r < kTileRows; ++r) {
            llvm::Value* row = b_.CreateMul(smin(i64c(r), last_row), p.a_stride);
            llvm::Value* src = bytes(p.a_tiles[static_cast<std::size_t>(t)],
                                     b_.CreateAdd(row, b_.CreateMul(blocks, i64c(kTileBytes))));
            llvm::Value* values =
                b_.CreateMaskedLoad(row_ty, src, llvm::Align(1), within, llvm::Constant::getNullValue(row_ty));
            b_.CreateAlignedStore(values,
                                  bytes(a_tail[static_cast<std::size_t>(t)], i64c(std::int64_t{r} * kTileBytes)),
                                  llvm::Align(64));
          }
        }
      },
      [&] {
        for (llvm::Value* buffer : a_tail)
          b_.CreateMemSet(buffer, b_.getInt8(0), kTileRows * kTileBytes, llvm::MaybeAlign(64));
      },
      "amx.a.tail");
  // The B tiles of block q: 16 groups, columns 16j..16j+15 (64 bytes of each group row). K = 0 (a GEMM of no
  // depth) still runs one block: of zeros, B's too (its panel is empty).
  llvm::Value* empty = b_.CreateICmpEQ(p.kc, i64c(0));
  const auto b_tiles = [&](llvm::Value* q) {
    std::vector<Tile> tiles;
    llvm::Value* block = bytes(p.bp, b_.CreateMul(q, i64c(kTileRows * b_row_bytes)));
    for (int j = 0; j < J; ++j)
      tiles.push_back(tile_load(b_.getInt16(kTileRows),
                                b_.CreateSelect(empty, a_tail[0], bytes(block, i64c(std::int64_t{j} * kTileBytes))),
                                b_.CreateSelect(empty, i64c(kTileBytes), b_stride), p.emulated));
    return tiles;
  };

  // One loop over the blocks and the tail block (at least one trip), without a guard: the accumulators are the
  // only values it carries, and a loop of that plain shape keeps them in tile registers (behind a zero-trip guard,
  // LLVM's AMX lowering passed them through memory and ran out of tile registers for 32×32).
  llvm::Value* trips = smax(b_.CreateAdd(blocks, b_.CreateZExt(b_.CreateICmpSGT(tail, i64c(0)), i64_)), i64c(1));
  LoopValues init;
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < J; ++j) init.push_back(tile_zero(rows16[static_cast<std::size_t>(t)], p.emulated));
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
  llvm::Value* in_place = b_.CreateICmpSLT(q, blocks);
  std::vector<Tile> a;
  for (int t = 0; t < T; ++t) {
    llvm::Value* base =
        b_.CreateSelect(in_place, bytes(p.a_tiles[static_cast<std::size_t>(t)], b_.CreateMul(q, i64c(kTileBytes))),
                        a_tail[static_cast<std::size_t>(t)]);
    a.push_back(tile_load(rows16[static_cast<std::size_t>(t)], base,
                          b_.CreateSelect(in_place, p.a_stride, i64c(kTileBytes)), p.emulated));
  }
  acc = multiply(acc, a, b_tiles(q));
  llvm::Value* next = b_.CreateAdd(q, i64c(1));
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  q->addIncoming(next, latch);
  for (std::size_t i = 0; i < acc.size(); ++i) carried[i]->addIncoming(acc[i], latch);
  b_.CreateCondBr(b_.CreateICmpSLT(next, trips), body, after);
  b_.SetInsertPoint(after);

  // The accumulator tiles stored as the register tile's rows, and read back as its vectors.
  llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
  llvm::IRBuilder<> at_entry(&entry, entry.begin());
  auto* sums = at_entry.CreateAlloca(b_.getInt8Ty(), i64c(std::int64_t{T} * kTileRows * p.nr * 4), "amx.sums");
  sums->setAlignment(llvm::Align(64));
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < J; ++j)
      tile_store(acc[static_cast<std::size_t>(t * J + j)], rows16[static_cast<std::size_t>(t)],
                 bytes(sums, i64c((std::int64_t{t} * kTileRows * p.nr + std::int64_t{j} * kTileRows) * 4)),
                 i64c(std::int64_t{p.nr} * 4), p.emulated);
  auto* vec = llvm::FixedVectorType::get(int8 ? b_.getInt32Ty() : f32_, static_cast<unsigned>(lanes_));
  LoopValues vectors;
  for (int r = 0; r < T * kTileRows; ++r)
    for (int v = 0; v < nv; ++v)
      vectors.push_back(b_.CreateAlignedLoad(
          vec, bytes(sums, i64c((std::int64_t{r} * p.nr + std::int64_t{v} * lanes_) * 4)), llvm::Align(64)));
  return vectors;
}

}  // namespace tessera
