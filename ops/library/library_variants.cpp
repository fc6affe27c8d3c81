#include "ops/library/library_variants.hpp"

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <set>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "generator/llvm/attention_emitter.hpp"
#include "generator/llvm/gemm_emitter.hpp"
#include "generator/llvm/sparse_emitter.hpp"
#include "tessera/cost_models.hpp"

namespace tessera {

std::string LibraryVariant::symbol() const {
  return std::visit([](const auto& s) { return s.name(); }, spec);
}
const CpuTarget& LibraryVariant::target() const {
  return std::visit([](const auto& s) -> const CpuTarget& { return s.target; }, spec);
}
const char* LibraryVariant::tier() const {
  const CpuTarget& t = target();
  return t.amx ? "ISA_AMX" : t.isa == CpuIsa::Avx512 ? "ISA_AVX512" : "ISA_AVX2";
}
Hash128 LibraryVariant::hash() const {
  return std::visit([](const auto& s) { return s.hash(); }, spec);
}
CpuModuleSource LibraryVariant::module_source() const {
  return std::visit([](const auto& s) { return cpu_module_source(s); }, spec);
}

namespace {

// The configs the runtime would rank first for the shape on the target (one thread), without the transposed ones:
// the library's driver calls a kernel on the arguments as given.
std::vector<CpuGemmConfig> ranked_configs(const GemmProblem& problem, const CpuTarget& target,
                                          const CpuCostModel* model) {
  std::vector<CpuGemmConfig> space = cpu_variants(problem, target), ranked;
  if (model && model->covers(problem, target) && !space.empty()) {
    for (std::size_t i : rank_by_score(model->score(problem, space, target))) ranked.push_back(space[i]);
  } else {
    ranked.push_back(CpuGemmConfig::default_for(problem, target));
    ranked.insert(ranked.end(), space.begin(), space.end());
  }
  std::vector<CpuGemmConfig> usable;
  for (const auto& c : ranked) {
    if (c.transpose) continue;
    try {
      validate(problem.signature, c, target);
      usable.push_back(c);
    } catch (const ConfigError&) {
    }
  }
  return usable;
}

// A GEMM entry: per target and shape the best-ranked config, and where that one runs only its shape (fixed sizes)
// the best one that runs any shape too, so that every shape has a kernel.
void resolve_gemm(ResolvedKernel& r, const std::function<void(LibraryVariant)>& add) {
  const LibraryKernel& k = r.kernel;
  const GemmSignature& signature = std::get<GemmSignature>(k.signature);
  for (const CpuTarget& target : k.targets) {
    const auto model = load_cpu_cost_model("default", target).model;
    for (const LibraryShape& s : k.shapes) {
      GemmProblem p;
      p.m = s.m, p.n = s.n, p.k = s.k, p.batch = s.batch, p.threads = 1;
      p.signature = signature;
      const std::vector<CpuGemmConfig> ranked = ranked_configs(p, target, model.get());
      // Small shapes rank only fixed-size kernels: the best of them with its sizes left to run time runs the rest.
      std::optional<CpuGemmConfig> general;
      for (const auto& c : ranked) {
        CpuGemmConfig any = c;
        any.fixed_m = any.fixed_n = any.fixed_k = 0;
        try {
          validate(signature, any, target);
          general = any;
          break;
        } catch (const ConfigError&) {
        }
      }
      if (ranked.empty() || !general)
        throw Error(fmt::format("{}: no config runs {}x{}x{} on {}", k.name, s.m, s.n, s.k, target.str()));
      add({CpuGemmSpec{signature, ranked.front(), target}, s});
      add({CpuGemmSpec{signature, *general, target}, s});
    }
  }
}

// SpMM and SDDMM: default_for each shape, as Runtime::spmm and Runtime::sddmm choose (SpMM's depends on N, SDDMM's
// on the target only; the pattern's statistics enter neither).
template <class Spec, class Problem>
void resolve_sparse(ResolvedKernel& r, const std::function<void(LibraryVariant)>& add) {
  using Config = decltype(Spec::config);
  const auto& signature = std::get<decltype(Spec::signature)>(r.kernel.signature);
  for (const CpuTarget& target : r.kernel.targets)
    for (const LibraryShape& s : r.kernel.shapes) {
      Problem p;
      p.m = s.m, p.n = s.n, p.k = s.k, p.threads = 1;
      p.signature = signature;
      const Config config = Config::default_for(p, target);
      validate(signature, config, target);
      add({Spec{signature, config, target}, s});
    }
}

// Attention: default_for each shape (the query and key lengths and heads decide the blocks, decoding's in place).
void resolve_attention(ResolvedKernel& r, const std::function<void(LibraryVariant)>& add) {
  const AttentionSignature& signature = std::get<AttentionSignature>(r.kernel.signature);
  for (const CpuTarget& target : r.kernel.targets)
    for (const LibraryShape& s : r.kernel.shapes) {
      AttentionProblem p;
      p.signature = signature;
      p.batch = 1, p.heads = s.heads, p.kv_heads = s.kv_heads, p.seq_q = s.m, p.seq_kv = s.n, p.threads = 1;
      const CpuAttentionConfig config = CpuAttentionConfig::default_for(p, target);
      validate(signature, config, target);
      add({CpuAttentionSpec{signature, config, target}, s});
    }
}

}  // namespace

std::vector<ResolvedKernel> resolve_variants(const LibraryManifest& manifest) {
  std::vector<ResolvedKernel> out;
  for (const auto& k : manifest.kernels) {
    ResolvedKernel r{k, {}};
    std::set<std::string> seen;  // symbol and tier: a kernel chosen on two targets serves both tiers
    const auto add = [&](LibraryVariant v) {
      if (seen.insert(v.symbol() + "/" + v.tier()).second) r.variants.push_back(std::move(v));
    };
    if (k.op == "gemm")
      resolve_gemm(r, add);
    else if (k.op == "attention")
      resolve_attention(r, add);
    else if (k.op == "spmm")
      resolve_sparse<CpuSpmmSpec, SpmmProblem>(r, add);
    else
      resolve_sparse<CpuSddmmSpec, SddmmProblem>(r, add);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tessera
