// Weights written by other tools: torch.save files from python3-torch and
// TensorFlow tensor bundles from an independent writer of the documented
// format (tests/model/write_*.py), loaded into our model and compared with
// the values those scripts say they wrote; and every damaged file refused
// with one line naming the file and the tensor.
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "formats/safetensors.h"
#include "gtest/gtest.h"
#include "model/bert.h"
#include "model/weight_names.h"
#include "model/weights.h"
#include "nlohmann/json.hpp"
#include "tests/model/fixtures.h"
#include "tests/source_paths.h"

namespace pbert::model {
namespace {

namespace fs = std::filesystem;

// The tiny model's sizes, as the writers take them.
std::string SizeArgs() {
  const BertOptions o = testing::TinyOptions();
  return absl::StrCat(o.vocab_size(), " ", o.hidden_size(), " ", o.num_layers(), " ",
                      o.intermediate_size(), " ", o.max_position_embeddings());
}

std::string Script(const std::string& name) {
  return absl::StrCat(pbert::testing::SourceDir(), "/tests/model/", name);
}

bool HasPython(const std::string& module) {
  static std::map<std::string, bool> known;  // importing torch takes a second
  auto it = known.find(module);
  if (it != known.end()) return it->second;
  std::string command = absl::StrCat("/usr/bin/python3 -c 'import ", module, "' 2>/dev/null");
  return known[module] = fs::exists("/usr/bin/python3") && std::system(command.c_str()) == 0;
}

// ctest runs each test in its own process, side by side: one folder each.
std::string DirFor(const std::string& name) {
  return fs::temp_directory_path() / absl::StrCat("pbert_foreign_", name, "_", ::getpid());
}

std::string FreshDir(const std::string& name) {
  const std::string dir = DirFor(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// EXPECTED.json ([[name, shape], ...]) and EXPECTED.f32 (the values, raw).
std::map<std::string, at::Tensor> ReadExpected(const std::string& stem) {
  nlohmann::json names = nlohmann::json::parse(*ReadFile(stem + ".json"));
  std::string raw = *ReadFile(stem + ".f32");
  std::map<std::string, at::Tensor> out;
  size_t offset = 0;
  for (const auto& entry : names) {
    std::vector<int64_t> shape = entry[1].get<std::vector<int64_t>>();
    at::Tensor t = torch::empty(shape, torch::kFloat);
    std::memcpy(t.data_ptr(), raw.data() + offset, t.numel() * 4);
    offset += t.numel() * 4;
    out[entry[0].get<std::string>()] = t;
  }
  EXPECT_EQ(offset, raw.size());
  return out;
}

void ExpectLoadsExactly(const std::string& path, const std::string& expected_stem) {
  auto expected = ReadExpected(expected_stem);
  torch::manual_seed(99);
  BertForPreTraining model(testing::TinyOptions());
  absl::Status status = LoadWeights(*model, path);
  ASSERT_TRUE(status.ok()) << status;
  // As files hold them (the word embeddings' padding rows are the model's).
  const auto params = FileTensors(*model);
  ASSERT_EQ(params.size(), expected.size());
  for (const auto& [name, value] : params) {
    ASSERT_EQ(expected.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(value, expected.at(name))) << path << ": " << name;
  }
}

// One line, naming the file and containing `what`.
void ExpectRefused(const std::string& path, const std::string& what,
                   const std::string& names = "") {
  BertForPreTraining model(testing::TinyOptions());
  absl::Status status = LoadWeights(*model, path);
  ASSERT_FALSE(status.ok()) << path;
  const std::string message(status.message());
  EXPECT_TRUE(absl::StrContains(message, fs::path(path).filename().string())) << message;
  EXPECT_TRUE(absl::StrContains(message, what)) << message;
  if (!names.empty()) EXPECT_TRUE(absl::StrContains(message, names)) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

void RunOrFail(const std::string& command) {
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

class TorchSaveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasPython("torch")) GTEST_SKIP() << "needs python3-torch to write torch.save files";
    // Written once for the suite: python3-torch takes seconds to start.
    static const std::string dir = [] {
      std::string d = FreshDir("torch");
      RunOrFail(absl::StrCat("/usr/bin/python3 ", Script("write_torch_checkpoints.py"), " ", d,
                             " ", SizeArgs()));
      return d;
    }();
    dir_ = dir;
  }
  static void TearDownTestSuite() { fs::remove_all(DirFor("torch")); }
  std::string dir_;
};

TEST_F(TorchSaveTest, HuggingFaceStateDictLoadsExactly) {
  ExpectLoadsExactly(dir_ + "/hf.pt", dir_ + "/expected");
}

TEST_F(TorchSaveTest, NvidiaCheckpointLoadsExactly) {
  // Wrapped in {'model': ...} beside optimizer state, NVIDIA's dense_act
  // names, one tensor stored column-major.
  ExpectLoadsExactly(dir_ + "/nvidia.pt", dir_ + "/expected");
}

TEST_F(TorchSaveTest, ConvertWritesTheSameWeightsAsSafetensors) {
  auto weights = ReadWeights(dir_ + "/nvidia.pt");
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->format, formats::TensorFormat::kTorchSave);
  ASSERT_TRUE(formats::WriteSafetensors(
                  formats::NamedTensors(weights->tensors.begin(), weights->tensors.end()),
                  dir_ + "/converted.safetensors")
                  .ok());
  ExpectLoadsExactly(dir_ + "/converted.safetensors", dir_ + "/expected");
}

TEST_F(TorchSaveTest, MutatedPicklesNeverCrashTheReader) {
  int refused = 0, files = 0;
  for (const auto& entry : fs::directory_iterator(dir_ + "/fuzz")) {
    ++files;
    auto weights = ReadWeights(entry.path());
    if (!weights.ok()) {
      ++refused;
      const std::string message(weights.status().message());
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_TRUE(absl::StrContains(message, entry.path().filename().string())) << message;
    }
  }
  EXPECT_EQ(files, 300);
  // Most mutations break the pickle; some (a flipped bit in a float, a
  // repeated memo write) leave a readable one.
  EXPECT_GT(refused, 100);
}

TEST_F(TorchSaveTest, BadFilesAreRefusedWithOneLine) {
  ExpectRefused(dir_ + "/legacy.pt", "re-save it");
  ExpectRefused(dir_ + "/no_tensors.pt", "no dict of tensors");
  std::string bytes = *ReadFile(dir_ + "/hf.pt");
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/truncated.pt", bytes.substr(0, bytes.size() / 2)).ok());
  ExpectRefused(dir_ + "/truncated.pt", "cannot read this torch.save file");
  // A flipped bit in the word embeddings' storage (found by its first
  // values): the zip's CRC-32 of that record.
  const size_t at = bytes.find(ReadFile(dir_ + "/expected.f32")->substr(0, 16));
  ASSERT_NE(at, std::string::npos);
  std::string flipped = bytes;
  flipped[at + 5] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/flipped.pt", flipped).ok());
  ExpectRefused(dir_ + "/flipped.pt", "fails its CRC-32");
}

// A pickle reads only what torch.save writes for tensors, storages and
// containers: a global that would call something (however it is named) is
// refused by its name, and nothing is called; a list nested 300,000 deep is
// read and let go of without recursion (it crashed the reader at 200,000).
TEST_F(TorchSaveTest, PickledCallsAndDeepNestingAreRefusedInOneLine) {
  const std::string hostile = dir_ + "/hostile/";
  ExpectRefused(hostile + "system.pt", "names the global 'posix.system'");
  // (Pickle's protocol 2, which torch.save writes, names builtins so.)
  ExpectRefused(hostile + "eval.pt", "names the global '__builtin__.eval'");
  ExpectRefused(hostile + "call.pt", "names the global 'subprocess.call'");
  ExpectRefused(hostile + "deep.pt", "holds no dict of tensors");
}

class TensorBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasPython("numpy")) GTEST_SKIP() << "needs python3-numpy for the bundle writer";
    dir_ = FreshDir("bundle");
  }
  void TearDown() override { fs::remove_all(DirFor("bundle")); }
  // Writes the bundle of `test_case`; returns its prefix.
  std::string Write(const std::string& test_case) {
    std::string prefix = absl::StrCat(dir_, "/", test_case, "/model.ckpt-28252");
    fs::create_directories(fs::path(prefix).parent_path());
    RunOrFail(absl::StrCat("/usr/bin/python3 ", Script("write_tf_bundle.py"), " ", prefix, " ", dir_,
                     "/", test_case, "/expected ", SizeArgs(), " ", test_case));
    return prefix;
  }
  std::string dir_;
};

TEST_F(TensorBundleTest, LoadsExactlyWithKernelsTransposed) {
  std::string prefix = Write("good");
  // By prefix, by index file and by data file.
  ExpectLoadsExactly(prefix, dir_ + "/good/expected");
  ExpectLoadsExactly(prefix + ".index", dir_ + "/good/expected");
  ExpectLoadsExactly(prefix + ".data-00000-of-00001", dir_ + "/good/expected");
  auto weights = ReadWeights(prefix);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->format, formats::TensorFormat::kTensorBundle);
  // 46 parameters, two LAMB moments each, and global_step: skipped.
  EXPECT_EQ(weights->tensors.size(), 46u);
  EXPECT_EQ(weights->skipped.size(), 2u * 46 + 1);
  EXPECT_TRUE(weights->unknown.empty());
}

TEST_F(TensorBundleTest, MalformedBundlesAreRefusedWithOneLine) {
  const std::string pooler_bias = "bert/pooler/dense/bias";
  ExpectRefused(Write("unknown_dtype"), "number 99", pooler_bias);
  ExpectRefused(Write("missing"), "missing: bert.pooler.dense.bias");
  ExpectRefused(Write("wrong_shape"), "mis-shaped: bert.pooler.dense.weight (file [33,32]");

  std::string good = Write("good");
  const std::string data = good + ".data-00000-of-00001", index = good + ".index";
  const std::string data_bytes = *ReadFile(data), index_bytes = *ReadFile(index);
  // A flipped byte in the data file: that tensor's CRC-32C names it.
  std::string flipped = data_bytes;
  flipped[100] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomically(data, flipped).ok());
  ExpectRefused(good, "fail their CRC-32C", "bert/embeddings/LayerNorm/beta");
  // A truncated data file: the tensors past its end.
  ASSERT_TRUE(WriteFileAtomically(data, data_bytes.substr(0, data_bytes.size() - 10)).ok());
  ExpectRefused(good, "beyond its");
  ASSERT_TRUE(WriteFileAtomically(data, data_bytes).ok());
  // A truncated index, and one with a flipped byte inside a block.
  ASSERT_TRUE(WriteFileAtomically(index, index_bytes.substr(0, index_bytes.size() - 20)).ok());
  ExpectRefused(good, "not a valid TensorFlow checkpoint index");
  std::string damaged = index_bytes;
  damaged[40] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomically(index, damaged).ok());
  ExpectRefused(good, "fails its CRC");
  ASSERT_TRUE(WriteFileAtomically(index, index_bytes).ok());
  // A missing data file.
  fs::remove(data);
  ExpectRefused(good, "cannot be read");
}

TEST_F(TensorBundleTest, MutatedIndexesNeverCrashTheReader) {
  const std::string prefix = Write("fuzz");
  int refused = 0;
  for (int k = 0; k < 200; ++k) {
    char suffix[8];
    std::snprintf(suffix, sizeof(suffix), "-%03d", k);
    auto weights = ReadWeights(prefix + suffix);
    if (!weights.ok()) {
      ++refused;
      const std::string message(weights.status().message());
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  // Some mutations land in places that change nothing the reader needs
  // (restart offsets it does not use, a value's unknown field).
  EXPECT_GT(refused, 100);
}

TEST(WeightNamesTest, TensorFlowNamesMapAsHuggingFaceConvertsThem) {
  MappedName kernel = MapTensorFlowName("bert/encoder/layer_11/attention/self/query/kernel");
  EXPECT_EQ(kernel.fate, NameFate::kMapped);
  EXPECT_EQ(kernel.name, "bert.encoder.layer.11.attention.self.query.weight");
  EXPECT_TRUE(kernel.transpose);
  MappedName nsp = MapTensorFlowName("cls/seq_relationship/output_weights");
  EXPECT_EQ(nsp.name, "cls.seq_relationship.weight");
  EXPECT_FALSE(nsp.transpose);
  EXPECT_EQ(MapTensorFlowName("bert/pooler/dense/kernel/adam_m").fate, NameFate::kSkipped);
  EXPECT_EQ(MapTensorFlowName("global_step").fate, NameFate::kSkipped);
  EXPECT_EQ(MapTensorFlowName("bert/encoder/layer_1/attention/self/qkv/kernel").fate,
            NameFate::kUnknown);
  EXPECT_EQ(MapTorchName("module.bert.encoder.layer.3.intermediate.dense_act.weight").name,
            "bert.encoder.layer.3.intermediate.dense.weight");
  EXPECT_EQ(MapTorchName("cls.predictions.decoder.weight").fate, NameFate::kSkipped);
}

}  // namespace
}  // namespace pbert::model
