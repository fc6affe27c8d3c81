// A config's fields by name, for configs whose fields are all int or bool: the "key=integer" overrides text, the
// JSON object in its spec and the unknown-key message all come from one table.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "generator/core/config_overrides.hpp"
#include "generator/core/error.hpp"
#include "generator/core/kernel_spec.hpp"

namespace tessera {

template <class Config>
struct ConfigField {
  const char* name;
  std::variant<int Config::*, bool Config::*> member;
  // Written only where it is not 0 and read as 0 where absent: a field added later leaves the JSON, and so the hash,
  // of every config that does not use it as it was.
  bool optional = false;
};

template <class Config>
using ConfigFields = std::vector<ConfigField<Config>>;

// `config` with "key=integer,..." applied (a bool field takes value != 0); throws InvalidArgument("config", ...)
// naming the known keys for an unknown one.
template <class Config>
Config with_config_overrides(Config config, const std::string& text, const ConfigFields<Config>& fields) {
  for (const auto& [key, value] : parse_config_overrides(text)) {
    const std::string& wanted = key;  // clang before 16 cannot capture a structured binding
    const auto field = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return wanted == f.name; });
    if (field == fields.end()) {
      std::string names;
      for (const auto& f : fields) names += (names.empty() ? "" : ", ") + std::string(f.name);
      throw InvalidArgument("config", "unknown key '" + key + "' (" + names + ")");
    }
    std::visit(
        [&, v = value](auto member) {
          if constexpr (std::is_same_v<std::remove_reference_t<decltype(config.*member)>, bool>)
            config.*member = v != 0;
          else
            config.*member = v;
        },
        field->member);
  }
  return config;
}

// The fields as a JSON object (ints as numbers, bools as booleans).
template <class Config>
nlohmann::json config_fields_to_json(const Config& config, const ConfigFields<Config>& fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : fields)
    std::visit(
        [&](auto member) {
          if (!f.optional || config.*member) j[f.name] = config.*member;
        },
        f.member);
  return j;
}

// A config read back from config_fields_to_json's object; a missing or mistyped field throws.
template <class Config>
Config config_fields_from_json(const nlohmann::json& j, const ConfigFields<Config>& fields) {
  Config config;
  for (const auto& f : fields)
    std::visit(
        [&](auto member) {
          if (f.optional && !j.contains(f.name)) return;  // the default
          if constexpr (std::is_same_v<std::remove_reference_t<decltype(config.*member)>, bool>)
            config.*member = j.at(f.name).template get<bool>();
          else
            config.*member = integer_at<int>(j, f.name);
        },
        f.member);
  return config;
}

}  // namespace tessera
