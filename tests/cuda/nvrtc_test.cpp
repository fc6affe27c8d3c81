// NVRTC plumbing: errors carry the compiler's log, the ptxas report and PTX counts are parsed from known text.
#include <gtest/gtest.h>

#include "generator/core/error.hpp"
#include "jit/disk_cache.hpp"
#include "jit/embedded_templates.hpp"
#include "jit/nvrtc.hpp"

namespace tessera {
namespace {

TEST(Nvrtc, ParsesThePtxasReport) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'gemm_a' for 'sm_80'\n"
      "ptxas info    : Function properties for gemm_a\n"
      "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 238 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'gemm_a_reduce' for 'sm_80'\n"
      "ptxas info    : Function properties for gemm_a_reduce\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 32 registers, 392 bytes cmem[0]\n";
  const auto report = parse_ptxas_report(log);
  ASSERT_EQ(report.size(), 2u);
  const KernelResources& a = report.at("gemm_a");
  EXPECT_EQ(a.registers, 238);
  EXPECT_EQ(a.static_shared_bytes, 1024);
  EXPECT_EQ(a.stack_bytes, 16);
  EXPECT_EQ(a.spill_store_bytes, 8);
  EXPECT_EQ(a.spill_load_bytes, 4);
  EXPECT_EQ(a.constant_bytes, 400);
  EXPECT_EQ(report.at("gemm_a_reduce").registers, 32);
  EXPECT_EQ(report.at("gemm_a_reduce").static_shared_bytes, 0);
}

TEST(Nvrtc, CountsInstructionFamiliesInPtx) {
  const std::string ptx =
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {...};\n"
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {...};\n"
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {...};\n"
      "cp.async.cg.shared.global [%r1], [%rd2], 16, %r3;\n"
      "cp.async.ca.shared.global [%r1], [%rd2], 8, %r3;\n"
      "cp.async.wait_group 2;\n"
      "ld.local.f32 %f1, [%rd4];\nst.local.v4.f32 [%rd4], {...};\n";
  const PtxCounts c = count_ptx(ptx);
  EXPECT_EQ(c.mma, 2);
  EXPECT_EQ(c.ldmatrix, 1);
  EXPECT_EQ(c.cp_async, 2);
  EXPECT_EQ(c.cp_async_wait, 1);
  EXPECT_EQ(c.local_access, 2);
  EXPECT_EQ(c.main_loop_mma, 0) << "no loop";
  // Two loops: the one with the mma is the main loop; labels, directives, braces and comments do not issue.
  const std::string loops =
      ".reg .b32 %r<9>;\n$L__BB0_1:\nadd.s32 %r1, %r1, 1;\n@%p1 bra $L__BB0_1;\n"
      "$L__BB0_2:\n\t// k-tile\n\tshl.b32 %r2, %r1, 4;\n\t{\n\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {};\n"
      "\t}\n\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {};\n\t@%p2 bra \t$L__BB0_3;\n$L__BB0_3:\n"
      "\tbar.sync 0;\n\t{ .reg .u64 a; cvta.to.shared.u64 a, %rd1; cvt.u32.u64 %r3, a; }\n\t@%p3 bra \t$L__BB0_2;\n"
      "\tret;\n";
  const PtxCounts l = count_ptx(loops);
  EXPECT_EQ(l.main_loop_mma, 2);
  EXPECT_EQ(l.main_loop_other, 6);  // shl, the forward branch, bar.sync, the asm block's two, the branch back
}

TEST(Nvrtc, CompileErrorsCarryTheLog) {
  const Nvrtc* nvrtc = nullptr;
  try {
    nvrtc = &Nvrtc::instance();
  } catch (const Unavailable& e) {
    GTEST_SKIP() << e.what();
  }
  EXPECT_FALSE(nvrtc->version().empty());
  try {
    nvrtc->compile("#include \"tessera/gemm/gemm_params.cuh\"\n__global__ void k() { undeclared_thing = 1; }\n",
                   "broken", CudaTarget::parse("cuda:sm_80"), true);
    ADD_FAILURE() << "compiled";
  } catch (const CompileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("broken"), std::string::npos) << what;
    EXPECT_NE(what.find("undeclared_thing"), std::string::npos) << "the log names the error: " << what;
  }
  // The embedded templates resolve includes; PTX-only builds have no CUBIN.
  const CudaBinary ptx_only =
      nvrtc->compile("#include \"tessera/arch.cuh\"\nextern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }\n",
                     "tiny", CudaTarget::parse("cuda:sm_90"), false);
  EXPECT_NE(ptx_only.ptx.find(".target sm_90"), std::string::npos);
  EXPECT_TRUE(ptx_only.cubin.empty());
}

TEST(Nvrtc, BuildsAreKeptOnDiskAndComeBackWhole) {
  const Nvrtc* nvrtc = nullptr;
  try {
    nvrtc = &Nvrtc::instance();
  } catch (const Unavailable& e) {
    GTEST_SKIP() << e.what();
  }
  const std::string source =
      "#include \"tessera/arch.cuh\"\nextern \"C\" __global__ void disk_kernel(float* x) { x[1] = 2.0f; }\n";
  const CudaTarget target = CudaTarget::parse("cuda:sm_80");
  const CudaBinary fresh = nvrtc->compile_uncached(source, "disk_kernel", target, true);
  EXPECT_FALSE(fresh.from_disk);
  nvrtc->compile(source, "disk_kernel", target, true);  // stored now if it was not already
  const CudaBinary cached = nvrtc->compile(source, "disk_kernel", target, true);
  if (!DiskCache::process_cache() || !DiskCache::process_cache()->writable()) GTEST_SKIP() << "no disk cache here";
  EXPECT_TRUE(cached.from_disk);
  EXPECT_EQ(cached.ptx, fresh.ptx);
  EXPECT_EQ(cached.cubin, fresh.cubin);
  EXPECT_EQ(cached.resources.at("disk_kernel").registers, fresh.resources.at("disk_kernel").registers);
}

TEST(EmbeddedTemplates, HoldEveryTemplateAndAStableHash) {
  bool tensorop = false, arch = false;
  for (const auto& f : embedded_templates()) {
    tensorop |= f.path == "tessera/gemm/gemm_tensorop.cuh";
    arch |= f.path == "tessera/arch/mma.cuh";
    EXPECT_FALSE(f.text.empty()) << f.path;
  }
  EXPECT_TRUE(tensorop);
  EXPECT_TRUE(arch);
  EXPECT_EQ(embedded_templates_hash(), embedded_templates_hash());
}

}  // namespace
}  // namespace tessera
