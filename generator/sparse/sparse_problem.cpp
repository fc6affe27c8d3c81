#include "generator/sparse/sparse_problem.hpp"

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/sparse/sparse_json.hpp"

namespace tessera {

nlohmann::json to_json(const PatternStats& stats) {
  return {{"rows", stats.rows},
          {"nnz", stats.nnz},
          {"mean_row", stats.mean_row},
          {"stddev_row", stats.stddev_row},
          {"max_row", stats.max_row},
          {"empty_rows", stats.empty_rows},
          {"block_fill", stats.block_fill},
          {"square_block_fill",
           {{"4", stats.square_block_fill[0]}, {"8", stats.square_block_fill[1]}, {"16", stats.square_block_fill[2]}}}};
}

namespace {

// f32, bf16 or f16 (f16 only on CUDA targets: the CPU validators say so).
void check_dense_value(DType value, const char* name) {
  if (value != DType::f32 && value != DType::bf16 && value != DType::f16)
    throw InvalidArgument(name, std::string("must be f32, bf16 or f16, got ") + std::string(dtype_name(value)));
}

}  // namespace

void SpmmSignature::check() const {
  a.check();
  dense.check();
  if (dense.epilogue.sampled()) throw InvalidArgument("epilogue", "SpMM takes a GEMM epilogue, not a sampled one");
  check_dense_value(dense.b.dtype, "b");
  if (dense.d.dtype != DType::f32 && dense.d.dtype != DType::bf16) throw InvalidArgument("d", "must be f32 or bf16");
}

nlohmann::json to_json(const SpmmSignature& signature) {
  return {{"a", to_json(signature.a)}, {"dense", to_json(signature.dense)}};
}

template <>
SpmmSignature from_json<SpmmSignature>(const nlohmann::json& j) {
  SpmmSignature s{from_json<SparseSignature>(j.at("a")), from_json<GemmSignature>(j.at("dense"))};
  s.check();
  return s;
}

double SpmmProblem::flops() const {
  const double values = static_cast<double>(pattern.nnz) * signature.a.block_rows * signature.a.block_cols;
  return 2.0 * values * static_cast<double>(n);
}

double SpmmProblem::min_bytes() const {
  const SparseSignature& a = signature.a;
  const double index = a.index_bits / 8.0;
  const double values = static_cast<double>(pattern.nnz) * a.block_rows * a.block_cols;
  double bytes = values * dtype_bytes(a.value) + static_cast<double>(pattern.nnz) * index +
                 static_cast<double>(pattern.rows + 1) * index;
  bytes += static_cast<double>(k) * static_cast<double>(n) * dtype_bytes(signature.dense.b.dtype);
  const double output = static_cast<double>(m) * static_cast<double>(n);
  bytes += output * dtype_bytes(signature.dense.d.dtype);
  if (signature.dense.c.layout.reads_memory()) bytes += output * dtype_bytes(signature.dense.c.dtype);
  return bytes;
}

void SddmmSignature::check() const {
  pattern.check();
  if (pattern.format != SparseFormat::Csr) throw InvalidArgument("pattern", "SDDMM samples at a CSR pattern");
  dense.check();
  if (!dense.epilogue.sampled())
    throw InvalidArgument("epilogue", "SDDMM takes a sampled epilogue (acc, alpha, s, tensors [m] or [n])");
  check_dense_value(dense.a.dtype, "a");
  check_dense_value(dense.b.dtype, "b");
  if (dense.d.dtype != DType::f32) throw InvalidArgument("out", "must be f32");
}

nlohmann::json to_json(const SddmmSignature& signature) {
  return {{"pattern", to_json(signature.pattern)}, {"dense", to_json(signature.dense)}};
}

template <>
SddmmSignature from_json<SddmmSignature>(const nlohmann::json& j) {
  SddmmSignature s{from_json<SparseSignature>(j.at("pattern")), from_json<GemmSignature>(j.at("dense"))};
  s.check();
  return s;
}

double SddmmProblem::flops() const { return 2.0 * static_cast<double>(pattern.nnz) * static_cast<double>(k); }

double SddmmProblem::min_bytes() const {
  const SparseSignature& p = signature.pattern;
  const double index = p.index_bits / 8.0;
  double bytes = static_cast<double>(pattern.nnz) * index + static_cast<double>(pattern.rows + 1) * index;
  if (signature.dense.epilogue.reads_s()) bytes += static_cast<double>(pattern.nnz) * dtype_bytes(p.value);
  bytes += static_cast<double>(m) * static_cast<double>(k) * dtype_bytes(signature.dense.a.dtype);
  bytes += static_cast<double>(n) * static_cast<double>(k) * dtype_bytes(signature.dense.b.dtype);
  bytes += static_cast<double>(pattern.nnz) * dtype_bytes(signature.dense.d.dtype);
  return bytes;
}

}  // namespace tessera
