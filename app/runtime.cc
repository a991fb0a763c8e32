#include "app/runtime.h"

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

}  // namespace pbert::app
