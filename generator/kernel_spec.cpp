#include "generator/kernel_spec.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <cctype>

#include "generator/error.hpp"

namespace tessera {

namespace {
constexpr int kSpecVersion = 3;  // 2: pack_a, pack_b; 3: fixed sizes

char layout_letter(const Layout& l) { return l.name()[0]; }

// A short, symbol-safe tag for the epilogue: "ab" for alpha*acc + beta*c, else its functions and tensors.
std::string epilogue_tag(const GemmSignature& s) {
  if (s.epilogue.text() == Epilogue::linear_combination().text()) return "ab";
  std::string tag;
  visit(s.epilogue.tree(), [&](const ExprNode& node) {
    std::string word = node.op == ExprOp::Read ? node.name : std::string();
    for (const auto& fn : functions())
      if (fn.op == node.op) word = std::string(fn.name);
    if (!word.empty() && tag.size() < 40) tag += (tag.empty() ? "" : "_") + word;
  });
  if (tag.empty()) tag = "expr";
  for (char& ch : tag)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return tag;
}
}  // namespace

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

nlohmann::json KernelSpec::to_json() const {
  return {{"version", kSpecVersion},
          {"op", "gemm"},
          {"signature", signature.to_json()},
          {"config", config.to_json()},
          {"target", target.str()}};
}

KernelSpec KernelSpec::from_json(const nlohmann::json& j) {
  KernelSpec spec;
  try {
    if (j.at("version").get<int>() != kSpecVersion)
      throw InvalidArgument("spec.version", fmt::format("must be {}", kSpecVersion));
    if (j.at("op").get<std::string>() != "gemm") throw InvalidArgument("spec.op", "must be gemm");
    spec.signature = GemmSignature::from_json(j.at("signature"));
    spec.config = CpuGemmConfig::from_json(j.at("config"));
    spec.target = Target::parse(j.at("target").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("spec", std::string("malformed JSON: ") + e.what());
  }
  validate(spec.signature, spec.config, spec.target);
  return spec;
}

Hash128 KernelSpec::hash() const {
  const std::string text = canonical_json();
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.high64, h.low64};
}

std::string KernelSpec::name() const {
  const auto& s = signature;
  const bool uniform = s.a.dtype == s.b.dtype && s.b.dtype == s.d.dtype;
  const std::string types =
      uniform ? std::string(dtype_name(s.a.dtype))
              : fmt::format("{}{}{}", dtype_name(s.a.dtype), dtype_name(s.b.dtype), dtype_name(s.d.dtype));
  const std::string isa = target.isa == CpuIsa::Avx512 ? "avx512" : "avx2";
  const std::string fixed =
      config.fixed() ? fmt::format("_fix{}x{}x{}", config.fixed_m, config.fixed_n, config.fixed_k) : "";
  const std::string packing = config.pack_a && config.pack_b ? ""
                              : config.pack_a                ? "_ub"
                              : config.pack_b                ? "_ua"
                                                             : "_uab";
  return fmt::format("gemm_{}_{}{}{}{}_{}x{}x{}{}{}_{}_{}_{}", types, layout_letter(s.a.layout),
                     layout_letter(s.b.layout), layout_letter(s.c.layout), layout_letter(s.d.layout), config.mr,
                     config.nr, config.kc, packing, fixed, epilogue_tag(s), isa, hash().hex().substr(0, 8));
}

}  // namespace tessera
