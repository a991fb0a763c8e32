// MLPerf results from MLLOG files: each run's time to train (run_start to
// run_stop) and samples to converge, and the score of a set of runs as
// MLPerf's result summarizer computes it (mlperf_logging/result_summarizer):
// an olympic mean of the times in minutes, where a run that did not converge
// is dropped in place of the slowest, and more such runs than may be dropped
// (one, for BERT) leave the set without a valid score.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pbert::train {

struct MlperfRun {
  std::string path;        // the MLLOG file
  std::string status;      // run_stop's status: "success", "aborted"; "" if no run_stop
  bool converged = false;  // run_stop with status success
  double minutes = 0;      // run_start to run_stop
  int64_t samples = 0;     // run_stop's epoch_num: sequences trained on
  double last_accuracy = 0;
  int evaluations = 0;
};

// Reads `path` (an MLLOG file, or a run folder holding mllog.txt). Lines
// without ":::MLLOG " are skipped; a malformed MLLOG line, no run_start, a
// second run_start or run_stop (two runs in one file), a run_stop before
// run_start (in the file or in time) is an error naming the file and line.
absl::StatusOr<MlperfRun> ReadMlperfRun(const std::string& path);

struct MlperfScore {
  std::optional<double> minutes;  // none: not a valid set
  int not_converged = 0;
  std::string note;  // what was dropped, or why there is no score
};

// `max_dropped`: the runs dropped at each end (1 for BERT).
MlperfScore OlympicScore(const std::vector<MlperfRun>& runs, int max_dropped = 1);

}  // namespace pbert::train
