// Every kernel of the CUDA test matrix, run in the SIMT emulator on edge shapes (1, 17, 127, 129, 255, odd K) and
// compared with the reference: bit-exact with small-integer inputs and the linear epilogue, within the reference's
// tolerance with the fused one.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <random>
#include <thread>

#include <cstring>
#include <limits>
#include <memory>
#include <span>

#include "generator/cuda/gemm_source.hpp"
#include "jit/simt_emulator.hpp"
#include "ops/gemm/cuda_gemm_launch.hpp"
#include "tessera/cuda.hpp"
#include "tessera/reference.hpp"
#include "tests/cuda/cuda_matrix.hpp"
#include "tests/cuda/template_mutation.hpp"

namespace tessera {
namespace {

struct Shape {
  std::int64_t m, n, k, batch;
};

// Emulator "device" memory is host memory: the reference reads the same buffers.
class Operands {
 public:
  Operands(CudaRuntime& rt, const CudaGemmSpec& spec, const Shape& shape, std::mt19937& rng) {
    const GemmSignature& s = spec.signature;
    // Leading dimensions padded to 8 elements so every alignment claim of the matrix holds.
    const auto ld = [](std::int64_t extent) { return (extent + 7) / 8 * 8; };
    const auto tensor = [&](const OperandSignature& op, std::int64_t rows, std::int64_t cols, bool integers) {
      const bool row = op.layout.kind() == LayoutKind::RowMajor;
      const std::int64_t lead = ld(row ? cols : rows), outer = row ? rows : cols;
      const std::int64_t per_batch = lead * outer, count = per_batch * shape.batch;
      DeviceBuffer& buffer =
          buffers_.emplace_back(rt.allocate(static_cast<std::size_t>(count * dtype_bytes(op.dtype))));
      std::uniform_int_distribution<int> small(-3, 3);
      std::uniform_real_distribution<float> real(-1.0f, 1.0f);
      for (std::int64_t i = 0; i < count; ++i) {
        const float x = integers ? static_cast<float>(small(rng)) : real(rng);
        if (op.dtype == DType::f16)
          static_cast<std::uint16_t*>(buffer.data())[i] = to_f16(x);
        else if (op.dtype == DType::bf16)
          static_cast<std::uint16_t*>(buffer.data())[i] = to_bf16(x);
        else
          static_cast<float*>(buffer.data())[i] = x;
      }
      return shape.batch == 1
                 ? Tensor::matrix(buffer.data(), rows, cols, op.layout, lead, op.dtype)
                 : Tensor::batched(buffer.data(), shape.batch, rows, cols, op.layout, lead, per_batch, op.dtype);
    };
    args.a = tensor(s.a, shape.m, shape.k, true);
    args.b = tensor(s.b, shape.k, shape.n, true);
    args.d = tensor(s.d, shape.m, shape.n, true);
    args.epilogue = s.epilogue;
    if (s.c.layout.reads_memory()) {
      args.c = tensor(s.c, shape.m, shape.n, true);
      args.beta = 0.5f;
    }
    for (const auto& in : s.inputs) {
      DeviceBuffer& buffer = buffers_.emplace_back(rt.allocate(static_cast<std::size_t>(shape.n * 4)));
      for (std::int64_t i = 0; i < shape.n; ++i) static_cast<float*>(buffer.data())[i] = static_cast<float>(i % 5) - 2;
      args.inputs[in.name] = Tensor::vector(static_cast<float*>(buffer.data()), shape.n);
    }
  }
  GemmArgs args;

 private:
  std::vector<DeviceBuffer> buffers_;
};

class EmulatedMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(EmulatedMatrix, MatchesTheReferenceOnEdgeShapes) {
  const CudaGemmSpec spec = matrix_spec(GetParam());
  CudaRuntime runtime("cuda-emu:" + spec.target.arch());
  std::mt19937 rng(11);
  const bool exact = spec.signature.epilogue.text() == Epilogue::linear_combination().text();
  for (const Shape& shape : {Shape{1, 1, 1, 1}, Shape{17, 127, 33, 1}, Shape{129, 255, 17, 1}, Shape{255, 129, 255, 1},
                             Shape{33, 17, 129, 2}}) {
    SCOPED_TRACE(fmt::format("{}x{}x{} batch {}", shape.m, shape.n, shape.k, shape.batch));
    Operands ops(runtime, spec, shape, rng);
    const GemmProblem problem = describe_gemm(ops.args);
    ASSERT_TRUE(problem.signature == spec.signature) << "the test built other operands than the spec describes";
    const CudaGemmKernel kernel = runtime.compile(problem, spec.config);
    const GemmReference reference = reference_gemm(ops.args);
    kernel.run(ops.args);
    const Comparison cmp = compare_gemm(reference, ops.args.d, exact);
    EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches; first: " << cmp.first_mismatch;
  }
}

INSTANTIATE_TEST_SUITE_P(Cuda, EmulatedMatrix, ::testing::ValuesIn(matrix()),
                         [](const auto& param_info) { return param_info.param.label(); });

// One GEMM of A, B and D's layouts run in the emulator with its profile counted: the default config for the shape
// with `overrides` applied, and the result against the reference.
struct ProfiledGemm {
  EmuProfile profile;
  CudaGemmConfig config;
  Comparison result;
};

ProfiledGemm run_profiled(const std::string& arch, DType in, Layout a, Layout b, Layout d, const Shape& shape,
                          unsigned seed, const std::string& overrides = "") {
  ProfiledGemm run;
  EmuOptions options;
  options.profile = &run.profile;
  CudaRuntime runtime("cuda-emu:" + arch, options);
  CudaGemmSpec spec;
  spec.target = runtime.target();
  spec.signature.a = {in, a};
  spec.signature.b = {in, b};
  spec.signature.c = {DType::f32, Layout::zero()};
  spec.signature.d = {DType::f32, d};
  std::mt19937 rng(seed);
  Operands ops(runtime, spec, shape, rng);
  run.config = runtime.default_config(ops.args).with_overrides(overrides);
  runtime.compile(describe_gemm(ops.args), run.config).run(ops.args);
  run.result = compare_gemm(reference_gemm(ops.args), ops.args.d, false);
  return run;
}

// The emulator as a static profiler of the default 16-bit kernels (every layout of A, B and D, sm_80 and sm_90): no
// bank conflicts in the main loop (cp.async writes, ldmatrix reads of the swizzled tiles) or the epilogue (the slab's
// writes and vector reads; a column-major D's slab transposed and swizzled), and 128-bit global traffic in as few
// sectors as its bytes need. The slab's old pitch (WN + 4) and scalar accesses gave 2 and 4 wavefronts per phase.
TEST(EmulatedGemmProfile, DefaultKernelsHaveNoBankConflictsAndCoalescedTraffic) {
  for (const char* arch : {"sm_80", "sm_90"})
    for (DType in : {DType::f16, DType::bf16})
      for (Layout a : {Layout::row_major(), Layout::col_major()})
        for (Layout b : {Layout::row_major(), Layout::col_major()})
          for (Layout d : {Layout::row_major(), Layout::col_major()}) {
            SCOPED_TRACE(fmt::format("{} {} A {} B {} D {}", arch, dtype_name(in), a.name(), b.name(), d.name()));
            const ProfiledGemm run = run_profiled(arch, in, a, b, d, Shape{256, 384, 256, 1}, 5);
            const EmuProfile& profile = run.profile;
            for (const auto& [name, c] : {std::pair{"ldmatrix", profile.ldmatrix},
                                          {"cp.async shared writes", profile.cp_async_shared},
                                          {"epilogue shared reads", profile.shared_load},
                                          {"epilogue shared writes", profile.shared_store}}) {
              EXPECT_GT(c.requests, 0u) << name;
              EXPECT_EQ(c.transactions, c.ideal) << name << ": bank conflicts";
            }
            for (const auto& [name, c] :
                 {std::pair{"cp.async global reads", profile.cp_async_global}, {"D stores", profile.global_store}}) {
              EXPECT_GT(c.requests, 0u) << name;
              EXPECT_LE(static_cast<double>(c.transactions), 1.1 * static_cast<double>(c.ideal)) << name;
            }
            EXPECT_TRUE(run.result.ok()) << run.result.mismatches
                                         << " mismatches; first: " << run.result.first_mismatch;
          }
}

// The same for Hopper's default wgmma kernels (sm_90a, every layout of A, B and D): the epilogue's shared writes
// (a row-major D's swizzled TMA-store boxes, a column-major D's transposed slab) and reads at the ideal wavefronts;
// a row-major D leaves by TMA (no thread stores D), a column-major one in as few sectors as its bytes need.
TEST(EmulatedGemmProfile, HopperDefaultKernelsHaveNoBankConflictsAndCoalescedTraffic) {
  for (DType in : {DType::f16, DType::bf16})
    for (Layout a : {Layout::row_major(), Layout::col_major()})
      for (Layout b : {Layout::row_major(), Layout::col_major()})
        for (Layout d : {Layout::row_major(), Layout::col_major()}) {
          SCOPED_TRACE(fmt::format("{} A {} B {} D {}", dtype_name(in), a.name(), b.name(), d.name()));
          const ProfiledGemm run = run_profiled("sm_90a", in, a, b, d, Shape{256, 384, 256, 1}, 5);
          ASSERT_EQ(run.config.math, CudaMath::Wgmma);
          EXPECT_EQ(run.config.tma_store, d.kind() == LayoutKind::RowMajor);
          const EmuProfile& profile = run.profile;
          EXPECT_GT(profile.shared_store.requests, 0u);
          EXPECT_EQ(profile.shared_store.transactions, profile.shared_store.ideal) << "epilogue shared writes";
          EXPECT_EQ(profile.shared_load.transactions, profile.shared_load.ideal) << "epilogue shared reads";
          if (run.config.tma_store) {
            EXPECT_EQ(profile.global_store.requests, 0u) << "D leaves by TMA";
          } else {
            EXPECT_GT(profile.global_store.requests, 0u);
            EXPECT_LE(static_cast<double>(profile.global_store.transactions),
                      1.1 * static_cast<double>(profile.global_store.ideal))
                << "D stores";
          }
          EXPECT_TRUE(run.result.ok()) << run.result.mismatches << " mismatches; first: " << run.result.first_mismatch;
        }
}

// The default f32 SIMT kernel's shared-memory traffic at the ideal wavefronts for every A/B layout: a K-major
// operand's chunks are stored transposed, down the tile's columns, which its rows' padding keeps conflict-free
// (unpadded: 2.40 wavefronts per store where 1.60 would do).
TEST(EmulatedGemmProfile, TheSimtKernelsSharedTilesHaveNoBankConflicts) {
  for (Layout a : {Layout::row_major(), Layout::col_major()})
    for (Layout b : {Layout::row_major(), Layout::col_major()}) {
      SCOPED_TRACE(fmt::format("A {} B {}", a.name(), b.name()));
      const ProfiledGemm run = run_profiled("sm_80", DType::f32, a, b, Layout::row_major(), Shape{128, 192, 64, 1}, 5);
      ASSERT_EQ(run.config.math, CudaMath::Simt);
      for (const auto& [name, c] :
           {std::pair{"shared reads", run.profile.shared_load}, {"shared writes", run.profile.shared_store}}) {
        EXPECT_GT(c.requests, 0u) << name;
        EXPECT_EQ(c.transactions, c.ideal) << name << ": bank conflicts";
      }
      EXPECT_TRUE(run.result.ok()) << run.result.mismatches << " mismatches; first: " << run.result.first_mismatch;
    }
}

// tf32 with an M- or N-contiguous operand: its fragments are 32-bit loads across 4 rows of the shared tile (ldmatrix
// cannot transpose 32-bit elements), which the pair-moving swizzle keeps conflict-free (the 128-byte swizzle's key:
// 2.06 wavefronts per load where 1.09 would do).
TEST(EmulatedGemmProfile, Tf32FragmentsOfMOrNContiguousOperandsHaveNoBankConflicts) {
  for (Layout a : {Layout::row_major(), Layout::col_major()})
    for (Layout b : {Layout::row_major(), Layout::col_major()}) {
      SCOPED_TRACE(fmt::format("A {} B {}", a.name(), b.name()));
      const ProfiledGemm run = run_profiled("sm_80", DType::tf32, a, b, Layout::row_major(), Shape{128, 256, 96, 1}, 6);
      for (const auto& [name, c] : {std::pair{"shared reads", run.profile.shared_load},
                                    {"ldmatrix", run.profile.ldmatrix},
                                    {"cp.async shared writes", run.profile.cp_async_shared}})
        EXPECT_EQ(c.transactions, c.ideal) << name << ": bank conflicts";
      EXPECT_TRUE(run.result.ok()) << run.result.mismatches << " mismatches; first: " << run.result.first_mismatch;
    }
}

// Split K into a column-major D: the workspace is laid out as D is, so the partial sums' stores, the reduction's reads
// and its stores to D all run along D's columns (with a row-major workspace the reduction stored 9.60 sectors per
// request where 4.00 would do). The SIMT, tensor-op and wgmma kernels, exact against the reference at an edge shape
// and at the ideal sectors on an aligned one.
TEST(EmulatedGemm, SplitKIntoAColumnMajorDIsCoalesced) {
  struct Case {
    const char* arch;
    DType in;
    const char* config;
  };
  for (const Case& k : {Case{"sm_80", DType::f32, "split_k=4"}, Case{"sm_80", DType::f16, "split_k=4,stream_k=0"},
                        Case{"sm_90a", DType::bf16,
                             "wgmma=1,block_m=128,block_n=128,warp_n=128,warp_m=64,block_k=64,stages=4,split_k=3"}})
    for (const Shape& shape : {Shape{130, 136, 1000, 1}, Shape{128, 128, 1024, 2}}) {
      SCOPED_TRACE(fmt::format("{} {} {}x{}x{}", k.arch, dtype_name(k.in), shape.m, shape.n, shape.k));
      const ProfiledGemm run =
          run_profiled(k.arch, k.in, Layout::row_major(), Layout::col_major(), Layout::col_major(), shape, 9, k.config);
      ASSERT_GT(run.config.split_k, 1);
      EXPECT_TRUE(run.result.ok()) << run.result.mismatches << " mismatches; first: " << run.result.first_mismatch;
      if (shape.m % 128 == 0) {
        EXPECT_GT(run.profile.global_store.requests, 0u);
        EXPECT_EQ(run.profile.global_store.transactions, run.profile.global_store.ideal) << "uncoalesced stores";
      }
    }
}

// Stream-K where blocks walk across tile boundaries and one tile is shared by up to a dozen blocks: exact with
// small-integer inputs (the pieces' partial sums are integers), batched, either D layout, one and two blocks per SM.
TEST(EmulatedGemm, StreamKBlocksCrossTilesAndTheirPiecesAddUp) {
  CudaRuntime runtime("cuda-emu:sm_80");
  std::mt19937 rng(3);
  for (const Layout d : {Layout::row_major(), Layout::col_major()})
    for (const int stream : {1, 2})
      for (const Shape& shape : {Shape{384, 320, 1000, 2}, Shape{200, 130, 3000, 1}}) {
        CudaGemmSpec spec;
        spec.target = runtime.target();
        spec.signature.a = {DType::f16, Layout::row_major()};
        spec.signature.b = {DType::f16, Layout::col_major()};
        spec.signature.c = {DType::f32, Layout::zero()};
        spec.signature.d = {DType::f32, d};
        Operands ops(runtime, spec, shape, rng);
        const GemmProblem problem = describe_gemm(ops.args);
        CudaGemmConfig config = runtime.default_config(ops.args).with_overrides(
            fmt::format("block_m=64,block_n=64,warp_m=32,warp_n=32,stages=3,stream_k={}", stream));
        const StreamKPlan plan = stream_k_plan(problem, config, spec.target);
        SCOPED_TRACE(fmt::format("{}x{}x{} batch {} D {} stream_k {}: {} iterations over {} blocks", shape.m, shape.n,
                                 shape.k, shape.batch, d.name(), stream, plan.total, plan.blocks));
        ASSERT_LT(plan.iterations, static_cast<double>(plan.k_tiles)) << "blocks must share tiles";
        ASSERT_GT(plan.total, plan.blocks) << "blocks must cross tiles";
        const CudaGemmKernel kernel = runtime.compile(problem, config);
        const GemmReference reference = reference_gemm(ops.args);
        kernel.run(ops.args);
        const Comparison cmp = compare_gemm(reference, ops.args.d, true);
        EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches; first: " << cmp.first_mismatch;
      }
}

// A generated GEMM whose templates carry a seeded bug, launched by hand in the emulator: the kernel's header is
// inlined into the source and, in it, the include of `part` replaced by the mutated part.
class MutatedGemm {
 public:
  MutatedGemm(const CudaGemmSpec& spec, const Shape& shape, std::uint32_t seed)
      : runtime_("cuda-emu:" + spec.target.arch()), spec_(spec), shape_(shape) {
    std::mt19937 rng(seed);
    ops_ = std::make_unique<Operands>(runtime_, spec_, shape_, rng);
    binding_ = bind_gemm(ops_->args);
    reference_ = reference_gemm(ops_->args);
  }
  const GemmBinding& binding() const { return binding_; }
  void set_config(const CudaGemmConfig& config) { spec_.config = config; }
  CudaTarget& target() { return spec_.target; }

  // "ok", "N mismatches" or the emulator's report, with blocks in `order` on one worker. The workspace starts as
  // NaN (a piece read before it was stored shows).
  std::string run(const std::string& part, const TemplateBug& bug, EmuSchedule order) {
    const CudaSource source = emit_cuda(spec_);
    const std::string header = source.code.substr(source.code.find("#include \"tessera/gemm/") + 10);
    const std::string header_path = header.substr(0, header.find('"'));
    const std::string include = "#include \"" + header_path + "\"";
    const auto unpragma = [](std::string& t) { t.erase(t.find("#pragma once"), std::string("#pragma once").size()); };
    std::string text = mutated_template(header_path, part == header_path ? bug : TemplateBug{"", "", ""});
    if (text.empty()) return "the template is missing";
    if (part != header_path) {
      std::string mutated = mutated_template(part, bug);
      const std::string part_include = "#include \"" + part + "\"";
      if (mutated.empty() || text.find(part_include) == std::string::npos) return header_path + " lacks " + part;
      unpragma(mutated);
      text.replace(text.find(part_include), part_include.size(), mutated);
    }
    unpragma(text);
    std::string code = source.code;
    code.replace(code.find(include), include.size(), text);
    const auto module = EmuModule::compile(code, source.kernel);
    CudaLaunch launch = plan_cuda_launch(binding_, spec_);
    std::vector<float> workspace(static_cast<std::size_t>(launch.workspace_bytes / 4) + 1,
                                 std::numeric_limits<float>::quiet_NaN());
    launch.params.workspace = workspace.data();
    if (launch.flags_offset >= 0) {
      std::fill_n(reinterpret_cast<char*>(workspace.data()) + launch.flags_offset, launch.flags_bytes, 0);
      launch.params.tile_flags =
          reinterpret_cast<int*>(reinterpret_cast<char*>(workspace.data()) + launch.flags_offset);
    }
    TmaDescriptor* maps[3] = {&launch.params.a_map, &launch.params.b_map, &launch.params.d_map};
    for (std::size_t i = 0; i < launch.tma.size(); ++i)
      std::memcpy(maps[i], emulated_tma_descriptor(launch.tma[i]).data(), sizeof(TmaDescriptor));
    // D all NaN (0xff bytes in f32 and 16-bit types alike): an output left unwritten shows.
    const TensorArg& d = binding_.args.d;
    std::memset(const_cast<void*>(d.data), 0xff,
                static_cast<std::size_t>(((shape_.batch - 1) * d.bs + (shape_.m - 1) * d.rs + shape_.n) *
                                         dtype_bytes(spec_.signature.d.dtype)));
    EmuLaunch emu;
    emu.kernel = source.kernel;
    emu.grid_x = launch.grid_x;
    emu.grid_z = launch.grid_z;
    emu.block = launch.block;
    emu.shared_bytes = launch.shared_bytes;
    const auto bytes = std::as_bytes(std::span(&launch.params, 1));
    emu.params.assign(bytes.begin(), bytes.end());
    emu.global = operand_extents(binding_);
    emu.global.push_back({workspace.data(), workspace.size() * sizeof(float)});
    EmuOptions options;
    options.schedule = order;
    options.workers = 1;
    try {
      module->launch(emu, options);
      if (launch.reduce_grid) return "(a reduction kernel is not run here)";
      const Comparison cmp = compare_gemm(reference_, ops_->args.d, true);
      return cmp.ok() ? "ok" : fmt::format("{} mismatches", cmp.mismatches);
    } catch (const EmulationError& e) {
      return e.what();
    }
  }

  // Whether a bug is caught in grid order or in reverse (for the control: that both give "ok").
  void expect_caught(const std::string& part, const TemplateBug& bug) {
    int caught = 0;
    for (const EmuSchedule order : {EmuSchedule::Forward, EmuSchedule::Reverse}) {
      const std::string outcome = run(part, bug, order);
      if (bug.control()) {
        EXPECT_EQ(outcome, "ok") << (order == EmuSchedule::Forward ? "grid" : "reverse") << " order";
      }
      caught += outcome != "ok";
    }
    if (!bug.control()) {
      EXPECT_GT(caught, 0) << "not caught";
    }
  }

 private:
  CudaRuntime runtime_;
  CudaGemmSpec spec_;
  Shape shape_;
  std::unique_ptr<Operands> ops_;
  GemmBinding binding_;
  GemmReference reference_;
};

CudaGemmSpec row_col_spec(const std::string& arch, DType input, DType output = DType::f32) {
  CudaGemmSpec spec;
  spec.target = CudaTarget::parse("cuda:" + arch);
  spec.signature.a = {input, Layout::row_major()};
  spec.signature.b = {input, Layout::col_major()};
  spec.signature.c = {DType::f32, Layout::zero()};
  spec.signature.d = {output, Layout::row_major()};
  return spec;
}

// Stream-K's hand-over between blocks (tessera/block/stream_k.cuh), on the mma.sync and the wgmma kernels: as it is,
// exact results with blocks run in grid order and in reverse on one worker (a tile's last block then starts before
// the blocks whose pieces it waits for, and the emulator starts more workers as a GPU keeps the grid resident); each
// seeded bug is caught there, by a wrong result or the emulator's deadlock report.
TEST(EmulatedGemm, StreamKSeededHandOverBugsAreCaught) {
  const std::vector<TemplateBug> bugs{
      {"(control: the template as it is)", "", ""},
      {"no wait for the pieces", "if (threadIdx.x == 0) flag_wait_at_least(p.tile_flags + piece.tile, piece.before);",
       "(void)0;"},
      {"a piece not counted", "if (threadIdx.x == 0) flag_release_add(p.tile_flags + piece.tile, 1);", "(void)0;"},
      {"a wait for one piece too many", "flag_wait_at_least(p.tile_flags + piece.tile, piece.before)",
       "flag_wait_at_least(p.tile_flags + piece.tile, piece.before + 1)"},
      {"every piece in slot 0", "store_piece(piece.before);", "store_piece(0);"},
      {"the last piece left out", "store_tile(piece.before);", "store_tile(piece.before - 1);"},
  };
  struct Kernel {
    const char* arch;
    DType input;
    const char* config;
  };
  for (const Kernel& kernel :
       {Kernel{"sm_80", DType::f16, "block_m=64,block_n=64,warp_m=32,warp_n=32,stages=3,split_k=1,stream_k=1"},
        Kernel{"sm_90a", DType::bf16,
               "wgmma=1,block_m=64,block_n=64,warp_m=64,warp_n=64,block_k=64,stages=3,split_k=1,stream_k=1,"
               "cluster_m=1,cluster_n=1,tma_store=1"}}) {
    // 4 tiles of 64 x 64 over 16 k-tiles each, 10 blocks of 6 or 7: each tile has 3 or 4 pieces, blocks cross tiles.
    MutatedGemm gemm(row_col_spec(kernel.arch, kernel.input), Shape{128, 128, 1024, 1}, 7);
    gemm.set_config(CudaGemmConfig::default_for(gemm.binding().problem, gemm.target()).with_overrides(kernel.config));
    gemm.target().sm_count = 10;
    for (const TemplateBug& bug : bugs) {
      SCOPED_TRACE(fmt::format("{} kernel, {}", kernel.arch, bug.what));
      gemm.expect_caught("tessera/block/stream_k.cuh", bug);
    }
    if (std::string(kernel.arch) == "sm_90a") {
      // The next piece's TMA loads overwrite the ring the epilogue wrote: the epilogue's writes need the proxy fence.
      SCOPED_TRACE("sm_90a kernel, no proxy fence before the next piece");
      gemm.expect_caught("tessera/gemm/gemm_wgmma.cuh",
                         {"no proxy fence before the next piece", "    fence_proxy_async();  // the epilogue's writes",
                          "    (void)0;  // the epilogue's writes"});
    }
  }
}

// Stream-K's hybrid with data-parallel tiles: 12 tiles of 64 x 64 over 8 k-tiles on 5 SMs (three waves); with the
// last wave, or the last two, shared (2 or 7 tiles over 5 blocks: pieces cross tiles) and the rest whole, exact in
// grid and reverse order, on the mma.sync and the wgmma kernels; whole tiles given to the wrong blocks are caught.
TEST(EmulatedGemm, StreamKHybridSharesTheLastWavesAndRunsTheRestWhole) {
  const std::vector<TemplateBug> bugs{
      {"(control: the template as it is)", "", ""},
      {"every block's whole tiles from the first", "unit_tile = p.sk_shared_tiles + unit;",
       "unit_tile = p.sk_shared_tiles;"},
      {"the last whole tile left out", "unit_tile < per_batch * p.batch;", "unit_tile + 1 < per_batch * p.batch;"},
  };
  for (const auto& [arch, input, base] :
       {std::tuple{"sm_80", DType::f16, "block_m=64,block_n=64,warp_m=32,warp_n=32,stages=3,split_k=1,stream_k=1"},
        std::tuple{"sm_90a", DType::bf16,
                   "wgmma=1,block_m=64,block_n=64,warp_m=64,warp_n=64,block_k=64,stages=3,split_k=1,stream_k=1,"
                   "cluster_m=1,cluster_n=1"}})
    for (const int waves : {1, 2}) {
      MutatedGemm gemm(row_col_spec(arch, input), Shape{200, 136, 512, 1}, 11);
      gemm.target().sm_count = 5;
      const CudaGemmConfig config = CudaGemmConfig::default_for(gemm.binding().problem, gemm.target())
                                        .with_overrides(fmt::format("{},stream_k_waves={}", base, waves));
      gemm.set_config(config);
      const StreamKPlan plan = stream_k_plan(gemm.binding().problem, config, gemm.target());
      ASSERT_EQ(plan.tiles, 12);
      ASSERT_EQ(plan.shared_tiles, waves == 1 ? 2 : 7);
      ASSERT_EQ(plan.blocks, 5);
      ASSERT_NE(plan.total % plan.blocks, 0) << "pieces must cross tiles";
      for (const TemplateBug& bug : bugs) {
        SCOPED_TRACE(fmt::format("{} kernel, stream_k_waves {}, {}", arch, waves, bug.what));
        gemm.expect_caught("tessera/block/stream_k.cuh", bug);
      }
    }
}

// The wgmma kernel's TMA stores of D (store_warp_rows_by_tma): exact as it is, with f32 and bf16 outputs, edges past
// M and N, stream-K's pieces added; each seeded bug caught (wrong results, the race check, or the emulator's report
// of a box overwritten or left in flight).
TEST(EmulatedGemm, TmaStoreSeededBugsAreCaught) {
  const std::vector<TemplateBug> bugs{
      {"(control: the template as it is)", "", ""},
      {"boxes written unswizzled", "(linear ^ (static_cast<u32>(r & 7) << 4))", "linear"},
      {"every box to the first columns", "static_cast<int>(col_base) + box * kBoxCols", "static_cast<int>(col_base)"},
      {"no wait for the stores", "    tma_store_commit();\n    tma_store_wait();", "    tma_store_commit();"},
      {"no proxy fence before the stores",
       "  fence_proxy_async();  // the boxes' generic-proxy writes before the copy engine's reads\n",
       "  // (no proxy fence)\n"},
      {"stores issued before the lanes' writes are in",
       "  fence_proxy_async();  // the boxes' generic-proxy writes before the copy engine's reads\n  syncwarp();",
       "  fence_proxy_async();  // the boxes' generic-proxy writes before the copy engine's reads"},
  };
  for (const DType out : {DType::f32, DType::bf16})
    for (const char* config : {"wgmma=1,block_m=128,block_n=128,warp_m=64,warp_n=128,block_k=64,stages=3,split_k=1,"
                               "cluster_m=1,cluster_n=1,tma_store=1",
                               "wgmma=1,block_m=64,block_n=128,warp_m=64,warp_n=128,block_k=64,stages=3,stream_k=1,"
                               "cluster_m=1,cluster_n=1,tma_store=1"}) {
      MutatedGemm gemm(row_col_spec("sm_90a", DType::f16, out), Shape{200, 136, 704, 1}, 9);
      gemm.set_config(CudaGemmConfig::default_for(gemm.binding().problem, gemm.target()).with_overrides(config));
      gemm.target().sm_count = 10;
      for (const TemplateBug& bug : bugs) {
        SCOPED_TRACE(fmt::format("{} out, {}: {}", dtype_name(out), config, bug.what));
        gemm.expect_caught("tessera/block/epilogue_store.cuh", bug);
      }
    }
}

// A seeded bug and what must show it: a phrase of the emulator's report (or "mismatches"; "" for any failure).
struct ReasonedBug {
  TemplateBug bug;
  const char* reason;
};

// Runs `part` with each bug in grid and in reverse order: the control exact in both, every bug caught in one of them
// for its reason.
void expect_each_caught_for_its_reason(MutatedGemm& gemm, const std::string& part,
                                       const std::vector<ReasonedBug>& bugs) {
  for (const ReasonedBug& b : bugs) {
    SCOPED_TRACE(b.bug.what);
    std::vector<std::string> outcomes;
    for (const EmuSchedule order : {EmuSchedule::Forward, EmuSchedule::Reverse})
      outcomes.push_back(gemm.run(part, b.bug, order));
    if (b.bug.control()) {
      EXPECT_EQ(outcomes[0], "ok") << "grid order";
      EXPECT_EQ(outcomes[1], "ok") << "reverse order";
      continue;
    }
    const bool caught = std::any_of(outcomes.begin(), outcomes.end(), [&](const std::string& o) {
      return o != "ok" && o.find(b.reason) != std::string::npos;
    });
    EXPECT_TRUE(caught) << "grid order: " << outcomes[0] << "\nreverse order: " << outcomes[1];
  }
}

// Thread-block clusters on the wgmma kernel: 2 x 2 clusters of 64 x 64 tiles, A and B each loaded in halves by the
// blocks sharing them and multicast, over a 3 x 3 tile grid padded to 4 x 4 (blocks past D's edge still load their
// parts). Exact in grid order (a cluster's blocks in lockstep) and in reverse (each block running ahead of its
// peers); each seeded bug caught for its own reason.
TEST(EmulatedGemm, ClusterMulticastSeededBugsAreCaught) {
  const std::vector<ReasonedBug> bugs{
      {{"(control: the template as it is)", "", ""}, ""},
      {{"no cluster barrier after the barriers' init", "    cluster_sync();\n  else", "    __syncthreads();\n  else"},
       "mbarrier"},
      {{"no wait for the peers' releases before exiting",
        "          mbarrier_wait(wgmma_empty<T>(static_cast<int>(g % T::Stages)), (static_cast<u32>(g / T::Stages) & "
        "1u) ^ 1u);",
        "          (void)g;"},
       "have all exited"},
      {{"a stage released to this block alone", "if (writers >> r & 1) mbarrier_arrive_cluster",
        "if (r == static_cast<int>(rank)) mbarrier_arrive_cluster"},
       "deadlock"},
      {{"the empty barriers counting this block's releases only", "mbarrier_init(wgmma_empty<T>(s), S::kReleases);",
        "mbarrier_init(wgmma_empty<T>(s), S::kConsumers);"},
       "race"},
      {{"a part multicast to this block alone", "tma_load_3d_multicast(dst, map, x, y, batch, full, sharers);",
        "tma_load_3d_multicast(dst, map, x, y, batch, full, static_cast<u16>(1u << cluster_rank()));"},
       "deadlock"},
      {{"every block loading the first part", "row0 + part * kPartRows);", "row0);"}, "mismatches"},
  };
  MutatedGemm gemm(row_col_spec("sm_90a", DType::f16), Shape{192, 136, 512, 1}, 13);
  gemm.set_config(CudaGemmConfig::default_for(gemm.binding().problem, gemm.target())
                      .with_overrides("wgmma=1,block_m=64,block_n=64,warp_m=64,warp_n=64,block_k=64,stages=2,"
                                      "split_k=1,cluster_m=2,cluster_n=2,tma_store=0"));
  expect_each_caught_for_its_reason(gemm, "tessera/gemm/gemm_wgmma.cuh", bugs);
}

// Stream-K over 2 x 2 clusters of 64 x 64 tiles: a 3 x 3 tile grid padded to 2 x 2 cluster tiles of 16 k-tiles on 12
// SMs, 3 clusters of 21 or 22 iterations (pieces cross cluster tiles). The peers walk the same k-tiles, so their
// copies still multicast; each block has its own tile, flag and pieces. Exact in grid and reverse order; each seeded
// bug caught for its own reason.
TEST(EmulatedGemm, StreamKOverClustersSeededBugsAreCaught) {
  const std::vector<ReasonedBug> bugs{
      {{"(control: the template as it is)", "", ""}, ""},
      {{"every rank on its cluster tile's first row of tiles", "piece.tile_m = unit_m * kClusterM + rank % kClusterM;",
        "piece.tile_m = unit_m * kClusterM;"},
       "mismatches"},
      {{"pieces counted in blocks, not clusters",
        "piece.before = static_cast<int>(unit - stream_k_block_of(tile_begin, units, total));",
        "piece.before = static_cast<int>(blockIdx.x - stream_k_block_of(tile_begin, units, total) * kCluster);"},
       ""},
      {{"no cluster barrier between pieces", "      cluster_sync();\n    else", "      __syncthreads();\n    else"},
       "race"},
      {{"blocks as the schedule's units", "const i64 units = gridDim.x / kCluster,", "const i64 units = gridDim.x,"},
       ""},
  };
  MutatedGemm gemm(row_col_spec("sm_90a", DType::f16), Shape{192, 136, 1024, 1}, 17);
  const CudaGemmConfig config =
      CudaGemmConfig::default_for(gemm.binding().problem, gemm.target())
          .with_overrides(
              "wgmma=1,block_m=64,block_n=64,warp_m=64,warp_n=64,block_k=64,stages=2,split_k=1,"
              "cluster_m=2,cluster_n=2,stream_k=1,stream_k_waves=0,tma_store=0");
  gemm.set_config(config);
  gemm.target().sm_count = 12;
  const StreamKPlan plan = stream_k_plan(gemm.binding().problem, config, gemm.target());
  ASSERT_EQ(plan.cluster, 4);
  ASSERT_EQ(plan.tiles, 4);
  ASSERT_EQ(plan.units, 3);
  ASSERT_EQ(plan.blocks, 12);
  ASSERT_NE(plan.total % plan.units, 0) << "pieces must cross cluster tiles";
  expect_each_caught_for_its_reason(gemm, "tessera/block/stream_k.cuh", bugs);
  // Fewer SMs than a cluster's blocks: one cluster runs every iteration.
  gemm.target().sm_count = 3;
  ASSERT_EQ(stream_k_plan(gemm.binding().problem, config, gemm.target()).units, 1);
  EXPECT_EQ(gemm.run("tessera/block/stream_k.cuh", {"(control: the template as it is)", "", ""}, EmuSchedule::Forward),
            "ok");
}

// Threads asking for the same CUDA spec at once get one build (the runtime's kernels live in the shared KernelCache).
TEST(EmulatedGemm, ConcurrentRequestsForOneSpecBuildOnce) {
  CudaRuntime rt("cuda-emu:sm_80");
  GemmProblem problem;
  problem.m = problem.n = problem.k = 64;
  problem.signature.a.dtype = problem.signature.b.dtype = DType::f16;
  std::vector<std::thread> threads;
  std::vector<std::string> names(4);
  for (std::size_t i = 0; i < names.size(); ++i)
    threads.emplace_back([&, i] { names[i] = rt.compile(problem).name(); });
  for (auto& t : threads) t.join();
  const CacheStats stats = rt.cache_stats();
  EXPECT_EQ(1u, stats.builds);
  EXPECT_EQ(1u, stats.misses);
  EXPECT_EQ(3u, stats.hits);
  for (const auto& name : names) EXPECT_EQ(names[0], name);
}

TEST(EmulatedGemm, UnalignedOperandsAndSixteenBitOutput) {
  // K = 255 with packed rows: 2-byte rows, synchronous copies; f16 D with the linear epilogue.
  CudaRuntime runtime("cuda-emu:sm_80");
  for (DType out : {DType::f32, DType::f16}) {
    std::vector<std::uint16_t> a(37 * 255), b(255 * 19), d(37 * 19);
    std::vector<float> d32(37 * 19);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> small(-3, 3);
    for (auto& x : a) x = to_f16(static_cast<float>(small(rng)));
    for (auto& x : b) x = to_f16(static_cast<float>(small(rng)));
    GemmArgs args;
    args.a = Tensor::matrix(a.data(), 37, 255, Layout::row_major(), 0, DType::f16);
    args.b = Tensor::matrix(b.data(), 255, 19, Layout::row_major(), 0, DType::f16);
    args.d = out == DType::f16 ? Tensor::matrix(d.data(), 37, 19, Layout::row_major(), 0, DType::f16)
                               : Tensor::matrix(d32.data(), 37, 19);
    const CudaGemmConfig config = runtime.default_config(args);
    EXPECT_EQ(config.align_a, 1);
    const GemmReference reference = reference_gemm(args);
    runtime.compile(describe_gemm(args), config).run(args);
    const Comparison cmp = compare_gemm(reference, args.d, true);
    EXPECT_TRUE(cmp.ok()) << dtype_name(out) << ": " << cmp.first_mismatch;
  }
}

TEST(EmulatedGemm, TheResultDoesNotDependOnTheSchedule) {
  // A race-free kernel computes the same bits whatever order its threads run in.
  std::vector<float> results[3];
  const EmuSchedule schedules[3] = {EmuSchedule::Forward, EmuSchedule::Reverse, EmuSchedule::Shuffle};
  for (int i = 0; i < 3; ++i) {
    EmuOptions options;
    options.schedule = schedules[i];
    options.seed = 42;
    CudaRuntime runtime("cuda-emu:sm_80", options);
    std::vector<std::uint16_t> a(70 * 90), b(90 * 50);
    std::vector<float> bias(50), d(70 * 50, -1.0f);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    for (auto& x : a) x = to_bf16(real(rng));
    for (auto& x : b) x = to_bf16(real(rng));
    for (auto& x : bias) x = real(rng);
    GemmArgs args;
    args.a = Tensor::matrix(a.data(), 70, 90, Layout::row_major(), 0, DType::bf16);
    args.b = Tensor::matrix(b.data(), 90, 50, Layout::row_major(), 0, DType::bf16);
    args.d = Tensor::matrix(d.data(), 70, 50);
    args.set_epilogue("silu(acc + bias[n])");
    args.inputs["bias"] = Tensor::vector(bias.data(), 50);
    runtime.compile(describe_gemm(args), runtime.default_config(args).with_overrides("split_k=3")).run(args);
    results[i] = d;
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace tessera
