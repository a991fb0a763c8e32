#include <iostream>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/runtime.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/status.h"
#include "data/prepare.h"

namespace pbert::app {
namespace {

// The length histogram in `buckets` equal ranges, as text bars.
std::string HistogramBars(const data::LengthHistogram& h, int buckets) {
  const int S = h.max_len();
  std::vector<uint64_t> counts(buckets, 0);
  for (int l = 1; l <= S; ++l) counts[(l - 1) * buckets / S] += h.counts[l];
  uint64_t peak = *std::max_element(counts.begin(), counts.end());
  std::string out;
  for (int b = 0; b < buckets; ++b) {
    int from = b * S / buckets + 1, to = (b + 1) * S / buckets;
    int width = peak == 0 ? 0 : static_cast<int>(40.0 * counts[b] / peak + 0.5);
    absl::StrAppendFormat(&out, "  %4d-%-4d %9d %s\n", from, to, counts[b],
                          std::string(width, '#'));
  }
  return out;
}

// What prepare prints: the corpus, the instances and their lengths.
std::string Report(const data::PrepareSummary& s, const std::string& store) {
  const data::LengthHistogram& h = s.histogram;
  const double instances = static_cast<double>(std::max<uint64_t>(1, s.instances));
  std::string report;
  if (s.corpus.documents > 0) {
    absl::StrAppendFormat(&report, "documents   %d\nsentences   %d\ntext bytes  %d\n",
                          s.corpus.documents, s.corpus.sentences, s.corpus.bytes);
  }
  absl::StrAppendFormat(
      &report,
      "instances   %d\ntokens      %d (%.1f per instance)\nmasked      %.2f per instance\n"
      "random next %.1f%%\nfull length %.1f%% of instances (max length %d)\n"
      "theoretical packing speed-up %.4f (instances x max length / tokens)\n"
      "length histogram:\n%s"
      "store       %s\n",
      s.instances, s.tokens, s.tokens / instances, s.masked_tokens / instances,
      100.0 * s.random_next / instances, 100.0 * h.counts[h.max_len()] / instances, h.max_len(),
      h.TheoreticalSpeedup(), HistogramBars(h, 16), store);
  if (s.long_sentences > 0) {
    absl::StrAppendFormat(&report,
                          "cut off     %d tokens of %d sentences longer than a sequence holds "
                          "(the longest: %d tokens)\n",
                          s.long_sentence_tokens_cut, s.long_sentences, s.longest_sentence);
  }
  if (s.kept_rows > 0) {
    absl::StrAppendFormat(&report,
                          "packed rows %d kept (packing factor %.4f) in %s/%s: set "
                          "data.pack_index to it to train on them, or leave it empty to re-pack\n",
                          s.kept_rows, static_cast<double>(s.instances) / s.kept_rows, store,
                          data::kKeptPackIndex);
  }
  return report;
}

// One progress bar per stage, each finished when the next starts, drawn
// from the stage's first work on. A stage's first report is the work done
// before this run (data::Prepare).
class StageProgress {
 public:
  void operator()(const std::string& stage, uint64_t done, uint64_t total) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!before_.count(stage)) {
      before_[stage] = done;
      return;
    }
    auto& bar = bars_[stage];
    if (bar == nullptr) {
      Finish();
      const char* unit = stage == "read"                            ? "files"
                         : stage == "tokenize" || stage == "import" ? "B"
                                                                    : "instances";
      bar = std::make_unique<Progress>(stage, total, unit, before_[stage]);
    }
    bar->Add(done);
  }
  void Finish() {
    for (auto& [name, bar] : bars_) {
      if (bar) bar->Finish();
    }
  }

 private:
  std::mutex mu_;
  std::map<std::string, uint64_t> before_;
  std::map<std::string, std::unique_ptr<Progress>> bars_;
};

absl::Status RunPrepare(const Args& args) {
  ASSIGN_OR_RETURN(ExperimentConfig config,
                   LoadConfig(args, {{"vocab", "prepare.vocab"},
                                     {"out", "data.store"},
                                     {"input-format", "prepare.input_format"},
                                     {"pick", "prepare.pick"},
                                     {"max-len", "data.max_seq_len"}}));
  data::PrepareOptions o = config.prepare;
  for (const std::string& input : args.positional()) o.inputs.push_back(input);
  o.instances.max_seq_len = static_cast<int>(config.data.max_seq_len);
  o.instances.seed = static_cast<uint64_t>(config.run.seed);
  o.threads = config.run.threads > 0 ? static_cast<int>(config.run.threads) : AvailableCpus();
  o.output = config.data.store;
  o.overwrite = args.Has("overwrite");
  if (o.vocab.empty()) {
    return absl::InvalidArgumentError("prepare needs a vocabulary: --vocab V.txt (prepare.vocab)");
  }
  // Its effective config goes to the run folder, after the work.
  RETURN_IF_ERROR(CheckOutputDir(config));
  StageProgress progress;
  ASSIGN_OR_RETURN(data::PrepareSummary summary,
                   data::Prepare(o, [&](const std::string& stage, uint64_t done, uint64_t total) {
                     progress(stage, done, total);
                   }));
  progress.Finish();
  // The store is whole by now: a config that cannot be written (a full
  // disk) loses nothing of it, and says so.
  if (absl::Status written = WriteEffectiveConfig(config); !written.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat(written.message(), "; the store ", o.output,
                                     " is whole and usable: only its effective config, ",
                                     config.run.output_dir, "/config.yaml, was not written"));
  }
  std::cout << Report(summary, o.output);
  return absl::OkStatus();
}

}  // namespace

Command PrepareCommand() {
  Command command;
  command.name = "prepare";
  command.summary = "turn raw text or MLPerf/NVIDIA HDF5 into an instance store";
  command.usage = "prepare --vocab V.txt --out STORE [--input-format F] [FILE ...]";
  command.details =
      "Reads WikiExtractor output, plain text (one sentence per line, blank lines between\n"
      "documents) or HDF5 (MLPerf fixed-width, NVIDIA variable-length or NVIDIA packed, told\n"
      "apart by their datasets), makes BERT pretraining instances as create_pretraining_data.py\n"
      "does (prepare.* keys), and writes them to a new instance store folder. NVIDIA's packed\n"
      "rows are kept as the store's packs.pbpack. HDF5 is imported on all CPUs (run.threads)\n"
      "into STORE.partial, with a journal of the shards done: an interrupted import continues\n"
      "where it stopped when the same command runs again. --pick 10000 makes the MLPerf eval\n"
      "set from MLPerf's eval HDF5 as pick_eval_samples.py does: sequence\n"
      "floor(i * total / 10000) for i = 0..9999, over the inputs in the order given.";
  command.flags = {
      {"vocab", "FILE", "BERT vocab.txt (prepare.vocab)"},
      {"out", "DIR", "the store folder to create (data.store); must not exist"},
      OverwriteFlag(OutputKindName(OutputKind::kStore)),
      {"input-format", "F",
       absl::StrCat(JoinChoices(ChoiceNames<data::InputFormat>()), " (prepare.input_format)")},
      {"max-len", "S", "tokens per instance (data.max_seq_len)"},
      {"pick", "N", "keep N sequences evenly spaced, as MLPerf picks its eval set (prepare.pick)"},
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunPrepare;
  return command;
}

}  // namespace pbert::app
