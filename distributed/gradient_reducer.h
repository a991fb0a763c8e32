// Gradients summed over the ranks while backward runs, as PyTorch's
// DistributedDataParallel does it: the parameters' gradients live in flat
// buckets (each gradient a view into its bucket), made in reverse parameter
// order, the order backward produces them; when the last gradient of a
// bucket has been accumulated (an autograd hook), the bucket's all-reduce
// starts, while backward goes on with the layers below. Buckets start in
// the same order on every rank. Only the last micro-batch of a step reduces;
// the others accumulate locally.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "distributed/communicator.h"

namespace pbert::distributed {

class GradientReducer {
 public:
  // `parameters`, in the model's order, must outlive the reducer; buckets
  // hold at most `bucket_bytes` (one larger gradient is a bucket of its
  // own) of one dtype and device. Without `overlap` no hook is installed and
  // every bucket starts in Finish: the same sums, after backward. With one
  // process nothing is reduced, and the gradients are let go of between
  // steps (ZeroGrad) unless `fixed_gradients` (a captured step replays its
  // backward into the same tensors).
  GradientReducer(Communicator& communicator, std::vector<at::Tensor> parameters,
                  int64_t bucket_bytes, bool overlap, bool fixed_gradients = false);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Readies the gradients for a new step. Several ranks: zeroed in place
  // (they stay views into their buckets). One process: let go of (undefined),
  // so that the step's first backward takes each gradient as autograd made
  // it, with no zeroing and no addition per parameter (the others add to
  // it); zeroed in place with `fixed_gradients`.
  void ZeroGrad();
  // Before each backward pass of a step: whether it is the last one, whose
  // finished gradients are reduced as they come.
  void ReduceNextBackward(bool last);
  // After the step's backward passes (also none: a rank without a
  // micro-batch): starts the buckets not started yet (all of them without
  // overlap), waits for every sum, and leaves the sums in the gradients.
  void Finish();

  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    at::Tensor flat;             // the gradients of its parameters, end to end
    std::vector<size_t> params;  // indices into parameters_
    int64_t pending = 0;         // gradients still to come in this backward
  };
  void OnGradientReady(size_t param);  // from the autograd hook
  void StartReadyBuckets();            // in order, from next_

  Communicator& communicator_;
  std::vector<at::Tensor> parameters_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter
  const bool reduce_ = false;      // more than one rank
  const bool overlap_ = false;
  const bool fixed_gradients_ = false;
  // Each removes one hook from its gradient accumulator, which it keeps
  // alive so that the hook stays (a std::shared_ptr up to LibTorch 2.11, a
  // c10::intrusive_ptr after pytorch/pytorch#181782, as in 2.14).
  std::vector<std::function<void()>> unhooks_;

  std::mutex mu_;
  bool reducing_ = false;  // this backward is a step's last
  size_t next_ = 0;        // the first bucket not started
};

}  // namespace pbert::distributed
