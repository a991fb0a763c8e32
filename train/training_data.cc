#include "train/training_data.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/packing/pack.h"
#include "data/store.h"

namespace pbert::train {
namespace {

// `source`'s sequences fit the model and the rows of data.max_seq_len.
absl::Status CheckFits(const data::SequenceSource& source, const ExperimentConfig& config,
                       const std::string& what) {
  RETURN_IF_ERROR(model::CheckDataFits(config.model.bert, source.limits().vocab_size,
                                       source.limits().max_len, what));
  if (source.limits().max_len > config.data.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds sequences of up to ",
                                                   source.limits().max_len,
                                                   " tokens; data.max_seq_len is ",
                                                   config.data.max_seq_len, ": raise it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const data::SequenceSource>> OpenStore(
    const ExperimentConfig& config, data::ShardShare share) {
  const std::string& dir = config.data.store;
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "train needs data.store: an instance store made by packed-bert prepare");
  }
  if (!std::filesystem::is_directory(dir)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.store '", dir, "' is not an instance store folder; make one with packed-bert "
        "prepare (MLPerf HDF5 files too: --input-format hdf5)"));
  }
  ASSIGN_OR_RETURN(data::InstanceStore store,
                   data::InstanceStore::Open(dir, data::StoreChecks::kChecksums, share));
  auto source = std::make_shared<const data::InstanceStore>(std::move(store));
  RETURN_IF_ERROR(CheckFits(*source, config, dir));
  return source;
}

// data.pack_index, or the store packed with the packing section.
absl::StatusOr<std::shared_ptr<const data::PackIndex>> TrainRows(
    const ExperimentConfig& config, const data::SequenceSource& store, std::string* packed_with) {
  auto log = logging::Get("train");
  if (!config.data.pack_index.empty()) {
    ASSIGN_OR_RETURN(data::PackIndex index, data::PackIndex::Read(config.data.pack_index));
    log->info("{}: {} sequences in {} rows", config.data.pack_index, index.sequences(),
              index.rows());
    return std::make_shared<const data::PackIndex>(std::move(index));
  }
  ASSIGN_OR_RETURN(data::PackedSequences packed,
                   data::PackLengths(config.packing.algorithm, store.Lengths(),
                                     config.PackingOptions()));
  const data::PackingReport& r = packed.run.report;
  log->info("packed {} with {}: {} sequences in {} rows, packing factor {:.4f}, efficiency {:.2f}%",
            store.name(), r.algorithm, r.sequences, r.rows, r.packing_factor, 100 * r.efficiency);
  *packed_with = r.algorithm;
  return std::make_shared<const data::PackIndex>(std::move(packed.index));
}

}  // namespace

absl::Status TrainingData::WritePackedRows(const std::string& run_dir) const {
  if (packed_with.empty()) return absl::OkStatus();
  return rows->Write(run_dir + "/pack.pbpack", packed_with);
}

absl::StatusOr<TrainingData> TrainingData::Open(const ExperimentConfig& config,
                                                data::ShardShare share) {
  TrainingData data;
  ASSIGN_OR_RETURN(data.train, OpenStore(config, share));
  ASSIGN_OR_RETURN(data.rows, TrainRows(config, *data.train, &data.packed_with));
  if (config.data.eval.empty()) {
    logging::Get("train")->warn(
        "no data.eval: the run trains without evaluating and cannot reach its target");
    return data;
  }
  ASSIGN_OR_RETURN(data.eval, data::OpenSequences(config.data.eval, static_cast<uint32_t>(
                                                                        config.model.bert.vocab_size())));
  if (data.eval->size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.eval ", config.data.eval,
                     " holds no sequences; give an eval set, or leave "
                     "data.eval empty to train without evaluating"));
  }
  RETURN_IF_ERROR(CheckFits(*data.eval, config, config.data.eval));
  const uint64_t train_vocab = data.train->vocab_checksum(), eval_vocab = data.eval->vocab_checksum();
  if (train_vocab != 0 && eval_vocab != 0 && train_vocab != eval_vocab) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data.eval %s was made with another vocabulary than data.store %s (vocab_checksum %016x "
        "against %016x in their store.json): prepare both with the same vocab.txt",
        config.data.eval, config.data.store, eval_vocab, train_vocab));
  }
  ASSIGN_OR_RETURN(data::PackedSequences packed,
                   data::PackLengths(config.train.eval_packed ? config.packing.algorithm : "none",
                                     data.eval->Lengths(), config.PackingOptions()));
  data.eval_rows = std::make_shared<const data::PackIndex>(std::move(packed.index));
  return data;
}

}  // namespace pbert::train
