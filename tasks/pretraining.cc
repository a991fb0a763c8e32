#include "tasks/pretraining.h"

#include <ATen/ATen.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/store.h"
#include "model/losses.h"

namespace pbert::tasks {
namespace {

// The order of the sums, as PretrainingMetrics holds them.
const std::vector<std::string>& PretrainingSumNames() {
  static const std::vector<std::string> names = {
      "mlm_loss",      "mlm_sequence_loss", "mlm_tokens",    "mlm_sequences",
      "mlm_correct",   "nsp_loss",          "nsp_sequences", "nsp_correct"};
  return names;
}

// The sums of one micro-batch in PretrainingSumNames()' order, float64 on
// their device, detached.
at::Tensor SumsVector(const model::PretrainingSums& s) {
  auto d = [](const at::Tensor& t) { return t.detach().to(at::kDouble); };
  return at::stack({d(s.mlm_loss), d(s.mlm_sequence_loss), d(s.mlm_tokens), d(s.mlm_sequences),
                    d(s.mlm_correct), d(s.nsp_loss), d(s.nsp_sequences), d(s.nsp_correct)});
}

model::PretrainingLogits LogitsOf(const Outputs& outputs) { return {outputs[0], outputs[1]}; }

// The MLPerf evaluation: the sums of every micro-batch of the eval set.
class PretrainingEvaluation : public SetEvaluation {
 public:
  explicit PretrainingEvaluation(const c10::Device& device)
      : sums_(at::zeros({static_cast<int64_t>(PretrainingSumNames().size())},
                        at::TensorOptions().dtype(at::kDouble).device(device))) {}

  void Add(const Outputs& outputs, const model::Inputs& inputs) override {
    sums_ += SumsVector(model::ComputeSums(LogitsOf(outputs), PretrainingTargetsOf(inputs)));
  }
  const at::Tensor& Shared() const override { return sums_; }
  absl::StatusOr<Scored> Score(const at::Tensor& summed) override {
    const at::Tensor host = summed.to(at::kDouble).contiguous();
    const PretrainingMetrics m = PretrainingMetrics::From(
        std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel()));
    Scored scored;
    scored.metrics = {{"mlm_accuracy", m.MlmAccuracy()},
                      {"mlm_loss", m.MlmLossPerToken()},
                      {"nsp_accuracy", m.NspAccuracy()},
                      {"nsp_loss", m.NspLoss()}};
    scored.counts = {{"sequences", m.nsp_sequences},
                     {"masked_tokens", m.mlm_tokens},
                     {"mlm_loss_per_sequence", m.MlmLossPerSequence()}};
    return scored;
  }

 private:
  at::Tensor sums_;
};

class PretrainingTask : public Task {
 public:
  PretrainingTask(std::unique_ptr<PackedSet> train, std::vector<PackedSet> evaluation,
                  model::MlmLossMode mode)
      : Task(kPretraining, std::move(train), std::move(evaluation)), mode_(mode) {}

  TaskModel MakeModel(const model::BertOptions& options) const override {
    auto impl = std::make_shared<model::BertForPreTrainingImpl>(options);
    return {impl, impl->bert};
  }
  absl::StatusOr<Totals> AddInputs(const PackedSet&, const data::PackedBatch& batch,
                                   const model::InputPlan& plan,
                                   model::Inputs* inputs) const override {
    const model::StepTotals t = AddPretrainingInputs(batch, plan, inputs);
    Totals totals(kPretrainingTotals);
    totals[kTotalMlmTokens] = t.mlm_tokens;
    totals[kTotalMlmSequences] = t.mlm_sequences;
    totals[kTotalSequences] = t.nsp_sequences;
    return totals;
  }
  std::string TargetMetric() const override { return "mlm_accuracy"; }
  const std::vector<std::string>& TotalNames() const override {
    static const std::vector<std::string> names = {"mlm_tokens", "mlm_sequences", "sequences"};
    return names;
  }
  Outputs Forward(torch::nn::Module& model, const model::Inputs& inputs) const override {
    const model::PretrainingLogits logits =
        ModuleAs<model::BertForPreTrainingImpl>(model).forward(inputs);
    return {logits.mlm, logits.nsp};
  }
  MicroBatchSums Sums(const Outputs& outputs, const model::Inputs& inputs,
                      const at::Tensor& totals) const override {
    const model::PretrainingSums sums =
        model::ComputeSums(LogitsOf(outputs), PretrainingTargetsOf(inputs));
    return {model::PretrainingLoss(sums, mode_, totals), SumsVector(sums)};
  }
  const std::vector<std::string>& SumNames() const override { return PretrainingSumNames(); }
  Metrics TrainMetrics(const std::vector<double>& sums) const override {
    const PretrainingMetrics m = PretrainingMetrics::From(sums);
    return {{"mlm_loss", m.MlmLossPerToken()},
            {"mlm_accuracy", m.MlmAccuracy()},
            {"nsp_loss", m.NspLoss()},
            {"nsp_accuracy", m.NspAccuracy()}};
  }
  double TrainingFlops(const model::BertOptions& options, const model::BatchWork& work,
                       const Totals& totals) const override {
    return model::PretrainingFlops(options, work, totals.at(kTotalMlmTokens));
  }
  std::unique_ptr<SetEvaluation> Evaluate(const PackedSet&,
                                          const c10::Device& device) const override {
    return std::make_unique<PretrainingEvaluation>(device);
  }
  ExportHead Export() const override { return {kPretrainingArchitecture, {}, "", true}; }

 private:
  model::MlmLossMode mode_;
};

}  // namespace

bool IsPretrainingHead(const std::string& name) { return name.rfind("cls.", 0) == 0; }

model::StepTotals AddPretrainingInputs(const data::PackedBatch& batch,
                                       const model::InputPlan& plan, model::Inputs* inputs) {
  const int64_t S = batch.input_ids.size(1), D = batch.cls_positions.size(1);
  const int64_t M = batch.mlm_positions.size(1);
  const at::Tensor& used = batch.mlm_used;  // [K] used slots among the B*M
  // Static shapes: the K masked tokens, then B*M - K slots that hold none
  // (label kNoLabel, token and owner 0).
  const int64_t unused_slots = plan.static_shapes ? batch.rows() * M - used.numel() : 0;
  const at::Tensor row = used.div(M, "floor");
  inputs->mlm_token = model::PaddedWith(
      plan.attention == model::AttentionKind::kVarlen
          ? batch.mlm_token
          : row * S + batch.mlm_positions.reshape({-1}).index_select(0, used),
      unused_slots, 0);
  const at::Tensor labels = model::PaddedWith(
      batch.mlm_labels.reshape({-1}).index_select(0, used), unused_slots, model::kNoLabel);
  // The sequence slot (row * D + sequence - 1) of each used MLM slot.
  const at::Tensor owner = model::PaddedWith(
      row * D + batch.mlm_sequence.reshape({-1}).index_select(0, used) - 1, unused_slots, 0);
  inputs->task.assign(kPretrainingTensors, at::Tensor());
  inputs->task[kMlmLabel] = labels;
  inputs->task[kMlmOwner] = owner;
  inputs->task[kNspLabel] = batch.nsp_labels;
  return PretrainingTotals(batch);
}

model::PretrainingTargets PretrainingTargetsOf(const model::Inputs& inputs) {
  return {inputs.task.at(kMlmLabel), inputs.task.at(kMlmOwner), inputs.task.at(kNspLabel),
          inputs.slot_valid};
}

model::StepTotals PretrainingTotals(const data::PackedBatch& batch) {
  return {static_cast<double>(batch.mlm_used.numel()), static_cast<double>(batch.masked_sequences),
          static_cast<double>(batch.sequences.size())};
}

namespace {

// `source`'s sequences fit the model and the rows of data.max_seq_len.
absl::Status CheckFits(const data::SequenceSource& source, const TaskSetup& setup,
                       const std::string& what) {
  RETURN_IF_ERROR(model::CheckDataFits(setup.model.bert, source.limits().vocab_size,
                                       source.limits().max_len, what));
  if (source.limits().max_len > setup.data.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds sequences of up to ",
                                                   source.limits().max_len,
                                                   " tokens; data.max_seq_len is ",
                                                   setup.data.max_seq_len, ": raise it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const data::SequenceSource>> OpenStore(const TaskSetup& setup) {
  const std::string& dir = setup.data.store;
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
                   data::InstanceStore::Open(dir, data::StoreChecks::kChecksums, setup.share));
  auto source = std::make_shared<const data::InstanceStore>(std::move(store));
  RETURN_IF_ERROR(CheckFits(*source, setup, dir));
  return source;
}

data::PackingOptions PackingOf(const TaskSetup& setup) {
  data::PackingOptions options = setup.packing.options;
  options.max_len = static_cast<int>(setup.data.max_seq_len);
  options.seed = setup.seed;
  return options;
}

// The training set: data.store with its rows from data.pack_index, or the
// store packed with the packing section.
absl::StatusOr<std::unique_ptr<PackedSet>> TrainSet(const TaskSetup& setup) {
  auto log = logging::Get("train");
  auto set = std::make_unique<PackedSet>();
  set->name = "train";
  set->key = "data.store";
  set->path = setup.data.store;
  ASSIGN_OR_RETURN(set->sequences, OpenStore(setup));
  set->checksum = set->sequences->content_checksum();
  set->shape = {static_cast<int>(setup.data.max_seq_len), setup.packing.options.max_depth, 0};
  if (!setup.data.pack_index.empty()) {
    ASSIGN_OR_RETURN(data::PackIndex index, data::PackIndex::Read(setup.data.pack_index));
    log->info("{}: {} sequences in {} rows", setup.data.pack_index, index.sequences(),
              index.rows());
    set->rows = std::make_shared<const data::PackIndex>(std::move(index));
    return set;
  }
  ASSIGN_OR_RETURN(data::PackedSequences packed,
                   data::PackLengths(setup.packing.algorithm, set->sequences->Lengths(),
                                     PackingOf(setup)));
  const data::PackingReport& r = packed.run.report;
  log->info("packed {} with {}: {} sequences in {} rows, packing factor {:.4f}, efficiency {:.2f}%",
            set->sequences->name(), r.algorithm, r.sequences, r.rows, r.packing_factor,
            100 * r.efficiency);
  set->packed_with = r.algorithm;
  set->rows = std::make_shared<const data::PackIndex>(std::move(packed.index));
  return set;
}

// The eval set of data.eval, packed with the packing section (or one
// sequence a row without train.eval_packed); none without data.eval.
absl::StatusOr<std::vector<PackedSet>> EvalSets(const TaskSetup& setup, const PackedSet* train) {
  if (setup.data.eval.empty()) {
    logging::Get("train")->warn(
        "no data.eval: the run trains without evaluating and cannot reach its target");
    return std::vector<PackedSet>();
  }
  PackedSet set;
  set.name = "eval";
  set.key = "data.eval";
  set.path = setup.data.eval;
  set.shape = {static_cast<int>(setup.data.max_seq_len), setup.packing.options.max_depth, 0};
  ASSIGN_OR_RETURN(set.sequences,
                   data::OpenSequences(setup.data.eval,
                                       static_cast<uint32_t>(setup.model.bert.vocab_size())));
  if (set.sequences->size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.eval ", setup.data.eval,
                     " holds no sequences; give an eval set, or leave "
                     "data.eval empty to train without evaluating"));
  }
  RETURN_IF_ERROR(CheckFits(*set.sequences, setup, setup.data.eval));
  set.checksum = set.sequences->content_checksum();
  if (train != nullptr) {
    const uint64_t train_vocab = train->sequences->vocab_checksum();
    const uint64_t eval_vocab = set.sequences->vocab_checksum();
    if (train_vocab != 0 && eval_vocab != 0 && train_vocab != eval_vocab) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "data.eval %s was made with another vocabulary than data.store %s (vocab_checksum %016x "
          "against %016x in their store.json): prepare both with the same vocab.txt",
          setup.data.eval, setup.data.store, eval_vocab, train_vocab));
    }
  }
  ASSIGN_OR_RETURN(data::PackedSequences packed,
                   data::PackLengths(setup.eval_packed ? setup.packing.algorithm : "none",
                                     set.sequences->Lengths(), PackingOf(setup)));
  set.rows = std::make_shared<const data::PackIndex>(std::move(packed.index));
  std::vector<PackedSet> sets;
  sets.push_back(std::move(set));
  return sets;
}

}  // namespace

PretrainingMetrics PretrainingMetrics::From(const std::vector<double>& sums) {
  PretrainingMetrics m;
  double* fields[] = {&m.mlm_loss,  &m.mlm_sequence_loss, &m.mlm_tokens,    &m.mlm_sequences,
                      &m.mlm_correct, &m.nsp_loss,        &m.nsp_sequences, &m.nsp_correct};
  for (size_t i = 0; i < std::size(fields) && i < sums.size(); ++i) *fields[i] = sums[i];
  return m;
}

absl::StatusOr<std::unique_ptr<Task>> MakePretraining(const TaskSetup& setup) {
  std::unique_ptr<PackedSet> train;
  if (setup.training) {
    ASSIGN_OR_RETURN(train, TrainSet(setup));
  }
  ASSIGN_OR_RETURN(std::vector<PackedSet> evaluation, EvalSets(setup, train.get()));
  return std::make_unique<PretrainingTask>(std::move(train), std::move(evaluation),
                                           setup.model.mlm_loss);
}

std::unique_ptr<Task> PretrainingOn(std::vector<PackedSet> evaluation, model::MlmLossMode mode) {
  return std::make_unique<PretrainingTask>(nullptr, std::move(evaluation), mode);
}

}  // namespace pbert::tasks
