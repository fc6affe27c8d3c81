#include "tessera/measurement_store.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "generator/core/cpu_target.hpp"
#include "generator/core/error.hpp"
#include "generator/core/kernel_spec.hpp"

namespace tessera {

namespace {
// nlohmann's objects keep their keys sorted and dump() writes no spaces: canonical text.
std::string sparse_problem(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t nnz, std::uint64_t pattern) {
  return nlohmann::json{{"m", m}, {"n", n}, {"k", k}, {"nnz", nnz}, {"pattern", fmt::format("{:016x}", pattern)}}
      .dump();
}
}  // namespace

std::string record_problem(const GemmProblem& p) {
  return nlohmann::json{{"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch}}.dump();
}

std::string record_problem(const AttentionProblem& p) {
  nlohmann::json j{
      {"batch", p.batch}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"seq_q", p.seq_q}, {"seq_kv", p.seq_kv}};
  if (p.varlen()) j["seq_lens_q"] = p.seq_lens_q, j["seq_lens_kv"] = p.seq_lens_kv;
  return j.dump();
}

std::string record_problem(const SpmmProblem& p, std::uint64_t pattern) {
  return sparse_problem(p.m, p.n, p.k, p.pattern.nnz, pattern);
}

std::string record_problem(const SddmmProblem& p, std::uint64_t pattern) {
  return sparse_problem(p.m, p.n, p.k, p.pattern.nnz, pattern);
}

std::string host_hardware() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU", family;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") model = line.substr(line.find(':') + 2);
    if (line.rfind("cpu family", 0) == 0 && family.empty()) family = line.substr(line.find(':') + 2);
  }
  const CpuTarget host = CpuTarget::host();
  std::string text = fmt::format("{} (family {}); L1d {} KiB, L2 {} KiB, L3 {} KiB", model, family,
                                 host.l1d_bytes >> 10, host.l2_bytes >> 10, host.l3_bytes >> 10);
  if (host.isa == CpuIsa::Avx512) text += fmt::format(", AVX-512 FMAs {}/cycle", host.vector_fmas_per_cycle);
  return text;
}

GemmExtents gemm_extents(const TuningRecord& r) {
  const auto refuse = [&](const std::string& why) {
    return InvalidArgument("records", fmt::format("the measurement of spec {} {}", r.spec_hash, why));
  };
  if (r.op != "gemm") throw refuse(fmt::format("is of op '{}', not a GEMM", r.op));
  try {
    const nlohmann::json j = nlohmann::json::parse(r.problem);
    GemmExtents e{integer_at<std::int64_t>(j, "m"), integer_at<std::int64_t>(j, "n"), integer_at<std::int64_t>(j, "k"),
                  integer_at<std::int64_t>(j, "batch")};
    if (e.m < 0 || e.n < 0 || e.k < 0 || e.batch < 0) throw refuse("has negative sizes: " + r.problem);
    return e;
  } catch (const nlohmann::json::exception& e) {
    throw refuse(fmt::format("has a malformed problem '{}': {}", r.problem, e.what()));
  } catch (const InvalidArgument& e) {
    throw refuse(fmt::format("has a malformed problem '{}': {}", r.problem, e.what()));
  }
}

}  // namespace tessera
