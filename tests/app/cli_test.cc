// Runs the real `packed-bert` binary as a user would and checks exit codes
// and messages.
#include "app/cli.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "data/hdf5.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/app/binary.h"
#include "tests/data/random_instances.h"
#include "tests/source_paths.h"
#include "tests/scratch_folder.h"
#include "tests/spawn_ranks.h"
#include "train/trainer_state.h"

namespace pbert::app {
namespace {

using testing::Result;
using testing::RunBinary;

// The error line of a command's standard error (a warning may come first:
// OPENBLAS_CORETYPE holding OpenBLAS's kernels back, for one).
std::string ErrorLine(const Result& r) {
  for (absl::string_view line : absl::StrSplit(r.err, '\n')) {
    if (absl::StartsWith(line, "packed-bert ") && absl::StrContains(line, ": error: ")) {
      return std::string(line);
    }
  }
  return "";
}

std::string WriteConfig(const std::string& name, const std::string& text) {
  return testing::WriteFile(std::filesystem::temp_directory_path() / name, text);
}

TEST(CliTest, HelpListsCommands) {
  Result r = RunBinary("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(
      r.out,
      "packed-bert: BERT pretraining and fine-tuning on packed sequences\n\n"
      "usage: packed-bert <command> [flags]\n\n"
      "commands:\n"
      "  prepare        turn raw text or MLPerf/NVIDIA HDF5 into an instance store\n"
      "  tokenize       print the WordPiece ids of text lines\n"
      "  verify         check an instance store or a pack index\n"
      "  export         write an instance store as MLPerf HDF5\n"
      "  pack           decide which sequences share a row, and report how well\n"
      "  train          pretrain BERT on packed data with the MLPerf evaluation loop\n"
      "  finetune       fine-tune a pretrained BERT on SQuAD, GLUE, CoNLL NER or multi-label "
      "data, packed\n"
      "  score          evaluate weights on MLPerf HDF5 data or a store, packed or not\n"
      "  model          create or convert model weights\n"
      "  launch         start the workers of a data-parallel run on this node\n"
      "  mlperf-summary time to train and the MLPerf score of finished runs\n"
      "  plot           draw learning curves and throughput of training runs as SVG\n"
      "  config         print the effective config (defaults < --config file < --set)\n\n"
      "Run 'packed-bert <command> --help' for the flags of a command.\n");
  r = RunBinary("export --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("  --store DIR                  the instance store (required)\n"),
            std::string::npos)
      << r.out;
  r = RunBinary("export --out x.hdf5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert export: error: export needs --store DIR; see 'packed-bert "
            "export --help'\n");
}

TEST(CliTest, ConfigTypoIsOneClearLine) {
  std::string path = WriteConfig("pbert_cli_typo.yaml", "run:\n  thread: 2\n");
  Result r = RunBinary("config dump --config " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert config: error: " + path +
                       ":2:3: run.thread: unknown key; did you mean 'threads'?\n");
}

TEST(CliTest, StringWhereANumberBelongs) {
  std::string path = WriteConfig("pbert_cli_type.yaml", "data:\n  max_seq_len: long\n");
  Result r = RunBinary("config dump --config " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert config: error: " + path +
                       ":2:16: data.max_seq_len: expected an integer, got 'long'\n");
}

TEST(CliTest, OptimizerValuesThatCannotTrainAreRefused) {
  // eps 0 divides 0 by 0 for a parameter without gradient; an end_lr above
  // lr makes the decay rise.
  Result r = RunBinary("config dump --set optim.eps=0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert config: error: --set optim.eps=0: optim.eps: must be in [1e-30, 1]\n");
  r = RunBinary("config dump --set optim.lr=1e-4 --set optim.end_lr=1e-3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert config: error: --set optim.end_lr=1e-3, --set optim.lr=1e-4: optim: "
            "end_lr 0.001 is above lr 0.0001: the poly schedule decays from lr to end_lr; lower "
            "end_lr (MLPerf: 0)\n");
  EXPECT_EQ(RunBinary("config dump --set optim.schedule=constant --set optim.end_lr=1").exit_code,
            0);
}

// run.device: cuda on a machine without a usable GPU is one line, exit 2,
// before any data is read (this build has no CUDA, or sees no GPU).
TEST(CliTest, CudaWithoutAGpuIsOneLine) {
  Result dump = RunBinary("config dump --set run.device=cuda");
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("  device: cuda  # auto, cpu or cuda"), std::string::npos) << dump.out;
  Result r = RunBinary("train --set run.device=cuda --set data.store=/nonexistent",
                       "CUDA_VISIBLE_DEVICES=");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("packed-bert train: error: run.device is cuda, but ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(CliTest, MissingConfigFile) {
  Result r = RunBinary("config dump --config /nonexistent/run.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert config: error: config file '/nonexistent/run.yaml' not found or "
            "not readable; see configs/ for examples\n");
}

TEST(CliTest, AFolderWhereAFileBelongs) {
  const std::string folder = std::filesystem::temp_directory_path().string();
  Result r = RunBinary("config dump --config " + folder);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert config: error: config file " + folder + " is a folder; give a file\n");
  r = RunBinary("tokenize --vocab " + folder);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert tokenize: error: vocabulary " + folder + " is a folder; give a file\n");
}

TEST(CliTest, UnknownFlag) {
  Result r = RunBinary("pack --max-lenght 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert pack: error: unknown flag --max-lenght; see 'packed-bert pack --help'\n");
}

TEST(CliTest, ConfigDumpAppliesPriorities) {
  std::string path = WriteConfig("pbert_cli_ok.yaml", "run:\n  threads: 1\n  seed: 7\n");
  Result r = RunBinary("config dump --config " + path + " --set run.threads=2 --log-level warn");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("threads: 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seed: 7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("log_level: warn"), std::string::npos) << r.out;
}

// Every config of the checkout reads as it is (keys, values, ranges).
TEST(CliTest, EveryShippedConfigReads) {
  int configs = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(pbert::testing::SourceDir()) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    const Result r = RunBinary("config dump --config " + entry.path().string());
    EXPECT_EQ(r.exit_code, 0) << entry.path() << ": " << r.err;
    ++configs;
  }
  EXPECT_GE(configs, 9);
}

TEST(CliTest, PackPrintsOneJsonObjectPerAlgorithm) {
  std::string hist = WriteConfig("pbert_cli_hist.txt", "# lengths 1..8\n0\n0\n4\n2\n0\n0\n1\n3\n");
  Result r = RunBinary("pack --histogram " + hist + " --max-len 8 --compare --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u);
  for (const std::string& line : lines) {
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"algorithm", "max_depth", "sequences", "rows", "efficiency",
                            "packing_factor", "depth_used", "lower_bound_rows", "seconds"}) {
      EXPECT_TRUE(j.contains(key)) << key << " in " << line;
    }
    EXPECT_EQ(j["version"], 2);
    EXPECT_EQ(j["sequences"], 10);
    // 4x3 + 2x4 + 7 + 3x8 = 51 tokens: at least 7 rows of 8.
    EXPECT_GE(j["rows"].get<int>(), 7);
  }
}

TEST(CliTest, ScoreOfPackedAndUnpackedDataAgree) {
  std::string data = std::filesystem::temp_directory_path() / "pbert_cli_score.hdf5";
  std::string weights = std::filesystem::temp_directory_path() / "pbert_cli_score.safetensors";
  ASSERT_TRUE(
      data::WriteHdf5(data, pbert::testing::RandomInstances(60, 5, 40, 500, 3), 64, 40).ok());
  const std::string model = std::string(" --config ") + pbert::testing::SourceDir() +
                            "/configs/bert-tiny.yaml --set model.vocab_size=500"
                            " --set model.max_position_embeddings=64 --log-level warn";
  Result init = RunBinary("model init" + model + " --seed 5 --overwrite --out " + weights);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  Result alone = RunBinary("score" + model + " --weights " + weights + " --data " + data);
  Result packed = RunBinary("score" + model + " --weights " + weights + " --data " + data +
                            " --pack lp --max-depth 4 --batch-rows 5");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  auto a = nlohmann::json::parse(alone.out), p = nlohmann::json::parse(packed.out);
  EXPECT_EQ(a["sequences"], 60);
  EXPECT_EQ(p["sequences"], 60);
  EXPECT_LT(p["rows"].get<int>(), 60);
  EXPECT_EQ(a["masked_tokens"], p["masked_tokens"]);
  EXPECT_GT(a["masked_tokens"].get<int>(), 0);
  EXPECT_EQ(a["mlm_accuracy"], p["mlm_accuracy"]);
  EXPECT_EQ(a["nsp_accuracy"], p["nsp_accuracy"]);
  EXPECT_NEAR(a["mlm_loss_per_token"].get<double>(), p["mlm_loss_per_token"].get<double>(), 1e-5);
  // Untrained: the loss is near ln(vocab).
  EXPECT_NEAR(a["mlm_loss_per_token"].get<double>(), std::log(500.0), 0.5);
  // The same sequences in a file 100 wide: a width says nothing of the
  // sequences, which fit the model's 64 positions; longer ones are named
  // by their length.
  ASSERT_TRUE(
      data::WriteHdf5(data, pbert::testing::RandomInstances(60, 5, 40, 500, 3), 100, 40).ok());
  Result wide = RunBinary("score" + model + " --weights " + weights + " --data " + data);
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_EQ(nlohmann::json::parse(wide.out)["mlm_accuracy"], a["mlm_accuracy"]);
  ASSERT_TRUE(
      data::WriteHdf5(data, pbert::testing::RandomInstances(60, 70, 90, 500, 3), 100, 40).ok());
  wide = RunBinary("score" + model + " --weights " + weights + " --data " + data);
  EXPECT_EQ(wide.exit_code, 2);
  EXPECT_EQ(
      ErrorLine(wide).rfind("packed-bert score: error: " + data + " holds sequences of up to ", 0),
      0u)
      << wide.err;
  EXPECT_EQ(wide.err.find("up to 100 tokens"), std::string::npos) << wide.err;
}

TEST(CliTest, ScoreRejectsWeightsOfAnotherShape) {
  std::string data = std::filesystem::temp_directory_path() / "pbert_cli_score2.hdf5";
  std::string weights = std::filesystem::temp_directory_path() / "pbert_cli_score2.safetensors";
  ASSERT_TRUE(
      data::WriteHdf5(data, pbert::testing::RandomInstances(4, 5, 20, 500, 4), 32, 20).ok());
  const std::string config =
      std::string(" --config ") + pbert::testing::SourceDir() + "/configs/bert-tiny.yaml";
  ASSERT_EQ(
      RunBinary("model init" + config + " --set model.vocab_size=500 --overwrite --out " + weights)
          .exit_code,
      0);
  Result r = RunBinary("score" + config + " --set model.vocab_size=600 --weights " + weights +
                       " --data " + data);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mis-shaped: bert.embeddings.word_embeddings.weight (file [500,128], "
                       "model [600,128])"),
            std::string::npos)
      << r.err;
  // Weights with a NaN (a diverged run's) are refused, naming the tensor.
  std::string bytes = testing::ReadText(weights);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const uint32_t nan = 0x7fc00000;
  std::memcpy(bytes.data() + 8 + header, &nan, 4);  // the first float of the first tensor
  testing::WriteFile(weights, bytes);
  r = RunBinary("score" + config + " --set model.vocab_size=500 --weights " + weights + " --data " +
                data);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(weights + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" holds inf or NaN; these weights come from a run that diverged"),
            std::string::npos)
      << r.err;
}

// model export-hf: the folder transformers' from_pretrained loads, checked
// by an independent listing of BertForPreTraining's state dict
// (tests/model/check_hf_export.py), and read back into the model.
TEST(CliTest, ExportHfWritesWhatTransformersLoads) {
  namespace fs = std::filesystem;
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3 for the check";
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_export_hf";
  fs::remove_all(dir);
  fs::create_directories(dir / "step-00000010");
  const std::string vocab = pbert::testing::WriteTestVocab((dir / "vocab.txt").string(), 500);
  const std::string model = std::string(" --config ") + pbert::testing::SourceDir() +
                            "/configs/bert-tiny.yaml --set model.vocab_size=500 --log-level warn";
  // A checkpoint folder as train writes one: its weights and config.yaml.
  const std::string checkpoint = (dir / "step-00000010").string();
  ASSERT_EQ(RunBinary("model init" + model + " --seed 3 --out " + checkpoint + "/model.safetensors")
                .exit_code,
            0);
  Result dump = RunBinary("config dump" + model);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  testing::WriteFile(checkpoint + "/config.yaml", dump.out);
  const std::string out = (dir / "hf").string();
  Result r = RunBinary("model export-hf " + checkpoint + " " + out + " --vocab " + vocab);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, out + "\n");
  const std::string check = absl::StrCat("/usr/bin/python3 ", pbert::testing::SourceDir(),
                                         "/tests/model/check_hf_export.py ");
  Result checked = testing::RunShell(check + out + " " + vocab);
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out, "46 tensors as BertForPreTraining holds them\n");
  // The check fails on a listing that does not fit (one layer more).
  fs::copy(out, (dir / "wrong").string(), fs::copy_options::recursive);
  std::string config = testing::ReadText((dir / "wrong" / "config.json").string());
  const std::string layers = "\"num_hidden_layers\": 2";
  config.replace(config.find(layers), layers.size(), "\"num_hidden_layers\": 3");
  testing::WriteFile((dir / "wrong" / "config.json").string(), config);
  Result wrong = testing::RunShell(check + (dir / "wrong").string() + " " + vocab);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(
      wrong.out.find("model.safetensors: bert.encoder.layer.2.output.dense.weight is missing"),
      std::string::npos)
      << wrong.out << wrong.err;
  // Read back: scoring through the export gives the checkpoint's numbers.
  const std::string data = (dir / "d.hdf5").string();
  ASSERT_TRUE(
      data::WriteHdf5(data, pbert::testing::RandomInstances(20, 5, 40, 500, 9), 64, 40).ok());
  Result before = RunBinary("score" + model + " --weights " + checkpoint + " --data " + data);
  Result after =
      RunBinary("score" + model + " --weights " + out + "/model.safetensors --data " + data);
  ASSERT_EQ(before.exit_code, 0) << before.err;
  ASSERT_EQ(after.exit_code, 0) << after.err;
  auto b = nlohmann::json::parse(before.out), a = nlohmann::json::parse(after.out);
  EXPECT_EQ(a["mlm_loss_per_token"], b["mlm_loss_per_token"]);
  EXPECT_EQ(a["nsp_accuracy"], b["nsp_accuracy"]);
  // Refused, each with one line and exit 2, leaving nothing: an existing
  // folder, no vocabulary, a weights file without its config, a vocabulary
  // larger than the model's.
  r = RunBinary("model export-hf " + checkpoint + " " + out + " --vocab " + vocab);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert model: error: " + out +
                       " already exists; add --overwrite to replace it, or choose another name\n");
  EXPECT_EQ(
      RunBinary("model export-hf " + checkpoint + " " + out + " --vocab " + vocab + " --overwrite")
          .exit_code,
      0);
  r = RunBinary("model export-hf " + checkpoint + " " + (dir / "b").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert model: error: model export-hf needs the vocabulary the model was trained "
            "with: --vocab vocab.txt (or prepare.vocab in the config)\n");
  r = RunBinary("model export-hf " + checkpoint + "/model.safetensors " + (dir / "c").string() +
                " --vocab " + vocab);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert model: error: " + checkpoint +
                       "/model.safetensors is no checkpoint folder of train (no config.yaml in "
                       "it): give the model's shape with --config FILE\n");
  const std::string big = pbert::testing::WriteTestVocab((dir / "big.txt").string(), 600);
  r = RunBinary("model export-hf " + checkpoint + " " + (dir / "d").string() + " --vocab " + big);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert model: error: " + big +
                       " holds 600 tokens, more than the model's model.vocab_size 500: give the "
                       "vocabulary it was trained with\n");
  // A vocabulary of the right size but other ids (here: its words in
  // another order) is not the one the config says the model trained with.
  std::string words = testing::ReadText(vocab);
  std::vector<std::string> lines = absl::StrSplit(words, '\n', absl::SkipEmpty());
  std::reverse(lines.begin() + 5, lines.end());
  const std::string other =
      testing::WriteFile((dir / "other.txt").string(), absl::StrJoin(lines, "\n") + "\n");
  Result trained = RunBinary("config dump" + model + " --set prepare.vocab=" + vocab);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  testing::WriteFile(checkpoint + "/config.yaml", trained.out);
  r = RunBinary("model export-hf " + checkpoint + " " + (dir / "e").string() + " --vocab " + other);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StartsWith(r.err, "packed-bert model: error: the vocabulary " + other +
                                          " is not the one the model was trained with (its "
                                          "config's prepare.vocab " +
                                          vocab + " was made with another: checksum "))
      << r.err;
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"big.txt", "d.hdf5", "hf", "other.txt", "step-00000010",
                                            "vocab.txt", "wrong"}));
  fs::remove_all(dir);
}

// --overwrite replaces only an output of the command's own kind, and no
// output lands in what a run keeps: each refusal is one line, exit 2, before
// any work, with everything left as it was.
TEST(CliTest, OverwriteNeverReplacesWhatTheCommandDidNotMake) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_overwrite";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string vocab = pbert::testing::WriteTestVocab((dir / "vocab.txt").string(), 500);
  const std::string model = std::string(" --config ") + pbert::testing::SourceDir() +
                            "/configs/bert-tiny.yaml --set model.vocab_size=500 --log-level warn";
  // A run folder as train leaves it, with a checkpoint, and a store.
  const std::string run = (dir / "run").string();
  const std::string checkpoint = run + "/checkpoints/step-00000002";
  fs::create_directories(checkpoint);
  for (const char* name : {"run.lock", "mllog.txt", "metrics.jsonl"}) {
    testing::WriteFile(run + "/" + name, "kept\n");
  }
  pbert::train::TrainerState state;  // of its step, as train saves it
  state.loop.step = 2;
  state.loop.samples = 20;
  state.loader.rows = 2;
  testing::WriteFile(checkpoint + "/trainer_state.json", pbert::train::ToJson(state).dump() + "\n");
  ASSERT_EQ(
      RunBinary("model init" + model + " --out " + checkpoint + "/model.safetensors").exit_code, 2)
      << "a weights file may not be written into a checkpoint";
  ASSERT_EQ(
      RunBinary("model init" + model + " --out " + (dir / "w.safetensors").string()).exit_code, 0);
  fs::copy_file(dir / "w.safetensors", checkpoint + "/model.safetensors");
  Result dump = RunBinary("config dump" + model);
  testing::WriteFile(checkpoint + "/config.yaml", dump.out);
  testing::WriteFile((dir / "store" / "store.json").string(), "{}\n");
  testing::WriteFile((dir / "mine" / "thesis.tex").string(), "years of work\n");
  auto contents = [&] {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) out[e.path().string()] = testing::ReadText(e.path().string());
    }
    return out;
  };
  const auto before = contents();
  const std::string export_hf = "model export-hf " + checkpoint + " ";
  const std::string flags = " --vocab " + vocab + " --overwrite --log-level warn";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {export_hf + run + flags, run + " is the run folder " + run + ", which only train writes"},
      {export_hf + checkpoint + flags, " is the checkpoint " + checkpoint},
      {export_hf + run + "/checkpoints" + flags, " lies in the checkpoints of the run folder "},
      {export_hf + run + "/mllog.txt" + flags, " is the run folder " + run + "'s mllog.txt"},
      {export_hf + (dir / "store").string() + flags, " is a folder holding store.json;"},
      {export_hf + (dir / "store" / "hf").string() + flags, " lies in the instance store "},
      {export_hf + (dir / "mine").string() + flags,
       " is a folder holding thesis.tex; --overwrite "
       "replaces only a Hugging Face model folder"},
      {export_hf + vocab + flags, vocab + " is a file; --overwrite replaces only"},
      {"model init" + model + " --overwrite --out " + vocab, " is a file of another format;"},
      {"model init" + model + " --overwrite --out " + (dir / "mine").string(), " is a folder;"},
      {"model convert " + (dir / "w.safetensors").string() + " " + run +
           "/metrics.jsonl --overwrite",
       "'s metrics.jsonl"},
  };
  for (const auto& [command, why] : refused) {
    Result r = RunBinary(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << command << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(contents(), before);
  // What the command made itself it replaces; not once something else is
  // inside it, at any depth.
  const std::string hf = (dir / "hf").string();
  EXPECT_EQ(RunBinary(export_hf + hf + flags).exit_code, 0);
  EXPECT_EQ(RunBinary(export_hf + hf + flags).exit_code, 0);
  testing::WriteFile(hf + "/extra/notes.txt", "mine\n");
  Result kept = RunBinary(export_hf + hf + flags);
  EXPECT_EQ(kept.exit_code, 2) << kept.err;
  EXPECT_NE(kept.err.find(hf + " is a folder holding extra; --overwrite replaces only"),
            std::string::npos)
      << kept.err;
  EXPECT_EQ(testing::ReadText(hf + "/extra/notes.txt"), "mine\n");
  // A store prepare wrote, holding a file of the user's.
  std::string body;
  for (int i = 0; i < 20; ++i) body += "w10 w11 w12 w13 .\nw14 w15 w16 .\n\n";
  const std::string text = testing::WriteFile((dir / "text.txt").string(), body);
  const std::string prepare = "prepare --vocab " + vocab + " --max-len 32 --log-level warn " + text;
  const std::string store = (dir / "made").string();
  ASSERT_EQ(RunBinary(prepare + " --out " + store).exit_code, 0);
  testing::WriteFile(store + "/mine/thesis.tex", "years of work\n");
  kept = RunBinary(prepare + " --out " + store + " --overwrite");
  EXPECT_EQ(kept.exit_code, 2) << kept.err;
  EXPECT_NE(kept.err.find(store + " is a folder holding mine, which prepare did not write"),
            std::string::npos)
      << kept.err;
  EXPECT_EQ(testing::ReadText(store + "/mine/thesis.tex"), "years of work\n");
  fs::remove_all(store + "/mine");
  EXPECT_EQ(RunBinary(prepare + " --out " + store + " --overwrite").exit_code, 0);
  fs::remove_all(dir);
}

// A path on the command line is the text typed, in every command and in
// --set of path keys: not YAML ('#' starts no comment, '*' no alias, a
// newline stays). Checked on the store prepare writes, and on the config
// as python3's YAML reads it back.
TEST(CliTest, PathsAreTakenAsTyped) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_paths";
  fs::remove_all(dir);
  auto quoted = [](const std::string& text) {  // for the shell
    return "'" + absl::StrReplaceAll(text, {{"'", "'\\''"}}) + "'";
  };
  const std::string vocab = testing::WriteFile(
      (dir / "vocab.txt").string(), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n.\n");
  std::string lines;
  for (int i = 0; i < 20; ++i) lines += "the cat sat .\nthe cat .\n\n";
  const std::string text = testing::WriteFile((dir / "text.txt").string(), lines);
  const bool python = fs::exists("/usr/bin/python3");
  for (const std::string name : {"st #1", "*st", "a: b", "it's \"q\"", "two\nlines",
                                 "na\u00efve \u00fc", "[x]", "&y", "{z}"}) {
    const std::string store = (dir / name).string();
    Result r = RunBinary("prepare --vocab " + vocab + " --max-len 32 --log-level warn --out " +
                         quoted(store) + " " + text);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_TRUE(fs::is_regular_file(fs::path(store) / "store.json")) << name;
    r = RunBinary("config dump --set " + quoted("run.output_dir=" + store));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (!python) continue;
    const std::string dumped = testing::WriteFile((dir / "dumped.yaml").string(), r.out);
    Result read = testing::RunShell(
        "/usr/bin/python3 -c 'import sys, yaml; "
        "sys.stdout.write(yaml.safe_load(open(sys.argv[1]))[\"run\"][\"output_dir\"])' " +
        dumped);
    EXPECT_EQ(read.out, store) << r.out << read.err;
  }
  fs::remove_all(dir);
}

// A result that could not be written is a failure, not a success with the
// result lost.
TEST(CliTest, AResultThatCannotBeWrittenFails) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  Result r = RunBinary("config dump >/dev/full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "packed-bert config: error: the result could not be written to standard output "
            "(No space left on device); it is lost: run the command again with its output "
            "going where there is room\n");
}

std::string SharedData(const std::string& name) {
  return std::string(pbert::testing::SharedDataDir()) + "/" + name;
}

// A fresh folder `dir` with an instance store of `count` random sequences
// in dir/store, made by prepare (with `flags`) from an MLPerf HDF5 file; ""
// on failure.
std::string MakeStore(const std::filesystem::path& dir, int count, uint32_t seed,
                      const std::string& flags = "") {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string data = (dir / "d.hdf5").string(), store = (dir / "store").string();
  EXPECT_TRUE(
      data::WriteHdf5(data, pbert::testing::RandomInstances(count, 5, 60, 500, seed), 64, 40).ok());
  pbert::testing::WriteTestVocab((dir / "vocab.txt").string(), 500);
  Result prepared =
      RunBinary("prepare --input-format hdf5 --vocab " + (dir / "vocab.txt").string() + " --out " +
                store + " --log-level warn " + flags + " " + data);
  EXPECT_EQ(prepared.exit_code, 0) << prepared.err;
  return prepared.exit_code == 0 ? store : "";
}

// A damaged variable-length HDF5 file (a row's object in the global heap
// claims more bytes than the row holds) made libhdf5 1.10 copy past its
// buffer or loop without end (tests/fuzz's hdf5 target found both; 1.14
// refuses it itself): each is one line and exit 2, and prepare leaves
// nothing.
TEST(CliTest, DamagedVariableLengthHdf5FilesAreOneLine) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_damaged_vlen";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream in(std::string(pbert::testing::SourceDir()) +
                       "/tests/fuzz/corpus/hdf5/varlength.hdf5",
                   std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t heap = good.find("GCOL");
  ASSERT_NE(heap, std::string::npos);
  // The first object's size, after the collection's header (16 bytes) and
  // the object's index, reference count and reserved bytes (8).
  for (const uint64_t size : {uint64_t{1} << 40, uint64_t{4000}}) {
    std::string damaged = good;
    std::memcpy(&damaged[heap + 24], &size, sizeof(size));
    const std::string file = (dir / "part-0.hdf5").string(), store = (dir / "store").string();
    std::ofstream(file, std::ios::binary) << damaged;
    pbert::testing::WriteTestVocab((dir / "vocab.txt").string(), 500);
    Result r = RunBinary("prepare --input-format hdf5 --vocab " + (dir / "vocab.txt").string() +
                         " --out " + store + " --log-level warn " + file);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "packed-bert prepare: error: " + file + ": HDF5 "))
        << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "damaged")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(store));
  }
  // Files whose rows claim gigabytes (fuzzing found them: their reader took
  // 2.2 GB and 10 s before its address space was held to what the file can
  // hold): one line, exit 2.
  for (int k = 1; k <= 3; ++k) {
    const std::string file = absl::StrCat(pbert::testing::SourceDir(),
                                          "/tests/fuzz/findings/hdf5/rows-claiming-gigabytes-", k);
    const std::string store = (dir / "store").string();
    Result r = RunBinary("prepare --input-format hdf5 --vocab " + (dir / "vocab.txt").string() +
                         " --out " + store + " --log-level warn " + file);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "damaged")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(store));
  }
  fs::remove_all(dir);
}

// libhdf5 reads through a null pointer on some damaged metadata, or loops:
// what it reads of a file's metadata is read first in a child process, and
// the child's crash or hang (made here by PBERT_FAULT, as such a file
// makes it) is one line and exit 2, nothing left, in the command's time.
TEST(CliTest, Hdf5ThatKillsOrHangsItsReaderIsOneLine) {
  namespace fs = std::filesystem;
  const fs::path dir = pbert::testing::ScratchFolder();
  const std::string file =
      std::string(pbert::testing::SourceDir()) + "/tests/fuzz/corpus/hdf5/fixed.hdf5";
  const std::string store = (dir / "store").string();
  pbert::testing::WriteTestVocab((dir / "vocab.txt").string(), 2048);
  const std::string prepare = "prepare --input-format hdf5 --vocab " +
                              (dir / "vocab.txt").string() + " --out " + store +
                              " --log-level warn " + file;
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"SEGV", "HDF5 failed to read its metadata (its reader, held to "},
      {"STOP", "HDF5 took over 10 s to read its metadata and was stopped; the file is damaged"}};
  for (const auto& [signal, said] : faults) {
    Result r = RunBinary(prepare, "PBERT_FAULT=hdf5-apart:0:0:" + signal);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "packed-bert prepare: error: " + file + ": " + said))
        << r.err;
    if (signal == "SEGV") {
      EXPECT_TRUE(absl::StrContains(r.err,
                                    " MiB of address space, ended with signal 11); the file "
                                    "is damaged: check it with 'h5ls -r "))
          << r.err;
    }
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(store));
  }
  // The same file, its reader left alone, is read.
  Result r = RunBinary(prepare);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  fs::remove_all(dir);
}

// A command that reads a store takes its length and vocabulary unless told
// otherwise: the quick start's pack of a 64-token store makes rows that a
// train of the same store accepts.
TEST(CliTest, PackAndTrainTakeTheStoresLimitsUnlessTold) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_store_limits";
  const std::string store = MakeStore(dir, 200, 6, "--max-len 64");
  ASSERT_FALSE(store.empty());
  const std::string run = (dir / "run").string();
  Result r = RunBinary("pack --store " + store + " --set run.output_dir=" + run +
                       " --format json --log-level warn");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["max_len"], 64);
  const std::string config = testing::ReadText(run + "/config.yaml");
  EXPECT_NE(config.find("  max_seq_len: 64  #"), std::string::npos) << config;
  EXPECT_NE(config.find("  vocab_size: 500  #"), std::string::npos) << config;
  const std::string tiny =
      " --set model.hidden_size=32 --set model.num_layers=1 --set model.num_heads=2 "
      "--set model.intermediate_size=64 --set train.micro_batch_rows=4 --set optim.total_steps=1 "
      "--threads 1 --log-level error";
  r = RunBinary("train --set data.store=" + store + " --set data.pack_index=" + run +
                "/pack.pbpack --set run.output_dir=" + (dir / "train").string() + tiny);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Told longer rows: packed so, and said in one line.
  r = RunBinary("pack --store " + store + " --set run.output_dir=" + (dir / "run128").string() +
                " --max-len 128 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["max_len"], 128);
  EXPECT_NE(r.err.find("data.max_seq_len 128 is longer than the sequences of " + store +
                       " (at most 64 tokens): they share rows of 128"),
            std::string::npos)
      << r.err;
  // Told shorter rows, or a smaller vocabulary: refused.
  r = RunBinary("pack --store " + store + " --set run.output_dir=" + (dir / "run32").string() +
                " --max-len 32");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert pack: error: " + store +
                       " holds sequences of up to 64 tokens, longer than rows of data.max_seq_len "
                       "32 (--max-len): raise it\n");
  EXPECT_FALSE(fs::exists(dir / "run32"));
  r = RunBinary("train --set data.store=" + store + " --set run.output_dir=" +
                (dir / "small").string() + " --set model.vocab_size=400" + tiny);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("uses a vocabulary of 500 tokens; the model has 400"), std::string::npos)
      << r.err;
  fs::remove_all(dir);
}

TEST(CliTest, NegativeCountsAndFailedPacksLeaveNothing) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_counts";
  const std::string store = MakeStore(dir, 30, 4);
  ASSERT_FALSE(store.empty());
  Result r =
      RunBinary("export --store " + store + " --out " + (dir / "e.hdf5").string() + " --limit -3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert export: error: --limit -3: must be 1 or more\n");
  // No rows is no MLPerf file: a reader would refuse it.
  r = RunBinary("export --store " + store + " --out " + (dir / "e.hdf5").string() + " --limit 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert export: error: --limit 0: must be 1 or more\n");
  EXPECT_FALSE(fs::exists(dir / "e.hdf5"));
  r = RunBinary("score --weights w.safetensors --data " + store + " --limit 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert score: error: --limit 0: must be 1 or more\n");
  // An output that cannot be written fails before the work.
  const std::string nowhere = (dir / "missing" / "e.hdf5").string();
  r = RunBinary("export --store " + store + " --out " + nowhere);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert export: error: cannot write output " + nowhere + ": its folder " +
                       (dir / "missing").string() +
                       " does not exist; create it or choose another\n");
  // The pack fails writing its index; the run folder it made goes again.
  const fs::path run = dir / "runs" / "p";
  r = RunBinary("pack --store " + store + " --set run.output_dir=" + run.string() + " --out " +
                (dir / "no" / "x.pbpack").string() + " --log-level warn");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(dir / "runs")) << "an empty run folder was left behind";
  fs::remove_all(dir);
}

// export onto a disk that fills (a file size limit: writes fail with EFBIG,
// as on a full disk, SIGXFSZ ignored), into its own store, onto a folder.
TEST(CliTest, ExportFailuresAreOneLineAndLeaveNothing) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_export";
  const std::string store = MakeStore(dir, 400, 5);
  ASSERT_FALSE(store.empty());
  fs::create_directories(dir / "out");
  const std::string out = (dir / "out" / "e.hdf5").string();
  Result r = testing::RunShell(absl::StrCat("trap '' XFSZ; ulimit -f 16; exec ",
                                            pbert::testing::BinaryPath(), " export --store ", store,
                                            " --out ", out));
  EXPECT_EQ(r.exit_code, 1);
  // The progress bar's line, then the error's.
  const std::vector<std::string> lines = absl::StrSplit(r.err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << r.err;
  EXPECT_NE(lines[0].find("[progress] export  100.0%"), std::string::npos) << r.err;
  EXPECT_EQ(lines[1], "packed-bert export: error: cannot write " + out +
                          ": File too large (files may grow to 8192 bytes in this process: raise "
                          "ulimit -f)");
  EXPECT_TRUE(fs::is_empty(dir / "out")) << "the temporary file was left";

  const std::string shard = store + "/shard-00000.pbstore";
  ASSERT_TRUE(fs::exists(shard));
  const auto before = fs::file_size(shard);
  r = RunBinary("export --store " + store + " --out " + shard + " --overwrite");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert export: error: --out " + shard + " is inside the store " + store +
                       " being exported; write it elsewhere\n");
  EXPECT_EQ(fs::file_size(shard), before);
  r = RunBinary("export --store " + store + " --out " + (dir / "out").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert export: error: --out " + (dir / "out").string() +
                       " is a folder; name the HDF5 file to write\n");
  // The export itself, read back.
  r = RunBinary("export --store " + store + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto back = data::Hdf5Reader::Open(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->size(), 400);
  fs::remove_all(dir);
}

TEST(CliTest, AblationsAreRefusedInClosedDivisionRuns) {
  Result r = RunBinary("train --set model.ablation=no_position_reset");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert train: error: model.ablation no_position_reset trains a model that is not "
            "BERT, which a closed-division MLPerf run may not; for an experiment set "
            "mlperf.division: open\n");
}

TEST(CliTest, LaunchRefusesWhatItCannotStart) {
  Result r = RunBinary("launch --nproc-per-node 2 -- no-such-program-here");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert launch: error: 'no-such-program-here' is not a program that can be run "
            "(not found on PATH, a folder, or not executable)\n");
  r = RunBinary("launch --nproc-per-node 2");
  EXPECT_EQ(r.exit_code, 2);
  r = RunBinary("launch --nproc-per-node 0 -- true");
  EXPECT_EQ(r.err, "packed-bert launch: error: --nproc-per-node 0: must be in [1, 1024]\n");
  // Every count has a range a real launch can use: none wraps when narrowed.
  r = RunBinary("launch --grace-s 4294967297 -- true");
  EXPECT_EQ(r.err, "packed-bert launch: error: --grace-s 4294967297: must be in [1, 86400]\n");
  r = RunBinary("launch --master-port 65536 -- true");
  EXPECT_EQ(r.err, "packed-bert launch: error: --master-port 65536: must be in [1, 65535]\n");
  r = RunBinary("launch --nnodes 2 --node-rank 2 -- true");
  EXPECT_EQ(r.err, "packed-bert launch: error: --node-rank 2 is not below --nnodes 2\n");
  r = RunBinary("launch --nproc-per-node 2 -- true");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The processes whose command line holds `marker`.
int ProcessesWith(const std::string& marker) {
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = testing::ReadText(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) != std::string::npos && cmdline.find("launch") == std::string::npos) {
      ++found;
    }
  }
  return found;
}

// When a worker fails, launch stops the others and returns within its grace
// period, whatever they do: a worker that ignores SIGTERM, and one whose
// children (one of them in a session of its own) hold its output open,
// used to keep it waiting 100 s or for ever. Nothing they started is left.
TEST(CliTest, LaunchEndsWithinTheGracePeriodWhateverTheWorkersDo) {
  const std::string marker = std::to_string(900000 + ::getpid() % 100000);
  const std::vector<std::string> others = {
      "trap \"\" TERM; sleep 1" + marker,                                         // ignores SIGTERM
      "sleep 2" + marker + " & setsid sleep 3" + marker + " & sleep 4" + marker,  // children
  };
  for (const std::string& other : others) {
    const auto start = std::chrono::steady_clock::now();
    Result r = RunBinary(
        "launch --nproc-per-node 2 --grace-s 2 -- sh -c 'if [ $RANK = 0 ]; then "
        "sleep 0.5; exit 3; else " +
        other + "; fi'");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 1) << other;
    EXPECT_NE(r.err.find("packed-bert launch: error: rank 0 exited with code 3; the job stopped"),
              std::string::npos)
        << r.err;
    EXPECT_LT(seconds, 2 + 0.5 + 5) << other << ": the grace period is 2 s";
    EXPECT_EQ(ProcessesWith(marker), 0) << other << " left processes behind";
  }
}

// A worker that a signal ends while the job stops (a crash, say) is named,
// after the failure that stopped the job: no rank ends without a word.
TEST(CliTest, LaunchNamesAWorkerThatASignalEndsWhileTheJobStops) {
  Result r = RunBinary(
      "launch --nproc-per-node 2 --grace-s 20 -- sh -c 'if [ $RANK = 0 ]; then "
      "sleep 0.5; exit 3; else trap \"kill -SEGV \\$\\$\" TERM; sleep 10 & wait; fi'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("rank 0 exited with code 3; stopping the other workers"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rank 1 was killed by signal 11 (Segmentation fault) while the job stopped"),
            std::string::npos)
      << r.err;
}

// plot draws what train writes, and ends with one line on any other file:
// a value that is no number, one no chart can hold, a named pipe.
TEST(CliTest, PlotDrawsRunsAndEndsOnAnyMetricsFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_plot";
  fs::remove_all(dir);
  const std::string good =
      "{\"kind\":\"train\",\"step\":10,\"samples\":200,\"time\":3.5,\"loss\":7.1,"
      "\"tokens_per_s\":5000,\"sequences_per_s\":20}\n"
      "{\"kind\":\"train\",\"step\":20,\"samples\":400,\"time\":7.0,\"loss\":6.4,"
      "\"tokens_per_s\":5100,\"sequences_per_s\":21}\n"
      "{\"kind\":\"eval\",\"step\":20,\"samples\":400,\"time\":7.5,\"mlm_accuracy\":0.05}\n";
  testing::WriteFile((dir / "run" / "metrics.jsonl").string(), good);
  Result r = RunBinary("plot " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(testing::ReadText((dir / "run" / "learning_curves.svg").string()).find("<svg"),
            std::string::npos);
  // An --out that cannot be a folder: one line naming it, exit 2.
  const std::string file = (dir / "run" / "metrics.jsonl").string();
  r = RunBinary("plot " + (dir / "run").string() + " --out " + file + "/charts");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert plot: error: cannot create --out '" + file +
                       "/charts': Not a directory; choose a folder you can write\n");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"\"loss\":\"x\"", "loss is \"x\""},
      {"\"samples\":1e300", "samples is 1e+300"},
      {"\"time\":-1e200", "time is -1e+200"},
  };
  for (const auto& [field, said] : bad) {
    const std::string metrics = (dir / "bad" / "metrics.jsonl").string();
    testing::WriteFile(metrics, good + "{\"kind\":\"train\",\"step\":30," + field + "}\n");
    r = RunBinary("plot " + (dir / "bad").string());
    EXPECT_EQ(r.exit_code, 2) << field;
    EXPECT_EQ(r.err, "packed-bert plot: error: " + metrics + ":4: " + said +
                         ", not a finite number of the size train writes; the file is damaged\n");
  }
  fs::create_directories(dir / "fifo");
  const std::string fifo = (dir / "fifo" / "metrics.jsonl").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = RunBinary("plot " + (dir / "fifo").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert plot: error: metrics file " + fifo +
                       " is a named pipe (FIFO); give a file\n");
  // A run that has logged nothing yet: said, and no empty charts drawn.
  fs::create_directories(dir / "young");
  testing::WriteFile((dir / "young" / "metrics.jsonl").string(), "");
  r = RunBinary("plot " + (dir / "young").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert plot: error: " + (dir / "young" / "metrics.jsonl").string() +
                       " holds no metrics yet: train writes a line every train.log_every_steps "
                       "steps and after each evaluation; plot the run once it has some\n");
  EXPECT_FALSE(fs::exists(dir / "young" / "learning_curves.svg"));
  // The pipe given as the run itself.
  r = RunBinary("plot " + fifo);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert plot: error: " + fifo +
                " is not a run folder; give the run.output_dir of a packed-bert train or finetune "
                "run\n");
  // A named pipe as the config: refused by its type, not waited on.
  r = RunBinary("train --config " + fifo);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert train: error: config file " + fifo +
                       " is a named pipe (FIFO); give a file\n");
  fs::remove_all(dir);
}

// A rendezvous that cannot happen ends within dist.timeout_s, naming the
// address, the port and the likely cause: a world size no launch filled, a
// host that does not resolve, nobody listening.
TEST(CliTest, RendezvousFailuresNameTheirCause) {
  const std::string train = std::string("train --config ") + pbert::testing::SourceDir() +
                            "/configs/bert-tiny.yaml --set dist.timeout_s=2 --set run.device=cpu "
                            "--log-level warn";
  const std::string port = std::to_string(pbert::testing::FreePort());
  struct Case {
    std::string env, err;
    int exit_code;
  };
  std::vector<Case> cases = {
      {"WORLD_SIZE=1000000 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port,
       "rank 0: 1 of WORLD_SIZE=1000000 ranks reached the rendezvous at 127.0.0.1:" + port +
           " (MASTER_ADDR, MASTER_PORT) within dist.timeout_s (2 s); start every rank, or give "
           "the launcher the number of ranks it starts",
       2},
      {"WORLD_SIZE=2 RANK=1 MASTER_ADDR=no-such-host.invalid MASTER_PORT=" + port,
       "rank 1 cannot find the rendezvous host 'no-such-host.invalid' (MASTER_ADDR, or "
       "dist.master_addr): ",
       2},
      {"WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port,
       "rank 1 cannot reach the rendezvous at 127.0.0.1:" + port +
           " (MASTER_ADDR, MASTER_PORT): nobody listens there (rank 0 not started, or another "
           "port)",
       1},
  };
  // A port that accepts connections (the kernel completes them into the
  // listen queue) and never answers, as another service might.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const std::string silent = std::to_string(ntohs(address.sin_port));
  cases.push_back({"WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + silent,
                   "rank 1 of 2: the rendezvous at 127.0.0.1:" + silent +
                       " (MASTER_ADDR, MASTER_PORT) accepted the connection but did not answer "
                       "within dist.timeout_s (2 s); check that it is rank 0's or the "
                       "launcher's rendezvous, not another service",
                   1});
  // A port whose service answers, but not as a rendezvous does (a web
  // server): each connection gets an HTTP reply and is closed.
  const int talker = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(talker, 0);
  sockaddr_in talking{};
  talking.sin_family = AF_INET;
  talking.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  size = sizeof(talking);
  ASSERT_EQ(::bind(talker, reinterpret_cast<sockaddr*>(&talking), size), 0);
  ASSERT_EQ(::listen(talker, 16), 0);
  ASSERT_EQ(::getsockname(talker, reinterpret_cast<sockaddr*>(&talking), &size), 0);
  std::thread replies([talker] {
    const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    for (int connection; (connection = ::accept(talker, nullptr, nullptr)) >= 0;) {
      (void)!::write(connection, reply, sizeof(reply) - 1);
      ::close(connection);
    }
  });
  const std::string web = std::to_string(ntohs(talking.sin_port));
  for (const Case& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    Result r = RunBinary(train, c.env);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, c.exit_code) << c.env << ": " << r.err;
    EXPECT_EQ(r.err.rfind("packed-bert train: error: " + c.err, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    // Within dist.timeout_s and the binary's start, which takes seconds on
    // a loaded machine (not the test's 10-minute limit: no hang).
    EXPECT_LT(seconds, 2 + 20) << c.env;
  }
  // LibTorch's client reads the reply as its protocol (1.13: or takes a
  // length in it for a size to allocate, in a thread of its own; 2.6:
  // refuses it as it connects): whichever, one line names the rendezvous
  // and the service that is not one (not "nobody listens").
  for (int k = 0; k < 3; ++k) {
    Result r = RunBinary(train, "WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + web);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "packed-bert train: error: ")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "the rendezvous at 127.0.0.1:" + web +
                                             " (MASTER_ADDR, MASTER_PORT)"))
        << r.err;
    EXPECT_TRUE(absl::StrContains(
        r.err, "check that it is rank 0's or the launcher's rendezvous, not another service"))
        << r.err;
    EXPECT_FALSE(absl::StrContains(r.err, "nobody listens")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  ::close(listener);
  ::shutdown(talker, SHUT_RDWR);  // ends the accept
  replies.join();
  ::close(talker);
}

TEST(CliTest, TokenizeGivesTheStandardIds) {
  if (!std::filesystem::exists(SharedData("bert-base-uncased-vocab.txt"))) {
    GTEST_SKIP() << "needs the shared data folder";
  }
  std::string text = WriteConfig("pbert_cli_tokenize.txt", "Hello, world!\nunaffable\n");
  Result r =
      RunBinary("tokenize --vocab " + SharedData("bert-base-uncased-vocab.txt") + " " + text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "7592 1010 2088 999\n14477 20961 3468\n");
  r = RunBinary("tokenize --tokens --vocab " + SharedData("bert-base-uncased-vocab.txt") + " " +
                text);
  EXPECT_EQ(r.out, "hello , world !\nuna ##ffa ##ble\n");
}

TEST(CliTest, PrepareErrorsAreOneLineAndLeaveNothing) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / "pbert_cli_prepare";
  fs::remove_all(root);
  fs::create_directories(root);
  std::string vocab =
      WriteConfig("pbert_cli_prepare/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n");
  std::string text = WriteConfig("pbert_cli_prepare/text.txt", "Hello there.\nHello again.\n");
  std::string out = (root / "store").string();
  Result r = RunBinary("prepare --vocab " + vocab + " --out " + out + " " + text);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert prepare: error: " + vocab +
                       ": the vocabulary has no [MASK] token; use a BERT vocab.txt with [PAD], "
                       "[UNK], [CLS], [SEP] and [MASK]\n");
  // A vocabulary that does not fit the text (here: special tokens only)
  // would make a store of [UNK].
  std::string specials =
      WriteConfig("pbert_cli_prepare/specials.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
  r = RunBinary("prepare --log-level warn --vocab " + specials + " --out " + out + " " + text);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert prepare: error: 100.0% of the 6 tokens of the inputs are [UNK]: "
            "the vocabulary " +
                specials +
                " does not fit their text (another "
                "language's, or a cased one: set prepare.lower_case false); give the "
                "vocabulary of the model\n");
  EXPECT_FALSE(fs::exists(out));
  std::string empty = WriteConfig("pbert_cli_prepare/empty.txt", "");
  std::string full_vocab = WriteConfig("pbert_cli_prepare/full_vocab.txt",
                                       "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  // The same input twice, by its name or through a link, would be imported
  // twice.
  const std::string link = (root / "link.txt").string();
  fs::create_symlink(text, link);
  for (const std::string& again : {text, link, (root / "." / "text.txt").string()}) {
    r = RunBinary("prepare --vocab " + full_vocab + " --out " + out + " " + text + " " + again);
    EXPECT_EQ(r.exit_code, 2) << again;
    EXPECT_EQ(r.err, "packed-bert prepare: error: " + again + " is the file " + text +
                         " again (the same file given twice); give each input once\n");
    EXPECT_FALSE(fs::exists(out));
  }
  fs::remove(link);
  r = RunBinary("prepare --vocab " + full_vocab + " --out " + out + " " + empty);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert prepare: error: " + empty +
                       " holds no sentences (the file is empty); expected WikiExtractor output "
                       "or one sentence per line\n");
  // An output that is an input, the vocabulary, under a file, or a folder
  // that is not a store: refused before any tokenizing, exit 2.
  const std::string prepare = "prepare --vocab " + full_vocab + " --overwrite --out ";
  for (const std::string& target : {text, full_vocab, std::string("/"), root.string()}) {
    r = RunBinary(prepare + target + " " + text);
    EXPECT_EQ(r.exit_code, 2) << target;
    EXPECT_EQ(r.err, "packed-bert prepare: error: " + target +
                         " exists and is not an instance store; --overwrite replaces only a "
                         "store: choose another folder\n");
  }
  r = RunBinary(prepare + text + "/store " + text);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert prepare: error: cannot write the store " + text +
                       "/store: " + text + " is a file, not a folder; choose another\n");
  // More masked slots than a sequence can fill; a run folder that is a
  // file: refused before the work.
  r = RunBinary("prepare --vocab " + full_vocab + " --out " + out +
                " --max-len 16 --set prepare.max_predictions_per_seq=20 " + text);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert prepare: error: prepare.max_predictions_per_seq 20 is more than a "
            "sequence of data.max_seq_len 16 can mask (13 tokens besides [CLS] and [SEP]); "
            "lower it\n");
  r = RunBinary("prepare --vocab " + full_vocab + " --out " + out +
                " --set run.output_dir=" + text + " " + text);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert prepare: error: run.output_dir '" + text + "' is a file; name a folder\n");
  EXPECT_FALSE(fs::exists(out));
  // Text that is not UTF-8 (Latin-1) is named, not silently dropped.
  std::string latin1 = WriteConfig("pbert_cli_prepare/latin1.txt", "Hello there.\nCaf\xe9 here.\n");
  r = RunBinary("prepare --vocab " + full_vocab + " --out " + out + " " + latin1);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert prepare: error: " + latin1 +
                       ":2: not UTF-8 (byte 0xe9 at column 4); convert the file, e.g. iconv -f "
                       "latin1 -t utf-8\n");
  // Nothing half-written: only the six inputs are in the folder.
  EXPECT_EQ(std::distance(fs::directory_iterator(root), fs::directory_iterator{}), 6);
}

// A store made whole and a config that cannot be written after it (here a
// folder in its place; a full disk alike): the line says the store is
// whole and usable, and it is.
TEST(CliTest, APrepareWhoseConfigCannotBeWrittenKeepsItsStore) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "pbert_cli_prepare_config";
  fs::remove_all(root);
  fs::create_directories(root / "run" / "config.yaml");
  const std::string vocab = WriteConfig("pbert_cli_prepare_config/vocab.txt",
                                        "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nthere\n");
  const std::string text =
      WriteConfig("pbert_cli_prepare_config/text.txt", "Hello there.\nHello there.\n\nHello.\n");
  const std::string store = (root / "store").string();
  const Result r =
      RunBinary("prepare --vocab " + vocab + " --out " + store + " " + text +
                " --set run.output_dir=" + (root / "run").string() + " --log-level warn");
  EXPECT_EQ(r.exit_code, 2) << r.err;  // the folder in the way is the user's to move
  EXPECT_NE(
      r.err.find("; the store " + store + " is whole and usable: only its effective config, " +
                 (root / "run" / "config.yaml").string() + ", was not written\n"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(RunBinary("verify " + store).exit_code, 0);
  fs::remove_all(root);
}

TEST(CliTest, PrepareCountsTheTokensALongLineLoses) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "pbert_cli_long_line";
  fs::remove_all(root);
  fs::create_directories(root);
  std::string vocab = WriteConfig("pbert_cli_long_line/vocab.txt",
                                  "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nthere\n");
  // A 200-token line and a 100-token one, where a sequence of 64 holds 61.
  std::string line(200 * 6, ' '), shorter(100 * 6, ' ');
  for (int i = 0; i < 200; ++i) line.replace(6 * i, 5, "hello");
  for (int i = 0; i < 100; ++i) shorter.replace(6 * i, 5, "there");
  std::string text = WriteConfig("pbert_cli_long_line/text.txt",
                                 "Hello there.\n" + line + "\n\nThere.\nHello.\n" + shorter + "\n");
  const std::string out = (root / "store").string();
  Result r = RunBinary("prepare --max-len 64 --vocab " + vocab + " --out " + out + " " + text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[prepare] 2 sentence(s) hold more tokens than a sequence of 64 has room "
                       "for (61; the longest: 200): 178 of their tokens are cut off in every "
                       "instance that uses them; split such lines into sentences, or raise "
                       "data.max_seq_len\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("cut off     178 tokens of 2 sentences longer than a sequence holds "
                       "(the longest: 200 tokens)\n"),
            std::string::npos)
      << r.out;
  // Lines that fit say nothing.
  r = RunBinary("prepare --overwrite --max-len 512 --vocab " + vocab + " --out " + out + " " +
                text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("cut off"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("cut off"), std::string::npos) << r.out;
  fs::remove_all(root);
}

// The checksum of the first shard that store.json lists.
std::string ShardChecksum(const std::string& store) {
  std::ifstream in(store + "/store.json");
  return nlohmann::json::parse(in, nullptr, false)
      .value("shards", nlohmann::json::array())
      .at(0)
      .value("checksum", "");
}

TEST(CliTest, PrepareReadsEachInputOnceAndRefusesEndlessBinary) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_inputs";
  const std::string hdf5_store = MakeStore(dir, 40, 6);
  ASSERT_FALSE(hdf5_store.empty());
  const std::string vocab = (dir / "vocab.txt").string();
  // HDF5 is told by its signature: no --input-format needed, same store.
  Result r = RunBinary("prepare --log-level warn --vocab " + vocab + " --out " +
                       (dir / "auto").string() + " " + (dir / "d.hdf5").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ShardChecksum((dir / "auto").string()), ShardChecksum(hdf5_store));
  // A pipe (as bash's <(zcat a.gz) gives) is read once, from its first byte:
  // the same store as from the file. Words from the test vocabulary (w12...).
  std::string text;
  for (int d = 0; d < 30; ++d) {
    for (int s = 0; s < 4; ++s)
      absl::StrAppend(&text, "w", 10 + d, " w", 20 + s, " w", 30 + d + s, "\n");
    text += "\n";
  }
  const std::string file = testing::WriteFile((dir / "text.txt").string(), text);
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string prepare = "prepare --log-level warn --vocab " + vocab + " --out ";
  // (A trailing '/' on --out names the same store.)
  r = RunBinary(prepare + (dir / "from_file").string() + "/ " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunBinary(prepare + (dir / "from_pipe").string() + " " + fifo,
                "cat " + file + " > " + fifo + " &");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ShardChecksum((dir / "from_pipe").string()),
            ShardChecksum((dir / "from_file").string()));
  // Endless binary input ends at its first block with one line.
  r = RunBinary(prepare + (dir / "zero").string() + " /dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert prepare: error: /dev/zero:1: a NUL byte; this looks like a "
            "binary file, not text\n");
  r = RunBinary("tokenize --vocab " + vocab + " /dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  // A histogram is read whole: a device is refused by its type, unread.
  r = RunBinary("pack --histogram /dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "packed-bert pack: error: histogram file /dev/zero is a character device; give a "
            "file\n");
  // HDF5 and text together: one line, before any work.
  r = RunBinary(prepare + (dir / "mixed").string() + " " + file + " " + (dir / "d.hdf5").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert prepare: error: " + (dir / "d.hdf5").string() + " is HDF5 and " +
                       file + " is not; prepare HDF5 and text inputs into separate stores\n");
  EXPECT_FALSE(fs::exists(dir / "zero"));
  EXPECT_FALSE(fs::exists(dir / "mixed"));
  fs::remove_all(dir);
}

TEST(CliTest, PreparePackVerifyOnRealText) {
  namespace fs = std::filesystem;
  if (!fs::exists(SharedData("wiki_00"))) GTEST_SKIP() << "needs the shared data folder";
  fs::path root = fs::temp_directory_path() / "pbert_cli_pipeline";
  fs::remove_all(root);
  const std::string store = (root / "store").string();
  const std::string common = " --set run.output_dir=" + (root / "run").string() +
                             " --set prepare.dupe_factor=1 --max-len 64 --log-level warn";
  Result r = RunBinary("prepare --vocab " + SharedData("bert-base-uncased-vocab.txt") + " --out " +
                       store + common + " " + SharedData("wiki_00"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("documents   37\n"), std::string::npos) << r.out;
  r = RunBinary("prepare --vocab " + SharedData("bert-base-uncased-vocab.txt") + " --out " + store +
                common + " " + SharedData("wiki_00"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  r = RunBinary("pack --store " + store + common + " --set data.max_seq_len=64 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = nlohmann::json::parse(r.out);
  EXPECT_GT(report["packing_factor"].get<double>(), 1.0);
  r = RunBinary("verify " + (root / "run" / "pack.pbpack").string() + " --store " + store);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // An existing pack index is kept unless --overwrite.
  r = RunBinary("pack --store " + store + common + " --set data.max_seq_len=64 --format json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert pack: error: " + (root / "run" / "pack.pbpack").string() +
                       " already exists; add --overwrite to replace it, or choose another name\n");
  // --compare reports every algorithm but writes the configured one.
  r = RunBinary("pack --store " + store + common +
                " --set data.max_seq_len=64 --compare --algorithm spfhp --format json --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream pack_json(root / "run" / "pack.json");
  EXPECT_EQ(nlohmann::json::parse(pack_json)["algorithm"], "spfhp");
  std::ifstream config_file(root / "run" / "config.yaml");
  std::string config_text((std::istreambuf_iterator<char>(config_file)), {});
  EXPECT_NE(config_text.find("# effective: optimizer after the packing adjustment (betas"),
            std::string::npos)
      << config_text;
  // Damage a shard: verify names it and fails.
  std::string shard = store + "/shard-00000.pbstore";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x5a');
  }
  r = RunBinary("verify " + store);
  EXPECT_EQ(r.exit_code, 2);  // a damaged input: the user must prepare it again
  EXPECT_NE(r.err.find(shard + ": checksum mismatch"), std::string::npos) << r.err;
  // train, score and export refuse it as verify does, before any work.
  const std::string model = std::string(" --config ") + pbert::testing::SourceDir() +
                            "/configs/bert-tiny.yaml --set model.max_position_embeddings=64 "
                            "--set data.max_seq_len=64 --log-level warn";
  const std::string weights = (root / "w.safetensors").string();
  ASSERT_EQ(RunBinary("model init" + model + " --out " + weights).exit_code, 0);
  for (const std::string& command :
       {"train" + model + " --set data.store=" + store +
            " --set run.output_dir=" + (root / "run2").string(),
        "score" + model + " --weights " + weights + " --data " + store,
        "export --store " + store + " --out " + (root / "e.hdf5").string()}) {
    r = RunBinary(command);
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_NE(r.err.find(shard + ": checksum mismatch"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(root / "run2")) << "a refused train leaves no folder";
  EXPECT_FALSE(std::filesystem::exists(root / "e.hdf5"));
}

// Structure that would crash or hang a recursive reader, in every reader
// of YAML and JSON a command has: an alias cycle in a config, a store.json
// and a checkpoint's trainer_state.json nested a million deep. Each is one
// line naming the file and the limit, exit 2, whatever the command.
TEST(CliTest, HostileStructureIsOneLineNamingTheFile) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "pbert_cli_hostile";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  for (const char* yaml : {"cyc: &c [*c]\n", "run: &r {x: *r}\n"}) {
    const std::string config = testing::WriteFile((root / "c.yaml").string(), yaml);
    for (const std::string command : {"config dump", "train", "pack --store x"}) {
      Result r = RunBinary(command + " --config " + config);
      EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
      EXPECT_EQ(r.err, "packed-bert " + command.substr(0, command.find(' ')) + ": error: " +
                           config + ":1: an alias (*name) inside the value it names makes a " +
                           "value without end; write the value out\n");
    }
  }
  // A store whose store.json is deep: verify, score and pack refuse it.
  const std::string vocab = pbert::testing::WriteTestVocab((root / "vocab.txt").string(), 200);
  std::string text;
  for (int i = 0; i < 20; ++i) text += "w10 w11 w12 w13 .\nw14 w15 w16 .\n\n";
  testing::WriteFile((root / "text.txt").string(), text);
  const std::string store = (root / "store").string();
  ASSERT_EQ(RunBinary("prepare --vocab " + vocab + " --out " + store +
                      " --max-len 32 --log-level warn " + (root / "text.txt").string())
                .exit_code,
            0);
  testing::WriteFile(store + "/store.json", deep);
  const std::string model = std::string(" --config ") + pbert::testing::SourceDir() +
                            "/configs/bert-tiny.yaml --set model.vocab_size=200 --log-level warn";
  const std::string weights = (root / "w.safetensors").string();
  ASSERT_EQ(RunBinary("model init" + model + " --out " + weights).exit_code, 0);
  const std::string limit = "/store.json nests values 1000000 levels deep, over the limit of 64";
  for (const std::string& command :
       {"verify " + store, "pack --store " + store + model,
        "score" + model + " --weights " + weights + " --data " + store}) {
    Result r = RunBinary(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_NE(ErrorLine(r).find(store + limit), std::string::npos) << command << ": " << r.err;
    EXPECT_EQ(r.err.find("\n"), r.err.size() - 1) << r.err;
  }
  // A checkpoint whose trainer_state.json is deep, given as weights.
  const fs::path checkpoint = root / "run" / "checkpoints" / "step-00000002";
  fs::create_directories(checkpoint);
  fs::copy_file(weights, checkpoint / "model.safetensors");
  for (const char* file : {"optimizer.pt", "config.yaml"})
    testing::WriteFile((checkpoint / file).string(), "x");
  testing::WriteFile((checkpoint / "trainer_state.json").string(), deep);
  Result r = RunBinary("score" + model + " --weights " + checkpoint.string() + " --data " + store);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(ErrorLine(r).find((checkpoint / "trainer_state.json").string() +
                              " nests values 1000000 levels deep"),
            std::string::npos)
      << r.err;
  fs::remove_all(root);
}

// What comes from a file is shown safely: a tensor name that would clear
// the terminal and forge a line of its own is escaped in the error line and
// in the log, and a name of 100 KB leaves a line of bounded length.
TEST(CliTest, NamesFromFilesAreEscapedAndBounded) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "pbert_cli_escaped";
  fs::remove_all(root);
  fs::create_directories(root);
  // A safetensors file of one tensor, named `name` (JSON-escaped here).
  auto weights = [&](const std::string& file, const std::string& name) {
    const std::string header =
        "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
    return testing::WriteFile((root / file).string(), bytes + header + std::string(4, '\0'));
  };
  // Through the model of a config, which names the tensors it does not know.
  const std::string convert = std::string(" --log-level warn --config ") +
                              pbert::testing::SourceDir() + "/configs/bert-tiny.yaml " +
                              (root / "out.safetensors").string();
  const std::string forged = weights("forged.safetensors", "\\u001b[2J\\npacked-bert: done");
  Result r = RunBinary("model convert " + forged + convert);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("\\x1b[2J\\npacked-bert: done"), std::string::npos) << r.err;
  const std::string long_name = weights("long.safetensors", std::string(100'000, 'x'));
  r = RunBinary("model convert " + long_name + convert);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(r.err.size(), 2100u) << r.err.substr(0, 300);
  EXPECT_NE(r.err.find("bytes left out"), std::string::npos) << r.err.substr(0, 300);
  EXPECT_NE(r.err.find("; check the model section and the vocabulary\n"), std::string::npos)
      << "the end, which says what to do, is kept";
  EXPECT_FALSE(fs::exists(root / "out.safetensors"));
  fs::remove_all(root);
}

// What a user gives in the wrong place is named for what it is: a run
// folder where a checkpoint or weights belong, a checkpoint that lost its
// weights (not "is a folder").
TEST(CliTest, AFolderGivenForWeightsIsNamedForWhatItIs) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "pbert_cli_folders";
  fs::remove_all(root);
  const fs::path run = root / "run", checkpoint = run / "checkpoints" / "step-00000002";
  fs::create_directories(checkpoint);
  testing::WriteFile((checkpoint / "trainer_state.json").string(), "{}");
  const std::string out = (root / "out.safetensors").string();
  Result r = RunBinary("model convert " + checkpoint.string() + " " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert model: error: the checkpoint " + checkpoint.string() +
                       " has no model.safetensors (removed or lost); take an earlier checkpoint "
                       "of its run\n");
  r = RunBinary("model convert " + run.string() + " " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert model: error: " + run.string() +
                       " is a run folder; give one of its checkpoints (" + run.string() +
                       "/checkpoints/step-N) or a weights file\n");
  r = RunBinary("model convert " + root.string() + " " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(root.string() + " is a folder without model.safetensors"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(root);
}

// Limits of the process are said as such, in one line: a file-size limit
// (which killed the process with SIGXFSZ, without a word), too few open
// files, an address-space limit that an allocation meets.
TEST(CliTest, ProcessLimitsAreNamedInOneLine) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "pbert_cli_limits";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string model =
      std::string(" --config ") + pbert::testing::SourceDir() + "/configs/bert-tiny.yaml";
  const std::string out = (root / "w.safetensors").string();
  Result r = testing::RunShell("ulimit -f 8; exec " + std::string(pbert::testing::BinaryPath()) +
                               " model init" + model + " --out " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "packed-bert model: error: cannot write " + out +
                       ": File too large (files may grow to 4096 bytes in this process: raise "
                       "ulimit -f)\n");
  EXPECT_FALSE(fs::exists(out));
  r = testing::RunShell("ulimit -n 32; exec " + std::string(pbert::testing::BinaryPath()) +
                        " config dump");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "packed-bert config: error: this process may open only 32 files (ulimit -n), "
            "and packed-bert needs 64: raise the limit (ulimit -n 64)\n");
  // 4 GB of weights in a 3 GB address space.
  r = testing::RunShell(
      "ulimit -v 3000000; exec " + std::string(pbert::testing::BinaryPath()) + " model init" +
      model +
      " --set model.vocab_size=4000000 --set model.hidden_size=256 --set model.num_heads=4 "
      "--set model.intermediate_size=1024 --log-level warn --out " +
      out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(ErrorLine(r),
            "packed-bert model: error: out of memory (the address space is limited "
            "to 2929 MiB (ulimit -v)); give the process more memory (ulimit -v, "
            "the container's limit)");
  // A file larger than the address space left cannot be mapped: the line
  // names the limit (4 GB of weights, sparse, in a 3 GB address space).
  {
    const std::string big = (root / "big.safetensors").string();
    testing::WriteFile(big, "");
    std::filesystem::resize_file(big, uint64_t{4} << 30);
    r = testing::RunShell("ulimit -v 3000000; exec " + std::string(pbert::testing::BinaryPath()) +
                          " model convert " + big + " " + (root / "out.safetensors").string());
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(absl::StrContains(ErrorLine(r), "cannot map " + big + ": Cannot allocate memory "
                                                "(the address space is limited to 2929 MiB in "
                                                "this process: raise ulimit -v)"))
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(root / "out.safetensors"));
    std::filesystem::remove(big);
  }
  // An address space too small for LibTorch and OpenBLAS to start in (their
  // initialisers would abort, or retry an allocation for ever): one line
  // before they run, for every command.
  for (const std::string command : {"prepare --vocab v.txt --out s t.txt", "score", "--help"}) {
    const std::string named =
        command == "--help" ? "packed-bert" : "packed-bert " + command.substr(0, command.find(' '));
    const auto start = std::chrono::steady_clock::now();
    r = testing::RunShell("ulimit -v 700000; exec " + std::string(pbert::testing::BinaryPath()) +
                          " " + command);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << command;
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_TRUE(absl::StartsWith(r.err, named + ": error: the address space is limited to 683 "
                                                "MiB (ulimit -v), and packed-bert needs at least "))
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // At the floor that line names, a small fine-tuning runs whole: its
  // threads start, and OpenBLAS has its buffers (with less room it retried
  // one for ever, or a thread's start crashed).
  {
    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    const std::vector<std::string> words = {"the", "cat", "sat", "on", "a", "mat", "ran", "far"};
    for (const std::string& w : words) vocab += w + "\n";
    testing::WriteFile((root / "vocab.txt").string(), vocab);
    std::string tsv;
    for (int i = 0; i < 96; ++i) {
      std::string sentence;
      for (int w = 0; w < 3 + i % 9; ++w) {
        absl::StrAppend(&sentence, w ? " " : "", words[(i * 7 + w * 3) % 8]);
      }
      absl::StrAppend(&tsv, "src\t", i % 2, "\t\t", sentence, "\n");
    }
    testing::WriteFile((root / "train.tsv").string(), tsv);
    testing::WriteFile((root / "dev.tsv").string(), tsv);
    const std::string config = (root / "cola.yaml").string();
    testing::WriteFile(config, absl::StrCat("prepare:\n  vocab: ", (root / "vocab.txt").string(),
                                            "\nmodel:\n  vocab_size: 16\n  hidden_size: 32\n  "
                                            "num_layers: 2\n  num_heads: 2\n  intermediate_size: "
                                            "64\n  max_position_embeddings: 64\nfinetune:\n  "
                                            "task: cola\n  train_file: ",
                                            (root / "train.tsv").string(), "\n  eval_file: ",
                                            (root / "dev.tsv").string(),
                                            "\n  max_seq_length: 32\n  epochs: 1\n"));
    const std::string weights = (root / "cola.safetensors").string();
    r = testing::RunShell(absl::StrCat(pbert::testing::BinaryPath(), " model init --config ",
                                       config, " --log-level warn --out ", weights));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string finetune =
        absl::StrCat(pbert::testing::BinaryPath(), " finetune --config ", config, " --init ",
                     weights, " --set run.output_dir=", (root / "run").string(), " --log-level warn");
    r = testing::RunShell("ulimit -v 700000; exec " + finetune);
    const std::string advice = "raise the limit (ulimit -v ";
    const size_t at = r.err.find(advice);
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string floor_kib =
        r.err.substr(at + advice.size(), r.err.find(')', at) - at - advice.size());
    r = testing::RunShell(
        absl::StrCat("ulimit -v ", floor_kib, "; exec timeout -k 5 120 ", finetune));
    EXPECT_EQ(r.exit_code, 0) << "ulimit -v " << floor_kib << ": " << r.err;
    EXPECT_TRUE(fs::exists(root / "run" / "model" / "model.safetensors"));
  }
  // A stack too small to start on (a stack overflow could not even say so).
  for (const char* stack : {"64", "512"}) {
    r = testing::RunShell(
        absl::StrCat("ulimit -s ", stack, "; exec ", pbert::testing::BinaryPath(), " config dump"));
    EXPECT_EQ(r.exit_code, 2) << stack;
    EXPECT_EQ(r.err, absl::StrCat("packed-bert config: error: the stack is limited to ", stack,
                                  " KiB (ulimit -s), and packed-bert needs at least 1024 KiB; "
                                  "raise the limit (ulimit -s 8192)\n"));
  }
  // ulimit -t sets the hard limit too: the line still comes before the end.
  const std::string burn = (root / "burn.yaml").string();
  testing::WriteFile(burn,
                     "model:\n  vocab_size: 4000000\n  hidden_size: 64\n  num_heads: 1\n  "
                     "intermediate_size: 64\n");
  r = testing::RunShell(absl::StrCat("ulimit -t 2; exec ", pbert::testing::BinaryPath(),
                                     " model init --config ", burn,
                                     " --set model.num_layers=1 --log-level warn --out ", out));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err,
            "packed-bert model: error: the CPU-time limit of this process (ulimit -t) is "
            "reached; raise it, or run the command again\n");
  fs::remove_all(root);
}

// Every variable the launchers, the rendezvous and the thread pools read is
// checked once, before anything runs: a value out of range, or two
// launchers that disagree, is one line naming it, exit 2.
TEST(CliTest, TheEnvironmentIsReadStrictly) {
  const std::pair<std::string, std::string> cases[] = {
      {"OMP_NUM_THREADS=abc",
       "environment variable OMP_NUM_THREADS='abc' is not a thread count in [1, 65536], or such "
       "counts separated by commas; set it so or unset it"},
      {"OMP_NUM_THREADS=0", "environment variable OMP_NUM_THREADS='0' is not a thread count"},
      {"OMP_NUM_THREADS=100000",
       "environment variable OMP_NUM_THREADS='100000' is not a thread count"},
      {"OPENBLAS_NUM_THREADS=-1",
       "environment variable OPENBLAS_NUM_THREADS='-1' is not a thread count in [1, 65536]; set "
       "it so or unset it"},
      {"OMP_WAIT_POLICY=sometimes",
       "environment variable OMP_WAIT_POLICY='sometimes' is not ACTIVE or PASSIVE"},
      {"GOMP_SPINCOUNT=lots", "environment variable GOMP_SPINCOUNT='lots' is not a count of spins"},
      {"RANK=0 WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2",
       "torchrun's WORLD_SIZE=1 and Open MPI's OMPI_COMM_WORLD_SIZE=2 disagree"},
      {"RANK=0 WORLD_SIZE=1 GROUP_RANK=-5",
       "environment variable GROUP_RANK=-5 is out of range: it must be 0 or more"},
  };
  for (const auto& [variables, says] : cases) {
    for (const std::string command : {"config dump", "train --set optim.total_steps=1"}) {
      Result r = RunBinary(command, variables);
      EXPECT_EQ(r.exit_code, 2) << variables << " " << command << ": " << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << variables << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  // A valid count is what the run takes by default: torchrun and launch
  // set it for their workers.
  Result r = RunBinary("config dump --log-level debug", "OMP_NUM_THREADS=1,1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("intra-op threads: 1"), std::string::npos) << r.err;
}

TEST(CliTest, ExitCodesFollowTheStatus) {
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::DataLossError("x")), 2);  // a damaged input file
  EXPECT_EQ(ExitCodeFor(absl::InternalError("x")), 1);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("x")), 1);
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
}

// The path of docs/mlperf.md on files other tools wrote: NVIDIA packed and
// MLPerf HDF5 from h5py, a TensorFlow phase-1 checkpoint from the
// independent bundle writer; prepare (their packing kept), pick the eval set,
// convert the checkpoint, train from it, score with it.
TEST(CliTest, MlperfPathOnFilesOtherToolsWrote) {
  if (std::system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs python3-h5py (apt-get install python3-h5py)";
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pbert_cli_mlperf";
  fs::remove_all(dir);
  const std::string tests = std::string(pbert::testing::SourceDir()) + "/tests/";
  const std::string h5 = (dir / "h5").string(), ckpt = (dir / "phase1" / "model.ckpt-28252");
  fs::create_directories(dir / "phase1");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + tests + "data/write_mlperf_hdf5.py " + h5).c_str()),
            0);
  ASSERT_EQ(std::system(("/usr/bin/python3 " + tests + "model/write_tf_bundle.py " + ckpt + " " +
                         (dir / "phase1" / "expected").string() + " 30522 32 2 64 64")
                            .c_str()),
            0);
  const auto expected = nlohmann::json::parse(testing::ReadText(h5 + "/expected.json"));
  const std::string vocab = pbert::testing::WriteTestVocab((dir / "vocab.txt").string(), 30522);
  const std::string model = std::string(" --config ") + pbert::testing::SourceDir() +
                            "/configs/bert-tiny.yaml --set model.hidden_size=32"
                            " --set model.intermediate_size=64 --set data.max_seq_len=64"
                            " --set model.max_position_embeddings=64 --log-level warn";
  const std::string train_store = (dir / "train").string(), eval_store = (dir / "eval").string();

  Result r = RunBinary("prepare --input-format hdf5 --max-len 64 --vocab " + vocab + " --out " +
                       train_store + " --log-level warn " + h5 + "/nvidia-packed.hdf5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("packed rows " + std::to_string(expected["packed_rows"].size()) + " kept"),
            std::string::npos)
      << r.out;
  r = RunBinary("prepare --input-format hdf5 --max-len 64 --pick 20 --vocab " + vocab + " --out " +
                eval_store + " --log-level warn " + h5 + "/nvidia-gzip.hdf5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("instances   20\n"), std::string::npos) << r.out;

  const std::string converted = (dir / "phase1.safetensors").string();
  r = RunBinary("model convert " + ckpt + " " + converted + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The bundle and its conversion score alike: the same weights.
  Result from_bundle = RunBinary("score" + model + " --weights " + ckpt + ".index --data " + h5 +
                                 "/nvidia-varlength.hdf5");
  Result from_converted = RunBinary("score" + model + " --weights " + converted + " --data " + h5 +
                                    "/nvidia-varlength.hdf5");
  ASSERT_EQ(from_bundle.exit_code, 0) << from_bundle.err;
  ASSERT_EQ(from_converted.exit_code, 0) << from_converted.err;
  auto a = nlohmann::json::parse(from_bundle.out), b = nlohmann::json::parse(from_converted.out);
  EXPECT_EQ(a["sequences"], 40);
  EXPECT_EQ(a["mlm_loss_per_token"], b["mlm_loss_per_token"]);
  EXPECT_EQ(a["nsp_accuracy"], b["nsp_accuracy"]);

  const std::string run = (dir / "run").string();
  r = RunBinary("train" + model + " --set data.store=" + train_store + " --set data.pack_index=" +
                train_store + "/packs.pbpack --set data.eval=" + eval_store +
                " --set train.init_checkpoint=" + ckpt +
                " --set train.max_samples=40 --set train.micro_batch_rows=4"
                " --set train.eval_every_samples=20 --set run.output_dir=" +
                run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string mllog = testing::ReadText(run + "/mllog.txt");
  EXPECT_NE(mllog.find("\"key\":\"eval_accuracy\""), std::string::npos) << mllog;
}

// train and score wait passively unless the environment says otherwise
// (common/platform.h): libgomp prints the spin count it read at load with
// OMP_DISPLAY_ENV=verbose (0: passive; it shows 'PASSIVE' also when unset).
TEST(CliTest, OpenMpWaitIsPassiveUnlessSet) {
  auto help_with = [](const std::string& environment) {
    return testing::RunShell("env " + environment + " OMP_DISPLAY_ENV=verbose " +
                             std::string(pbert::testing::BinaryPath()) + " train --help");
  };
  Result r = help_with("-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (r.err.find("GOMP_SPINCOUNT") == std::string::npos) {
    GTEST_SKIP() << "the OpenMP runtime is not libgomp (no OMP_DISPLAY_ENV output)";
  }
  EXPECT_NE(r.err.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << r.err;
  r = help_with("OMP_WAIT_POLICY=active");
  EXPECT_NE(r.err.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << r.err;
  r = help_with("-u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000");
  EXPECT_NE(r.err.find("GOMP_SPINCOUNT = '1000'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pbert::app
