// Tile products on AMX: 16-row tiles of A and B operands (a packed sliver or a matrix in place) multiplied into f32
// (tdpbf16ps) or exact i32 (tdpb[su][su]d) accumulator tiles, which start from zeros or memory and end in memory (an
// earlier K slab's sums, the next slab's, the epilogue's), so that every tile has the one shape 16 rows × 64 bytes:
// the tile configuration is a constant, loaded once per function that uses it, not once per tile.
// The same code emits either the AMX instructions or, for hosts without AMX, the instructions' effect in vector
// code (each tile a 1 KiB stack buffer): the second checks the tiling, addressing and edges of the first wherever the
// tests run (bit for bit on integer-valued inputs; on other bf16 values the hardware's order of a step's sums may
// differ in the last bit).
#pragma once

#include <vector>

#include "generator/llvm/register_tile.hpp"

namespace tessera {

class AmxTiles : protected RegisterTiles {
 protected:
  using RegisterTiles::RegisterTiles;

  static constexpr int kTileRows = 16;   // rows of every tile (A, B's groups, the accumulators)
  static constexpr int kTileBytes = 64;  // bytes of every tile row: 16 f32 / i32 sums, 32 bf16 or 64 int8 K steps

  // Packs `rows` (1..mr) rows of a row-major A (the first at `a`, `stride` bytes apart) over `kc_bytes` bytes of K
  // into the sliver the tile products read: per 64-byte block of K, mr / 16 tiles of 16 rows × 64 bytes, one after
  // the other (amx_sliver). Rows past `rows` repeat the last one (their sums are never stored); K past kc_bytes is
  // zeros up to a whole block, and no byte past it is read; kc_bytes = 0 still writes one block of zeros. Returns
  // the blocks (≥ 1).
  llvm::Value* pack_a_tiles(llvm::Value* a, llvm::Value* stride, llvm::Value* rows, llvm::Value* kc_bytes, int mr,
                            llvm::Value* dst);
  // The same from the rows' first bytes, one pointer per row of the sliver (rows not evenly spaced: attention's Q).
  llvm::Value* pack_a_tiles(const std::vector<llvm::Value*>& row_starts, llvm::Value* kc_bytes, llvm::Value* dst);

  // Where a product's A or B tiles lie: tile t of K block q at base + q·block_bytes + t·tile_bytes, its 16 rows
  // `stride` bytes apart. A's tiles are 16 rows × 64 bytes of K, B's 16 groups of K × 16 columns.
  struct AmxOperand {
    llvm::Value* base = nullptr;
    llvm::Value* stride = nullptr;
    std::int64_t block_bytes = 0, tile_bytes = 0;
  };
  // A sliver of pack_a_tiles for mr rows.
  AmxOperand amx_sliver(llvm::Value* base, int mr);
  // A packed B sliver of nr columns in groups (emit_pack_groups_*: G·nr elements per group row, 16 group rows per
  // block), of `inputs`' element type.
  AmxOperand amx_group_sliver(llvm::Value* base, int nr, DotInputs inputs);

  // C(mr×nr) = c_in + A · B over `blocks` 64-byte blocks of K, stored at c_out. C holds mr rows of nr sums (i32 for
  // bytes, f32 for BF16), c_stride bytes apart; c_in null starts from zeros.
  struct AmxProduct {
    AmxOperand a, b;
    llvm::Value* blocks = nullptr;  // i64, ≥ 1
    llvm::Value* c_in = nullptr;
    llvm::Value* c_out = nullptr;
    std::int64_t c_stride = 0;
    int mr = 0, nr = 0;
    DotInputs inputs = DotInputs::U8I8;
    bool emulated = false;
  };
  void amx_product(const AmxProduct& p);

 private:
  using Tile = llvm::Value*;  // native: a <256 x i32> value; emulated: the address of the tile's 1 KiB
  Tile tile_zero(bool emulated);
  // 16 rows of 64 bytes from `base`, `stride` bytes apart.
  Tile tile_load(llvm::Value* base, llvm::Value* stride, bool emulated);
  Tile tile_multiply_add(DotInputs inputs, Tile c, Tile a, Tile b, bool emulated);
  void tile_store(Tile t, llvm::Value* base, llvm::Value* stride, bool emulated);
  llvm::Value* tile_buffer(const char* name);
};

}  // namespace tessera
