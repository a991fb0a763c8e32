#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "app/commands.h"
#include "app/config.h"
#include "train/regimen.h"
#include "common/atomic_file.h"
#include "common/folders.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/histogram.h"
#include "data/packing/algorithms.h"
#include "data/packing/pack.h"
#include "data/packing/report.h"
#include "data/store.h"
#include "nlohmann/json.hpp"

namespace pbert::app {
namespace {

// Where the pack index of a store goes: --out, data.pack_index or
// RUN_DIR/pack.pbpack.
std::string RowsPath(const Args& args, const ExperimentConfig& config) {
  return args.Get("out", config.data.pack_index.empty() ? config.run.output_dir + "/pack.pbpack"
                                                        : config.data.pack_index);
}

// Writes the store's rows as its pack index and RUN_DIR/pack.json; returns
// what config.yaml records beyond the config.
absl::StatusOr<std::string> WriteRows(const Args& args, const ExperimentConfig& config,
                                      const data::PackedSequences& packed) {
  CreatedFolders created(config.run.output_dir);  // a failed pack leaves none
  RETURN_IF_ERROR(CreateOutputDir(config));
  const std::string out = RowsPath(args, config);
  const data::PackingReport& r = packed.run.report;
  RETURN_IF_ERROR(packed.index.Write(out, r.algorithm, ExistingOutput(args)));
  // The paper's optimizer adjustment for this packing factor; training
  // applies it to the optim section, which keeps the unpacked values.
  ASSIGN_OR_RETURN(optim::OptimConfig adjusted, config.optim.AdjustedFor(r.packing_factor));
  const std::string effective = config.optim.DescribeAdjustment(adjusted, r.packing_factor);
  auto log = logging::Get("pack");
  log->info("{}", effective);
  auto report = nlohmann::ordered_json::parse(data::ReportJson(r));
  const auto [beta1, beta2] = adjusted.lamb.betas();
  report["optimizer"] = {{"packing_adjustment", NameOf(config.optim.packing_adjustment)},
                         {"beta1", beta1},
                         {"beta2", beta2},
                         {"accumulation_steps", adjusted.accumulation_steps}};
  RETURN_IF_ERROR(
      WriteFileAtomically(config.run.output_dir + "/pack.json", report.dump(2) + "\n"));
  created.Keep();
  log->info("pack index of {} rows written to {}", packed.index.rows(), out);
  return effective;
}

// What pack reads: an instance store, or a bare length histogram.
struct PackInput {
  std::string name;  // the file or folder
  std::optional<data::InstanceStore> store;
  data::LengthHistogram histogram;
};

absl::StatusOr<PackInput> ReadPackInput(const Args& args, const ExperimentConfig& config) {
  const bool from_store = !config.data.store.empty();
  if (from_store == !config.data.histogram.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        from_store ? "two things to pack" : "nothing to pack",
        ": give --store DIR (data.store) or --histogram FILE (data.histogram)",
        from_store ? ", not both" : ""));
  }
  const int max_len = static_cast<int>(config.data.max_seq_len);
  PackInput input;
  if (!from_store) {
    input.name = config.data.histogram;
    ASSIGN_OR_RETURN(input.histogram, data::ReadHistogramFile(input.name, max_len));
    return input;
  }
  input.name = config.data.store;
  // Fail before the work, not after it. The run folder is made if missing,
  // and the pack index in it then too.
  RETURN_IF_ERROR(CheckOutputDir(config));
  const std::string rows_path = RowsPath(args, config);
  const std::filesystem::path rows_folder = std::filesystem::path(rows_path).parent_path();
  std::error_code error;
  if (rows_folder != std::filesystem::path(WithoutTrailingSlash(config.run.output_dir)) ||
      std::filesystem::exists(rows_folder, error)) {
    RETURN_IF_ERROR(CheckOutput(args, rows_path, OutputKind::kPackIndex));
  }
  ASSIGN_OR_RETURN(input.store, data::InstanceStore::Open(input.name));
  if (input.store->info().max_len > config.data.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        input.name, " holds sequences of up to ", input.store->info().max_len,
        " tokens, longer than rows of data.max_seq_len ", max_len, " (--max-len): raise it"));
  }
  ASSIGN_OR_RETURN(input.histogram, data::HistogramOf(input.store->Lengths(), max_len));
  return input;
}

absl::Status RunPack(const Args& args) {
  std::set<std::string> given;
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args,
                                                       {{"histogram", "data.histogram"},
                                                        {"store", "data.store"},
                                                        {"max-len", "data.max_seq_len"},
                                                        {"algorithm", "packing.algorithm"},
                                                        {"max-depth", "packing.max_depth"}},
                                                       "", &given));
  RETURN_IF_ERROR(train::TakeStoreLimits(given, &config));
  const std::string format = args.Get("format", "text");
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format must be text or json, got '", format, "'"));
  }
  ASSIGN_OR_RETURN(PackInput input, ReadPackInput(args, config));
  const data::PackingOptions options = config.PackingOptions();
  auto log = logging::Get("pack");
  log->info("{}: {} sequences, {} tokens, max length {}, max depth {}", input.name,
            input.histogram.sequences(), input.histogram.tokens(), options.max_len,
            options.max_depth);
  std::vector<std::string> algorithms = {config.packing.algorithm};
  if (args.Has("compare")) algorithms = data::PackingAlgorithmNames();
  std::vector<data::PackingReport> reports;
  std::optional<data::PackedSequences> rows;  // the store's, by the configured algorithm
  for (const std::string& name : algorithms) {
    data::PackingRun run;
    if (input.store && name == config.packing.algorithm) {
      ASSIGN_OR_RETURN(rows, data::PackLengths(name, input.store->Lengths(), options));
      run = rows->run;
    } else {
      ASSIGN_OR_RETURN(run, data::RunPacking(name, input.histogram, options));
    }
    log->info("{}: {} rows, efficiency {:.4f}%, in {:.3f} s", name, run.report.rows,
              100.0 * run.report.efficiency, run.report.seconds);
    if (format == "json") std::cout << data::ReportJson(run.report) << std::endl;
    reports.push_back(run.report);
    // The configured algorithm's plan is the one plotted; --compare only
    // adds the others to the table.
    if (name == config.packing.algorithm && args.Has("plot")) {
      const std::string title =
          absl::StrCat(input.name, ": ", name, ", max depth ", options.max_depth);
      RETURN_IF_ERROR(WriteFileAtomically(args.Get("plot"),
                                          data::PackingSvg(input.histogram, run.plan, title)));
      log->info("plot written to {}", args.Get("plot"));
    }
  }
  std::string effective;
  if (rows) {
    ASSIGN_OR_RETURN(effective, WriteRows(args, config, *rows));
  }
  if (args.Has("plot") || rows) RETURN_IF_ERROR(WriteEffectiveConfig(config, effective));
  if (format == "text") std::cout << data::ReportTable(reports);
  return absl::OkStatus();
}

}  // namespace

Command PackCommand() {
  Command command;
  command.name = "pack";
  command.summary = "decide which sequences share a row, and report how well";
  command.usage =
      "pack (--store DIR [--out FILE.pbpack] | --histogram FILE --max-len S) [--algorithm A] "
      "[--max-depth D] [--compare] [--format text|json] [--plot FILE.svg]";
  command.details =
      "Packs the sequences of an instance store and writes the pack index the loader reads\n"
      "(default <run.output_dir>/pack.pbpack, with config.yaml and pack.json: the report and\n"
      "the optimizer values the packing adjustment gives), or packs a bare\n"
      "length histogram (line i = count of sequences of length i, '#' comments) for planning.\n"
      "Algorithms: none, greedy, ffd, spfhp, lpfhp, nnlshp, lp.";
  command.flags = {
      {"store", "DIR", "instance store to pack (data.store)"},
      {"out", "FILE",
       "where to write the pack index (with --store; default data.pack_index, else "
       "<run.output_dir>/pack.pbpack)"},
      {"histogram", "FILE", "length histogram to pack instead of a store (data.histogram)"},
      {"max-len", "S", "tokens per row (data.max_seq_len; for a store, default: its max length)"},
      {"algorithm", "A", "packing algorithm (packing.algorithm)"},
      {"max-depth", "D", "most sequences per row (packing.max_depth)"},
      {"compare", "", "run every algorithm and print one table (--algorithm is the one written)"},
      {"format", "FMT", "text (a table) or json (one object per line per algorithm)"},
      {"plot", "FILE", "write an SVG of the histogram and of the row fill"},
      OverwriteFlag(OutputKindName(OutputKind::kPackIndex)),
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunPack;
  return command;
}

}  // namespace pbert::app
