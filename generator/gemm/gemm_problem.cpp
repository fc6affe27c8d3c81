#include "generator/gemm/gemm_problem.hpp"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {

namespace {

nlohmann::json operand_json(const OperandSignature& o) {
  return {{"dtype", std::string(dtype_name(o.dtype))}, {"layout", std::string(o.layout.name())}};
}

DType dtype_from(const nlohmann::json& j, const std::string& what) {
  const auto d = parse_dtype(j.get<std::string>());
  if (!d) throw InvalidArgument(what, "unknown dtype '" + j.get<std::string>() + "'");
  return *d;
}

OperandSignature operand_from(const nlohmann::json& j, const std::string& what) {
  OperandSignature o;
  o.dtype = dtype_from(j.at("dtype"), what + ".dtype");
  const auto layout = Layout::parse(j.at("layout").get<std::string>());
  if (!layout) throw InvalidArgument(what + ".layout", "unknown layout '" + j.at("layout").get<std::string>() + "'");
  o.layout = *layout;
  return o;
}

}  // namespace

void GemmSignature::check() const {
  const auto& tensors = epilogue.tensors();
  if (tensors.size() != inputs.size())
    throw InvalidArgument("inputs", "the epilogue reads " + std::to_string(tensors.size()) + " tensor(s) but " +
                                        std::to_string(inputs.size()) + " were bound");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (inputs[i].name != tensors[i].name)
      throw InvalidArgument("inputs", "expected tensor '" + tensors[i].name + "', found '" + inputs[i].name + "'");
    if (inputs[i].form != tensors[i].form)
      throw InvalidArgument("inputs." + inputs[i].name, "index form does not match the epilogue");
    if (inputs[i].operand.layout.kind() == LayoutKind::Zero)
      throw InvalidArgument("inputs." + inputs[i].name, "an epilogue tensor cannot have the zero layout");
  }
}

nlohmann::json to_json(const GemmSignature& signature) {
  nlohmann::json in = nlohmann::json::array();
  for (const auto& i : signature.inputs)
    in.push_back({{"name", i.name},
                  {"index", std::string(index_form_name(i.form))},
                  {"dtype", std::string(dtype_name(i.operand.dtype))},
                  {"layout", std::string(i.operand.layout.name())}});
  nlohmann::json j = {{"a", operand_json(signature.a)},
                      {"b", operand_json(signature.b)},
                      {"c", operand_json(signature.c)},
                      {"d", operand_json(signature.d)},
                      {"accumulator", std::string(dtype_name(signature.accumulator))},
                      {"epilogue", signature.epilogue.text()},
                      {"inputs", in}};
  // Only a sampled product (SDDMM) says which dialect its text is in; GEMM's JSON, and so its hashes, stay as they
  // were.
  if (signature.epilogue.sampled()) j["epilogue_dialect"] = "sampled";
  return j;
}

template <>
GemmSignature from_json<GemmSignature>(const nlohmann::json& j) {
  GemmSignature s;
  s.a = operand_from(j.at("a"), "a");
  s.b = operand_from(j.at("b"), "b");
  s.c = operand_from(j.at("c"), "c");
  s.d = operand_from(j.at("d"), "d");
  s.accumulator = dtype_from(j.at("accumulator"), "accumulator");
  const bool sampled = j.contains("epilogue_dialect") && j.at("epilogue_dialect").get<std::string>() == "sampled";
  if (j.contains("epilogue_dialect") && !sampled)
    throw InvalidArgument("epilogue_dialect", "must be \"sampled\" when given, got " + j.at("epilogue_dialect").dump());
  const std::string text = j.at("epilogue").get<std::string>();
  s.epilogue = sampled ? Epilogue::parse_sampled(text) : Epilogue::parse(text);
  for (const auto& i : j.at("inputs")) {
    EpilogueInput in;
    in.name = i.at("name").get<std::string>();
    const std::string form = i.at("index").get<std::string>();
    if (form == "m")
      in.form = IndexForm::M;
    else if (form == "n")
      in.form = IndexForm::N;
    else if (form == "m,n")
      in.form = IndexForm::MN;
    else
      throw InvalidArgument("inputs." + in.name + ".index", "must be m, n or m,n");
    in.operand = operand_from(i, "inputs." + in.name);
    s.inputs.push_back(in);
  }
  s.check();
  return s;
}

Hash128 dispatch_key(const GemmProblem& p) {
  const GemmSignature& s = p.signature;
  KeyHasher h;
  for (const OperandSignature* o : {&s.a, &s.b, &s.c, &s.d}) h.add(o->dtype).add(o->layout.kind());
  h.add(s.accumulator).add(std::string_view(s.epilogue.text()));
  for (const auto& in : s.inputs)
    h.add(std::string_view(in.name)).add(in.form).add(in.operand.dtype).add(in.operand.layout.kind());
  return h.add(p.m).add(p.n).add(p.k).add(p.batch).add(p.threads).add(p.a_cold).add(p.b_cold).digest();
}

GemmSignature transposed(const GemmSignature& s) {
  GemmSignature t = s;
  const auto flip = [](const OperandSignature& o) { return OperandSignature{o.dtype, o.layout.transposed()}; };
  t.a = flip(s.b);
  t.b = flip(s.a);
  t.c = flip(s.c);
  t.d = flip(s.d);
  for (EpilogueInput& in : t.inputs) {
    in.form = in.form == IndexForm::M ? IndexForm::N : in.form == IndexForm::N ? IndexForm::M : IndexForm::MN;
    in.operand = flip(in.operand);
  }
  return t;
}

GemmProblem with_nonempty_output(GemmProblem problem) {
  problem.m = std::max<std::int64_t>(problem.m, 1);
  problem.n = std::max<std::int64_t>(problem.n, 1);
  problem.batch = std::max<std::int64_t>(problem.batch, 1);
  return problem;
}

GemmProblem transposed(const GemmProblem& p) {
  GemmProblem t = p;
  t.m = p.n;
  t.n = p.m;
  t.a_cold = p.b_cold;
  t.b_cold = p.a_cold;
  t.signature = transposed(p.signature);
  return t;
}

bool operator==(const GemmSignature& x, const GemmSignature& y) {
  return x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d && x.accumulator == y.accumulator &&
         (x.epilogue.same_as(y.epilogue) ||
          (x.epilogue.text() == y.epilogue.text() && x.epilogue.sampled() == y.epilogue.sampled())) &&
         x.inputs == y.inputs;
}

void check_extents(const GemmProblem& p) {
  constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;
  for (const auto& [name, value] :
       {std::pair<const char*, std::int64_t>{"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch}}) {
    if (value < 0) throw InvalidArgument(name, "must be >= 0, is " + std::to_string(value));
    if (value > kMaxExtent) throw InvalidArgument(name, "must be <= 2^40, is " + std::to_string(value));
  }
  // Elements of each operand (batch included) as a product of doubles: exact enough to compare with 2^62.
  const double batch = static_cast<double>(std::max<std::int64_t>(1, p.batch));
  for (const auto& [name, rows, cols] :
       {std::tuple<const char*, std::int64_t, std::int64_t>{"a", p.m, p.k}, {"b", p.k, p.n}, {"d", p.m, p.n}})
    if (batch * static_cast<double>(rows) * static_cast<double>(cols) > 0x1p62)
      throw InvalidArgument(name, "has more than 2^62 elements");
  if (p.threads < 0) throw InvalidArgument("threads", "must be >= 0");
}

}  // namespace tessera
