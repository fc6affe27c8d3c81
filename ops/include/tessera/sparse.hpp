// Sparse matrices and the sparse operations in tessera's public C++ API: SpMM (sparse × dense) and SDDMM (a dense
// product sampled at a sparse pattern), their arguments, the inspector that studies a pattern once, the compiled
// kernels, Matrix Market files and seeded pattern generators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "generator/core/epilogue.hpp"
#include "generator/sparse/cpu_sparse_spec.hpp"
#include "generator/sparse/sparse_problem.hpp"
#include "tessera/tensor.hpp"

namespace tessera {

// A CSR or BSR matrix as views of the caller's arrays (never owned). CSR is BSR with 1×1 blocks: row_offsets has
// one entry per block row plus one, col_indices one block column per stored entry, values block_rows·block_cols
// values per entry (row-major within a block). rows and cols count elements; a BSR matrix whose sides are not
// multiples of the block's has partial blocks at its edges, whose values past the edge are ignored. Column indices
// must be sorted and distinct within each row (SparseMatrixData sorts and sums when it builds one).
struct SparseMatrix {
  SparseFormat format = SparseFormat::Csr;
  std::int64_t rows = 0, cols = 0;
  int block_rows = 1, block_cols = 1;
  std::int64_t entries = 0;  // stored entries: non-zeros (CSR) or blocks (BSR)
  const void* row_offsets = nullptr;
  const void* col_indices = nullptr;
  const void* values = nullptr;
  int index_bits = 32;  // of row_offsets and col_indices: 32 or 64
  DType value = DType::f32;

  SparseSignature signature() const { return {format, block_rows, block_cols, index_bits, value}; }
  std::int64_t block_row_count() const { return (rows + block_rows - 1) / block_rows; }
  std::int64_t block_col_count() const { return (cols + block_cols - 1) / block_cols; }
};

// Coordinates and values: what a Matrix Market file or a generator describes, before a storage format is chosen.
struct CooMatrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> row, col;
  std::vector<double> value;
};

// A sparse matrix that owns its arrays.
class SparseMatrixData {
 public:
  // CSR from coordinates: duplicates summed, columns sorted. Throws InvalidArgument for a coordinate out of range.
  static SparseMatrixData csr(const CooMatrix& coo, int index_bits = 32, DType value = DType::f32);
  // BSR with block_rows × block_cols blocks: a block is stored where any of its coordinates is.
  static SparseMatrixData bsr(const CooMatrix& coo, int block_rows, int block_cols, int index_bits = 32,
                              DType value = DType::f32);
  // The entries of `matrix` in block columns [first, end) (same shape, same column indices): a column panel.
  static SparseMatrixData column_panel(const SparseMatrix& matrix, std::int64_t first, std::int64_t end);
  SparseMatrix view() const;
  // The stored values as coordinates (BSR: every value inside the matrix, zeros included).
  CooMatrix coo() const;
  // The same for any view.
  static CooMatrix coo(const SparseMatrix& matrix);

 private:
  SparseMatrix shape_;  // pointers unset: view() points them at the arrays below
  std::vector<std::byte> offsets_, indices_, values_;
};

// Matrix Market coordinate files: real, integer or pattern (values 1), general or symmetric (the mirror entries
// added). Throws InvalidArgument("matrix", "<name>:<line>: ...") for a malformed file, naming the line.
CooMatrix read_matrix_market(std::istream& in, const std::string& name = "<stream>");
CooMatrix read_matrix_market(const std::string& path);
// Writes "coordinate real general" through a temporary file renamed into place: no partial file on failure.
void write_matrix_market(const std::string& path, const CooMatrix& coo);

// A seeded pattern: "uniform:M,K,DENSITY[,SEED]", "powerlaw:M,K,DENSITY[,SEED]" (R-MAT, skewed rows and columns),
// "banded:M,K,DENSITY[,SEED]" (a diagonal band as wide as the density asks) or "blocks:M,K,DENSITY[,SEED[,B]]"
// (B×B blocks kept as magnitude pruning of a transformer weight leaves them, B = 16 by default). Values are
// uniform in [-1, 1). Throws InvalidArgument naming what is malformed.
CooMatrix generate_pattern(std::string_view request);

// The inspector's findings for a pattern: its checked structure, statistics and a plan that splits its block rows
// into tasks of balanced work. Computed once per pattern and reused by every call with it (inspector–executor).
class SparsePlan {
 public:
  // Checks the structure (offsets monotone from 0 to entries, indices in range, sorted and distinct in each row)
  // and throws InvalidArgument naming the array ("<name>.col_indices") and position; then studies it for `threads`
  // threads (0: 1).
  static SparsePlan inspect(const SparseMatrix& matrix, int threads, const std::string& name = "a");
  const PatternStats& stats() const { return stats_; }
  // Task t covers block rows [splits()[t], splits()[t + 1]).
  const std::vector<std::int64_t>& splits() const { return splits_; }
  // Whether `matrix` is the pattern this plan was made for: the same arrays with the same contents (a hash of
  // the offsets and indices, compared on every prepared call).
  bool describes(const SparseMatrix& matrix) const;
  // The pattern's identity: a hash of its offsets and indices (what tuning records name a pattern by).
  std::uint64_t fingerprint() const { return fingerprint_; }
  // Whether `matrix` has the shape, signature and entry count this plan was made for (what can be checked of
  // arrays in device memory, which the host cannot read).
  bool matches_shape(const SparseMatrix& matrix) const;
  // Block rows by decreasing length (Sputnik's row swizzle: a CUDA block's warps get rows of like length, the
  // longest start first).
  const std::vector<std::int32_t>& row_order() const { return row_order_; }
  // A CSR matrix (which this plan describes) stored as BSR in the square blocks square_block_for chooses for an
  // SpMM with N columns (no side above max_side, the tallest block the target's kernel holds), or a BSR matrix whose
  // blocks are taller than max_side split into blocks of fewer rows; and that copy's own plan: made on the first
  // request for that block shape and kept with the plan. Runtime::spmm runs a pattern whose entries cluster this way,
  // since the GEMM micro-kernel per block does several times the work per loaded value of the CSR tile. Null when
  // the entries do not cluster enough, or the blocks fit.
  struct Blocked {
    SparseMatrixData data;
    std::shared_ptr<const SparsePlan> plan;
  };
  std::shared_ptr<const Blocked> blocked(const SparseMatrix& matrix, int threads, std::int64_t n, int max_side) const;
  // The matrix (which this plan describes) split into column panels of `width` block columns, made on the first
  // request for that width and kept with the plan.
  std::shared_ptr<const std::vector<SparseMatrixData>> column_panels(const SparseMatrix& matrix,
                                                                     std::int64_t width) const;

 private:
  struct PanelCache;
  std::shared_ptr<PanelCache> panels_;
  PatternStats stats_;
  std::vector<std::int64_t> splits_;
  std::vector<std::int32_t> row_order_;
  SparseSignature signature_;
  std::int64_t rows_ = 0, cols_ = 0;
  std::uint64_t fingerprint_ = 0;
};

// D = epilogue(A·B, C, inputs) with A sparse M×K and B dense K×N (any layout; row-major is read in place, others
// are copied first), C and D M×N; the epilogue as for GEMM.
struct SpmmArgs {
  SparseMatrix a;
  Tensor b, c, d;
  float alpha = 1, beta = 0;
  Epilogue epilogue = Epilogue::linear_combination();
  std::map<std::string, Tensor> inputs;
  int threads = 0;                         // 0: every thread of the runtime's pool
  std::shared_ptr<const SparsePlan> plan;  // the inspector's plan of `a`, reused when given (checked to match)

  SpmmArgs& set_epilogue(std::string_view text) {
    epilogue = Epilogue::parse(text);
    return *this;
  }
};

// For each stored (i, j) of the pattern: out[p] = epilogue(dot(A[i,:], B[j,:])), in the pattern's order. A is M×K,
// B is N×K (row-major f32 is read in place; other layouts and bf16 are copied first), out a vector of the pattern's
// entries. The epilogue is in the sampled dialect: acc, alpha, s (the pattern's value), tensors [m] and [n].
struct SddmmArgs {
  SparseMatrix pattern;
  Tensor a, b, out;
  float alpha = 1;
  Epilogue epilogue = Epilogue::parse_sampled("acc");
  std::map<std::string, Tensor> inputs;
  int threads = 0;
  std::shared_ptr<const SparsePlan> plan;

  SddmmArgs& set_epilogue(std::string_view text) {
    epilogue = Epilogue::parse_sampled(text);
    return *this;
  }
};

// Validate arguments and state the problems they describe; throw InvalidArgument naming the argument.
SpmmProblem describe_spmm(const SpmmArgs& args);
SddmmProblem describe_sddmm(const SddmmArgs& args);

// The code generated for a CPU sparse spec: LLVM IR or host assembly.
std::string spmm_llvm_ir(const CpuSpmmSpec& spec, int ir_opt_level = 0);
std::string spmm_host_assembly(const CpuSpmmSpec& spec, int ir_opt_level = 0);
std::string sddmm_llvm_ir(const CpuSddmmSpec& spec, int ir_opt_level = 0);
std::string sddmm_host_assembly(const CpuSddmmSpec& spec, int ir_opt_level = 0);

// A compiled SpMM kernel for one signature; it runs any sizes and patterns whose arguments match that signature.
class SpmmKernel {
 public:
  const CpuSpmmSpec& spec() const;
  std::string name() const { return spec().name(); }
  double compile_ms() const;
  const char* origin() const;  // "built" or "disk", as GemmKernel::origin
  void run(const SpmmArgs& args) const;

 private:
  friend class Runtime;
  struct Compiled;
  SpmmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime);
  std::shared_ptr<const Compiled> compiled_;
  std::shared_ptr<void> runtime_;
};

class SddmmKernel {
 public:
  const CpuSddmmSpec& spec() const;
  std::string name() const { return spec().name(); }
  double compile_ms() const;
  const char* origin() const;  // "built" or "disk", as GemmKernel::origin
  void run(const SddmmArgs& args) const;

 private:
  friend class Runtime;
  struct Compiled;
  SddmmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime);
  std::shared_ptr<const Compiled> compiled_;
  std::shared_ptr<void> runtime_;
};

}  // namespace tessera
