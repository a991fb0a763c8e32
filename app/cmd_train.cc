#include <signal.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/options.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/platform.h"
#include "common/status.h"
#include "data/packing/report.h"
#include "data/source.h"
#include "data/store.h"
#include "distributed/communicator.h"
#include "train/checkpointer.h"
#include "train/trainer.h"

namespace pbert::app {
namespace {

std::atomic<bool> stop_requested{false};

void OnStopSignal(int) { stop_requested.store(true); }

// The first SIGINT or SIGTERM asks the loop to finish its step and save; a
// second one (the handler resets itself) ends the process at once.
void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// Keys a resumed run may change: they alter how the run is watched, kept or
// stopped early, not what it computes.
bool ResumeMayChange(const std::string& key) {
  static const char* const kSafe[] = {
      "run.threads",        "run.log_level",         "run.output_dir",
      "data.loader_threads", "data.prefetch_steps",   "data.histogram",
      "data.pack_index",  // the rows themselves are checked by their checksum
      "train.checkpoint_every_steps", "train.keep_checkpoints", "train.log_every_steps",
      "train.max_samples",  "train.max_bad_steps",   "train.init_checkpoint"};
  for (const char* safe : kSafe) {
    if (key == safe) return true;
  }
  return absl::StartsWith(key, "prepare.") || absl::StartsWith(key, "mlperf.");
}

// Fails, naming the keys, if the checkpoint was made under a config that
// trains differently from `config`.
absl::Status CheckSameTraining(const std::string& checkpoint, const ExperimentConfig& config) {
  // A folder that is no checkpoint is named as such, before its config is read.
  RETURN_IF_ERROR(train::ReadCheckpointInfo(checkpoint).status());
  ExperimentConfig saved;
  RETURN_IF_ERROR(Annotate(config::Load(checkpoint + "/config.yaml", {}, &saved),
                           "the checkpoint's config"));
  auto before = config::Flatten(YAML::Load(config::Dump(saved)));
  auto now = config::Flatten(YAML::Load(config::Dump(config)));
  std::vector<std::string> changed;
  for (const auto& [key, value] : now) {
    auto it = before.find(key);
    if (!ResumeMayChange(key) && (it == before.end() || it->second != value)) {
      changed.push_back(absl::StrCat(key, " (", it == before.end() ? "unset" : it->second, " -> ",
                                     value, ")"));
    }
  }
  if (changed.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the config differs from the one ", checkpoint, " was trained with: ",
      absl::StrJoin(changed, ", "), "; resume with the same config, or add --force"));
}

// The pack index of the training rows: data.pack_index, or the store packed
// now with the packing section (and written to the run folder).
absl::StatusOr<std::shared_ptr<const data::PackIndex>> TrainRows(
    const ExperimentConfig& config, const data::InstanceStore& store, bool write) {
  auto log = logging::Get("train");
  if (!config.data.pack_index.empty()) {
    ASSIGN_OR_RETURN(data::PackIndex index, data::PackIndex::Read(config.data.pack_index));
    log->info("{}: {} sequences in {} rows", config.data.pack_index, index.sequences(),
              index.rows());
    return std::make_shared<const data::PackIndex>(std::move(index));
  }
  ASSIGN_OR_RETURN(data::PackedSequences packed,
                   data::PackLengths(config.packing.algorithm, store.Lengths(),
                                     {static_cast<int>(config.data.max_seq_len),
                                      static_cast<int>(config.packing.max_depth),
                                      static_cast<uint64_t>(config.run.seed)}));
  const data::PackingReport& r = packed.run.report;
  log->info("packed {} with {}: {} sequences in {} rows, packing factor {:.4f}, efficiency {:.2f}%",
            store.dir(), r.algorithm, r.sequences, r.packs, r.packing_factor, 100 * r.efficiency);
  if (write) {
    RETURN_IF_ERROR(packed.index.Write(config.run.output_dir + "/pack.pbpack", r.algorithm));
  }
  return std::make_shared<const data::PackIndex>(std::move(packed.index));
}

// MLPerf's evaluation interval for a global batch of `gbs` sequences.
int64_t MlperfEvalInterval(double gbs) {
  return static_cast<int64_t>(std::floor(0.05 * (230.23 * gbs + 3'000'000) / 25'000)) * 25'000;
}

std::string ResumeCommand(const Args& args) {
  std::string command = "packed-bert train";
  if (args.Has("config")) absl::StrAppend(&command, " --config ", args.Get("config"));
  for (const std::string& s : args.GetAll("set")) absl::StrAppend(&command, " --set ", s);
  return absl::StrCat(command, " --resume auto");
}

absl::Status RunTrain(const Args& args) {
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args));
  auto log = logging::Get("train");
  if (config.model.ablation != "none" && config.mlperf.division == "closed") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.ablation ", config.model.ablation,
        " trains a model that is not BERT, which a closed-division MLPerf run may not; for an "
        "experiment set mlperf.division: open"));
  }
  ASSIGN_OR_RETURN(distributed::Environment environment, DistributedEnvironment(config));
  ASSIGN_OR_RETURN(std::string backend,
                   distributed::ResolveBackend(config.dist.backend, /*model_on_cuda=*/false));
  if (environment.distributed()) {
    log->info("rank {} of {} ({}; local rank {} of {}, node {}), {} process group at {}:{}",
              environment.rank, environment.world_size, environment.source,
              environment.local_rank, environment.local_world_size, environment.node_rank,
              backend, environment.master_addr, environment.master_port);
  }
  ASSIGN_OR_RETURN(auto communicator,
                   distributed::Communicator::Create(environment, backend,
                                                     std::chrono::seconds(config.dist.timeout_s)));
  const bool rank0 = communicator->rank() == 0;
  const std::string run_dir = config.run.output_dir;

  std::string resume = args.Get("resume");
  if (environment.restart_count > 0 && !args.Has("resume")) {
    // Started again by launch or torchrun after a failure: continue.
    log->info("restart {} of the workers: resuming from the newest checkpoint",
              environment.restart_count);
    resume = "auto";
  }
  if (resume == "auto") {
    resume = train::LatestCheckpoint(run_dir);
    if (resume.empty()) log->info("no checkpoint in {}/checkpoints: a new run", run_dir);
  }
  if (!resume.empty() && !args.Has("force")) RETURN_IF_ERROR(CheckSameTraining(resume, config));

  if (config.data.store.empty()) {
    return absl::InvalidArgumentError(
        "train needs data.store: an instance store made by packed-bert prepare");
  }
  if (!std::filesystem::is_directory(config.data.store)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.store '", config.data.store, "' is not an instance store folder; make one with "
        "packed-bert prepare (MLPerf HDF5 files too: --input-format hdf5)"));
  }
  ASSIGN_OR_RETURN(data::InstanceStore opened, data::InstanceStore::Open(config.data.store));
  auto store = std::make_shared<const data::InstanceStore>(std::move(opened));
  const model::BertOptions bert = ToBertOptions(config.model);
  RETURN_IF_ERROR(model::CheckDataFits(bert, store->limits(), config.data.store));
  if (store->info().max_len > config.data.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.data.store, " holds sequences of up to ", store->info().max_len,
        " tokens; data.max_seq_len is ", config.data.max_seq_len, ": raise it"));
  }
  if (rank0) RETURN_IF_ERROR(CreateOutputDir(config));
  ASSIGN_OR_RETURN(auto rows, TrainRows(config, *store, rank0 && resume.empty()));
  const double packing_factor =
      static_cast<double>(rows->sequences()) / static_cast<double>(rows->rows());

  std::shared_ptr<const data::SequenceSource> eval_source;
  std::shared_ptr<const data::PackIndex> eval_rows;
  if (!config.data.eval.empty()) {
    ASSIGN_OR_RETURN(eval_source, data::OpenSequences(config.data.eval,
                                                       static_cast<uint32_t>(config.model.vocab_size)));
    RETURN_IF_ERROR(model::CheckDataFits(bert, eval_source->limits(), config.data.eval));
    if (eval_source->limits().max_len > config.data.max_seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          config.data.eval, " holds sequences of up to ", eval_source->limits().max_len,
          " tokens; data.max_seq_len is ", config.data.max_seq_len));
    }
    const std::string algorithm = config.train.eval_packed ? config.packing.algorithm : "none";
    ASSIGN_OR_RETURN(data::PackedSequences packed,
                     data::PackLengths(algorithm, eval_source->Lengths(),
                                       {static_cast<int>(config.data.max_seq_len),
                                        static_cast<int>(config.packing.max_depth),
                                        static_cast<uint64_t>(config.run.seed)}));
    eval_rows = std::make_shared<const data::PackIndex>(std::move(packed.index));
  } else {
    log->warn("no data.eval: the run trains without evaluating and cannot reach its target");
  }

  ASSIGN_OR_RETURN(optim::OptimizerHyperparameters adjusted,
                   AdjustedOptimizer(config.optim, packing_factor));
  train::TrainerOptions o;
  o.run_dir = run_dir;
  o.seed = static_cast<uint64_t>(config.run.seed);
  o.model = bert;
  o.init_checkpoint = config.train.init_checkpoint;
  o.lamb = ToLambOptions(config.optim, adjusted);
  o.exclude_from_trust_ratio = config.optim.exclude_from_trust_ratio;
  o.schedule = ToScheduleOptions(config.optim);
  ASSIGN_OR_RETURN(o.step, ToStepOptions(config));
  o.train_source = store;
  o.train_index = rows;
  o.loader.rows_per_batch = config.train.micro_batch_rows;
  o.loader.batches_per_step = adjusted.accumulation_steps;
  o.loader.shape = {static_cast<int>(config.data.max_seq_len),
                    static_cast<int>(config.packing.max_depth), 0};
  o.loader.rank = communicator->rank();
  o.loader.world_size = communicator->world_size();
  o.loader.threads = static_cast<int>(config.data.loader_threads);
  o.loader.prefetch = static_cast<int>(config.data.prefetch_steps);
  o.eval_source = eval_source;
  o.eval_index = eval_rows;
  o.total_steps = config.optim.total_steps;
  const double rows_per_step = static_cast<double>(config.train.micro_batch_rows *
                                                   adjusted.accumulation_steps *
                                                   communicator->world_size());
  o.eval_every_samples = config.train.eval_every_samples > 0
                             ? config.train.eval_every_samples
                             : MlperfEvalInterval(rows_per_step * packing_factor);
  o.target_mlm_accuracy = config.train.target_mlm_accuracy;
  o.max_samples = config.train.max_samples;
  o.checkpoint_every_steps = config.train.checkpoint_every_steps;
  o.keep_checkpoints = static_cast<int>(config.train.keep_checkpoints);
  o.log_every_steps = config.train.log_every_steps;
  o.max_bad_steps = config.train.max_bad_steps;
  o.mlperf = {config.mlperf.org, config.mlperf.platform, config.mlperf.division,
              config.mlperf.status};
  o.resume = resume;
  o.communicator = communicator.get();
  o.stop_requested = [] { return stop_requested.load(); };
  const std::string effective = absl::StrFormat(
      "packing factor %.6f; optimizer after the packing adjustment (%s): beta1 %.9g, beta2 %.9g, "
      "accumulation_steps %d; %.1f sequences per step; evaluation every %d sequences; "
      "precision %s; OpenBLAS kernels %s",
      packing_factor, config.optim.packing_adjustment, adjusted.beta1, adjusted.beta2,
      adjusted.accumulation_steps, rows_per_step * packing_factor, o.eval_every_samples,
      model::PrecisionName(o.step.precision),
      TuneOpenBlasKernels().chosen.empty() ? "(not OpenBLAS)" : TuneOpenBlasKernels().chosen);
  o.config_yaml = absl::StrCat(config::Dump(config), "\n# effective: ", effective, "\n");
  log->info("{}", effective);
  if (rank0) RETURN_IF_ERROR(WriteEffectiveConfig(config, effective));

  InstallStopHandlers();
  ASSIGN_OR_RETURN(train::TrainResult r, train::Train(o));
  if (!rank0) return absl::OkStatus();
  if (r.status == "interrupted") {
    std::cout << "stopped at step " << r.step << " (" << r.samples << " sequences) on request; "
              << "checkpoint " << r.checkpoint << "\nresume with: " << ResumeCommand(args) << "\n";
    return absl::OkStatus();
  }
  std::string out;
  if (r.already_finished) absl::StrAppend(&out, "this run had finished; ", r.checkpoint, "\n");
  absl::StrAppendFormat(&out, "status            %s\n", r.status);
  absl::StrAppendFormat(&out, "steps             %d (%d skipped)\n", r.step, r.skipped_steps);
  absl::StrAppendFormat(&out, "sequences         %d\n", r.samples);
  if (r.samples_to_target > 0) {
    absl::StrAppendFormat(&out, "to target         %d sequences (MLM accuracy >= %.4f)\n",
                          r.samples_to_target, config.train.target_mlm_accuracy);
  } else {
    absl::StrAppendFormat(&out, "to target         not reached (MLM accuracy >= %.4f)\n",
                          config.train.target_mlm_accuracy);
  }
  absl::StrAppendFormat(&out, "MLM accuracy      %.4f (best %.4f, %d evaluations)\n",
                        r.mlm_accuracy, r.best_mlm_accuracy, r.evaluations);
  absl::StrAppendFormat(&out, "training time     %.1f s\n", r.train_seconds);
  if (r.run_seconds > 0) {
    absl::StrAppendFormat(&out, "time to train     %.1f s (MLLOG run_start to run_stop)\n",
                          r.run_seconds);
  }
  absl::StrAppendFormat(&out, "run folder        %s (mllog.txt, metrics.jsonl, checkpoints/)\n",
                        run_dir);
  std::cout << out;
  return absl::OkStatus();
}

}  // namespace

Command TrainCommand() {
  Command command;
  command.name = "train";
  command.summary = "pretrain BERT on packed data with the MLPerf evaluation loop";
  command.usage = "train --config FILE [--set SECTION.KEY=VALUE ...] [--resume DIR|auto] [--force]";
  command.details =
      "Trains on data.store (rows from data.pack_index, or the store packed with the packing\n"
      "section), evaluates on data.eval every train.eval_every_samples sequences and stops when\n"
      "the MLM accuracy reaches train.target_mlm_accuracy, after optim.total_steps steps or\n"
      "train.max_samples sequences. Writes RUN_DIR/mllog.txt (:::MLLOG lines), metrics.jsonl,\n"
      "config.yaml and checkpoints/step-N folders (RUN_DIR = run.output_dir). SIGINT or SIGTERM\n"
      "finishes the step, saves a checkpoint and exits 0; --resume continues exactly.";
  command.flags = {
      {"resume", "DIR|auto", "continue from a checkpoint folder, or the newest one of the run"},
      {"force", "", "resume even if training-relevant config keys changed"},
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunTrain;
  return command;
}

}  // namespace pbert::app
