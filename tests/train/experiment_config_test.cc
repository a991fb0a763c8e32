// Every number of the experiment config is checked against a range that a
// run could want: a value far outside it (optim.weight_decay 1e30, say) is
// refused in one line, not trained with.
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "gtest/gtest.h"
#include "train/experiment.h"
#include "train/regimen.h"

namespace pbert::train {
namespace {

// Visits a config like the YAML reader and tries each number's check with
// values no run could want, at both ends; lists the numbers that take one.
class RangeProbe {
 public:
  template <class T>
  void Field(const char* key, T* value, const std::string& help, config::Check<T> check = nullptr) {
    (void)value;
    (void)help;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool> &&
                  !HasChoices<T>::value) {
      const std::string name = absl::StrCat(section_, ".", key);
      std::vector<T> far;
      if constexpr (std::is_floating_point_v<T>) {
        far = {T(1e30), T(-1e30)};
      } else {
        far = {std::numeric_limits<T>::max(), std::numeric_limits<T>::min()};
      }
      for (const T v : far) {
        if (!check || check(v).empty()) taken.push_back(absl::StrCat(name, "=", v));
      }
    }
  }
  template <class S>
  void Section(const char* key, S* section, const char*) {
    section_ = key;
    section->Visit(*this);
  }
  template <class S>
  void Include(S* fields) {
    fields->Visit(*this);
  }

  std::vector<std::string> taken;

 private:
  std::string section_;
};

TEST(ExperimentConfigTest, EveryNumberIsRefusedFarOutsideTheRangeARunCouldWant) {
  ExperimentConfig config;
  RangeProbe probe;
  config.Visit(probe);
  // Any seed is as good as another.
  const std::vector<std::string> anything_goes = {
      absl::StrCat("run.seed=", std::numeric_limits<int64_t>::max())};
  EXPECT_EQ(probe.taken, anything_goes);
}

// The levers measured ahead on a GPU and no faster on the CPU are auto by
// default: on where a GPU runs; true or false set them outright.
TEST(ExperimentConfigTest, TheGpuLeversAreOnWhereAGpuRunsUnlessSet) {
  ExperimentConfig config;
  EXPECT_EQ(config.model.master_weights, Switch::kAuto);
  EXPECT_EQ(config.model.bert.fused_layers(), Switch::kAuto);
  EXPECT_TRUE(IsOn(config.model.master_weights, /*gpu=*/true));
  EXPECT_FALSE(IsOn(config.model.master_weights, /*gpu=*/false));
  ASSERT_TRUE(config::Load("",
                           {{"model.master_weights=false", "--set model.master_weights=false"},
                            {"model.fused_layers=true", "--set model.fused_layers=true"}},
                           &config)
                  .ok());
  EXPECT_FALSE(IsOn(config.model.master_weights, /*gpu=*/true));
  EXPECT_TRUE(IsOn(config.model.bert.fused_layers(), /*gpu=*/false));
  const absl::Status bad =
      config::Load("", {{"model.fused_layers=yes", "--set model.fused_layers=yes"}}, &config);
  EXPECT_NE(bad.message().find("'yes' is not one of: auto, true or false"), std::string::npos)
      << bad;
}

TEST(ExperimentConfigTest, AValueOutOfRangeIsOneLineNamingTheKeyAndTheRange) {
  ExperimentConfig config;
  const absl::Status status =
      config::Load("", {{"optim.weight_decay=1e30", "--set optim.weight_decay=1e30"}}, &config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("optim.weight_decay"), std::string::npos) << status;
  EXPECT_NE(status.message().find("must be in [0, 1]"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
}

// Commands that evaluate weights name what only training reads.
TEST(ExperimentConfigTest, EvaluationNamesTrainingSettings) {
  EXPECT_EQ(ExperimentConfig::EvaluationIdleSettings(
                {"run.cuda_graphs", "optim.lr", "model.precision", "model.master_weights",
                 "data.eval", "dist.overlap"}),
            (std::vector<std::string>{
                "run.cuda_graphs does nothing here: evaluating replays no captured training step",
                "model.master_weights does nothing here: evaluating keeps no master weights"}));
}

// A setting the user gave that cannot act in the run is named with why; one
// that acts, or was not given, is not.
TEST(ExperimentConfigTest, GivenSettingsThatCannotActAreNamed) {
  ExperimentConfig config;
  const std::set<std::string> given = {"model.fp8_margin", "dist.bucket_mb",
                                       "train.target_mlm_accuracy", "optim.lr",
                                       "train.init_checkpoint", "model.varlen_kernel"};
  EXPECT_EQ(
      config.InactiveSettings(given, PretrainingRegimen(), model::Precision::kBf16, false, 1, true),
      (std::vector<std::string>{
          "train.target_mlm_accuracy does nothing here: there is no eval set (data.eval)",
          "train.init_checkpoint does nothing here: a resumed run continues from its "
          "checkpoint's weights",
          "model.fp8_margin does nothing here: model.precision is bf16, not fp8",
          "model.varlen_kernel does nothing here: on the CPU the varlen layout attends in "
          "buckets",
          "dist.bucket_mb does nothing here: the run is one process"}));
  config.data.eval = "eval";
  EXPECT_EQ(
      config.InactiveSettings(given, PretrainingRegimen(), model::Precision::kFp8, true, 2, false),
      std::vector<std::string>{});
  // Fine-tuning's length and batch are the finetune section's; pretraining
  // does not read it.
  const std::set<std::string> schedule = {"optim.total_steps", "train.micro_batch_rows",
                                          "finetune.epochs", "optim.lr"};
  EXPECT_EQ(
      config.InactiveSettings(schedule, FineTuningRegimen(), model::Precision::kFp32, false, 2,
                              false),
      (std::vector<std::string>{
          "train.micro_batch_rows does nothing here: finetune sets it (finetune.epochs, "
          "batch_size, micro_batch_rows, warmup_proportion, log_every_steps, "
          "checkpoint_every_steps)",
          "optim.total_steps does nothing here: finetune sets it (finetune.epochs, batch_size, "
          "micro_batch_rows, warmup_proportion, log_every_steps, checkpoint_every_steps)"}));
  EXPECT_EQ(
      config.InactiveSettings(schedule, PretrainingRegimen(), model::Precision::kFp32, false, 2,
                              false),
      (std::vector<std::string>{"finetune.epochs does nothing here: train pretrains; packed-bert "
                                "finetune reads the finetune section"}));
  // A task's own keys do nothing for another task.
  const std::set<std::string> task_keys = {"finetune.labels", "finetune.threshold",
                                           "finetune.doc_stride"};
  std::vector<std::string> idle;
  for (const char* task : {"ner", "multilabel", "squad", "mrpc"}) {
    config.finetune.task = task;
    for (const std::string& line : config.InactiveSettings(
             task_keys, FineTuningRegimen(), model::Precision::kFp32, false, 1, false)) {
      idle.push_back(line);
    }
  }
  EXPECT_EQ(idle, (std::vector<std::string>{
                      "finetune.doc_stride does nothing here: finetune.task ner does not read it",
                      "finetune.threshold does nothing here: finetune.task ner does not read it",
                      "finetune.doc_stride does nothing here: finetune.task multilabel does not "
                      "read it",
                      "finetune.labels does nothing here: finetune.task squad does not read it",
                      "finetune.threshold does nothing here: finetune.task squad does not read it",
                      "finetune.doc_stride does nothing here: finetune.task mrpc does not read it",
                      "finetune.labels does nothing here: finetune.task mrpc does not read it",
                      "finetune.threshold does nothing here: finetune.task mrpc does not read it"}));
}

}  // namespace
}  // namespace pbert::train
