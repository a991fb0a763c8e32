#include "distributed/config.h"

namespace pbert::distributed {

Backend ResolveBackend(Backend backend, bool model_on_cuda) {
  if (backend != Backend::kAuto) return backend;
#ifdef PBERT_WITH_NCCL
  if (model_on_cuda) return Backend::kNccl;
#endif
  (void)model_on_cuda;
  return Backend::kGloo;
}

}  // namespace pbert::distributed
