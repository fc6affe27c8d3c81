#include "generator/core/kernel_spec.hpp"

#include <fmt/format.h>
#include <xxhash.h>

namespace tessera {

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

Hash128 hash_text(std::string_view text) {
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.high64, h.low64};
}

nlohmann::json KernelSpec::to_json() const {
  return {{"version", version}, {"op", op}, {"signature", signature}, {"config", config}, {"target", target}};
}

KernelSpec KernelSpec::from_json(const nlohmann::json& j, std::string_view op, int version) {
  return parse_spec_part([&] {
    KernelSpec spec;
    spec.version = j.at("version").get<int>();
    if (spec.version != version) throw InvalidArgument("spec.version", fmt::format("must be {}", version));
    spec.op = j.at("op").get<std::string>();
    if (spec.op != op) throw InvalidArgument("spec.op", fmt::format("must be {}", op));
    spec.signature = j.at("signature");
    spec.config = j.at("config");
    spec.target = j.at("target").get<std::string>();
    return spec;
  });
}

}  // namespace tessera
