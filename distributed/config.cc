#include "distributed/config.h"

namespace pbert::distributed {

void DistConfig::Inactive(int world_size, config::InactiveKeys* keys) const {
  if (world_size == 1) {
    keys->Keys({"dist.bucket_mb", "dist.overlap", "dist.backend", "dist.timeout_s",
                "dist.master_addr", "dist.master_port"},
               "the run is one process");
  }
}

Backend ResolveBackend(Backend backend, bool model_on_cuda) {
  if (backend != Backend::kAuto) return backend;
#ifdef PBERT_WITH_NCCL
  if (model_on_cuda) return Backend::kNccl;
#endif
  (void)model_on_cuda;
  return Backend::kGloo;
}

}  // namespace pbert::distributed
