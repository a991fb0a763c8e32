// packed-bert mlperf-summary: time to train and samples to converge of
// finished runs, and their score as MLPerf computes it.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "app/commands.h"
#include "common/printable.h"
#include "common/status.h"
#include "train/mlperf_result.h"

namespace pbert::app {
namespace {

absl::Status RunMlperfSummary(const Args& args) {
  if (args.positional().empty()) {
    return absl::InvalidArgumentError(
        "mlperf-summary needs run folders (or MLLOG files); see 'packed-bert mlperf-summary "
        "--help'");
  }
  std::vector<train::MlperfRun> runs;
  for (const std::string& path : args.positional()) {
    ASSIGN_OR_RETURN(train::MlperfRun run, train::ReadMlperfRun(path));
    runs.push_back(run);
  }
  std::printf("%-40s %-9s %14s %12s %9s %6s\n", "run", "status", "time to train", "samples",
              "accuracy", "evals");
  for (const train::MlperfRun& r : runs) {
    // The status is the MLLOG file's text: shown safely, never as it is.
    const std::string status = r.status.empty() ? "no stop" : Printable(r.status, 40);
    std::printf("%-40s %-9s %14s %12lld %9.4f %6d\n", r.path.c_str(), status.c_str(),
                r.status.empty() ? "-" : absl::StrFormat("%.2f min", r.minutes).c_str(),
                static_cast<long long>(r.samples), r.last_accuracy, r.evaluations);
  }
  for (const train::MlperfRun& r : runs) {
    if (!r.converged) std::printf("did not converge: %s\n", r.path.c_str());
  }
  const train::MlperfScore score = train::OlympicScore(runs);
  if (score.minutes) {
    std::printf("MLPerf score: %.3f minutes (%zu runs; %s)\n", *score.minutes, runs.size(),
                score.note.c_str());
  } else {
    std::printf("MLPerf score: none (%s)\n", score.note.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

Command MlperfSummaryCommand() {
  Command command;
  command.name = "mlperf-summary";
  command.summary = "time to train and the MLPerf score of finished runs";
  command.usage = "mlperf-summary RUN_DIR|MLLOG [...]";
  command.details =
      "For each run (its folder, or an MLLOG file): run_stop's status, the time from\n"
      "run_start to run_stop, the sequences trained on (run_stop's epoch_num), the last\n"
      "evaluation. Then the score as MLPerf's result summarizer computes it for BERT: the\n"
      "mean of the times after dropping the fastest and the slowest run, where a run that did\n"
      "not converge is the one dropped as slowest, and two such runs leave no valid score\n"
      "(MLPerf BERT asks for 10 runs).";
  command.run = RunMlperfSummary;
  return command;
}

}  // namespace pbert::app
