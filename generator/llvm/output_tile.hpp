// An output tile stored through a GEMM epilogue: an accumulator tile of mr rows × nv vectors, its epilogue evaluated
// per row vector with C and the epilogue's tensors loaded at the coordinates their layouts give, D stored with edge
// masks (by rows, or by columns through an in-register transpose when D is column-major). Every kernel whose output
// is a GEMM-shaped D composes it: GEMM's micro-kernels and the sparse SpMM kernel.
#pragma once

#include <vector>

#include "generator/gemm/gemm_problem.hpp"
#include "generator/llvm/amx_tiles.hpp"

namespace tessera {

// The epilogue's operands as the kernel has loaded them.
struct EpilogueOperands {
  TensorFields c, d;
  std::vector<TensorFields> inputs;  // in the signature's inputs order
  llvm::Value* alpha;                // vectors of alpha and beta (beta may be the constant 0 where C folds away)
  llvm::Value* beta;
};

class OutputTiles : protected AmxTiles {
 protected:
  using AmxTiles::AmxTiles;

  // Stores acc (mr rows of acc.size() / mr vectors, row-major) at (row0, col0) of batch `batch` of D through the
  // signature's epilogue; only the first `rows` × `cols` of the tile are real. The first `whole_vectors` vectors of
  // each row are known to lie within `cols`: they are stored without masks or a store per count of lanes left.
  void store_output_tile(const GemmSignature& sig, const EpilogueOperands& ops, const LoopValues& acc, int mr,
                         llvm::Value* row0, llvm::Value* col0, llvm::Value* rows, llvm::Value* cols, llvm::Value* batch,
                         int whole_vectors = 0);

 private:
  // D's element type, and f32 values converted to it: bf16 rounded to nearest even (NaN kept), or u8 / i8 rounded to
  // the nearest integer (ties to even) and saturated (NaN to the lowest value) — a requantised output.
  llvm::Type* d_element(const GemmSignature& sig);
  llvm::Value* to_d_type(const GemmSignature& sig, llvm::Value* value);
};

}  // namespace tessera
