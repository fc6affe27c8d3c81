#include "jit/cuda_gemm_build.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {

CudaGemmBuild build_cuda_gemm(const CudaGemmSpec& spec, bool cubin) {
  validate(spec.signature, spec.config, spec.target);
  CudaGemmBuild build;
  build.spec = spec;
  build.source = emit_cuda(spec);
  build.binary = Nvrtc::instance().compile(build.source.code, build.source.kernel, spec.target, cubin);
  build.ptx = count_ptx(build.binary.ptx);
  if (auto it = build.binary.resources.find(build.source.kernel); it != build.binary.resources.end())
    build.gemm = it->second;
  if (auto it = build.binary.resources.find(build.source.reduce_kernel); it != build.binary.resources.end())
    build.reduce = it->second;
  return build;
}

nlohmann::json CudaGemmBuild::report() const {
  nlohmann::json j = kernel_report(source.kernel, spec.target, source.threads, source.shared_bytes, binary);
  j["config"] = to_json(spec.config);
  j["spec_hash"] = spec.hash().hex();
  if (!source.reduce_kernel.empty())
    j["reduce"] = {{"name", source.reduce_kernel},
                   {"registers", reduce.registers},
                   {"spill_store_bytes", reduce.spill_store_bytes},
                   {"spill_load_bytes", reduce.spill_load_bytes},
                   {"stack_bytes", reduce.stack_bytes}};
  return j;
}

}  // namespace tessera
