// What a tuner records of one timed variant, for any operation, and where it looks up and keeps such records. A
// measurement is identified by its op, its problem (canonical JSON), the kernel spec, the threads, the hardware and
// whether B was cold; TuningRecords (tessera/tuning_records.hpp, the tessera_tuning library) keeps them in SQLite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generator/attention/attention_problem.hpp"
#include "generator/gemm/gemm_problem.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

struct TuningRecord {
  std::string spec_hash{};  // of the kernel spec (signature, config, target)
  std::string op = "gemm";
  std::string problem{};    // the sizes, as record_problem writes them
  std::string family{};     // the shape family from the suite ("skinny", "llm", ...)
  std::string signature{};  // JSON
  std::string config{};     // JSON
  std::string target{};     // "cpu:avx512"
  std::string hardware{};   // the CPU model and its caches
  int threads = 1;
  double median_ns = 0;  // median time of one call
  double spread = 0;     // median absolute deviation / median, over the samples
  int samples = 0;
  std::string tessera_version{};
  std::string measured_at{};  // ISO 8601, UTC
  bool b_cold = false;        // B evicted from the caches before each timed call (TuneOptions::cold_b)
};

// A problem's sizes as records key them: canonical JSON (keys sorted, no spaces), so that equal problems give equal
// text. GEMM: {"batch","k","m","n"}. Attention: batch, heads, kv_heads, seq_q, seq_kv (and the per-item lengths of
// a varlen batch). SpMM and SDDMM: m, n, k, nnz and the pattern's fingerprint (SparsePlan::fingerprint): a sparse
// kernel's time depends on the pattern, not only on its sizes.
std::string record_problem(const GemmProblem& problem);
std::string record_problem(const AttentionProblem& problem);
std::string record_problem(const SpmmProblem& problem, std::uint64_t pattern_fingerprint);
std::string record_problem(const SddmmProblem& problem, std::uint64_t pattern_fingerprint);

// The host's description as records store it: the CPU model and family, its caches and (AVX-512) its FMA rate.
std::string host_hardware();

struct GemmExtents {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};
// The sizes of a GEMM record; throws InvalidArgument naming the record when it is of another op or its problem is
// not GEMM's.
GemmExtents gemm_extents(const TuningRecord& record);

// Where tuners look up earlier measurements (a variant on record is not timed again, so an interrupted run resumes)
// and keep new ones.
class MeasurementStore {
 public:
  virtual ~MeasurementStore() = default;
  // The recorded median (ns) of the measurement `key` identifies (its spec_hash, op, problem, threads, hardware and
  // b_cold), or a negative value when there is none.
  virtual double recorded_ns(const TuningRecord& key) const = 0;
  // Adds the records in one transaction (all or none); one already on record is left as it is.
  virtual void add(const std::vector<TuningRecord>& records) = 0;
};

}  // namespace tessera
