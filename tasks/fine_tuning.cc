#include "tasks/fine_tuning.h"

#include <ATen/ATen.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/logging.h"
#include "common/status.h"
#include "model/task_heads.h"

namespace pbert::tasks {
namespace {

const std::vector<std::string>& FineTuningSumNames() {
  static const std::vector<std::string> names = {"sequences", "correct"};
  return names;
}

// Sequences and targets, whatever file they came from: a resume compares it.
uint64_t FeaturesChecksum(const std::vector<Feature>& features) {
  ChecksumStream checksum;
  auto add = [&](const void* data, size_t bytes) {
    checksum.Update({static_cast<const uint8_t*>(data), bytes});
  };
  for (const Feature& f : features) {
    for (const std::vector<int32_t>* field :
         {&f.sequence.input_ids, &f.sequence.segment_ids, &f.token_labels, &f.label_set}) {
      const uint64_t n = field->size();
      add(&n, sizeof(n));
      add(field->data(), n * sizeof(int32_t));
    }
    add(&f.start, sizeof(f.start));
    add(&f.end, sizeof(f.end));
    add(&f.label, sizeof(f.label));
  }
  return checksum.Digest();
}

MicroBatchSums SumsOf(const TaskSums& sums, const at::Tensor& loss) {
  return {loss, at::stack({sums.sequences.detach(), sums.correct.detach()})};
}

Metrics AccuracyOf(const char* name, const std::vector<double>& sums) {
  return {{name, sums[0] > 0 ? sums[1] / sums[0] : 0.0}};
}

class SpanTask : public FineTuningTask {
 public:
  using FineTuningTask::FineTuningTask;

  TaskModel MakeModel(const model::BertOptions& options) const override {
    auto impl = std::make_shared<model::BertForQuestionAnsweringImpl>(options);
    return {impl, impl->bert};
  }
  absl::StatusOr<Totals> AddInputs(const PackedSet& set, const data::PackedBatch& batch,
                                   const model::InputPlan& plan,
                                   model::Inputs* inputs) const override {
    ASSIGN_OR_RETURN(const std::vector<Feature>* features, FeaturesOf(set));
    RETURN_IF_ERROR(AddSpanInputs(*features, batch, plan, inputs));
    return Totals{static_cast<double>(batch.sequences.size())};
  }
  Outputs Forward(torch::nn::Module& model, const model::Inputs& inputs) const override {
    const model::SpanLogitsTensor spans = ModuleAs<model::BertForQuestionAnsweringImpl>(model)
                                              .forward(inputs);
    return {spans.start, spans.end};
  }
  MicroBatchSums Sums(const Outputs& outputs, const model::Inputs& inputs,
                      const at::Tensor& totals) const override {
    const TaskSums sums = SpanSums({outputs[0], outputs[1]}, inputs);
    return SumsOf(sums, PerStepSequences(sums.loss, totals));
  }
  const std::vector<std::string>& SumNames() const override { return FineTuningSumNames(); }
  Metrics TrainMetrics(const std::vector<double>& sums) const override {
    return AccuracyOf("span_accuracy", sums);
  }
  double TrainingFlops(const model::BertOptions& options, const model::BatchWork& work,
                       const Totals&) const override {
    // The span head over every token.
    const double h = static_cast<double>(options.hidden_size());
    return model::TrainingFlopsOf(model::EncoderMacs(options, work) + work.tokens * 2 * h);
  }
};

class ClassTask : public FineTuningTask {
 public:
  ClassTask(std::string name, std::unique_ptr<PackedSet> train, std::vector<PackedSet> evaluation,
            FineTuning parts, int64_t labels)
      : FineTuningTask(std::move(name), std::move(train), std::move(evaluation), parts),
        labels_(labels),
        score_(parts.export_head.problem_type == "regression") {}

  TaskModel MakeModel(const model::BertOptions& options) const override {
    auto impl = std::make_shared<model::BertForSequenceClassificationImpl>(options, labels_);
    return {impl, impl->bert};
  }
  absl::StatusOr<Totals> AddInputs(const PackedSet& set, const data::PackedBatch& batch,
                                   const model::InputPlan&, model::Inputs* inputs) const override {
    ASSIGN_OR_RETURN(const std::vector<Feature>* features, FeaturesOf(set));
    RETURN_IF_ERROR(AddClassInputs(*features, score_, batch, inputs));
    return Totals{static_cast<double>(batch.sequences.size())};
  }
  Outputs Forward(torch::nn::Module& model, const model::Inputs& inputs) const override {
    return {ModuleAs<model::BertForSequenceClassificationImpl>(model).forward(inputs)};
  }
  MicroBatchSums Sums(const Outputs& outputs, const model::Inputs& inputs,
                      const at::Tensor& totals) const override {
    const TaskSums sums = ClassSums(outputs[0], inputs, score_);
    return SumsOf(sums, PerStepSequences(sums.loss, totals));
  }
  const std::vector<std::string>& SumNames() const override { return FineTuningSumNames(); }
  Metrics TrainMetrics(const std::vector<double>& sums) const override {
    if (score_) return {};
    return AccuracyOf("accuracy", sums);
  }
  double TrainingFlops(const model::BertOptions& options, const model::BatchWork& work,
                       const Totals&) const override {
    return ClassifierFlops(options, work, labels_);
  }

 private:
  int64_t labels_;
  bool score_;
};

}  // namespace

bool FineTuningTask::Trains(const std::string& name) const {
  return parts_.export_head.pooler || name.rfind("bert.pooler.", 0) != 0;
}

const std::vector<std::string>& FineTuningTask::TotalNames() const {
  static const std::vector<std::string> names = {"sequences"};
  return names;
}

absl::StatusOr<const std::vector<Feature>*> FineTuningTask::FeaturesOf(const PackedSet& set) {
  if (set.features == nullptr) {
    return absl::InternalError(absl::StrCat(set.name, " has no features"));
  }
  return set.features.get();
}

at::Tensor FineTuningTask::PerStepSequences(const at::Tensor& loss, const at::Tensor& totals) {
  return loss / totals[0].clamp_min(1.0).to(loss.scalar_type());
}

double ClassifierFlops(const model::BertOptions& options, const model::BatchWork& work,
                       int64_t labels) {
  // The pooler and the classifier over every sequence.
  const double h = static_cast<double>(options.hidden_size());
  return model::TrainingFlopsOf(model::EncoderMacs(options, work) +
                                work.sequences * (h * h + h * static_cast<double>(labels)));
}

std::unique_ptr<Task> MakeSpanTask(std::string name, std::unique_ptr<PackedSet> train,
                                   std::vector<PackedSet> evaluation, FineTuning parts) {
  return std::make_unique<SpanTask>(std::move(name), std::move(train), std::move(evaluation),
                                    std::move(parts));
}

std::unique_ptr<Task> MakeClassTask(std::string name, std::unique_ptr<PackedSet> train,
                                    std::vector<PackedSet> evaluation, FineTuning parts,
                                    int64_t labels) {
  return std::make_unique<ClassTask>(std::move(name), std::move(train), std::move(evaluation),
                                     std::move(parts), labels);
}

absl::StatusOr<std::shared_ptr<const data::Tokenizer>> FineTuningTokenizer(const TaskSetup& setup) {
  const FinetuneConfig& c = setup.finetune;
  // Training evaluates each epoch on the dev file; an evaluation of given
  // weights scores the dev file, predicts the file to predict, or both.
  const bool eval =
      setup.training ? c.eval_file.empty() : c.eval_file.empty() && c.predict_file.empty();
  if (eval || (setup.training && c.train_file.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("finetune needs finetune.", eval ? "eval_file" : "train_file", " (the task's ",
                     eval ? "dev" : "training", " file as distributed)",
                     eval && !setup.training ? ", or finetune.predict_file (--predict)" : ""));
  }
  if (setup.prepare.vocab.empty()) {
    return absl::InvalidArgumentError("finetune needs prepare.vocab (the model's vocab.txt)");
  }
  ASSIGN_OR_RETURN(data::Vocabulary vocabulary, data::Vocabulary::Load(setup.prepare.vocab));
  if (vocabulary.size() > setup.model.bert.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(setup.prepare.vocab, " holds ", vocabulary.size(),
                     " tokens, more than model.vocab_size ", setup.model.bert.vocab_size()));
  }
  const int max_len = setup.finetune.SequenceLength();
  // [CLS], a token of each text and its [SEP]: a pair's least, with room.
  constexpr int kShortest = 8;
  if (max_len < kShortest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "finetune.max_seq_length ", max_len, " leaves no room for a sequence ([CLS], the text, ",
        "[SEP]); give ", kShortest, " or more, or 0 for the task's own (384 for SQuAD, 128 for ",
        "the others)"));
  }
  if (max_len > setup.model.bert.max_position_embeddings()) {
    return absl::InvalidArgumentError(absl::StrCat("finetune.max_seq_length ", max_len,
                                                   " is more than model.max_position_embeddings ",
                                                   setup.model.bert.max_position_embeddings()));
  }
  return std::make_shared<const data::Tokenizer>(
      std::make_shared<data::Vocabulary>(std::move(vocabulary)), setup.prepare.lower_case);
}

absl::Status CheckOneFileOfEach(const TaskSetup& setup) {
  const FinetuneConfig& c = setup.finetune;
  for (const auto& [key, path] :
       {std::pair{"finetune.eval_mismatched_file", c.eval_mismatched_file},
        std::pair{"finetune.predict_mismatched_file", c.predict_mismatched_file}}) {
    if (!path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, " is MNLI's second file; task ", c.task, " has one of each: leave it empty"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ListOfLabels(const std::string& labels) {
  std::vector<std::string> out;
  for (absl::string_view label : absl::StrSplit(labels, ',')) {
    label = absl::StripAsciiWhitespace(label);
    if (!label.empty()) out.emplace_back(label);
  }
  return out;
}

absl::StatusOr<PackedSet> PackFeatures(std::string name, std::string key, std::string path,
                                       std::vector<Feature> features, const TaskSetup& setup) {
  PackedSet set;
  set.name = std::move(name);
  set.key = std::move(key);
  set.path = std::move(path);
  const int max_len = setup.finetune.SequenceLength();
  const std::string& algorithm = setup.packing.algorithm;
  const int depth = algorithm == "none" ? 1 : setup.packing.options.max_depth;
  set.shape = {max_len, depth, 0};
  set.checksum = FeaturesChecksum(features);
  std::vector<data::Instance> sequences;
  std::vector<uint16_t> lengths;
  sequences.reserve(features.size());
  for (const Feature& f : features) {
    sequences.push_back(f.sequence);
    lengths.push_back(static_cast<uint16_t>(f.sequence.length()));
  }
  data::InstanceLimits limits;
  limits.vocab_size = static_cast<uint32_t>(setup.model.bert.vocab_size());
  limits.max_len = static_cast<uint32_t>(max_len);
  ASSIGN_OR_RETURN(set.sequences,
                   data::MemorySource::Create(set.path, std::move(sequences), limits));
  data::PackingOptions options = setup.packing.options;
  options.max_len = max_len;
  options.max_depth = depth;
  options.seed = setup.seed;
  ASSIGN_OR_RETURN(data::PackedSequences packed, data::PackLengths(algorithm, lengths, options));
  set.rows = std::make_shared<const data::PackIndex>(std::move(packed.index));
  set.features = std::make_shared<const std::vector<Feature>>(std::move(features));
  return set;
}

}  // namespace pbert::tasks
