#include "train/experiment.h"

#include "absl/strings/str_cat.h"

namespace pbert::train {

data::PackingOptions ExperimentConfig::PackingOptions() const {
  data::PackingOptions options = packing.options;
  options.max_len = static_cast<int>(data.max_seq_len);
  options.seed = static_cast<uint64_t>(run.seed);
  return options;
}

absl::Status ExperimentConfig::CheckTrainable() const {
  const model::Ablation ablation = model.bert.ablation();
  if (ablation != model::Ablation::kNone && mlperf.division == Division::kClosed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.ablation ", NameOf(ablation),
        " trains a model that is not BERT, which a closed-division MLPerf run may not; for an "
        "experiment set mlperf.division: open"));
  }
  return absl::OkStatus();
}

namespace {

// The keys given that do nothing, each with why.
struct IdleKeys {
  const std::set<std::string>& given;
  std::vector<std::string> out;

  void Keys(const std::vector<std::string>& keys, const std::string& why) {
    for (const std::string& key : keys) {
      if (given.count(key) > 0) out.push_back(absl::StrCat(key, " does nothing here: ", why));
    }
  }
  // A whole section (every key of it given) that the regimen does not read.
  void Section(const std::string& prefix, const std::string& why) {
    for (const std::string& key : given) {
      if (key.rfind(prefix, 0) == 0) out.push_back(absl::StrCat(key, " does nothing here: ", why));
    }
  }
};

// What fine-tuning does not read: pretraining's schedule, data and MLLOG,
// and the finetune keys of other tasks than `task`.
void FineTuningIdle(IdleKeys& keys, const std::string& task) {
  keys.Keys({"train.micro_batch_rows", "train.eval_every_samples", "train.target_mlm_accuracy",
             "train.max_samples", "train.checkpoint_every_steps", "train.log_every_steps",
             "train.init_checkpoint", "train.eval_packed", "optim.total_steps",
             "optim.warmup_steps", "optim.start_warmup_step", "optim.power", "optim.end_lr",
             "optim.schedule", "optim.accumulation_steps"},
            "finetune sets it (finetune.epochs, batch_size, micro_batch_rows, "
            "warmup_proportion, log_every_steps, checkpoint_every_steps)");
  keys.Keys({"optim.packing_adjustment"},
            "fine-tuning trains with the optim section's betas as given");
  keys.Keys({"model.mlm_loss"}, "a fine-tuning task has no masked-LM loss");
  keys.Keys({"data.store", "data.pack_index", "data.eval", "data.max_seq_len", "data.histogram"},
            "a fine-tuning task reads finetune.train_file and finetune.eval_file");
  keys.Section("mlperf.", "fine-tuning writes no MLLOG");
  for (const std::string& key : tasks::TaskOwnKeys()) {
    if (!tasks::TaskReadsKey(task, key)) {
      keys.Keys({key}, absl::StrCat("finetune.task ", task, " does not read it"));
    }
  }
}

}  // namespace

std::vector<std::string> ExperimentConfig::InactiveSettings(const std::set<std::string>& given,
                                                            Regimen regimen,
                                                            model::Precision precision,
                                                            bool device_is_cuda, int world_size,
                                                            bool resumed) const {
  IdleKeys keys{given, {}};
  const auto idle = [&](const std::vector<std::string>& names, const std::string& why) {
    keys.Keys(names, why);
  };
  if (regimen == Regimen::kFineTuning) {
    FineTuningIdle(keys, finetune.task);
  } else {
    keys.Section("finetune.", "train pretrains; packed-bert finetune reads the finetune section");
  }
  if (precision != model::Precision::kFp8) {
    idle({"model.fp8_amax_history", "model.fp8_margin", "model.fp8_emulation"},
         absl::StrCat("model.precision is ", NameOf(precision), ", not fp8"));
  }
  if (precision == model::Precision::kFp32 || precision == model::Precision::kFp16) {
    idle({"model.master_weights"},
         absl::StrCat("master weights are for bf16 and fp8, and model.precision is ",
                      NameOf(precision)));
  }
  const bool pretraining = regimen == Regimen::kPretraining;
  if (pretraining && optim.schedule.kind == optim::ScheduleKind::kConstant) {
    idle({"optim.warmup_steps", "optim.start_warmup_step", "optim.power", "optim.end_lr"},
         "optim.schedule is constant (optim.lr throughout)");
  }
  if (pretraining && data.eval.empty()) {
    idle({"train.eval_every_samples", "train.eval_packed", "train.target_mlm_accuracy"},
         "there is no eval set (data.eval)");
  }
  if (world_size == 1) {
    idle({"dist.bucket_mb", "dist.overlap", "dist.backend", "dist.timeout_s",
          "dist.master_addr", "dist.master_port"},
         "the run is one process");
  }
  if (!device_is_cuda) {
    idle({"optim.fused"}, "the CPU always runs LibTorch's _foreach LAMB");
    idle({"model.varlen_kernel"}, "on the CPU the varlen layout attends in buckets");
  }
  if (resumed) {
    idle({pretraining ? "train.init_checkpoint" : "finetune.init_checkpoint"},
         "a resumed run continues from its checkpoint's weights");
  }
  return std::move(keys.out);
}

std::vector<std::string> ExperimentConfig::EvaluationIdleSettings(
    const std::set<std::string>& given) {
  IdleKeys keys{given, {}};
  keys.Keys({"run.cuda_graphs"}, "evaluating replays no captured training step");
  keys.Keys({"model.master_weights"}, "evaluating keeps no master weights");
  return std::move(keys.out);
}

}  // namespace pbert::train
