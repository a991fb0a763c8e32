#include "train/metrics_log.h"

#include <algorithm>

#include "common/status.h"

namespace pbert::train {

absl::StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& path,
                                                             const MetricsLogState& state,
                                                             int64_t every_steps, int max_len) {
  std::unique_ptr<MetricsLog> log(new MetricsLog(std::max<int64_t>(1, every_steps), max_len));
  if (!path.empty()) {
    ASSIGN_OR_RETURN(log->file_, AppendLog::Open(path, state.bytes));
  }
  return log;
}

absl::Status MetricsLog::Append(const nlohmann::json& line) {
  return file_ ? file_->Append(line.dump()) : absl::OkStatus();
}

absl::Status MetricsLog::AddStep(const StepResult& step, double lr, double seconds,
                                 const LoopPosition& at) {
  interval_.Add(step.metrics);
  steps_ += 1;
  seconds_ += seconds;
  lr_ = lr;
  grad_norm_ = step.grad_norm;
  return at.step % every_steps_ == 0 ? Flush(at) : absl::OkStatus();
}

absl::Status MetricsLog::Flush(const LoopPosition& at) {
  if (steps_ == 0) return absl::OkStatus();
  const PretrainingMetrics& m = interval_;
  const double seconds = std::max(seconds_, 1e-9);
  nlohmann::json line = {{"kind", "train"},
                         {"step", at.step},
                         {"samples", at.samples},
                         {"time", at.seconds},
                         {"loss", m.loss / static_cast<double>(steps_)},
                         {"mlm_loss", m.MlmLossPerToken()},
                         {"mlm_accuracy", m.MlmAccuracy()},
                         {"nsp_loss", m.NspLoss()},
                         {"nsp_accuracy", m.NspAccuracy()},
                         {"lr", lr_},
                         {"grad_norm", grad_norm_},
                         {"tokens_per_s", m.tokens / seconds},
                         {"sequences_per_s", m.nsp_sequences / seconds},
                         {"padding", m.PaddingShare(max_len_)},
                         {"skipped_steps", at.skipped_steps}};
  interval_ = PretrainingMetrics();
  steps_ = 0;
  seconds_ = 0;
  return Append(line);
}

absl::Status MetricsLog::AddEvaluation(const PretrainingMetrics& eval, double seconds,
                                       const LoopPosition& at) {
  return Append({{"kind", "eval"},
                 {"step", at.step},
                 {"samples", at.samples},
                 {"time", at.seconds},
                 {"mlm_accuracy", eval.MlmAccuracy()},
                 {"mlm_loss", eval.MlmLossPerToken()},
                 {"nsp_accuracy", eval.NspAccuracy()},
                 {"nsp_loss", eval.NspLoss()},
                 {"seconds", seconds}});
}

absl::Status MetricsLog::Sync() { return file_ ? file_->Sync() : absl::OkStatus(); }

}  // namespace pbert::train
