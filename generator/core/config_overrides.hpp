// Parses "key=integer,key=integer" config overrides, the text form every Config accepts from the command line.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tessera {

// Throws InvalidArgument("config", ...) for an item that is not key=integer.
std::vector<std::pair<std::string, int>> parse_config_overrides(const std::string& text);

}  // namespace tessera
