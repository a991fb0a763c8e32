#include "data/hdf5.h"

#include <H5Cpp.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "data/packing/pack_index.h"
#include "data/prepare.h"
#include "data/source.h"
#include "data/store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/data/random_instances.h"
#include "tests/source_paths.h"

namespace pbert::data {
namespace {

std::string Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("pbert_hdf5_" + name);
}

std::vector<Instance> Instances(int n, int max_len, int max_predictions) {
  // Every position but [CLS] and [SEP] may be masked: max_len - 2 slots.
  EXPECT_GE(max_predictions, 1);
  auto out = testing::RandomInstances(n, 3, max_len, 30000, n);
  for (auto& in : out) {
    in.masked_positions.resize(std::min<size_t>(in.masked_positions.size(), max_predictions));
    in.masked_ids.resize(in.masked_positions.size());
  }
  return out;
}

std::vector<int> InOrder(size_t n) {
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  return order;
}

// The sequences of `source` against the writer's, in `order`.
void ExpectSequences(const SequenceSource& source, const nlohmann::json& sequences,
                     const std::vector<int>& order) {
  ASSERT_EQ(source.size(), order.size()) << source.name();
  for (size_t i = 0; i < order.size(); ++i) {
    Instance in;
    ASSERT_TRUE(source.Read(i, &in).ok()) << source.name() << " " << i;
    const auto& want = sequences[order[i]];
    EXPECT_EQ(in.input_ids, want["input_ids"].get<std::vector<int32_t>>()) << i;
    EXPECT_EQ(in.segment_ids, want["segment_ids"].get<std::vector<int32_t>>()) << i;
    EXPECT_EQ(in.masked_positions, want["masked_positions"].get<std::vector<int32_t>>()) << i;
    EXPECT_EQ(in.masked_ids, want["masked_ids"].get<std::vector<int32_t>>()) << i;
    EXPECT_EQ(in.next_sentence_label, want["next_sentence_label"].get<int>()) << i;
  }
}

// Files written by h5py (python3-h5py), in the dtypes and layouts MLPerf
// BERT files come in, read against what the writer says they hold; and bad
// files, each refused with one error naming what is wrong.
class H5pyFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test in its own process, side by side: one folder each.
    dir_ = new std::string(Temp("h5py_" + std::to_string(::getpid())));
    std::filesystem::remove_all(*dir_);
    const std::string command = std::string("/usr/bin/python3 ") + pbert::testing::SourceDir() +
                                "/tests/data/write_mlperf_hdf5.py " + *dir_ + " 2>&1";
    available_ = std::system("/usr/bin/python3 -c 'import h5py' 2>/dev/null") == 0;
    if (available_) ok_ = std::system(command.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    if (!available_) GTEST_SKIP() << "needs python3-h5py (apt-get install python3-h5py)";
    ASSERT_TRUE(ok_) << "tests/data/write_mlperf_hdf5.py failed";
    std::ifstream in(*dir_ + "/expected.json");
    expected_ = nlohmann::json::parse(in);
  }
  // Each file <dir>PREFIX<case>.hdf5 of `cases` ({case: what the error
  // must name}) is refused with one line naming the file and that.
  void ExpectEachRefused(const nlohmann::json& cases, const std::string& prefix) {
    for (const auto& [name, must_name] : cases.items()) {
      const std::string path = *dir_ + prefix + name + ".hdf5";
      absl::Status status = OpenSequences(path, expected_["vocab_size"].get<uint32_t>()).status();
      ASSERT_FALSE(status.ok()) << name << " was accepted";
      const std::string message(status.message());
      EXPECT_NE(message.find(path), std::string::npos) << message;
      EXPECT_NE(message.find(must_name.get<std::string>()), std::string::npos)
          << name << ": " << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    }
  }
  static std::string* dir_;
  static bool available_, ok_;
  nlohmann::json expected_;
};
std::string* H5pyFilesTest::dir_ = nullptr;
bool H5pyFilesTest::available_ = false;
bool H5pyFilesTest::ok_ = false;

TEST_F(H5pyFilesTest, EveryDtypeAndLayoutReadsAsWritten) {
  const auto& sequences = expected_["sequences"];
  ASSERT_EQ(expected_["variants"].size(), 4u);
  for (const auto& variant : expected_["variants"]) {
    const std::string path = *dir_ + "/" + variant.get<std::string>() + ".hdf5";
    auto source = OpenSequences(path, expected_["vocab_size"].get<uint32_t>());
    ASSERT_TRUE(source.ok()) << source.status();
    ExpectSequences(**source, sequences, InOrder(sequences.size()));
  }
}

TEST_F(H5pyFilesTest, BadFilesAreOneErrorNamingTheFileAndTheFault) {
  ASSERT_EQ(expected_["bad"].size(), 10u);
  ExpectEachRefused(expected_["bad"], "/bad-");
}

TEST_F(H5pyFilesTest, NvidiaVariableLengthReadsAsWritten) {
  const std::string path = *dir_ + "/nvidia-varlength.hdf5";
  auto reader = Hdf5Reader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->layout(), Hdf5Layout::kVariable);
  auto source = OpenSequences(path, expected_["vocab_size"].get<uint32_t>());
  ASSERT_TRUE(source.ok()) << source.status();
  ExpectSequences(**source, expected_["sequences"], InOrder(expected_["sequences"].size()));
}

TEST_F(H5pyFilesTest, NvidiaPackedRowsAreKept) {
  const std::string path = *dir_ + "/nvidia-packed.hdf5";
  const auto& rows = expected_["packed_rows"];
  std::vector<int> order, depths;
  for (const auto& row : rows) {
    depths.push_back(static_cast<int>(row.size()));
    for (int s : row) order.push_back(s);
  }
  auto reader = Hdf5Reader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->layout(), Hdf5Layout::kPacked);
  EXPECT_EQ((*reader)->size(), static_cast<int64_t>(rows.size()));
  EXPECT_LE((*reader)->max_len(), expected_["packed_len"].get<int>());
  std::vector<int> read_depths;
  ASSERT_TRUE((*reader)->Read(0, (*reader)->size(), &read_depths).ok());
  EXPECT_EQ(read_depths, depths);
  // Their positions count from the row; ours from the sequence.
  auto source = OpenSequences(path, expected_["vocab_size"].get<uint32_t>());
  ASSERT_TRUE(source.ok()) << source.status();
  ExpectSequences(**source, expected_["sequences"], order);

  // prepare keeps their rows as the store's pack index.
  PrepareOptions o;
  o.inputs = {path};
  o.input_format = InputFormat::kHdf5;
  o.vocab = testing::WriteTestVocab(*dir_ + "/vocab.txt", expected_["vocab_size"].get<int>());
  o.instances.max_seq_len = expected_["packed_len"].get<int>();
  o.output = *dir_ + "/packed-store";
  o.overwrite = true;
  auto summary = Prepare(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->kept_rows, rows.size());
  auto store = InstanceStore::Open(o.output);
  ASSERT_TRUE(store.ok()) << store.status();
  auto index = PackIndex::Read(o.output + "/" + kKeptPackIndex);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_TRUE(index->Verify(store->Lengths()).ok());
  ASSERT_EQ(index->rows(), rows.size());
  // Store sequence i is the writer's order[i]; each row of the index holds
  // the sequences of one of the writer's rows.
  std::multiset<std::set<int>> want, got;
  for (const auto& row : rows) want.insert(row.get<std::set<int>>());
  for (uint64_t r = 0; r < index->rows(); ++r) {
    std::set<int> members;
    for (uint32_t id : index->Row(r)) members.insert(order[id]);
    got.insert(members);
  }
  EXPECT_EQ(got, want);
}

TEST_F(H5pyFilesTest, BadPackedFilesAreOneErrorNamingTheFileAndTheFault) {
  ASSERT_EQ(expected_["bad_packed"].size(), 3u);
  ExpectEachRefused(expected_["bad_packed"], "/bad-packed-");
}

TEST_F(H5pyFilesTest, PickMatchesMlperfsPickEvalSamples) {
  // pick_eval_samples.py's selection (pick_ratio = num_examples / n;
  // idx = int(i * pick_ratio)), as the writer computes it in Python.
  const std::string path = *dir_ + "/nvidia-gzip.hdf5";
  const uint64_t total = expected_["sequences"].size(), n = 7;
  PrepareOptions o;
  o.inputs = {path};
  o.input_format = InputFormat::kHdf5;
  o.vocab = testing::WriteTestVocab(*dir_ + "/vocab.txt", expected_["vocab_size"].get<int>());
  o.instances.max_seq_len = 32;
  o.output = *dir_ + "/picked-store";
  o.overwrite = true;
  o.pick = n;
  auto summary = Prepare(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  auto store = InstanceStore::Open(o.output);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<int> order = expected_["picked_7"].get<std::vector<int>>();
  EXPECT_EQ(order, (std::vector<int>{0, 5, 11, 17, 22, 28, 34}));
  ASSERT_EQ(total, 40u);
  ExpectSequences(*store, expected_["sequences"], order);
  o.pick = total + 1;
  EXPECT_FALSE(Prepare(o).ok());
}

TEST_F(H5pyFilesTest, AWideFileOfShortSequencesIsJudgedByItsSequences) {
  // 64 wide, sequences of at most 32 tokens: a store of 32 takes them all.
  PrepareOptions o;
  o.inputs = {*dir_ + "/wide.hdf5"};
  o.input_format = InputFormat::kHdf5;
  o.vocab = testing::WriteTestVocab(*dir_ + "/vocab.txt", expected_["vocab_size"].get<int>());
  o.instances.max_seq_len = 32;
  o.output = *dir_ + "/wide-store";
  o.overwrite = true;
  auto summary = Prepare(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  auto store = InstanceStore::Open(o.output);
  ASSERT_TRUE(store.ok()) << store.status();
  ExpectSequences(*store, expected_["sequences"], InOrder(expected_["sequences"].size()));
  // A store of 16 is too short: the message names the longest sequence and
  // the first that does not fit, not the file's width, and nothing is made.
  o.instances.max_seq_len = 16;
  o.output = *dir_ + "/narrow-store";
  const int longest = expected_["longest"].get<int>();
  ASSERT_LE(longest, 32);
  EXPECT_EQ(std::string(Prepare(o).status().message()),
            absl::StrCat(o.inputs[0], " holds sequences of up to ", longest,
                         " tokens (the first at row ", expected_["first_longer_than_16"].get<int>(),
                         "), more than data.max_seq_len 16; raise data.max_seq_len to ", longest));
  EXPECT_FALSE(std::filesystem::exists(o.output));
}

TEST(Hdf5Test, WriteThenReadGivesTheSameInstances) {
  auto instances = Instances(300, 64, 10);
  std::string path = Temp("roundtrip.hdf5");
  ASSERT_TRUE(WriteHdf5(path, instances, 64, 10).ok());
  auto reader = Hdf5Reader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->size(), 300);
  EXPECT_EQ((*reader)->max_len(), 64);
  EXPECT_EQ((*reader)->max_predictions(), 10);
  auto all = (*reader)->Read(0, 300);
  ASSERT_TRUE(all.ok()) << all.status();
  for (size_t i = 0; i < instances.size(); ++i)
    testing::ExpectSameInstance(instances[i], (*all)[i]);
  auto middle = (*reader)->Read(100, 7);
  ASSERT_TRUE(middle.ok());
  testing::ExpectSameInstance(instances[106], (*middle)[6]);
  EXPECT_FALSE((*reader)->Read(295, 10).ok());
  std::filesystem::remove(path);
}

TEST(Hdf5Test, TheFileHasTheMlperfLayout) {
  std::string path = Temp("layout.hdf5");
  ASSERT_TRUE(WriteHdf5(path, Instances(5, 16, 4), 16, 4).ok());
  H5::H5File file(path, H5F_ACC_RDONLY);
  for (const char* name : {"input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                           "masked_lm_ids", "next_sentence_labels"}) {
    EXPECT_TRUE(file.nameExists(name)) << name;
  }
  hsize_t dims[2];
  file.openDataSet("masked_lm_ids").getSpace().getSimpleExtentDims(dims);
  EXPECT_EQ(dims[0], 5u);
  EXPECT_EQ(dims[1], 4u);
  std::filesystem::remove(path);
}

TEST(Hdf5Test, BadFilesAreClearErrors) {
  std::string path = Temp("not.hdf5");
  ASSERT_TRUE(WriteFileAtomically(path, "plain text").ok());
  EXPECT_EQ(std::string(Hdf5Reader::Open(path).status().message()), path + " is not an HDF5 file");
  EXPECT_EQ(Hdf5Reader::Open(Temp("missing.hdf5")).status().code(), absl::StatusCode::kNotFound);
  {
    H5::H5File file(path, H5F_ACC_TRUNC);
    hsize_t n = 3;
    file.createDataSet("next_sentence_labels", H5::PredType::NATIVE_INT8, H5::DataSpace(1, &n));
  }
  auto status = Hdf5Reader::Open(path).status();
  EXPECT_NE(status.message().find("no dataset 'input_ids'"), std::string::npos) << status;
  std::filesystem::remove(path);
}

TEST(Hdf5Test, RefusesInstancesThatDoNotFit) {
  auto instances = Instances(2, 32, 4);
  EXPECT_FALSE(WriteHdf5(Temp("small.hdf5"), instances, 8, 4).ok());
  EXPECT_FALSE(std::filesystem::exists(Temp("small.hdf5")));
}

}  // namespace
}  // namespace pbert::data
