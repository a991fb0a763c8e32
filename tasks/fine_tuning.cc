#include "tasks/fine_tuning.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
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
    for (const std::vector<int32_t>* field : {&f.sequence.input_ids, &f.sequence.segment_ids}) {
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

class FineTuningTask : public Task {
 public:
  FineTuningTask(std::string name, std::unique_ptr<PackedSet> train,
                 std::vector<PackedSet> evaluation, FineTuning parts)
      : Task(std::move(name), std::move(train), std::move(evaluation)), parts_(std::move(parts)) {}

  TaskModel MakeModel(const model::BertOptions& options) const override {
    if (parts_.head == HeadKind::kSpan) {
      auto impl = std::make_shared<model::BertForQuestionAnsweringImpl>(options);
      return {impl, impl->bert};
    }
    auto impl = std::make_shared<model::BertForSequenceClassificationImpl>(options, parts_.labels);
    return {impl, impl->bert};
  }
  bool Trains(const std::string& name) const override {
    // Hugging Face's BertForQuestionAnswering has no pooler: the span head
    // leaves it untrained (and unexported).
    return parts_.head != HeadKind::kSpan || name.rfind("bert.pooler.", 0) != 0;
  }
  absl::Status AddInputs(const PackedSet& set, const data::PackedBatch& batch,
                         const model::InputPlan& plan, model::Inputs* inputs) const override {
    if (set.features == nullptr) {
      return absl::InternalError(absl::StrCat(set.name, " has no features"));
    }
    return parts_.head == HeadKind::kSpan
               ? AddSpanInputs(*set.features, batch, plan, inputs)
               : AddClassInputs(*set.features, parts_.head, batch, inputs);
  }
  Outputs Forward(torch::nn::Module& model, const model::Inputs& inputs) const override {
    if (parts_.head == HeadKind::kSpan) {
      const model::SpanLogitsTensor spans =
          model.as<model::BertForQuestionAnsweringImpl>()->forward(inputs);
      return {spans.start, spans.end};
    }
    return {model.as<model::BertForSequenceClassificationImpl>()->forward(inputs)};
  }
  MicroBatchSums Sums(const Outputs& outputs, const model::Inputs& inputs,
                      const at::Tensor& totals) const override {
    const TaskSums sums = parts_.head == HeadKind::kSpan
                              ? SpanSums({outputs[0], outputs[1]}, inputs)
                              : ClassSums(outputs[0], inputs, parts_.head);
    // Each sequence's loss over the step's sequences (model::TotalsTensor's
    // third count).
    const at::Tensor loss = sums.loss / totals[2].clamp_min(1.0).to(sums.loss.scalar_type());
    return {loss, at::stack({sums.sequences.detach(), sums.correct.detach()})};
  }
  const std::vector<std::string>& SumNames() const override { return FineTuningSumNames(); }
  Metrics TrainMetrics(const std::vector<double>& sums) const override {
    if (parts_.head == HeadKind::kScore) return {};
    return {{AccuracyName(), sums[0] > 0 ? sums[1] / sums[0] : 0.0}};
  }
  double TrainingFlops(const model::BertOptions& options,
                       const model::BatchWork& work) const override {
    const double h = static_cast<double>(options.hidden_size());
    // The span head over every token, or the pooler and classifier over
    // every sequence.
    const double head = parts_.head == HeadKind::kSpan
                            ? work.tokens * 2 * h
                            : work.sequences * (h * h + h * static_cast<double>(parts_.labels));
    return model::TrainingFlopsOf(model::EncoderMacs(options, work) + head);
  }
  std::unique_ptr<SetEvaluation> Evaluate(const PackedSet& set,
                                          const c10::Device& device) const override {
    return parts_.evaluate(set, device);
  }
  ExportHead Export() const override { return parts_.export_head; }

 private:
  const char* AccuracyName() const {
    return parts_.head == HeadKind::kSpan ? "span_accuracy" : "accuracy";
  }

  FineTuning parts_;
};

}  // namespace

std::unique_ptr<Task> MakeFineTuningTask(std::string name, std::unique_ptr<PackedSet> train,
                                         std::vector<PackedSet> evaluation, FineTuning parts) {
  return std::make_unique<FineTuningTask>(std::move(name), std::move(train), std::move(evaluation),
                                          std::move(parts));
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
        "GLUE)"));
  }
  if (max_len > setup.model.bert.max_position_embeddings()) {
    return absl::InvalidArgumentError(absl::StrCat("finetune.max_seq_length ", max_len,
                                                   " is more than model.max_position_embeddings ",
                                                   setup.model.bert.max_position_embeddings()));
  }
  return std::make_shared<const data::Tokenizer>(
      std::make_shared<data::Vocabulary>(std::move(vocabulary)), setup.prepare.lower_case);
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
