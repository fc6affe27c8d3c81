#include "ops/library/library_manifest.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <set>

#include "generator/core/error.hpp"

namespace tessera {

namespace {

using nlohmann::json;

[[noreturn]] void fail_manifest(const std::string& where, const std::string& why) {
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
      fail_manifest(where, fmt::format("unknown field '{}' (fields: {})", key, list));
    }
}

std::string text_field(const json& object, const std::string& field, const std::string& where,
                       const std::string& fallback = "\x01") {
  if (!object.contains(field)) {
    if (fallback == "\x01") fail_manifest(where, fmt::format("'{}' is required", field));
    return fallback;
  }
  if (!object[field].is_string()) fail_manifest(where + "." + field, "must be a string");
  return object[field].get<std::string>();
}

Layout layout_field(const json& entry, const std::string& field, const std::string& where) {
  const std::string text = text_field(entry, field, where, "row");
  if (text != "row" && text != "col")
    fail_manifest(where + "." + field, fmt::format("must be row or col, got '{}'", text));
  return *Layout::parse(text);
}

// The sizes an extent "N" or a range "LO..HI" stands for: the ends and the powers of two between them, thinned to at
// most kRangePoints spread evenly in log scale (the dispatcher picks the variant chosen for the nearest shape).
constexpr std::size_t kRangePoints = 5;
constexpr std::size_t kMostShapes = 256;

std::vector<std::int64_t> extent_points(const std::string& text, const std::string& where, const std::string& whole) {
  static const std::regex extent("([0-9]{1,9})(?:\\.\\.([0-9]{1,9}))?");
  std::smatch match;
  if (!std::regex_match(text, match, extent))
    fail_manifest(where, fmt::format("'{}' has an extent '{}' that is not N or LO..HI", whole, text));
  const std::int64_t lo = std::stoll(match[1]), hi = match[2].matched ? std::stoll(match[2]) : lo;
  if (lo < 1) fail_manifest(where, fmt::format("'{}' has an extent below 1", whole));
  if (hi < lo) fail_manifest(where, fmt::format("'{}': the range {} is empty (LO..HI with LO <= HI)", whole, text));
  std::vector<std::int64_t> points{lo};
  for (std::int64_t p = 1; p < hi; p *= 2)
    if (p > lo) points.push_back(p);
  if (hi > lo) points.push_back(hi);
  if (points.size() <= kRangePoints) return points;
  std::vector<std::int64_t> kept;
  for (std::size_t i = 0; i < kRangePoints; ++i) kept.push_back(points[i * (points.size() - 1) / (kRangePoints - 1)]);
  return kept;
}

// "MxNxK" or "MxNxKxBATCH", each extent a size or a range LO..HI: the shapes to choose configs for.
std::vector<LibraryShape> parse_shape(const json& value, const std::string& where) {
  if (!value.is_string())
    fail_manifest(where, "must be a string MxNxK or MxNxKxBATCH (an extent may be a range LO..HI)");
  const std::string text = value.get<std::string>();
  std::vector<std::string> parts;
  for (std::size_t begin = 0;;) {
    const std::size_t x = text.find('x', begin);
    parts.push_back(text.substr(begin, x == std::string::npos ? std::string::npos : x - begin));
    if (x == std::string::npos) break;
    begin = x + 1;
  }
  if (parts.size() < 3 || parts.size() > 4)
    fail_manifest(where, fmt::format("'{}' is not MxNxK or MxNxKxBATCH (an extent may be a range LO..HI)", text));
  std::vector<std::vector<std::int64_t>> points;
  for (const auto& part : parts) points.push_back(extent_points(part, where, text));
  if (points.size() == 3) points.push_back({1});
  std::vector<LibraryShape> shapes;
  for (std::int64_t m : points[0])
    for (std::int64_t n : points[1])
      for (std::int64_t k : points[2])
        for (std::int64_t batch : points[3]) shapes.push_back({m, n, k, batch});
  return shapes;
}

Epilogue epilogue_field(const json& entry, const std::string& named, bool sampled) {
  const std::string text = text_field(entry, "epilogue", named, sampled ? "acc" : "alpha*acc");
  try {
    return sampled ? Epilogue::parse_sampled(text) : Epilogue::parse(text);
  } catch (const Error& e) {
    fail_manifest(named + ".epilogue", e.what());
  }
}

// The epilogue's tensors as the runtime binds them: f32 vectors along M (element stride) or N, or M×N row-major.
std::vector<EpilogueInput> epilogue_inputs(const Epilogue& epilogue) {
  std::vector<EpilogueInput> inputs;
  for (const auto& t : epilogue.tensors())
    inputs.push_back(
        {t.name, t.form, {DType::f32, t.form == IndexForm::M ? Layout::col_major() : Layout::row_major()}});
  return inputs;
}

template <class Signature>
void check_signature(const Signature& s, const std::string& named) {
  try {
    s.check();
  } catch (const Error& e) {
    fail_manifest(named + ".epilogue", e.what());
  }
}

GemmSignature gemm_signature(const json& entry, const std::string& named) {
  only_fields(entry,
              {"name", "op", "dtype", "out_dtype", "layout_a", "layout_b", "layout_c", "epilogue", "targets", "shapes"},
              named);
  // A and B: f32, bf16, or i8 (u8 A and i8 B, i32 sums); D: f32, bf16, or u8 / i8 (requantised).
  const std::string dtype = text_field(entry, "dtype", named, "f32");
  if (dtype != "f32" && dtype != "bf16" && dtype != "i8")
    fail_manifest(named + ".dtype", fmt::format("must be f32, bf16 or i8 (u8 A, i8 B), got '{}'", dtype));
  const std::string out_dtype = text_field(entry, "out_dtype", named, "f32");
  if (out_dtype != "f32" && out_dtype != "bf16" && out_dtype != "u8" && out_dtype != "i8")
    fail_manifest(named + ".out_dtype", fmt::format("must be f32, bf16, u8 or i8, got '{}'", out_dtype));
  const DType ab = *parse_dtype(dtype);
  GemmSignature s;
  s.a = {ab == DType::i8 ? DType::u8 : ab, layout_field(entry, "layout_a", named)};
  s.b = {ab, layout_field(entry, "layout_b", named)};
  if (ab == DType::i8) s.accumulator = DType::i32;
  const Layout d = layout_field(entry, "layout_c", named);
  s.epilogue = epilogue_field(entry, named, false);
  // C is an operand exactly when the epilogue names it.
  s.d = {*parse_dtype(out_dtype), d};
  s.c = {DType::f32, s.epilogue.reads_c() ? d : Layout::zero()};
  s.inputs = epilogue_inputs(s.epilogue);
  check_signature(s, named);
  return s;
}

int index_bits_field(const json& entry, const std::string& named) {
  const std::string index = text_field(entry, "index", named, "i32");
  if (index != "i32" && index != "i64")
    fail_manifest(named + ".index", fmt::format("must be i32 or i64, got '{}'", index));
  return index == "i32" ? 32 : 64;
}

// SpMM: A sparse (CSR, or BSR with `block` blocks) with f32 or bf16 values, B dense row-major of the same type, C
// and D f32 in `layout_c`, the GEMM epilogue.
SpmmSignature spmm_signature(const json& entry, const std::string& named) {
  only_fields(entry, {"name", "op", "dtype", "format", "block", "index", "layout_c", "epilogue", "targets", "shapes"},
              named);
  SpmmSignature s;
  const std::string format = text_field(entry, "format", named, "csr");
  if (format != "csr" && format != "bsr")
    fail_manifest(named + ".format", fmt::format("must be csr or bsr, got '{}'", format));
  s.a.format = format == "csr" ? SparseFormat::Csr : SparseFormat::Bsr;
  if (s.a.format == SparseFormat::Bsr) {
    const std::string block = text_field(entry, "block", named);
    static const std::regex shape("([0-9]{1,2})x([0-9]{1,2})");
    std::smatch match;
    if (!std::regex_match(block, match, shape))
      fail_manifest(named + ".block", fmt::format("'{}' is not RxC (a BSR block's rows and columns)", block));
    s.a.block_rows = std::stoi(match[1]);
    s.a.block_cols = std::stoi(match[2]);
  } else if (entry.contains("block")) {
    fail_manifest(named + ".block", "is for format bsr");
  }
  s.a.index_bits = index_bits_field(entry, named);
  const std::string dtype = text_field(entry, "dtype", named, "f32");
  if (dtype != "f32" && dtype != "bf16")
    fail_manifest(named + ".dtype", fmt::format("must be f32 or bf16 (A's values and B), got '{}'", dtype));
  s.a.value = *parse_dtype(dtype);
  try {
    s.a.check();
  } catch (const Error& e) {
    fail_manifest(named + ".block", e.what());
  }
  GemmSignature& dense = s.dense;
  dense.a = {s.a.value, Layout::row_major()};
  dense.b = {s.a.value, Layout::row_major()};
  dense.accumulator = DType::f32;
  const Layout d = layout_field(entry, "layout_c", named);
  dense.epilogue = epilogue_field(entry, named, false);
  dense.d = {DType::f32, d};
  dense.c = {DType::f32, dense.epilogue.reads_c() ? d : Layout::zero()};
  dense.inputs = epilogue_inputs(dense.epilogue);
  check_signature(s, named);
  return s;
}

// SDDMM: a CSR pattern with f32 values (s), A M×K and B N×K f32 row-major, the sampled epilogue.
SddmmSignature sddmm_signature(const json& entry, const std::string& named) {
  only_fields(entry, {"name", "op", "dtype", "index", "epilogue", "targets", "shapes"}, named);
  SddmmSignature s;
  s.pattern.index_bits = index_bits_field(entry, named);
  const std::string dtype = text_field(entry, "dtype", named, "f32");
  if (dtype != "f32")
    fail_manifest(named + ".dtype", fmt::format("must be f32 (A, B and the pattern's values), got '{}'", dtype));
  GemmSignature& dense = s.dense;
  dense.epilogue = epilogue_field(entry, named, true);
  dense.a = {DType::f32, Layout::row_major()};
  dense.b = {DType::f32, Layout::col_major()};  // Bᵀ as GEMM's K×N operand
  dense.c = {DType::f32, Layout::zero()};
  dense.d = {DType::f32, Layout::row_major()};
  dense.inputs = epilogue_inputs(dense.epilogue);
  check_signature(s, named);
  return s;
}

bool flag_field(const json& entry, const std::string& field, const std::string& named) {
  if (!entry.contains(field)) return false;
  if (!entry[field].is_boolean()) fail_manifest(named + "." + field, "must be true or false");
  return entry[field].get<bool>();
}

std::int64_t head_dim_field(const json& entry, const std::string& field, const std::string& named,
                            std::int64_t fallback) {
  if (!entry.contains(field)) {
    if (fallback == 0) fail_manifest(named, fmt::format("'{}' is required", field));
    return fallback;
  }
  const json& v = entry[field];
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 512)
    fail_manifest(named + "." + field, "must be an integer in [1, 512]");
  return v.get<std::int64_t>();
}

// Attention: Q, K, V and O of `dtype` (f32, bf16) with unit head-dimension strides, causal or not, the log-sum-exp
// or not, a score modifier over s, i, j, h, b and named scalars (tensors not yet: their reads are proven in range at
// run time by the runtime, which a library's C driver cannot do).
AttentionSignature attention_signature(const json& entry, const std::string& named) {
  only_fields(entry,
              {"name", "op", "dtype", "head_dim", "head_dim_v", "causal", "lse", "score_mod", "targets", "shapes"},
              named);
  AttentionSignature s;
  const std::string dtype = text_field(entry, "dtype", named, "f32");
  if (dtype != "f32" && dtype != "bf16")
    fail_manifest(named + ".dtype", fmt::format("must be f32 or bf16, got '{}'", dtype));
  s.dtype = *parse_dtype(dtype);
  s.head_dim_qk = head_dim_field(entry, "head_dim", named, 0);
  s.head_dim_v = head_dim_field(entry, "head_dim_v", named, s.head_dim_qk);
  s.causal = flag_field(entry, "causal", named);
  s.lse = flag_field(entry, "lse", named);
  try {
    s.score_mod = ScoreModifier::parse(text_field(entry, "score_mod", named, "s"));
  } catch (const Error& e) {
    fail_manifest(named + ".score_mod", e.what());
  }
  if (!s.score_mod.tensors().empty())
    fail_manifest(named + ".score_mod",
                  fmt::format("reads the tensor '{}': score modifiers that read tensors are not in "
                              "libraries yet (scalars are)",
                              s.score_mod.tensors().front().name));
  try {
    s.check();
  } catch (const Error& e) {
    fail_manifest(named, e.what());
  }
  return s;
}

LibraryKernel parse_kernel(const json& entry, const std::string& where) {
  if (!entry.is_object()) fail_manifest(where, "must be an object");
  LibraryKernel k;
  k.name = text_field(entry, "name", where);
  const std::string named = fmt::format("{} ('{}')", where, k.name);
  if (!c_identifier(k.name)) fail_manifest(named + ".name", "must be a C identifier of at most 63 characters");
  k.op = text_field(entry, "op", named);
  if (k.op == "gemm")
    k.signature = gemm_signature(entry, named);
  else if (k.op == "spmm")
    k.signature = spmm_signature(entry, named);
  else if (k.op == "sddmm")
    k.signature = sddmm_signature(entry, named);
  else if (k.op == "attention")
    k.signature = attention_signature(entry, named);
  else
    fail_manifest(named + ".op", fmt::format("unknown op '{}' (gemm, spmm, sddmm, attention)", k.op));
  const auto* gemm = std::get_if<GemmSignature>(&k.signature);
  const auto* attention = std::get_if<AttentionSignature>(&k.signature);
  const bool int8 = gemm && gemm->b.dtype == DType::i8;
  const bool bf16 = (gemm && gemm->b.dtype == DType::bf16) || (attention && attention->dtype == DType::bf16);

  if (!entry.contains("targets") || !entry["targets"].is_array() || entry["targets"].empty())
    fail_manifest(named + ".targets",
                  "must be a non-empty list such as [\"cpu:avx512\", \"cpu:avx2\"] (or \"cpu:amx\")");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < entry["targets"].size(); ++i) {
    const std::string at = fmt::format("{}.targets[{}]", named, i);
    const json& t = entry["targets"][i];
    if (!t.is_string()) fail_manifest(at, "must be a string");
    const std::string text = t.get<std::string>();
    if (text.rfind("cuda", 0) == 0) fail_manifest(at, fmt::format("'{}': libraries hold CPU kernels so far", text));
    if (text != "cpu:avx512" && text != "cpu:avx2" && text != "cpu:amx")
      fail_manifest(at, fmt::format("'{}' is not cpu:avx512, cpu:avx2 or cpu:amx", text));
    const bool amx = text == "cpu:amx";
    if (amx && !int8 && !bf16)
      fail_manifest(at, "cpu:amx holds AMX tile kernels: bf16 or int8 GEMM and bf16 attention");
    if (!seen.insert(text).second) fail_manifest(at, fmt::format("'{}' is listed twice", text));
    // The extensions a GEMM's or attention's inputs need, whether or not this host has them: the driver checks the
    // running CPU. The sparse kernels widen bf16 and need none.
    CpuTarget target = CpuTarget::named(amx ? "cpu:avx512+amx" : text);
    target.vnni = target.vnni || int8;
    target.avx512_bf16 = target.avx512_bf16 || (bf16 && target.isa == CpuIsa::Avx512);
    target.amx = amx;  // AMX kernels only in the cpu:amx tier, which the driver runs where the CPU and Linux allow
    k.targets.push_back(target);
  }
  if (!entry.contains("shapes") || !entry["shapes"].is_array() || entry["shapes"].empty())
    fail_manifest(named + ".shapes", k.op == "attention"
                                         ? "must be a non-empty list of SQxSKVxHEADSxKV_HEADS to choose configs for"
                                         : "must be a non-empty list of MxNxK[xBATCH] to choose configs for");
  for (std::size_t i = 0; i < entry["shapes"].size(); ++i) {
    const std::string at = fmt::format("{}.shapes[{}]", named, i);
    for (LibraryShape s : parse_shape(entry["shapes"][i], at)) {
      if (k.op == "attention") {
        // SQxSKVxHEADSxKV_HEADS: the query and key lengths, query and KV heads.
        const std::string text = entry["shapes"][i].get<std::string>();
        if (std::count(text.begin(), text.end(), 'x') != 3) fail_manifest(at, "attention takes SQxSKVxHEADSxKV_HEADS");
        s.heads = s.k, s.kv_heads = s.batch, s.k = 0, s.batch = 1;
        if (s.heads % s.kv_heads != 0)
          fail_manifest(at, fmt::format("{} heads are not a multiple of {} KV heads", s.heads, s.kv_heads));
      } else if (k.op != "gemm" && s.batch != 1) {
        fail_manifest(at, fmt::format("{} takes MxNxK, without a batch", k.op));
      }
      k.shapes.push_back(s);
    }
    if (k.shapes.size() > kMostShapes)
      fail_manifest(at, fmt::format("the shapes expand to more than {} (ranges: up to {} sizes each)", kMostShapes,
                                    kRangePoints));
  }
  k.canonical = entry.dump();
  return k;
}

}  // namespace

LibraryManifest parse_library_manifest(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail_manifest("JSON", fmt::format("invalid at byte {}: {}", e.byte, e.what()));
  } catch (const json::exception& e) {  // a number too large for any type (out_of_range.406), ...
    fail_manifest("JSON", e.what());
  }
  if (!j.is_object()) fail_manifest("top level", "must be an object with name and kernels");
  only_fields(j, {"name", "kernels", "schema"}, "top level");
  LibraryManifest m;
  m.name = text_field(j, "name", "top level");
  if (!c_identifier(m.name)) fail_manifest("name", "must be a C identifier of at most 63 characters");
  if (j.contains("schema") && j["schema"] != 1) fail_manifest("schema", "must be 1");
  if (!j.contains("kernels") || !j["kernels"].is_array() || j["kernels"].empty())
    fail_manifest("kernels", "must be a non-empty list");
  std::set<std::string> names;
  for (std::size_t i = 0; i < j["kernels"].size(); ++i) {
    LibraryKernel k = parse_kernel(j["kernels"][i], fmt::format("kernels[{}]", i));
    if (!names.insert(k.name).second)
      fail_manifest(fmt::format("kernels[{}].name", i), fmt::format("'{}' is used twice", k.name));
    m.kernels.push_back(std::move(k));
  }
  m.canonical = j.dump();
  return m;
}

const char* library_manifest_schema() {
  return R"schema({
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
          "op": {"enum": ["gemm", "spmm", "sddmm", "attention"]},
          "dtype": {"enum": ["f32", "bf16", "i8"], "default": "f32", "description": "gemm: A and B (i8: u8 A, i8 B); spmm: A's values and B (f32, bf16); sddmm: f32; attention: Q, K, V, O (f32, bf16)"},
          "out_dtype": {"enum": ["f32", "bf16", "u8", "i8"], "default": "f32", "description": "gemm only"},
          "format": {"enum": ["csr", "bsr"], "default": "csr", "description": "spmm only: A's storage"},
          "block": {"type": "string", "pattern": "^[0-9]{1,2}x[0-9]{1,2}$", "description": "spmm with format bsr: RxC blocks"},
          "index": {"enum": ["i32", "i64"], "default": "i32", "description": "spmm, sddmm: row offsets and column indices"},
          "head_dim": {"type": "integer", "minimum": 1, "maximum": 512, "description": "attention (required): Q's and K's head dimension"},
          "head_dim_v": {"type": "integer", "minimum": 1, "maximum": 512, "description": "attention: V's and O's (default head_dim)"},
          "causal": {"type": "boolean", "default": false, "description": "attention: aligned bottom-right"},
          "lse": {"type": "boolean", "default": false, "description": "attention: also the log-sum-exp per query row"},
          "score_mod": {"type": "string", "default": "s", "description": "attention: a score modifier over s, i, j, h, b and named scalars"},
          "layout_a": {"enum": ["row", "col"], "default": "row", "description": "gemm only"},
          "layout_b": {"enum": ["row", "col"], "default": "row", "description": "gemm only"},
          "layout_c": {"enum": ["row", "col"], "default": "row", "description": "gemm, spmm: C and D"},
          "epilogue": {"type": "string", "default": "alpha*acc (sddmm: acc, in the sampled dialect with s)"},
          "targets": {"type": "array", "minItems": 1, "uniqueItems": true, "items": {"enum": ["cpu:amx", "cpu:avx512", "cpu:avx2"]}},
          "shapes": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[0-9]+(\\.\\.[0-9]+)?(x[0-9]+(\\.\\.[0-9]+)?){2,3}$"}, "description": "MxNxK to choose configs for (gemm also MxNxKxBATCH); spmm: A M×K, B K×N; sddmm: pattern M×N, A M×K; attention: SQxSKVxHEADSxKV_HEADS. An extent may be a range LO..HI: its ends and the powers of two between, at most 5 sizes spread in log scale"}
        }
      }
    }
  }
}
)schema";
}

}  // namespace tessera
