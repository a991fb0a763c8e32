// The seam between the loader and the model: each micro-batch the loader
// lays out (data::PackedBatch, host tensors) becomes the model's Inputs
// (model/inputs.h) on the training device, on the loader's threads, with
// what the host keeps of it: the counts its losses are divided by and the
// work its FLOPs are counted from. The training step, the evaluator and
// the benchmarks take MicroBatches; nothing on the training thread lays out
// attention or copies a batch to the device (docs/architecture.md).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "data/loader.h"
#include "model/flops.h"
#include "model/inputs.h"
#include "tasks/task.h"

namespace pbert::train {

struct MicroBatch {
  model::Inputs inputs;      // on the plan's device
  tasks::Totals totals;      // the task's (Task::TotalNames)
  model::BatchWork work;     // what the model computes on it, for its FLOPs
  int64_t rows = 0;          // B
  int64_t width = 0;         // S: tokens per row, padding included
  int64_t tokens = 0;        // real tokens
  // Its number among the step's micro-batches over all ranks, which its
  // dropout is drawn from (model::Randomness::Step::MicroBatch).
  uint64_t index = 0;
};

// The task whose tensors and totals a micro-batch of `set` carries beside
// the model's inputs (tasks::Task::AddInputs); `set` null: the task's
// training set (or none: pretraining's instances hold their targets). A
// micro-batch prepared without a task has no totals and cannot be trained.
struct TaskInputs {
  const tasks::Task* task = nullptr;
  const tasks::PackedSet* set = nullptr;
};

// `batch`'s inputs in `plan`'s layout, on the host (page-locked when the
// plan's device is a GPU): what every task's model reads; a task's own
// (its targets, where its head looks) are its AddInputs', run by Prepare.
model::Inputs MakeInputs(const data::PackedBatch& batch, const model::InputPlan& plan);

// The MicroBatch of `batch` (host tensors) on `plan.device`, with the
// task's tensors: the host work and a non-blocking copy from page-locked
// memory on a GPU. Errors of LibTorch or the device come back as a status.
absl::StatusOr<MicroBatch> Prepare(const data::PackedBatch& batch, const model::InputPlan& plan,
                                   const TaskInputs& task = {});
// The micro-batches of one rank, numbered from 0.
absl::StatusOr<std::vector<MicroBatch>> Prepare(const std::vector<data::PackedBatch>& batches,
                                                const model::InputPlan& plan,
                                                const TaskInputs& task = {});

// The loader's hook that prepares every micro-batch on its threads; the
// step's MicroBatches are then Prepared(StepBatches). `task` (and its set)
// outlive the loader.
data::LoaderOptions::PrepareFunction Preparer(const model::InputPlan& plan,
                                              const TaskInputs& task = {});
std::vector<MicroBatch> Prepared(data::StepBatches& batches);

// What the model computes on `batch`, for its FLOPs (host fields only).
model::BatchWork WorkOf(const data::PackedBatch& batch);

}  // namespace pbert::train
