#include "train/mllog.h"

#include <chrono>

#include "common/logging.h"
#include "common/status.h"

namespace pbert::train {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr char kPoint[] = "POINT_IN_TIME";
constexpr char kStart[] = "INTERVAL_START";
constexpr char kEnd[] = "INTERVAL_END";

}  // namespace

std::string MlLogLine(int64_t time_ms, const std::string& event_type, const std::string& key,
                      const nlohmann::json& value, const nlohmann::json& metadata) {
  nlohmann::ordered_json line;
  line["namespace"] = "";
  line["time_ms"] = time_ms;
  line["event_type"] = event_type;
  line["key"] = key;
  line["value"] = value;
  line["metadata"] = metadata;
  return ":::MLLOG " + line.dump();
}

namespace {

// A cut log keeps its whole lines when its header (up to run_start)
// survived, else none: the header is then written again (Start).
uint64_t WholeLinesFromRunStart(absl::string_view text) {
  const uint64_t whole = WholeLines(text);
  return text.substr(0, whole).find("\"key\":\"run_start\"") == absl::string_view::npos ? 0
                                                                                        : whole;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MlperfLog>> MlperfLog::Open(const std::string& path,
                                                           const MlperfLogState& state) {
  auto log = std::unique_ptr<MlperfLog>(new MlperfLog());
  log->state_ = state;
  if (!path.empty()) {
    ASSIGN_OR_RETURN(log->file_, AppendLog::Open(path, state.bytes, WholeLinesFromRunStart));
    if (!log->file_->recovery().empty()) {
      logging::Get("train")->warn("{}{}", log->file_->recovery(),
                                  log->has_header() ? ""
                                                    : "; its header is written again, with "
                                                      "run_start at the run's first start");
    }
  }
  return log;
}

bool MlperfLog::has_header() const { return !file_ || !started() || file_->bytes() > 0; }

MlperfLogState MlperfLog::State() const {
  MlperfLogState state = state_;
  state.bytes = file_ ? file_->bytes() : 0;
  return state;
}

absl::Status MlperfLog::Write(const char* event_type, const std::string& key,
                              const nlohmann::json& value, const nlohmann::json& metadata,
                              int64_t time_ms) {
  if (!file_) return absl::OkStatus();
  std::string line = MlLogLine(time_ms > 0 ? time_ms : NowMs(), event_type, key, value, metadata);
  logging::Get("mllog")->debug("{}", line);
  return file_->Append(line);
}

absl::Status MlperfLog::Start(const MlperfOptions& o, const MlperfHeader& h, uint64_t samples) {
  RETURN_IF_ERROR(Write(kPoint, "cache_clear", true));
  RETURN_IF_ERROR(Write(kStart, "init_start", nullptr));
  const std::pair<const char*, nlohmann::json> events[] = {
      {"submission_benchmark", "bert"},
      {"submission_division", NameOf(o.division)},
      {"submission_org", o.org},
      {"submission_platform", o.platform},
      {"submission_status", NameOf(o.status)},
      {"seed", h.seed},
      {"global_batch_size", h.global_batch_size},
      {"gradient_accumulation_steps", h.gradient_accumulation_steps},
      {"opt_base_learning_rate", h.base_learning_rate},
      {"opt_lamb_epsilon", h.epsilon},
      {"opt_epsilon", h.epsilon},
      {"opt_learning_rate_training_steps", h.training_steps},
      {"opt_learning_rate_warmup_steps", h.warmup_steps},
      {"num_warmup_steps", h.warmup_steps},
      {"start_warmup_step", h.start_warmup_step},
      {"opt_lamb_beta_1", h.beta1},
      {"opt_lamb_beta_2", h.beta2},
      {"opt_lamb_weight_decay_rate", h.weight_decay},
      {"opt_lamb_learning_rate_decay_poly_power", h.decay_power},
      {"max_sequence_length", h.max_sequence_length},
      {"train_samples", h.train_samples},
      {"eval_samples", h.eval_samples},
  };
  for (const auto& [key, value] : events) RETURN_IF_ERROR(Write(kPoint, key, value));
  RETURN_IF_ERROR(Write(kEnd, "init_stop", nullptr));
  if (!started()) state_.run_start_ms = NowMs();
  RETURN_IF_ERROR(
      Write(kStart, "run_start", nullptr, nlohmann::json::object(), state_.run_start_ms));
  return BlockStart(samples);
}

absl::Status MlperfLog::BlockStart(uint64_t samples) {
  return Write(kStart, "block_start", nullptr, {{"samples_count", samples}});
}

absl::Status MlperfLog::BlockStop(uint64_t samples) {
  return Write(kEnd, "block_stop", nullptr, {{"samples_count", samples}});
}

absl::Status MlperfLog::EvalStart(uint64_t samples) {
  return Write(kStart, "eval_start", nullptr, {{"samples_count", samples}});
}

absl::Status MlperfLog::EvalStop(uint64_t samples, double mlm_accuracy) {
  RETURN_IF_ERROR(Write(kPoint, "eval_accuracy", mlm_accuracy, {{"epoch_num", samples}}));
  return Write(kEnd, "eval_stop", nullptr, {{"samples_count", samples}});
}

absl::Status MlperfLog::RunStop(const std::string& status, uint64_t samples) {
  if (!started() || state_.run_seconds > 0) return absl::OkStatus();
  state_.run_seconds = std::max(1e-3, static_cast<double>(NowMs() - state_.run_start_ms) / 1000.0);
  return Write(kEnd, "run_stop", nullptr, {{"status", status}, {"epoch_num", samples}});
}

absl::Status MlperfLog::Sync() { return file_ ? file_->Sync() : absl::OkStatus(); }

}  // namespace pbert::train
