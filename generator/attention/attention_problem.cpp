#include "generator/attention/attention_problem.hpp"

#include "generator/attention/attention_json.hpp"
#include "generator/core/error.hpp"

namespace tessera {

void AttentionSignature::check() const {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    throw InvalidArgument("dtype", "attention takes f32, bf16 or f16, not " + std::string(dtype_name(dtype)));
  if (head_dim_qk < 1 || head_dim_qk > 512) throw InvalidArgument("head_dim", "must be in [1, 512]");
  if (head_dim_v < 1 || head_dim_v > 512) throw InvalidArgument("head_dim_v", "must be in [1, 512]");
}

nlohmann::json to_json(const AttentionSignature& signature) {
  return {{"dtype", dtype_name(signature.dtype)},
          {"head_dim_qk", signature.head_dim_qk},
          {"head_dim_v", signature.head_dim_v},
          {"unit_d", {signature.q_unit_d, signature.k_unit_d, signature.v_unit_d, signature.o_unit_d}},
          {"causal", signature.causal},
          {"lse", signature.lse},
          {"score_mod", signature.score_mod.text()}};
}

template <>
AttentionSignature from_json<AttentionSignature>(const nlohmann::json& j) {
  AttentionSignature s;
  const auto dtype = parse_dtype(j.at("dtype").get<std::string>());
  if (!dtype) throw InvalidArgument("dtype", "unknown type " + j.at("dtype").get<std::string>());
  s.dtype = *dtype;
  s.head_dim_qk = integer_at<std::int64_t>(j, "head_dim_qk");
  s.head_dim_v = integer_at<std::int64_t>(j, "head_dim_v");
  const auto& unit = j.at("unit_d");
  if (!unit.is_array() || unit.size() != 4) throw InvalidArgument("unit_d", "must be 4 booleans (q, k, v, o)");
  s.q_unit_d = unit[0].get<bool>(), s.k_unit_d = unit[1].get<bool>();
  s.v_unit_d = unit[2].get<bool>(), s.o_unit_d = unit[3].get<bool>();
  s.causal = j.at("causal").get<bool>();
  s.lse = j.at("lse").get<bool>();
  s.score_mod = ScoreModifier::parse(j.at("score_mod").get<std::string>());
  s.check();
  return s;
}

bool operator==(const AttentionSignature& x, const AttentionSignature& y) { return to_json(x) == to_json(y); }

double AttentionProblem::score_pairs() const {
  double pairs = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t sq = q_len(b), skv = kv_len(b);
    if (!signature.causal) {
      pairs += static_cast<double>(sq) * static_cast<double>(skv);
      continue;
    }
    for (std::int64_t i = 0; i < sq; ++i) pairs += static_cast<double>(visible_keys(true, i, sq, skv));
  }
  return pairs * static_cast<double>(heads);
}

double AttentionProblem::flops() const {
  double pairs = 0;
  for (std::int64_t b = 0; b < batch; ++b) pairs += static_cast<double>(q_len(b)) * static_cast<double>(kv_len(b));
  if (signature.causal) pairs /= 2;
  return 2.0 * pairs * static_cast<double>(heads) * static_cast<double>(signature.head_dim_qk + signature.head_dim_v);
}

}  // namespace tessera
