#include "tasks/batches.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pbert::tasks {

absl::StatusOr<TaskBatch> MakeTaskBatch(const std::vector<Feature>& features,
                                        const std::vector<std::vector<int64_t>>& rows,
                                        int max_len, int max_depth, HeadKind head) {
  std::vector<std::vector<const data::Instance*>> instances(rows.size());
  TaskBatch out;
  const int64_t b = static_cast<int64_t>(rows.size());
  out.labels = head == HeadKind::kScore ? at::zeros({b, max_depth}, at::kFloat)
                                        : at::zeros({b, max_depth}, at::kLong);
  std::vector<int64_t> start, end;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t k = 0; k < rows[r].size(); ++k) {
      const int64_t f = rows[r][k];
      if (f < 0 || f >= static_cast<int64_t>(features.size())) {
        return absl::InternalError(absl::StrCat("MakeTaskBatch: no feature ", f));
      }
      const Feature& feature = features[f];
      instances[r].push_back(&feature.sequence);
      out.features.push_back(f);
      start.push_back(feature.start);
      end.push_back(feature.end);
      if (head == HeadKind::kScore) {
        out.labels[r][k] = feature.label;
      } else {
        out.labels[r][k] = static_cast<int64_t>(feature.label);
      }
    }
  }
  ASSIGN_OR_RETURN(out.batch, data::MakeBatch(instances, {max_len, max_depth, 0}));
  out.start = at::tensor(start, at::kLong);
  out.end = at::tensor(end, at::kLong);
  return out;
}

model::SequenceTokens TokensOf(const data::PackedBatch& batch, bool varlen) {
  const int64_t n = static_cast<int64_t>(batch.sequences.size());
  int64_t longest = 1;
  for (const auto& s : batch.sequences) longest = std::max(longest, s.length);
  at::Tensor token = at::zeros({n, longest}, at::kLong);
  at::Tensor valid = at::zeros({n, longest}, at::kBool);
  auto t = token.accessor<int64_t, 2>();
  auto v = valid.accessor<bool, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const data::SequenceSpan& s = batch.sequences[i];
    const int64_t first = varlen ? s.token_start : s.row_start;
    for (int64_t j = 0; j < s.length; ++j) {
      t[i][j] = first + j;
      v[i][j] = true;
    }
  }
  return {token, valid};
}

std::vector<SpanLogits> SequenceSpanLogits(const model::SpanLogitsTensor& logits,
                                           const data::PackedBatch& batch) {
  // Contiguous float copies: start and end are views of every other element
  // of the head's [N,L,2] output.
  const at::Tensor start = logits.start.to(at::kCPU, at::kFloat).contiguous();
  const at::Tensor end = logits.end.to(at::kCPU, at::kFloat).contiguous();
  std::vector<SpanLogits> out;
  out.reserve(batch.sequences.size());
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const int64_t n = batch.sequences[i].length;
    const float* s = start[static_cast<int64_t>(i)].data_ptr<float>();
    const float* e = end[static_cast<int64_t>(i)].data_ptr<float>();
    out.push_back({std::vector<float>(s, s + n), std::vector<float>(e, e + n)});
  }
  return out;
}

TaskSums SpanSums(const model::SpanLogitsTensor& logits, const at::Tensor& start,
                  const at::Tensor& end) {
  const at::Tensor start_loss =
      at::log_softmax(logits.start.to(at::kDouble), -1).gather(1, start.unsqueeze(1)).neg();
  const at::Tensor end_loss =
      at::log_softmax(logits.end.to(at::kDouble), -1).gather(1, end.unsqueeze(1)).neg();
  TaskSums sums;
  sums.loss = ((start_loss + end_loss) / 2).sum();
  sums.sequences = at::scalar_tensor(static_cast<double>(start.size(0)),
                                     logits.start.options().dtype(at::kDouble));
  sums.correct = (logits.start.argmax(-1).eq(start) & logits.end.argmax(-1).eq(end))
                     .sum()
                     .to(at::kDouble);
  return sums;
}

TaskSums ClassSums(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& valid,
                   HeadKind head) {
  const at::Tensor mask = valid.to(at::kBool);
  const at::Tensor weight = mask.to(at::kDouble);
  TaskSums sums;
  sums.sequences = weight.sum();
  if (head == HeadKind::kScore) {
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
