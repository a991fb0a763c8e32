// The config's dist section: the c10d backend, how long ranks wait for each
// other, the gradient buckets, and the rendezvous when no launcher names it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/choices.h"
#include "common/config_field.h"
#include "distributed/environment.h"

namespace pbert::distributed {

enum class Backend {
  kAuto,  // NCCL when LibTorch has CUDA and the model is on a CUDA device, else Gloo
  kGloo,
  kNccl,
};
inline constexpr Choice<Backend> kBackends[] = {
    {"auto", Backend::kAuto}, {"gloo", Backend::kGloo}, {"nccl", Backend::kNccl}};
constexpr ChoiceList<Backend> ChoicesOf(Backend) { return kBackends; }

// What kAuto means for a model on CUDA or not; other choices stay.
Backend ResolveBackend(Backend backend, bool model_on_cuda);

struct DistConfig {
  Backend backend = Backend::kAuto;
  int64_t timeout_s = 300;
  int64_t bucket_mb = 25;
  bool overlap = true;
  std::string master_addr;
  int64_t master_port = 29500;

  template <class V>
  void Visit(V& v) {
    using config::InRange;
    v.Field("backend", &backend,
            "the c10d process group; auto: nccl for a model on CUDA, else gloo");
    v.Field("timeout_s", &timeout_s,
            "seconds a rank waits for the others (rendezvous, every collective) before it gives "
            "up with an error naming them",
            InRange<int64_t>(1, 86400));
    v.Field("bucket_mb", &bucket_mb, "gradient all-reduce bucket size, MiB",
            InRange<int64_t>(1, 4096));
    v.Field("overlap", &overlap,
            "start each bucket's all-reduce during backward, as soon as its gradients are "
            "final; false: all after backward");
    v.Field("master_addr", &master_addr,
            "rendezvous host when the launcher does not set MASTER_ADDR (Slurm: the first host "
            "of the job; otherwise 127.0.0.1)");
    v.Field("master_port", &master_port, "rendezvous port when MASTER_PORT is not set",
            InRange<int64_t>(1, 65535));
  }

  std::chrono::seconds timeout() const { return std::chrono::seconds(timeout_s); }
  // This section's keys that cannot act in a run of `world_size` processes.
  void Inactive(int world_size, config::InactiveKeys* keys) const;
  int64_t bucket_bytes() const { return bucket_mb << 20; }
  // This process's place in the run: the launcher's variables, with this
  // section's rendezvous for what they leave open.
  absl::StatusOr<Environment> ReadEnvironment() const {
    return EnvironmentFrom(nullptr, {master_addr, static_cast<int>(master_port)});
  }
};

}  // namespace pbert::distributed
