// Process-wide runtime settings: CPU count and LibTorch's thread pools.
#pragma once

namespace pbert::app {

// CPUs this process may run on (its affinity mask), at least 1.
int AvailableCpus();

// Sets LibTorch's intra-op threads: `threads`, or AvailableCpus() when 0.
// Debian's LibTorch starts with 1 thread, so this is always called.
int SetIntraOpThreads(int threads);

}  // namespace pbert::app
