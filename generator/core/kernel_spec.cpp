#include "generator/core/kernel_spec.hpp"

#include <fmt/format.h>

namespace tessera {

nlohmann::json to_json(const KernelSpec& spec) {
  return {{"version", spec.version},
          {"op", spec.op},
          {"signature", spec.signature},
          {"config", spec.config},
          {"target", spec.target}};
}

std::string KernelSpec::canonical_json() const { return to_json(*this).dump(); }

KernelSpec KernelSpec::from_json(const nlohmann::json& j, std::string_view op, int version) {
  return parse_spec_part([&] {
    KernelSpec spec;
    spec.version = integer_at<int>(j, "version");
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
