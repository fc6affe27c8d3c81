#include "bench/sparse_benchmark.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "bench/agreement.hpp"
#include "bench/sparse_peer.hpp"
#include "bench/stream_read.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/cost/sparse_cost.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

SparseCase parse_case(const std::vector<std::string>& fields, const std::string& where) {
  if (fields.size() < 2 || fields.size() > 3) throw InvalidArgument(where, "expects PATTERN DENSE [FORMAT]");
  SparseCase c;
  c.pattern = fields[0];
  const auto [end, ec] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), c.dense);
  if (ec != std::errc() || end != fields[1].data() + fields[1].size() || c.dense < 1)
    throw InvalidArgument(where, "DENSE '" + fields[1] + "' is not a positive integer");
  if (fields.size() == 3) c.format = fields[2];
  return c;
}

CooMatrix load(const std::string& pattern) {
  return pattern.find(':') != std::string::npos && pattern.find('/') == std::string::npos ? generate_pattern(pattern)
                                                                                          : read_matrix_market(pattern);
}

// tessera's storage of the pattern in the case's format ("auto": as Runtime::spmm chooses for N columns).
SparseMatrixData store(const CooMatrix& coo, const std::string& format, std::int64_t n, const CpuTarget& target) {
  if (format == "csr") return SparseMatrixData::csr(coo);
  if (format == "auto") {
    const SparseMatrixData csr = SparseMatrixData::csr(coo);
    const int side = square_block_for(SparsePlan::inspect(csr.view(), 1).stats(), n, cpu_spmm_max_block_rows(target));
    return side > 1 ? SparseMatrixData::bsr(coo, side, side) : SparseMatrixData::csr(coo);
  }
  int br = 0, bc = 0;
  if (std::sscanf(format.c_str(), "bsr:%dx%d", &br, &bc) != 2)
    throw InvalidArgument("format", "must be csr or bsr:RxC, got " + format);
  return SparseMatrixData::bsr(coo, cpu_spmm_block_rows_for(br, target), bc);  // as Runtime::spmm runs it
}

CsrArrays arrays(const SparseMatrix& m) {
  return {m.rows,
          m.cols,
          m.entries,
          static_cast<const std::int32_t*>(m.row_offsets),
          static_cast<const std::int32_t*>(m.col_indices),
          static_cast<const float*>(m.values)};
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::map<int, double> measure_stream(const std::vector<int>& thread_counts, std::ostream& log) {
  std::map<int, double> stream;
  for (int threads : thread_counts) stream[threads] = stream_read_gbps(threads);
  log << "stream read (GB/s):";
  for (const auto& [threads, gbps] : stream)
    log << fmt::format(" {:.1f} on {} thread{}", gbps, threads, threads > 1 ? "s" : "");
  log << "\n";
  return stream;
}

}  // namespace

std::string sparse_svg(const nlohmann::json& rows, const std::string& title) {
  // (case, threads) → peer → tessera ÷ peer.
  std::vector<std::string> cases, peers;
  std::vector<int> threads;
  std::map<std::pair<std::string, int>, std::map<std::string, double>> ratio;
  for (const auto& r : rows) {
    const std::string c = r["case"].get<std::string>();
    const int t = r["threads"].get<int>();
    if (std::find(cases.begin(), cases.end(), c) == cases.end()) cases.push_back(c);
    if (std::find(threads.begin(), threads.end(), t) == threads.end()) threads.push_back(t);
    auto& at = ratio[{c, t}];
    if (r.contains("speedup_over_openmp")) at["openmp"] = r["speedup_over_openmp"].get<double>();
    if (r.contains("peers"))
      for (const auto& [peer, v] : r["peers"].items())
        if (v.contains("speedup")) at[peer] = v["speedup"].get<double>();
    for (const auto& [peer, x] : at)
      if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  }
  std::string escaped;
  for (char ch : title) escaped += ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : std::string(1, ch);
  const char* colors[] = {"#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e", "#8c564b"};
  const double left = 60, panel = 240, gap = 190, lo = -2, hi = 7;  // log2 of the ratio's axis
  const double width = std::max(480.0, 44.0 * static_cast<double>(cases.size()));
  const double height = 60 + static_cast<double>(threads.size()) * (panel + gap);
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' font-family='sans-serif' font-size='11'>\n"
      "<rect width='{0}' height='{1}' fill='white'/>\n<text x='{2}' y='22' font-size='13'>{3}</text>\n",
      left + width + 150, height, left, escaped);
  double y0 = 50;
  for (const int t : threads) {
    const auto y_of = [&](double r) { return y0 + panel - (std::log2(std::max(r, 0.25)) - lo) / (hi - lo) * panel; };
    const double slot = width / static_cast<double>(cases.size());
    svg += fmt::format("<text x='{}' y='{}'>{} thread{}: tessera ÷ peer (log scale)</text>\n", left, y0 - 6, t,
                       t == 1 ? "" : "s");
    for (int e = static_cast<int>(lo); e <= static_cast<int>(hi); ++e)
      svg += fmt::format(
          "<line x1='{}' x2='{}' y1='{:.1f}' y2='{:.1f}' stroke='{}'/><text x='{}' y='{:.1f}' "
          "text-anchor='end'>{}</text>\n",
          left, left + width, y_of(std::exp2(e)), y_of(std::exp2(e)), e == 0 || e == 1 ? "#888" : "#ddd", left - 6,
          y_of(std::exp2(e)) + 4, std::exp2(e));
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const double x = left + static_cast<double>(i) * slot;
      svg += fmt::format(
          "<text x='{0:.1f}' y='{1:.1f}' text-anchor='end' transform='rotate(-40 {0:.1f} {1:.1f})'>{2}</text>\n",
          x + slot / 2, y0 + panel + 14, cases[i]);
      const auto it = ratio.find({cases[i], t});
      if (it == ratio.end()) continue;
      const double bar = slot * 0.8 / static_cast<double>(peers.size());
      for (std::size_t k = 0; k < peers.size(); ++k) {
        const auto v = it->second.find(peers[k]);
        if (v == it->second.end()) continue;
        const double y = y_of(v->second), base = y_of(1);
        svg += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'/>\n",
                           x + slot * 0.1 + bar * static_cast<double>(k), std::min(y, base), bar, std::fabs(base - y),
                           colors[k % 6]);
      }
    }
    y0 += panel + gap;
  }
  for (std::size_t k = 0; k < peers.size(); ++k)
    svg += fmt::format("<rect x='{}' y='{}' width='12' height='12' fill='{}'/><text x='{}' y='{}'>÷ {}</text>\n",
                       left + width + 20, 50 + 20 * k, colors[k % 6], left + width + 38, 60 + 20 * k, peers[k]);
  return svg + "</svg>\n";
}

std::string SparseCase::label() const {
  return fmt::format("{} {}{}", pattern, dense, format == "auto" ? "" : " " + format);
}

std::vector<SparseCase> load_sparse_suite(const std::string& path_or_name) {
  std::string path = path_or_name;
  if (path.find('/') == std::string::npos) path = std::string(TESSERA_SOURCE_DIR) + "/bench/suites/" + path + ".txt";
  std::ifstream in(path);
  if (!in) throw InvalidArgument("--suite", "cannot read " + path);
  std::vector<SparseCase> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::vector<std::string> fields;
    for (std::string w; words >> w;) fields.push_back(w);
    if (!fields.empty()) out.push_back(parse_case(fields, fmt::format("{}:{}", path, number)));
  }
  if (out.empty()) throw InvalidArgument("--suite", path + " holds no cases");
  return out;
}

std::vector<SparseCase> parse_sparse_cases(const std::string& list) {
  std::vector<SparseCase> out;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ';');) {
    std::vector<std::string> fields;
    std::istringstream parts(item);
    for (std::string part; std::getline(parts, part, '@');) fields.push_back(part);
    out.push_back(parse_case(fields, "--cases " + item));
  }
  if (out.empty()) throw InvalidArgument("--cases", "no cases given");
  return out;
}

nlohmann::json run_spmm_benchmark(const std::vector<SparseCase>& cases, const std::vector<int>& thread_counts,
                                  const std::vector<std::string>& peer_names, int repeat, const Sampling& sampling,
                                  std::ostream& log) {
  nlohmann::json rows = nlohmann::json::array();
  Runtime runtime;
  const std::map<int, double> stream = measure_stream(thread_counts, log);
  log << fmt::format("{:<44} {:>3} {:>10} {:>9} {:>7}", "case", "thr", "tessera ms", "GFLOP/s", "%read");
  for (const auto& p : peer_names) log << fmt::format(" {:>12}", p + " x");
  log << "\n";
  for (const SparseCase& c : cases) {
    const CooMatrix coo = load(c.pattern);
    const SparseMatrixData csr = SparseMatrixData::csr(coo);
    const SparseMatrixData stored = store(coo, c.format, c.dense, runtime.target());
    const SparseMatrix a = stored.view();
    const CsrArrays peer_a = arrays(csr.view());
    const std::int64_t m = a.rows, k = a.cols, n = c.dense;
    const std::vector<float> b = random_floats(static_cast<std::size_t>(k * n), 7);
    std::vector<float> d(static_cast<std::size_t>(m * n)), d_peer(d.size());
    SpmmArgs args;
    args.a = a;
    args.b = Tensor::matrix(const_cast<float*>(b.data()), k, n);
    args.d = Tensor::matrix(d.data(), m, n);
    const SpmmProblem problem = runtime.describe(args);
    const SpmmKernel kernel = runtime.compile(problem);
    const double flops = 2.0 * static_cast<double>(peer_a.nnz) * static_cast<double>(n);
    for (int threads : thread_counts) {
      args.threads = threads;
      args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(a, threads));
      const auto ours = [&] { kernel.run(args); };
      std::vector<std::unique_ptr<SpmmPeer>> peers;
      std::vector<std::string> why;
      for (const auto& name : peer_names) {
        std::unique_ptr<SpmmPeer> p = name == "eigen"    ? make_eigen_spmm()
                                      : name == "librsb" ? make_librsb_spmm()
                                      : name == "openmp" ? make_openmp_spmm()
                                      : name == "dense"  ? make_onednn_dense_spmm()
                                                         : nullptr;
        if (!p) throw InvalidArgument("--peers", "unknown peer '" + name + "' (eigen, librsb, openmp, dense)");
        why.push_back(p->unavailable(peer_a, n));
        if (why.back().empty()) p->prepare(peer_a, n, threads, b.data(), d_peer.data());
        peers.push_back(std::move(p));
      }
      const int our_calls = sampling.calibrate(ours);
      std::vector<int> peer_calls;
      for (std::size_t i = 0; i < peers.size(); ++i)
        peer_calls.push_back(why[i].empty() ? sampling.calibrate([&] { peers[i]->run(); }) : 0);
      std::vector<double> our_ms;
      std::vector<std::vector<double>> peer_ms(peers.size());
      for (int r = 0; r < repeat; ++r) {
        our_ms.push_back(1e3 * sampling.sample(ours, our_calls));
        for (std::size_t i = 0; i < peers.size(); ++i)
          if (why[i].empty()) peer_ms[i].push_back(1e3 * sampling.sample([&] { peers[i]->run(); }, peer_calls[i]));
      }
      const double ms = median(our_ms);
      const double gbps = problem.min_bytes() / (ms * 1e6);
      nlohmann::json row{
          {"case", c.label()},
          {"pattern", c.pattern},
          {"format",
           a.format == SparseFormat::Csr ? std::string("csr") : fmt::format("bsr:{}x{}", a.block_rows, a.block_cols)},
          {"m", m},
          {"k", k},
          {"n", n},
          {"nnz", peer_a.nnz},
          {"stats", to_json(problem.pattern)},
          {"threads", threads},
          {"kernel", kernel.name()},
          {"tessera_ms", ms},
          {"tessera_gflops", flops / (ms * 1e6)},
          {"gbytes_per_s", gbps},
          {"stream_read_gbps", stream.at(threads)},
          {"fraction_of_stream_read", gbps / stream.at(threads)}};
      bool agrees = true;
      std::string line = fmt::format("{:<44} {:>3} {:>10.3f} {:>9.1f} {:>6.0f}%", c.label(), threads, ms,
                                     flops / (ms * 1e6), 100 * gbps / stream.at(threads));
      nlohmann::json peer_rows = nlohmann::json::object();
      for (std::size_t i = 0; i < peers.size(); ++i) {
        if (!why[i].empty()) {
          peer_rows[peer_names[i]] = {{"unavailable", why[i]}};
          line += fmt::format(" {:>12}", "-");
          continue;
        }
        // The peer's output of its last call, against tessera's.
        kernel.run(args);
        peers[i]->run();
        const double diff = max_rel_diff(d_peer, d);
        const bool ok = diff < 1e-4;
        agrees = agrees && ok;
        const double peer = median(peer_ms[i]);
        const double speedup = paired_median_ratio(peer_ms[i], our_ms);
        peer_rows[peer_names[i]] = {{"ms", peer},
                                    {"gflops", flops / (peer * 1e6)},
                                    {"speedup", speedup},
                                    {"max_rel_diff", diff},
                                    {"agrees", ok}};
        line += fmt::format(" {:>12.2f}", speedup);
      }
      row["peers"] = peer_rows;
      row["agrees"] = agrees;
      log << line << (agrees ? "" : "  DISAGREES") << std::endl;
      rows.push_back(row);
    }
  }
  return rows;
}

nlohmann::json run_sddmm_benchmark(const std::vector<SparseCase>& cases, const std::vector<int>& thread_counts,
                                   int repeat, const Sampling& sampling, std::ostream& log) {
  nlohmann::json rows = nlohmann::json::array();
  Runtime runtime;
  const std::map<int, double> stream = measure_stream(thread_counts, log);
  log << fmt::format("{:<44} {:>3} {:>10} {:>9} {:>10} {:>7} {:>9}\n", "case", "thr", "tessera ms", "GFLOP/s",
                     "openmp ms", "%read", "speedup");
  for (const SparseCase& c : cases) {
    if (c.format != "csr" && c.format != "auto") throw InvalidArgument("format", "SDDMM samples at a CSR pattern");
    const CooMatrix coo = load(c.pattern);
    const SparseMatrixData pattern = SparseMatrixData::csr(coo);
    const SparseMatrix v = pattern.view();
    const CsrArrays peer_p = arrays(v);
    const std::int64_t m = v.rows, n = v.cols, k = c.dense;
    const std::vector<float> a = random_floats(static_cast<std::size_t>(m * k), 5),
                             b = random_floats(static_cast<std::size_t>(n * k), 6);
    std::vector<float> out(static_cast<std::size_t>(v.entries)), out_peer(out.size());
    SddmmArgs args;
    args.pattern = v;
    args.a = Tensor::matrix(const_cast<float*>(a.data()), m, k);
    args.b = Tensor::matrix(const_cast<float*>(b.data()), n, k);
    args.out = Tensor::vector(out.data(), v.entries);
    args.set_epilogue("acc * s");
    const SddmmProblem problem = runtime.describe(args);
    const SddmmKernel kernel = runtime.compile(problem);
    const double flops = 2.0 * static_cast<double>(v.entries) * static_cast<double>(k);
    for (int threads : thread_counts) {
      args.threads = threads;
      args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(v, threads, "pattern"));
      const auto ours = [&] { kernel.run(args); };
      const auto peer = [&] { openmp_sddmm(peer_p, k, a.data(), b.data(), out_peer.data(), threads); };
      const int our_calls = sampling.calibrate(ours), peer_calls = sampling.calibrate(peer);
      std::vector<double> our_ms, peer_ms;
      for (int r = 0; r < repeat; ++r) {
        our_ms.push_back(1e3 * sampling.sample(ours, our_calls));
        peer_ms.push_back(1e3 * sampling.sample(peer, peer_calls));
      }
      const double diff = max_rel_diff(out_peer, out);
      const double ms = median(our_ms), pms = median(peer_ms);
      const double gbps = problem.min_bytes() / (ms * 1e6);
      const double speedup = paired_median_ratio(peer_ms, our_ms);
      rows.push_back({{"case", c.label()},
                      {"pattern", c.pattern},
                      {"m", m},
                      {"n", n},
                      {"k", k},
                      {"nnz", v.entries},
                      {"stats", to_json(problem.pattern)},
                      {"threads", threads},
                      {"kernel", kernel.name()},
                      {"tessera_ms", ms},
                      {"tessera_gflops", flops / (ms * 1e6)},
                      {"openmp_ms", pms},
                      {"openmp_gflops", flops / (pms * 1e6)},
                      {"speedup_over_openmp", speedup},
                      {"gbytes_per_s", gbps},
                      {"stream_read_gbps", stream.at(threads)},
                      {"fraction_of_stream_read", gbps / stream.at(threads)},
                      {"max_rel_diff", diff},
                      {"agrees", diff < 1e-4}});
      log << fmt::format("{:<44} {:>3} {:>10.3f} {:>9.1f} {:>10.3f} {:>6.0f}% {:>9.2f}{}\n", c.label(), threads, ms,
                         flops / (ms * 1e6), pms, 100 * gbps / stream.at(threads), speedup,
                         diff < 1e-4 ? "" : "  DISAGREES");
    }
  }
  return rows;
}

}  // namespace tessera::bench
