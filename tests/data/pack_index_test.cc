#include "data/packing/pack_index.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/atomic_file.h"
#include "common/checksum.h"
#include "data/instance.h"
#include "data/packing/algorithms.h"
#include "gtest/gtest.h"

namespace pbert::data {
namespace {

struct Fixture {
  std::vector<uint16_t> lengths;
  PackingPlan plan;
};

Fixture Make(int n, int max_len, int depth, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> length(1, max_len);
  Fixture f;
  for (int i = 0; i < n; ++i) f.lengths.push_back(static_cast<uint16_t>(length(rng)));
  LengthHistogram h = *HistogramOf(f.lengths, max_len);
  f.plan = PackLpfhp(h, {max_len, depth, 0});
  return f;
}

std::string TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("pbert_" + name);
}

TEST(AssignSequencesTest, EverySequenceLandsInOneRowOfTheRightShape) {
  Fixture f = Make(5000, 64, 4, 1);
  auto index = AssignSequences(f.plan, f.lengths, 7);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->rows(), f.plan.rows());
  EXPECT_EQ(index->sequences(), 5000u);
  ASSERT_TRUE(index->Verify(f.lengths).ok()) << index->Verify(f.lengths);
  uint64_t members = 0;
  for (uint64_t r = 0; r < index->rows(); ++r) {
    int tokens = 0;
    for (uint32_t id : index->Row(r)) tokens += f.lengths[id];
    EXPECT_LE(tokens, 64);
    members += index->Row(r).size();
  }
  EXPECT_EQ(members, 5000u);
}

TEST(AssignSequencesTest, SeedDecidesTheAssignment) {
  Fixture f = Make(2000, 32, 3, 2);
  auto a = AssignSequences(f.plan, f.lengths, 1);
  auto b = AssignSequences(f.plan, f.lengths, 1);
  auto c = AssignSequences(f.plan, f.lengths, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<uint32_t> ra, rb, rc;
  for (uint64_t r = 0; r < a->rows(); ++r) {
    for (uint32_t id : a->Row(r)) ra.push_back(id);
    for (uint32_t id : b->Row(r)) rb.push_back(id);
    for (uint32_t id : c->Row(r)) rc.push_back(id);
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(AssignSequencesTest, RejectsAPlanForOtherData) {
  Fixture f = Make(1000, 32, 3, 3);
  f.lengths[0] = f.lengths[0] == 1 ? 2 : 1;
  auto index = AssignSequences(f.plan, f.lengths, 1);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PackIndexTest, VerifyFindsDuplicatesAndWrongLengths) {
  std::vector<uint16_t> lengths = {3, 5, 3};
  PackingPlan plan{8, {{{5, 3}, 1}, {{3}, 1}}};
  EXPECT_TRUE(PackIndex(plan, {1, 0, 2}).Verify(lengths).ok());
  EXPECT_FALSE(PackIndex(plan, {1, 0, 0}).Verify(lengths).ok());  // 0 twice, 2 lost
  EXPECT_FALSE(PackIndex(plan, {0, 1, 2}).Verify(lengths).ok());  // 0 in a 5 slot
  EXPECT_FALSE(PackIndex(plan, {1, 0, 7}).Verify(lengths).ok());  // beyond the data
}

// A row of no sequence is no part of a partition: an index with one (a
// strategy of depth 0) was read and verified as "a partition"; it is
// refused, in memory and from a file, as are slots of length 0 and a
// strategy with more rows than the file has sequences.
TEST(PackIndexTest, RowsOfNoSequenceAreRefused) {
  const std::vector<uint16_t> lengths = {3, 5, 3};
  const PackingPlan empty_rows{8, {{{5, 3}, 1}, {{3}, 1}, {{}, 2}}};
  const PackIndex index(empty_rows, {1, 0, 2});
  absl::Status verified = index.Verify(lengths);
  EXPECT_EQ(std::string(verified.message()), "strategy 2 has 2 rows that hold no sequence");
  const std::string path = TempPath("empty-rows.pbpack");
  ASSERT_TRUE(index.Write(path, "lp").ok());
  absl::Status read = PackIndex::Read(path).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.message().find(path + ": not a valid pack index: strategy 2 has 2 rows that hold "
                                       "no sequence"),
            std::string::npos)
      << read;
  ASSERT_TRUE(PackIndex(PackingPlan{8, {{{5, 0}, 1}, {{3}, 1}}}, {1, 0, 2}).Write(path, "lp").ok());
  EXPECT_NE(PackIndex::Read(path).status().message().find(
                "strategy 0 has a slot of length 0, outside 1..8"),
            std::string::npos)
      << PackIndex::Read(path).status();
  ASSERT_TRUE(PackIndex(PackingPlan{8, {{{3}, 4}}}, {0, 1, 2}).Write(path, "lp").ok());
  EXPECT_NE(PackIndex::Read(path).status().message().find("strategy 0 has 4 rows for 3 sequences"),
            std::string::npos)
      << PackIndex::Read(path).status();
  std::filesystem::remove(path);
}

// A row length past any store's sequences is refused before it sizes
// anything: fuzzing found a 144-byte index whose row length (1.9e9) and a
// strategy's depth sized a 7 GB table.
TEST(PackIndexTest, RowLengthsPastAStoresAreRefused) {
  const std::string path = TempPath("long-rows.pbpack");
  ASSERT_TRUE(PackIndex(PackingPlan{70000, {{{3}, 1}}}, {0}).Write(path, "lp").ok());
  const absl::Status read = PackIndex::Read(path).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.message().find(path + ": not a valid pack index: row length 70000, outside "
                                       "1..65535"),
            std::string::npos)
      << read;
  ASSERT_TRUE(PackIndex(PackingPlan{kMaxSequenceLength, {{{3}, 1}}}, {0}).Write(path, "lp").ok());
  EXPECT_TRUE(PackIndex::Read(path).ok()) << PackIndex::Read(path).status();
  std::filesystem::remove(path);
}

// A sequence count whose id table's size wraps (4 x 2^62 is 0 in 64 bits)
// is refused, not taken for a table of 2^62 ids (fuzzing found it: the
// reader threw length_error, which ended the process). The header is
// rewritten with its checksum, as the writer computes it.
TEST(PackIndexTest, SequenceCountsThatWrapAreRefused) {
  const std::string path = TempPath("wrapped.pbpack");
  ASSERT_TRUE(PackIndex(PackingPlan{8, {{{3}, 1}}}, {0}).Write(path, "lp").ok());
  std::string bytes = *ReadFile(path);
  const uint64_t sequences = (uint64_t{1} << 62) + 1;
  std::memcpy(&bytes[16], &sequences, 8);
  std::memset(&bytes[48], 0, 8);
  ChecksumStream checksum;
  checksum.Update({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  const uint64_t digest = checksum.Digest();
  std::memcpy(&bytes[48], &digest, 8);
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  const absl::Status read = PackIndex::Read(path).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.message().find("the id table holds 1 ids, the header counts 4611686018427387905 "
                                "sequences"),
            std::string::npos)
      << read;
  std::filesystem::remove(path);
}

// An index of no sequence reads back empty; its id table, of no bytes, is
// copied through no null pointer (fuzzing found it under
// UndefinedBehaviorSanitizer: bash scripts/test --sanitize runs this).
TEST(PackIndexTest, AnIndexOfNoSequenceReadsBack) {
  const std::string path = TempPath("empty.pbpack");
  ASSERT_TRUE(PackIndex(PackingPlan{8, {}}, {}).Write(path, "lp").ok());
  const absl::StatusOr<PackIndex> back = PackIndex::Read(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rows(), 0u);
  std::filesystem::remove(path);
}

TEST(PackIndexTest, WriteReadRoundTrip) {
  Fixture f = Make(3000, 128, 6, 4);
  auto index = AssignSequences(f.plan, f.lengths, 9);
  ASSERT_TRUE(index.ok());
  std::string path = TempPath("roundtrip.pbpack");
  ASSERT_TRUE(index->Write(path, "lpfhp").ok());
  auto back = PackIndex::Read(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->rows(), index->rows());
  for (uint64_t r = 0; r < index->rows(); ++r) {
    auto x = index->Row(r), y = back->Row(r);
    ASSERT_EQ(std::vector<uint32_t>(x.begin(), x.end()), std::vector<uint32_t>(y.begin(), y.end()));
  }
  EXPECT_TRUE(back->Verify(f.lengths).ok());
  std::filesystem::remove(path);
}

TEST(PackIndexTest, CorruptionIsReportedWithThePath) {
  Fixture f = Make(500, 32, 3, 5);
  auto index = AssignSequences(f.plan, f.lengths, 1);
  std::string path = TempPath("corrupt.pbpack");
  ASSERT_TRUE(index->Write(path, "lpfhp").ok());
  std::string bytes = *ReadFile(path);

  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomically(path, flipped).ok());
  auto s = PackIndex::Read(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find(path), std::string::npos);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);

  ASSERT_TRUE(WriteFileAtomically(path, bytes.substr(0, bytes.size() - 4)).ok());
  EXPECT_NE(PackIndex::Read(path).status().message().find("truncated"), std::string::npos);

  ASSERT_TRUE(WriteFileAtomically(path, "PBPACKI").ok());
  EXPECT_NE(PackIndex::Read(path).status().message().find("shorter than its header"),
            std::string::npos);

  // A header field changed: the checksum covers the header too.
  std::string rows = bytes;
  rows[24] ^= 0x01;  // the row count
  ASSERT_TRUE(WriteFileAtomically(path, rows).ok());
  EXPECT_NE(PackIndex::Read(path).status().message().find("checksum mismatch"), std::string::npos)
      << PackIndex::Read(path).status();
  std::string name = bytes;
  name[60] = 'X';  // the algorithm name
  ASSERT_TRUE(WriteFileAtomically(path, name).ok());
  EXPECT_NE(PackIndex::Read(path).status().message().find("checksum mismatch"), std::string::npos);

  std::string other = bytes;
  other[8] = 9;  // version
  ASSERT_TRUE(WriteFileAtomically(path, other).ok());
  EXPECT_NE(PackIndex::Read(path).status().message().find("format version 9"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace pbert::data
