// The training loop's parts, each alone and in this process: the stop
// policy, the checkpointer, the evaluation's cadence, MLPerf's evaluation
// interval, the metrics log and the MLLOG. Each test fails when its part's rule changes (the
// mutation each was tried against is named above it).
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/platform.h"
#include "data/packing/pack.h"
#include "data/source.h"
#include "distributed/environment.h"
#include "gtest/gtest.h"
#include "model/bert.h"
#include "tests/scratch_folder.h"
#include "tests/train/model_batches.h"
#include "train/checkpointer.h"
#include "train/evaluation.h"
#include "train/metrics_log.h"
#include "train/mllog.h"
#include "train/resume.h"
#include "train/stop_policy.h"
#include "train/trainee.h"
#include "train/trainer_state.h"
#include "train/training_plan.h"

namespace pbert::train {
namespace {

namespace fs = std::filesystem;

StepResult Applied(bool applied) {
  StepResult r;
  r.applied = applied;
  return r;
}

// Mutation tried: AtEnd ignoring max_samples (the test of the cap fails).
TEST(StopPolicyTest, EndsAtTheTargetTheLastStepOrTheSampleCap) {
  StopOptions options;
  options.total_steps = 100;
  options.max_samples = 5000;  // say an epoch's sequences
  const StopPolicy stop(options, nullptr);
  EXPECT_FALSE(stop.AtEnd(10, 400, false));
  EXPECT_TRUE(stop.AtEnd(10, 400, true));    // the target reached
  EXPECT_TRUE(stop.AtEnd(100, 400, false));  // total_steps
  EXPECT_FALSE(stop.AtEnd(99, 4999, false));
  EXPECT_TRUE(stop.AtEnd(99, 5000, false));  // max_samples
  options.max_samples = 0;                   // no cap
  EXPECT_FALSE(StopPolicy(options, nullptr).AtEnd(99, 1u << 30, false));
}

// Mutation tried: Requested ignoring the poll (the signal is not seen).
TEST(StopPolicyTest, AStopRequestIsSeenBeforeTheNextStep) {
  auto communicator = distributed::Communicator::Single();
  bool signalled = false;
  const StopPolicy stop(StopOptions(), [&] { return signalled; });
  EXPECT_FALSE(stop.Requested(*communicator));
  signalled = true;
  EXPECT_TRUE(stop.Requested(*communicator));
  EXPECT_FALSE(StopPolicy(StopOptions(), nullptr).Requested(*communicator));
}

// Mutation tried: not resetting the count after a good step (the third
// bad step, not in a row, would end the run).
TEST(StopPolicyTest, MaxBadStepsInARowEndTheRunNamingTheLastCheckpoint) {
  StopOptions options;
  options.max_bad_steps = 3;
  StopPolicy stop(options, nullptr);
  EXPECT_TRUE(stop.Count(Applied(false), 1, "").ok());
  EXPECT_TRUE(stop.Count(Applied(false), 2, "").ok());
  EXPECT_TRUE(stop.Count(Applied(true), 3, "").ok());  // the row is broken
  EXPECT_TRUE(stop.Count(Applied(false), 4, "").ok());
  EXPECT_TRUE(stop.Count(Applied(false), 5, "").ok());
  const absl::Status third = stop.Count(Applied(false), 6, "run/checkpoints/step-00000003");
  EXPECT_FALSE(third.ok());
  EXPECT_NE(third.message().find("run/checkpoints/step-00000003"), std::string::npos) << third;
  EXPECT_EQ(stop.state().skipped_steps, 5);
  // The counts come back with a resume.
  StopPolicy resumed(options, nullptr);
  resumed.Restore({2, 5});
  EXPECT_FALSE(resumed.Count(Applied(false), 7, "").ok());
}

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = pbert::testing::ScratchFolder();
    TraineeOptions o;
    o.bert = model::testing::TinyOptions();
    o.seed = 3;
    trainee_ = std::move(*Trainee::Make(o, *communicator_));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A trainer state of `step` steps (10 sequences each).
  static nlohmann::json StateAt(int64_t step) {
    TrainerState state;
    state.loop.step = step;
    state.loop.samples = static_cast<uint64_t>(10 * step);
    state.loop.task = "pretraining";
    state.loader.rows = static_cast<uint64_t>(step);
    return ToJson(state);
  }
  absl::Status Save(Checkpointer& checkpointer, int64_t step) {
    return checkpointer.Save(step, trainee_->model(), trainee_->optimizer(), StateAt(step));
  }
  CheckpointOptions Options(int64_t every, int keep) {
    CheckpointOptions o;
    o.run_dir = dir_.string();
    o.every_steps = every;
    o.keep = keep;
    o.config_yaml = "run: {}\n";
    return o;
  }
  std::vector<std::string> Folders() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_ / "checkpoints")) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
  std::unique_ptr<distributed::Communicator> communicator_ = distributed::Communicator::Single();
  std::unique_ptr<Trainee> trainee_;
};

// Mutation tried: Due on every step (the cadence test fails).
TEST_F(CheckpointerTest, DueEveryNStepsOrOnlyWhenAsked) {
  Checkpointer every(Options(50, 3), *communicator_);
  EXPECT_FALSE(every.Due(49));
  EXPECT_TRUE(every.Due(50));
  EXPECT_FALSE(every.Due(51));
  EXPECT_TRUE(every.Due(100));
  Checkpointer asked(Options(0, 3), *communicator_);
  for (int64_t step : {1, 50, 1000}) EXPECT_FALSE(asked.Due(step)) << step;
}

// What weights say they were trained for: a checkpoint's trainer state, a
// Hugging Face folder's finetuning_task, or an architecture only one task
// exports (pretraining's); nothing where they do not say.
// Mutation tried: BertForSequenceClassification taken for a task.
TEST_F(CheckpointerTest, WeightsSayWhatTheyWereTrainedFor) {
  Checkpointer checkpointer(Options(1, 3), *communicator_);
  ASSERT_TRUE(Save(checkpointer, 1).ok());
  const fs::path checkpoint = dir_ / "checkpoints" / Folders().back();
  EXPECT_EQ(TaskOfWeights(checkpoint.string()), "pretraining");
  EXPECT_EQ(TaskOfWeights((checkpoint / "model.safetensors").string()), "pretraining");
  const fs::path hf = dir_ / "hf";
  fs::create_directories(hf);
  const auto said = [&](const std::string& config) {
    std::ofstream(hf / "config.json") << config;
    return std::make_pair(TaskOfWeights(hf.string()),
                          TaskOfWeights((hf / "model.safetensors").string()));
  };
  using Said = std::pair<std::string, std::string>;
  EXPECT_EQ(said(R"({"architectures": ["BertForPreTraining"]})"),
            Said("pretraining", "pretraining"));
  EXPECT_EQ(
      said(R"({"architectures": ["BertForSequenceClassification"], "finetuning_task": "mrpc"})"),
      Said("mrpc", "mrpc"));
  for (const char* unknown :
       {R"({"architectures": ["BertForSequenceClassification"]})",
        R"({"architectures": ["BertForPreTraining", "BertModel"]})", R"({"architectures": [7]})",
        R"({"architectures": "BertForPreTraining"})", "{", "[]"}) {
    EXPECT_EQ(said(unknown), Said("", "")) << unknown;
  }
  fs::remove(hf / "config.json");
  EXPECT_EQ(TaskOfWeights(hf.string()), "");
}

// Mutation tried: pruning keeping keep + 1 folders.
TEST_F(CheckpointerTest, KeepsTheNewestKeepCheckpoints) {
  Checkpointer checkpointer(Options(1, 2), *communicator_);
  for (int64_t step = 1; step <= 4; ++step) ASSERT_TRUE(Save(checkpointer, step).ok());
  EXPECT_EQ(Folders(), (std::vector<std::string>{"step-00000003", "step-00000004"}));
  EXPECT_EQ(checkpointer.last(), (dir_ / "checkpoints" / "step-00000004").string());
  EXPECT_TRUE(checkpointer.Saved(4));
  EXPECT_FALSE(checkpointer.Saved(3));
  EXPECT_EQ(LatestCheckpoint(dir_.string()), checkpointer.last());
  Checkpointer all(Options(1, 0), *communicator_);
  ASSERT_TRUE(Save(all, 5).ok());
  ASSERT_TRUE(Save(all, 6).ok());
  EXPECT_EQ(Folders().size(), 4u);  // keep 0 removes none
}

// Weights that cannot be written (safetensors has no complex dtype).
struct Unsavable : torch::nn::Module {
  Unsavable() { register_parameter("w", torch::zeros({2}, torch::kComplexFloat)); }
};

// A checkpoint being read outside its run (export-hf, score) is held: the
// run's rotation leaves it until a later save, and one rotated away before
// it was held is named with the run's newest.
TEST_F(CheckpointerTest, ACheckpointBeingReadOutlivesTheRotation) {
  Checkpointer checkpointer(Options(1, 1), *communicator_);
  ASSERT_TRUE(Save(checkpointer, 1).ok());
  const std::string first = checkpointer.last();
  {
    auto hold = CheckpointHold::Take(first);
    ASSERT_TRUE(hold.ok()) << hold.status();
    ASSERT_TRUE(Save(checkpointer, 2).ok());
    EXPECT_TRUE(fs::exists(first + "/model.safetensors")) << "rotated away while held";
    EXPECT_EQ(LatestCheckpoint(dir_.string()), checkpointer.last());
  }
  ASSERT_TRUE(Save(checkpointer, 3).ok());
  EXPECT_EQ(Folders().size(), 1u);  // the held one went with the next save
  const auto gone = CheckpointHold::Take(first);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(gone.status().message()),
            "checkpoint folder '" + first +
                "' not found (a run that keeps train.keep_checkpoints removes its older ones); "
                "the newest checkpoint of the run is now " +
                checkpointer.last());
  // A weights file, or a path that names no checkpoint, holds nothing.
  EXPECT_TRUE(CheckpointHold::Take(checkpointer.last() + "/model.safetensors").ok());
  EXPECT_TRUE(CheckpointHold::Take((dir_ / "elsewhere.safetensors").string()).ok());
}

// A save that fails halfway is an error and leaves the previous checkpoint
// whole, the newest, and no temporary folder. Mutation tried: pruning
// before the new checkpoint is in place (the previous one is gone).
TEST_F(CheckpointerTest, AFailedSaveKeepsThePreviousCheckpoint) {
  Checkpointer checkpointer(Options(1, 1), *communicator_);
  ASSERT_TRUE(Save(checkpointer, 1).ok());
  const fs::path previous = dir_ / "checkpoints" / "step-00000001";
  const absl::Status failed = checkpointer.Save(2, Unsavable(), trainee_->optimizer(), StateAt(2));
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(Folders(), std::vector<std::string>{"step-00000001"});
  EXPECT_TRUE(fs::exists(previous / "model.safetensors"));
  EXPECT_TRUE(fs::exists(previous / "optimizer.pt"));
  EXPECT_EQ(LatestCheckpoint(dir_.string()), previous.string());
  EXPECT_EQ(checkpointer.last(), previous.string());
  EXPECT_FALSE(checkpointer.Saved(2));
  auto info = ReadCheckpointInfo(previous.string());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state["loop"]["step"], 1);
  // The error says what survived and how to go on from it.
  const std::string message(failed.message());
  EXPECT_NE(message.find("the checkpoint of step 2 was not written"), std::string::npos) << message;
  EXPECT_NE(message.find("the newest usable checkpoint is " + previous.string()), std::string::npos)
      << message;
  EXPECT_NE(message.find("--config " + dir_.string() + "/config.yaml --resume auto"),
            std::string::npos)
      << message;
}

// A file-size limit (ulimit -f) that a checkpoint passes: the write fails
// with "File too large" instead of SIGXFSZ killing the process without a
// word, and the error names the checkpoint that survived; without one,
// it says that none did.
TEST_F(CheckpointerTest, AFileSizeLimitFailsTheSaveInWords) {
  ASSERT_TRUE(PrepareResourceLimits(8).ok());  // SIGXFSZ ignored, as packed-bert runs
  struct rlimit before {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &before), 0);
  auto save_limited = [&](Checkpointer& checkpointer, int64_t step) {
    struct rlimit small = before;
    small.rlim_cur = 4096;
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    absl::Status status = Save(checkpointer, step);
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &before), 0);
    return status;
  };
  Checkpointer first(Options(1, 0), *communicator_);
  const absl::Status none = save_limited(first, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("File too large"), std::string::npos) << none;
  EXPECT_NE(none.message().find("no earlier checkpoint"), std::string::npos) << none;
  EXPECT_EQ(LatestCheckpoint(dir_.string()), "");
  ASSERT_TRUE(Save(first, 2).ok());
  const absl::Status kept = save_limited(first, 3);
  ASSERT_FALSE(kept.ok());
  EXPECT_NE(kept.message().find("newest usable checkpoint is " +
                                (dir_ / "checkpoints" / "step-00000002").string()),
            std::string::npos)
      << kept;
  EXPECT_EQ(Folders(), std::vector<std::string>{"step-00000002"});
}

// A checkpoint folder that lost a file (config.yaml, the weights) is no
// checkpoint: --resume auto passes it by for the newest whole one, and
// named directly it is refused naming the file. A run folder given as a
// checkpoint is named as such, with its newest checkpoint.
TEST_F(CheckpointerTest, ACheckpointWithoutItsFilesIsPassedByAndNamed) {
  Checkpointer checkpointer(Options(1, 0), *communicator_);
  ASSERT_TRUE(Save(checkpointer, 1).ok());
  ASSERT_TRUE(Save(checkpointer, 2).ok());
  ASSERT_TRUE(Save(checkpointer, 3).ok());
  const fs::path root = dir_ / "checkpoints";
  fs::remove(root / "step-00000003" / "config.yaml");
  fs::remove(root / "step-00000002" / "model.safetensors");
  std::vector<std::string> passed_by;
  EXPECT_EQ(LatestCheckpoint(dir_.string(), &passed_by), (root / "step-00000001").string());
  EXPECT_EQ(passed_by,
            (std::vector<std::string>{(root / "step-00000002").string() + " (no model.safetensors)",
                                      (root / "step-00000003").string() + " (no config.yaml)"}));
  auto info = ReadCheckpointInfo((root / "step-00000003").string());
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("step-00000003 has no config.yaml; the checkpoint is "
                                         "damaged"),
            std::string::npos)
      << info.status();
  const absl::Status weights =
      LoadVerifiedWeights((root / "step-00000002").string(), trainee_->model());
  EXPECT_EQ(
      std::string(weights.message()),
      "the checkpoint " + (root / "step-00000002").string() +
          " has no model.safetensors (removed or lost); take an earlier checkpoint of its run");
  auto run = ReadCheckpointInfo(dir_.string());
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("is a run folder, not one of its checkpoints; give " +
                                        (root / "step-00000001").string()),
            std::string::npos)
      << run.status();
}

// Resume reads the newest checkpoint through the typed trainer state and
// refuses a config that trains otherwise, naming the keys; --force takes it
// anyway, and keys that only watch the run may change. (Another global
// batch is the trainer's to refuse: TrainTest.ResumingOnAnotherWorldSizeGoesOnWithTheSameRows.)
TEST_F(CheckpointerTest, ResumeFindsTheNewestCheckpointAndRefusesAnotherTraining) {
  ExperimentConfig config;
  config.run.output_dir = dir_.string();
  CheckpointOptions options = Options(1, 3);
  options.config_yaml = config::Dump(config);
  Checkpointer checkpointer(options, *communicator_);
  ASSERT_TRUE(Save(checkpointer, 4).ok());
  ASSERT_TRUE(Save(checkpointer, 8).ok());
  distributed::Environment alone;
  auto found = FindResumePoint("auto", false, config, "pretraining", alone);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->dir, checkpointer.last());

  ExperimentConfig other_lr = config;
  other_lr.optim.schedule.peak_lr *= 2;
  auto refused = FindResumePoint("auto", false, other_lr, "pretraining", alone);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("optim.lr"), std::string::npos) << refused.status();
  EXPECT_TRUE(FindResumePoint("auto", true, other_lr, "pretraining", alone).ok());  // --force

  ExperimentConfig watched = config;
  watched.train.log_every_steps = 1;
  watched.train.keep_checkpoints = 9;
  EXPECT_TRUE(FindResumePoint("auto", false, watched, "pretraining", alone).ok());

  // Another task's run is not continued, not even with --force.
  for (const bool force : {false, true}) {
    auto other_task = FindResumePoint("auto", force, config, "squad", alone);
    ASSERT_FALSE(other_task.ok());
    EXPECT_EQ(other_task.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(other_task.status().message().find(
                  "is a checkpoint of a pretraining run, which a squad run cannot continue"),
              std::string::npos)
        << other_task.status();
  }
}

// A checkpoint whose trainer state is of another step than its folder's
// name is damaged.
TEST_F(CheckpointerTest, AStateOfAnotherStepThanItsFolderIsDamage) {
  Checkpointer checkpointer(Options(1, 3), *communicator_);
  ASSERT_TRUE(checkpointer.Save(5, trainee_->model(), trainee_->optimizer(), StateAt(4)).ok());
  auto info = ReadCheckpointInfo(checkpointer.last());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("state of step 4"), std::string::npos) << info.status();
}

// A state a newer packed-bert wrote is not damage: it says which versions
// this one reads. Mutation tried: every unreadable state called damaged.
TEST_F(CheckpointerTest, AStateOfAnotherVersionSaysSoAndIsNotCalledDamaged) {
  Checkpointer checkpointer(Options(1, 3), *communicator_);
  ASSERT_TRUE(Save(checkpointer, 3).ok());
  nlohmann::json state = StateAt(3);
  state["version"] = 9;
  std::ofstream(fs::path(checkpointer.last()) / "trainer_state.json") << state.dump();
  auto info = ReadCheckpointInfo(checkpointer.last());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << info.status();
  EXPECT_NE(info.status().message().find("version 9"), std::string::npos) << info.status();
  EXPECT_EQ(info.status().message().find("damaged"), std::string::npos) << info.status();
}

// `count` random sequences in memory, one per row, evaluated 4 rows at a
// time on the CPU.
struct EvalSet {
  EvalSet(int count, uint64_t seed) {
    auto made = data::MemorySource::Create(
        "eval", model::testing::RandomInstances(count, 6, 30, 97, seed), {97, 64, 64});
    EXPECT_TRUE(made.ok()) << made.status();
    source = *made;
    auto packed = data::PackLengths("none", source->Lengths(), {64, 1, 1});
    EXPECT_TRUE(packed.ok()) << packed.status();
    set.name = "eval";
    set.sequences = source;
    set.rows = std::make_shared<const data::PackIndex>(std::move(packed->index));
    set.shape = {64, 1, 0};
    loader.rows_per_batch = 4;
  }
  std::unique_ptr<train::Evaluator> Evaluator() const {
    return std::make_unique<train::Evaluator>(*task, set, loader, model::testing::TinyOptions(),
                                              model::Precision::kFp32, c10::kCPU);
  }
  std::vector<std::unique_ptr<train::Evaluator>> Evaluators() const {
    std::vector<std::unique_ptr<train::Evaluator>> out;
    out.push_back(Evaluator());
    return out;
  }
  std::shared_ptr<const data::SequenceSource> source;
  tasks::PackedSet set;
  std::unique_ptr<tasks::Task> task = tasks::PretrainingOn({});
  data::LoaderOptions loader;
};

// Pretraining's target as a run's evaluation counts it.
EvaluationOptions MlmTarget(uint64_t every_samples, double target) {
  EvaluationOptions options;
  options.every_samples = every_samples;
  options.target_metric = "mlm_accuracy";
  options.target = target;
  return options;
}

// MLPerf's rule (training_rules: eval every floor(0.05 * (230.23 * gbs +
// 3,000,000) / 25,000) * 25,000 samples), worked by hand for global
// batches of 256, 4,096 and 8,192. Mutation tried: rounding to the
// nearest 25,000 (4,096 gives 200,000).
TEST(EvaluationTest, MlperfIntervalForSeveralGlobalBatches) {
  EXPECT_EQ(MlperfEvalInterval(256), 150'000);   // 152,946.9 -> 150,000
  EXPECT_EQ(MlperfEvalInterval(4096), 175'000);  // 197,151.1 -> 175,000
  EXPECT_EQ(MlperfEvalInterval(8192), 225'000);  // 244,302.2 -> 225,000
  EXPECT_EQ(MlperfEvalInterval(32), 150'000);    // 150,368.4 -> 150,000
}

// Evaluations fall due at every multiple of the interval that a step
// crosses, once, and where a resumed run's state says. Mutation tried:
// the next evaluation counted from the samples of the last one instead of
// the interval's multiples (the second Due below moves).
TEST(EvaluationTest, DueAtTheIntervalAndAtTheFirstStepAfterAResume) {
  const EvalSet set(12, 4);
  const EvaluationOptions options = MlmTarget(100, 1.5);  // never reached
  Evaluation evaluation(set.Evaluators(), options);
  EXPECT_FALSE(evaluation.Due(99));
  EXPECT_TRUE(evaluation.Due(100));
  auto communicator = distributed::Communicator::Single();
  torch::manual_seed(1);
  model::BertForPreTraining bert(model::testing::TinyOptions());
  ASSERT_TRUE(evaluation.Run(*bert, *communicator, 130).ok());
  EXPECT_FALSE(evaluation.Due(199));  // due at 200, not at 230
  EXPECT_TRUE(evaluation.Due(200));
  ASSERT_TRUE(evaluation.Run(*bert, *communicator, 420).ok());  // a step crossed 300 and 400
  EXPECT_FALSE(evaluation.Due(499));
  EXPECT_EQ(evaluation.state().evaluations, 2);
  EXPECT_FALSE(evaluation.reached());
  // A resumed run evaluates at the first step at or past the saved point.
  Evaluation resumed(set.Evaluators(), options);
  resumed.Restore(evaluation.state());
  EXPECT_FALSE(resumed.Due(450));
  EXPECT_TRUE(resumed.Due(512));
  // Without an evaluation set nothing is ever due.
  EXPECT_FALSE(Evaluation({}, options).Due(1'000'000));
}

// The target counts once, at the samples where it was first reached.
// Mutation tried: >= replaced by > (a target of exactly the accuracy is
// not reached).
TEST(EvaluationTest, TheTargetIsReachedAtTheFirstEvaluationAtOrAboveIt) {
  const EvalSet set(8, 5);
  auto communicator = distributed::Communicator::Single();
  torch::manual_seed(2);
  model::BertForPreTraining bert(model::testing::TinyOptions());
  // The accuracy this model gets, as the target.
  auto metrics = set.Evaluator()->Run(*bert, *communicator);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  Evaluation evaluation(set.Evaluators(),
                        MlmTarget(10, tasks::MetricOf(metrics->metrics, "mlm_accuracy")));
  ASSERT_TRUE(evaluation.Run(*bert, *communicator, 10).ok());
  EXPECT_TRUE(evaluation.reached());
  EXPECT_EQ(evaluation.state().samples_to_target, 10u);
  ASSERT_TRUE(evaluation.Run(*bert, *communicator, 20).ok());
  EXPECT_EQ(evaluation.state().samples_to_target, 10u);  // the first time counts
}

// The lines of a JSON-lines file (metrics.jsonl; the MLLOG without its
// ":::MLLOG " prefix).
std::vector<nlohmann::json> JsonLines(const fs::path& path, const std::string& prefix = "") {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
    lines.push_back(nlohmann::json::parse(line.substr(prefix.size())));
  }
  return lines;
}

// A step of known sums, from `k`, so that each interval's figures can be
// worked out by hand: its MLM accuracy is k / 4.
StepResult StepOf(double k) {
  StepResult r;
  r.applied = true;
  r.grad_norm = k;
  StepMetrics& m = r.metrics;
  m.loss = k;
  // mlm_loss, mlm_sequence_loss, mlm_tokens, mlm_sequences, mlm_correct,
  // nsp_loss, nsp_sequences, nsp_correct
  m.sums = {3 * k, 0, 4 * k, 0, k * k, k, 2 * k, k};
  m.sequences = 2 * k;
  m.tokens = 6 * k;
  m.rows = k;
  m.flops = 1e9 * k;
  return r;
}

// A "train" line every `every_steps` steps over the steps since the line
// before: sums divided once (not means of means), the rates over the
// interval's time, the rate and gradient norm of its last step; a resume
// cuts the file back to the saved length, so a redone step is written once.
// The sums are made so that a mean of the steps' accuracies (0.5) differs
// from the interval's (10 / 16). Mutation tried: the loss not divided by the
// interval's steps (4 instead of 2).
TEST(MetricsLogTest, EachLineSumsItsIntervalAndAResumeWritesNoStepTwice) {
  const fs::path dir = testing::ScratchFolder();
  MetricsLogOptions options;
  options.dir = dir.string();
  options.every_steps = 2;
  options.max_len = 8;
  options.tensorboard = false;
  options.peak_flops = 4e9;
  const std::unique_ptr<tasks::Task> pretraining = tasks::PretrainingOn({});
  options.task = pretraining.get();
  auto log = MetricsLog::Open(options, {});
  ASSERT_TRUE(log.ok()) << log.status();
  // Steps 1 and 2 take 0.5 s and 1.5 s: one line at step 2.
  ASSERT_TRUE((*log)->AddStep(StepOf(1), 0.1, 0.5, {1, 10, 0.5, 0}).ok());
  ASSERT_TRUE((*log)->AddStep(StepOf(3), 0.2, 1.5, {2, 20, 2.0, 0}).ok());
  const MetricsLogState at_two = (*log)->State();
  ASSERT_TRUE((*log)->AddStep(StepOf(2), 0.3, 1.0, {3, 30, 3.0, 1}).ok());
  ASSERT_TRUE((*log)->Flush({3, 30, 3.0, 1}).ok());
  ASSERT_TRUE((*log)->Sync().ok());
  std::vector<nlohmann::json> lines = JsonLines(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json& first = lines[0];
  EXPECT_EQ(first["kind"], "train");
  EXPECT_EQ(first["step"], 2);
  EXPECT_EQ(first["samples"], 20);
  EXPECT_DOUBLE_EQ(first["loss"].get<double>(), (1.0 + 3.0) / 2);      // per step
  EXPECT_DOUBLE_EQ(first["mlm_accuracy"].get<double>(), 10.0 / 16.0);  // correct / tokens
  EXPECT_DOUBLE_EQ(first["mlm_loss"].get<double>(), 12.0 / 16.0);
  EXPECT_DOUBLE_EQ(first["nsp_accuracy"].get<double>(), 4.0 / 8.0);
  EXPECT_DOUBLE_EQ(first["lr"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(first["grad_norm"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(first["tokens_per_s"].get<double>(), 24.0 / 2.0);
  EXPECT_DOUBLE_EQ(first["sequences_per_s"].get<double>(), 8.0 / 2.0);
  EXPECT_DOUBLE_EQ(first["padding"].get<double>(), 1.0 - 24.0 / (4 * 8));
  EXPECT_DOUBLE_EQ(first["model_tflops"].get<double>(), 4e9 / 2.0 / 1e12);
  EXPECT_DOUBLE_EQ(first["mfu"].get<double>(), 4e9 / 2.0 / 4e9);
  // The flushed interval: step 3 alone, with its skipped step counted.
  EXPECT_EQ(lines[1]["step"], 3);
  EXPECT_EQ(lines[1]["skipped_steps"], 1);
  EXPECT_DOUBLE_EQ(lines[1]["mlm_accuracy"].get<double>(), 4.0 / 8.0);
  log->reset();
  // Resumed from the checkpoint of step 2: step 3 again, once.
  auto resumed = MetricsLog::Open(options, at_two);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->AddStep(StepOf(2), 0.3, 1.0, {3, 30, 3.0, 1}).ok());
  ASSERT_TRUE((*resumed)->Flush({3, 30, 3.0, 1}).ok());
  ASSERT_TRUE((*resumed)->Sync().ok());
  lines = JsonLines(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 2);
  EXPECT_EQ(lines[1]["step"], 3);
  // Other ranks write nothing.
  MetricsLogOptions silent = options;
  silent.dir = "";
  auto other = MetricsLog::Open(silent, {});
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)->AddStep(StepOf(1), 0.1, 0.5, {2, 10, 0.5, 0}).ok());
  fs::remove_all(dir);
}

// The header states each value under its own MLPerf key; run_stop is
// written once however often it is called; a resume cuts the log back to
// the checkpoint's length. Mutation tried: opt_learning_rate_warmup_steps
// given the training steps (the header's values are all different here, so
// any two swapped fields fail).
TEST(MlperfLogTest, TheHeaderNamesEachValueAndRunStopIsWrittenOnce) {
  const fs::path dir = testing::ScratchFolder();
  const fs::path path = dir / "mllog.txt";
  MlperfHeader h;
  h.seed = 11;
  h.global_batch_size = 12;
  h.gradient_accumulation_steps = 13;
  h.base_learning_rate = 0.14;
  h.epsilon = 1.5e-6;
  h.training_steps = 16;
  h.warmup_steps = 17;
  h.start_warmup_step = 18;
  h.beta1 = 0.19;
  h.beta2 = 0.20;
  h.weight_decay = 0.21;
  h.decay_power = 2.2;
  h.max_sequence_length = 23;
  h.train_samples = 24;
  h.eval_samples = 25;
  MlperfOptions o;
  o.org = "an org";
  o.platform = "a platform";
  auto log = MlperfLog::Open(path.string(), {});
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Start(o, h).ok());
  ASSERT_TRUE((*log)->BlockStop(100).ok());
  const MlperfLogState after_block = (*log)->State();
  ASSERT_TRUE((*log)->EvalStart(100).ok());
  ASSERT_TRUE((*log)->EvalStop(100, 0.5).ok());
  ASSERT_TRUE((*log)->RunStop("success", 100).ok());
  ASSERT_TRUE((*log)->RunStop("aborted", 100).ok());
  ASSERT_TRUE((*log)->Sync().ok());
  std::map<std::string, nlohmann::json> value;
  std::vector<std::string> keys;
  for (const nlohmann::json& line : JsonLines(path, ":::MLLOG ")) {
    keys.push_back(line["key"]);
    value[line["key"]] = line["value"];
  }
  const std::map<std::string, nlohmann::json> expected = {
      {"submission_benchmark", "bert"},
      {"submission_org", "an org"},
      {"submission_platform", "a platform"},
      {"submission_division", "closed"},
      {"submission_status", "research"},
      {"seed", 11},
      {"global_batch_size", 12},
      {"gradient_accumulation_steps", 13},
      {"opt_base_learning_rate", 0.14},
      {"opt_lamb_epsilon", 1.5e-6},
      {"opt_learning_rate_training_steps", 16},
      {"opt_learning_rate_warmup_steps", 17},
      {"num_warmup_steps", 17},
      {"start_warmup_step", 18},
      {"opt_lamb_beta_1", 0.19},
      {"opt_lamb_beta_2", 0.20},
      {"opt_lamb_weight_decay_rate", 0.21},
      {"opt_lamb_learning_rate_decay_poly_power", 2.2},
      {"max_sequence_length", 23},
      {"train_samples", 24},
      {"eval_samples", 25},
      {"eval_accuracy", 0.5}};
  for (const auto& [key, want] : expected) {
    ASSERT_TRUE(value.count(key)) << key << " missing";
    EXPECT_EQ(value[key], want) << key;
  }
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "run_stop"), 1);
  EXPECT_EQ(keys.front(), "cache_clear");
  EXPECT_TRUE(std::find(keys.begin(), keys.end(), "init_stop") <
              std::find(keys.begin(), keys.end(), "run_start"));
  EXPECT_EQ(keys.back(), "run_stop");
  log->reset();
  // Resumed after the block: the evaluation and run_stop are gone.
  auto resumed = MlperfLog::Open(path.string(), after_block);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->Sync().ok());
  keys.clear();
  for (const nlohmann::json& line : JsonLines(path, ":::MLLOG ")) keys.push_back(line["key"]);
  EXPECT_EQ(keys.back(), "block_stop");
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "run_stop"), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pbert::train
