#include <chrono>
#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "app/config.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/status.h"
#include "data/packing/pack.h"
#include "data/source.h"
#include "distributed/communicator.h"
#include "model/bert.h"
#include "train/checkpointer.h"
#include "nlohmann/json.hpp"
#include "train/device.h"
#include "tasks/pretraining.h"
#include "train/evaluation.h"
#include "train/evaluator.h"

namespace pbert::app {
namespace {

// The sequences of --data (at most `limit`; -1: all), packed as --pack says.
absl::StatusOr<tasks::PackedSet> ScoredSet(const Args& args, const ExperimentConfig& config,
                                           int64_t limit) {
  const std::string path = args.Get("data");
  tasks::PackedSet set;
  set.name = "eval";
  set.key = "--data";
  set.path = path;
  ASSIGN_OR_RETURN(set.sequences,
                   data::OpenSequences(path, static_cast<uint32_t>(config.model.bert.vocab_size()),
                                       limit));
  RETURN_IF_ERROR(model::CheckDataFits(config.model.bert, set.sequences->limits().vocab_size,
                                       set.sequences->limits().max_len, path));
  const int max_len = static_cast<int>(set.sequences->limits().max_len);
  const std::string algorithm = args.Get("pack", "none");
  const int depth = algorithm == "none" ? 1 : config.packing.options.max_depth;
  ASSIGN_OR_RETURN(data::PackedSequences packed,
                   data::PackLengths(algorithm, set.sequences->Lengths(),
                                     {max_len, depth, static_cast<uint64_t>(config.run.seed)}));
  logging::Get("score")->info("{}: {} sequences in {} rows, packing factor {:.4f}", algorithm,
                              packed.run.report.sequences, packed.run.report.rows,
                              packed.run.report.packing_factor);
  set.rows = std::make_shared<data::PackIndex>(std::move(packed.index));
  set.shape = {max_len, depth, 0};
  return set;
}

absl::Status RunScore(const Args& args) {
  // --max-depth is packing.max_depth: pack and score share its range.
  std::set<std::string> given;
  ASSIGN_OR_RETURN(ExperimentConfig config,
                   LoadConfig(args, {{"max-depth", "packing.max_depth"}}, "", &given));
  for (const std::string& idle : ExperimentConfig::EvaluationIdleSettings(given)) {
    logging::Get("score")->warn("{}", idle);
  }
  ASSIGN_OR_RETURN(int64_t limit, args.GetInt("limit", -1, 1, std::numeric_limits<int64_t>::max()));
  ASSIGN_OR_RETURN(int64_t batch_rows, args.GetInt("batch-rows", 32, 1, 1 << 20));
  ASSIGN_OR_RETURN(const c10::Device device, train::ResolveDevice(config.run.device, 0));
  RETURN_IF_ERROR(train::UseDevice(device));
  ASSIGN_OR_RETURN(const model::Precision precision,
                   train::EvaluationPrecision(config.model, device));
  auto start = std::chrono::steady_clock::now();

  // The weights first: a wrong file is found before the data is read.
  model::BertForPreTraining bert(config.model.bert);
  RETURN_IF_ERROR(train::LoadVerifiedWeights(args.Get("weights"), *bert));
  bert->to(device);

  ASSIGN_OR_RETURN(const tasks::PackedSet set, ScoredSet(args, config, limit));
  const std::string algorithm = args.Get("pack", "none");
  const std::unique_ptr<tasks::Task> task = tasks::PretrainingOn({}, config.model.mlm_loss);

  auto communicator = distributed::Communicator::Single();
  data::LoaderOptions options;
  options.rows_per_batch = batch_rows;
  // Once everything is checked: a refused command's error is its only line.
  WarnIfSlowKernels();
  train::Evaluator evaluator(*task, set, options, config.model.bert, precision, device);
  Progress progress("score", set.rows->rows(), "rows");
  ASSIGN_OR_RETURN(tasks::Scored scored,
                   evaluator.Run(*bert, *communicator, [&](uint64_t rows) { progress.Add(rows); }));
  progress.Finish();
  auto metric = [&](const char* name) { return tasks::MetricOf(scored.metrics, name); };
  auto count = [&](const char* name) { return tasks::MetricOf(scored.counts, name); };
  nlohmann::ordered_json out;
  out["sequences"] = static_cast<int64_t>(count("sequences"));
  out["rows"] = set.rows->rows();
  out["packing"] = algorithm;
  out["masked_tokens"] = static_cast<int64_t>(count("masked_tokens"));
  out["mlm_accuracy"] = metric("mlm_accuracy");
  out["mlm_loss_per_token"] = metric("mlm_loss");
  out["mlm_loss"] = config.model.mlm_loss == model::MlmLossMode::kPerToken
                        ? metric("mlm_loss")
                        : count("mlm_loss_per_sequence");
  out["nsp_accuracy"] = metric("nsp_accuracy");
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace

Command ScoreCommand() {
  Command command;
  command.name = "score";
  command.summary = "evaluate weights on MLPerf HDF5 data or a store, packed or not";
  command.usage =
      "score --config FILE --weights W.safetensors --data (D.hdf5 | STORE) [--pack ALGO "
      "--max-depth K] [--limit N] [--batch-rows R]";
  command.details =
      "Runs the model without training and prints one JSON line: sequences, masked_tokens,\n"
      "mlm_accuracy (weighted by tokens, as MLPerf evaluates), mlm_loss_per_token, mlm_loss\n"
      "(in model.mlm_loss mode), nsp_accuracy. Packed and unpacked scores agree. It reads the\n"
      "data through the loader and evaluator that training uses.";
  command.flags = {
      {"weights", "FILE", "model weights (.safetensors, Hugging Face names)", false, true},
      {"data", "PATH", "MLPerf BERT HDF5 file, or an instance store folder", false, true},
      {"pack", "ALGO", "pack the sequences with this algorithm first (default: none)"},
      {"max-depth", "K", "most sequences per row when packing (packing.max_depth)"},
      {"limit", "N", "score only the first N sequences"},
      {"batch-rows", "R", "rows per forward pass (default 32)"},
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunScore;
  return command;
}

}  // namespace pbert::app
