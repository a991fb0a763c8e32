#include "data/hdf5.h"

#include <H5Cpp.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "data/packing/pack_index.h"
#include "data/prepare.h"
#include "data/source.h"
#include "data/store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/data/random_instances.h"
#include "tests/scratch_folder.h"
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
  ASSERT_EQ(expected_["bad"].size(), 15u);
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
    const int8_t labels[3] = {0, 1, 0};
    file.createDataSet("next_sentence_labels", H5::PredType::NATIVE_INT8, H5::DataSpace(1, &n))
        .write(labels, H5::PredType::NATIVE_INT8);
  }
  auto status = Hdf5Reader::Open(path).status();
  EXPECT_NE(status.message().find("no dataset 'input_ids'"), std::string::npos) << status;
  // A file cut short (a copy that stopped): HDF5's own words ("H5Fopen
  // failed") come after what they mean and what to do.
  ASSERT_TRUE(WriteHdf5(path, Instances(300, 64, 10), 64, 10).ok());
  const std::string whole = *ReadFile(path);
  ASSERT_TRUE(WriteFileAtomically(path, whole.substr(0, whole.size() / 2)).ok());
  for (const auto& cut : {Hdf5Reader::Open(path).status(), Hdf5Reader::Inspect(path).status()}) {
    EXPECT_EQ(cut.code(), absl::StatusCode::kDataLoss) << cut;
    EXPECT_EQ(cut.message().rfind(path + ": HDF5 cannot ", 0), 0u) << cut;
    EXPECT_NE(cut.message().find("; it is cut short or damaged: check it with 'h5ls -r " + path +
                                 "' and copy or write it again"),
              std::string::npos)
        << cut;
  }
  std::filesystem::remove(path);
}

// An HDF5 import of several MLPerf files into a store.
class Hdf5ImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::ScratchFolder().string();
    vocab_ = root_ + "/vocab.txt";
    std::ofstream vocab(vocab_);
    vocab << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < 30000; ++i) vocab << "w" << i << "\n";
    // Rows per file, against 64 rows per shard: the plan's pieces are
    // f0[0,64) | f0[64,70) f1 | f2[0,64) | f2[64,120) | f3 f4.
    const int rows[] = {70, 30, 120, 10, 50};
    for (int f = 0; f < 5; ++f) {
      auto part = testing::RandomInstances(rows[f], 3, 48, 30000, 100 + f);
      for (auto& in : part) {
        in.masked_positions.resize(std::min<size_t>(in.masked_positions.size(), 8));
        in.masked_ids.resize(in.masked_positions.size());
      }
      inputs_.push_back(absl::StrCat(root_, "/part-", f, ".hdf5"));
      ASSERT_TRUE(WriteHdf5(inputs_.back(), part, 48, 8).ok());
      all_.insert(all_.end(), part.begin(), part.end());
    }
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  PrepareOptions Options(const std::string& store, int threads) const {
    PrepareOptions o;
    o.inputs = inputs_;
    o.input_format = InputFormat::kHdf5;
    o.vocab = vocab_;
    o.instances.max_seq_len = 48;
    o.records_per_shard = 64;
    o.threads = threads;
    o.output = root_ + "/" + store;
    return o;
  }
  // store.json's shards: records and checksum of each.
  nlohmann::json Shards(const std::string& store) const {
    auto manifest = nlohmann::json::parse(*ReadFile(root_ + "/" + store + "/store.json"));
    nlohmann::json out;
    for (const auto& shard : manifest["shards"])
      out.push_back({shard["records"], shard["checksum"]});
    return out;
  }
  // A hole in row 100 of input 2's input_mask: the row is refused, in
  // shard 3 of the plan, after shards 0 to 2 are made (one thread).
  void DamageInput2() const {
    H5::H5File file(inputs_[2], H5F_ACC_RDWR);
    H5::DataSet mask = file.openDataSet("input_mask");
    hsize_t offset[2] = {100, 0}, count[2] = {1, 1};
    H5::DataSpace space = mask.getSpace();
    space.selectHyperslab(H5S_SELECT_SET, count, offset);
    const int8_t zero = 0;
    mask.write(&zero, H5::PredType::NATIVE_INT8, H5::DataSpace(2, count), space);
  }
  void ExpectAllRecords(const std::string& store) const {
    auto opened = InstanceStore::Open(root_ + "/" + store, StoreChecks::kChecksums);
    ASSERT_TRUE(opened.ok()) << opened.status();
    ASSERT_EQ(opened->size(), all_.size());
    for (size_t i = 0; i < all_.size(); ++i) testing::ExpectSameInstance(all_[i], opened->Get(i));
  }

  std::string root_, vocab_;
  std::vector<std::string> inputs_;
  std::vector<Instance> all_;
};

// Shards follow the inputs' rows, whatever the threads: the same records
// and checksums from 1 and 3 threads, in input order.
TEST_F(Hdf5ImportTest, ThreadsMakeTheSameStoreInInputOrder) {
  auto one = Prepare(Options("one", 1));
  ASSERT_TRUE(one.ok()) << one.status();
  auto three = Prepare(Options("three", 3));
  ASSERT_TRUE(three.ok()) << three.status();
  const nlohmann::json shards = Shards("one");
  ASSERT_EQ(shards.size(), 5u);
  const int records[] = {64, 36, 64, 56, 60};
  for (int k = 0; k < 5; ++k) EXPECT_EQ(shards[k][0].get<int>(), records[k]) << k;
  EXPECT_EQ(Shards("three"), shards);
  EXPECT_EQ(one->instances, all_.size());
  EXPECT_EQ(three->tokens, one->tokens);
  EXPECT_EQ(three->masked_tokens, one->masked_tokens);
  EXPECT_EQ(three->histogram.counts, one->histogram.counts);
  ExpectAllRecords("one");
  ExpectAllRecords("three");
}

// A run killed half-way (no destructor runs) leaves STORE.partial with the
// shards it finished; the same command then makes only the others: the
// finished shards' files are the store's (the same inodes), the progress
// starts at their bytes, and the store equals an uninterrupted one.
// Mutation tried: the second run making every shard again (the kept
// shards' files are then new ones).
// An import of `o` killed half way.
void KillHalfway(const PrepareOptions& o) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    uint64_t done = 0;
    (void)Prepare(o, [&](const std::string& stage, uint64_t n, uint64_t total) {
      done += n;
      if (stage == "import" && done > total / 2) _exit(9);  // as a kill would stop it
    });
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 9) << status;
}

TEST_F(Hdf5ImportTest, AKilledImportContinuesWhereItStopped) {
  ASSERT_TRUE(Prepare(Options("whole", 1)).ok());
  const PrepareOptions o = Options("store", 1);
  ASSERT_NO_FATAL_FAILURE(KillHalfway(o));
  const std::string partial = o.output + ".partial";
  EXPECT_FALSE(std::filesystem::exists(o.output));
  EXPECT_FALSE(std::filesystem::exists(partial + "/store.json"));
  std::map<std::string, ino_t> kept;
  for (const auto& entry : std::filesystem::directory_iterator(partial)) {
    if (entry.path().extension() == ".pbstore") {
      struct stat st {};
      ::stat(entry.path().c_str(), &st);
      kept[entry.path().filename()] = st.st_ino;
    }
  }
  ASSERT_GE(kept.size(), 2u);
  ASSERT_LT(kept.size(), 5u);

  uint64_t resumed = 0, total = 0;
  bool first = true;
  auto summary = Prepare(o, [&](const std::string& stage, uint64_t n, uint64_t all) {
    if (stage == "import" && first) resumed = n, total = all, first = false;
  });
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_GT(resumed, total / 3);
  EXPECT_LT(resumed, total);
  EXPECT_EQ(summary->instances, all_.size());
  EXPECT_FALSE(std::filesystem::exists(partial));
  for (const auto& [name, inode] : kept) {
    struct stat st {};
    ASSERT_EQ(::stat((o.output + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_ino, inode) << name << " was made again";
  }
  EXPECT_EQ(Shards("store"), Shards("whole"));
  ExpectAllRecords("store");
}

// Inputs written again in place (here with the same bytes) and their
// modification times set back, as touch -d sets them: nothing made from
// them before is reused (their change time, which no one can set back,
// differs), and the store is made whole again.
TEST_F(Hdf5ImportTest, AnInputChangedInPlaceIsImportedAgainWhateverItsModificationTime) {
  ASSERT_TRUE(Prepare(Options("whole", 1)).ok());
  const PrepareOptions o = Options("store", 1);
  ASSERT_NO_FATAL_FAILURE(KillHalfway(o));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (const std::string& input : o.inputs) {
    struct stat before {};
    ASSERT_EQ(::stat(input.c_str(), &before), 0);
    std::string bytes;
    {
      std::ifstream in(input, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::ofstream(input, std::ios::binary | std::ios::trunc) << bytes;  // the same file, in place
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, input.c_str(), times, 0), 0);
  }
  uint64_t resumed = 0;
  bool first = true;
  auto summary = Prepare(o, [&](const std::string& stage, uint64_t n, uint64_t) {
    if (stage == "import" && first) resumed = n, first = false;
  });
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(resumed, 0u) << "shards of the changed inputs were reused";
  EXPECT_EQ(summary->instances, all_.size());
  EXPECT_EQ(Shards("store"), Shards("whole"));
}

// A damaged input among many: the error names it and the row; the shards
// made before it are kept, and once the file is mended the same command
// finishes the store, counting each record once. Mutation tried: the
// second run making every shard again (its summary then counts the kept
// shards twice).
TEST_F(Hdf5ImportTest, ADamagedInputIsNamedAndTheImportContinuesOnceItIsMended) {
  const std::string good = *ReadFile(inputs_[2]);
  DamageInput2();
  const PrepareOptions o = Options("store", 1);
  auto failed = Prepare(o);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message().substr(0, failed.status().message().find(" (value")),
            inputs_[2] + ": row 100: input_mask is not 1s followed by 0s");
  EXPECT_NE(
      failed.status().message().find("; 3 of 5 store shards are made and kept in " + o.output +
                                     ".partial: the same command run again "
                                     "continues there"),
      std::string::npos)
      << failed.status();
  EXPECT_FALSE(std::filesystem::exists(o.output));
  ASSERT_TRUE(WriteFileAtomically(inputs_[2], good).ok());
  auto mended = Prepare(o);
  ASSERT_TRUE(mended.ok()) << mended.status();
  EXPECT_EQ(mended->instances, all_.size());
  ExpectAllRecords("store");
}

// What STORE.partial holds is trusted no further than new work. A run with
// other options (--max-len 40 over an import begun at 48) is refused,
// naming what differs, and removes nothing: the finished shards of a long
// import are not lost to a typo; --overwrite starts over. A kept shard
// with one data byte flipped is made again (its header still matches the
// journal), so the store is whole and counts each record once. Mutations
// tried: the check of the header alone (the flipped shard is reused and
// the store's checksums fail); starting over on other options (the shards
// are gone).
TEST_F(Hdf5ImportTest, KeptShardsAreCheckedAndNeverLostToOtherOptions) {
  const std::string good = *ReadFile(inputs_[2]);
  DamageInput2();
  PrepareOptions o = Options("store", 1);
  ASSERT_FALSE(Prepare(o).ok());
  const std::string partial = o.output + ".partial";
  auto shard_files = [&] {
    std::map<std::string, ino_t> out;
    for (const auto& entry : std::filesystem::directory_iterator(partial)) {
      struct stat st {};
      ::stat(entry.path().c_str(), &st);
      out[entry.path().filename()] = st.st_ino;
    }
    return out;
  };
  const auto before = shard_files();
  ASSERT_EQ(before.count("shard-00001.pbstore"), 1u);
  ASSERT_TRUE(WriteFileAtomically(inputs_[2], good).ok());

  PrepareOptions other = o;
  other.instances.max_seq_len = 40;
  auto refused = Prepare(other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(refused.status().message()),
            partial +
                " holds 3 finished shard(s) of an import begun with other options "
                "(data.max_seq_len 48, now 40); nothing was removed: run the command it "
                "began with to continue it, or add --overwrite to start this import over");
  EXPECT_EQ(shard_files(), before);

  // One byte of shard 0's records flipped: found, and the shard made again.
  const std::string shard = partial + "/shard-00000.pbstore";
  std::string bytes = *ReadFile(shard);
  bytes[bytes.size() - 5] ^= 0x01;
  {
    std::ofstream out(shard, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(bytes.size() - 5));
    out.put(bytes[bytes.size() - 5]);
  }
  auto mended = Prepare(o);
  ASSERT_TRUE(mended.ok()) << mended.status();
  EXPECT_EQ(mended->instances, all_.size());
  ExpectAllRecords("store");
  struct stat st {};
  ASSERT_EQ(::stat((o.output + "/shard-00001.pbstore").c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, before.at("shard-00001.pbstore")) << "an intact shard made again";
  ASSERT_EQ(::stat((o.output + "/shard-00000.pbstore").c_str(), &st), 0);
  EXPECT_NE(st.st_ino, before.at("shard-00000.pbstore")) << "the flipped shard was reused";

  // Begun again and stopped; --overwrite with other options starts over.
  std::filesystem::remove_all(o.output);
  DamageInput2();
  ASSERT_FALSE(Prepare(o).ok());
  ASSERT_TRUE(WriteFileAtomically(inputs_[2], good).ok());
  PrepareOptions over = o;
  over.overwrite = true;
  over.records_per_shard = 32;
  auto restarted = Prepare(over);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->instances, all_.size());
  EXPECT_EQ(Shards("store").size(), 11u);  // 32 rows each, cut at the inputs' ends
}

TEST(Hdf5Test, RefusesInstancesThatDoNotFit) {
  auto instances = Instances(2, 32, 4);
  EXPECT_FALSE(WriteHdf5(Temp("small.hdf5"), instances, 8, 4).ok());
  EXPECT_FALSE(std::filesystem::exists(Temp("small.hdf5")));
}

}  // namespace
}  // namespace pbert::data
