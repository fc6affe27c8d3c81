// The tuner: enumerate a problem's variants → prune (validate) → rank (cost model) → compile the top-k in parallel
// (with a time limit per compile) → measure them one at a time, in interleaved rounds on fresh operands (median of
// calibrated samples) → keep the best → record every measurement.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "generator/cost/cost_model.hpp"
#include "tessera/measurement_store.hpp"
#include "tessera/tessera.hpp"

namespace tessera {

struct TuneOptions {
  int top_k = 8;            // variants compiled and measured, best-ranked first
  bool exhaustive = false;  // every variant of the space instead
  int samples = 5;          // rounds; a variant > 4x slower than the fastest calibration gets one sample
  double sample_ms = 2.0;   // each sample repeats the call for about this long
  // Rounds more for the variants whose median is within refine_within of the best: which of near-equals wins is
  // what a single noisy median decides, so they get the samples that settle it.
  int refine_samples = 0;
  double refine_within = 0.10;
  double compile_limit_s = 10;  // a compile slower than this is left out
  // B evicted from every cache level before each timed call (the call alone is timed), as the weights of a model
  // too large for the caches are when a layer runs. Times of a B that stays in the shared L3 between calls vary
  // with where its pages land and with the neighbours' traffic.
  bool cold_b = false;
};

struct VariantMeasurement {
  CpuGemmConfig config;
  std::string spec_hash;
  double median_ns = 0, spread = 0;
  bool from_records = false;  // measured by an earlier run (resumed): its time is the recorded one
};

struct TuneResult {
  GemmProblem problem;
  std::size_t space = 0;                     // variants in the space after pruning
  std::size_t compiled = 0;                  // compiled now
  std::vector<VariantMeasurement> measured;  // in rank order
  std::size_t best = 0;                      // index into measured
  std::string ranked_by;
};

class Tuner {
 public:
  // `records` may be null (nothing recorded, nothing resumed). The runtime's threads time the calls.
  Tuner(Runtime& runtime, std::shared_ptr<const CpuCostModel> model, MeasurementStore* records, TuneOptions options);
  // `progress(done, total)` is called after each timed sample (total: samples × variants measured now).
  TuneResult tune(const GemmProblem& problem, const std::string& family,
                  const std::function<void(int, int)>& progress = {});
  // The given configs measured as tune() measures its top k (in their order; none skipped for being slower).
  TuneResult measure(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs, const std::string& family,
                     const std::function<void(int, int)>& progress = {});

 private:
  Runtime& runtime_;
  std::shared_ptr<const CpuCostModel> model_;
  MeasurementStore* records_;
  TuneOptions options_;
};

// A timed variant of an attention or sparse tuning, with the analytic model's estimate.
template <class Config>
struct MeasuredVariant {
  Config config;
  std::string spec_hash;
  double median_ns = 0, spread = 0;
  double predicted_cycles = 0;
  bool from_records = false;  // measured by an earlier run (resumed): its time is the recorded one
};

template <class Config>
struct VariantTuneResult {
  std::size_t space = 0;                          // variants in the space
  std::vector<MeasuredVariant<Config>> measured;  // in rank order
  std::size_t best = 0;                           // index into measured
};

// Attention: the variants of cpu_attention_variants ranked by the analytic model (default_for first), the top_k (or
// every one, exhaustive) compiled and timed in interleaved rounds on fresh operands. With `records`, a variant
// measured before for this problem on this host is not timed again, and the ones timed are recorded (op
// "attention", with `family`).
struct AttentionTuneResult : VariantTuneResult<CpuAttentionConfig> {
  AttentionProblem problem;
};
AttentionTuneResult tune_attention(Runtime& runtime, const AttentionProblem& problem, const TuneOptions& options,
                                   MeasurementStore* records = nullptr, const std::string& family = "",
                                   const std::function<void(int, int)>& progress = {});
// The given configs (valid for the problem) timed as tune_attention times its top k, in their order.
AttentionTuneResult measure_attention(Runtime& runtime, const AttentionProblem& problem,
                                      const std::vector<CpuAttentionConfig>& configs, TuneOptions options,
                                      MeasurementStore* records = nullptr, const std::string& family = "");

// SpMM and SDDMM: the variants ranked by the analytic model (default_for first), the top_k (or every one) compiled
// and timed in interleaved rounds on the given pattern with fresh dense operands; records as for attention (ops
// "spmm" and "sddmm", the problem naming the pattern's fingerprint).
template <class Config>
using SparseTuneResult = VariantTuneResult<Config>;
SparseTuneResult<CpuSpmmConfig> tune_spmm(Runtime& runtime, const SpmmProblem& problem, const SparseMatrix& a,
                                          const TuneOptions& options, MeasurementStore* records = nullptr,
                                          const std::string& family = "",
                                          const std::function<void(int, int)>& progress = {});
SparseTuneResult<CpuSddmmConfig> tune_sddmm(Runtime& runtime, const SddmmProblem& problem, const SparseMatrix& pattern,
                                            const TuneOptions& options, MeasurementStore* records = nullptr,
                                            const std::string& family = "",
                                            const std::function<void(int, int)>& progress = {});
// The given configs (valid for the problem) timed as the tuners time their top k, in their order.
SparseTuneResult<CpuSpmmConfig> measure_spmm(Runtime& runtime, const SpmmProblem& problem, const SparseMatrix& a,
                                             const std::vector<CpuSpmmConfig>& configs, TuneOptions options,
                                             MeasurementStore* records = nullptr, const std::string& family = "");
SparseTuneResult<CpuSddmmConfig> measure_sddmm(Runtime& runtime, const SddmmProblem& problem,
                                               const SparseMatrix& pattern, const std::vector<CpuSddmmConfig>& configs,
                                               TuneOptions options, MeasurementStore* records = nullptr,
                                               const std::string& family = "");

}  // namespace tessera
