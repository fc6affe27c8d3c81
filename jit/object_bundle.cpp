#include "jit/object_bundle.hpp"

#include <cstdint>

namespace tessera {

namespace {

constexpr std::string_view kBundleMagic = "tessera object bundle 1\n";

void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i, value >>= 8) out.push_back(static_cast<char>(value & 0xff));
}

// The next 8 bytes as a little-endian number, consumed; nullopt where fewer remain.
std::optional<std::uint64_t> take_u64(std::string_view& bytes) {
  if (bytes.size() < 8) return std::nullopt;
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  bytes.remove_prefix(8);
  return value;
}

}  // namespace

std::string bundle_objects(const std::vector<std::string>& objects) {
  if (objects.size() == 1) return objects[0];
  std::string out(kBundleMagic);
  put_u64(out, objects.size());
  for (const auto& object : objects) {
    put_u64(out, object.size());
    out += object;
  }
  return out;
}

std::optional<std::vector<std::string>> unbundle_objects(std::string_view bytes) {
  if (bytes.substr(0, kBundleMagic.size()) != kBundleMagic) return std::vector<std::string>{std::string(bytes)};
  bytes.remove_prefix(kBundleMagic.size());
  const auto count = take_u64(bytes);
  if (!count || *count == 0 || *count > bytes.size() / 8) return std::nullopt;
  std::vector<std::string> objects;
  for (std::uint64_t i = 0; i < *count; ++i) {
    const auto size = take_u64(bytes);
    if (!size || *size > bytes.size()) return std::nullopt;
    objects.emplace_back(bytes.substr(0, *size));
    bytes.remove_prefix(*size);
  }
  if (!bytes.empty()) return std::nullopt;
  return objects;
}

}  // namespace tessera
