#include "model/losses.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"

namespace pbert::model {

absl::StatusOr<MlmLossMode> ParseMlmLossMode(const std::string& name) {
  if (name == "per_token") return MlmLossMode::kPerToken;
  if (name == "per_sequence") return MlmLossMode::kPerSequence;
  return absl::InvalidArgumentError(
      absl::StrCat("MLM loss mode '", name, "' is not one of: per_token, per_sequence"));
}

namespace {

// Losses are summed in at least float32, whatever precision the logits have.
at::Tensor AtLeastFloat(const at::Tensor& t) {
  return t.to(at::promote_types(t.scalar_type(), at::kFloat));
}

}  // namespace

PretrainingSums ComputeSums(const PretrainingLogits& logits, const data::PackedBatch& batch) {
  namespace F = torch::nn::functional;
  const int64_t B = batch.mlm_labels.size(0), M = batch.mlm_labels.size(1);
  const int64_t D = batch.cls_positions.size(1);
  PretrainingSums s;

  auto mlm_logits = AtLeastFloat(logits.mlm);
  auto real = mlm_logits.scalar_type();
  auto used = (batch.mlm_sequence > 0).to(real);  // [B,M]
  auto token_ce =
      F::cross_entropy(mlm_logits.reshape({B * M, -1}), batch.mlm_labels.reshape({B * M}),
                       F::CrossEntropyFuncOptions().reduction(torch::kNone))
          .reshape({B, M}) *
      used;
  s.mlm_loss = token_ce.sum();
  s.mlm_tokens = used.sum().to(torch::kDouble);
  s.mlm_correct = ((mlm_logits.argmax(-1) == batch.mlm_labels).to(real) * used)
                      .sum()
                      .to(torch::kDouble);
  // Which sequence slot each MLM slot belongs to, one-hot: [B,M,D]. Slot 0
  // (unused) is dropped, so unused MLM slots count nowhere.
  auto owner = F::one_hot(batch.mlm_sequence, D + 1)
                   .slice(/*dim=*/2, /*start=*/1)
                   .to(real);
  auto sequence_ce = torch::einsum("bm,bmd->bd", {token_ce, owner});  // [B,D]
  auto sequence_tokens = owner.sum(1);                                 // [B,D]
  auto has_tokens = (sequence_tokens > 0).to(real);
  s.mlm_sequence_loss = (sequence_ce / sequence_tokens.clamp_min(1.0) * has_tokens).sum();
  s.mlm_sequences = has_tokens.sum().to(torch::kDouble);

  auto nsp_logits = AtLeastFloat(logits.nsp);
  auto valid = batch.nsp_valid.to(real);  // [B,D]
  auto nsp_ce = F::cross_entropy(nsp_logits.reshape({B * D, 2}), batch.nsp_labels.reshape({B * D}),
                                 F::CrossEntropyFuncOptions().reduction(torch::kNone))
                    .reshape({B, D}) *
                valid;
  s.nsp_loss = nsp_ce.sum();
  s.nsp_sequences = valid.sum().to(torch::kDouble);
  s.nsp_correct = ((nsp_logits.argmax(-1) == batch.nsp_labels).to(real) * valid)
                      .sum()
                      .to(torch::kDouble);
  return s;
}

StepTotals TotalsOf(const PretrainingSums& sums) {
  return {sums.mlm_tokens.item<double>(), sums.mlm_sequences.item<double>(),
          sums.nsp_sequences.item<double>()};
}

at::Tensor PretrainingLoss(const PretrainingSums& sums, MlmLossMode mode,
                           const StepTotals& totals) {
  auto mlm = mode == MlmLossMode::kPerToken ? sums.mlm_loss / std::max(totals.mlm_tokens, 1.0)
                                            : sums.mlm_sequence_loss /
                                                  std::max(totals.mlm_sequences, 1.0);
  return mlm + sums.nsp_loss / std::max(totals.nsp_sequences, 1.0);
}

}  // namespace pbert::model
