// Several tuning runs of the same problems merged into one set of records: each measurement becomes the median over
// the runs that took it. A single run's medians are over interleaved rounds a few seconds apart, so a slow spell of
// the host's memory (another tenant streaming through the shared L3 or DRAM) that lasts the whole run of one shape
// reorders its memory-bound variants; runs taken at different times outvote such a spell.
#pragma once

#include <vector>

#include "ops/tuning/tuning_records.hpp"

namespace tessera {

// One record per measurement key (spec, sizes, batch, threads, hardware, B cold or not) found in any run: the median of
// the runs' medians (the mean of the middle two for an even count), the samples summed, the spread the larger of the
// runs' median spread and the spread between the runs' medians (median absolute deviation over the median), the latest
// time. Throws InvalidArgument when one key was measured by different tessera versions (their kernels may differ).
std::vector<TuningRecord> merge_tuning_runs(const std::vector<std::vector<TuningRecord>>& runs);

}  // namespace tessera
