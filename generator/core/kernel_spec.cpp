#include "generator/core/kernel_spec.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

namespace tessera {

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

void KeyHasher::append(const void* data, std::size_t bytes) {
  if (spill_.empty() && size_ + bytes <= sizeof inline_) {
    std::memcpy(inline_ + size_, data, bytes);
    size_ += bytes;
    return;
  }
  if (spill_.empty()) spill_.assign(inline_, size_);
  spill_.append(static_cast<const char*>(data), bytes);
}

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
