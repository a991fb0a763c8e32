#include "app/runtime.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sched.h>

namespace pbert::app {

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return 1;
}

int SetIntraOpThreads(int threads) {
  int n = threads > 0 ? threads : AvailableCpus();
  at::set_num_threads(n);
  return at::get_num_threads();
}

void TakeBlasBuffers() {
  // Each thread's product at once (inside the parallel region OpenBLAS runs
  // on the calling thread), large enough to go through its GEMM.
  const at::Tensor a = at::ones({256, 256});
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) (void)at::mm(a, a);
  });
  (void)at::mm(a, a);  // and the calling thread's, outside it
}

}  // namespace pbert::app
