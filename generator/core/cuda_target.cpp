#include "generator/core/cuda_target.hpp"

#include <fmt/format.h>

#include <array>

#include "generator/core/error.hpp"

namespace tessera {

namespace {
struct ArchLimits {
  int sm;
  int sm_count;
  int max_shared_per_block;
  int shared_per_sm;
};
// CUDA C Programming Guide, "Technical Specifications per Compute Capability".
constexpr std::array<ArchLimits, 4> kArchs{{
    {80, 108, 166912, 167936},  // A100: 163 KiB per block, 164 KiB per SM
    {86, 82, 101376, 102400},   // RTX 3090: 99 / 100 KiB
    {89, 128, 101376, 102400},  // RTX 4090
    {90, 132, 232448, 233472},  // H100 SXM: 227 / 228 KiB
}};
}  // namespace

std::string CudaTarget::arch() const { return fmt::format("sm_{}{}", sm, arch_specific ? "a" : ""); }

std::string CudaTarget::str() const { return fmt::format("{}:{}", emulated ? "cuda-emu" : "cuda", arch()); }

bool CudaTarget::is_cuda_text(std::string_view text) {
  return text.starts_with("cuda:") || text.starts_with("cuda-emu:") || text == "cuda" || text == "cuda-emu";
}

CudaTarget CudaTarget::parse(std::string_view text) {
  const auto bad = [&] {
    return InvalidArgument("target", fmt::format("unknown CUDA target '{}' (expected cuda:sm_80, cuda:sm_86, "
                                                 "cuda:sm_89, cuda:sm_90, cuda:sm_90a, or cuda-emu:sm_XX)",
                                                 text));
  };
  CudaTarget t;
  std::string_view arch;
  if (text.starts_with("cuda-emu:")) {
    t.emulated = true;
    arch = text.substr(9);
  } else if (text.starts_with("cuda:")) {
    arch = text.substr(5);
  } else {
    throw bad();
  }
  if (!arch.starts_with("sm_") || arch.size() < 5) throw bad();
  std::string digits(arch.substr(3));
  if (digits.back() == 'a') {
    t.arch_specific = true;
    digits.pop_back();
  }
  for (const auto& limits : kArchs) {
    if (digits != std::to_string(limits.sm)) continue;
    if (t.arch_specific && limits.sm != 90) throw bad();
    t.sm = limits.sm;
    t.sm_count = limits.sm_count;
    t.max_shared_per_block = limits.max_shared_per_block;
    t.shared_per_sm = limits.shared_per_sm;
    return t;
  }
  throw bad();
}

}  // namespace tessera
