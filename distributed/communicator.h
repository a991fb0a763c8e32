// The collective operations data-parallel training needs, on a c10d process
// group: Gloo on CPU; NCCL where LibTorch has CUDA (built only there, and
// untested on this project's CPU-only machines). With one process every
// operation is the identity and no group is created.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <mutex>
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
  // `timeout` for the others, and for the store to answer. `device`: where
  // the sums of Sum run with NCCL (the process's GPU; NCCL sums device
  // tensors); Gloo's run on the CPU.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      const Environment& environment, Backend backend,
      std::chrono::milliseconds timeout = std::chrono::minutes(5),
      c10::Device device = c10::kCPU);
  // One process: every operation is the identity.
  static std::unique_ptr<Communicator> Single();
  ~Communicator();

  int rank() const { return environment_.rank; }
  int world_size() const { return environment_.world_size; }

  // Starts replacing `tensor` (dense, contiguous) by its element-wise sum
  // over the ranks, in place, and returns at once; WaitForSums waits for
  // every sum started. Every rank must start the same sums in the same
  // order. Thread-safe (autograd hooks start them during backward).
  void StartSum(const at::Tensor& tensor);
  void WaitForSums();
  // Copies rank 0's values of `tensors` to every rank.
  void Broadcast(const std::vector<at::Tensor>& tensors);
  // Element-wise sums over the ranks (step totals, metric counts), in double.
  std::vector<double> Sum(std::vector<double> values);
  // Replaces `values` (on the device of Sum's tensors) by its element-wise
  // sum over the ranks, without reading it on the host.
  void SumInPlace(const at::Tensor& values);
  // The same with the element-wise maximum (fp8's largest magnitudes).
  void MaxInPlace(const at::Tensor& values);
  void Barrier();

  // After a collective failed: which ranks are gone. Every surviving rank
  // that calls this marks itself alive in the rendezvous store and waits
  // `wait` for the others to do the same; the ranks that did not are named
  // ("rank 1"), or the store's host if the store itself is unreachable.
  std::string DescribeLostRanks(std::chrono::milliseconds wait = std::chrono::seconds(3));

 private:
  explicit Communicator(Environment environment);
  // Create's rendezvous, on a thread of its own: the store, every rank
  // checked in by `deadline`, the process group.
  static absl::StatusOr<std::unique_ptr<Communicator>> Join(
      const Environment& environment, Backend backend, std::chrono::milliseconds timeout,
      c10::Device device, std::chrono::steady_clock::time_point deadline);

  Environment environment_;
  c10::Device device_ = c10::kCPU;  // of Sum's tensors
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<torch_compat::CollectiveBackend> group_;
  struct Pending;
  std::unique_ptr<Pending> pending_;  // the sums started and not yet waited for
};

}  // namespace pbert::distributed
