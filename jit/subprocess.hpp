// Running a tool (a host compiler, an archiver) as a subprocess.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tessera {

// Runs argv (found on PATH), its stdout and stderr into `log` (removed afterwards); returns its exit status (128 when
// it died by a signal) with the combined output in `output`. Throws Unavailable when the program cannot be started.
int run_process(const std::vector<std::string>& argv, std::string& output, const std::filesystem::path& log);

}  // namespace tessera
