// AMX: the kernels are emitted and compiled on every host (their assembly holds the tile instructions and no tile
// spills), a host without AMX refuses them with the missing flag named, the config rules name what they reject, and
// on an AMX host the native kernels match the emulated ones' exact sums. (The emulated kernels' own exactness:
// GemmInt8.AmxTilesEmulatedAreExact, GemmBf16.AmxTilesEmulatedAreExact.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "generator/core/dtype.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {

std::int64_t count(const std::string& text, const char* pattern) {
  const std::regex re(pattern);
  return std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator());
}

GemmProblem low_precision_problem(bool int8, std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.signature.a.dtype = int8 ? DType::u8 : DType::bf16;
  p.signature.b.dtype = int8 ? DType::i8 : DType::bf16;
  p.signature.accumulator = int8 ? DType::i32 : DType::f32;
  return p;
}

TEST(GemmAmx, KernelsAreEmittedForEveryTileShapeOnAnyHost) {
  if (!CpuTarget::host_supports(CpuIsa::Avx512)) GTEST_SKIP() << "host lacks avx512f (the assembler's target)";
  const CpuTarget amx = CpuTarget::named("cpu:amx");
  ASSERT_TRUE(amx.amx);
  for (const bool int8 : {true, false}) {
    const GemmProblem p = low_precision_problem(int8, 512, 512, 512);
    const CpuGemmConfig chosen = CpuGemmConfig::default_for(p, amx);
    EXPECT_EQ(chosen.amx, CpuGemmConfig::kAmxTiles) << "default_for on an AMX target";
    for (const auto& [mr, nr] : {std::pair{16, 16}, {16, 32}, {16, 48}, {32, 16}, {32, 32}}) {
      SCOPED_TRACE(fmt::format("{} {}x{}", int8 ? "int8" : "bf16", mr, nr));
      const CpuGemmConfig c = amx_config(p, amx, mr, nr, int8 ? 256 : 128);
      const std::string assembly = gemm_host_assembly({p.signature, c, amx});
      const int products = (mr / 16) * (nr / 16);
      EXPECT_EQ(count(assembly, int8 ? R"(\ttdpbusd\t)" : R"(\ttdpbf16ps\t)"), products);
      EXPECT_EQ(count(assembly, R"(\ttilezero\t)"), 0) << "the accumulators start from memory (zeros or sums)";
      EXPECT_EQ(count(assembly, R"(\ttilestored\t)"), products) << "only the accumulators' final stores: no spills";
      EXPECT_EQ(count(assembly, R"(\ttileloadd\t)"), products + mr / 16 + nr / 16)
          << "one load per accumulator, A and B tile: no spills";
      EXPECT_EQ(count(assembly, R"(\tldtilecfg\t)"), 1);
      EXPECT_GE(count(assembly, R"(\ttilerelease)"), 1);
    }
  }
}

TEST(GemmAmx, ConfigRulesNameWhatTheyReject) {
  CpuTarget amx = CpuTarget::named("cpu:amx");
  const GemmProblem p = low_precision_problem(true, 64, 64, 64);
  const auto rejects = [&](CpuGemmConfig c, const GemmSignature& s, const CpuTarget& t, const char* words) {
    try {
      validate(s, c, t);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const CpuGemmConfig good = amx_config(p, amx, 32, 32, 256);
  EXPECT_NO_THROW(validate(p.signature, good, amx));
  CpuGemmConfig c = good;
  c.mr = 8, c.mc = 256;
  rejects(c, p.signature, amx, "MR and NR must be multiples of 16");
  c = good;
  c.mr = 32, c.nr = 48, c.nc = 480;
  rejects(c, p.signature, amx, "needs 11 tile registers");
  c = good;
  c.kc = 96;
  rejects(c, p.signature, amx, "multiple of 64");
  c = good;
  c.amx = 3;
  rejects(c, p.signature, amx, "must be 0");
  GemmSignature f32 = p.signature;
  f32.a.dtype = f32.b.dtype = f32.accumulator = DType::f32;
  rejects(good, f32, amx, "bf16 or int8");
  CpuTarget none = amx;
  none.amx = false;
  if (CpuTarget::host_amx_missing().empty()) GTEST_SKIP() << "the rest needs a host without AMX";
  rejects(good, p.signature, none, "amx_tile");
}

TEST(GemmAmx, AHostWithoutAmxRefusesItsTargetNamingTheFlag) {
  const std::string missing = CpuTarget::host_amx_missing();
  if (missing.empty()) GTEST_SKIP() << "this host has AMX";
  try {
    RuntimeOptions o;
    o.target = "cpu:amx";
    Runtime runtime(o);
    ADD_FAILURE() << "cpu:amx accepted on a host that lacks it";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("AMX unavailable: " + missing), std::string::npos) << e.what();
  }
  // The default target of such a host never picks AMX kernels.
  Runtime runtime;
  EXPECT_FALSE(runtime.target().amx);
  for (const bool int8 : {true, false})
    EXPECT_EQ(CpuGemmConfig::default_for(low_precision_problem(int8, 512, 512, 512), runtime.target()).amx,
              CpuGemmConfig::kAmxNone);
}

// On an AMX host: the native tiles against the emulated ones, bit for bit (int8 sums are exact; bf16 products exact
// and summed in the instructions' order), on edges and several slabs.
TEST(GemmAmx, NativeTilesMatchTheEmulatedOnes) {
  if (const std::string missing = CpuTarget::host_amx_missing(); !missing.empty())
    GTEST_SKIP() << "AMX unavailable: " << missing;
  Runtime runtime;
  std::mt19937 rng(5);
  for (const bool int8 : {true, false})
    for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{131, 77, 203}, {16, 16, 64}, {45, 100, 1000}})
      for (const auto& [mr, nr] : {std::pair{16, 48}, {32, 32}}) {
        SCOPED_TRACE(fmt::format("{} {}x{}x{} tile {}x{}", int8 ? "int8" : "bf16", m, n, k, mr, nr));
        std::vector<std::uint8_t> a(static_cast<std::size_t>(m * k));
        std::vector<std::uint16_t> a16(a.size()), b16(static_cast<std::size_t>(k * n));
        std::vector<std::int8_t> b(b16.size());
        std::uniform_int_distribution<int> byte(0, 255);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(byte(rng));
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::int8_t>(byte(rng) - 128);
        // bf16: integers of at most 8 bits are exact.
        for (std::size_t i = 0; i < a.size(); ++i) a16[i] = to_bf16(static_cast<float>(a[i] % 16));
        for (std::size_t i = 0; i < b.size(); ++i) b16[i] = to_bf16(static_cast<float>(b[i] % 16));
        std::vector<float> native(static_cast<std::size_t>(m * n)), emulated(native.size());
        GemmArgs args;
        args.a = Tensor::matrix(int8 ? static_cast<void*>(a.data()) : a16.data(), m, k, Layout::row_major(), 0,
                                int8 ? DType::u8 : DType::bf16);
        args.b = Tensor::matrix(int8 ? static_cast<void*>(b.data()) : b16.data(), k, n, Layout::row_major(), 0,
                                int8 ? DType::i8 : DType::bf16);
        args.d = Tensor::matrix(native.data(), m, n);
        const GemmProblem p = runtime.describe(args);
        for (const int amx : {CpuGemmConfig::kAmxTiles, CpuGemmConfig::kAmxEmulated}) {
          CpuGemmConfig c = amx_config(p, runtime.target(), mr, nr, int8 ? 256 : 128);
          c.amx = amx;
          args.d = Tensor::matrix(amx == CpuGemmConfig::kAmxTiles ? native.data() : emulated.data(), m, n);
          runtime.compile(p, c).run(args);
        }
        EXPECT_EQ(native, emulated);
      }
}

}  // namespace
}  // namespace tessera
