// What the model reads: a micro-batch's token ids, positions and segments,
// its attention layout, where its heads look and what its losses compare
// with, all tensors on the training device, made before the step by the
// loader's threads (train/inputs.h makes them from a data::PackedBatch).
// Nothing here knows data/: forward does no host work and no copy to the
// device (docs/architecture.md, "The seam between the loader and the
// model").
//
// The attention layout is one type per kind (model/attention.h says what
// each computes):
//
// DenseMask         the padded rows [B,S]; an additive mask [B,1,S,S]
// BlockedBuckets    the padded rows [B,S]; buckets of sequences of similar
//                   length over the flattened B*S tokens
// VarlenBuckets     the T real tokens; the same buckets over the T (no
//                   FlashAttention: the CPU, fp32 and fp64, heads it cannot take)
// VarlenBoundaries  the T real tokens; FlashAttention's variable-length
//                   kernel (or cuDNN's fused attention) over the sequences'
//                   boundaries
//
// Which one a run uses, FlashAttention included, is decided once, when the
// run's InputPlan is made.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <variant>
#include <vector>

#include "model/bert_options.h"
#include "model/precision.h"

namespace pbert::model {

// Sequences of one padded length L, gathered for attention within each.
struct AttentionBucket {
  int64_t length = 0;  // L
  at::Tensor tokens;  // [n*L] int64 indices into the flattened tokens; padding slots -> their count
  at::Tensor key_mask;  // [n,1,1,L] additive: 0 for a sequence's keys, -inf for padding slots
};

struct DenseMask {
  at::Tensor mask;  // [B,1,S,S] additive: 0 where token i may attend token j, -inf elsewhere
};
struct BlockedBuckets {
  std::vector<AttentionBucket> buckets;  // over the flattened B*S tokens
};
struct VarlenBuckets {
  std::vector<AttentionBucket> buckets;  // over the T real tokens
};
struct VarlenBoundaries {
  at::Tensor cu_seqlens;   // [N+1] int32: where each of the N sequences starts among the T, then T
  int64_t max_seqlen = 0;  // the longest of them
  bool cudnn = false;      // through cuDNN's fused attention, not FlashAttention's
};
using AttentionLayout = std::variant<DenseMask, BlockedBuckets, VarlenBuckets, VarlenBoundaries>;

// The label of a masked-LM slot that holds no masked token (static
// shapes): cross-entropy's ignored index, which the losses leave out.
inline constexpr int64_t kNoLabel = -100;

struct Inputs {
  // [B,S] in the padded layouts, [T] in the varlen ones.
  at::Tensor input_ids;       // int64
  at::Tensor position_ids;    // int64: inside each sequence, or the row (no_position_reset)
  at::Tensor token_type_ids;  // int64: segment A/B
  AttentionLayout attention;
  // Where the heads look, in the flattened hidden states ([B*S] or [T]).
  at::Tensor cls_token;   // [B,D] int64: each sequence slot's [CLS] (a valid index for unused slots)
  at::Tensor slot_valid;  // [B,D] int64: 1 where the sequence slot holds a sequence
  // The masked tokens the masked-LM head reads, [K] int64: laid out by the
  // pretraining task with its targets (tasks/pretraining.h); undefined for
  // every other task.
  at::Tensor mlm_token;
  // Where a head over every token of a sequence (the span head) looks: each
  // of the N sequences' tokens in the flattened hidden states, padded to
  // the longest, L (with static shapes N = B*D and L = S); undefined where
  // no head reads them (pretraining).
  at::Tensor sequence_token;  // [N,L] int64; a padding slot holds a valid index
  at::Tensor sequence_valid;  // [N,L] bool: the slot holds one of the sequence's tokens
  // A task's own tensors (tasks/task.h): its targets and what its
  // evaluation gathers by, in the task's order; model/ reads none of them.
  std::vector<at::Tensor> task;

  int64_t rows() const { return cls_token.size(0); }
  // Every defined tensor, in one fixed order (the same for every
  // micro-batch of a run): what a move, pinning and a captured step's
  // buffers go through.
  std::vector<at::Tensor*> Tensors();
  // Every tensor on `device`; from page-locked memory a GPU copies them
  // without blocking the host.
  Inputs To(const c10::Device& device, bool non_blocking = false) const;
  // Moves every tensor to page-locked memory (a no-op where LibTorch has
  // no CUDA).
  void PinMemory();
};

// `real` ([N]) followed by `count` copies of `value`: a layout's padding
// to a static shape.
at::Tensor PaddedWith(const at::Tensor& real, int64_t count, int64_t value);

// Numbers the host knows (a step's totals, its counts) on `device` without
// a wait: on CUDA from page-locked memory with an asynchronous copy (a copy
// from pageable memory is a copy and a stream synchronize: a wait the step
// cannot afford); on the CPU the tensor itself. Every host-to-device copy
// of a step goes through here or through Inputs::To.
at::Tensor HostToDevice(const at::Tensor& host, const c10::Device& device);

// How a run turns micro-batches into Inputs: decided once per run from the
// model's options, the device and the precision.
struct InputPlan {
  AttentionKind attention = AttentionKind::kVarlen;  // dense, blocked or varlen (never auto)
  bool flash = false;  // varlen over sequence boundaries (FlashAttention's or cuDNN's kernel)
  bool cudnn = false;  // ... through cuDNN's where a batch allows (model.varlen_kernel cudnn)
  bool whole_rows = false;      // the no_block_mask ablation: a row's tokens are one sequence
  bool reset_positions = true;  // false: the no_position_reset ablation
  at::ScalarType mask_dtype = at::kFloat;  // the weights' dtype: the masks' additive -inf and 0
  c10::Device device = c10::kCPU;
  int64_t granularity = 32;  // bucket lengths are multiples of it
  // Every micro-batch of a run in one shape (options.static_shapes), as a
  // captured step replays it: in the varlen layouts the T real tokens
  // padded to B*S with trailing padding tokens ([PAD], position 0, segment
  // 0) that no head reads and that attend to nothing (VarlenBuckets) or
  // among themselves in sequences of at most S (VarlenBoundaries, whose
  // boundaries are then padded with empty sequences to B*D + B + 1 and
  // whose longest sequence is S); in every layout the K masked tokens
  // padded to the B*M masked-LM slots, the unused ones with label -100,
  // which the losses leave out.
  bool static_shapes = false;

  // FlashAttention runs where its variable-length kernel applies: a GPU of
  // sm_80 or later, fp16 or bf16 autocast, a head width that is a multiple
  // of 8 up to 256, and a LibTorch with the kernel's 2.6 interface; cuDNN's
  // in its place where model.varlen_kernel says so (CheckVarlenKernel,
  // model/attention.h, refuses it where it cannot run), for each batch
  // whose longest sequence is longer than kCudnnVarlenLongerThan.
  // `precision` resolved (not kAuto); `dtype` the weights'.
  static InputPlan For(const BertOptions& options, const c10::Device& device, Precision precision,
                       at::ScalarType dtype);
};

}  // namespace pbert::model
