// Tile products on AMX: 16-row tiles of A and of a packed B panel multiplied into f32 (tdpbf16ps) or exact i32
// (tdpbusd) accumulator tiles, which are stored once per K slab as the vector accumulators of a register tile, so
// that everything after the K loop (partial sums, epilogue, D's stores) is what the vector tiles already have.
// The same loop emits either the AMX instructions or, for hosts without AMX, the instructions' effect in vector
// code (each tile a 1 KiB stack buffer): the second checks the tiling, addressing and edges of the first, bit for
// bit, wherever the tests run.
#pragma once

#include <vector>

#include "generator/llvm/register_tile.hpp"

namespace tessera {

class AmxTiles : protected RegisterTiles {
 protected:
  using RegisterTiles::RegisterTiles;

  // An MR×NR tile (MR = 16·a_tiles.size(), NR = 16·B tiles) of D over K = [0, kc): A read in place, B from its
  // packed panel in groups of G (emit_pack_groups_*: G·nr elements per group row) with the panel's depth padded to
  // whole tile blocks of 64 bytes of K (zeros past kc).
  struct AmxProduct {
    std::vector<llvm::Value*> a_tiles;  // per A tile: its first row in A (i64 rows past the edge clamped inside A)
    llvm::Value* rows = nullptr;        // i64 rows of the tile that are real (1..MR)
    llvm::Value* a_stride = nullptr;    // i64 bytes between A's rows
    llvm::Value* bp = nullptr;          // the packed B sliver
    int nr = 0;
    llvm::Value* kc = nullptr;  // i64 K steps
    DotInputs inputs = DotInputs::U8I8;
    bool emulated = false;
  };
  // The products' accumulators as vectors: acc[r·NR/lanes + v], i32 (U8I8) or f32 (BF16). Rows past `rows` hold
  // whatever the clamped rows gave.
  LoopValues amx_k_loop(const AmxProduct& p);

 private:
  using Tile = llvm::Value*;  // native: a <256 x i32> value; emulated: the address of the tile's 1 KiB
  Tile tile_zero(llvm::Value* rows16, bool emulated);
  // rows16 rows of 64 bytes from `base`, `stride` bytes apart.
  Tile tile_load(llvm::Value* rows16, llvm::Value* base, llvm::Value* stride, bool emulated);
  Tile tile_multiply_add(DotInputs inputs, Tile c, Tile a, Tile b, llvm::Value* rows16, bool emulated);
  void tile_store(Tile t, llvm::Value* rows16, llvm::Value* base, llvm::Value* stride, bool emulated);
  llvm::Value* tile_buffer(const char* name);
};

}  // namespace tessera
