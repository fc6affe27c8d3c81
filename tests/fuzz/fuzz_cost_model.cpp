// Cost-model files (`--model FILE`, models/*.json): any bytes either give a model or throw tessera::Error; a model
// that loads ranks a problem's variants without a crash (its trees' child and feature indices are checked on
// load), one score per variant.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "generator/core/error.hpp"
#include "generator/cost/learned_model.hpp"
#include "generator/gemm/gemm_variants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::shared_ptr<const tessera::LearnedCpuModel> model;
  try {
    model = tessera::LearnedCpuModel::from_json(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const tessera::Error&) {
    return 0;
  }
  static const tessera::CpuTarget target = tessera::CpuTarget::named("cpu:avx512");
  static const std::vector<tessera::GemmProblem> problems = [] {
    std::vector<tessera::GemmProblem> out;
    for (const auto& [m, n, k] :
         std::vector<std::array<std::int64_t, 3>>{{64, 64, 64}, {1, 4096, 4096}, {300, 77, 513}}) {
      tessera::GemmProblem p;
      p.m = m, p.n = n, p.k = k, p.batch = 1, p.threads = 1;
      p.signature.a = {tessera::DType::f32, tessera::Layout::row_major()};
      p.signature.b = {tessera::DType::f32, tessera::Layout::row_major()};
      p.signature.c = {tessera::DType::f32, tessera::Layout::zero()};
      p.signature.d = {tessera::DType::f32, tessera::Layout::row_major()};
      out.push_back(p);
    }
    return out;
  }();
  for (const auto& p : problems) {
    static const auto spaces = [] {
      std::vector<std::vector<tessera::CpuGemmConfig>> out;
      for (const auto& q : problems) {
        auto space = tessera::cpu_variants(q, target);
        if (space.size() > 16) space.resize(16);
        out.push_back(space);
      }
      return out;
    }();
    const auto& space = spaces[static_cast<std::size_t>(&p - problems.data())];
    (void)model->covers(p, target);
    if (model->score(p, space, target).size() != space.size()) std::abort();
  }
  return 0;
}
