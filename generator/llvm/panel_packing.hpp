// Packing a strided block of a matrix into contiguous, zero-padded slivers of R rows (dst[s·R·depth + p·R + r]), the
// layout register-tiled micro-kernels read: by rows, by gathered columns, or through in-register transposes where
// the source's columns are contiguous. GEMM packs A and B with it; any kernel that streams an operand through a
// register tile (attention's K and V, a block-sparse operand) can.
#pragma once

#include <string>
#include <vector>

#include "generator/llvm/ir_kit.hpp"

namespace tessera {

class PanelPacking : protected IrKit {
 protected:
  using IrKit::IrKit;

  // A pack function's source: element (r, p) of the block at (r0 + r)·rs + col_offset(p).
  struct PackArgs {
    llvm::Value *src, *r0, *c0, *nrows, *rs, *col_offset;
    bool bf16 = false;  // the source holds bf16, widened to f32 as it is packed
  };

  // Packs an nrows×depth block (element (r, p) at (r0 + r)·rs + (c0 + p)·cs) into slivers of R rows:
  // dst[s·R·depth + p·R + r], zero-filled past nrows, so the micro-kernel never tests edges.
  // A bf16 source (`bf16_source`) is widened to f32 on the way: the panels, and every kernel reading them, are f32.
  llvm::Function* emit_pack(const std::string& name, int R, bool unit_row_stride, bool cs_is_one = false,
                            bool bf16_source = false);

  // Panels whose K steps come in groups of G (a bf16 pair, four int8 bytes: what vdpbf16ps and vpdpbusd multiply per
  // 32-bit lane). Per group q of G K steps and sliver of R columns, each 32-bit word holds the G elements of one
  // column: dst[s·R·depthG + q·G·R + G·n + i] = source(k0 + Gq + i, n0 + sR + n), zero past ncols and past depth
  // (depthG: depth rounded up to whole groups, grouped_depth).
  struct GroupPackArgs {
    llvm::Value *src = nullptr, *n0 = nullptr, *k0 = nullptr, *ncols = nullptr, *depth = nullptr, *ld = nullptr;
    llvm::Value* dst = nullptr;
    llvm::Type* element = nullptr;  // i16 (bf16) or i8
    int R = 0, G = 2;
    // K steps the panel's depth is padded to, with zero groups (0: G); a power of two. AMX tiles read 64 bytes of K.
    int depth_multiple = 0;
    int padded_to() const { return depth_multiple ? depth_multiple : G; }
  };
  // The source's K steps are rows: element (k, n) at k·ld + n (GEMM's row-major B, attention's V).
  void emit_pack_groups_from_rows(const GroupPackArgs& a);
  // One sliver of one group at the edges (columns past ncols, K past depth): masked loads of one vector's columns.
  void emit_group_sliver_edge(const GroupPackArgs& a, llvm::Value* k, const std::vector<llvm::Value*>& has_row,
                              llvm::Value* first_col, llvm::Value* out);
  // The source's K steps run along columns: element (k, n) at n·ld + k (nn.Linear's weight, attention's K). Per block
  // of `lanes` groups and 8 columns: one vector load per column (K past depth masked off, so nothing past the source is
  // read), the 8 rows of words transposed in registers, each group's 8 words stored into its row of the sliver.
  void emit_pack_groups_from_columns(const GroupPackArgs& a);
  // `depth` K steps rounded up to whole groups of G.
  llvm::Value* grouped_depth(llvm::Value* depth, int G);
  // Interleaves equal vectors element by element (r0[0], r1[0], ..., r0[1], r1[1], ...): pairs of vectors at a time,
  // each level's pairs taken as elements twice as wide by the next.
  llvm::Value* interleave_rows(std::vector<llvm::Value*> rows);
  // interleave_rows of 2 or 4 rows whose length is whole 128-bit lanes, in lane-wise unpacks.
  llvm::Value* interleave_rows_by_lanes(const std::vector<llvm::Value*>& rows);

  // R rows × `lanes_` columns (from depth p) of a source with unit column stride, transposed in registers into
  // the sliver: per chunk of at most `lanes_` rows, one vector load per row and one shuffle; rows past nrows read
  // as zeros. A chunk that is the whole sliver is stored in one piece, else one piece per column.
  void emit_pack_transposed(const PackArgs& a, int R, llvm::Value* first_row, llvm::Value* p, llvm::Value* dst);

  // Copies R consecutive rows of one column into dst, zero past nrows. Contiguous slivers move in pieces of one
  // vector register (a <96 x float> masked load would be scalarised); strided ones are gathered.
  void emit_pack_sliver(const PackArgs& a, int R, bool unit_row_stride, llvm::Value* first_row, llvm::Value* dst);

  // `type` (<n x float>) values of the source at element `offset`, or at the per-lane `offsets` (a gather), lanes off
  // in `mask` zero; a bf16 source is read as 16-bit values and widened.
  llvm::Value* load_source(const PackArgs& a, llvm::FixedVectorType* type, llvm::Value* offset, llvm::Value* mask);
  llvm::Value* gather_source(const PackArgs& a, llvm::FixedVectorType* type, llvm::Value* offsets, llvm::Value* mask);
};

}  // namespace tessera
