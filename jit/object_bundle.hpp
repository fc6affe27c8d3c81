// A module's object code as one or more object files (a module compiled in parts on several threads), kept in the
// disk cache as one entry.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// One object is itself; several are framed: a magic line, their count, then per object its size and its bytes
// (counts and sizes 8 bytes, little-endian).
std::string bundle_objects(const std::vector<std::string>& objects);
// The objects of a bundle, or nullopt where the bytes are not one (truncated frames, trailing bytes, no objects).
std::optional<std::vector<std::string>> unbundle_objects(std::string_view bytes);

}  // namespace tessera
