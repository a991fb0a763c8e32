// Pretraining as a task (tasks/task.h): the masked-LM and next-sentence
// heads over an instance store (data.store, its rows from data.pack_index or
// packed now) and a fixed eval set (data.eval), each sequence's losses
// summed and divided by the step's totals (model/losses.h), and MLPerf's
// evaluation: the masked-LM accuracy over every masked token of the eval
// set.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "model/losses.h"
#include "tasks/tasks.h"

namespace pbert::tasks {

// A pretraining step's or evaluation's sums on the host, in
// kPretrainingSums' order, and what they give.
struct PretrainingMetrics {
  double mlm_loss = 0;           // summed MLM cross-entropy of every masked token
  double mlm_sequence_loss = 0;  // summed per-sequence mean MLM cross-entropy
  double mlm_tokens = 0;
  double mlm_sequences = 0;
  double mlm_correct = 0;
  double nsp_loss = 0;
  double nsp_sequences = 0;
  double nsp_correct = 0;

  // `sums`: SumNames()' order.
  static PretrainingMetrics From(const std::vector<double>& sums);

  double MlmAccuracy() const { return mlm_tokens > 0 ? mlm_correct / mlm_tokens : 0.0; }
  double NspAccuracy() const { return nsp_sequences > 0 ? nsp_correct / nsp_sequences : 0.0; }
  double MlmLossPerToken() const { return mlm_tokens > 0 ? mlm_loss / mlm_tokens : 0.0; }
  double MlmLossPerSequence() const {
    return mlm_sequences > 0 ? mlm_sequence_loss / mlm_sequences : 0.0;
  }
  double NspLoss() const { return nsp_sequences > 0 ? nsp_loss / nsp_sequences : 0.0; }
};

// Pretraining's tensors of Inputs::task, in order: each used masked-LM
// slot's label (kNoLabel in a static shape's unused slot) and owner (the
// [B,D] sequence slot it belongs to), and each sequence slot's NSP label.
enum PretrainingTensor { kMlmLabel, kMlmOwner, kNspLabel, kPretrainingTensors };
// Its totals (Task::TotalNames), in order: masked tokens, sequences with
// one, sequences.
enum PretrainingTotal { kTotalMlmTokens, kTotalMlmSequences, kTotalSequences, kPretrainingTotals };

// Pretraining's part of a micro-batch's inputs, laid out for `plan` as
// train::MakeInputs lays out the rest: where the masked-LM head looks
// (Inputs::mlm_token) and the losses' targets (Inputs::task, read back by
// PretrainingTargetsOf, in PretrainingTensor's order), with static shapes
// padded to the batch's B*M masked-LM slots. Returns the micro-batch's
// totals (PretrainingTotals).
model::StepTotals AddPretrainingInputs(const data::PackedBatch& batch,
                                       const model::InputPlan& plan, model::Inputs* inputs);
model::PretrainingTargets PretrainingTargetsOf(const model::Inputs& inputs);

// The counts a pretraining step divides its losses by, of one micro-batch
// (from the host fields the loader computed; model::StepTotals), and
// the same as the task's Totals: masked tokens, sequences with one,
// sequences.
model::StepTotals PretrainingTotals(const data::PackedBatch& batch);

// The architecture of pretraining's Hugging Face export (config.json's
// "architectures").
inline constexpr char kPretrainingArchitecture[] = "BertForPreTraining";

// Whether `name` is a parameter of pretraining's heads (cls.*: the masked
// LM and next sentence heads), which no fine-tuned model holds.
bool IsPretrainingHead(const std::string& name);

// The pretraining task of `setup` (setup.task is ignored): its store and
// rows opened and checked, its eval set if data.eval names one. Writes
// nothing.
absl::StatusOr<std::unique_ptr<Task>> MakePretraining(const TaskSetup& setup);

// A pretraining task over sets given whole (score, benchmarks, tests): no
// training set, `evaluation` to evaluate; the MLM loss in `mode` (score's
// mlm_loss).
std::unique_ptr<Task> PretrainingOn(std::vector<PackedSet> evaluation,
                                    model::MlmLossMode mode = model::MlmLossMode::kPerToken);

}  // namespace pbert::tasks
