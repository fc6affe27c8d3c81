#include "jit/cuda_driver.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "generator/core/error.hpp"
#include "jit/shared_library.hpp"

namespace tessera {

// The driver API's C types, declared here so that tessera builds without cuda.h (outside the anonymous namespace, as
// CudaDriver::Api's fields have them).
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUdeviceptr = unsigned long long;

namespace {

constexpr CUresult kSuccess = 0;
constexpr CUresult kNoDevice = 100;
constexpr CUresult kStubLibrary = 34;
constexpr CUresult kInsufficientDriver = 35;
constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76, kAttrSmCount = 16, kAttrSharedOptin = 97,
              kAttrL2Bytes = 38;
constexpr int kFuncAttrMaxDynamicShared = 8;
constexpr int kRequiredVersion = 12000;  // cuGetProcAddress_v2 and every entry point used here

// Extra launch options: a pointer to the parameter buffer and its size (cuda.h CU_LAUNCH_PARAM_*).
void* const kLaunchParamBufferPointer = reinterpret_cast<void*>(1);
void* const kLaunchParamBufferSize = reinterpret_cast<void*>(2);
void* const kLaunchParamEnd = nullptr;

std::string stub_message(const std::string& path) {
  return fmt::format(
      "CUDA driver {} is the toolkit's stub library (CUDA_ERROR_STUB_LIBRARY, 34): this machine has no NVIDIA driver",
      path);
}
}  // namespace

struct CudaDriver::Api {
  SharedLibrary library;
  int version = 0;
  CUcontext context = nullptr;
  CUresult (*get_proc_address)(const char*, void**, int, unsigned long long, int*) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*device_total_mem)(std::size_t*, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, int, int) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, std::size_t) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, std::size_t) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*tensor_map_encode_tiled)(void*, int, unsigned, void*, const std::uint64_t*, const std::uint64_t*,
                                      const unsigned*, const unsigned*, int, int, int, int) = nullptr;

  explicit Api(SharedLibrary lib) : library(std::move(lib)) {}

  std::string describe(CUresult r) const {
    const char* name = nullptr;
    if (get_error_name && get_error_name(r, &name) == kSuccess && name) return fmt::format("{} ({})", name, r);
    return fmt::format("CUDA error {}", r);
  }
  void check(CUresult r, const char* call) const {
    if (r != kSuccess) throw Error(fmt::format("cuda: {} failed: {}", call, describe(r)));
  }
  template <class Fn>
  void resolve(Fn& fn, const char* symbol) {
    void* address = nullptr;
    int status = 0;
    const CUresult r = get_proc_address(symbol, &address, kRequiredVersion, 0, &status);
    if (r == kStubLibrary) throw Unavailable(stub_message(library.path()));
    if (r != kSuccess || !address)
      throw Unavailable(
          fmt::format("CUDA driver {}: cuGetProcAddress({}) failed: {}", library.path(), symbol, describe(r)));
    fn = reinterpret_cast<Fn>(address);
  }
};

CudaDriver::CudaDriver(std::unique_ptr<Api> api) : api_(std::move(api)) {}
CudaDriver::~CudaDriver() = default;

std::shared_ptr<const CudaDriver> CudaDriver::load(const std::string& path) {
  std::string candidate = path;
  if (candidate.empty())
    if (const char* env = std::getenv("TESSERA_CUDA_DRIVER")) candidate = env;
  if (candidate.empty()) candidate = "libcuda.so.1";
  auto api = std::make_unique<Api>(SharedLibrary::open("the CUDA driver", {candidate}));
  const std::string where = api->library.path();
  api->get_proc_address = reinterpret_cast<decltype(api->get_proc_address)>(api->library.find("cuGetProcAddress_v2"));
  if (!api->get_proc_address)
    throw Unavailable(fmt::format("CUDA driver {} is older than CUDA 12 (no cuGetProcAddress_v2)", where));
  api->resolve(api->init, "cuInit");
  const CUresult init = api->init(0);
  if (init == kStubLibrary) throw Unavailable(stub_message(where));
  if (init == kNoDevice) throw Unavailable(fmt::format("CUDA driver {}: no CUDA device (cuInit: 100)", where));
  if (init == kInsufficientDriver)
    throw Unavailable(fmt::format("CUDA driver {} is too old for this toolkit (cuInit: 35)", where));
  if (init != kSuccess) throw Unavailable(fmt::format("CUDA driver {}: cuInit failed with error {}", where, init));
  api->resolve(api->get_error_name, "cuGetErrorName");
  api->resolve(api->driver_get_version, "cuDriverGetVersion");
  api->resolve(api->device_get_count, "cuDeviceGetCount");
  api->resolve(api->device_get, "cuDeviceGet");
  api->resolve(api->device_get_name, "cuDeviceGetName");
  api->resolve(api->device_get_attribute, "cuDeviceGetAttribute");
  api->resolve(api->device_total_mem, "cuDeviceTotalMem");
  api->resolve(api->primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  api->resolve(api->ctx_set_current, "cuCtxSetCurrent");
  api->resolve(api->ctx_synchronize, "cuCtxSynchronize");
  api->resolve(api->module_load_data, "cuModuleLoadData");
  api->resolve(api->module_unload, "cuModuleUnload");
  api->resolve(api->module_get_function, "cuModuleGetFunction");
  api->resolve(api->func_set_attribute, "cuFuncSetAttribute");
  api->resolve(api->launch_kernel, "cuLaunchKernel");
  api->resolve(api->mem_alloc, "cuMemAlloc");
  api->resolve(api->mem_free, "cuMemFree");
  api->resolve(api->memcpy_htod, "cuMemcpyHtoD");
  api->resolve(api->memcpy_dtoh, "cuMemcpyDtoH");
  api->resolve(api->event_create, "cuEventCreate");
  api->resolve(api->event_record, "cuEventRecord");
  api->resolve(api->event_synchronize, "cuEventSynchronize");
  api->resolve(api->event_elapsed_time, "cuEventElapsedTime");
  api->resolve(api->event_destroy, "cuEventDestroy");
  api->resolve(api->tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
  api->check(api->driver_get_version(&api->version), "cuDriverGetVersion");
  int count = 0;
  api->check(api->device_get_count(&count), "cuDeviceGetCount");
  if (count == 0) throw Unavailable(fmt::format("CUDA driver {}: no CUDA device", where));
  CUdevice device = 0;
  api->check(api->device_get(&device, 0), "cuDeviceGet");
  api->check(api->primary_ctx_retain(&api->context, device), "cuDevicePrimaryCtxRetain");
  return std::shared_ptr<const CudaDriver>(new CudaDriver(std::move(api)));
}

namespace {
struct LoadedDriver {
  std::shared_ptr<const CudaDriver> driver;
  std::string reason;
};
const LoadedDriver& loaded_driver() {
  static const LoadedDriver loaded = [] {
    try {
      return LoadedDriver{CudaDriver::load(), ""};
    } catch (const Error& e) {
      return LoadedDriver{nullptr, e.what()};
    }
  }();
  return loaded;
}
}  // namespace

std::shared_ptr<const CudaDriver> CudaDriver::instance() {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.driver) throw Unavailable(loaded.reason);
  return loaded.driver;
}

std::string CudaDriver::unavailable_reason() { return loaded_driver().reason; }

const std::string& CudaDriver::library_path() const { return api_->library.path(); }
int CudaDriver::driver_version() const { return api_->version; }

int CudaDriver::device_count() const {
  int count = 0;
  api_->check(api_->device_get_count(&count), "cuDeviceGetCount");
  return count;
}

CudaDeviceInfo CudaDriver::device(int ordinal) const {
  CudaDeviceInfo info;
  CUdevice device = 0;
  api_->check(api_->device_get(&device, ordinal), "cuDeviceGet");
  char name[256] = {};
  api_->check(api_->device_get_name(name, sizeof name, device), "cuDeviceGetName");
  int major = 0, minor = 0;
  api_->check(api_->device_get_attribute(&major, kAttrComputeMajor, device), "cuDeviceGetAttribute");
  api_->check(api_->device_get_attribute(&minor, kAttrComputeMinor, device), "cuDeviceGetAttribute");
  api_->check(api_->device_get_attribute(&info.sm_count, kAttrSmCount, device), "cuDeviceGetAttribute");
  api_->check(api_->device_get_attribute(&info.max_shared_per_block_optin, kAttrSharedOptin, device),
              "cuDeviceGetAttribute");
  int l2 = 0;
  api_->check(api_->device_get_attribute(&l2, kAttrL2Bytes, device), "cuDeviceGetAttribute");
  info.l2_bytes = l2;
  std::size_t memory = 0;
  api_->check(api_->device_total_mem(&memory, device), "cuDeviceTotalMem");
  info.ordinal = ordinal;
  info.name = name;
  info.sm = major * 10 + minor;
  info.memory_bytes = static_cast<std::int64_t>(memory);
  return info;
}

void CudaDriver::make_current() const { api_->check(api_->ctx_set_current(api_->context), "cuCtxSetCurrent"); }

CuDevicePtr CudaDriver::allocate(std::size_t bytes) const {
  make_current();
  CUdeviceptr pointer = 0;
  api_->check(api_->mem_alloc(&pointer, bytes ? bytes : 1), "cuMemAlloc");
  return pointer;
}

void CudaDriver::free(CuDevicePtr pointer) const {
  if (pointer) api_->mem_free(pointer);
}

void CudaDriver::copy_to_device(CuDevicePtr dst, const void* src, std::size_t bytes) const {
  make_current();
  if (bytes) api_->check(api_->memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
}

void CudaDriver::copy_to_host(void* dst, CuDevicePtr src, std::size_t bytes) const {
  make_current();
  if (bytes) api_->check(api_->memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
}

std::array<std::byte, 128> CudaDriver::tma_descriptor(const TmaTensor& t) const {
  // CUtensorMapDataType by element size (the copy is bitwise): UINT8, UINT16, UINT32, UINT64; swizzle enums 0..3
  // for none, 32, 64 and 128 bytes; no interleave, 128-byte L2 promotion, zero fill.
  const int type = t.element_bytes == 1 ? 0 : t.element_bytes == 2 ? 1 : t.element_bytes == 4 ? 2 : 4;
  const int swizzle = t.swizzle_bytes == 32 ? 1 : t.swizzle_bytes == 64 ? 2 : t.swizzle_bytes == 128 ? 3 : 0;
  const std::vector<unsigned> element_strides(t.dims.size(), 1);
  alignas(64) std::array<std::byte, 128> map{};
  api_->check(api_->tensor_map_encode_tiled(map.data(), type, static_cast<unsigned>(t.dims.size()),
                                            const_cast<void*>(t.global), t.dims.data(), t.stride_bytes.data(),
                                            t.box.data(), element_strides.data(), 0, swizzle, 2, 0),
              "cuTensorMapEncodeTiled");
  return map;
}

void CudaDriver::synchronize() const {
  make_current();
  api_->check(api_->ctx_synchronize(), "cuCtxSynchronize");
}

std::shared_ptr<CudaModule> CudaDriver::load_module(const std::vector<char>& cubin) const {
  make_current();
  CUmodule module = nullptr;
  api_->check(api_->module_load_data(&module, cubin.data()), "cuModuleLoadData");
  return std::shared_ptr<CudaModule>(new CudaModule(shared_from_this(), module));
}

CudaModule::CudaModule(std::shared_ptr<const CudaDriver> driver, void* module)
    : driver_(std::move(driver)), module_(module) {}

CudaModule::~CudaModule() { driver_->api_->module_unload(static_cast<CUmodule>(module_)); }

void CudaModule::launch(const std::string& kernel, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block,
                        unsigned shared_bytes, const void* params, std::size_t params_bytes) const {
  const auto& api = *driver_->api_;
  driver_->make_current();
  CUfunction function = nullptr;
  api.check(api.module_get_function(&function, static_cast<CUmodule>(module_), kernel.c_str()), "cuModuleGetFunction");
  if (shared_bytes > 48 * 1024)
    api.check(api.func_set_attribute(function, kFuncAttrMaxDynamicShared, static_cast<int>(shared_bytes)),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  std::size_t size = params_bytes;
  void* extra[] = {kLaunchParamBufferPointer, const_cast<void*>(params), kLaunchParamBufferSize, &size,
                   kLaunchParamEnd};
  api.check(api.launch_kernel(function, grid_x, grid_y, grid_z, block, 1, 1, shared_bytes, nullptr, nullptr, extra),
            "cuLaunchKernel");
}

double CudaDriver::time_ms(const std::function<void()>& fn) const {
  const auto& api = *api_;
  make_current();
  CUevent start = nullptr, stop = nullptr;
  api.check(api.event_create(&start, 0), "cuEventCreate");
  api.check(api.event_create(&stop, 0), "cuEventCreate");
  api.check(api.event_record(start, nullptr), "cuEventRecord");
  fn();
  api.check(api.event_record(stop, nullptr), "cuEventRecord");
  api.check(api.event_synchronize(stop), "cuEventSynchronize");
  float ms = 0;
  api.check(api.event_elapsed_time(&ms, start, stop), "cuEventElapsedTime");
  api.event_destroy(start);
  api.event_destroy(stop);
  return ms;
}

}  // namespace tessera
