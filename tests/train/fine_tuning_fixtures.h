// Fine-tuning for the tests: random features of the tiny models'
// vocabulary (an answer span inside each, a class of three), a task of
// them as `finetune` makes one (tasks/fine_tuning.h), and the micro-batches
// of its steps laid out as the loader lays them out.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "data/random.h"
#include "tasks/fine_tuning.h"
#include "tests/data/random_instances.h"
#include "tests/model/fixtures.h"

namespace pbert::tasks::testing {

// `count` features of 6 to 30 tokens.
inline std::vector<Feature> RandomFeatures(uint32_t seed, int count = 24) {
  data::Rng random(seed, 0);
  std::vector<Feature> out;
  for (data::Instance& instance : pbert::testing::RandomInstances(count, 6, 30, 97, seed)) {
    Feature f;
    instance.masked_positions.clear();
    instance.masked_ids.clear();
    f.sequence = instance;
    const int n = instance.length();
    f.start = static_cast<int32_t>(random.Int(0, n - 1));
    f.end = std::min<int32_t>(n - 1, f.start + static_cast<int32_t>(random.Int(0, 3)));
    f.label = static_cast<float>(random.Int(0, 2));
    out.push_back(std::move(f));
  }
  return out;
}

// A task of `head` (three classes, or a score) that trains on `features`,
// packed by lpfhp into rows of at most `depth` of them and `max_len`
// tokens.
inline std::shared_ptr<const Task> TaskOf(std::vector<Feature> features, HeadKind head, int depth,
                                          int max_len = 64) {
  data::DataConfig data;
  data::PrepareOptions prepare;
  data::PackingConfig packing;
  packing.algorithm = depth == 1 ? "none" : "lpfhp";
  packing.options.max_depth = depth;
  model::ModelConfig model;
  model.bert = model::testing::TinyOptions();
  FinetuneConfig finetune;
  finetune.max_seq_length = max_len;
  const TaskSetup setup{data, prepare, packing, model, finetune, 1, true, {}, true};
  auto set = PackFeatures("train", "test", "features", std::move(features), setup);
  if (!set.ok()) throw std::runtime_error(std::string(set.status().message()));
  FineTuning parts;
  parts.head = head;
  parts.labels = head == HeadKind::kScore ? 1 : 3;
  parts.evaluate = [](const PackedSet&, const c10::Device&) {
    return std::unique_ptr<SetEvaluation>();
  };
  return MakeFineTuningTask("test", std::make_unique<PackedSet>(std::move(*set)), {},
                            std::move(parts));
}

// Step `step`'s micro-batches of `set`: `batches` of `rows_per_batch` rows
// each, from its rows in order (wrapping around), their records named.
inline std::vector<data::PackedBatch> StepBatches(const PackedSet& set, int step,
                                                  int rows_per_batch, int batches) {
  std::vector<data::PackedBatch> out;
  const uint64_t rows = set.rows->rows();
  for (int k = 0; k < batches; ++k) {
    std::vector<std::vector<const data::Instance*>> layout;
    std::vector<int64_t> records;
    for (int r = 0; r < rows_per_batch; ++r) {
      const uint64_t row = (static_cast<uint64_t>((step * batches + k) * rows_per_batch + r)) % rows;
      layout.emplace_back();
      for (uint32_t id : set.rows->Row(row)) {
        layout.back().push_back(&(*set.features)[id].sequence);
        records.push_back(id);
      }
    }
    auto batch = data::MakeBatch(layout, set.shape);
    if (!batch.ok()) throw std::runtime_error(std::string(batch.status().message()));
    batch->records = std::move(records);
    out.push_back(std::move(*batch));
  }
  return out;
}

}  // namespace pbert::tasks::testing
