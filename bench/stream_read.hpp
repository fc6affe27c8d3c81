// The machine's DRAM read bandwidth as a plain streaming loop sees it: what a bandwidth-bound kernel (attention
// decoding) is measured against, on the same threads, in the same process.
#pragma once

namespace tessera::bench {

// GB/s reading a buffer far larger than the caches on `threads` threads (best of a few passes).
double stream_read_gbps(int threads);

}  // namespace tessera::bench
