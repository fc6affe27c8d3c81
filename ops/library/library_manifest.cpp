#include "ops/library/library_manifest.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <set>

#include "generator/core/error.hpp"

namespace tessera {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw InvalidArgument("manifest: " + where, why);
}

bool c_identifier(const std::string& s) {
  static const std::regex id("[A-Za-z_][A-Za-z0-9_]{0,62}");
  return std::regex_match(s, id);
}

void only_fields(const json& object, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [key, value] : object.items())
    if (!allowed.count(key)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(where, fmt::format("unknown field '{}' (fields: {})", key, list));
    }
}

std::string text_field(const json& object, const std::string& field, const std::string& where,
                       const std::string& fallback = "\x01") {
  if (!object.contains(field)) {
    if (fallback == "\x01") fail(where, fmt::format("'{}' is required", field));
    return fallback;
  }
  if (!object[field].is_string()) fail(where + "." + field, "must be a string");
  return object[field].get<std::string>();
}

Layout layout_field(const json& entry, const std::string& field, const std::string& where) {
  const std::string text = text_field(entry, field, where, "row");
  if (text != "row" && text != "col") fail(where + "." + field, fmt::format("must be row or col, got '{}'", text));
  return *Layout::parse(text);
}

LibraryShape parse_shape(const json& value, const std::string& where) {
  if (!value.is_string()) fail(where, "must be a string MxNxK or MxNxKxBATCH");
  const std::string text = value.get<std::string>();
  static const std::regex shape("([0-9]{1,9})x([0-9]{1,9})x([0-9]{1,9})(?:x([0-9]{1,9}))?");
  std::smatch match;
  if (!std::regex_match(text, match, shape)) fail(where, fmt::format("'{}' is not MxNxK or MxNxKxBATCH", text));
  LibraryShape s{std::stoll(match[1]), std::stoll(match[2]), std::stoll(match[3]),
                 match[4].matched ? std::stoll(match[4]) : 1};
  if (s.m < 1 || s.n < 1 || s.k < 1 || s.batch < 1) fail(where, fmt::format("'{}' has an extent below 1", text));
  return s;
}

LibraryKernel parse_kernel(const json& entry, const std::string& where) {
  if (!entry.is_object()) fail(where, "must be an object");
  LibraryKernel k;
  k.name = text_field(entry, "name", where);
  const std::string named = fmt::format("{} ('{}')", where, k.name);
  only_fields(entry,
              {"name", "op", "dtype", "out_dtype", "layout_a", "layout_b", "layout_c", "epilogue", "targets", "shapes"},
              named);
  if (!c_identifier(k.name)) fail(named + ".name", "must be a C identifier of at most 63 characters");
  k.op = text_field(entry, "op", named);
  if (k.op == "attention" || k.op == "spmm" || k.op == "sddmm")
    fail(named + ".op", fmt::format("'{}' kernels are not in libraries yet (gemm is)", k.op));
  if (k.op != "gemm") fail(named + ".op", fmt::format("unknown op '{}' (gemm)", k.op));
  // A and B: f32, bf16, or i8 (u8 A and i8 B, i32 sums); D: f32, bf16, or u8 / i8 (requantised).
  const std::string dtype = text_field(entry, "dtype", named, "f32");
  if (dtype != "f32" && dtype != "bf16" && dtype != "i8")
    fail(named + ".dtype", fmt::format("must be f32, bf16 or i8 (u8 A, i8 B), got '{}'", dtype));
  const std::string out_dtype = text_field(entry, "out_dtype", named, "f32");
  if (out_dtype != "f32" && out_dtype != "bf16" && out_dtype != "u8" && out_dtype != "i8")
    fail(named + ".out_dtype", fmt::format("must be f32, bf16, u8 or i8, got '{}'", out_dtype));
  const DType ab = *parse_dtype(dtype);
  GemmSignature& s = k.signature;
  s.a = {ab == DType::i8 ? DType::u8 : ab, layout_field(entry, "layout_a", named)};
  s.b = {ab, layout_field(entry, "layout_b", named)};
  if (ab == DType::i8) s.accumulator = DType::i32;
  const Layout d = layout_field(entry, "layout_c", named);
  try {
    s.epilogue = Epilogue::parse(text_field(entry, "epilogue", named, "alpha*acc"));
  } catch (const Error& e) {
    fail(named + ".epilogue", e.what());
  }
  // C is an operand exactly when the epilogue names it.
  s.d = {*parse_dtype(out_dtype), d};
  s.c = {DType::f32, s.epilogue.reads_c() ? d : Layout::zero()};
  for (const auto& t : s.epilogue.tensors())
    s.inputs.push_back(
        {t.name, t.form, {DType::f32, t.form == IndexForm::M ? Layout::col_major() : Layout::row_major()}});
  try {
    s.check();
  } catch (const Error& e) {
    fail(named + ".epilogue", e.what());
  }

  if (!entry.contains("targets") || !entry["targets"].is_array() || entry["targets"].empty())
    fail(named + ".targets", "must be a non-empty list such as [\"cpu:avx512\", \"cpu:avx2\"]");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < entry["targets"].size(); ++i) {
    const std::string at = fmt::format("{}.targets[{}]", named, i);
    const json& t = entry["targets"][i];
    if (!t.is_string()) fail(at, "must be a string");
    const std::string text = t.get<std::string>();
    if (text.rfind("cuda", 0) == 0) fail(at, fmt::format("'{}': libraries hold CPU kernels so far", text));
    if (text != "cpu:avx512" && text != "cpu:avx2") fail(at, fmt::format("'{}' is not cpu:avx512 or cpu:avx2", text));
    if (!seen.insert(text).second) fail(at, fmt::format("'{}' is listed twice", text));
    // The extensions the inputs need, whether or not this host has them: the driver checks the running CPU.
    CpuTarget target = CpuTarget::named(text);
    target.vnni = target.vnni || ab == DType::i8;
    target.avx512_bf16 = target.avx512_bf16 || (ab == DType::bf16 && target.isa == CpuIsa::Avx512);
    k.targets.push_back(target);
  }
  if (!entry.contains("shapes") || !entry["shapes"].is_array() || entry["shapes"].empty())
    fail(named + ".shapes", "must be a non-empty list of MxNxK[xBATCH] to choose configs for");
  for (std::size_t i = 0; i < entry["shapes"].size(); ++i)
    k.shapes.push_back(parse_shape(entry["shapes"][i], fmt::format("{}.shapes[{}]", named, i)));
  k.canonical = entry.dump();
  return k;
}

}  // namespace

LibraryManifest parse_library_manifest(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("JSON", fmt::format("invalid at byte {}: {}", e.byte, e.what()));
  } catch (const json::exception& e) {  // a number too large for any type (out_of_range.406), ...
    fail("JSON", e.what());
  }
  if (!j.is_object()) fail("top level", "must be an object with name and kernels");
  only_fields(j, {"name", "kernels", "schema"}, "top level");
  LibraryManifest m;
  m.name = text_field(j, "name", "top level");
  if (!c_identifier(m.name)) fail("name", "must be a C identifier of at most 63 characters");
  if (j.contains("schema") && j["schema"] != 1) fail("schema", "must be 1");
  if (!j.contains("kernels") || !j["kernels"].is_array() || j["kernels"].empty())
    fail("kernels", "must be a non-empty list");
  std::set<std::string> names;
  for (std::size_t i = 0; i < j["kernels"].size(); ++i) {
    LibraryKernel k = parse_kernel(j["kernels"][i], fmt::format("kernels[{}]", i));
    if (!names.insert(k.name).second)
      fail(fmt::format("kernels[{}].name", i), fmt::format("'{}' is used twice", k.name));
    m.kernels.push_back(std::move(k));
  }
  m.canonical = j.dump();
  return m;
}

const char* library_manifest_schema() {
  return R"({
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "tessera library manifest, schema 1",
  "type": "object",
  "required": ["name", "kernels"],
  "additionalProperties": false,
  "properties": {
    "schema": {"const": 1},
    "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
    "kernels": {
      "type": "array", "minItems": 1,
      "items": {
        "type": "object",
        "required": ["name", "op", "targets", "shapes"],
        "additionalProperties": false,
        "properties": {
          "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
          "op": {"enum": ["gemm"]},
          "dtype": {"enum": ["f32", "bf16", "i8"], "default": "f32"},
          "out_dtype": {"enum": ["f32", "bf16", "u8", "i8"], "default": "f32"},
          "layout_a": {"enum": ["row", "col"], "default": "row"},
          "layout_b": {"enum": ["row", "col"], "default": "row"},
          "layout_c": {"enum": ["row", "col"], "default": "row"},
          "epilogue": {"type": "string", "default": "alpha*acc"},
          "targets": {"type": "array", "minItems": 1, "uniqueItems": true, "items": {"enum": ["cpu:avx512", "cpu:avx2"]}},
          "shapes": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[0-9]+x[0-9]+x[0-9]+(x[0-9]+)?$"}}
        }
      }
    }
  }
}
)";
}

}  // namespace tessera
