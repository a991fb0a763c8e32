#include "model/inputs.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/torch_compat_ops.h"
#include "gpu/gpu.h"
#include "model/attention.h"

namespace pbert::model {

std::vector<at::Tensor*> Inputs::Tensors() {
  std::vector<at::Tensor*> out = {&input_ids,  &position_ids,   &token_type_ids, &cls_token,
                                  &slot_valid, &mlm_token,      &sequence_token, &sequence_valid};
  for (at::Tensor& t : task) out.push_back(&t);
  auto buckets = [&](std::vector<AttentionBucket>& all) {
    for (AttentionBucket& b : all) {
      out.push_back(&b.tokens);
      out.push_back(&b.key_mask);
    }
  };
  if (auto* dense = std::get_if<DenseMask>(&attention)) out.push_back(&dense->mask);
  if (auto* blocked = std::get_if<BlockedBuckets>(&attention)) buckets(blocked->buckets);
  if (auto* varlen = std::get_if<VarlenBuckets>(&attention)) buckets(varlen->buckets);
  if (auto* flash = std::get_if<VarlenBoundaries>(&attention)) out.push_back(&flash->cu_seqlens);
  out.erase(std::remove_if(out.begin(), out.end(), [](at::Tensor* t) { return !t->defined(); }),
            out.end());
  return out;
}

at::Tensor PaddedWith(const at::Tensor& real, int64_t count, int64_t value) {
  if (count == 0) return real;
  return at::cat({real, at::full({count}, value, real.options())});
}

Inputs Inputs::To(const c10::Device& device, bool non_blocking) const {
  Inputs moved = *this;
  for (at::Tensor* t : moved.Tensors()) *t = t->to(device, t->scalar_type(), non_blocking);
  return moved;
}

void Inputs::PinMemory() {
  if (!gpu::Built()) return;
  for (at::Tensor* t : Tensors()) *t = t->pin_memory();
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
