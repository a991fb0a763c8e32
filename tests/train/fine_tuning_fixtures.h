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
#include "tasks/multi_label.h"
#include "tasks/token_classification.h"
#include "tests/data/random_instances.h"
#include "tests/model/fixtures.h"

namespace pbert::tasks::testing {

// The heads the tests run: the span head, a classifier of three classes,
// one score, a token classifier of five tags, a multi-label classifier of
// four labels.
enum class HeadKind { kSpan, kClasses, kScore, kTokens, kMultiLabel };

inline std::string HeadName(HeadKind head) {
  switch (head) {
    case HeadKind::kSpan: return "Span";
    case HeadKind::kClasses: return "Classes";
    case HeadKind::kScore: return "Score";
    case HeadKind::kTokens: return "Tokens";
    case HeadKind::kMultiLabel: return "MultiLabel";
  }
  return "";
}

// `count` features of 6 to 30 tokens.
inline std::vector<Feature> RandomFeatures(uint32_t seed, int count = 24) {
  data::Rng random(seed, 0);
  data::Rng tags(seed, 1);  // apart, so that the spans and classes stay as they were
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
    // A tag on about half the tokens (none on [CLS] and the last), and one
    // to three of four labels.
    for (int t = 0; t < n; ++t) {
      const bool tagged = t > 0 && t + 1 < n && tags.Int(0, 1) == 1;
      f.token_labels.push_back(tagged ? static_cast<int32_t>(tags.Int(0, 4)) : -1);
    }
    for (int32_t k = 0; k < 4; ++k) {
      if (tags.Int(0, 1) == 1 || (k == 3 && f.label_set.empty())) f.label_set.push_back(k);
    }
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
  parts.evaluate = [](const PackedSet&, const c10::Device&) {
    return std::unique_ptr<SetEvaluation>();
  };
  auto train = std::make_unique<PackedSet>(std::move(*set));
  if (head == HeadKind::kSpan) {
    parts.export_head.pooler = false;
    return MakeSpanTask("test", std::move(train), {}, std::move(parts));
  }
  if (head == HeadKind::kTokens) {
    parts.export_head.pooler = false;
    return MakeTokenClassTask("test", std::move(train), {}, std::move(parts), 5);
  }
  if (head == HeadKind::kMultiLabel) {
    return MakeMultiLabelTask("test", std::move(train), {}, std::move(parts), 4);
  }
  if (head == HeadKind::kScore) parts.export_head.problem_type = "regression";
  return MakeClassTask("test", std::move(train), {}, std::move(parts),
                       head == HeadKind::kScore ? 1 : 3);
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
