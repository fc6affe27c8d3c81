// The CUDA sparse kernels (templates/tessera/sparse): NVRTC compiles every SpMM and SDDMM variant for sm_80 and
// sm_90 without spills or local memory; the SIMT emulator runs them through CudaRuntime against the
// double-precision references on uniform and power-law patterns, 16-bit and f32 types, N and K residues and
// epilogues; device calls without a plan, or with operands the kernels cannot read, are refused.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>
#include "jit/nvrtc.hpp"
#include "tessera/cuda.hpp"
#include "tessera/reference.hpp"

namespace tessera {
namespace {

SpmmSignature spmm_signature(int bits, DType value, DType b, const std::string& epilogue) {
  SpmmSignature s;
  s.a = {SparseFormat::Csr, 1, 1, bits, value};
  s.dense.a = {value, Layout::row_major()};
  s.dense.b = {b, Layout::row_major()};
  s.dense.c = {DType::f32, Layout::zero()};
  s.dense.d = {DType::f32, Layout::row_major()};
  s.dense.epilogue = Epilogue::parse(epilogue);
  for (const auto& t : s.dense.epilogue.tensors())
    s.dense.inputs.push_back(
        {t.name, t.form, {DType::f32, t.form == IndexForm::M ? Layout::col_major() : Layout::row_major()}});
  if (s.dense.epilogue.reads_c()) s.dense.c = {DType::f32, Layout::row_major()};
  return s;
}

SddmmSignature sddmm_signature(int bits, DType value, DType ab, const std::string& epilogue) {
  SddmmSignature s;
  s.pattern = {SparseFormat::Csr, 1, 1, bits, value};
  s.dense.a = {ab, Layout::row_major()};
  s.dense.b = {ab, Layout::col_major()};
  s.dense.c = {DType::f32, Layout::zero()};
  s.dense.d = {DType::f32, Layout::row_major()};
  s.dense.epilogue = Epilogue::parse_sampled(epilogue);
  for (const auto& t : s.dense.epilogue.tensors())
    s.dense.inputs.push_back(
        {t.name, t.form, {DType::f32, t.form == IndexForm::M ? Layout::col_major() : Layout::row_major()}});
  return s;
}

void expect_clean(const CudaCode& code, const std::string& what) {
  const nlohmann::json r = nlohmann::json::parse(code.report);
  EXPECT_EQ(r["spill_store_bytes"].get<int>() + r["spill_load_bytes"].get<int>(), 0) << what;
  EXPECT_LE(r["registers"].get<int>(), 255) << what;
  EXPECT_EQ(r["local_access_count"].get<int>(), 0) << what;
}

TEST(SparseCuda, EveryVariantCompilesCleanForAmpereAndHopper) {
  for (const char* arch : {"cuda:sm_80", "cuda:sm_90"}) {
    const CudaTarget target = CudaTarget::parse(arch);
    for (int vec : {1, 2, 4})
      for (DType value : {DType::f32, DType::f16, DType::bf16}) {
        const DType b = value;
        const int bits = vec == 2 ? 64 : 32;
        const std::string e = vec == 4 ? "relu(alpha*acc + bias[n]) * scale[m]" : "alpha*acc + beta*c";
        const CudaSpmmSpec spmm{spmm_signature(bits, value, b, e), {4, vec}, target};
        expect_clean(generate_cuda_spmm(spmm), spmm.name() + " " + arch);
        const CudaSddmmSpec sddmm{sddmm_signature(bits, value, b, vec == 4 ? "acc * s + bias[n]" : "exp(acc - s)"),
                                  {vec == 1 ? 8 : 4, vec},
                                  target};
        expect_clean(generate_cuda_sddmm(sddmm), sddmm.name() + " " + arch);
      }
  }
  // BSR 16x16 on mma.sync: every tile count and both 16-bit types, with an epilogue reading tensors.
  for (const char* arch : {"cuda:sm_80", "cuda:sm_90"})
    for (DType value : {DType::f16, DType::bf16})
      for (int tiles : {1, 4, 8}) {
        SpmmSignature s = spmm_signature(32, value, value, "relu(acc + bias[n])");
        s.a = {SparseFormat::Bsr, 16, 16, 32, value};
        const CudaSpmmSpec spec{s, {4, 4, tiles}, CudaTarget::parse(arch)};
        const CudaCode code = generate_cuda_spmm(spec);
        expect_clean(code, spec.name() + " " + arch);
        EXPECT_GT(nlohmann::json::parse(code.report)["mma_count"].get<int>(), 0) << spec.name();
      }
  // Invalid configs and signatures are named, not compiled.
  const CudaTarget sm80 = CudaTarget::parse("cuda:sm_80");
  EXPECT_THROW(generate_cuda_spmm({spmm_signature(32, DType::f32, DType::f32, "acc"), {3, 4}, sm80}), ConfigError);
  EXPECT_THROW(generate_cuda_spmm({spmm_signature(32, DType::f32, DType::f32, "acc"), {4, 8}, sm80}), ConfigError);
  SpmmSignature bsr = spmm_signature(32, DType::f32, DType::f32, "acc");
  bsr.a = {SparseFormat::Bsr, 4, 4, 32, DType::f32};
  EXPECT_THROW(generate_cuda_spmm({bsr, {4, 4}, sm80}), ConfigError);  // 4x4 blocks
  bsr.a = {SparseFormat::Bsr, 16, 16, 32, DType::f32};
  EXPECT_THROW(generate_cuda_spmm({bsr, {4, 4}, sm80}), ConfigError);  // f32 blocks: no mma
  EXPECT_THROW(generate_cuda_spmm({spmm_signature(32, DType::f32, DType::f32, "acc"), {4, 4, 3}, sm80}), ConfigError);
}

// 16-bit storage with f32 copies of the same values for the references.
struct Values {
  std::vector<float> f32;
  std::vector<std::uint16_t> bits;
  void fill(std::size_t n, DType dtype, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1, 1);
    f32.resize(n), bits.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float x = dist(rng);
      bits[i] = dtype == DType::bf16 ? to_bf16(x) : to_f16(x);
      f32[i] = dtype == DType::f32 ? x : dtype == DType::bf16 ? from_bf16(bits[i]) : from_f16(bits[i]);
    }
  }
  void* data(DType dtype) { return dtype == DType::f32 ? static_cast<void*>(f32.data()) : bits.data(); }
};

TEST(SparseCuda, SpmmRunsInTheEmulator) {
  CudaRuntime rt("cuda-emu:sm_80");
  struct Case {
    const char* pattern;
    std::int64_t n;
    DType value, b;
    int bits;
    const char* epilogue;
  };
  for (const Case& c : {Case{"uniform:70,90,0.1,1", 130, DType::f32, DType::f32, 32, "alpha*acc + beta*c"},
                        Case{"powerlaw:300,256,0.02,2", 64, DType::f16, DType::f16, 32, "relu(acc + bias[n])"},
                        Case{"uniform:33,40,0.2,3", 7, DType::bf16, DType::bf16, 64, "acc * scale[m]"},
                        Case{"banded:50,50,0.1,4", 1, DType::f32, DType::f16, 32, "alpha*acc + beta*c"}}) {
    SCOPED_TRACE(fmt::format("{} N={} {} {} i{} '{}'", c.pattern, c.n, dtype_name(c.value), dtype_name(c.b), c.bits,
                             c.epilogue));
    std::mt19937 rng(9);
    const SparseMatrixData a = SparseMatrixData::csr(generate_pattern(c.pattern), c.bits, c.value);
    const SparseMatrix v = a.view();
    Values b, cv, bias, scale;
    b.fill(static_cast<std::size_t>(v.cols * c.n), c.b, rng);
    cv.fill(static_cast<std::size_t>(v.rows * c.n), DType::f32, rng);
    bias.fill(static_cast<std::size_t>(c.n), DType::f32, rng);
    scale.fill(static_cast<std::size_t>(v.rows), DType::f32, rng);
    std::vector<float> d(static_cast<std::size_t>(v.rows * c.n), -9.0f);
    SpmmArgs args;
    args.a = v;
    args.b = Tensor::matrix(b.data(c.b), v.cols, c.n, Layout::row_major(), 0, c.b);
    args.c = Tensor::matrix(cv.f32.data(), v.rows, c.n);
    args.d = Tensor::matrix(d.data(), v.rows, c.n);
    args.alpha = 0.5f, args.beta = 2.0f;
    args.set_epilogue(c.epilogue);
    if (args.epilogue.tensors().size()) {
      if (args.epilogue.tensors()[0].name == "bias") args.inputs["bias"] = Tensor::vector(bias.f32.data(), c.n);
      if (args.epilogue.tensors()[0].name == "scale") args.inputs["scale"] = Tensor::vector(scale.f32.data(), v.rows);
    }
    args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(v, 1));
    const GemmReference ref = reference_spmm(args);
    rt.spmm(args);
    rt.synchronize();
    const Comparison cmp = compare_gemm(ref, args.d);
    EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch << " (" << cmp.mismatches << " mismatches)";
  }
}

// Block-sparse on tensor cores in the emulator: 16x16 blocks with partial edge blocks (M and K not multiples of 16),
// N not a multiple of the warp's columns, f16 and bf16, against the double reference of the same 16-bit values.
TEST(SparseCuda, BsrOnTensorCoresRunsInTheEmulator) {
  CudaRuntime rt("cuda-emu:sm_80");
  for (DType value : {DType::f16, DType::bf16})
    for (std::int64_t n : {70, 8}) {
      SCOPED_TRACE(fmt::format("{} N={}", dtype_name(value), n));
      std::mt19937 rng(6);
      const SparseMatrixData a = SparseMatrixData::bsr(generate_pattern("blocks:100,90,0.3,1,16"), 16, 16, 32, value);
      const SparseMatrix v = a.view();
      Values b, bias;
      b.fill(static_cast<std::size_t>(v.cols * n), value, rng);
      bias.fill(static_cast<std::size_t>(n), DType::f32, rng);
      std::vector<float> d(static_cast<std::size_t>(v.rows * n), -9.0f);
      SpmmArgs args;
      args.a = v;
      args.b = Tensor::matrix(b.data(value), v.cols, n, Layout::row_major(), 0, value);
      args.d = Tensor::matrix(d.data(), v.rows, n);
      args.set_epilogue("relu(acc + bias[n])");
      args.inputs["bias"] = Tensor::vector(bias.f32.data(), n);
      args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(v, 1));
      const GemmReference ref = reference_spmm(args);
      rt.spmm(args);
      rt.synchronize();
      const Comparison cmp = compare_gemm(ref, args.d);
      EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch << " (" << cmp.mismatches << " mismatches)";
    }
}

TEST(SparseCuda, SddmmRunsInTheEmulator) {
  CudaRuntime rt("cuda-emu:sm_80");
  struct Case {
    const char* pattern;
    std::int64_t k;
    DType value, ab;
    const char* epilogue;
  };
  for (const Case& c : {Case{"uniform:60,70,0.1,1", 300, DType::f32, DType::f32, "acc * s"},
                        Case{"powerlaw:256,300,0.03,2", 64, DType::f16, DType::f16, "acc / sqrt(64) + s"},
                        Case{"uniform:20,30,0.3,3", 7, DType::bf16, DType::bf16, "alpha*acc + bias[n] + scale[m]"}}) {
    SCOPED_TRACE(fmt::format("{} K={} {} {} '{}'", c.pattern, c.k, dtype_name(c.value), dtype_name(c.ab), c.epilogue));
    std::mt19937 rng(4);
    const SparseMatrixData pattern = SparseMatrixData::csr(generate_pattern(c.pattern), 32, c.value);
    const SparseMatrix v = pattern.view();
    Values a, b, bias, scale;
    a.fill(static_cast<std::size_t>(v.rows * c.k), c.ab, rng);
    b.fill(static_cast<std::size_t>(v.cols * c.k), c.ab, rng);
    bias.fill(static_cast<std::size_t>(v.cols), DType::f32, rng);
    scale.fill(static_cast<std::size_t>(v.rows), DType::f32, rng);
    std::vector<float> out(static_cast<std::size_t>(v.entries), -9.0f);
    SddmmArgs args;
    args.pattern = v;
    args.a = Tensor::matrix(a.data(c.ab), v.rows, c.k, Layout::row_major(), 0, c.ab);
    args.b = Tensor::matrix(b.data(c.ab), v.cols, c.k, Layout::row_major(), 0, c.ab);
    args.out = Tensor::vector(out.data(), v.entries);
    args.alpha = 1.5f;
    args.set_epilogue(c.epilogue);
    for (const auto& t : args.epilogue.tensors())
      args.inputs[t.name] =
          t.form == IndexForm::N ? Tensor::vector(bias.f32.data(), v.cols) : Tensor::vector(scale.f32.data(), v.rows);
    args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(v, 1, "pattern"));
    const SddmmReference ref = reference_sddmm(args);
    rt.sddmm(args);
    rt.synchronize();
    const Comparison cmp = compare_sddmm(ref, args.out);
    EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch << " (" << cmp.mismatches << " mismatches)";
  }
}

TEST(SparseCuda, DeviceCallsNeedAPlanAndReadableOperands) {
  CudaRuntime rt("cuda-emu:sm_80");
  const SparseMatrixData a = SparseMatrixData::csr(generate_pattern("uniform:16,16,0.3,1"));
  std::vector<float> b(16 * 8), d(16 * 8);
  SpmmArgs args;
  args.a = a.view();
  args.b = Tensor::matrix(b.data(), 16, 8);
  args.d = Tensor::matrix(d.data(), 16, 8);
  const auto expect = [&](const char* what) {
    try {
      rt.spmm(args);
      ADD_FAILURE() << "accepted; expected " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect("a.plan");
  args.plan = std::make_shared<const SparsePlan>(
      SparsePlan::inspect(SparseMatrixData::csr(generate_pattern("uniform:16,17,0.3,1")).view(), 1));
  expect("a.plan");
  args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(a.view(), 1));
  args.b = Tensor::matrix(b.data(), 16, 8, Layout::col_major());
  expect("b:");
  args.b = Tensor::matrix(b.data(), 16, 8);
  args.d = Tensor::matrix(d.data(), 16, 8, Layout::col_major());
  expect("args");
}

}  // namespace
}  // namespace tessera
