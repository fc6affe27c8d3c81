// CpuGemmSpec: canonical JSON round trip, hash stability, names, and validate's rules.
#include <gtest/gtest.h>

#include "generator/core/error.hpp"
#include "generator/gemm/cpu_gemm_spec.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {
namespace {

// "accepted", or the rule validate() names.
std::string validation_of(const GemmSignature& s, const CpuGemmConfig& c, const CpuTarget& t) {
  try {
    validate(s, c, t);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "accepted";
}

CpuTarget avx512_target() {
  CpuTarget t;
  t.isa = CpuIsa::Avx512;
  return t;
}

CpuGemmSpec sample_spec() {
  CpuGemmSpec spec;
  spec.signature.a = {DType::f32, Layout::col_major()};
  spec.signature.epilogue = Epilogue::parse("gelu(alpha*acc + bias[n]) + residual[m,n]");
  spec.signature.c = {DType::f32, Layout::zero()};
  spec.signature.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}},
                           {"residual", IndexForm::MN, {DType::f32, Layout::col_major()}}};
  spec.config = CpuGemmConfig{8, 32, 256, 128, 512, 4};
  spec.target = avx512_target();
  return spec;
}

TEST(CpuGemmSpec, JsonRoundTripKeepsEverything) {
  // from_json checks the target against this host: the sample spec on an AVX-512 host, its AVX2 twin elsewhere.
  CpuGemmSpec spec = sample_spec();
  if (!CpuTarget::host_supports(CpuIsa::Avx512)) {
    spec.target.isa = CpuIsa::Avx2;
    spec.config = CpuGemmConfig{6, 16, 256, 96, 512, 4};
  }
  const CpuGemmSpec back = from_json<CpuGemmSpec>(nlohmann::json::parse(spec.canonical_json()));
  EXPECT_EQ(back.signature, spec.signature);
  EXPECT_EQ(back.config, spec.config);
  EXPECT_EQ(back.target.str(), spec.target.str());
  EXPECT_EQ(back.canonical_json(), spec.canonical_json());
  EXPECT_EQ(back.hash(), spec.hash());
  EXPECT_EQ(back.name(), spec.name());
}

TEST(CpuGemmSpec, CanonicalJsonIgnoresKeyOrderAndSpacing) {
  const CpuGemmSpec spec = sample_spec();
  const std::string text = spec.canonical_json();
  // Keys are sorted and there is no whitespace, so the text itself is canonical.
  std::string outside_strings = text;
  const std::string epilogue = spec.signature.epilogue.text();
  outside_strings.erase(outside_strings.find(epilogue), epilogue.size());
  EXPECT_EQ(outside_strings.find(' '), std::string::npos) << text;
  EXPECT_LT(text.find("\"config\""), text.find("\"op\""));
  EXPECT_LT(text.find("\"op\""), text.find("\"signature\""));
  // The epilogue is stored canonically, so differently spaced text gives the same spec.
  CpuGemmSpec other = spec;
  other.signature.epilogue = Epilogue::parse("gelu( alpha * acc + bias[ n ] )+residual[m ,n]");
  EXPECT_EQ(other.hash(), spec.hash());
}

TEST(CpuGemmSpec, HashIsStableAcrossBuildsAndMachines) {
  // XXH3-128 of the canonical JSON: pinned so that an accidental change to the spec format shows here
  // (it would silently invalidate every cache and tuning record).
  const CpuGemmSpec spec = sample_spec();
  EXPECT_EQ(spec.canonical_json(),
            R"({"config":{"fixed_k":0,"fixed_m":0,"fixed_n":0,"k_unroll":4,"kc":256,"mc":128,"mr":8,"nc":512,"nr":32,)"
            R"("pack_a":true,"pack_b":true},"op":"gemm",)"
            R"("signature":{"a":)"
            R"({"dtype":"f32","layout":"col"},"accumulator":"f32","b":{"dtype":"f32","layout":"row"},"c":{"dtype":)"
            R"("f32","layout":"zero"},"d":{"dtype":"f32","layout":"row"},"epilogue":"gelu(alpha*acc + bias[n]) + )"
            R"(residual[m,n]","inputs":[{"dtype":"f32","index":"n","layout":"row","name":"bias"},{"dtype":"f32",)"
            R"("index":"m,n","layout":"col","name":"residual"}]},"target":"cpu:avx512","version":3})");
  EXPECT_EQ(spec.hash().hex(), "d16be98eceeb3a70922a672ece691055");
}

TEST(CpuGemmSpec, DifferentSpecsHashDifferently) {
  const CpuGemmSpec base = sample_spec();
  CpuGemmSpec layout = base, config = base, target = base, epilogue = base;
  layout.signature.b.layout = Layout::col_major();
  config.config.kc = 128;
  target.target.isa = CpuIsa::Avx2;
  epilogue.signature.epilogue = Epilogue::parse("gelu(alpha*acc + bias[n]) - residual[m,n]");
  for (const CpuGemmSpec* s : {&layout, &config, &target, &epilogue}) {
    EXPECT_NE(s->hash(), base.hash());
    EXPECT_NE(s->name(), base.name());
  }
}

TEST(CpuGemmSpec, NameIsAProceduralSymbol) {
  const std::string name = sample_spec().name();
  EXPECT_EQ(name.rfind("gemm_f32_crzr_8x32x256_gelu_bias_residual_avx512_", 0), 0u) << name;
  for (char ch : name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << name;
  CpuGemmSpec plain;
  plain.target = avx512_target();
  EXPECT_NE(plain.name().find("_rrrr_"), std::string::npos);
  EXPECT_NE(plain.name().find("_ab_"), std::string::npos);
}

TEST(CpuGemmSpec, FromJsonRejectsMalformedSpecs) {
  const nlohmann::json good = to_json(sample_spec());
  auto broken = [&](auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    return j;
  };
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j.erase("config"); })), InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["version"] = 99; })), InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["op"] = "conv"; })), InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["config"]["mr"] = "eight"; })), InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["signature"]["a"]["dtype"] = "f64"; })), InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["signature"]["b"]["layout"] = "diagonal"; })),
               InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["signature"]["epilogue"] = "gelu("; })), EpilogueError);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["signature"]["inputs"] = nlohmann::json::array(); })),
               InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["target"] = "tpu"; })), InvalidArgument);
  EXPECT_THROW(from_json<CpuGemmSpec>(broken([](auto& j) { j["config"]["mr"] = 13; })), Error);
}

// Integers that are not JSON integers of the field's range are refused, not cast (found by tests/fuzz: a version of
// 3.7e39 was converted to int, undefined behaviour).
TEST(CpuGemmSpec, FromJsonRefusesIntegersOutOfRange) {
  // from_json checks the target against this host: the sample spec on an AVX-512 host, its AVX2 twin elsewhere.
  CpuGemmSpec spec = sample_spec();
  if (!CpuTarget::host_supports(CpuIsa::Avx512)) {
    spec.target.isa = CpuIsa::Avx2;
    spec.config = CpuGemmConfig{6, 16, 256, 96, 512, 4};
  }
  const nlohmann::json good = to_json(spec);
  for (const nlohmann::json& bad : {nlohmann::json(3.7e39), nlohmann::json(4294967304LL), nlohmann::json(-4294967288LL),
                                    nlohmann::json(8.5), nlohmann::json(18446744073709551615ULL)}) {
    nlohmann::json j = good;
    j["config"]["mr"] = bad;
    EXPECT_THROW(from_json<CpuGemmSpec>(j), InvalidArgument) << bad.dump();
    j = good;
    j["version"] = bad;
    EXPECT_THROW(from_json<CpuGemmSpec>(j), InvalidArgument) << bad.dump();
  }
  nlohmann::json j = good;
  j["config"]["mr"] = nlohmann::json(4ULL);  // an unsigned JSON integer in range is an integer
  EXPECT_EQ(from_json<CpuGemmSpec>(j).config.mr, 4);
}

TEST(Validate, StatesTheViolatedRule) {
  const CpuGemmSpec spec = sample_spec();
  const auto rule = [&](const CpuGemmConfig& c, const GemmSignature& s = sample_spec().signature) {
    return validation_of(s, c, spec.target);
  };
  EXPECT_EQ(rule(spec.config), "accepted");
  CpuGemmConfig c = spec.config;
  c.nr = 24;
  EXPECT_EQ(rule(c), "NR (24) must be a positive multiple of the vector width (16) on cpu:avx512");
  c = spec.config;
  c.mr = 16;
  EXPECT_EQ(rule(c),
            "MR×NR register tile 16x32 needs 35 vector registers (32 accumulators + 2 B + 1 broadcast), "
            "cpu:avx512 has 32");
  c = spec.config;
  c.mc = 100;
  EXPECT_EQ(rule(c), "MC (100) must be a positive multiple of MR (8)");
  c = spec.config;
  c.nc = 48;
  EXPECT_EQ(rule(c), "NC (48) must be a positive multiple of NR (32)");
  c = spec.config;
  c.k_unroll = 3;
  EXPECT_EQ(rule(c), "K unroll (3) must be 1, 2, 4 or 8");
  c = spec.config;
  c.kc = 0;
  EXPECT_EQ(rule(c), "KC (0) must be in 1..4096");
  GemmSignature s = spec.signature;
  s.a.dtype = DType::f16;
  EXPECT_EQ(rule(spec.config, s),
            "A dtype f16 is not supported on cpu:avx512 (A and B both f32, both bf16, or u8 A and i8 B)");
  s = spec.signature;
  s.d.layout = Layout::zero();
  EXPECT_EQ(rule(spec.config, s), "D layout must be row or col, not zero");
}

TEST(Validate, DefaultConfigIsValidOnEveryIsa) {
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512}) {
    CpuTarget t;
    t.isa = isa;
    const GemmProblem p;
    EXPECT_NO_THROW(validate(p.signature, CpuGemmConfig::default_for(p, t), t)) << t.str();
    // x·Wᵀ shapes get dot kernels below 12 rows, transposed kernels above; their tiles must fit each ISA's
    // registers.
    for (std::int64_t m : {1, 2, 8, 11, 12, 16, 32, 48, 64, 65, 4096}) {
      GemmProblem xw;
      xw.m = m, xw.n = 4096, xw.k = 4096;
      xw.signature.b.layout = Layout::col_major();
      const CpuGemmConfig c = CpuGemmConfig::default_for(xw, t);
      EXPECT_EQ(c.dot, m < 12) << m;
      EXPECT_EQ(c.transpose, m >= 12 && m < 4096) << m;
      EXPECT_NO_THROW(validate(xw.signature, c, t)) << t.str() << " M " << m;
    }
    // Aᵀ·Bᵀ is transposed into A·B unless N is small against M.
    for (auto [m, n, transposed_default] : {std::tuple{2, 4096, true}, {777, 333, true}, {4096, 64, false}}) {
      GemmProblem cc;
      cc.m = m, cc.n = n, cc.k = 512;
      cc.signature.a.layout = cc.signature.b.layout = Layout::col_major();
      const CpuGemmConfig c = CpuGemmConfig::default_for(cc, t);
      EXPECT_EQ(c.transpose, transposed_default) << m << "x" << n;
      EXPECT_NO_THROW(validate(cc.signature, c, t)) << t.str() << " " << m << "x" << n;
    }
  }
}

TEST(Validate, DotKernelRules) {
  GemmSignature s;
  s.b.layout = Layout::col_major();
  CpuGemmConfig c;
  c.dot = true, c.pack_a = c.pack_b = false, c.mr = 4, c.nr = 6, c.mc = 32, c.nc = 240, c.kc = 1024;
  const CpuTarget t = avx512_target();
  EXPECT_NO_THROW(validate(s, c, t));
  const auto rule = [&](const CpuGemmConfig& x, const GemmSignature& sig) { return validation_of(sig, x, t); };
  CpuGemmConfig x = c;
  x.nr = 17;
  EXPECT_EQ(rule(x, s), "NR (17) of a dot kernel must be in 1..16 (one lane of the result per column)");
  x = c;
  x.mr = 5, x.nr = 6, x.mc = 30;
  EXPECT_EQ(rule(x, s), "dot tile 5x6 needs 36 vector registers (30 accumulators + 5 A + 1 B), cpu:avx512 has 32");
  GemmSignature row_b;
  EXPECT_EQ(rule(c, row_b), "a dot kernel reads A and B along K: row-major A and column-major B, not row and row");
  x = c;
  x.pack_b = true;
  EXPECT_EQ(rule(x, s), "a dot kernel packs nothing and has runtime sizes");
  // A dot config survives JSON; a config without one serialises as before dot kernels existed.
  EXPECT_EQ(from_json<CpuGemmConfig>(to_json(c)), c);
  EXPECT_FALSE(to_json(CpuGemmConfig{}).contains("dot"));
}

// A transposed config is validated as the config of the transposed product, and says so.
TEST(Validate, TransposedKernelRules) {
  GemmSignature rc;
  rc.b.layout = Layout::col_major();
  rc.epilogue = Epilogue::parse("acc + bias[n]");
  rc.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}}};
  CpuGemmConfig c;
  c.transpose = true, c.pack_a = false, c.pack_b = true;
  const CpuTarget t = avx512_target();
  EXPECT_NO_THROW(validate(rc, c, t));
  const auto rule = [&](const CpuGemmConfig& x, const GemmSignature& sig) { return validation_of(sig, x, t); };
  // The transposed product of A·Bᵀ is again A·Bᵀ, whose B (Aᵀ) must be packed; that of Aᵀ·Bᵀ is A·B.
  CpuGemmConfig x = c;
  x.pack_b = false;
  EXPECT_EQ(rule(x, rc),
            "transposed (Dᵀ = Bᵀ·Aᵀ): unpacked B needs row-major B (NR contiguous columns per row), not col");
  GemmSignature cc = rc;
  cc.a.layout = Layout::col_major();
  EXPECT_EQ(rule(x, cc), "accepted");
  // Sizes compiled in are the transposed product's; its fixed-size kernel reads both operands in place.
  x = c;
  x.fixed_m = x.fixed_n = x.fixed_k = 16, x.pack_b = false, x.kc = 16, x.mc = 16, x.nc = 32;
  EXPECT_EQ(rule(x, cc), "accepted");
  EXPECT_EQ(rule(x, rc),
            "transposed (Dᵀ = Bᵀ·Aᵀ): unpacked B needs row-major B (NR contiguous columns per row), not col");
  // The transposed signature: operands swap with transposed layouts, [n] tensors become [m] ones.
  const GemmSignature tr = transposed(rc);
  EXPECT_EQ(tr.a.layout, Layout::row_major());
  EXPECT_EQ(tr.b.layout, Layout::col_major());
  EXPECT_EQ(tr.d.layout, Layout::col_major());
  EXPECT_EQ(tr.inputs[0].form, IndexForm::M);
  EXPECT_EQ(tr.inputs[0].operand.layout, Layout::col_major());
  EXPECT_TRUE(transposed(tr) == rc);
  // JSON round trip; a config without it serialises as before transposed kernels existed (spec hashes stay).
  EXPECT_EQ(from_json<CpuGemmConfig>(to_json(c)), c);
  EXPECT_FALSE(to_json(CpuGemmConfig{}).contains("transpose"));
  EXPECT_NE((CpuGemmSpec{rc, c, t}).name().find("_t_"), std::string::npos);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Cost models are trained and evaluated for the machine that recorded them, whatever this host runs: a named target
// needs no ISA check, a target to run kernels on does.
TEST(CpuTarget, NamedTargetsNeedNotRunOnThisHost) {
  EXPECT_EQ(CpuTarget::named("cpu:avx512").str(), "cpu:avx512");
  EXPECT_EQ(CpuTarget::named("cpu:avx512").vector_lanes(), 16);
  EXPECT_EQ(CpuTarget::named("cpu:avx2").str(), "cpu:avx2");
  EXPECT_EQ(CpuTarget::named("cpu").str(), CpuTarget::host().str());
  EXPECT_THROW(CpuTarget::named("cpu:sse2"), InvalidArgument);
  if (CpuTarget::host_supports(CpuIsa::Avx512))
    EXPECT_EQ(CpuTarget::parse("cpu:avx512").str(), "cpu:avx512");
  else
    EXPECT_THROW(CpuTarget::parse("cpu:avx512"), Unavailable);
}

}  // namespace
}  // namespace tessera
