// tessera-bench: tessera against its peers, side by side in one process. `tessera-bench gemm --help`.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <sstream>

#include "bench/attention_benchmark.hpp"
#include "bench/compile_benchmark.hpp"
#include "bench/cuda_benchmark.hpp"
#include "bench/dispatch_benchmark.hpp"
#include "bench/fusion_benchmark.hpp"
#include "bench/gemm_benchmark.hpp"
#include "bench/library_benchmark.hpp"
#include "bench/report.hpp"
#include "bench/sparse_benchmark.hpp"
#include "bench/suite.hpp"
#include "generator/core/cuda_target.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// "rr,rc" → (A column-major, B column-major) pairs.
std::vector<std::pair<bool, bool>> layout_pairs(const std::string& text) {
  std::vector<std::pair<bool, bool>> out;
  for (const auto& pair : split(text)) {
    if (pair.size() != 2 || pair.find_first_not_of("rc") != std::string::npos)
      throw tessera::InvalidArgument("--layouts", "expected pairs like rr,rc,cr,cc, got '" + pair + "'");
    out.emplace_back(pair[0] == 'c', pair[1] == 'c');
  }
  if (out.empty()) throw tessera::InvalidArgument("--layouts", "no layouts given");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera::bench;
  CLI::App app{"tessera-bench: tessera against oneDNN, OpenBLAS, BLIS, LIBXSMM and Eigen"};
  app.require_subcommand(1);
  std::string suite, shapes_text, peers_text = "onednn,openblas,blis,libxsmm,eigen", threads_text = "1,2", json_path,
                                  svg_path;
  BenchmarkOptions options;
  CLI::App* gemm = app.add_subcommand("gemm", "GEMM C = A·B (f32, bf16 or int8 inputs; C f32)");
  gemm->add_option("--suite", suite, "a suite file, or a name in bench/suites (square, small, skinny, ...)");
  gemm->add_option("--shapes", shapes_text, "MxNxK[xBATCH],...");
  gemm->add_option("--peers", peers_text, "comma-separated: onednn,openblas,blis,libxsmm,eigen (or none)");
  gemm->add_option("--threads", threads_text, "comma-separated thread counts");
  gemm->add_option("--repeat", options.repeat, "samples per library (median reported)");
  std::string dtype = "f32";
  gemm->add_option("--dtype", dtype, "element type of A and B: f32, bf16, or i8 (u8 A and i8 B; tessera and oneDNN)");
  gemm->add_option("--sample-ms", options.sample_ms, "approximate length of one sample");
  gemm->add_option("--settle-ms", options.settle_ms, "pause before each sample while other libraries' threads go idle");
  gemm->add_flag("--cold-b", options.cold_b,
                 "evict B from every cache level before each timed call (CPU; each call timed alone), as a layer's "
                 "weights arrive from memory");
  gemm->add_option("--json", json_path, "write the results as JSON to FILE (- for stdout)");
  gemm->add_option("--svg", svg_path, "write a plot to FILE");
  std::string target = "cpu", layouts_text = "rr,rc,cr,cc";
  gemm->add_option("--target", target, "cpu (default) or cuda[:sm_XX]: tessera's CUDA kernels against cuBLAS");
  CLI::Option* layouts_option = gemm->add_option(
      "--layouts", layouts_text, "A and B layouts to run, r(ow)/c(ol) pairs (CUDA default rr,rc,cr,cc; CPU rr)");
  CLI::App* fusion = app.add_subcommand("fusion", "gelu(acc + bias[n]) fused vs plain vs oneDNN (fused and split)");
  fusion->add_option("--shapes", shapes_text, "MxNxK,...")->required();
  fusion->add_option("--threads", threads_text, "comma-separated thread counts");
  fusion->add_option("--repeat", options.repeat, "samples per variant (median reported)");
  fusion->add_option("--json", json_path, "write the results as JSON to FILE (- for stdout)");
  CLI::App* attention =
      app.add_subcommand("attention", "fused attention against oneDNN unfused (matmul, softmax, matmul per head)");
  std::string attention_suite, attention_shapes;
  attention->add_option("--suite", attention_suite, "a suite file, or a name in bench/suites (attention, ...)");
  attention->add_option("--shapes", attention_shapes, "BxHxGxSQxSKVxD[c],... (c: causal)");
  attention->add_option("--threads", threads_text, "comma-separated thread counts");
  attention->add_option("--repeat", options.repeat, "samples per contender (median reported)");
  attention->add_option("--json", json_path, "write the results as JSON to FILE (- for stdout)");
  std::string attention_dtype = "f32";
  attention->add_option("--dtype", attention_dtype, "element type of Q, K, V and O: f32 or bf16 (both contenders)");
  std::string sparse_suite, sparse_cases, sparse_peers = "eigen,librsb,openmp,dense";
  CLI::App* spmm = app.add_subcommand("spmm", "SpMM against Eigen, librsb, a plain OpenMP loop and dense oneDNN");
  CLI::App* sddmm = app.add_subcommand("sddmm", "SDDMM (acc * s) against a plain OpenMP loop");
  for (CLI::App* sub : {spmm, sddmm}) {
    sub->add_option("--suite", sparse_suite, "a suite file, or a name in bench/suites (spmm, sddmm, ...)");
    sub->add_option("--cases", sparse_cases, "PATTERN@DENSE[@FORMAT];... (e.g. uniform:4096,4096,0.01@64)");
    sub->add_option("--threads", threads_text, "comma-separated thread counts");
    sub->add_option("--repeat", options.repeat, "samples per contender (median reported)");
    sub->add_option("--json", json_path, "write the results as JSON to FILE (- for stdout)");
    sub->add_option("--svg", svg_path, "write a plot (tessera ÷ each peer, per case and thread count) to FILE");
    sub->add_option("--sample-ms", options.sample_ms, "approximate length of one sample");
    sub->add_option("--settle-ms", options.settle_ms, "pause before each sample");
  }
  spmm->add_option("--peers", sparse_peers, "comma-separated: eigen,librsb,openmp,dense");
  CLI::App* dispatch = app.add_subcommand(
      "dispatch",
      "the cost of a call before the kernel starts: Runtime::gemm, GemmKernel::run, PreparedGemm::run, "
      "LIBXSMM's dispatch (1 thread)");
  std::string dispatch_shapes = "16x16x16,32x32x32,48x48x48,64x64x64";
  dispatch->add_option("--shapes", dispatch_shapes, "MxNxK,...");
  dispatch->add_option("--repeat", options.repeat, "samples per path (median reported)");
  dispatch->add_option("--sample-ms", options.sample_ms, "approximate length of one sample");
  dispatch->add_option("--json", json_path, "write the results as JSON to FILE (- for stdout)");
  CLI::App* compile = app.add_subcommand(
      "compile", "cold compile time of the demo's kernels and the quick suite's, with each kernel's run speed");
  int compile_threads = 1;
  compile->add_option("--repeat", options.repeat, "cold compiles per kernel (median reported)");
  compile->add_option("--threads", compile_threads, "the runtime's threads (compiling and running)");
  compile->add_option("--sample-ms", options.sample_ms, "approximate length of one run-speed sample");
  compile->add_option("--json", json_path, "write the results as JSON to FILE (- for stdout)");
  CLI::App* library = app.add_subcommand(
      "library",
      "a kernel library from `tessera library build` against the JIT, on the same GEMMs (row-major f32) and sparse "
      "products");
  std::string library_shapes = "64x64x64,256x256x256,512x512x512,1024x1024x1024,16x4096x4096,128x128x128x32";
  library->add_option("--shapes", library_shapes, "MxNxK[xBATCH],... (GEMM; \"\" for none)");
  std::string library_sparse;
  library->add_option("--sparse", library_sparse,
                      "PATTERN@DENSE;... generated CSR patterns for SpMM (N = DENSE) and SDDMM (K = DENSE)");
  std::string library_attention;
  library->add_option("--attention", library_attention, "BxHxGxSQxSKVxD[c],... attention shapes (f32, BHSD)");
  library->add_option("--threads", threads_text, "comma-separated thread counts");
  library->add_option("--repeat", options.repeat, "samples per side (median reported)");
  library->add_option("--sample-ms", options.sample_ms, "approximate length of one sample");
  library->add_option("--json", json_path, "write the results as JSON to FILE (- for stdout)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tessera-bench: error: " << e.what() << "\n";
    return 2;
  }

  // A report to its file, whole or not at all, or with "-" to stdout.
  const auto write_json = [&](const nlohmann::json& report) {
    if (json_path == "-")
      std::cout << report.dump(1) << "\n";
    else if (!json_path.empty())
      write_file_atomically(json_path, report.dump(1) + "\n");
  };
  try {
    if (library->parsed()) {
      std::string command = "tessera-bench";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      std::ostream& log = json_path == "-" ? std::cerr : std::cout;
      std::vector<int> threads;
      for (const auto& t : split(threads_text)) threads.push_back(std::stoi(t));
      const auto rows = run_library_benchmark(
          library_shapes.empty() ? std::vector<GemmShape>{} : parse_shapes(library_shapes),
          library_sparse.empty() ? std::vector<SparseCase>{} : parse_sparse_cases(library_sparse),
          library_attention.empty() ? std::vector<AttentionShape>{} : parse_attention_shapes(library_attention),
          threads, options.repeat, {options.sample_ms, 0}, log);
      write_json(nlohmann::json{{"command", command}, {"rows", rows}});
      for (const auto& row : rows)
        if (!row["agrees"].get<bool>()) {
          std::cerr << "tessera-bench: the library disagrees with the JIT on " << row["shape"] << "\n";
          return 1;
        }
      return 0;
    }
    if (compile->parsed()) {
      std::string command = "tessera-bench";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      std::ostream& log = json_path == "-" ? std::cerr : std::cout;
      const auto rows = run_compile_benchmark(options.repeat, compile_threads, {options.sample_ms, 0}, log);
      write_json(nlohmann::json{{"command", command}, {"rows", rows}});
      return 0;
    }
    if (dispatch->parsed()) {
      std::string command = "tessera-bench";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      std::ostream& log = json_path == "-" ? std::cerr : std::cout;
      const auto rows =
          run_dispatch_benchmark(parse_shapes(dispatch_shapes), options.repeat, {options.sample_ms, 0}, log);
      write_json(nlohmann::json{{"command", command}, {"rows", rows}});
      return 0;
    }
    if (spmm->parsed() || sddmm->parsed()) {
      if (sparse_suite.empty() == sparse_cases.empty())
        throw tessera::InvalidArgument("--suite/--cases", "give exactly one");
      std::vector<int> threads;
      for (const auto& t : split(threads_text)) threads.push_back(std::stoi(t));
      const auto cases = sparse_suite.empty() ? parse_sparse_cases(sparse_cases) : load_sparse_suite(sparse_suite);
      std::string command = "tessera-bench";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      std::ostream& log = json_path == "-" ? std::cerr : std::cout;
      const Sampling sampling{options.sample_ms, options.settle_ms};
      const auto rows = spmm->parsed()
                            ? run_spmm_benchmark(cases, threads, split(sparse_peers), options.repeat, sampling, log)
                            : run_sddmm_benchmark(cases, threads, options.repeat, sampling, log);
      write_json(nlohmann::json{{"command", command}, {"rows", rows}});
      if (!svg_path.empty()) write_file_atomically(svg_path, sparse_svg(rows, command));
      for (const auto& row : rows)
        if (!row["agrees"].get<bool>()) {
          std::cerr << "tessera-bench: a peer disagrees with tessera on " << row["case"] << "\n";
          return 1;
        }
      return 0;
    }
    if (attention->parsed()) {
      if (attention_suite.empty() == attention_shapes.empty())
        throw tessera::InvalidArgument("--suite/--shapes", "give exactly one");
      std::vector<int> threads;
      for (const auto& t : split(threads_text)) threads.push_back(std::stoi(t));
      const auto shapes =
          attention_suite.empty() ? parse_attention_shapes(attention_shapes) : load_attention_suite(attention_suite);
      std::string command = "tessera-bench";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      if (attention_dtype != "f32" && attention_dtype != "bf16")
        throw tessera::InvalidArgument("--dtype", "must be f32 or bf16");
      const auto rows =
          run_attention_benchmark(shapes, threads, options.repeat, Sampling{options.sample_ms, options.settle_ms},
                                  attention_dtype == "bf16" ? tessera::DType::bf16 : tessera::DType::f32,
                                  json_path == "-" ? std::cerr : std::cout);
      write_json(nlohmann::json{{"command", command}, {"rows", rows}});
      for (const auto& row : rows)
        if (!row["agrees"].get<bool>()) {
          std::cerr << "tessera-bench: an unfused peer (oneDNN " << row["max_rel_diff_vs_unfused"] << ", PyTorch "
                    << row["max_rel_diff_vs_torch"] << ") disagrees with tessera on " << row["shape"] << "\n";
          return 1;
        }
      return 0;
    }
    if (fusion->parsed()) {
      std::vector<int> threads;
      for (const auto& t : split(threads_text)) threads.push_back(std::stoi(t));
      const auto rows = run_fusion_benchmark(parse_shapes(shapes_text), threads, options.repeat,
                                             Sampling{options.sample_ms, options.settle_ms},
                                             json_path == "-" ? std::cerr : std::cout);
      write_json(rows);
      return 0;
    }
    if (suite.empty() == shapes_text.empty()) throw tessera::InvalidArgument("--suite/--shapes", "give exactly one");
    const std::vector<GemmShape> shapes = suite.empty() ? parse_shapes(shapes_text) : load_suite(suite);
    if (tessera::CudaTarget::is_cuda_text(target)) {
      if (peers_text != "cublas") throw tessera::InvalidArgument("--peers", "on a CUDA target the peer is cublas");
      if (options.cold_b) throw tessera::InvalidArgument("--cold-b", "is for the CPU benchmark");
      CudaBenchmarkOptions cuda;
      cuda.target = target;
      cuda.repeat = options.repeat;
      const auto parsed = tessera::parse_dtype(dtype);
      if (!parsed || !tessera::dtype_info(*parsed).is_float)
        throw tessera::InvalidArgument("--dtype", "must be f16, bf16, tf32 or f32");
      cuda.dtype = *parsed;
      for (auto [a_col, b_col] : layout_pairs(layouts_text)) {
        const auto layout = [](bool col) { return col ? tessera::Layout::col_major() : tessera::Layout::row_major(); };
        cuda.layouts.emplace_back(layout(a_col), layout(b_col));
      }
      try {
        const auto report =
            run_cuda_benchmark(shapes, cuda, [](const nlohmann::json& row) { std::cout << row.dump() << std::endl; });
        write_json(report);
        for (const auto& row : report["rows"])
          if (!row["agrees"].get<bool>()) return 1;
        return 0;
      } catch (const tessera::Unavailable& e) {
        std::cerr << "tessera-bench: no usable CUDA device: " << e.what() << "\n";
        return 3;
      }
    }
    if (dtype != "f32" && dtype != "bf16" && dtype != "i8")
      throw tessera::InvalidArgument("--dtype", "must be f32, bf16 or i8 (u8 A, i8 B)");
    options.inputs = dtype == "bf16" ? GemmInputs::bf16 : dtype == "i8" ? GemmInputs::int8 : GemmInputs::f32;
    options.layouts = layout_pairs(layouts_option->count() ? layouts_text : "rr");
    options.peers = peers_text == "none" ? std::vector<std::string>{} : split(peers_text);
    for (const auto& t : split(threads_text)) {
      try {
        options.threads.push_back(std::stoi(t));
      } catch (const std::exception&) {
        throw tessera::InvalidArgument("--threads", "'" + t + "' is not a number");
      }
    }
    options.threads.erase(options.threads.begin());  // drop the default, keep what was given
    if (options.threads.empty()) throw tessera::InvalidArgument("--threads", "no thread counts given");

    std::string command = "tessera-bench";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    std::ostream& log = json_path == "-" ? std::cerr : std::cout;
    log << table_header(options.peers) << "\n";
    const auto results = run_gemm_benchmark(
        shapes, options, [&](const ShapeResult& r) { log << table_row(r, options.peers) << std::endl; });
    const nlohmann::json report = to_json(results, command);
    log << "summary (tessera / best peer): " << report["summary"].dump() << "\n";
    write_json(report);
    if (!svg_path.empty()) write_file_atomically(svg_path, to_svg(results, command));
    for (const auto& r : results)
      for (const auto& p : r.results)
        if (p.unavailable.empty() && !p.agrees) {
          std::cerr << "tessera-bench: " << p.peer << " disagrees with tessera on " << r.shape.label() << "\n";
          return 1;
        }
    return 0;
  } catch (const tessera::Error& e) {
    std::cerr << "tessera-bench: error: " << e.what() << "\n";
    return 2;
  }
}
