#include "train/training_data.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/platform.h"
#include "common/status.h"
#include "data/packing/pack.h"
#include "data/store.h"
#include "train/device.h"

namespace pbert::train {
namespace {

// `source`'s sequences fit the model and the rows of data.max_seq_len.
absl::Status CheckFits(const data::SequenceSource& source, const ExperimentConfig& config,
                       const std::string& what) {
  RETURN_IF_ERROR(model::CheckDataFits(config.model.bert, source.limits(), what));
  if (source.limits().max_len > config.data.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds sequences of up to ",
                                                   source.limits().max_len,
                                                   " tokens; data.max_seq_len is ",
                                                   config.data.max_seq_len, ": raise it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const data::SequenceSource>> OpenStore(
    const ExperimentConfig& config) {
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
                   data::InstanceStore::Open(dir, data::StoreChecks::kChecksums));
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

absl::StatusOr<TrainingData> TrainingData::Open(const ExperimentConfig& config) {
  TrainingData data;
  ASSIGN_OR_RETURN(data.train, OpenStore(config));
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

absl::StatusOr<TrainingPlan> TrainingPlan::Make(const ExperimentConfig& config,
                                                const TrainingData& data, int rank,
                                                int world_size, const c10::Device& device) {
  TrainingPlan plan;
  plan.device = device;
  const double p = data.packing_factor();
  ASSIGN_OR_RETURN(plan.optim, config.optim.AdjustedFor(p));
  ASSIGN_OR_RETURN(plan.precision, model::ResolvePrecision(config.model.precision, device));
  plan.trainee.bert = config.model.bert;
  plan.trainee.lamb = plan.optim.lamb;
  plan.trainee.exclude_from_trust_ratio = plan.optim.exclude_from_trust_ratio;
  plan.trainee.precision = plan.precision;
  plan.trainee.device = device;
  plan.trainee.seed = static_cast<uint64_t>(config.run.seed);
  plan.trainee.bucket_bytes = config.dist.bucket_bytes();
  plan.trainee.overlap = config.dist.overlap;
  plan.step.mlm_loss = config.model.mlm_loss;
  plan.step.max_grad_norm = config.optim.max_grad_norm;
  plan.loader = config.data.loader;  // its threads and prefetch
  plan.loader.pin_memory = device.is_cuda();
  plan.loader.rows_per_batch = config.train.micro_batch_rows;
  plan.loader.batches_per_step = plan.optim.accumulation_steps;
  plan.loader.shape = {static_cast<int>(config.data.max_seq_len),
                       config.packing.options.max_depth, 0};
  RETURN_IF_ERROR(config.model.CheckMicroBatchFits(config.train.micro_batch_rows,
                                                   config.data.max_seq_len));
  plan.loader.rank = rank;
  plan.loader.world_size = world_size;
  plan.loader.seed = static_cast<uint64_t>(config.run.seed);
  plan.rows_per_step = config.train.micro_batch_rows * plan.optim.accumulation_steps * world_size;
  plan.sequences_per_step = static_cast<double>(plan.rows_per_step) * p;
  if (static_cast<uint64_t>(plan.rows_per_step) > data.rows->rows() && rank == 0) {
    // Allowed (a tiny store to try a config on), but rarely meant.
    logging::Get("train")->warn(
        "one step takes {} rows and the training data has {}: each step spans more than an "
        "epoch, so it sees some sequences twice; use a larger data.store or fewer rows per step "
        "(train.micro_batch_rows, optim.accumulation_steps)",
        plan.rows_per_step, data.rows->rows());
  }
  plan.eval_every_samples = config.train.eval_every_samples > 0
                                ? config.train.eval_every_samples
                                : MlperfEvalInterval(plan.sequences_per_step);
  const std::string& kernels = TuneOpenBlasKernels().chosen;
  plan.description = absl::StrFormat(
      "%s; %.1f sequences per step; evaluation every %d sequences; device %s; precision %s; "
      "OpenBLAS kernels %s",
      config.optim.DescribeAdjustment(plan.optim, p), plan.sequences_per_step,
      plan.eval_every_samples, DescribeDevice(device), NameOf(plan.precision),
      kernels.empty() ? "(not OpenBLAS)" : kernels);
  return plan;
}

int64_t MlperfEvalInterval(double gbs) {
  return static_cast<int64_t>(std::floor(0.05 * (230.23 * gbs + 3'000'000) / 25'000)) * 25'000;
}

}  // namespace pbert::train
