#include "model/losses.h"

#include <ATen/ATen.h>

#include "model/inputs.h"

namespace pbert::model {

namespace {

// Losses are summed in at least float32, whatever precision the logits have.
at::Tensor AtLeastFloat(const at::Tensor& t) {
  return t.to(at::promote_types(t.scalar_type(), at::kFloat));
}

// Cross-entropy of each row of `logits` against its label, unreduced; 0
// (and no gradient) for kNoLabel.
at::Tensor CrossEntropyEach(const at::Tensor& logits, const at::Tensor& labels) {
  return at::cross_entropy_loss(logits, labels, /*weight=*/{}, at::Reduction::None, kNoLabel);
}

}  // namespace

PretrainingSums ComputeSums(const PretrainingLogits& logits, const PretrainingTargets& targets) {
  const int64_t slots = targets.nsp_labels.numel();  // B * D
  auto mlm_logits = AtLeastFloat(logits.mlm);         // [K,V]
  auto real = mlm_logits.scalar_type();
  PretrainingSums s;

  const at::Tensor& labels = targets.mlm_labels;  // [K]
  at::Tensor ce = CrossEntropyEach(mlm_logits, labels);
  s.mlm_loss = ce.sum();
  // The slots that hold a masked token: all K, or fewer with static shapes.
  const at::Tensor used = labels.ne(kNoLabel).to(ce.scalar_type());
  s.mlm_tokens = used.sum().to(at::kDouble);
  s.mlm_correct = (mlm_logits.argmax(-1) == labels).sum().to(at::kDouble);
  // Token losses summed per sequence slot, without a loop over sequences.
  const at::Tensor& owners = targets.mlm_owner;
  auto sequence_ce = at::zeros({slots}, ce.options()).index_add(0, owners, ce);
  auto sequence_tokens = at::zeros({slots}, ce.options()).index_add(0, owners, used);
  auto has_tokens = (sequence_tokens > 0).to(real);
  s.mlm_sequence_loss = (sequence_ce / sequence_tokens.clamp_min(1.0) * has_tokens).sum();
  s.mlm_sequences = has_tokens.sum().to(at::kDouble);

  // NSP at every sequence slot, counted where the slot holds a sequence.
  auto valid = targets.nsp_valid.to(real);  // [B,D]
  auto nsp_logits = AtLeastFloat(logits.nsp);
  auto nsp_ce = CrossEntropyEach(nsp_logits.reshape({slots, 2}), targets.nsp_labels.reshape({slots}))
                    .reshape_as(valid);
  s.nsp_loss = (nsp_ce * valid).sum();
  s.nsp_sequences = valid.sum().to(at::kDouble);
  s.nsp_correct =
      ((nsp_logits.argmax(-1) == targets.nsp_labels).to(real) * valid).sum().to(at::kDouble);
  return s;
}

at::Tensor TotalsTensor(const StepTotals& totals, const c10::Device& device) {
  return HostToDevice(
      at::tensor({totals.mlm_tokens, totals.mlm_sequences, totals.nsp_sequences}, at::kDouble),
      device);
}

at::Tensor PretrainingLoss(const PretrainingSums& sums, MlmLossMode mode,
                           const at::Tensor& totals) {
  // In the loss's dtype, as a scalar divisor would be converted: the same
  // bits as dividing by the counts known on the host.
  const at::Tensor counts = totals.clamp_min(1.0).to(sums.nsp_loss.scalar_type());
  auto mlm = mode == MlmLossMode::kPerToken ? sums.mlm_loss / counts[0]
                                            : sums.mlm_sequence_loss / counts[1];
  return mlm + sums.nsp_loss / counts[2];
}

at::Tensor PretrainingLoss(const PretrainingSums& sums, MlmLossMode mode,
                           const StepTotals& totals) {
  return PretrainingLoss(sums, mode, TotalsTensor(totals, sums.nsp_loss.device()));
}

}  // namespace pbert::model
