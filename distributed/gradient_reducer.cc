#include "distributed/gradient_reducer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <limits>
#include <utility>

namespace pbert::distributed {
namespace {

constexpr size_t kNoBucket = std::numeric_limits<size_t>::max();

}  // namespace

GradientReducer::GradientReducer(Communicator& communicator, std::vector<at::Tensor> parameters,
                                 int64_t bucket_bytes, bool overlap, bool fixed_gradients)
    : communicator_(communicator),
      parameters_(std::move(parameters)),
      bucket_of_(parameters_.size(), kNoBucket),
      reduce_(communicator.world_size() > 1),
      overlap_(overlap && reduce_),
      fixed_gradients_(fixed_gradients) {
  if (!reduce_) return;
  at::NoGradGuard no_grad;
  // Buckets in reverse parameter order: backward finishes the last layers'
  // gradients first.
  std::vector<std::vector<size_t>> members;
  int64_t bytes = 0;
  for (size_t i = parameters_.size(); i-- > 0;) {
    const at::Tensor& p = parameters_[i];
    if (!p.requires_grad()) continue;
    const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fits = !members.empty() && bytes + size <= bucket_bytes &&
                      parameters_[members.back().front()].scalar_type() == p.scalar_type() &&
                      parameters_[members.back().front()].device() == p.device();
    if (!fits) {
      members.emplace_back();
      bytes = 0;
    }
    members.back().push_back(i);
    bytes += size;
  }
  for (auto& params : members) {
    int64_t numel = 0;
    for (size_t i : params) numel += parameters_[i].numel();
    Bucket bucket;
    bucket.flat = at::zeros({numel}, parameters_[params.front()].options());
    int64_t offset = 0;
    for (size_t i : params) {
      at::Tensor& p = parameters_[i];
      // The gradient is a view into the bucket: backward accumulates into
      // it in place, and the sum lands in it, with no copies either way.
      p.mutable_grad() = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      bucket_of_[i] = buckets_.size();
    }
    bucket.params = std::move(params);
    buckets_.push_back(std::move(bucket));
  }
  if (!overlap_) return;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (bucket_of_[i] == kNoBucket) continue;
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[i]);
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              OnGradientReady(i);
              return outputs;
            }));
    unhooks_.push_back([accumulator, key] { accumulator->del_post_hook(key); });
  }
}

GradientReducer::~GradientReducer() {
  for (const std::function<void()>& unhook : unhooks_) unhook();
}

void GradientReducer::ZeroGrad() {
  at::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mu_);
  reducing_ = false;
  next_ = 0;
  if (!reduce_ && !fixed_gradients_) {
    // Undefined: the backward's gradient is taken as it is (PyTorch's
    // zero_grad(set_to_none=True)), where a zeroed one costs a fill and an
    // addition per parameter in every step.
    for (auto& p : parameters_) p.mutable_grad() = at::Tensor();
    return;
  }
  if (!reduce_) {
    // One multi-tensor call (on CUDA a few kernels, not one per parameter).
    std::vector<at::Tensor> grads;
    for (auto& p : parameters_) {
      if (p.grad().defined()) grads.push_back(p.mutable_grad());
    }
    if (!grads.empty()) at::_foreach_zero_(grads);
    return;
  }
  for (Bucket& bucket : buckets_) {
    bucket.flat.zero_();
    int64_t offset = 0;
    for (size_t i : bucket.params) {
      at::Tensor& p = parameters_[i];
      const char* view = static_cast<const char*>(bucket.flat.data_ptr()) +
                         offset * static_cast<int64_t>(bucket.flat.element_size());
      // Put back, should anything have replaced it.
      if (!p.grad().defined() || p.grad().data_ptr() != view) {
        p.mutable_grad() = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      }
      offset += p.numel();
    }
  }
}

void GradientReducer::ReduceNextBackward(bool last) {
  std::lock_guard<std::mutex> lock(mu_);
  reducing_ = overlap_ && last;
  for (Bucket& bucket : buckets_) bucket.pending = static_cast<int64_t>(bucket.params.size());
}

void GradientReducer::OnGradientReady(size_t param) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!reducing_) return;
  Bucket& bucket = buckets_[bucket_of_[param]];
  if (bucket.pending > 0 && --bucket.pending == 0) StartReadyBuckets();
}

void GradientReducer::StartReadyBuckets() {
  // In bucket order only, so that every rank starts the same sums in the
  // same order, whatever order its hooks fire in.
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) {
    communicator_.StartSum(buckets_[next_++].flat);
  }
}

void GradientReducer::Finish() {
  if (!reduce_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reducing_ = false;
    while (next_ < buckets_.size()) communicator_.StartSum(buckets_[next_++].flat);
  }
  communicator_.WaitForSums();
}

}  // namespace pbert::distributed
