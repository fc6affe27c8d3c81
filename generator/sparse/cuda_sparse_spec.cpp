#include "generator/sparse/cuda_sparse_spec.hpp"

#include <fmt/format.h>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/sparse/sparse_json.hpp"

namespace tessera {

namespace {

constexpr int kCudaSparseSpecVersion = 1;
constexpr int kMaxEpilogueInputs = 8;  // GemmParams::inputs

bool cuda_value(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

void check_config(const CudaSparseConfig& c, const char* op) {
  if (c.warps != 1 && c.warps != 2 && c.warps != 4 && c.warps != 8)
    throw ConfigError(fmt::format("{}: warps must be 1, 2, 4 or 8, got {}", op, c.warps));
  if (c.vec != 1 && c.vec != 2 && c.vec != 4)
    throw ConfigError(fmt::format("{}: vec must be 1, 2 or 4, got {}", op, c.vec));
  if (c.tiles != 1 && c.tiles != 2 && c.tiles != 4 && c.tiles != 8)
    throw ConfigError(fmt::format("{}: tiles must be 1, 2, 4 or 8, got {}", op, c.tiles));
}

int vec_for(std::int64_t extent) { return extent >= 128 ? 4 : extent >= 64 ? 2 : 1; }

}  // namespace

nlohmann::json to_json(const CudaSparseConfig& config) {
  return {{"warps", config.warps}, {"vec", config.vec}, {"tiles", config.tiles}};
}

int spmm_shared_bytes(const CudaSparseConfig& c) { return c.warps * 32 * (8 + 4); }  // CSR; BSR uses none
int sddmm_shared_bytes(const CudaSparseConfig& c) { return c.warps * kSddmmKChunk * 4; }

CudaSparseConfig cuda_spmm_default(const SpmmProblem& p) { return {4, vec_for(p.n), p.n >= 64 ? 8 : 4}; }
CudaSparseConfig cuda_sddmm_default(const SddmmProblem& p) { return {4, vec_for(p.k), 4}; }

void validate(const SpmmSignature& s, const CudaSparseConfig& c, const CudaTarget& target) {
  s.a.check();
  s.dense.check();
  check_config(c, "spmm");
  (void)target;
  if (s.a.format == SparseFormat::Bsr) {
    if (s.a.block_rows != 16 || s.a.block_cols != 16)
      throw ConfigError(
          fmt::format("spmm: BSR on CUDA runs 16x16 blocks on mma.sync, got {}x{}", s.a.block_rows, s.a.block_cols));
    if ((s.a.value != DType::f16 && s.a.value != DType::bf16) || s.dense.b.dtype != s.a.value)
      throw ConfigError("spmm: BSR on CUDA takes f16 or bf16 values and a B of the same type (mma.sync inputs)");
  }
  if (!cuda_value(s.a.value) || !cuda_value(s.dense.b.dtype))
    throw ConfigError("spmm: values and B must be f32, f16 or bf16 on CUDA");
  if (s.dense.b.layout.kind() != LayoutKind::RowMajor) throw ConfigError("spmm: B must be row-major on CUDA");
  if (s.dense.d.dtype != DType::f32 || s.dense.d.layout.kind() != LayoutKind::RowMajor)
    throw ConfigError("spmm: D must be f32 and row-major on CUDA");
  if (s.dense.c.layout.reads_memory() && s.dense.c.dtype != DType::f32) throw ConfigError("spmm: C must be f32");
  if (s.dense.inputs.size() > kMaxEpilogueInputs)
    throw ConfigError(fmt::format("spmm: at most {} epilogue tensors on CUDA", kMaxEpilogueInputs));
}

void validate(const SddmmSignature& s, const CudaSparseConfig& c, const CudaTarget& target) {
  s.pattern.check();
  s.dense.check();
  check_config(c, "sddmm");
  (void)target;
  if (s.pattern.format != SparseFormat::Csr) throw ConfigError("sddmm: the pattern must be CSR");
  if (!s.dense.epilogue.sampled()) throw ConfigError("sddmm: the epilogue must be in the sampled dialect");
  if (!cuda_value(s.pattern.value) || !cuda_value(s.dense.a.dtype) || !cuda_value(s.dense.b.dtype))
    throw ConfigError("sddmm: values, A and B must be f32, f16 or bf16 on CUDA");
  if (s.dense.a.layout.kind() != LayoutKind::RowMajor || s.dense.b.layout.kind() != LayoutKind::ColMajor)
    throw ConfigError("sddmm: A (M x K) and B (N x K) must have unit stride along K on CUDA");
  if (s.dense.inputs.size() > kMaxEpilogueInputs)
    throw ConfigError(fmt::format("sddmm: at most {} epilogue tensors on CUDA", kMaxEpilogueInputs));
}

KernelSpec CudaSpmmSpec::generic() const {
  return {"spmm", kCudaSparseSpecVersion, to_json(signature), to_json(config), target.str()};
}

nlohmann::json to_json(const CudaSpmmSpec& spec) { return to_json(spec.generic()); }
Hash128 CudaSpmmSpec::hash() const { return generic().hash(); }

std::string CudaSpmmSpec::name() const {
  if (signature.a.format == SparseFormat::Bsr)
    return fmt::format("spmm_{}_mma_w{}t{}_{}_{}", signature.a.tag(), config.warps, config.tiles, target.arch(),
                       hash().hex().substr(0, 8));
  return fmt::format("spmm_{}_{}_w{}v{}_{}_{}", signature.a.tag(), dtype_name(signature.dense.b.dtype), config.warps,
                     config.vec, target.arch(), hash().hex().substr(0, 8));
}

KernelSpec CudaSddmmSpec::generic() const {
  return {"sddmm", kCudaSparseSpecVersion, to_json(signature), to_json(config), target.str()};
}

nlohmann::json to_json(const CudaSddmmSpec& spec) { return to_json(spec.generic()); }
Hash128 CudaSddmmSpec::hash() const { return generic().hash(); }

std::string CudaSddmmSpec::name() const {
  return fmt::format("sddmm_{}_{}_w{}v{}_{}_{}", signature.pattern.tag(), dtype_name(signature.dense.a.dtype),
                     config.warps, config.vec, target.arch(), hash().hex().substr(0, 8));
}

}  // namespace tessera
