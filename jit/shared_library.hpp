// A dlopen'ed shared library: how tessera reaches NVRTC, the CUDA driver and cuBLAS without linking them, so that
// a tessera built or run without CUDA still works on the CPU.
#pragma once

#include <string>
#include <vector>

namespace tessera {

class SharedLibrary {
 public:
  // Tries each candidate in order (names go through the dynamic loader's search path); throws Unavailable listing
  // every candidate and dlerror's reason when none loads.
  static SharedLibrary open(const std::string& what, const std::vector<std::string>& candidates);
  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  // The symbol's address, or nullptr.
  void* find(const char* symbol) const;
  // The symbol cast to a function pointer type; throws Unavailable naming the library when it is missing.
  template <class Fn>
  Fn get(const char* symbol) const {
    return reinterpret_cast<Fn>(require(symbol));
  }
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path, std::string what);
  void* require(const char* symbol) const;
  void* handle_ = nullptr;
  std::string path_, what_;
};

}  // namespace tessera
