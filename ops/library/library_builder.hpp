// `tessera library build`: a manifest's kernels emitted by LLVM as position-independent objects for every target ISA,
// a C header and driver, a static and a shared library, CMake and pkg-config files and a lock file, written to a
// temporary directory renamed into place at the end (a failed build leaves no partial output).
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "ops/library/library_manifest.hpp"

namespace tessera {

struct LibraryBuildOptions {
  int jobs = 0;  // compile threads (0: one per hardware thread)
  // The C compiler and archiver for the driver and the libraries ($TESSERA_HOST_CC or cc; ar).
  std::string cc, ar = "ar";
  std::string cxx;  // for the grid planner ($TESSERA_HOST_CXX or c++)
  // Called as kernels compile: (done, total).
  std::function<void(int, int)> progress;
};

struct LibraryBuildReport {
  bool up_to_date = false;  // the lock matched: nothing was done
  int kernels = 0, variants = 0;
  int compiled = 0;  // variants compiled now (the others from the previous build or the disk cache)
  int reused = 0;
  double seconds = 0;
};

// Builds the library into `out` (replacing what is there). Throws InvalidArgument for a bad manifest (before
// anything is written), Unavailable when the C compiler or archiver is missing, Error for anything else; in every
// case `out` is left as it was.
LibraryBuildReport build_library(const LibraryManifest& manifest, const std::filesystem::path& out,
                                 const LibraryBuildOptions& options);

}  // namespace tessera
