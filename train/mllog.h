// MLPerf's log of a training run, `:::MLLOG` lines as MLPerf's mllog package
// writes them (one JSON object per line: namespace, time_ms, event_type,
// key, value, metadata), for the compliance checker and result summarisers.
// Rank 0 writes RUN_DIR/mllog.txt; the other ranks write nothing.
// docs/training.md lists the keys in the order the BERT rules ask for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/append_log.h"
#include "common/choices.h"
#include "common/config_field.h"
#include "nlohmann/json.hpp"

namespace pbert::train {

enum class Division { kClosed, kOpen };
inline constexpr Choice<Division> kDivisions[] = {{"closed", Division::kClosed},
                                                  {"open", Division::kOpen}};
constexpr ChoiceList<Division> ChoicesOf(Division) { return kDivisions; }

enum class SubmissionStatus { kOnprem, kCloud, kPreview, kResearch };
inline constexpr Choice<SubmissionStatus> kSubmissionStatuses[] = {
    {"onprem", SubmissionStatus::kOnprem},
    {"cloud", SubmissionStatus::kCloud},
    {"preview", SubmissionStatus::kPreview},
    {"research", SubmissionStatus::kResearch}};
constexpr ChoiceList<SubmissionStatus> ChoicesOf(SubmissionStatus) { return kSubmissionStatuses; }

// The config's mlperf section: what the log says about the submission.
struct MlperfOptions {
  std::string org = "packed-bert";
  std::string platform = "cpu";
  Division division = Division::kClosed;
  SubmissionStatus status = SubmissionStatus::kResearch;

  template <class V>
  void Visit(V& v) {
    v.Field("org", &org, "submission_org in the MLLOG");
    v.Field("platform", &platform, "submission_platform in the MLLOG");
    v.Field("division", &division, "submission_division in the MLLOG");
    v.Field("status", &status, "submission_status in the MLLOG");
  }
};

// The values the log's header states, in MLPerf's names.
struct MlperfHeader {
  uint64_t seed = 0;
  int64_t global_batch_size = 0;  // sequences per step
  int64_t gradient_accumulation_steps = 1;
  double base_learning_rate = 0;
  double epsilon = 0;
  int64_t training_steps = 0;
  int64_t warmup_steps = 0;
  int64_t start_warmup_step = 0;
  double beta1 = 0, beta2 = 0;
  double weight_decay = 0;
  double decay_power = 1;
  int64_t max_sequence_length = 0;
  uint64_t train_samples = 0;
  uint64_t eval_samples = 0;
};

struct MlperfLogState {
  uint64_t bytes = 0;        // the file's length
  int64_t run_start_ms = 0;  // run_start's time; 0: not started
  double run_seconds = 0;    // run_start to run_stop; 0: not stopped
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(MlperfLogState, bytes, run_start_ms, run_seconds)
};

// One line as written (exposed for tests).
std::string MlLogLine(int64_t time_ms, const std::string& event_type, const std::string& key,
                      const nlohmann::json& value, const nlohmann::json& metadata);

// The log of one run: the header, then blocks of training between
// evaluations, and one run_stop. Its state (the file's length, when the run
// started, how long it took) is saved with every checkpoint; a resume cuts
// the file back to that length, so the lines of redone steps appear once.
class MlperfLog {
 public:
  // Rank 0 opens `path`, cut back to state.bytes; others pass "". A log
  // shorter than that is set aside and goes on from its whole lines, or
  // without them where run_start was among the lines lost (has_header).
  static absl::StatusOr<std::unique_ptr<MlperfLog>> Open(const std::string& path,
                                                         const MlperfLogState& state);

  // init_start .. init_stop, run_start, and the first block_start, at
  // `samples`; run_start at the run's first start where it had started (a
  // header written again).
  absl::Status Start(const MlperfOptions& options, const MlperfHeader& header,
                     uint64_t samples = 0);
  // False where a resumed run's log lost its header (cut before run_start,
  // or missing): Start writes it again.
  bool has_header() const;
  absl::Status BlockStart(uint64_t samples);
  absl::Status BlockStop(uint64_t samples);
  absl::Status EvalStart(uint64_t samples);
  absl::Status EvalStop(uint64_t samples, double mlm_accuracy);  // eval_accuracy, eval_stop
  // run_stop with `status` ("success" or "aborted"); written once, however
  // often it is called. Also what a run that cannot go on (a lost rank)
  // calls on its way out.
  absl::Status RunStop(const std::string& status, uint64_t samples);
  absl::Status Sync();

  bool started() const { return state_.run_start_ms > 0; }
  // MLLOG run_start to run_stop (0 before run_stop).
  double run_seconds() const { return state_.run_seconds; }
  MlperfLogState State() const;

 private:
  // `time_ms` 0: now.
  absl::Status Write(const char* event_type, const std::string& key, const nlohmann::json& value,
                     const nlohmann::json& metadata = nlohmann::json::object(),
                     int64_t time_ms = 0);

  std::unique_ptr<AppendLog> file_;  // null on ranks other than 0
  MlperfLogState state_;
};

}  // namespace pbert::train
