#include "generator/gemm/gemm_naming.hpp"

#include <fmt/format.h>

#include <cctype>

namespace tessera {

std::string types_tag(const GemmSignature& s) {
  const bool uniform = s.a.dtype == s.b.dtype && s.b.dtype == s.d.dtype;
  return uniform ? std::string(dtype_name(s.a.dtype))
                 : fmt::format("{}{}{}", dtype_name(s.a.dtype), dtype_name(s.b.dtype), dtype_name(s.d.dtype));
}

std::string layouts_tag(const GemmSignature& s) {
  return {s.a.layout.name()[0], s.b.layout.name()[0], s.c.layout.name()[0], s.d.layout.name()[0]};
}

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

}  // namespace tessera
