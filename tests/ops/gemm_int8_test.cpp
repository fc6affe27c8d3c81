// int8 GEMM: u8 A × i8 B summed in i32 (vpdpbusd), D = epilogue(f32(sum)). Sums are checked exactly against int64
// sums computed here, the quantisation epilogues against tessera's double reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <regex>

#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.hpp"
#include "tests/test_util.hpp"

namespace tessera {
namespace {

// Row-major u8 A (M×K) and i8 B (K×N; column-major, as nn.Linear keeps its weight, with b_col) with padded rows,
// their padding holding extreme values that would show in any sum that read them; D (M×N, padded) starts as NaN.
struct Int8Case {
  std::int64_t m, n, k, batch = 1;
  bool b_col = false;
  std::int64_t pad = 3;
  std::vector<std::uint8_t> a;
  std::vector<std::int8_t> b;
  std::vector<float> d;
  GemmArgs args;

  Int8Case(std::int64_t m_, std::int64_t n_, std::int64_t k_, std::uint32_t seed, std::int64_t batch_ = 1,
           bool b_col_ = false)
      : m(m_), n(n_), k(k_), batch(batch_), b_col(b_col_) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    a.assign(static_cast<std::size_t>(batch * m * (k + pad)), 255);
    b.assign(static_cast<std::size_t>(batch * (b_col ? n * (k + pad) : k * (n + pad))), -128);
    d.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, batch * m * (n + pad))),
             std::numeric_limits<float>::quiet_NaN());
    for (std::int64_t bi = 0; bi < batch; ++bi) {
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t p = 0; p < k; ++p) a_at(bi, i, p) = static_cast<std::uint8_t>(byte(rng));
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t j = 0; j < n; ++j) b_at(bi, p, j) = static_cast<std::int8_t>(byte(rng) - 128);
    }
    const Layout row = Layout::row_major(), b_layout = b_col ? Layout::col_major() : row;
    const std::int64_t ldb = b_col ? k + pad : n + pad;
    if (batch == 1) {
      args.a = Tensor::matrix(a.data(), m, k, row, k + pad, DType::u8);
      args.b = Tensor::matrix(b.data(), k, n, b_layout, ldb, DType::i8);
      args.d = Tensor::matrix(d.data(), m, n, row, n + pad);
    } else {
      args.a = Tensor::batched(a.data(), batch, m, k, row, k + pad, m * (k + pad), DType::u8);
      args.b =
          Tensor::batched(b.data(), batch, k, n, b_layout, ldb, static_cast<std::int64_t>(b.size()) / batch, DType::i8);
      args.d = Tensor::batched(d.data(), batch, m, n, row, n + pad, m * (n + pad));
    }
  }
  std::uint8_t& a_at(std::int64_t bi, std::int64_t i, std::int64_t p) {
    return a[static_cast<std::size_t>((bi * m + i) * (k + pad) + p)];
  }
  std::int8_t& b_at(std::int64_t bi, std::int64_t p, std::int64_t j) {
    return b[static_cast<std::size_t>(b_col ? (bi * n + j) * (k + pad) + p : (bi * k + p) * (n + pad) + j)];
  }
  float d_at(std::int64_t bi, std::int64_t i, std::int64_t j) const {
    return d[static_cast<std::size_t>((bi * m + i) * (n + pad) + j)];
  }
  // D must hold f32(Σ a·b) exactly (the i32 sum rounded once), and nothing past the matrices may be written.
  void expect_exact_sums() {
    std::int64_t wrong = 0, written = 0;
    for (float x : d) written += !std::isnan(x);
    EXPECT_EQ(written, batch * m * n) << "outputs outside D written, or some not written";
    for (std::int64_t bi = 0; bi < batch; ++bi)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          std::int64_t sum = 0;
          for (std::int64_t p = 0; p < k; ++p) sum += std::int64_t{a_at(bi, i, p)} * b_at(bi, p, j);
          const float want = static_cast<float>(sum), got = d_at(bi, i, j);
          if (got != want && wrong++ == 0)
            ADD_FAILURE() << fmt::format("{}x{}x{} batch {}: d[{}, {}, {}] = {}, expected {}", m, n, k, batch, bi, i, j,
                                         got, want);
        }
    EXPECT_EQ(wrong, 0);
  }
};

// Why this host cannot run int8 kernels ("" when it can).
std::string int8_missing(const CpuTarget& t) {
  if (t.vnni) return "";
  return t.isa == CpuIsa::Avx512 ? "host lacks avx512_vnni" : "host lacks avx_vnni";
}

// The entries of an m×n D (row-major, packed) that differ from the exact integer product Σ_q A(i, q)·B(q, j).
template <class AValue, class BValue>
std::int64_t wrong_sums(std::int64_t m, std::int64_t n, std::int64_t k, const AValue& a, const BValue& b,
                        const float* d) {
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      std::int64_t sum = 0;
      for (std::int64_t q = 0; q < k; ++q) sum += std::int64_t{a(i, q)} * b(q, j);
      wrong += d[i * n + j] != static_cast<float>(sum);
    }
  return wrong;
}

const std::int64_t kEdges[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 33, 63, 65, 100, 129, 257};

TEST(GemmInt8, EdgeShapesAreExact) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  const std::size_t count = std::size(kEdges);
  std::vector<std::array<std::int64_t, 3>> shapes;
  for (std::size_t i = 0; i < count; ++i) {
    shapes.push_back({kEdges[i], kEdges[(i + 5) % count], kEdges[(i + 11) % count]});
    shapes.push_back({kEdges[(i + 11) % count], kEdges[i], kEdges[(i + 5) % count]});
    shapes.push_back({kEdges[(i + 5) % count], kEdges[(i + 11) % count], kEdges[i]});
  }
  shapes.push_back({37, 70, 3077});  // several K slabs, the last one partial, K % 4 = 1
  shapes.push_back({2, 1000, 515});  // GEMV-like rows
  int i = 0;
  for (const auto& [m, n, k] : shapes) {
    Int8Case t(m, n, k, static_cast<std::uint32_t>(i), 1, i % 3 == 2);  // every third with B column-major
    t.args.threads = 1 + i++ % 2;
    runtime.gemm(t.args);
    t.expect_exact_sums();
  }
}

TEST(GemmInt8, BatchesAreExact) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  for (const bool b_col : {false, true}) {
    Int8Case t(19, 45, 77, 5, 3, b_col);
    runtime.gemm(t.args);
    t.expect_exact_sums();
  }
}

// The largest sums: 255 × -128 over 4099 steps is -133,791,360, far past f32's exact integers and past i16: no
// saturation anywhere (vpdpbusd, not vpdpbusds) and one rounding at the end.
TEST(GemmInt8, ExtremeSumsAreExactUntilTheOneRounding) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  for (const int b_value : {-128, 127}) {
    Int8Case t(9, 40, 4099, 3);
    for (std::int64_t i = 0; i < t.m; ++i)
      for (std::int64_t p = 0; p < t.k; ++p) t.a_at(0, i, p) = 255;
    for (std::int64_t p = 0; p < t.k; ++p)
      for (std::int64_t j = 0; j < t.n; ++j) t.b_at(0, p, j) = static_cast<std::int8_t>(b_value);
    runtime.gemm(t.args);
    t.expect_exact_sums();
    EXPECT_EQ(t.d_at(0, 0, 0), static_cast<float>(255.0 * b_value * 4099));
  }
}

// Every config of the int8 variant space computes the same exact sums (K % 4 = 3: a partial last group).
// On the host's ISA and, where it has AVX-VNNI too, on AVX2's (16-byte rows of B interleave in other vectors).
class GemmInt8Isa : public testing::TestWithParam<const char*> {};

TEST_P(GemmInt8Isa, EveryVariantIsExact) {
  RuntimeOptions options;
  options.target = GetParam();
  Runtime runtime(options);
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  // B row-major; column-major with packed panels (M > 128); column-major with dot kernels along K (x·Wᵀ, M <= 128).
  // N = 77: whole slivers of B and an edge one for every NR.
  for (const auto& [m, b_col] : {std::pair{std::int64_t{29}, false}, {131, true}, {29, true}}) {
    Int8Case t(m, 77, 203, 11, 1, b_col);
    const GemmProblem p = runtime.describe(t.args);
    const std::vector<CpuGemmConfig> space = cpu_variants(p, runtime.target());
    ASSERT_GE(space.size(), runtime.target().isa == CpuIsa::Avx512 ? 15u : 4u);
    EXPECT_EQ(std::count_if(space.begin(), space.end(), [](const CpuGemmConfig& c) { return c.dot; }) > 0,
              b_col && m <= 128);
    for (const CpuGemmConfig& c : space) {
      SCOPED_TRACE(to_json(c).dump() + (b_col ? " B column-major" : ""));
      EXPECT_FALSE(c.pack_a);
      EXPECT_EQ(c.kc % 4, 0);
      std::fill(t.d.begin(), t.d.end(), std::numeric_limits<float>::quiet_NaN());
      runtime.compile(p, c).run(t.args);
      t.expect_exact_sums();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, GemmInt8Isa, testing::Values("cpu", "cpu:avx2"));

// AMX tiles with the tile instructions' effect emulated in vector code (CpuGemmConfig::kAmxEmulated), so that every
// AVX-512 VNNI host checks the AMX kernels' tiling exactly: every tile shape, M, N and K edges (K % 4 != 0, one and
// several 64-byte blocks, a partial last block, several slabs), B either layout, batches; the padding of A and B holds
// extreme values that a read past K or N would add.
TEST(GemmInt8, AmxTilesEmulatedAreExact) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  if (runtime.target().isa != CpuIsa::Avx512) GTEST_SKIP() << "AMX kernels are AVX-512 kernels; host lacks avx512f";
  int i = 0;
  for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{1, 16, 1},
                                {17, 33, 5},
                                {131, 77, 203},
                                {45, 100, 1000},
                                {64, 64, 128},
                                {33, 17, 0}})
    for (const auto& [mr, nr] : {std::pair{16, 16}, {16, 32}, {16, 48}, {32, 16}, {32, 32}}) {
      Int8Case t(m, n, k, static_cast<std::uint32_t>(i), i % 3 == 1 ? 2 : 1, i % 2 == 1);
      ++i;
      SCOPED_TRACE(fmt::format("{}x{}x{} tile {}x{} B {}", m, n, k, mr, nr, t.b_col ? "col" : "row"));
      const GemmProblem p = runtime.describe(t.args);
      CpuGemmConfig c = amx_config(p, runtime.target(), mr, nr, 128);  // two blocks per slab: several slabs
      c.amx = CpuGemmConfig::kAmxEmulated;
      runtime.compile(p, c).run(t.args);
      t.expect_exact_sums();
    }
}

// The other signednesses of bytes (i8 × i8, i8 A × u8 B, u8 × u8) on AMX tiles: exact against an integer reference
// for every tile shape, both B layouts, edges and several slabs, emulated on any AVX-512 host and native where AMX is;
// the default of an AMX target (the transposed product for x·Wᵀ with fewer rows than columns: i8 × u8 as tdpbsud)
// too. The vector kernels refuse them, naming the rule.
TEST(GemmInt8, EverySignednessOnAmxTilesIsExact) {
  Runtime runtime;
  if (runtime.target().isa != CpuIsa::Avx512) GTEST_SKIP() << "AMX kernels are AVX-512 kernels; host lacks avx512f";
  const bool native = CpuTarget::host_amx_missing().empty();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const auto& [a_type, b_type] :
       {std::pair{DType::i8, DType::i8}, {DType::i8, DType::u8}, {DType::u8, DType::u8}, {DType::u8, DType::i8}})
    for (const bool b_col : {false, true})
      for (const auto& [m, n, k] :
           {std::array<std::int64_t, 3>{17, 33, 5}, {7, 100, 1000}, {131, 77, 203}, {40, 40, 0}}) {
        SCOPED_TRACE(
            fmt::format("{}x{} {}x{}x{} B {}", dtype_name(a_type), dtype_name(b_type), m, n, k, b_col ? "col" : "row"));
        std::vector<std::uint8_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
        for (auto& x : a) x = static_cast<std::uint8_t>(byte(rng));
        for (auto& x : b) x = static_cast<std::uint8_t>(byte(rng));
        const auto value = [](std::uint8_t x, DType t) {
          return t == DType::i8 ? int{static_cast<std::int8_t>(x)} : int{x};
        };
        std::vector<float> d(static_cast<std::size_t>(m * n));
        GemmArgs args;
        args.a = Tensor::matrix(a.data(), m, k, Layout::row_major(), 0, a_type);
        args.b = Tensor::matrix(b.data(), k, n, b_col ? Layout::col_major() : Layout::row_major(), 0, b_type);
        args.d = Tensor::matrix(d.data(), m, n);
        const GemmProblem p = runtime.describe(args);
        std::vector<CpuGemmConfig> configs;
        for (const auto& [mr, nr] : {std::pair{16, 48}, {32, 32}, {32, 16}}) {
          configs.push_back(amx_config(p, runtime.target(), mr, nr, 128));  // two blocks a slab: several slabs
          configs.back().amx = CpuGemmConfig::kAmxEmulated;
          if (native) {
            configs.push_back(configs.back());
            configs.back().amx = CpuGemmConfig::kAmxTiles;
          }
        }
        if (native) configs.push_back(CpuGemmConfig::default_for(p, runtime.target()));
        for (const CpuGemmConfig& c : configs) {
          std::fill(d.begin(), d.end(), std::numeric_limits<float>::quiet_NaN());
          runtime.compile(p, c).run(args);
          const auto a_at = [&](std::int64_t i, std::int64_t q) {
            return value(a[static_cast<std::size_t>(i * k + q)], a_type);
          };
          const auto b_at = [&](std::int64_t q, std::int64_t j) {
            return value(b[static_cast<std::size_t>(b_col ? j * k + q : q * n + j)], b_type);
          };
          EXPECT_EQ(wrong_sums(m, n, k, a_at, b_at, d.data()), 0) << to_json(c).dump();
        }
        if (a_type == DType::u8 && b_type == DType::i8) continue;
        CpuGemmConfig vector = amx_config(p, runtime.target(), 32, 32, 128);
        vector.amx = CpuGemmConfig::kAmxNone, vector.mr = 4;
        try {
          validate(p.signature, vector, runtime.target());
          ADD_FAILURE() << "a vector kernel accepted";
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("needs AMX tiles"), std::string::npos) << e.what();
        }
      }
}

// A, B and D flush against inaccessible pages, from either side, with K and N residues: a kernel or packing routine
// that reads a byte past an operand (a whole group of 4 at K's end, a whole vector at N's) faults. Every variant.
TEST(GemmInt8, NeverTouchOutsideTheirOperands) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  for (const bool b_col : {false, true})
    for (const bool at_start : {false, true})
      for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{13, 37, 61}, {5, 17, 2}, {3, 100, 131}}) {
        SCOPED_TRACE(fmt::format("{}x{}x{} at_start {} B {}", m, n, k, at_start, b_col ? "col" : "row"));
        test::Guarded<std::uint8_t> a(static_cast<std::size_t>(m * k), at_start);
        test::Guarded<std::int8_t> b(static_cast<std::size_t>(k * n), at_start);
        test::Guarded<float> d(static_cast<std::size_t>(m * n), at_start);
        std::mt19937 rng(static_cast<std::uint32_t>(m + n + k));
        std::uniform_int_distribution<int> byte(0, 255);
        for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<std::uint8_t>(byte(rng));
        for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<std::int8_t>(byte(rng) - 128);
        GemmArgs args;
        args.a = Tensor::matrix(a.data(), m, k, Layout::row_major(), 0, DType::u8);
        args.b = Tensor::matrix(b.data(), k, n, b_col ? Layout::col_major() : Layout::row_major(), 0, DType::i8);
        args.d = Tensor::matrix(d.data(), m, n);
        const GemmProblem p = runtime.describe(args);
        std::vector<CpuGemmConfig> configs = cpu_variants(p, runtime.target());
        if (runtime.target().isa == CpuIsa::Avx512) {  // and the AMX kernels, emulated: the same reads of A and B
          configs.push_back(amx_config(p, runtime.target(), 32, 32, 64));
          configs.back().amx = CpuGemmConfig::kAmxEmulated;
        }
        for (const CpuGemmConfig& c : configs) {
          runtime.compile(p, c).run(args);
          const auto a_at = [&](std::int64_t i, std::int64_t q) { return a.data()[i * k + q]; };
          const auto b_at = [&](std::int64_t q, std::int64_t j) { return b.data()[b_col ? j * k + q : q * n + j]; };
          EXPECT_EQ(wrong_sums(m, n, k, a_at, b_at, d.data()), 0) << to_json(c).dump();
        }
      }
}

// Quantisation parameters in the epilogue text: per-row and per-column scales, a bias, C, activations.
TEST(GemmInt8, QuantisationEpiloguesMatchTheReference) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), value(-1, 1);
  for (const char* text : {"scale_a[m] * scale_b[n] * acc + bias[n]", "relu(scale_b[n] * (acc - 128 * colsum[n]))",
                           "alpha * acc + beta * c", "min(max(acc / 64, -128), 127)"}) {
    SCOPED_TRACE(text);
    Int8Case t(45, 67, 301, 13);
    t.args.epilogue = Epilogue::parse(text);
    std::map<std::string, std::vector<float>> vectors;
    for (const auto& in : t.args.epilogue.tensors()) {
      const std::int64_t length = in.form == IndexForm::M ? t.m : t.n;
      auto& v = vectors[in.name];
      v.resize(static_cast<std::size_t>(length));
      for (auto& x : v) x = in.name.rfind("scale", 0) == 0 ? scale(rng) : 100 * value(rng);
      t.args.inputs[in.name] = Tensor::vector(v.data(), length);
    }
    std::vector<float> c(static_cast<std::size_t>(t.m * t.n));
    for (auto& x : c) x = 1000 * value(rng);
    if (t.args.epilogue.reads_c()) {
      t.args.c = Tensor::matrix(c.data(), t.m, t.n);
      t.args.alpha = 0.5f;
      t.args.beta = 2;
    }
    const GemmReference ref = reference_gemm(t.args);
    runtime.gemm(t.args);
    const Comparison cmp = compare_gemm(ref, t.args.d, false);
    EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
  }
}

// D in a narrower type than f32: requantised to u8 or i8 (rounded to nearest, saturated) or rounded to bf16, by rows
// and (column-major D) by columns, flush against a guard page so that no store runs past D.
TEST(GemmInt8, RequantisedAndBf16OutputsMatchTheReference) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> scale(0.0005f, 0.004f);
  for (const DType out : {DType::u8, DType::i8, DType::bf16})
    for (const bool column_major : {false, true})
      for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{37, 70, 301}, {1, 33, 4}, {64, 129, 64}}) {
        SCOPED_TRACE(fmt::format("{}x{}x{} D {} {}", m, n, k, dtype_name(out), column_major ? "col" : "row"));
        Int8Case t(m, n, k, static_cast<std::uint32_t>(m + n));
        std::vector<float> s(static_cast<std::size_t>(n));
        for (auto& x : s) x = scale(rng);
        // u8 and i8: a scale and a zero point that spread the values over the type's range and past it (saturating).
        t.args.epilogue = Epilogue::parse(out == DType::bf16 ? "scale[n] * acc" : "scale[n] * acc + 100");
        t.args.inputs["scale"] = Tensor::vector(s.data(), n);
        test::Guarded<std::uint16_t> d(static_cast<std::size_t>(m * n));  // room for the widest, bf16
        auto* bytes = reinterpret_cast<char*>(d.data()) + (out == DType::bf16 ? 0 : m * n);  // flush with the page
        std::memset(bytes, 0x5a, static_cast<std::size_t>(m * n * dtype_bytes(out)));
        t.args.d = Tensor::matrix(bytes, m, n, column_major ? Layout::col_major() : Layout::row_major(), 0, out);
        const GemmReference ref = reference_gemm(t.args);
        runtime.gemm(t.args);
        const Comparison cmp = compare_gemm(ref, t.args.d, true);
        EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
        if (out == DType::u8 && m * n > 100) {  // both ends of the range reached: saturation is exercised
          const auto* q = reinterpret_cast<const std::uint8_t*>(bytes);
          EXPECT_EQ(*std::min_element(q, q + m * n), 0);
          EXPECT_EQ(*std::max_element(q, q + m * n), 255);
        }
      }
}

// Sums that fall exactly halfway between two bf16 values (257 + 2j: 9 significant bits) round to the even one.
TEST(GemmInt8, Bf16OutputsRoundTiesToEven) {
  Runtime runtime;
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) GTEST_SKIP() << why;
  const std::int64_t n = 16;
  Int8Case t(1, n, 3, 1);
  for (std::int64_t p = 0; p < 3; ++p) t.a_at(0, 0, p) = 1;
  for (std::int64_t j = 0; j < n; ++j) {
    t.b_at(0, 0, j) = 127, t.b_at(0, 1, j) = 127;
    t.b_at(0, 2, j) = static_cast<std::int8_t>(3 + 2 * j);
  }
  std::vector<std::uint16_t> d(n);
  t.args.d = Tensor::matrix(d.data(), 1, n, Layout::row_major(), 0, DType::bf16);
  runtime.gemm(t.args);
  for (std::int64_t j = 0; j < n; ++j)
    EXPECT_EQ(d[static_cast<std::size_t>(j)], to_bf16(static_cast<float>(257 + 2 * j))) << "sum " << 257 + 2 * j;
}

TEST(GemmInt8, UnsupportedCombinationsAreClearErrors) {
  Runtime runtime;
  Int8Case t(8, 8, 8, 1);
  const auto error_of = [&](const GemmArgs& args) -> std::string {
    try {
      runtime.gemm(args);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  if (const std::string why = int8_missing(runtime.target()); !why.empty()) {
    EXPECT_NE(error_of(t.args).find("int8 GEMM needs"), std::string::npos) << error_of(t.args);
    return;
  }
  // i8 A × u8 B: AMX tiles only (tdpbsud; EverySignednessOnAmxTilesIsExact runs them); the vector kernels refuse it.
  GemmArgs swapped = t.args;
  swapped.a.dtype = DType::i8;
  swapped.b.dtype = DType::u8;
  if (!runtime.target().amx) {
    EXPECT_NE(error_of(swapped).find("needs AMX tiles"), std::string::npos) << error_of(swapped);
  }
  GemmArgs mixed = t.args;  // u8 A × f32 B
  std::vector<float> b32(64, 1.0f);
  mixed.b = Tensor::matrix(b32.data(), 8, 8);
  EXPECT_NE(error_of(mixed).find("u8 A and i8 B"), std::string::npos) << error_of(mixed);
  GemmArgs column = t.args;  // column-major A
  column.a = Tensor::matrix(t.a.data(), 8, 8, Layout::col_major(), 11, DType::u8);
  EXPECT_NE(error_of(column).find("row-major A"), std::string::npos) << error_of(column);
  for (float x : t.d) EXPECT_TRUE(std::isnan(x)) << "a refused call wrote D";
  // An explicit config that packs A, or a KC that splits a group of 4.
  const GemmProblem p = runtime.describe(t.args);
  CpuGemmConfig c = CpuGemmConfig::default_for(p, runtime.target());
  EXPECT_THROW(runtime.compile(p, c.with_overrides("kc=258")), ConfigError);
  EXPECT_THROW(runtime.compile(p, c.with_overrides("pack_a=1")), ConfigError);
}

// The kernels are emitted and compiled for both widths on any host: vpdpbusd on zmm (AVX512_VNNI) and on ymm in its
// VEX form (AVX-VNNI), which needs no AVX-512.
TEST(GemmInt8, KernelsAreEmittedForEveryVnniTarget) {
  GemmProblem p;
  p.m = 64, p.n = 96, p.k = 130;
  p.signature.a.dtype = DType::u8;
  p.signature.b.dtype = DType::i8;
  p.signature.accumulator = DType::i32;
  const auto count = [](const std::string& text, const char* pattern) {
    const std::regex re(pattern);
    return std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator());
  };
  CpuTarget wide = CpuTarget::named("cpu:avx512+vnni");
  wide.amx = false;  // an AMX host's own target would pick tiles
  const std::string zmm = gemm_host_assembly({p.signature, CpuGemmConfig::default_for(p, wide), wide});
  EXPECT_GE(count(zmm, R"(vpdpbusd\s+[^\n]*%zmm)"), 8);
  const CpuTarget narrow = CpuTarget::named("cpu:avx2+vnni");
  const std::string ymm = gemm_host_assembly({p.signature, CpuGemmConfig::default_for(p, narrow), narrow});
  EXPECT_GE(count(ymm, R"(\{vex\}\s*vpdpbusd\s+[^\n]*%ymm)"), 4) << "AVX-VNNI's VEX encoding";
  EXPECT_EQ(count(ymm, "%zmm"), 0);
  // Without VNNI the target refuses int8 with the flag's name.
  CpuTarget none = narrow;
  none.vnni = false;
  try {
    validate(p.signature, CpuGemmConfig::default_for(p, none), none);
    ADD_FAILURE() << "int8 validated without VNNI";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("avx_vnni"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
