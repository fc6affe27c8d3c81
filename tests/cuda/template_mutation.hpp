// Seeded bugs for the emulator's tests: one-line mutations of an embedded CUDA template, each of which the emulator
// must catch (a wrong result, a race, a deadlock).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "jit/embedded_templates.hpp"

namespace tessera {

struct TemplateBug {
  const char* what;
  const char* original;  // empty: the control, the template as it is
  const char* mutated;
  bool control() const { return std::string(original).empty(); }
};

// The embedded template at `path` (relative to templates/) with `bug` applied; fails the test (and returns "") when
// the template or the line to mutate is missing.
inline std::string mutated_template(const std::string& path, const TemplateBug& bug) {
  std::string text;
  for (const EmbeddedFile& f : embedded_templates())
    if (f.path == path) text = f.text;
  EXPECT_FALSE(text.empty()) << path << " is not embedded";
  if (bug.control() || text.empty()) return text;
  const auto at = text.find(bug.original);
  EXPECT_NE(at, std::string::npos) << bug.what << ": the template changed";
  if (at == std::string::npos) return "";
  return text.replace(at, std::string(bug.original).size(), bug.mutated);
}

}  // namespace tessera
