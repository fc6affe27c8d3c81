#include "generator/core/sparse_format.hpp"

#include <fmt/format.h>

#include "generator/core/error.hpp"
#include "generator/sparse/sparse_json.hpp"

namespace tessera {

namespace {
constexpr int kMaxBlockSide = 64;  // a BSR block is a register or shared-memory tile
}  // namespace

void SparseSignature::check() const {
  if (format == SparseFormat::Csr && (block_rows != 1 || block_cols != 1))
    throw InvalidArgument("sparse.block", fmt::format("CSR has 1x1 blocks, got {}x{}", block_rows, block_cols));
  if (block_rows < 1 || block_cols < 1 || block_rows > kMaxBlockSide || block_cols > kMaxBlockSide)
    throw InvalidArgument("sparse.block",
                          fmt::format("sides must be in 1..{}, got {}x{}", kMaxBlockSide, block_rows, block_cols));
  if (index_bits != 32 && index_bits != 64)
    throw InvalidArgument("sparse.index", fmt::format("must be i32 or i64, got {}-bit", index_bits));
  if (value != DType::f32 && value != DType::bf16 && value != DType::f16)
    throw InvalidArgument("sparse.value", fmt::format("must be f32, bf16 or f16, got {}", dtype_name(value)));
}

std::string SparseSignature::tag() const {
  const std::string shape = format == SparseFormat::Csr ? "csr" : fmt::format("bsr{}x{}", block_rows, block_cols);
  return fmt::format("{}_i{}_{}", shape, index_bits, dtype_name(value));
}

nlohmann::json to_json(const SparseSignature& signature) {
  return {{"format", signature.format == SparseFormat::Csr ? "csr" : "bsr"},
          {"block", {signature.block_rows, signature.block_cols}},
          {"index", fmt::format("i{}", signature.index_bits)},
          {"value", std::string(dtype_name(signature.value))}};
}

template <>
SparseSignature from_json<SparseSignature>(const nlohmann::json& j) {
  SparseSignature s;
  try {
    const std::string format = j.at("format").get<std::string>();
    if (format != "csr" && format != "bsr") throw InvalidArgument("sparse.format", "must be csr or bsr, got " + format);
    s.format = format == "csr" ? SparseFormat::Csr : SparseFormat::Bsr;
    s.block_rows = integer_value<int>(j.at("block").at(0), "block");
    s.block_cols = integer_value<int>(j.at("block").at(1), "block");
    const auto dtype = [&](const char* key) {
      const auto d = parse_dtype(j.at(key).get<std::string>());
      if (!d) throw InvalidArgument(std::string("sparse.") + key, "unknown dtype " + j.at(key).get<std::string>());
      return *d;
    };
    const std::string index = j.at("index").get<std::string>();
    if (index != "i32" && index != "i64") throw InvalidArgument("sparse.index", "must be i32 or i64, got " + index);
    s.index_bits = index == "i32" ? 32 : 64;
    s.value = dtype("value");
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("sparse", std::string("malformed JSON: ") + e.what());
  }
  s.check();
  return s;
}

}  // namespace tessera
