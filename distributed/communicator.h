// The collective operations data-parallel training needs, on a c10d process
// group: Gloo on CPU; NCCL where LibTorch has CUDA (built only there, and
// untested on this project's CPU-only machines). With one process every
// operation is the identity and no group is created.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/torch_compat.h"
#include "distributed/config.h"
#include "distributed/environment.h"

namespace c10d {
class Store;
}

namespace pbert::distributed {

class Communicator {
 public:
  // `backend`: kGloo or kNccl (resolved, see ResolveBackend). Rank 0 hosts
  // the rendezvous store at MASTER_ADDR:MASTER_PORT; every rank waits up to
  // `timeout` for the others.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      const Environment& environment, Backend backend,
      std::chrono::milliseconds timeout = std::chrono::minutes(5));
  // One process: every operation is the identity.
  static std::unique_ptr<Communicator> Single();
  ~Communicator();

  int rank() const { return environment_.rank; }
  int world_size() const { return environment_.world_size; }

  // Replaces every defined gradient by its sum over the ranks. Gradients are
  // flattened into buckets of at most `bucket_bytes` (a gradient larger than
  // that is a bucket of its own), whose all-reduces all run at once and are
  // then waited for. A sum, not a mean: each rank's loss is already divided
  // by the totals of the whole step over all ranks.
  void SumGradients(const std::vector<at::Tensor>& parameters,
                    int64_t bucket_bytes = 25 << 20);
  // Copies rank 0's values of `tensors` to every rank.
  void Broadcast(const std::vector<at::Tensor>& tensors);
  // Element-wise sums over the ranks (step totals, metric counts), in double.
  std::vector<double> Sum(std::vector<double> values);
  void Barrier();

  // After a collective failed: which ranks are gone. Every surviving rank
  // that calls this marks itself alive in the rendezvous store and waits
  // `wait` for the others to do the same; the ranks that did not are named
  // ("rank 1"), or the store's host if the store itself is unreachable.
  std::string DescribeLostRanks(std::chrono::milliseconds wait = std::chrono::seconds(3));

 private:
  explicit Communicator(Environment environment);

  Environment environment_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<torch_compat::CollectiveBackend> group_;
};

}  // namespace pbert::distributed
