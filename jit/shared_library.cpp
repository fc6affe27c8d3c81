#include "jit/shared_library.hpp"

#include <dlfcn.h>

#include <utility>

#include "generator/core/error.hpp"

namespace tessera {

SharedLibrary SharedLibrary::open(const std::string& what, const std::vector<std::string>& candidates) {
  std::string reasons;
  for (const auto& candidate : candidates) {
    if (candidate.empty()) continue;
    // RTLD_LOCAL: OpenBLAS-style symbol clashes stay private to the library.
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return SharedLibrary(handle, candidate, what);
    const char* error = dlerror();
    reasons += (reasons.empty() ? "" : "; ") + std::string(error ? error : candidate + ": not found");
  }
  throw Unavailable(what + " cannot be loaded (" + reasons + ")");
}

SharedLibrary::SharedLibrary(void* handle, std::string path, std::string what)
    : handle_(handle), path_(std::move(path)), what_(std::move(what)) {}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)), what_(std::move(other.what_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  std::swap(handle_, other.handle_);
  std::swap(path_, other.path_);
  std::swap(what_, other.what_);
  return *this;
}

// Libraries are kept loaded until exit: driver and compiler libraries do not support being unloaded while
// objects they created (modules, contexts) may still be referenced.
SharedLibrary::~SharedLibrary() = default;

void* SharedLibrary::find(const char* symbol) const { return handle_ ? dlsym(handle_, symbol) : nullptr; }

void* SharedLibrary::require(const char* symbol) const {
  void* address = find(symbol);
  if (!address) throw Unavailable(what_ + " (" + path_ + ") lacks " + symbol);
  return address;
}

}  // namespace tessera
