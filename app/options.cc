#include "app/options.h"

#include "common/status.h"

namespace pbert::app {

model::BertOptions ToBertOptions(const ModelConfig& c) {
  return model::BertOptions()
      .vocab_size(c.vocab_size)
      .hidden_size(c.hidden_size)
      .num_layers(c.num_layers)
      .num_heads(c.num_heads)
      .intermediate_size(c.intermediate_size)
      .max_position_embeddings(c.max_position_embeddings)
      .type_vocab_size(c.type_vocab_size)
      .hidden_dropout(c.hidden_dropout)
      .attention_dropout(c.attention_dropout)
      .initializer_range(c.initializer_range)
      // The config accepts only the names the model knows.
      .attention(*model::ParseAttentionKind(c.attention))
      .ablation(*model::ParseAblation(c.ablation));
}

absl::StatusOr<optim::OptimizerHyperparameters> AdjustedOptimizer(const OptimConfig& c,
                                                                   double packing_factor) {
  return optim::AdjustForPacking(c.packing_adjustment, packing_factor,
                                 {c.beta1, c.beta2, c.accumulation_steps});
}

optim::LambOptions ToLambOptions(const OptimConfig& c,
                                 const optim::OptimizerHyperparameters& adjusted) {
  return optim::LambOptions(c.lr)
      .betas({adjusted.beta1, adjusted.beta2})
      .eps(c.eps)
      .weight_decay(c.weight_decay)
      .bias_correction(c.bias_correction);
}

optim::ScheduleOptions ToScheduleOptions(const OptimConfig& c) {
  optim::ScheduleOptions s;
  s.kind = c.schedule;
  s.peak_lr = c.lr;
  s.warmup_steps = c.warmup_steps;
  s.start_warmup_step = c.start_warmup_step;
  s.total_steps = c.total_steps;
  s.power = c.power;
  s.end_lr = c.end_lr;
  return s;
}

absl::StatusOr<train::StepOptions> ToStepOptions(const ExperimentConfig& c) {
  train::StepOptions s;
  ASSIGN_OR_RETURN(s.mlm_loss, model::ParseMlmLossMode(c.model.mlm_loss));
  ASSIGN_OR_RETURN(s.precision, model::ParsePrecision(c.model.precision, c10::DeviceType::CPU));
  s.max_grad_norm = c.optim.max_grad_norm;
  s.bucket_bytes = c.dist.bucket_mb << 20;
  return s;
}

}  // namespace pbert::app
