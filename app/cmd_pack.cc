#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "app/commands.h"
#include "app/config.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/histogram.h"
#include "data/packing/algorithms.h"
#include "data/packing/pack_index.h"
#include "data/packing/report.h"
#include "data/store.h"
#include "nlohmann/json.hpp"
#include "optim/packing_adjustment.h"

namespace pbert::app {
namespace {

absl::Status RunPack(const Args& args) {
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, {{"histogram", "data.histogram"},
                                                              {"store", "data.store"},
                                                              {"max-len", "data.max_seq_len"},
                                                              {"algorithm", "packing.algorithm"},
                                                              {"max-depth", "packing.max_depth"}}));
  const std::string format = args.Get("format", "text");
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format must be text or json, got '", format, "'"));
  }
  const bool from_store = !config.data.store.empty() && config.data.histogram.empty();
  if (!from_store && config.data.histogram.empty()) {
    return absl::InvalidArgumentError(
        "nothing to pack: give --store DIR (data.store) or --histogram FILE (data.histogram)");
  }
  std::optional<data::InstanceStore> store;
  data::LengthHistogram histogram;
  std::string source;
  if (from_store) {
    ASSIGN_OR_RETURN(store, data::InstanceStore::Open(config.data.store));
    histogram = store->Histogram();
    source = config.data.store;
  } else {
    ASSIGN_OR_RETURN(histogram, data::ReadHistogramFile(config.data.histogram,
                                                        static_cast<int>(config.data.max_seq_len)));
    source = config.data.histogram;
  }
  data::PackingOptions options;
  options.max_len = histogram.max_len();
  options.max_depth = static_cast<int>(config.packing.max_depth);
  options.seed = static_cast<uint64_t>(config.run.seed);

  std::vector<std::string> algorithms;
  if (args.Has("compare")) {
    for (const auto& a : data::PackingAlgorithms()) algorithms.push_back(a.name);
  } else {
    algorithms.push_back(config.packing.algorithm);
  }
  auto log = logging::Get("pack");
  log->info("{}: {} sequences, {} tokens, max length {}, max depth {}", source,
            histogram.sequences(), histogram.tokens(), options.max_len, options.max_depth);
  std::vector<data::PackingReport> reports;
  for (const std::string& name : algorithms) {
    ASSIGN_OR_RETURN(data::PackingRun run, data::RunPacking(name, histogram, options));
    log->info("{}: {} packs, efficiency {:.4f}%, in {:.3f} s", name, run.report.packs,
              100.0 * run.report.efficiency, run.report.seconds);
    if (format == "json") std::cout << data::ReportJson(run.report) << std::endl;
    reports.push_back(run.report);
    // The configured algorithm's plan is the one plotted and written out;
    // --compare only adds the others to the table.
    if (name != config.packing.algorithm) continue;
    std::string effective;  // what the run's config.yaml records beyond the config
    if (args.Has("plot")) {
      std::string title = absl::StrCat(source, ": ", name, ", max depth ", options.max_depth);
      RETURN_IF_ERROR(
          WriteFileAtomically(args.Get("plot"), data::PackingSvg(histogram, run.plan, title)));
      log->info("plot written to {}", args.Get("plot"));
    }
    if (store) {
      // A failed pack leaves no empty run folder behind it: the folders it
      // creates are removed again, deepest first, if they are still empty.
      struct RemoveCreatedIfEmpty {
        std::vector<std::filesystem::path> created;  // deepest first
        bool done = false;
        ~RemoveCreatedIfEmpty() {
          std::error_code ignored;
          for (const auto& dir : created) {
            if (!done) std::filesystem::remove(dir, ignored);  // only if empty
          }
        }
      } created;
      for (std::filesystem::path dir = config.run.output_dir;
           !dir.empty() && !std::filesystem::exists(dir); dir = dir.parent_path()) {
        created.created.push_back(dir);
      }
      RETURN_IF_ERROR(CreateOutputDir(config));
      std::string out = args.Get("out", config.data.pack_index.empty()
                                            ? config.run.output_dir + "/pack.pbpack"
                                            : config.data.pack_index);
      RETURN_IF_ERROR(RefuseToOverwrite(args, out));
      // Its rows become the pack index the loader reads.
      ASSIGN_OR_RETURN(data::PackIndex index,
                       data::AssignSequences(run.plan, store->Lengths(), options.seed));
      RETURN_IF_ERROR(index.Write(out, name));
      // The paper's optimizer adjustment for this packing factor; training
      // applies it to the optim section, which keeps the unpacked values.
      const OptimConfig& o = config.optim;
      ASSIGN_OR_RETURN(optim::OptimizerHyperparameters adjusted,
                       optim::AdjustForPacking(o.packing_adjustment, run.report.packing_factor,
                                               {o.beta1, o.beta2, o.accumulation_steps}));
      log->info(
          "optimizer for packing factor {:.4f} ({}): beta1 {} -> {:.6f}, beta2 {} -> {:.6f}, "
          "accumulation {} -> {}",
          run.report.packing_factor, o.packing_adjustment, o.beta1, adjusted.beta1, o.beta2,
          adjusted.beta2, o.accumulation_steps, adjusted.accumulation_steps);
      auto report = nlohmann::ordered_json::parse(data::ReportJson(run.report));
      report["optimizer"] = {{"packing_adjustment", o.packing_adjustment},
                             {"beta1", adjusted.beta1},
                             {"beta2", adjusted.beta2},
                             {"accumulation_steps", adjusted.accumulation_steps}};
      RETURN_IF_ERROR(
          WriteFileAtomically(config.run.output_dir + "/pack.json", report.dump(2) + "\n"));
      created.done = true;
      log->info("pack index of {} rows written to {}", index.rows(), out);
      effective = absl::StrFormat(
          "optimizer after the packing adjustment (%s, packing factor %.6f): beta1 %.9g, "
          "beta2 %.9g, accumulation_steps %d",
          o.packing_adjustment, run.report.packing_factor, adjusted.beta1, adjusted.beta2,
          adjusted.accumulation_steps);
    }
    if (args.Has("plot") || store) RETURN_IF_ERROR(WriteEffectiveConfig(config, effective));
  }
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
      {"max-len", "S", "tokens per row (data.max_seq_len)"},
      {"algorithm", "A", "packing algorithm (packing.algorithm)"},
      {"max-depth", "D", "most sequences per row (packing.max_depth)"},
      {"compare", "", "run every algorithm and print one table (--algorithm is the one written)"},
      {"format", "FMT", "text (a table) or json (one object per line per algorithm)"},
      {"plot", "FILE", "write an SVG of the histogram and of the row fill"},
      OverwriteFlag(),
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunPack;
  return command;
}

}  // namespace pbert::app
