#include "train/inputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <map>

#include "common/status.h"
#include "model/attention.h"

namespace pbert::train {
namespace {

using model::AttentionBucket;

// A layout's unit of attention: where a sequence starts among the
// flattened tokens it indexes, and its length.
struct Span {
  int64_t start = 0, length = 0;
};

// The batch's sequences as spans of the [B*S] rows (`rows`) or of the T
// tokens; `whole_rows` joins each row's sequences into one.
std::vector<Span> Spans(const data::PackedBatch& batch, bool rows, bool whole_rows) {
  const int64_t S = batch.input_ids.size(1);
  std::vector<Span> spans;
  int64_t row = -1;
  for (const data::SequenceSpan& s : batch.sequences) {
    const int64_t start = rows ? s.row_start : s.token_start;
    if (whole_rows && s.row_start / S == row) {
      spans.back().length += s.length;  // the row's sequences lie end to end
      continue;
    }
    spans.push_back({start, s.length});
    row = s.row_start / S;
  }
  return spans;
}

// Buckets of spans of similar length (L a multiple of `granularity`) over
// `count` flattened tokens; index `count` is the padding slot.
std::vector<AttentionBucket> Buckets(const std::vector<Span>& spans, int64_t count, int64_t longest,
                                     at::ScalarType dtype, int64_t granularity) {
  std::map<int64_t, std::vector<Span>> by_length;
  for (const Span& s : spans) {
    const int64_t rounded = (s.length + granularity - 1) / granularity * granularity;
    by_length[std::min(rounded, std::max(longest, s.length))].push_back(s);
  }
  std::vector<AttentionBucket> buckets;
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [L, members] : by_length) {
    const int64_t n = static_cast<int64_t>(members.size());
    at::Tensor tokens = at::full({n, L}, count, at::kLong);
    at::Tensor key_mask = at::full({n, 1, 1, L}, -inf, at::TensorOptions().dtype(dtype));
    auto t = tokens.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < members[i].length; ++j) t[i][j] = members[i].start + j;
      key_mask[i].narrow(-1, 0, members[i].length).fill_(0);
    }
    buckets.push_back({L, tokens.reshape({-1}), key_mask});
  }
  return buckets;
}

// FlashAttention's boundaries: the batch's own, or with each row's
// sequences joined (the no_block_mask ablation). With static shapes, the
// padding tokens after the T real ones as sequences of at most S, then
// empty sequences up to B*D + B of them, and S the longest.
model::VarlenBoundaries Boundaries(const data::PackedBatch& batch, bool whole_rows,
                                   bool static_shapes) {
  if (!whole_rows && !static_shapes) return {batch.cu_seqlens, batch.max_seqlen};
  model::VarlenBoundaries out;
  std::vector<int32_t> cu = {0};
  for (const Span& s : Spans(batch, /*rows=*/false, whole_rows)) {
    cu.push_back(static_cast<int32_t>(s.start + s.length));
    out.max_seqlen = std::max(out.max_seqlen, s.length);
  }
  if (static_shapes) {
    const int64_t B = batch.rows(), S = batch.input_ids.size(1), D = batch.cls_positions.size(1);
    for (int64_t end = batch.tokens; end < B * S;) {
      end = std::min(end + S, B * S);
      cu.push_back(static_cast<int32_t>(end));
    }
    cu.resize(static_cast<size_t>(B * D + B + 1), static_cast<int32_t>(B * S));
    out.max_seqlen = S;
  }
  out.cu_seqlens = at::tensor(cu, at::kInt);
  return out;
}

// The attention of the varlen layouts over `batch`'s real tokens and
// `padding` more (static shapes).
model::AttentionLayout VarlenAttention(const data::PackedBatch& batch,
                                       const model::InputPlan& plan, int64_t padding) {
  if (plan.flash) {
    model::VarlenBoundaries boundaries = Boundaries(batch, plan.whole_rows, plan.static_shapes);
    // cuDNN where the run asks for it and the batch's longest sequence is
    // longer than 128 (FlashAttention below, as PyTorch's varlen_attn
    // chooses); with static shapes the longest is S, one kernel a run.
    boundaries.cudnn = plan.cudnn && boundaries.max_seqlen > model::kCudnnVarlenLongerThan;
    return boundaries;
  }
  // The padding tokens are in no bucket: their attention is zero.
  return model::VarlenBuckets{Buckets(Spans(batch, /*rows=*/false, plan.whole_rows),
                                      batch.tokens + padding, batch.input_ids.size(1),
                                      plan.mask_dtype, plan.granularity)};
}

// The attention over `batch`'s padded rows: the dense mask or the buckets.
model::AttentionLayout RowAttention(const data::PackedBatch& batch, const model::InputPlan& plan) {
  const int64_t B = batch.rows(), S = batch.input_ids.size(1);
  if (plan.attention == model::AttentionKind::kDense) {
    // Without the block mask, a row's real tokens are one "sequence".
    const at::Tensor ids = plan.whole_rows
                               ? batch.sequence_ids.gt(0).to(batch.sequence_ids.scalar_type())
                               : batch.sequence_ids;
    return model::DenseMask{model::BlockDiagonalMask(ids, plan.mask_dtype)};
  }
  return model::BlockedBuckets{Buckets(Spans(batch, /*rows=*/true, plan.whole_rows), B * S, S,
                                       plan.mask_dtype, plan.granularity)};
}

}  // namespace

model::Inputs MakeInputs(const data::PackedBatch& batch, const model::InputPlan& plan) {
  const int64_t B = batch.rows(), S = batch.input_ids.size(1);
  model::Inputs in;
  in.slot_valid = batch.nsp_valid;
  if (plan.attention == model::AttentionKind::kVarlen) {
    // The T real tokens only, end to end; with static shapes padded to B*S
    // with [PAD] (id 0), position 0 and segment 0.
    const int64_t padding = plan.static_shapes ? B * S - batch.tokens : 0;
    auto real = [&](const at::Tensor& t) {
      return model::PaddedWith(t.reshape({-1}).index_select(0, batch.token_index), padding, 0);
    };
    in.input_ids = real(batch.input_ids);
    in.token_type_ids = real(batch.token_type_ids);
    in.position_ids = plan.reset_positions
                          ? real(batch.position_ids)
                          : model::PaddedWith(batch.token_index.remainder(S), padding, 0);
    in.cls_token = batch.cls_token;
    in.attention = VarlenAttention(batch, plan, padding);
  } else {
    in.input_ids = batch.input_ids;
    in.token_type_ids = batch.token_type_ids;
    in.position_ids = plan.reset_positions
                          ? batch.position_ids
                          : at::arange(S, at::kLong).expand_as(batch.position_ids).contiguous();
    in.cls_token = batch.cls_positions + at::arange(B, at::kLong).mul(S).unsqueeze(1);
    in.attention = RowAttention(batch, plan);
  }
  if (plan.device.is_cuda()) in.PinMemory();
  return in;
}

absl::StatusOr<MicroBatch> Prepare(const data::PackedBatch& batch, const model::InputPlan& plan,
                                   const TaskInputs& task) {
  try {
    model::Inputs inputs = MakeInputs(batch, plan);
    tasks::Totals totals;
    if (task.task != nullptr) {
      static const tasks::PackedSet kNone;
      const tasks::PackedSet* set = task.set != nullptr ? task.set : task.task->train();
      ASSIGN_OR_RETURN(totals,
                       task.task->AddInputs(set != nullptr ? *set : kNone, batch, plan, &inputs));
      if (totals.size() != task.task->TotalNames().size()) {
        return absl::InternalError(absl::StrCat("task ", task.task->name(), " gave ",
                                                totals.size(), " totals of ",
                                                task.task->TotalNames().size()));
      }
      if (plan.device.is_cuda()) inputs.PinMemory();  // the task's (the rest are)
    }
    MicroBatch micro;
    micro.inputs = inputs.To(plan.device, /*non_blocking=*/true);
    micro.totals = std::move(totals);
    micro.work = WorkOf(batch);
    micro.rows = batch.rows();
    micro.width = batch.input_ids.size(1);
    micro.tokens = batch.tokens;
    return micro;
  } catch (const std::exception& e) {
    // As the loader reports what it cannot build (data/loader.cc).
    const bool memory = IsOutOfMemory(e);
    return absl::Status(memory ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal,
                        absl::StrCat("preparing a micro-batch: ", FirstLine(e),
                                     memory ? "; lower train.micro_batch_rows" : ""));
  }
}

absl::StatusOr<std::vector<MicroBatch>> Prepare(const std::vector<data::PackedBatch>& batches,
                                                const model::InputPlan& plan,
                                                const TaskInputs& task) {
  std::vector<MicroBatch> out;
  for (const data::PackedBatch& batch : batches) {
    ASSIGN_OR_RETURN(MicroBatch micro, Prepare(batch, plan, task));
    micro.index = out.size();
    out.push_back(std::move(micro));
  }
  return out;
}

data::LoaderOptions::PrepareFunction Preparer(const model::InputPlan& plan,
                                              const TaskInputs& task) {
  return [plan, task](const data::PackedBatch& batch) -> absl::StatusOr<std::any> {
    ASSIGN_OR_RETURN(MicroBatch micro, Prepare(batch, plan, task));
    return std::any(std::move(micro));
  };
}

std::vector<MicroBatch> Prepared(data::StepBatches& batches) {
  std::vector<MicroBatch> out;
  out.reserve(batches.prepared.size());
  for (std::any& p : batches.prepared) {
    out.push_back(std::move(std::any_cast<MicroBatch&>(p)));
    out.back().index = batches.first_micro_batch + (out.size() - 1);
  }
  return out;
}

model::BatchWork WorkOf(const data::PackedBatch& batch) {
  model::BatchWork work;
  work.tokens = static_cast<double>(batch.tokens);
  work.sequences = static_cast<double>(batch.sequences.size());
  for (const data::SequenceSpan& s : batch.sequences) {
    work.squared_lengths += static_cast<double>(s.length) * static_cast<double>(s.length);
  }
  return work;
}

}  // namespace pbert::train
