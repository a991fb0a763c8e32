#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "common/atomic_file.h"
#include "common/folders.h"
#include "common/status.h"
#include "common/structured_text.h"
#include "common/svg_chart.h"
#include "common/text_lines.h"
#include "nlohmann/json.hpp"

namespace pbert::app {
namespace {

using json = nlohmann::json;

// The metrics.jsonl lines of one run, by kind ("train", "eval").
struct RunMetrics {
  std::vector<json> train, eval;
};

// The keys the charts read, besides an evaluation's score (ScoreOf).
constexpr const char* kPlotted[] = {"samples", "time", "step", "loss", "tokens_per_s",
                                    "sequences_per_s"};

// The metric an evaluation line is judged by: the one it names ("metric":
// the target's, or the task's own), or pretraining's for the lines of
// earlier releases.
std::string ScoreOf(const json& line) {
  const auto it = line.find("metric");
  return it != line.end() && it->is_string() ? it->get<std::string>() : "mlm_accuracy";
}

absl::StatusOr<RunMetrics> ReadMetrics(const std::string& run_dir) {
  const std::string path = run_dir + "/metrics.jsonl";
  std::error_code error;
  if (std::filesystem::exists(run_dir, error) && !std::filesystem::is_directory(run_dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        run_dir, " is not a run folder; give the run.output_dir of a packed-bert train or "
                 "finetune run"));
  }
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat(
        path, " not found; give the run.output_dir of a packed-bert train or finetune run"));
  }
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "metrics file"));
  RunMetrics m;
  std::string line;
  while (lines.Next(&line)) {
    const uint64_t number = lines.line_number();
    if (line.empty()) continue;
    RETURN_IF_ERROR(CheckJsonText(line, absl::StrCat(path, ":", number), line.size()));
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("kind")) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": not a metrics line (one JSON object per line)"));
    }
    // The values plotted must be numbers a chart can hold.
    std::vector<std::string> plotted(std::begin(kPlotted), std::end(kPlotted));
    if (j["kind"] == "eval") plotted.push_back(ScoreOf(j));
    for (const std::string& key : plotted) {
      if (!j.contains(key)) continue;
      const json& v = j[key];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || std::fabs(v.get<double>()) > 1e15) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", number, ": ", key, " is ", v.dump(),
                         ", not a finite number of the size train writes; the file is damaged"));
      }
    }
    (j["kind"] == "eval" ? m.eval : m.train).push_back(std::move(j));
  }
  RETURN_IF_ERROR(lines.status());
  if (m.train.empty() && m.eval.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " holds no metrics yet: train writes a line every train.log_every_steps steps and "
        "after each evaluation; plot the run once it has some"));
  }
  return m;
}

// One series per label: the runs sharing a label are averaged point by
// point (the k-th line of each), with their min and max as a band. `y_key`
// "": each line's score (ScoreOf).
ChartSeries Series(const std::string& name, const std::vector<const std::vector<json>*>& runs,
                   const char* x_key, const std::string& y_key, double x_scale = 1.0) {
  ChartSeries s;
  s.name = runs.size() > 1 ? absl::StrCat(name, " (", runs.size(), " runs)") : name;
  size_t n = SIZE_MAX;
  for (const auto* r : runs) n = std::min(n, r->size());
  for (size_t k = 0; k < n; ++k) {
    double x = 0, y = 0, lo = 1e300, hi = -1e300;
    bool ok = true;
    for (const auto* r : runs) {
      const json& line = (*r)[k];
      const std::string key = y_key.empty() ? ScoreOf(line) : y_key;
      if (!line.contains(x_key) || !line.contains(key) || !line[key].is_number()) {
        ok = false;
        break;
      }
      double v = line[key].get<double>();
      x += line[x_key].get<double>() * x_scale;
      y += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (!ok) continue;
    s.points.push_back({x / runs.size(), y / runs.size()});
    if (runs.size() > 1) {
      s.low.push_back(lo);
      s.high.push_back(hi);
    }
  }
  return s;
}

// The runs' metrics by label (--label, or each folder's name), labels in
// the order given.
struct RunGroups {
  std::vector<std::string> order;
  std::map<std::string, std::vector<RunMetrics>> groups;
};
absl::StatusOr<RunGroups> GroupRuns(const std::vector<std::string>& dirs,
                                    const std::vector<std::string>& labels) {
  if (!labels.empty() && labels.size() != dirs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("give one --label per RUN_DIR (", dirs.size(),
                                                   " runs, ", labels.size(), " labels) or none"));
  }
  RunGroups out;
  for (size_t i = 0; i < dirs.size(); ++i) {
    std::string label =
        labels.empty() ? std::filesystem::path(dirs[i]).lexically_normal().filename().string()
                       : labels[i];
    if (label.empty()) label = dirs[i];
    ASSIGN_OR_RETURN(RunMetrics m, ReadMetrics(dirs[i]));
    if (out.groups.count(label) == 0) out.order.push_back(label);
    out.groups[label].push_back(std::move(m));
  }
  return out;
}

absl::Status RunPlot(const Args& args) {
  const auto& dirs = args.positional();
  if (dirs.empty()) {
    return absl::InvalidArgumentError("plot needs at least one RUN_DIR; see 'packed-bert plot --help'");
  }
  ASSIGN_OR_RETURN(RunGroups runs, GroupRuns(dirs, args.GetAll("label")));
  const std::vector<std::string>& order = runs.order;
  std::map<std::string, std::vector<RunMetrics>>& groups = runs.groups;
  auto charts_of = [&](bool eval, const char* x_key, const std::string& y_key, double x_scale,
                       const std::string& title, const std::string& x_label,
                       const std::string& y_label) {
    Chart c{title, x_label, y_label, {}};
    for (const std::string& label : order) {
      std::vector<const std::vector<json>*> runs;
      for (const RunMetrics& m : groups[label]) runs.push_back(eval ? &m.eval : &m.train);
      c.series.push_back(Series(label, runs, x_key, y_key, x_scale));
    }
    return c;
  };
  // The runs' score: the first evaluation's (pretraining: MLM accuracy;
  // SQuAD: exact match; a GLUE task: its own metric).
  std::string score = "mlm_accuracy";
  for (const std::string& label : order) {
    for (const RunMetrics& m : groups[label]) {
      if (!m.eval.empty()) score = ScoreOf(m.eval.front());
    }
  }
  const std::string score_name = score == "mlm_accuracy" ? "MLM accuracy" : score;
  std::vector<Chart> curves = {
      charts_of(true, "samples", "", 1.0, "eval " + score_name, "sequences seen", score_name),
      charts_of(true, "time", "", 1.0, "eval " + score_name, "training time (s)", score_name),
      charts_of(false, "samples", "loss", 1.0, "training loss", "sequences seen", "loss"),
      charts_of(false, "time", "loss", 1.0, "training loss", "training time (s)", "loss"),
  };
  std::vector<Chart> throughput = {
      charts_of(false, "step", "tokens_per_s", 1.0, "real tokens per second", "step", "tokens/s"),
      charts_of(false, "step", "sequences_per_s", 1.0, "sequences per second", "step",
                "sequences/s"),
  };
  const std::string out = args.Get("out", dirs[0]);
  RETURN_IF_ERROR(CreateFolder(out, "--out"));
  const std::string curves_path = out + "/learning_curves.svg";
  const std::string throughput_path = out + "/throughput.svg";
  RETURN_IF_ERROR(WriteFileAtomically(curves_path, ChartsSvg("learning curves", curves, 2)));
  RETURN_IF_ERROR(WriteFileAtomically(throughput_path, ChartsSvg("throughput", throughput, 2)));
  std::cout << curves_path << "\n" << throughput_path << "\n";
  return absl::OkStatus();
}

}  // namespace

Command PlotCommand() {
  Command command;
  command.name = "plot";
  command.summary = "draw learning curves and throughput of training runs as SVG";
  command.usage = "plot RUN_DIR [RUN_DIR ...] [--label L ...] [--out DIR]";
  command.details =
      "Reads each run's metrics.jsonl (of train or finetune) and writes learning_curves.svg\n"
      "(the evaluations' score: MLM accuracy, or the fine-tuning task's own metric; and the\n"
      "training loss, against sequences seen and against time) and throughput.svg (real tokens\n"
      "and sequences per second). Runs given the same --label are drawn as their mean with\n"
      "their min-max spread shaded (e.g. seeds).";
  command.flags = {
      {"label", "L", "the name of the next RUN_DIR in the legend; may be repeated", true},
      {"out", "DIR", "where to write the SVGs (default: the first RUN_DIR)"},
  };
  command.run = RunPlot;
  return command;
}

}  // namespace pbert::app
