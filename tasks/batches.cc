#include "tasks/batches.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pbert::tasks {
namespace {

// Each sequence's feature, checked against `features`.
absl::StatusOr<std::vector<int64_t>> FeaturesOf(const std::vector<Feature>& features,
                                                const data::PackedBatch& batch) {
  if (batch.records.size() != batch.sequences.size()) {
    return absl::InternalError(absl::StrCat("a batch of ", batch.sequences.size(),
                                            " sequences names ", batch.records.size(),
                                            " records"));
  }
  for (const int64_t f : batch.records) {
    if (f < 0 || f >= static_cast<int64_t>(features.size())) {
      return absl::InternalError(absl::StrCat("a batch holds feature ", f, " of ",
                                              features.size()));
    }
  }
  return batch.records;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> RecordsOf(const std::vector<Feature>& features,
                                               const data::PackedBatch& batch) {
  return FeaturesOf(features, batch);
}

int64_t AddSequenceTokens(const data::PackedBatch& batch, const model::InputPlan& plan,
                          model::Inputs* inputs) {
  const int64_t real = static_cast<int64_t>(batch.sequences.size());
  const int64_t B = batch.rows(), S = batch.input_ids.size(1), D = batch.cls_positions.size(1);
  int64_t longest = 1;
  for (const auto& s : batch.sequences) longest = std::max(longest, s.length);
  const int64_t n = plan.static_shapes ? B * D : real;
  const int64_t L = plan.static_shapes ? S : longest;
  at::Tensor token = at::zeros({n, L}, at::kLong);
  at::Tensor valid = at::zeros({n, L}, at::kBool);
  auto t = token.accessor<int64_t, 2>();
  auto v = valid.accessor<bool, 2>();
  const bool varlen = plan.attention == model::AttentionKind::kVarlen;
  for (int64_t i = 0; i < real; ++i) {
    const data::SequenceSpan& s = batch.sequences[i];
    const int64_t first = varlen ? s.token_start : s.row_start;
    for (int64_t j = 0; j < s.length; ++j) {
      t[i][j] = first + j;
      v[i][j] = true;
    }
  }
  // A padding sequence reads token 0, so that its softmax is finite.
  for (int64_t i = real; i < n; ++i) v[i][0] = true;
  inputs->sequence_token = token;
  inputs->sequence_valid = valid;
  return n;
}

absl::Status AddSpanInputs(const std::vector<Feature>& features, const data::PackedBatch& batch,
                           const model::InputPlan& plan, model::Inputs* inputs) {
  auto owned = FeaturesOf(features, batch);
  if (!owned.ok()) return owned.status();
  const int64_t real = static_cast<int64_t>(batch.sequences.size());
  const int64_t n = AddSequenceTokens(batch, plan, inputs);
  at::Tensor start = at::zeros({n}, at::kLong), end = at::zeros({n}, at::kLong);
  at::Tensor weight = at::zeros({n}, at::kDouble);
  at::Tensor feature = at::full({n}, static_cast<int64_t>(features.size()), at::kLong);
  auto starts = start.accessor<int64_t, 1>(), ends = end.accessor<int64_t, 1>();
  auto weights = weight.accessor<double, 1>();
  auto owners = feature.accessor<int64_t, 1>();
  for (int64_t i = 0; i < real; ++i) {
    const Feature& f = features[(*owned)[i]];
    starts[i] = f.start;
    ends[i] = f.end;
    weights[i] = 1.0;  // a padding sequence weighs nothing
    owners[i] = (*owned)[i];
  }
  inputs->task = {start, end, weight, feature};
  return absl::OkStatus();
}

std::vector<std::pair<int64_t, int64_t>> SlotsOf(const data::PackedBatch& batch) {
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(batch.sequences.size());
  // The batch's sequences lie row after row, each row's in slot order.
  const int64_t S = batch.input_ids.size(1);
  int64_t row = -1, slot = 0;
  for (const data::SequenceSpan& s : batch.sequences) {
    const int64_t r = s.row_start / S;
    slot = r == row ? slot + 1 : 0;
    row = r;
    out.emplace_back(r, slot);
  }
  return out;
}

absl::Status AddClassInputs(const std::vector<Feature>& features, bool score,
                            const data::PackedBatch& batch, model::Inputs* inputs) {
  auto owned = FeaturesOf(features, batch);
  if (!owned.ok()) return owned.status();
  const int64_t B = batch.rows(), D = batch.cls_positions.size(1);
  at::Tensor labels = score ? at::zeros({B, D}, at::kFloat) : at::zeros({B, D}, at::kLong);
  at::Tensor feature = at::full({B, D}, static_cast<int64_t>(features.size()), at::kLong);
  auto owners = feature.accessor<int64_t, 2>();
  const std::vector<std::pair<int64_t, int64_t>> slots = SlotsOf(batch);
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const auto [r, slot] = slots[i];
    const Feature& f = features[(*owned)[i]];
    if (score) {
      labels.accessor<float, 2>()[r][slot] = f.label;
    } else {
      labels.accessor<int64_t, 2>()[r][slot] = static_cast<int64_t>(f.label);
    }
    owners[r][slot] = (*owned)[i];
  }
  inputs->task = {labels, feature};
  return absl::OkStatus();
}

TaskSums SpanSums(const model::SpanLogitsTensor& logits, const model::Inputs& inputs) {
  const at::Tensor& start = inputs.task[kSpanStart];
  const at::Tensor& end = inputs.task[kSpanEnd];
  const at::Tensor& weight = inputs.task[kSpanWeight];
  const at::Tensor start_loss =
      at::log_softmax(logits.start.to(at::kDouble), -1).gather(1, start.unsqueeze(1)).squeeze(1).neg();
  const at::Tensor end_loss =
      at::log_softmax(logits.end.to(at::kDouble), -1).gather(1, end.unsqueeze(1)).squeeze(1).neg();
  TaskSums sums;
  sums.loss = ((start_loss + end_loss) / 2 * weight).sum();
  sums.sequences = weight.sum();
  sums.correct = ((logits.start.argmax(-1).eq(start) & logits.end.argmax(-1).eq(end))
                      .to(at::kDouble) *
                  weight)
                     .sum();
  return sums;
}

TaskSums ClassSums(const at::Tensor& logits, const model::Inputs& inputs, bool score) {
  const at::Tensor& labels = inputs.task[kClassLabel];
  const at::Tensor mask = inputs.slot_valid.to(at::kBool);
  const at::Tensor weight = mask.to(at::kDouble);
  TaskSums sums;
  sums.sequences = weight.sum();
  if (score) {
    const at::Tensor error = logits.squeeze(-1).to(at::kDouble) - labels.to(at::kDouble);
    sums.loss = (error * error * weight).sum();
    sums.correct = at::zeros({}, weight.options());
    return sums;
  }
  const at::Tensor log_p = at::log_softmax(logits.to(at::kDouble), -1);
  const at::Tensor picked = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
  sums.loss = (picked.neg() * weight).sum();
  sums.correct = (logits.argmax(-1).eq(labels) & mask).sum().to(at::kDouble);
  return sums;
}

}  // namespace pbert::tasks
