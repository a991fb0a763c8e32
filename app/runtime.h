// Process-wide runtime settings: CPU count and LibTorch's thread pools.
#pragma once

namespace pbert::app {

// CPUs this process may run on (its affinity mask), at least 1.
int AvailableCpus();

// Sets LibTorch's intra-op threads: `threads`, or AvailableCpus() when 0.
// Debian's LibTorch starts with 1 thread, so this is always called.
int SetIntraOpThreads(int threads);

// Has each of LibTorch's intra-op threads run a matrix product, so that
// OpenBLAS takes its buffer per thread (128 MiB of address space) now,
// while the room that CheckStartEnvironment checked is there: its
// allocator retries a buffer it cannot have for ever, where LibTorch's
// own allocations fail and say so.
void TakeBlasBuffers();

}  // namespace pbert::app
