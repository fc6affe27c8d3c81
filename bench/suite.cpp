#include "bench/suite.hpp"

#include <fmt/format.h>

#include "generator/gemm/shape_suite.hpp"

namespace tessera::bench {

namespace {
std::vector<GemmShape> converted(const std::vector<SuiteShape>& shapes) {
  std::vector<GemmShape> out;
  for (const auto& s : shapes) out.push_back({s.m, s.n, s.k, s.batch});
  return out;
}
}  // namespace

std::string_view gemm_inputs_name(GemmInputs inputs) {
  return inputs == GemmInputs::bf16 ? "bf16" : inputs == GemmInputs::int8 ? "i8" : "f32";
}

std::string GemmShape::label() const {
  const std::string dims = batch == 1 ? fmt::format("{}x{}x{}", m, n, k) : fmt::format("{}x{}x{}x{}", m, n, k, batch);
  return a_col || b_col ? dims + ":" + layouts() : dims;
}

std::vector<GemmShape> load_suite(const std::string& path_or_name) {
  return converted(load_shape_suite(path_or_name, std::string(TESSERA_SOURCE_DIR) + "/bench/suites"));
}

std::vector<GemmShape> parse_shapes(const std::string& list) { return converted(parse_shape_list(list)); }

}  // namespace tessera::bench
