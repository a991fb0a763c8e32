#include "train/metrics_log.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/structured_text.h"

namespace pbert::train {

void to_json(nlohmann::json& json, const MetricsLogState& state) {
  json = {{"bytes", state.bytes}, {"tensorboard_bytes", state.tensorboard_bytes}};
}

void from_json(const nlohmann::json& json, MetricsLogState& state) {
  json.at("bytes").get_to(state.bytes);
  state.tensorboard_bytes = json.contains("tensorboard_bytes")
                                ? IntegerOf<uint64_t>(json.at("tensorboard_bytes"))
                                : 0;
}

absl::StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const MetricsLogOptions& options,
                                                             const MetricsLogState& state) {
  MetricsLogOptions o = options;
  o.every_steps = std::max<int64_t>(1, o.every_steps);
  std::unique_ptr<MetricsLog> log(new MetricsLog(o, state));
  if (o.dir.empty()) return log;
  ASSIGN_OR_RETURN(log->file_,
                   AppendLog::Open(absl::StrCat(o.dir, "/metrics.jsonl"), state.bytes, WholeLines));
  if (!log->file_->recovery().empty()) logging::Get("train")->warn("{}", log->file_->recovery());
  if (o.tensorboard) {
    ASSIGN_OR_RETURN(log->tensorboard_,
                     TensorBoardLog::Open(absl::StrCat(o.dir, "/", kTensorBoardFile),
                                          state.tensorboard_bytes));
  }
  return log;
}

MetricsLogState MetricsLog::State() const {
  MetricsLogState s = state_;
  if (file_) s.bytes = file_->bytes();
  if (tensorboard_) s.tensorboard_bytes = tensorboard_->bytes();
  return s;
}

absl::Status MetricsLog::Append(const nlohmann::json& line) {
  if (!file_) return absl::OkStatus();
  RETURN_IF_ERROR(file_->Append(line.dump()));
  if (!tensorboard_) return absl::OkStatus();
  const std::string kind = line.at("kind").get<std::string>();
  std::vector<Scalar> scalars;
  for (const auto& [key, value] : line.items()) {
    if (!value.is_number() || key == "step" || key == "samples" || key == "time") continue;
    scalars.emplace_back(absl::StrCat(kind, "/", key), value.get<double>());
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return tensorboard_->Write(IntegerOf<int64_t>(line.at("step")), scalars, now);
}

absl::Status MetricsLog::AddStep(const StepResult& step, double lr, double seconds,
                                 const LoopPosition& at) {
  interval_.Add(step.metrics);
  steps_ += 1;
  seconds_ += seconds;
  lr_ = lr;
  grad_norm_ = step.grad_norm;
  return at.step % options_.every_steps == 0 ? Flush(at) : absl::OkStatus();
}

absl::Status MetricsLog::Flush(const LoopPosition& at) {
  if (steps_ == 0) return absl::OkStatus();
  const StepMetrics& m = interval_;
  const double seconds = std::max(seconds_, 1e-9);
  nlohmann::json line = {{"kind", "train"},
                         {"step", at.step},
                         {"samples", at.samples},
                         {"time", at.seconds},
                         {"loss", m.loss / static_cast<double>(steps_)},
                         {"lr", lr_},
                         {"grad_norm", grad_norm_},
                         {"tokens_per_s", m.tokens / seconds},
                         {"sequences_per_s", m.sequences / seconds},
                         {"padding", m.PaddingShare(options_.max_len)},
                         {"skipped_steps", at.skipped_steps},
                         {"model_tflops", m.flops / seconds / 1e12}};
  if (options_.task != nullptr) {
    for (const auto& [name, value] : options_.task->TrainMetrics(m.sums)) line[name] = value;
  }
  if (options_.peak_flops > 0) line["mfu"] = m.flops / seconds / options_.peak_flops;
  interval_ = StepMetrics();
  steps_ = 0;
  seconds_ = 0;
  return Append(line);
}

absl::Status MetricsLog::AddEvaluation(const tasks::Metrics& eval, const std::string& score,
                                       double seconds, const LoopPosition& at) {
  nlohmann::json line = {{"kind", "eval"},   {"step", at.step},       {"samples", at.samples},
                         {"time", at.seconds}, {"seconds", seconds}, {"metric", score}};
  for (const auto& [name, value] : eval) line[name] = value;
  return Append(line);
}

absl::Status MetricsLog::Sync() {
  if (file_) RETURN_IF_ERROR(file_->Sync());
  return tensorboard_ ? tensorboard_->Sync() : absl::OkStatus();
}

}  // namespace pbert::train
