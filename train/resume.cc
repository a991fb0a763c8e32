#include "train/resume.h"

#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/status.h"

namespace pbert::train {
namespace {

// Fails, naming the keys, if `checkpoint` was made under a config that
// trains differently from `config`.
absl::Status CheckSameTraining(const CheckpointInfo& checkpoint, const ExperimentConfig& saved,
                               const ExperimentConfig& config) {
  // Both through Dump, so that formatting and defaults cannot differ.
  auto before = config::Flatten(YAML::Load(config::Dump(saved)));
  auto now = config::Flatten(YAML::Load(config::Dump(config)));
  std::vector<std::string> changed;
  for (const auto& [key, value] : now) {
    auto it = before.find(key);
    if (!ResumeMayChange(key) && (it == before.end() || it->second != value)) {
      changed.push_back(
          absl::StrCat(key, " (", it == before.end() ? "unset" : it->second, " -> ", value, ")"));
    }
  }
  if (changed.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the config differs from the one ", checkpoint.dir, " was trained with: ",
                   absl::StrJoin(changed, ", "), "; resume with the same config, or add --force"));
}

}  // namespace

bool ResumeMayChange(const std::string& key) {
  static const char* const kSafe[] = {
      "run.threads", "run.log_level", "run.output_dir", "data.loader_threads",
      "data.prefetch_steps", "data.histogram",
      "data.pack_index",  // the rows themselves are checked by their checksum
      "train.checkpoint_every_steps", "train.keep_checkpoints", "train.log_every_steps",
      "train.max_samples", "train.max_bad_steps", "train.init_checkpoint", "train.profile_steps",
      "finetune.log_every_steps", "finetune.checkpoint_every_steps", "finetune.eval_batch_rows",
      "finetune.init_checkpoint",
      // What the finished run predicts is no part of its training.
      "finetune.predict_file", "finetune.predict_mismatched_file"};
  for (const char* safe : kSafe) {
    if (key == safe) return true;
  }
  return absl::StartsWith(key, "prepare.") || absl::StartsWith(key, "mlperf.");
}

absl::StatusOr<std::optional<CheckpointInfo>> FindResumePoint(
    std::string resume, bool force, const ExperimentConfig& config, const std::string& task,
    const distributed::Environment& environment) {
  auto log = logging::Get("train");
  if (environment.restart_count > 0 && resume.empty()) {
    // Started again by launch or torchrun after a failure: continue.
    log->info("restart {} of the workers: resuming from the newest checkpoint",
              environment.restart_count);
    resume = "auto";
  }
  if (resume == "auto") {
    std::vector<std::string> passed_by;
    resume = LatestCheckpoint(config.run.output_dir, &passed_by);
    if (!passed_by.empty()) {
      log->warn("passed by {}: incomplete, a checkpoint cannot be resumed from it",
                NameList(passed_by));
    }
    if (resume.empty()) {
      log->info("no checkpoint in {}/checkpoints: a new run", config.run.output_dir);
    }
  }
  if (resume.empty()) return std::nullopt;
  ASSIGN_OR_RETURN(CheckpointInfo checkpoint, ReadCheckpointInfo(resume));
  RETURN_IF_ERROR(CheckBoundFiles(checkpoint));
  const std::string& saved_task = checkpoint.trainer.loop.task;
  if (!saved_task.empty() && saved_task != task) {
    return absl::InvalidArgumentError(absl::StrCat(
        checkpoint.dir, " is a checkpoint of a ", saved_task, " run, which a ", task,
        " run cannot continue; start a new run in another run.output_dir (its weights may be "
        "its --init)"));
  }
  ExperimentConfig saved;
  RETURN_IF_ERROR(
      Annotate(config::LoadText(checkpoint.config_yaml, checkpoint.dir + "/config.yaml", &saved),
               "the checkpoint's config"));
  if (!force) RETURN_IF_ERROR(CheckSameTraining(checkpoint, saved, config));
  return checkpoint;
}

}  // namespace pbert::train
