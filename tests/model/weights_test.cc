#include "model/weights.h"

#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "model/bert.h"
#include "nlohmann/json.hpp"
#include "formats/safetensors.h"
#include "tests/model/fixtures.h"
#include "tests/mutate.h"
#include "tests/scratch_folder.h"
#include "tests/source_paths.h"

namespace pbert::model {
namespace {

std::string Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("pbert_weights_" + name);
}

void ExpectSameParameters(BertForPreTraining& a, BertForPreTraining& b) {
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i].value(), pb[i].value())) << pa[i].key();
  }
}

TEST(WeightsTest, NamesAreHuggingFaces) {
  BertForPreTraining model(testing::TinyOptions());
  auto params = model->named_parameters();
  for (const char* name :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.1.attention.output.dense.bias",
        "bert.encoder.layer.1.attention.output.LayerNorm.weight",
        "bert.encoder.layer.0.intermediate.dense.weight",
        "bert.encoder.layer.0.output.dense.weight", "bert.encoder.layer.0.output.LayerNorm.bias",
        "bert.pooler.dense.weight", "cls.predictions.bias",
        "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.weight",
        "cls.seq_relationship.weight", "cls.seq_relationship.bias"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
  // 5 embedding tensors, 16 per layer, 2 pooler, 5 MLM head, 2 NSP.
  EXPECT_EQ(params.size(), 5u + 16u * 2 + 2 + 5 + 2);
}

TEST(WeightsTest, RoundTripIsBitIdentical) {
  torch::manual_seed(1);
  BertForPreTraining a(testing::TinyOptions());
  torch::manual_seed(2);
  BertForPreTraining b(testing::TinyOptions());
  std::string first = Temp("a.safetensors"), second = Temp("b.safetensors");
  ASSERT_TRUE(SaveWeights(*a, first, {{"format", "pt"}}).ok());
  ASSERT_TRUE(LoadWeights(*b, first).ok());
  ExpectSameParameters(a, b);
  ASSERT_TRUE(SaveWeights(*b, second, {{"format", "pt"}}).ok());
  EXPECT_EQ(*ReadFile(first), *ReadFile(second));
}

TEST(WeightsTest, ACheckpointFolderStandsForItsWeights) {
  torch::manual_seed(3);
  BertForPreTraining a(testing::TinyOptions());
  const std::string dir = Temp("step-00000010");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(SaveWeights(*a, dir + "/model.safetensors").ok());
  BertForPreTraining b(testing::TinyOptions());
  ASSERT_TRUE(LoadWeights(*b, dir).ok());
  ExpectSameParameters(a, b);
  std::filesystem::remove_all(dir);
}

TEST(WeightsTest, AnIndependentReaderAgrees) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3";
  BertForPreTraining model(testing::TinyOptions());
  std::string path = Temp("independent.safetensors"), expected_path = Temp("expected.json");
  ASSERT_TRUE(SaveWeights(*model, path).ok());
  nlohmann::json expected;
  for (const auto& [name, t] : FileTensors(*model)) {
    expected[name] = {{"shape", t.sizes().vec()},
                            {"sum", t.to(torch::kDouble).sum().item<double>()},
                            {"first", t.reshape(-1)[0].item<double>()}};
  }
  std::ofstream(expected_path) << expected.dump();
  std::string command = std::string("/usr/bin/python3 ") + pbert::testing::SourceDir() +
                        "/tests/model/read_safetensors.py " + path + " " + expected_path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(WeightsTest, HuggingFaceSpellingsAreAccepted) {
  // A file as older exports write it: LayerNorm gamma/beta, the tied
  // decoder weight and bias, and the position_ids buffer.
  torch::manual_seed(4);
  BertForPreTraining source(testing::TinyOptions());
  std::map<std::string, at::Tensor> tensors;
  for (auto [name, value] : FileTensors(*source)) {
    if (name == "cls.predictions.bias") name = "cls.predictions.decoder.bias";
    if (name == "bert.embeddings.LayerNorm.weight") name = "bert.embeddings.LayerNorm.gamma";
    tensors[name] = value;
  }
  tensors["cls.predictions.decoder.weight"] = tensors.at("bert.embeddings.word_embeddings.weight");
  tensors["bert.embeddings.position_ids"] = torch::arange(64).unsqueeze(0);
  std::string path = Temp("hf.safetensors");
  {
    // Arbitrary names need a writer of their own (SaveWeights writes a
    // module's parameters): the format's layout, spelled out.
    nlohmann::ordered_json header;
    uint64_t offset = 0;
    std::string data;
    for (auto& [name, t] : tensors) {
      auto c = t.contiguous();
      uint64_t n = c.numel() * c.element_size();
      header[name] = {{"dtype", c.scalar_type() == torch::kLong ? "I64" : "F32"},
                      {"shape", c.sizes().vec()},
                      {"data_offsets", {offset, offset + n}}};
      data.append(static_cast<const char*>(c.data_ptr()), n);
      offset += n;
    }
    std::string text = header.dump();
    uint64_t length = text.size();
    std::string blob(reinterpret_cast<const char*>(&length), 8);
    ASSERT_TRUE(WriteFileAtomically(path, blob + text + data).ok());
  }
  torch::manual_seed(5);
  BertForPreTraining target(testing::TinyOptions());
  auto status = LoadWeights(*target, path);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(torch::equal(target->cls->predictions->bias, source->cls->predictions->bias));
  EXPECT_TRUE(torch::equal(target->bert->embeddings->LayerNorm->weight,
                           source->bert->embeddings->LayerNorm->weight));
}

TEST(WeightsTest, MismatchListsEveryProblemAndChangesNothing) {
  torch::manual_seed(6);
  BertForPreTraining small(testing::TinyOptions().num_layers(1).max_position_embeddings(32));
  std::string path = Temp("small.safetensors");
  ASSERT_TRUE(SaveWeights(*small, path).ok());
  BertForPreTraining target(testing::TinyOptions());
  auto before = target->bert->embeddings->word_embeddings->weight.clone();
  auto status = LoadWeights(*target, path);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::string message(status.message());
  EXPECT_NE(message.find("missing: bert.encoder.layer.1.attention.self.query.weight"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("mis-shaped: bert.embeddings.position_embeddings.weight (file [32,32], "
                         "model [64,32])"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("missing: bert.embeddings.position_embeddings"), std::string::npos);
  EXPECT_TRUE(torch::equal(before, target->bert->embeddings->word_embeddings->weight));
}

constexpr int kMutations = 1000;

// Mutated safetensors files (tests/mutate.h) through both of its readers:
// a status or a clean value, never a crash.
TEST(WeightsTest, MutatedFilesNeverCrashTheirReaders) {
  const std::string root = pbert::testing::ScratchFolder().string();
  torch::manual_seed(1);
  torch::nn::Linear module(4, 3);
  const std::string path = root + "/w.safetensors";
  ASSERT_TRUE(SaveWeights(*module, path, {{"format", "pt"}}).ok());
  const std::string bytes = *ReadFile(path);
  std::mt19937_64 rng(13);
  for (int round = 0; round < kMutations; ++round) {
    ASSERT_TRUE(WriteFileAtomically(path, pbert::testing::Mutate(bytes, rng)).ok());
    (void)formats::ReadSafetensors(path);
    (void)LoadWeights(*module, path);
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace pbert::model
