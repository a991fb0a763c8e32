// Mutated files through the data readers: a few thousand seeded variants
// of a store shard and manifest, a pack index and a YAML config, each read
// as a consumer would (the weights readers': tests/model/weights_test.cc). The property: a status or a clean
// value, never a crash (an abort, a segfault or a hang would end the test).
#include <chrono>
#include <filesystem>
#include <random>

#include "common/atomic_file.h"
#include "common/config.h"
#include "data/packing/report.h"
#include "data/store.h"
#include "gtest/gtest.h"
#include "tests/data/random_instances.h"
#include "tests/mutate.h"
#include "tests/scratch_folder.h"

namespace pbert {
namespace {

namespace fs = std::filesystem;
using testing::Mutate;

struct TinySection {
  int64_t steps = 1;
  double lr = 0.1;
  std::vector<std::string> inputs;
  template <class V>
  void Visit(V& v) {
    v.Field("steps", &steps, "steps", config::AtLeast<int64_t>(1));
    v.Field("lr", &lr, "lr");
    v.Field("inputs", &inputs, "inputs");
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct TinyConfig {
  TinySection train;
  template <class V>
  void Visit(V& v) {
    v.Section("train", &train, "train");
  }
};

class FuzzTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::ScratchFolder().string(); }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

constexpr int kRounds = 1000;

TEST_F(FuzzTest, StoresNeverCrashTheirReaders) {
  auto instances = testing::RandomInstances(40, 3, 30, 200, 1);
  const std::string dir = root_ + "/store";
  {
    auto writer = data::StoreWriter::Create(dir, {200, 7, 32, 32, "fuzz"}, 16);
    ASSERT_TRUE(writer.ok());
    for (const auto& in : instances) ASSERT_TRUE((*writer)->Add(in).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  const std::string shard = dir + "/shard-00001.pbstore", manifest = dir + "/store.json";
  const std::string shard_bytes = *ReadFile(shard), manifest_bytes = *ReadFile(manifest);
  std::mt19937_64 rng(11);
  int refused = 0;
  for (int round = 0; round < kRounds; ++round) {
    const bool shard_round = round % 3 != 0;
    ASSERT_TRUE(WriteFileAtomically(shard, shard_round ? Mutate(shard_bytes, rng) : shard_bytes)
                    .ok());
    ASSERT_TRUE(
        WriteFileAtomically(manifest, shard_round ? manifest_bytes : Mutate(manifest_bytes, rng))
            .ok());
    auto store = data::InstanceStore::Open(dir);
    if (!store.ok()) {
      ++refused;
      continue;
    }
    data::Instance record;
    bool bad = false;
    for (uint64_t i = 0; i < store->size(); ++i) bad |= !store->Read(i, &record).ok();
    (void)store->Histogram();
    bad |= !store->Verify().ok();
    refused += bad;
  }
  // Most mutations are caught when the store is opened or read.
  EXPECT_GT(refused, kRounds * 9 / 10);
}

TEST_F(FuzzTest, PackIndexesNeverCrashTheirReader) {
  std::vector<uint16_t> lengths;
  std::mt19937 lengths_rng(3);
  for (int i = 0; i < 300; ++i) lengths.push_back(static_cast<uint16_t>(1 + lengths_rng() % 64));
  auto packed = data::PackLengths("lpfhp", lengths, {64, 4, 1});
  ASSERT_TRUE(packed.ok());
  const std::string path = root_ + "/index.pbpack";
  ASSERT_TRUE(packed->index.Write(path, "lpfhp").ok());
  const std::string bytes = *ReadFile(path);
  std::mt19937_64 rng(12);
  int refused = 0;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_TRUE(WriteFileAtomically(path, Mutate(bytes, rng)).ok());
    auto index = data::PackIndex::Read(path);
    if (!index.ok() || !index->Verify(lengths).ok()) {
      ++refused;
      continue;
    }
    for (uint64_t r = 0; r < index->rows(); ++r) (void)index->Row(r);
  }
  EXPECT_GT(refused, kRounds * 9 / 10);
}

TEST_F(FuzzTest, ConfigsNeverCrashTheirReader) {
  const std::string text =
      "train:\n  steps: 5\n  lr: 0.25\n  inputs: [a.txt, \"b c.txt\"]\n# a comment\n";
  const std::string path = root_ + "/c.yaml";
  std::mt19937_64 rng(14);
  auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_TRUE(WriteFileAtomically(path, Mutate(text, rng)).ok());
    TinyConfig config;
    (void)config::Load(path, {}, &config);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

}  // namespace
}  // namespace pbert
