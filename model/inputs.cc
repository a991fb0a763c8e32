#include "model/inputs.h"

#include <ATen/ATen.h>

#include "common/torch_compat_ops.h"
#include "gpu/gpu.h"
#include "model/attention.h"

namespace pbert::model {
namespace {

// Every tensor of `inputs`, for moving them all alike.
template <class F>
void ForEachTensor(Inputs& inputs, F f) {
  for (at::Tensor* t : {&inputs.input_ids, &inputs.position_ids, &inputs.token_type_ids,
                        &inputs.mlm_token, &inputs.cls_token, &inputs.mlm_labels, &inputs.mlm_owner,
                        &inputs.nsp_labels, &inputs.nsp_valid}) {
    f(*t);
  }
  auto buckets = [&](std::vector<AttentionBucket>& all) {
    for (AttentionBucket& b : all) {
      f(b.tokens);
      f(b.key_mask);
    }
  };
  if (auto* dense = std::get_if<DenseMask>(&inputs.attention)) f(dense->mask);
  if (auto* blocked = std::get_if<BlockedBuckets>(&inputs.attention)) buckets(blocked->buckets);
  if (auto* varlen = std::get_if<VarlenBuckets>(&inputs.attention)) buckets(varlen->buckets);
  if (auto* flash = std::get_if<VarlenBoundaries>(&inputs.attention)) f(flash->cu_seqlens);
}

}  // namespace

Inputs Inputs::To(const c10::Device& device, bool non_blocking) const {
  Inputs moved = *this;
  ForEachTensor(moved, [&](at::Tensor& t) {
    if (t.defined()) t = t.to(device, t.scalar_type(), non_blocking);
  });
  return moved;
}

void Inputs::PinMemory() {
  if (!gpu::Built()) return;
  ForEachTensor(*this, [](at::Tensor& t) {
    if (t.defined()) t = t.pin_memory();
  });
}

at::Tensor HostToDevice(const at::Tensor& host, const c10::Device& device) {
  if (!device.is_cuda() || !gpu::Built()) return host.to(device);
  // The caching host allocator keeps the pinned block until the copy that
  // reads it is done, so the host tensor may go at once.
  return host.pin_memory().to(device, host.scalar_type(), /*non_blocking=*/true);
}

InputPlan InputPlan::For(const BertOptions& options, const c10::Device& device, Precision precision,
                         at::ScalarType dtype) {
  InputPlan plan;
  plan.attention = ResolveAttention(options.attention());
  plan.whole_rows = options.ablation() == Ablation::kNoBlockMask;
  plan.reset_positions = options.ablation() != Ablation::kNoPositionReset;
  plan.mask_dtype = dtype;
  plan.device = device;
  plan.static_shapes = options.static_shapes();
#ifdef PBERT_HAS_FLASH_VARLEN
  const int64_t head_dim = options.hidden_size() / options.num_heads();
  if (plan.attention == AttentionKind::kVarlen && device.is_cuda() && head_dim % 8 == 0 &&
      head_dim <= 256 && (Bf16Autocast(precision) || precision == Precision::kFp16)) {
    auto facts = gpu::Describe(device.index());
    plan.flash = facts.ok() && facts->major >= 8;
    plan.cudnn = plan.flash && options.varlen_kernel() == VarlenKernel::kCudnn;
  }
#else
  (void)precision;
#endif
  return plan;
}

}  // namespace pbert::model
