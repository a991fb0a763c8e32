#include "model/losses.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pbert::model {

namespace {

constexpr std::pair<const char*, MlmLossMode> kModes[] = {{"per_token", MlmLossMode::kPerToken},
                                                         {"per_sequence", MlmLossMode::kPerSequence}};

}  // namespace

std::vector<std::string> MlmLossModeNames() {
  std::vector<std::string> names;
  for (const auto& [name, mode] : kModes) names.push_back(name);
  return names;
}

absl::StatusOr<MlmLossMode> ParseMlmLossMode(const std::string& name) {
  for (const auto& [text, mode] : kModes) {
    if (name == text) return mode;
  }
  return absl::InvalidArgumentError(absl::StrCat("MLM loss mode '", name, "' is not one of: ",
                                                 absl::StrJoin(MlmLossModeNames(), ", ")));
}

namespace {

// Losses are summed in at least float32, whatever precision the logits have.
at::Tensor AtLeastFloat(const at::Tensor& t) {
  return t.to(at::promote_types(t.scalar_type(), at::kFloat));
}

}  // namespace

namespace {

// Cross-entropy of `logits` [B,K,C] against `labels` [B,K] where `used`
// [B,K] is 1, and 0 elsewhere: per-slot losses [B,K], and the count of
// slots predicted right.
struct SlotLosses {
  at::Tensor loss;
  at::Tensor correct;
};

SlotLosses MaskedCrossEntropy(const at::Tensor& logits, const at::Tensor& labels,
                              const at::Tensor& used) {
  namespace F = torch::nn::functional;
  const int64_t B = labels.size(0), K = labels.size(1);
  auto loss = F::cross_entropy(logits.reshape({B * K, -1}), labels.reshape({B * K}),
                               F::CrossEntropyFuncOptions().reduction(torch::kNone))
                  .reshape({B, K}) *
              used;
  auto correct = ((logits.argmax(-1) == labels).to(used.scalar_type()) * used).sum();
  return {loss, correct.to(torch::kDouble)};
}

}  // namespace

PretrainingSums ComputeSums(const PretrainingLogits& logits, const data::PackedBatch& batch) {
  const int64_t D = batch.cls_positions.size(1);
  auto mlm_logits = AtLeastFloat(logits.mlm);
  auto real = mlm_logits.scalar_type();
  PretrainingSums s;

  auto used = (batch.mlm_sequence > 0).to(real);  // [B,M]
  SlotLosses mlm = MaskedCrossEntropy(mlm_logits, batch.mlm_labels, used);
  s.mlm_loss = mlm.loss.sum();
  s.mlm_tokens = used.sum().to(torch::kDouble);
  s.mlm_correct = mlm.correct;
  // Which sequence slot each MLM slot belongs to, one-hot: [B,M,D]. Slot 0
  // (unused) is dropped, so unused MLM slots count nowhere.
  auto owner = torch::nn::functional::one_hot(batch.mlm_sequence, D + 1)
                   .slice(/*dim=*/2, /*start=*/1)
                   .to(real);
  auto sequence_ce = torch::einsum("bm,bmd->bd", {mlm.loss, owner});  // [B,D]
  auto sequence_tokens = owner.sum(1);                                // [B,D]
  auto has_tokens = (sequence_tokens > 0).to(real);
  s.mlm_sequence_loss = (sequence_ce / sequence_tokens.clamp_min(1.0) * has_tokens).sum();
  s.mlm_sequences = has_tokens.sum().to(torch::kDouble);

  auto valid = batch.nsp_valid.to(real);  // [B,D]
  SlotLosses nsp = MaskedCrossEntropy(AtLeastFloat(logits.nsp), batch.nsp_labels, valid);
  s.nsp_loss = nsp.loss.sum();
  s.nsp_sequences = valid.sum().to(torch::kDouble);
  s.nsp_correct = nsp.correct;
  return s;
}

StepTotals TotalsOf(const data::PackedBatch& batch) {
  const int64_t D = batch.cls_positions.size(1);
  // Masked tokens per sequence slot: [B,D].
  auto per_sequence = torch::nn::functional::one_hot(batch.mlm_sequence, D + 1)
                          .slice(/*dim=*/2, /*start=*/1)
                          .sum(1);
  return {(batch.mlm_sequence > 0).sum().item<double>(), (per_sequence > 0).sum().item<double>(),
          batch.nsp_valid.sum().item<double>()};
}

at::Tensor PretrainingLoss(const PretrainingSums& sums, MlmLossMode mode,
                           const StepTotals& totals) {
  auto mlm = mode == MlmLossMode::kPerToken
                 ? sums.mlm_loss / std::max(totals.mlm_tokens, 1.0)
                 : sums.mlm_sequence_loss / std::max(totals.mlm_sequences, 1.0);
  return mlm + sums.nsp_loss / std::max(totals.nsp_sequences, 1.0);
}

}  // namespace pbert::model
