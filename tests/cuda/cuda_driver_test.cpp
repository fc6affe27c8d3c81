// The lazily loaded driver: no library, the toolkit's stub, and (where a GPU exists) a real device.
#include <gtest/gtest.h>

#include <filesystem>

#include "generator/core/error.hpp"
#include "jit/cuda_driver.hpp"
#include "tessera/cuda.hpp"

namespace tessera {
namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Unavailable& e) {
    return e.what();
  }
  return "";
}

TEST(CudaDriver, MissingLibraryIsUnavailableWithTheReason) {
  const std::string what = message_of([] { CudaDriver::load("/nonexistent/libcuda.so.1"); });
  EXPECT_NE(what.find("/nonexistent/libcuda.so.1"), std::string::npos) << what;
  EXPECT_NE(what.find("cannot be loaded"), std::string::npos) << what;
}

TEST(CudaDriver, TheToolkitStubIsRecognised) {
  std::string stub;
  for (const char* candidate :
       {"/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"})
    if (std::filesystem::exists(candidate)) stub = candidate;
  if (stub.empty()) GTEST_SKIP() << "no CUDA toolkit stub library on this machine";
  const std::string what = message_of([&] { CudaDriver::load(stub); });
  EXPECT_NE(what.find("stub"), std::string::npos) << what;
  EXPECT_NE(what.find("34"), std::string::npos) << what;
}

TEST(CudaDriver, NotALibraryIsUnavailable) {
  const std::string what = message_of([] { CudaDriver::load("/etc/hostname"); });
  EXPECT_NE(what.find("/etc/hostname"), std::string::npos) << what;
}

TEST(CudaRuntime, ReportsWhyItCannotRunOrRunsOnTheDevice) {
  const std::string reason = CudaRuntime::unavailable_reason();
  if (reason.empty()) {
    CudaRuntime runtime("cuda");
    EXPECT_FALSE(runtime.device_name().empty());
    GTEST_SKIP() << "a CUDA device is present: " << runtime.device_name();
  }
  const std::string what = message_of([] { CudaRuntime runtime("cuda:sm_80"); });
  EXPECT_EQ(what, reason);
  EXPECT_THROW(CudaRuntime("cpu"), InvalidArgument);
}

}  // namespace
}  // namespace tessera
