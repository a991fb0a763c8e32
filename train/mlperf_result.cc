#include "train/mlperf_result.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status.h"
#include "common/structured_text.h"
#include "common/text_lines.h"
#include "nlohmann/json.hpp"

namespace pbert::train {

namespace {

// The MLLOG entry of `line` (line `number` of `path`), checked: a JSON
// object with a key and a time; none where the line has no ":::MLLOG ".
absl::StatusOr<std::optional<nlohmann::json>> MllogEntry(const std::string& line,
                                                         const std::string& path,
                                                         uint64_t number) {
  const std::string marker = ":::MLLOG ";
  const size_t at = line.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const absl::string_view text = absl::string_view(line).substr(at + marker.size());
  RETURN_IF_ERROR(CheckJsonText(text, absl::StrCat(path, ":", number), text.size()));
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("key") || !j["key"].is_string() ||
      !j.contains("time_ms") || !j["time_ms"].is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", number, ": not an MLLOG line (a JSON object with key and time_ms)"));
  }
  return j;
}

}  // namespace

absl::StatusOr<MlperfRun> ReadMlperfRun(const std::string& given) {
  std::string path = given;
  if (std::filesystem::is_directory(path)) path += "/mllog.txt";
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "MLLOG file"));
  MlperfRun run;
  run.path = path;
  std::optional<int64_t> start_ms, stop_ms;
  uint64_t start_line = 0, stop_line = 0;
  std::string line;
  while (lines.Next(&line)) {
    const uint64_t number = lines.line_number();
    ASSIGN_OR_RETURN(const std::optional<nlohmann::json> entry, MllogEntry(line, path, number));
    if (!entry) continue;
    const nlohmann::json& j = *entry;
    const std::string key = j["key"];
    const auto metadata = j.value("metadata", nlohmann::json::object());
    if (key == "run_start") {
      if (start_ms) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", number, ": a second run_start (the first is on line ",
                         start_line, "); an MLLOG file holds one run: split it into one per run"));
      }
      start_ms = IntegerOf<int64_t>(j["time_ms"]);
      start_line = number;
    } else if (key == "run_stop") {
      if (!start_ms) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", number, ": run_stop before any run_start; not the MLLOG of one run"));
      }
      if (stop_ms) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", number, ": a second run_stop (the first is on line ", stop_line,
                         "); an MLLOG file holds one run"));
      }
      stop_ms = IntegerOf<int64_t>(j["time_ms"]);
      stop_line = number;
      if (*stop_ms < *start_ms) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", number, ": run_stop's time_ms ", *stop_ms, " is before run_start's ",
            *start_ms, " (line ", start_line, "); the file's clock or order is damaged"));
      }
      run.status = metadata.value("status", "");
      run.samples = metadata.value("epoch_num", int64_t{0});
    } else if (key == "eval_accuracy" && j.contains("value") && j["value"].is_number()) {
      run.last_accuracy = j["value"].get<double>();
      ++run.evaluations;
    }
  }
  RETURN_IF_ERROR(lines.status());
  if (!start_ms) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no run_start; not the MLLOG of a run"));
  }
  run.converged = stop_ms.has_value() && run.status == "success";
  if (stop_ms) run.minutes = static_cast<double>(*stop_ms - *start_ms) / 60000.0;
  return run;
}

MlperfScore OlympicScore(const std::vector<MlperfRun>& runs, int max_dropped) {
  MlperfScore score;
  std::vector<double> minutes;
  for (const MlperfRun& r : runs) {
    if (r.converged) {
      minutes.push_back(r.minutes);
    } else {
      ++score.not_converged;
    }
  }
  if (score.not_converged > max_dropped) {
    score.note = absl::StrCat(score.not_converged, " runs did not converge; at most ", max_dropped,
                              " may: no valid score");
    return score;
  }
  std::sort(minutes.begin(), minutes.end());
  // The fastest max_dropped go; of the slowest, those not already dropped
  // for not converging.
  const size_t first = static_cast<size_t>(max_dropped);
  const size_t drop_slow = static_cast<size_t>(max_dropped - score.not_converged);
  if (minutes.size() <= first + drop_slow) {
    score.note = absl::StrCat(runs.size(), " runs leave none to average after dropping ",
                              max_dropped, " at each end");
    return score;
  }
  double sum = 0;
  for (size_t i = first; i < minutes.size() - drop_slow; ++i) sum += minutes[i];
  score.minutes = sum / static_cast<double>(minutes.size() - drop_slow - first);
  score.note = absl::StrCat("olympic mean: dropped the fastest ", max_dropped, " and the slowest ",
                            max_dropped,
                            score.not_converged > 0
                                ? absl::StrCat(" (", score.not_converged, " not converged)")
                                : std::string());
  return score;
}

}  // namespace pbert::train
