#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/model_factory.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/status.h"
#include "data/batch.h"
#include "data/hdf5.h"
#include "data/packing/pack_index.h"
#include "data/packing/report.h"
#include "data/store.h"
#include "model/checkpoint.h"
#include "model/losses.h"
#include "model/precision.h"
#include "nlohmann/json.hpp"

namespace pbert::app {
namespace {

using Rows = std::vector<std::vector<const data::Instance*>>;

// One row per instance, or the rows of a packing of them.
absl::StatusOr<Rows> LayOut(const std::vector<data::Instance>& instances, int max_len,
                            const std::string& algorithm, int max_depth, uint64_t seed) {
  Rows rows;
  if (algorithm.empty()) {
    for (const auto& in : instances) rows.push_back({&in});
    return rows;
  }
  std::vector<uint16_t> lengths;
  for (const auto& in : instances) lengths.push_back(static_cast<uint16_t>(in.length()));
  ASSIGN_OR_RETURN(auto histogram, data::HistogramOf(lengths, max_len));
  ASSIGN_OR_RETURN(data::PackingRun run,
                   data::RunPacking(algorithm, histogram, {max_len, max_depth, seed}));
  logging::Get("score")->info("{}: {} sequences in {} rows, packing factor {:.4f}", algorithm,
                              run.report.sequences, run.report.packs, run.report.packing_factor);
  ASSIGN_OR_RETURN(data::PackIndex index, data::AssignSequences(run.plan, lengths, seed));
  for (uint64_t r = 0; r < index.rows(); ++r) {
    std::vector<const data::Instance*> row;
    for (uint32_t id : index.Row(r)) row.push_back(&instances[id]);
    rows.push_back(std::move(row));
  }
  return rows;
}

struct Sequences {
  std::vector<data::Instance> instances;
  int max_len = 0;
};

// The first `limit` (all if < 0) instances of an instance store folder or an
// MLPerf HDF5 file.
absl::StatusOr<Sequences> ReadSequences(const std::string& path, int64_t limit) {
  Sequences out;
  if (std::filesystem::is_directory(path)) {
    ASSIGN_OR_RETURN(data::InstanceStore store, data::InstanceStore::Open(path));
    const uint64_t n = limit < 0 ? store.size() : std::min<uint64_t>(limit, store.size());
    out.max_len = static_cast<int>(store.info().max_len);
    Progress progress("read", n, "seq");
    for (uint64_t i = 0; i < n; ++i) out.instances.push_back(store.Get(i));
    progress.Add(n);
    return out;
  }
  ASSIGN_OR_RETURN(auto reader, data::Hdf5Reader::Open(path));
  const int64_t n = limit < 0 ? reader->size() : std::min<int64_t>(limit, reader->size());
  out.max_len = reader->max_len();
  out.instances.reserve(n);
  Progress progress("read", n, "seq");
  constexpr int64_t kChunk = 4096;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    ASSIGN_OR_RETURN(auto chunk, reader->Read(begin, std::min(kChunk, n - begin)));
    for (auto& in : chunk) out.instances.push_back(std::move(in));
    progress.Add(std::min(kChunk, n - begin));
  }
  return out;
}

absl::Status RunScore(const Args& args) {
  for (const char* required : {"weights", "data"}) {
    if (!args.Has(required)) {
      return absl::InvalidArgumentError(absl::StrCat("score needs --", required));
    }
  }
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args));
  ASSIGN_OR_RETURN(int64_t limit, args.GetInt("limit", -1));
  ASSIGN_OR_RETURN(int64_t batch_rows, args.GetInt("batch-rows", 32));
  ASSIGN_OR_RETURN(int64_t max_depth, args.GetInt("max-depth", config.packing.max_depth));
  if (batch_rows < 1 || max_depth < 1) {
    return absl::InvalidArgumentError("--batch-rows and --max-depth must be >= 1");
  }
  ASSIGN_OR_RETURN(model::MlmLossMode mode, model::ParseMlmLossMode(config.model.mlm_loss));
  ASSIGN_OR_RETURN(model::Precision precision,
                   model::ParsePrecision(config.model.precision, c10::DeviceType::CPU));
  auto start = std::chrono::steady_clock::now();

  ASSIGN_OR_RETURN(Sequences data, ReadSequences(args.Get("data"), limit));
  const std::vector<data::Instance>& instances = data.instances;
  const int max_len = data.max_len;
  if (max_len > config.model.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Get("data"), " holds sequences of up to ", max_len,
        " tokens; model.max_position_embeddings is ", config.model.max_position_embeddings));
  }
  const std::string algorithm = args.Get("pack");
  const int depth = algorithm.empty() ? 1 : static_cast<int>(max_depth);
  ASSIGN_OR_RETURN(Rows rows, LayOut(instances, max_len, algorithm, depth,
                                     static_cast<uint64_t>(config.run.seed)));

  model::BertForPreTraining bert(ToBertOptions(config.model));
  RETURN_IF_ERROR(model::LoadSafetensors(*bert, args.Get("weights")));
  bert->eval();
  torch::NoGradGuard no_grad;
  double mlm_loss = 0, mlm_tokens = 0, mlm_correct = 0, nsp_correct = 0, nsp_sequences = 0;
  double mlm_sequence_loss = 0, mlm_sequences = 0;
  Progress progress("score", rows.size(), "rows");
  for (size_t begin = 0; begin < rows.size(); begin += batch_rows) {
    Rows chunk(rows.begin() + begin,
               rows.begin() + std::min(rows.size(), begin + static_cast<size_t>(batch_rows)));
    ASSIGN_OR_RETURN(data::PackedBatch batch, data::MakeBatch(chunk, {max_len, depth, 0}));
    model::PretrainingLogits logits;
    {
      model::AutocastGuard autocast(precision, c10::DeviceType::CPU);
      logits = bert(batch);
    }
    auto sums = model::ComputeSums(logits, batch);
    mlm_loss += sums.mlm_loss.item<double>();
    mlm_sequence_loss += sums.mlm_sequence_loss.item<double>();
    mlm_tokens += sums.mlm_tokens.item<double>();
    mlm_sequences += sums.mlm_sequences.item<double>();
    mlm_correct += sums.mlm_correct.item<double>();
    nsp_correct += sums.nsp_correct.item<double>();
    nsp_sequences += sums.nsp_sequences.item<double>();
    progress.Add(chunk.size());
  }
  progress.Finish();
  nlohmann::ordered_json out;
  out["sequences"] = static_cast<int64_t>(nsp_sequences);
  out["rows"] = rows.size();
  out["packing"] = algorithm.empty() ? "none" : algorithm;
  out["masked_tokens"] = static_cast<int64_t>(mlm_tokens);
  out["mlm_accuracy"] = mlm_tokens > 0 ? mlm_correct / mlm_tokens : 0.0;
  out["mlm_loss_per_token"] = mlm_tokens > 0 ? mlm_loss / mlm_tokens : 0.0;
  out["mlm_loss"] = mode == model::MlmLossMode::kPerToken
                        ? out["mlm_loss_per_token"].get<double>()
                        : (mlm_sequences > 0 ? mlm_sequence_loss / mlm_sequences : 0.0);
  out["nsp_accuracy"] = nsp_sequences > 0 ? nsp_correct / nsp_sequences : 0.0;
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
      "--max-depth K] "
      "[--limit N] [--batch-rows R]";
  command.details =
      "Runs the model without training and prints one JSON line: sequences, masked_tokens,\n"
      "mlm_accuracy (weighted by tokens, as MLPerf evaluates), mlm_loss_per_token, mlm_loss\n"
      "(in model.mlm_loss mode), nsp_accuracy. Packed and unpacked scores agree.";
  command.flags = {
      {"weights", "FILE", "model weights (.safetensors, Hugging Face names)"},
      {"data", "PATH", "MLPerf BERT HDF5 file, or an instance store folder"},
      {"pack", "ALGO", "pack the sequences with this algorithm first (default: one per row)"},
      {"max-depth", "K", "most sequences per row when packing (packing.max_depth)"},
      {"limit", "N", "score only the first N sequences"},
      {"batch-rows", "R", "rows per forward pass (default 32)"},
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunScore;
  return command;
}

}  // namespace pbert::app
