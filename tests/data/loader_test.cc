#include "data/loader.h"

#include <algorithm>
#include <map>
#include <set>

#include "data/packing/report.h"
#include "gtest/gtest.h"
#include "tests/data/random_instances.h"

namespace pbert::data {
namespace {

struct Fixture {
  std::shared_ptr<MemorySource> source;
  std::shared_ptr<const PackIndex> index;
};

// 203 random sequences of 4..40 tokens, packed into rows of 64 (depth <= 4).
Fixture Make(const std::string& algorithm = "lpfhp") {
  auto instances = testing::RandomInstances(203, 4, 40, 100, 7);
  auto source = MemorySource::Create("random", instances, {100, 64, 64});
  EXPECT_TRUE(source.ok()) << source.status();
  std::vector<uint16_t> lengths;
  for (const auto& in : instances) lengths.push_back(static_cast<uint16_t>(in.length()));
  auto packed = PackLengths(algorithm, lengths, {64, 4, 1});
  EXPECT_TRUE(packed.ok()) << packed.status();
  return {*source, std::make_shared<const PackIndex>(std::move(packed->index))};
}

LoaderOptions Options(int64_t rows, int64_t accumulation, int rank, int world) {
  LoaderOptions o;
  o.rows_per_batch = rows;
  o.batches_per_step = accumulation;
  o.shape = {64, 4, 0};
  o.rank = rank;
  o.world_size = world;
  o.seed = 3;
  o.threads = 2;
  return o;
}

// A hash of every sequence of every batch, in order: it identifies which
// sequences were served.
std::vector<std::vector<int64_t>> Fingerprints(const StepBatches& step) {
  std::vector<std::vector<int64_t>> out;
  for (const PackedBatch& b : step.batches) {
    std::vector<int64_t> ids;
    auto sid = b.sequence_ids.accessor<int64_t, 2>();
    auto input = b.input_ids.accessor<int64_t, 2>();
    for (int64_t r = 0; r < b.rows(); ++r) {
      std::map<int64_t, int64_t> hash;
      for (int64_t j = 0; j < b.input_ids.size(1); ++j) {
        if (sid[r][j] > 0) hash[sid[r][j]] = (hash[sid[r][j]] * 131 + input[r][j]) % 1000000007;
      }
      for (const auto& [sequence, h] : hash) ids.push_back(h);
    }
    out.push_back(ids);
  }
  return out;
}

TEST(LoaderTest, EveryRowOnceAnEpochAcrossRanksInADeterministicOrder) {
  Fixture f = Make();
  const uint64_t rows = f.index->rows();
  // Two ranks, 2 micro-batches of 3 rows: 12 rows a step.
  std::multiset<int64_t> seen;
  uint64_t sequences = 0;
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int rank = 0; rank < 2; ++rank) {
    auto loader = Loader::Create(f.source, f.index, Options(3, 2, rank, 2));
    ASSERT_TRUE(loader.ok()) << loader.status();
    loaders.push_back(std::move(*loader));
  }
  const uint64_t steps = rows / 12;
  for (uint64_t s = 0; s < steps; ++s) {
    for (auto& loader : loaders) {
      auto step = loader->Next();
      ASSERT_TRUE(step.ok()) << step.status();
      ASSERT_EQ(step->batches.size(), 2u);
      EXPECT_EQ(step->rows, 6u);
      sequences += step->sequences;
      for (const auto& ids : Fingerprints(*step)) seen.insert(ids.begin(), ids.end());
    }
  }
  // No sequence twice within the epoch's first `steps` full steps.
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size());
  EXPECT_EQ(seen.size(), sequences);
  EXPECT_EQ(loaders[0]->position().rows, steps * 12);
  // The same options give the same batches.
  auto again = Loader::Create(f.source, f.index, Options(3, 2, 1, 2));
  ASSERT_TRUE(again.ok());
  auto first = (*again)->Next();
  auto fresh = Loader::Create(f.source, f.index, Options(3, 2, 1, 2));
  EXPECT_EQ(Fingerprints(*first), Fingerprints(*(*fresh)->Next()));
}

TEST(LoaderTest, ResumesAtTheExactNextRowWithAnyWorldSize) {
  Fixture f = Make();
  // One rank, 4 rows a step, through an epoch boundary.
  auto straight = Loader::Create(f.source, f.index, Options(4, 1, 0, 1));
  ASSERT_TRUE(straight.ok());
  std::vector<std::vector<std::vector<int64_t>>> reference;
  const uint64_t steps = f.index->rows() / 4 + 5;
  for (uint64_t s = 0; s < steps; ++s) reference.push_back(Fingerprints(*(*straight)->Next()));
  // Stop after 7 steps and resume from the position.
  auto first = Loader::Create(f.source, f.index, Options(4, 1, 0, 1));
  for (int s = 0; s < 7; ++s) ASSERT_TRUE((*first)->Next().ok());
  LoaderPosition at = (*first)->position();
  EXPECT_EQ(at.rows, 28u);
  auto resumed = Loader::Create(f.source, f.index, Options(4, 1, 0, 1), at);
  for (uint64_t s = 7; s < steps; ++s) {
    EXPECT_EQ(Fingerprints(*(*resumed)->Next()), reference[s]) << "step " << s;
  }
  // Two ranks of 2 rows from the same position serve the same 4 rows a step.
  auto rank0 = Loader::Create(f.source, f.index, Options(2, 1, 0, 2), at);
  auto rank1 = Loader::Create(f.source, f.index, Options(2, 1, 1, 2), at);
  for (uint64_t s = 7; s < 12; ++s) {
    auto a = Fingerprints(*(*rank0)->Next()), b = Fingerprints(*(*rank1)->Next());
    std::vector<int64_t> together = a[0];
    together.insert(together.end(), b[0].begin(), b[0].end());
    EXPECT_EQ(together, reference[s][0]) << "step " << s;
  }
}

TEST(LoaderTest, SinglePassServesEveryRowOnceInIndexOrder) {
  Fixture f = Make("none");
  LoaderOptions o = Options(16, 1, 0, 1);
  o.single_pass = true;
  o.shuffle = false;
  auto loader = Loader::Create(f.source, f.index, o);
  ASSERT_TRUE(loader.ok());
  EXPECT_EQ((*loader)->StepsPerPass(), (203u + 15) / 16);
  uint64_t sequences = 0, rows = 0;
  for (uint64_t s = 0; s < (*loader)->StepsPerPass(); ++s) {
    auto step = (*loader)->Next();
    ASSERT_TRUE(step.ok());
    sequences += step->sequences;
    rows += step->rows;
  }
  EXPECT_EQ(sequences, 203u);
  EXPECT_EQ(rows, 203u);
  EXPECT_TRUE((*loader)->Next()->batches.empty());
}

TEST(LoaderTest, RefusesAnIndexOfOtherDataAndADamagedRecord) {
  Fixture f = Make();
  auto other = testing::RandomInstances(150, 4, 40, 100, 8);
  auto other_source = MemorySource::Create("other", other, {100, 64, 64});
  auto loader = Loader::Create(*other_source, f.index, Options(4, 1, 0, 1));
  ASSERT_FALSE(loader.ok());
  EXPECT_NE(loader.status().message().find("the pack index does not fit other"),
            std::string::npos)
      << loader.status();
  // A record that breaks the source's limits is refused when the source is made.
  auto bad = testing::RandomInstances(3, 4, 10, 100, 9);
  bad[1].input_ids[2] = 100;
  auto refused = MemorySource::Create("bad.hdf5", bad, {100, 64, 64});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(std::string(refused.status().message()),
            "bad.hdf5: sequence 1: a token id outside the vocabulary of 100");
}

TEST(LoaderTest, DynamicWidthAndUniformLengthBatches) {
  // One sequence per row: smart batching's setting.
  Fixture f = Make("none");
  LoaderOptions o = Options(8, 1, 0, 1);
  o.shape = {64, 1, 0, /*fit_width=*/true};
  o.group_by_length = true;
  o.single_pass = false;
  auto loader = Loader::Create(f.source, f.index, o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const int64_t batches = (203 + 7) / 8;  // one epoch of micro-batches
  std::multiset<int64_t> widths;
  int64_t spread_sum = 0, padded = 0, slots = 0;
  std::set<int64_t> served;
  for (int64_t s = 0; s < batches; ++s) {
    auto step = (*loader)->Next();
    ASSERT_TRUE(step.ok()) << step.status();
    const PackedBatch& b = step->batches[0];
    auto sid = b.sequence_ids.accessor<int64_t, 2>();
    int64_t shortest = 64, longest = 0;
    for (int64_t r = 0; r < b.rows(); ++r) {
      int64_t length = 0;
      for (int64_t j = 0; j < b.input_ids.size(1); ++j) length += sid[r][j] > 0;
      shortest = std::min(shortest, length);
      longest = std::max(longest, length);
    }
    // The batch is as wide as its longest row, rounded up to 8.
    EXPECT_EQ(b.input_ids.size(1), (longest + 7) / 8 * 8);
    widths.insert(b.input_ids.size(1));
    spread_sum += longest - shortest;
    padded += b.input_ids.numel() - step->tokens;
    const auto fingerprints = Fingerprints(*step);
    served.insert(fingerprints[0].begin(), fingerprints[0].end());
    slots += b.input_ids.numel();
  }
  // Sorted into batches of like length: 203 lengths of 4..40 in 26
  // batches leave a few tokens between a batch's shortest and longest row
  // (eight random lengths of 4..40 span about 28 on average), and both
  // narrow and full-width batches occur.
  EXPECT_LT(static_cast<double>(spread_sum) / batches, 4.0);
  EXPECT_GE(widths.count(8) + widths.count(16), 1u);
  EXPECT_GE(widths.count(40), 1u);
  EXPECT_LT(static_cast<double>(padded) / slots, 0.25);
  EXPECT_EQ(served.size(), 203u) << "every sequence once an epoch";
}

}  // namespace
}  // namespace pbert::data
