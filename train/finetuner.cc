#include "train/finetuner.h"

#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/packing/pack.h"
#include "data/tokenizer.h"
#include "model/attention.h"
#include "model/random_state.h"
#include "model/task_heads.h"
#include "model/weights.h"
#include "nlohmann/json.hpp"
#include "optim/lamb.h"
#include "optim/schedule.h"
#include "tasks/batches.h"
#include "tasks/glue.h"
#include "tasks/squad.h"
#include "train/checkpointer.h"
#include "train/device.h"
#include "train/fault.h"
#include "train/finetune_step.h"
#include "train/inputs.h"
#include "train/tensorboard.h"

namespace pbert::train {
namespace {

namespace fs = std::filesystem;
using tasks::Feature;
using tasks::HeadKind;

// The task's data: its examples as read and their features.
struct TaskData {
  const tasks::GlueTask* glue = nullptr;  // null for SQuAD
  tasks::SquadSet squad_eval;
  tasks::SquadFeatures squad_eval_features;
  std::vector<Feature> train, eval;
  std::vector<float> eval_labels;  // GLUE: each eval example's label
};

std::vector<Feature> FeaturesOf(const tasks::SquadFeatures& squad) {
  std::vector<Feature> out;
  out.reserve(squad.features.size());
  for (const auto& f : squad.features) out.push_back(f.feature);
  return out;
}

absl::StatusOr<TaskData> ReadTask(const tasks::FinetuneConfig& c, const data::Tokenizer& tokenizer,
                                  bool train) {
  auto log = logging::Get("finetune");
  TaskData data;
  const int length = c.SequenceLength();
  if (c.eval_file.empty() || (train && c.train_file.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("finetune needs finetune.", c.eval_file.empty() ? "eval_file" : "train_file",
                     " (the task's ", c.eval_file.empty() ? "dev" : "training",
                     " file as distributed)"));
  }
  if (c.is_squad()) {
    tasks::SquadOptions options = c.squad;
    options.max_seq_length = length;
    if (train) {
      ASSIGN_OR_RETURN(tasks::SquadSet set, tasks::ReadSquad(c.train_file));
      ASSIGN_OR_RETURN(tasks::SquadFeatures features,
                       tasks::MakeSquadFeatures(set, tokenizer, options, /*training=*/true));
      log->info("{}: {} questions, {} features of at most {} tokens{}{}", c.train_file,
                set.examples.size(), features.features.size(), length,
                features.unanswerable > 0
                    ? absl::StrCat("; ", features.unanswerable,
                                   " questions left out whose answer their words do not hold")
                    : "",
                features.truncated_questions > 0
                    ? absl::StrCat("; ", features.truncated_questions, " questions cut")
                    : "");
      data.train = FeaturesOf(features);
    }
    ASSIGN_OR_RETURN(data.squad_eval, tasks::ReadSquad(c.eval_file));
    ASSIGN_OR_RETURN(data.squad_eval_features,
                     tasks::MakeSquadFeatures(data.squad_eval, tokenizer, options, false));
    data.eval = FeaturesOf(data.squad_eval_features);
    log->info("{}: {} questions, {} features", c.eval_file, data.squad_eval.examples.size(),
              data.eval.size());
    return data;
  }
  data.glue = tasks::FindGlueTask(c.task);
  if (train) {
    ASSIGN_OR_RETURN(auto examples, tasks::ReadGlue(*data.glue, c.train_file));
    data.train = tasks::MakeGlueFeatures(examples, tokenizer, length);
    log->info("{}: {} examples", c.train_file, examples.size());
  }
  ASSIGN_OR_RETURN(auto examples, tasks::ReadGlue(*data.glue, c.eval_file));
  data.eval = tasks::MakeGlueFeatures(examples, tokenizer, length);
  for (const auto& e : examples) data.eval_labels.push_back(e.label);
  log->info("{}: {} examples", c.eval_file, examples.size());
  return data;
}

// The starting weights: a pretrained model (any format `train` reads),
// whose encoder is taken, or a fine-tuned model of this task.
absl::Status LoadStart(TaskModel& task, const model::BertOptions& options,
                       const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "finetune needs finetune.init_checkpoint (or --init): the pretrained weights to start "
        "from");
  }
  model::BertForPreTraining pretrained(options);
  absl::Status as_pretrained = LoadVerifiedWeights(path, *pretrained);
  if (as_pretrained.ok()) {
    model::CopyEncoder(pretrained->bert, task.bert());
    return absl::OkStatus();
  }
  if (LoadVerifiedWeights(path, task.module()).ok()) return absl::OkStatus();
  // A fine-tuned model of another task (or of this one with other labels)
  // says so; anything else gets the pretraining reader's message.
  if (auto weights = model::ReadWeights(path); weights.ok()) {
    for (const char* head : {"qa_outputs.weight", "classifier.weight"}) {
      auto it = weights->tensors.find(head);
      if (it == weights->tensors.end()) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is a fine-tuned model (", head, " of ", it->second.size(0),
          " outputs), not of this task's head: start from pretrained weights"));
    }
  }
  return as_pretrained;
}

std::vector<uint16_t> LengthsOf(const std::vector<Feature>& features) {
  std::vector<uint16_t> lengths;
  lengths.reserve(features.size());
  for (const auto& f : features) lengths.push_back(static_cast<uint16_t>(f.sequence.length()));
  return lengths;
}

// The rows of `index` in the order epoch `epoch` visits them.
std::vector<uint64_t> EpochOrder(uint64_t rows, uint64_t seed, int64_t epoch) {
  std::vector<uint64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed * 1000003ULL + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), generator);
  return order;
}

std::vector<std::vector<int64_t>> RowsOf(const data::PackIndex& index,
                                         const std::vector<uint64_t>& order, size_t begin,
                                         size_t end) {
  std::vector<std::vector<int64_t>> rows;
  for (size_t i = begin; i < end; ++i) {
    auto members = index.Row(order[i]);
    rows.emplace_back(members.begin(), members.end());
  }
  return rows;
}

struct Evaluated {
  std::vector<std::pair<std::string, double>> metrics;
  std::string predictions;
};

// The dev file's outputs: rank r runs the rows r, r + world, ...; each
// feature's outputs are gathered on every rank by one sum (zeros elsewhere).
absl::StatusOr<Evaluated> Evaluate(TaskModel& task, const TaskData& data,
                                   const data::PackIndex& index, int max_len, int depth,
                                   const model::InputPlan& plan, model::Precision precision,
                                   const ExperimentConfig& config,
                                   const data::Tokenizer& tokenizer,
                                   distributed::Communicator& communicator) {
  task.module().eval();
  at::NoGradGuard no_grad;
  const int64_t features = static_cast<int64_t>(data.eval.size());
  const bool span = task.head() == HeadKind::kSpan;
  // Spans: each feature's start and end logits over its positions; else
  // each feature's predicted class or score.
  at::Tensor gathered = span ? at::zeros({features, 2, max_len}, at::kFloat)
                             : at::zeros({features}, at::kFloat);
  std::vector<uint64_t> order;
  for (uint64_t r = static_cast<uint64_t>(communicator.rank()); r < index.rows();
       r += static_cast<uint64_t>(communicator.world_size())) {
    order.push_back(r);
  }
  const size_t step = static_cast<size_t>(config.finetune.eval_batch_rows);
  for (size_t begin = 0; begin < order.size(); begin += step) {
    const auto rows = RowsOf(index, order, begin, std::min(order.size(), begin + step));
    ASSIGN_OR_RETURN(tasks::TaskBatch targets,
                     tasks::MakeTaskBatch(data.eval, rows, max_len, depth, task.head()));
    ASSIGN_OR_RETURN(MicroBatch batch, Prepare(targets.batch, plan));
    TaskModel::Output out;
    try {
      model::AutocastGuard autocast(precision, plan.device.type());
      out = task.Run(batch, targets, plan);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("evaluating: ", FirstLine(e)));
    }
    if (span) {
      const std::vector<tasks::SpanLogits> logits =
          tasks::SequenceSpanLogits(out.spans, targets.batch);
      for (size_t i = 0; i < targets.features.size(); ++i) {
        const int64_t n = static_cast<int64_t>(logits[i].start.size());
        at::Tensor slot = gathered[targets.features[i]];
        slot[0].narrow(0, 0, n).copy_(at::tensor(logits[i].start));
        slot[1].narrow(0, 0, n).copy_(at::tensor(logits[i].end));
      }
    } else {
      const at::Tensor logits = out.classes.to(at::kCPU, at::kFloat);
      size_t i = 0;
      for (size_t r = 0; r < rows.size(); ++r) {
        for (size_t k = 0; k < rows[r].size(); ++k, ++i) {
          const at::Tensor slot = logits[static_cast<int64_t>(r)][static_cast<int64_t>(k)];
          gathered[targets.features[i]] = task.head() == HeadKind::kScore
                                              ? slot[0].item<float>()
                                              : static_cast<float>(slot.argmax().item<int64_t>());
        }
      }
    }
  }
  if (communicator.world_size() > 1) {
    try {
      at::Tensor on_device = gathered.to(plan.device);
      communicator.SumInPlace(on_device);
      gathered = on_device.cpu();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("gathering the evaluation: ", FirstLine(e)));
    }
  }
  std::vector<tasks::SpanLogits> spans;
  std::vector<float> predicted;
  if (span) {
    for (int64_t f = 0; f < features; ++f) {
      const int64_t n = data.eval[f].sequence.length();
      const at::Tensor start = gathered[f][0].narrow(0, 0, n).contiguous();
      const at::Tensor end = gathered[f][1].narrow(0, 0, n).contiguous();
      spans.push_back({std::vector<float>(start.data_ptr<float>(), start.data_ptr<float>() + n),
                       std::vector<float>(end.data_ptr<float>(), end.data_ptr<float>() + n)});
    }
  } else {
    predicted.assign(gathered.data_ptr<float>(), gathered.data_ptr<float>() + features);
  }
  Evaluated result;
  if (task.head() == HeadKind::kSpan) {
    tasks::SquadOptions options = config.finetune.squad;
    options.max_seq_length = config.finetune.SequenceLength();
    ASSIGN_OR_RETURN(tasks::SquadPredictions answers,
                     tasks::PredictAnswers(data.squad_eval, data.squad_eval_features, spans,
                                           tokenizer, options));
    result.predictions = (fs::path(config.run.output_dir) / "predictions.json").string();
    if (communicator.rank() == 0) {
      RETURN_IF_ERROR(tasks::WritePredictions(answers, result.predictions));
    }
    const tasks::SquadScore score = tasks::ScoreSquad(data.squad_eval, answers);
    result.metrics = {{"exact_match", score.exact_match}, {"f1", score.f1}};
  } else {
    result.metrics = tasks::GlueMetrics(*data.glue, predicted, data.eval_labels);
  }
  return result;
}

// A checkpoint: the weights, the optimizer, and where the run stands.
inline constexpr int kFinetuneStateVersion = 1;

struct FinetuneState {
  int version = kFinetuneStateVersion;
  int64_t step = 0;
  model::SavedRandomState random;
  uint64_t tensorboard_bytes = 0;
  uint64_t eval_bytes = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE_WITH_DEFAULT(FinetuneState, version, step, random,
                                              tensorboard_bytes, eval_bytes)
};

std::string CheckpointDir(const std::string& output_dir) {
  return (fs::path(output_dir) / "checkpoints").string();
}

absl::Status SaveCheckpoint(TaskModel& task, optim::Lamb& optimizer, const FinetuneState& state,
                            const std::string& output_dir) {
  const std::string root = CheckpointDir(output_dir);
  std::error_code error;
  fs::create_directories(root, error);
  if (error) return absl::InternalError(absl::StrCat(root, ": ", error.message()));
  const std::string path = absl::StrFormat("%s/step-%09d", root, state.step);
  ASSIGN_OR_RETURN(AtomicFolderWriter folder, AtomicFolderWriter::Create(path));
  const std::string& dir = folder.temp_path();
  RETURN_IF_ERROR(model::SaveWeights(task.module(), dir + "/model.safetensors"));
  try {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to(dir + "/optimizer.pt");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path, ": saving the optimizer: ", FirstLine(e)));
  }
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/finetune_state.json",
                                      nlohmann::json(state).dump(2) + "\n"));
  RETURN_IF_ERROR(folder.Commit(Existing::kReplace));
  // The newest two are kept.
  std::vector<fs::path> all;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (entry.path().filename().string().rfind("step-", 0) == 0) all.push_back(entry.path());
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + 2 < all.size(); ++i) fs::remove_all(all[i], error);
  return absl::OkStatus();
}

// The newest checkpoint's folder, or "" if none.
std::string NewestCheckpoint(const std::string& output_dir) {
  std::error_code error;
  std::string newest;
  for (const auto& entry : fs::directory_iterator(CheckpointDir(output_dir), error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.find('.') == std::string::npos &&
        fs::exists(entry.path() / "finetune_state.json") && entry.path().string() > newest) {
      newest = entry.path().string();
    }
  }
  return newest;
}

absl::StatusOr<FinetuneState> LoadCheckpoint(TaskModel& task, optim::Lamb& optimizer,
                                             const std::string& dir) {
  RETURN_IF_ERROR(model::LoadWeights(task.module(), dir + "/model.safetensors"));
  ASSIGN_OR_RETURN(std::string text, ReadFile(dir + "/finetune_state.json"));
  FinetuneState state;
  try {
    state = nlohmann::json::parse(text).get<FinetuneState>();
    if (state.version != kFinetuneStateVersion) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, "/finetune_state.json: version ", state.version, "; this packed-bert reads version ",
          kFinetuneStateVersion));
    }
    torch::serialize::InputArchive archive;
    archive.load_from(dir + "/optimizer.pt");
    optimizer.load(archive);
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat(dir, ": a damaged fine-tuning checkpoint (", FirstLine(e), ")"));
  }
  return state;
}

FinetunedModel Described(const TaskData& data) {
  FinetunedModel m;
  if (data.glue == nullptr) {
    m.architecture = "BertForQuestionAnswering";
    return m;
  }
  m.architecture = "BertForSequenceClassification";
  m.regression = data.glue->regression();
  for (const char* label : data.glue->labels) m.labels.emplace_back(label);
  return m;
}

std::string MetricsText(const std::vector<std::pair<std::string, double>>& metrics) {
  std::string out;
  for (const auto& [name, value] : metrics) absl::StrAppendFormat(&out, " %s %.4f", name, value);
  return out;
}

}  // namespace

absl::StatusOr<FinetuneResult> Finetune(const FinetuneSetup& setup) {
  const ExperimentConfig& config = setup.config;
  const tasks::FinetuneConfig& fc = config.finetune;
  auto log = logging::Get("finetune");
  ASSIGN_OR_RETURN(const c10::Device device, ResolveDevice(config.run.device, setup.local_rank));
  RETURN_IF_ERROR(UseDevice(device));
  std::unique_ptr<distributed::Communicator> single;
  if (setup.communicator == nullptr) single = distributed::Communicator::Single();
  distributed::Communicator& comm = setup.communicator ? *setup.communicator : *single;
  const bool writer = comm.rank() == 0;  // rank 0 writes the run's files
  ASSIGN_OR_RETURN(model::Precision precision,
                   model::ResolvePrecision(config.model.precision == model::Precision::kFp8
                                               ? model::Precision::kBf16
                                               : config.model.precision,
                                           device));
  if (config.prepare.vocab.empty()) {
    return absl::InvalidArgumentError("finetune needs prepare.vocab (the model's vocab.txt)");
  }
  ASSIGN_OR_RETURN(data::Vocabulary vocabulary, data::Vocabulary::Load(config.prepare.vocab));
  if (vocabulary.size() > config.model.bert.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.prepare.vocab, " holds ", vocabulary.size(),
                     " tokens, more than model.vocab_size ", config.model.bert.vocab_size()));
  }
  const data::Tokenizer tokenizer(std::make_shared<data::Vocabulary>(std::move(vocabulary)),
                                  config.prepare.lower_case);
  const int max_len = fc.SequenceLength();
  if (max_len > config.model.bert.max_position_embeddings()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "finetune.max_seq_length ", max_len, " is more than model.max_position_embeddings ",
        config.model.bert.max_position_embeddings()));
  }
  const bool training = setup.evaluate_only.empty();
  ASSIGN_OR_RETURN(TaskData data, ReadTask(fc, tokenizer, training));

  // The model, its starting weights, on the device; the head drawn from
  // the run's seed.
  const uint64_t seed = static_cast<uint64_t>(config.run.seed);
  model::Randomness::Seed(seed);
  model::BertOptions options = config.model.bert;
  RETURN_IF_ERROR(model::CheckVarlenKernel(options, device));
  TaskModel task(options, data.glue == nullptr ? HeadKind::kSpan
                          : data.glue->regression() ? HeadKind::kScore
                                                    : HeadKind::kClasses,
                 data.glue == nullptr ? 2 : data.glue->classes());
  if (training) {
    RETURN_IF_ERROR(LoadStart(task, options, fc.init_checkpoint));
  } else {
    RETURN_IF_ERROR(LoadVerifiedWeights(setup.evaluate_only, task.module()));
  }
  task.module().to(device);
  const model::InputPlan plan = model::InputPlan::For(options, device, precision, at::kFloat);

  // Packing: the features' lengths, as pretraining packs its instances.
  const std::string& algorithm = config.packing.algorithm;
  const int depth = algorithm == "none" ? 1 : config.packing.options.max_depth;
  ASSIGN_OR_RETURN(data::PackedSequences eval_packed,
                   data::PackLengths(algorithm, LengthsOf(data.eval), {max_len, depth, seed}));
  FinetuneResult result;
  // Everything is checked: the run's files are written from here on.
  auto start_writing = [&]() -> absl::Status {
    if (!writer) return absl::OkStatus();
    if (setup.on_start) RETURN_IF_ERROR(setup.on_start());
    std::error_code error;
    fs::create_directories(config.run.output_dir, error);
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat("run.output_dir ", config.run.output_dir, ": ", error.message()));
    }
    return absl::OkStatus();
  };
  if (!training) {
    RETURN_IF_ERROR(start_writing());
    ASSIGN_OR_RETURN(Evaluated evaluated, Evaluate(task, data, eval_packed.index, max_len, depth,
                                                   plan, precision, config, tokenizer, comm));
    result.status = "done";
    result.metrics = evaluated.metrics;
    result.predictions = evaluated.predictions;
    return result;
  }
  ASSIGN_OR_RETURN(data::PackedSequences packed,
                   data::PackLengths(algorithm, LengthsOf(data.train), {max_len, depth, seed}));
  const data::PackIndex& index = packed.index;
  result.train_features = data.train.size();
  result.train_rows = index.rows();
  result.packing_factor = packed.run.report.packing_factor;
  // Steps of batch_size sequences on average: the rows that hold as many.
  const int64_t rows_per_step = std::max<int64_t>(
      1, std::llround(static_cast<double>(fc.batch_size) / result.packing_factor));
  const int64_t steps_per_epoch =
      (static_cast<int64_t>(index.rows()) + rows_per_step - 1) / rows_per_step;
  const int64_t total_steps =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(fc.epochs * steps_per_epoch)));
  result.total_steps = total_steps;
  log->info("{}: {} features in {} rows (packing factor {:.3f}); {} rows per step, {} steps",
            algorithm, data.train.size(), index.rows(), result.packing_factor, rows_per_step,
            total_steps);

  // The optimizer: BERT's two groups (no decay on biases and LayerNorm);
  // Adam with decoupled weight decay is LAMB without its trust ratio.
  std::unique_ptr<optim::Lamb> made = MakeFinetuneOptimizer(
      task, config.optim.lamb, fc.optimizer, device.is_cuda() && config.optim.fused);
  optim::Lamb& optimizer = *made;
  optim::ScheduleOptions schedule;
  schedule.kind = optim::ScheduleKind::kPoly;
  schedule.peak_lr = config.optim.schedule.peak_lr;
  schedule.total_steps = total_steps;
  schedule.warmup_steps = static_cast<int64_t>(fc.warmup_proportion * total_steps);
  schedule.power = 1.0;
  schedule.end_lr = 0.0;

  model::Randomness randomness(device);
  model::Randomness::Seed(seed);
  FinetuneState state;
  const std::string newest = NewestCheckpoint(config.run.output_dir);
  if (!setup.resume && !newest.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run.output_dir ", config.run.output_dir, " holds a fine-tuning run (", newest,
        "): --resume continues it, or give another run.output_dir"));
  }
  if (setup.resume) {
    if (newest.empty()) {
      log->info("no checkpoint in {}: a new run", CheckpointDir(config.run.output_dir));
    } else {
      ASSIGN_OR_RETURN(state, LoadCheckpoint(task, optimizer, newest));
      RETURN_IF_ERROR(randomness.Restore(state.random));
      log->info("resumed from {} at step {}", newest, state.step);
    }
  }
  RETURN_IF_ERROR(start_writing());
  std::unique_ptr<TensorBoardLog> tensorboard;  // rank 0's
  std::unique_ptr<AppendLog> eval_log;          // rank 0's
  if (writer) {
    ASSIGN_OR_RETURN(
        tensorboard,
        TensorBoardLog::Open((fs::path(config.run.output_dir) / kTensorBoardFile).string(),
                             state.tensorboard_bytes));
    ASSIGN_OR_RETURN(eval_log,
                     AppendLog::Open((fs::path(config.run.output_dir) / "eval.jsonl").string(),
                                     state.eval_bytes, WholeLines));
  }
  auto wall = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  auto save = [&](int64_t step) -> absl::Status {
    if (!writer) return absl::OkStatus();
    state.step = step;
    state.random = randomness.Save();
    RETURN_IF_ERROR(tensorboard->Sync());
    RETURN_IF_ERROR(eval_log->Sync());
    state.tensorboard_bytes = tensorboard->bytes();
    state.eval_bytes = eval_log->bytes();
    return SaveCheckpoint(task, optimizer, state, config.run.output_dir);
  };
  auto evaluate = [&](int64_t step) -> absl::Status {
    ASSIGN_OR_RETURN(Evaluated evaluated, Evaluate(task, data, eval_packed.index, max_len, depth,
                                                   plan, precision, config, tokenizer, comm));
    result.metrics = evaluated.metrics;
    result.predictions = evaluated.predictions;
    nlohmann::ordered_json line;
    line["step"] = step;
    line["epoch"] = static_cast<double>(step) / static_cast<double>(steps_per_epoch);
    std::vector<Scalar> scalars;
    for (const auto& [name, value] : evaluated.metrics) {
      line[name] = value;
      scalars.emplace_back("eval/" + name, value);
    }
    if (!writer) return absl::OkStatus();
    RETURN_IF_ERROR(eval_log->Append(line.dump()));
    RETURN_IF_ERROR(tensorboard->Write(step, scalars, wall()));
    log->info("evaluation at step {}:{}", step, MetricsText(evaluated.metrics));
    return absl::OkStatus();
  };

  double session_tokens = 0, session_seconds = 0, loss_sum = 0, correct = 0, sequences = 0;
  int64_t step = state.step;
  std::vector<uint64_t> order;
  int64_t order_epoch = -1;
  result.status = "done";
  while (step < total_steps) {
    // A signal reaches the ranks at different moments: they agree on it,
    // so that all stop after the same step.
    bool stop = setup.stop_requested && setup.stop_requested();
    if (comm.world_size() > 1) stop = comm.Sum({stop ? 1.0 : 0.0})[0] > 0;
    if (stop) {
      RETURN_IF_ERROR(save(step));
      log->info("stopped at step {}; `--resume` continues", step);
      result.status = "interrupted";
      break;
    }
    const int64_t epoch = step / steps_per_epoch, k = step % steps_per_epoch;
    if (epoch != order_epoch) {
      order = EpochOrder(index.rows(), seed, epoch);
      order_epoch = epoch;
    }
    const size_t begin = static_cast<size_t>(k * rows_per_step);
    const auto rows = RowsOf(index, order, begin,
                             std::min(order.size(), begin + static_cast<size_t>(rows_per_step)));
    const auto started = std::chrono::steady_clock::now();
    // The step's micro-batches (finetune.micro_batch_rows rows each, or
    // one per rank) over the ranks: rank r takes micro-batches r, r + world,
    // ...
    StepShare share;
    for (const auto& row : rows) share.step_sequences += static_cast<double>(row.size());
    const size_t world = static_cast<size_t>(comm.world_size());
    const size_t per_micro = fc.micro_batch_rows > 0
                                 ? static_cast<size_t>(fc.micro_batch_rows)
                                 : (rows.size() + world - 1) / world;
    std::vector<tasks::TaskBatch> targets;
    std::vector<MicroBatch> batches;
    std::vector<uint64_t> indices;
    for (size_t m = 0, first = 0; first < rows.size(); ++m, first += per_micro) {
      if (m % world != static_cast<size_t>(comm.rank())) continue;
      const std::vector<std::vector<int64_t>> part(
          rows.begin() + static_cast<std::ptrdiff_t>(first),
          rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), first + per_micro)));
      ASSIGN_OR_RETURN(tasks::TaskBatch made,
                       tasks::MakeTaskBatch(data.train, part, max_len, depth, task.head()));
      ASSIGN_OR_RETURN(MicroBatch prepared, Prepare(made.batch, plan));
      targets.push_back(std::move(made));
      batches.push_back(std::move(prepared));
      indices.push_back(m);
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      share.parts.push_back({&targets[i], &batches[i], indices[i]});
    }
    const double lr = optim::LearningRate(schedule, step);
    ASSIGN_OR_RETURN(const FinetuneStepResult stepped,
                     FinetuneStep(task, optimizer, share, plan, precision, lr,
                                  config.optim.max_grad_norm, randomness, comm));
    if (!std::isfinite(stepped.loss)) {
      return absl::InternalError(absl::StrCat(
          "fine-tuning step ", step, ": the loss is ", stepped.loss,
          "; try a lower optim.lr (the last checkpoint is in ", CheckpointDir(config.run.output_dir),
          ")"));
    }
    const double loss_value = stepped.loss;
    correct += stepped.correct;
    session_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    session_tokens += stepped.tokens;
    loss_sum += loss_value * share.step_sequences;
    sequences += share.step_sequences;
    ++step;
    ++result.steps;
    FaultPoint("after-step", step, comm.rank());
    if (step % fc.log_every_steps == 0 || step == total_steps) {
      const double accuracy = sequences > 0 ? correct / sequences : 0;
      log->info("step {}/{} loss {:.4f} {} {:.4f} lr {:.3g} {:.0f} tokens/s", step, total_steps,
                loss_sum / sequences, task.head() == HeadKind::kSpan ? "span_accuracy" : "accuracy",
                accuracy, lr, session_seconds > 0 ? session_tokens / session_seconds : 0);
      if (writer) {
        RETURN_IF_ERROR(tensorboard->Write(
            step, {{"train/loss", loss_sum / sequences}, {"train/lr", lr},
                   {"train/accuracy", accuracy}},
            wall()));
      }
      loss_sum = correct = sequences = 0;
    }
    const bool epoch_end = step % steps_per_epoch == 0 || step == total_steps;
    if (epoch_end) RETURN_IF_ERROR(evaluate(step));
    if (epoch_end || (fc.checkpoint_every_steps > 0 && step % fc.checkpoint_every_steps == 0)) {
      RETURN_IF_ERROR(save(step));
    }
  }
  result.train_seconds = session_seconds;
  result.tokens_per_second = session_seconds > 0 ? session_tokens / session_seconds : 0;
  if (result.status == "done" && result.metrics.empty()) RETURN_IF_ERROR(evaluate(step));
  if (result.status == "done" && setup.export_model && writer) {
    result.model_dir = (fs::path(config.run.output_dir) / "model").string();
    RETURN_IF_ERROR(setup.export_model(task.module(), Described(data), result.model_dir));
  }
  return result;
}

}  // namespace pbert::train
