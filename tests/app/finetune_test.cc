// `packed-bert finetune` as a user runs it: SQuAD-format and GLUE-format
// files made here, a tiny pretrained model, the official scorer on its
// predictions, the Hugging Face export checked by an independent listing,
// exact resume after a stop or a crash, and bad input refused in one line
// with nothing left behind.
#include <ATen/ATen.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "formats/safetensors.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/app/binary.h"
#include "tests/app/same_training.h"
#include "tests/data/random_instances.h"
#include "tests/scratch_folder.h"
#include "tests/source_paths.h"

namespace pbert::app {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::ReadText;
using testing::Result;
using testing::RunBinary;
using testing::RunShell;
using testing::WriteFile;

constexpr int kVocab = 500;

std::string Word(std::mt19937& random) {
  return "w" + std::to_string(std::uniform_int_distribution<int>(110, kVocab - 1)(random));
}

// SQuAD-format cloze questions over paragraphs of the test vocabulary's
// words: each question is a window of its paragraph with the answer word
// replaced by [MASK].
json SquadFile(int paragraphs, uint32_t seed) {
  std::mt19937 random(seed);
  json data = json::array();
  for (int p = 0; p < paragraphs; ++p) {
    std::vector<std::string> words;
    const int n = std::uniform_int_distribution<int>(10, 60)(random);
    for (int i = 0; i < n; ++i) words.push_back(Word(random));
    std::string context;
    std::vector<size_t> offsets;
    for (const auto& w : words) {
      if (!context.empty()) context += ' ';
      offsets.push_back(context.size());
      context += w;
    }
    json qas = json::array();
    for (int q = 0; q < 2; ++q) {
      const int at = std::uniform_int_distribution<int>(0, n - 1)(random);
      std::string question;
      for (int i = std::max(0, at - 4); i <= std::min(n - 1, at + 4); ++i) {
        question += (question.empty() ? "" : " ") + (i == at ? std::string("[MASK]") : words[i]);
      }
      qas.push_back({{"id", absl::StrCat("p", p, "q", q)},
                     {"question", question},
                     {"answers", {{{"text", words[at]}, {"answer_start", offsets[at]}}}}});
    }
    data.push_back(
        {{"title", absl::StrCat("t", p)}, {"paragraphs", {{{"context", context}, {"qas", qas}}}}});
  }
  return {{"version", "1.1"}, {"data", data}};
}

// The same as SQuAD 2.0: each paragraph also asks a question of a word
// it does not hold (is_impossible, no answers). `answers` false: the
// questions alone, as a file to predict.
json SquadFileV2(int paragraphs, uint32_t seed, bool answers = true) {
  json file = SquadFile(paragraphs, seed);
  file["version"] = "v2.0";
  int n = 0;
  for (json& article : file["data"]) {
    for (json& paragraph : article["paragraphs"]) {
      const std::string context = paragraph["context"];
      std::string absent = "w110";
      for (int w = 110; context.find(absent) != std::string::npos; ++w) {
        absent = "w" + std::to_string(w);
      }
      std::string question = paragraph["qas"][0]["question"];
      question.replace(question.find("[MASK]"), 6, absent + " [MASK]");
      paragraph["qas"].push_back({{"id", absl::StrCat("none", n++)},
                                  {"question", question},
                                  {"answers", json::array()},
                                  {"is_impossible", true}});
      if (answers) continue;
      for (json& qa : paragraph["qas"]) {
        qa.erase("answers");
        qa.erase("is_impossible");
      }
    }
  }
  return file;
}

// An MRPC-format file: pairs of word lists, label 1 when they share their
// first word.
std::string MrpcFile(int pairs, uint32_t seed) {
  std::mt19937 random(seed);
  std::string out = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n";
  for (int i = 0; i < pairs; ++i) {
    std::string a, b;
    const int la = std::uniform_int_distribution<int>(3, 30)(random);
    const int lb = std::uniform_int_distribution<int>(3, 30)(random);
    for (int k = 0; k < la; ++k) a += (k ? " " : "") + Word(random);
    const bool same = random() % 2 == 0;
    b = same ? a.substr(0, a.find(' ')) : Word(random);
    for (int k = 1; k < lb; ++k) b += " " + Word(random);
    out += absl::StrCat(same ? 1 : 0, "\t", i, "\t", i + 1, "\t", a, "\t", b, "\n");
  }
  return out;
}

class FinetuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = pbert::testing::ScratchFolder();
    vocab_ = pbert::testing::WriteTestVocab((dir_ / "vocab.txt").string(), kVocab);
    WriteFile((dir_ / "train.json").string(), SquadFile(60, 1).dump());
    WriteFile((dir_ / "dev.json").string(), SquadFile(12, 2).dump());
    WriteFile((dir_ / "train.tsv").string(), MrpcFile(200, 3));
    WriteFile((dir_ / "dev.tsv").string(), MrpcFile(40, 4));
    model_ = absl::StrCat(" --config ", pbert::testing::SourceDir(),
                          "/configs/bert-tiny.yaml --set model.vocab_size=", kVocab,
                          " --set model.hidden_size=32 --set model.intermediate_size=64",
                          " --set prepare.vocab=", vocab_, " --log-level warn");
    const Result init =
        RunBinary("model init" + model_ + " --out " + (dir_ / "init.safetensors").string());
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The command for a run into `run`; `train`, `init` and `task`, if
  // given, replace the defaults.
  std::string Squad(const std::string& run, const std::string& train = "",
                    const std::string& init = "") const {
    return absl::StrCat("finetune", model_, " --task squad --train ",
                        train.empty() ? (dir_ / "train.json").string() : train, " --eval ",
                        (dir_ / "dev.json").string(), " --init ",
                        init.empty() ? (dir_ / "init.safetensors").string() : init,
                        " --set run.output_dir=", (dir_ / run).string(),
                        " --set finetune.max_seq_length=128 --set finetune.doc_stride=32",
                        " --set finetune.max_query_length=16 --set finetune.batch_size=16");
  }
  std::string Mrpc(const std::string& run, const std::string& train = "",
                   const std::string& task = "mrpc", const std::string& init = "") const {
    return absl::StrCat("finetune", model_, " --task ", task, " --train ",
                        train.empty() ? (dir_ / "train.tsv").string() : train, " --eval ",
                        (dir_ / "dev.tsv").string(), " --init ",
                        init.empty() ? (dir_ / "init.safetensors").string() : init,
                        " --set run.output_dir=", (dir_ / run).string(),
                        " --set finetune.max_seq_length=64");
  }
  Result CheckExport(const std::string& folder) const {
    return RunShell(absl::StrCat("/usr/bin/python3 ", pbert::testing::SourceDir(),
                                 "/tests/model/check_hf_export.py ", folder, " ", vocab_));
  }

  fs::path dir_;
  std::string vocab_, model_;
};

TEST_F(FinetuneTest, SquadTrainsScoresAndExports) {
  const Result r = RunBinary(Squad("run") + " --set finetune.epochs=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["status"], "done");
  EXPECT_EQ(out["steps"], out["total_steps"]);
  EXPECT_GT(out["packing_factor"].get<double>(), 1.5);  // 128-token rows of 20-90 tokens
  const fs::path run = dir_ / "run";
  // Every dev question answered, in the official format.
  const json predictions = json::parse(ReadText((run / "predictions.json").string()));
  EXPECT_EQ(predictions.size(), 24u);
  // One evaluation per epoch in metrics.jsonl, the last one the command's.
  std::vector<json> evaluations;
  std::istringstream lines(ReadText((run / "metrics.jsonl").string()));
  for (std::string line; std::getline(lines, line);) {
    const json parsed = json::parse(line);
    if (parsed["kind"] == "eval") evaluations.push_back(parsed);
  }
  ASSERT_EQ(evaluations.size(), 2u);
  EXPECT_EQ(evaluations.back()["f1"], out["f1"]);
  const std::string script =
      std::string(pbert::testing::SharedDataDir()) + "/../tools/squad/evaluate-v2.0.py";
  if (fs::exists(script) && RunShell("/usr/bin/python3 -c 'import numpy'").exit_code == 0) {
    const Result official =
        RunShell(absl::StrCat("/usr/bin/python3 ", script, " ", (dir_ / "dev.json").string(), " ",
                              (run / "predictions.json").string()));
    ASSERT_EQ(official.exit_code, 0) << official.err;
    const json o = json::parse(official.out);
    EXPECT_NEAR(o["exact"].get<double>(), out["exact_match"].get<double>(), 1e-9);
    EXPECT_NEAR(o["f1"].get<double>(), out["f1"].get<double>(), 1e-9);
  }
  const Result exported = CheckExport((run / "model").string());
  EXPECT_EQ(exported.exit_code, 0) << exported.out << exported.err;
  EXPECT_NE(exported.out.find("tensors as BertForQuestionAnswering holds them"), std::string::npos)
      << exported.out;
  // The checkpoint scores alone as the run scored it.
  std::string newest;
  for (const auto& e : fs::directory_iterator(run / "checkpoints")) {
    newest = std::max(newest, e.path().string());
  }
  const Result again = RunBinary(Squad("score") + " --evaluate " + newest);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["f1"], out["f1"]);
  // So does its export, which has no pooler (as Hugging Face's model has
  // none), and which a classifier starts from: its encoder, a new pooler.
  const std::string model = (run / "model").string();
  const Result exported_scores = RunBinary(Squad("score2") + " --evaluate " + model);
  ASSERT_EQ(exported_scores.exit_code, 0) << exported_scores.err;
  EXPECT_EQ(json::parse(exported_scores.out)["f1"], out["f1"]);
  const Result further = RunBinary(Mrpc("further", "", "mrpc", model) + " --set finetune.epochs=1");
  ASSERT_EQ(further.exit_code, 0) << further.err;
  EXPECT_NE(further.err.find(model + " is a model fine-tuned for squad: its encoder is taken, and "
                                     "mrpc's head is drawn anew"),
            std::string::npos)
      << further.err;
  // A second run into the same folder is refused, leaving it as it was.
  const Result twice = RunBinary(Squad("run"));
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("holds a run with checkpoints"), std::string::npos) << twice.err;
  EXPECT_NE(twice.err.find("continue it with --resume,"), std::string::npos) << twice.err;
}

// SQuAD 2.0 through the binary: trained with unanswerable questions,
// scored as evaluate-v2.0.py scores the dev predictions with the run's
// null odds as --na-prob-file (every one of its numbers), and the same
// questions without answers predicted into RUN_DIR/predict: the same
// answers, n-best lists of at most 20 with their probabilities and logits.
TEST_F(FinetuneTest, Squad2TrainsPredictsAndScoresAsTheOfficialScript) {
  WriteFile((dir_ / "train2.json").string(), SquadFileV2(60, 1).dump());
  WriteFile((dir_ / "dev2.json").string(), SquadFileV2(12, 2).dump());
  WriteFile((dir_ / "test2.json").string(), SquadFileV2(12, 2, false).dump());
  const std::string v2 = " --set finetune.version_2_with_negative=true";
  const std::string dev = (dir_ / "dev2.json").string();
  // A 2.0 file read as 1.1 is refused, naming the key that reads it.
  const Result v1 = RunBinary(Squad("v1", dev));
  EXPECT_EQ(v1.exit_code, 2);
  EXPECT_NE(v1.err.find(dev + ": question none0: is_impossible: a SQuAD 2.0 question; set "
                              "finetune.version_2_with_negative: true"),
            std::string::npos)
      << v1.err;
  EXPECT_FALSE(fs::exists(dir_ / "v1"));
  std::string command = Squad("run", (dir_ / "train2.json").string()) + v2 + " --predict " +
                        (dir_ / "test2.json").string() + " --set finetune.epochs=2";
  const std::string dev1 = (dir_ / "dev.json").string();
  command.replace(command.find(dev1), dev1.size(), dev);
  const Result r = RunBinary(command);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  const fs::path run = dir_ / "run";
  const json predictions = json::parse(ReadText((run / "predictions.json").string()));
  ASSERT_EQ(predictions.size(), 36u);
  // The predicted questions: the dev file's, answered alike.
  for (const char* name : {"predictions.json", "nbest_predictions.json", "null_odds.json"}) {
    EXPECT_EQ(ReadText((run / "predict" / name).string()), ReadText((run / name).string())) << name;
  }
  const json nbest = json::parse(ReadText((run / "predict" / "nbest_predictions.json").string()));
  for (const auto& [id, list] : nbest.items()) {
    ASSERT_GE(list.size(), 1u) << id;
    EXPECT_LE(list.size(), 20u) << id;
    double total = 0;
    for (const json& entry : list) {
      for (const char* key : {"text", "probability", "start_logit", "end_logit"}) {
        EXPECT_TRUE(entry.contains(key)) << id << " " << entry.dump();
      }
      total += entry["probability"].get<double>();
    }
    EXPECT_NEAR(total, 1.0, 1e-12) << id;
  }
  const std::string script =
      std::string(pbert::testing::SharedDataDir()) + "/../tools/squad/evaluate-v2.0.py";
  if (!fs::exists(script) || RunShell("/usr/bin/python3 -c 'import numpy'").exit_code != 0) {
    GTEST_SKIP() << "the official scorer needs " << script << " and python3-numpy";
  }
  const Result official = RunShell(
      absl::StrCat("/usr/bin/python3 ", script, " ", dev, " ", (run / "predictions.json").string(),
                   " --na-prob-file ", (run / "null_odds.json").string()));
  ASSERT_EQ(official.exit_code, 0) << official.err;
  const json o = json::parse(official.out);
  for (const auto& [ours, theirs] :
       std::vector<std::pair<std::string, std::string>>{{"exact_match", "exact"},
                                                        {"f1", "f1"},
                                                        {"HasAns_exact", "HasAns_exact"},
                                                        {"HasAns_f1", "HasAns_f1"},
                                                        {"NoAns_exact", "NoAns_exact"},
                                                        {"NoAns_f1", "NoAns_f1"},
                                                        {"best_exact", "best_exact"},
                                                        {"best_exact_thresh", "best_exact_thresh"},
                                                        {"best_f1", "best_f1"},
                                                        {"best_f1_thresh", "best_f1_thresh"}}) {
    ASSERT_TRUE(out.contains(ours)) << ours << " " << r.out;
    EXPECT_NEAR(out[ours].get<double>(), o[theirs].get<double>(), 1e-9) << ours;
  }
}

TEST_F(FinetuneTest, GlueClassifiesAndExports) {
  const Result r = RunBinary(Mrpc("run") + " --set finetune.epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  for (const char* metric : {"f1", "accuracy"}) {
    ASSERT_TRUE(out.contains(metric)) << r.out;
    EXPECT_GE(out[metric].get<double>(), 0.0);
    EXPECT_LE(out[metric].get<double>(), 1.0);
  }
  const Result exported = CheckExport((dir_ / "run" / "model").string());
  EXPECT_EQ(exported.exit_code, 0) << exported.out << exported.err;
  const json config = json::parse(ReadText((dir_ / "run" / "model" / "config.json").string()));
  EXPECT_EQ(config["architectures"][0], "BertForSequenceClassification");
  EXPECT_EQ(config["id2label"]["1"], "1");
  // A fine-tuned model of no known task (its weights alone, away from the
  // checkpoint that says whose they are) is no start for another task: one
  // line, nothing left. (One that says its task gives its encoder:
  // TheWeightsGivenAreTakenForWhatTheyAre.)
  std::string checkpoint;
  for (const auto& e : fs::directory_iterator(dir_ / "run" / "checkpoints")) {
    checkpoint = e.path().string();
  }
  // Its checkpoint given to model export-hf: said to be a fine-tuning
  // run's, which exported itself.
  const Result reexport = RunBinary("model export-hf " + checkpoint + " " +
                                    (dir_ / "hf").string() + " --vocab " + vocab_);
  EXPECT_EQ(reexport.exit_code, 2) << reexport.err;
  EXPECT_NE(reexport.err.find(checkpoint + " is a checkpoint of a mrpc fine-tuning run"),
            std::string::npos)
      << reexport.err;
  EXPECT_FALSE(fs::exists(dir_ / "hf"));
  const std::string bare = (dir_ / "bare.safetensors").string();
  fs::copy_file(checkpoint + "/model.safetensors", bare);
  const Result other = RunBinary(Squad("other", "", bare));
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find(bare + " is a fine-tuned model (classifier.weight of 2 outputs)"),
            std::string::npos)
      << other.err;
  EXPECT_FALSE(fs::exists(dir_ / "other"));
}

// A stop (SIGTERM after step 3) and a crash (SIGKILL after step 5, with a
// checkpoint every 2 steps) each resume to the very weights and scores of
// a run that never stopped.
TEST_F(FinetuneTest, ResumesExactly) {
  const std::string common = " --set finetune.epochs=2 --set finetune.checkpoint_every_steps=2";
  Result straight = RunBinary(Mrpc("straight") + common);
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const json whole = json::parse(straight.out);
  ASSERT_GT(whole["total_steps"].get<int>(), 6);

  Result stopped = RunBinary(Mrpc("stopped") + common, "PBERT_FAULT=after-step:3:0:TERM");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(json::parse(stopped.out)["status"], "interrupted");
  Result resumed = RunBinary(Mrpc("stopped") + common + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;

  Result crashed = RunBinary(Mrpc("crashed") + common, "PBERT_FAULT=after-step:5");
  EXPECT_EQ(crashed.exit_code, -1);  // killed
  Result recovered = RunBinary(Mrpc("crashed") + common + " --resume");
  ASSERT_EQ(recovered.exit_code, 0) << recovered.err;

  for (const auto* run : {&resumed, &recovered}) {
    const json out = json::parse(run->out);
    EXPECT_EQ(out["accuracy"], whole["accuracy"]);
    EXPECT_EQ(out["f1"], whole["f1"]);
  }
  const auto weights = [&](const std::string& run) {
    return ReadText((dir_ / run / "model" / "model.safetensors").string());
  };
  // Byte for byte (compared as a whole: the bytes themselves say nothing).
  EXPECT_TRUE(weights("stopped") == weights("straight"));
  EXPECT_TRUE(weights("crashed") == weights("straight"));
  // The same evaluations, logged once each.
  const auto evaluations = [&](const std::string& run) {
    std::vector<json> out;
    std::istringstream lines(ReadText((dir_ / run / "metrics.jsonl").string()));
    for (std::string line; std::getline(lines, line);) {
      json parsed = json::parse(line);
      if (parsed["kind"] != "eval") continue;
      for (const char* timing : {"time", "seconds"}) parsed.erase(timing);
      out.push_back(parsed);
    }
    return out;
  };
  ASSERT_EQ(evaluations("straight").size(), 2u);
  EXPECT_EQ(evaluations("crashed"), evaluations("straight"));
  EXPECT_EQ(evaluations("stopped"), evaluations("straight"));
}

// A run whose end was cut short (killed after its last checkpoint, before
// its export and predictions) is completed by its resume: the export and
// the predictions made from that checkpoint, equal to a run's that never
// stopped, and an export's temporary left by a kill removed; a finished
// run resumed with another file to predict predicts it.
TEST_F(FinetuneTest, AResumeCompletesWhatAFinishedRunLeftUndone) {
  const std::string predict = " --predict " + (dir_ / "dev.tsv").string();
  const Result straight = RunBinary(Mrpc("straight") + predict);
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const int steps = json::parse(straight.out)["total_steps"].get<int>();
  const fs::path run = dir_ / "cut";
  const Result cut = RunBinary(Mrpc("cut") + predict, absl::StrCat("PBERT_FAULT=run-end:", steps));
  ASSERT_EQ(cut.exit_code, -1) << cut.err;  // killed
  ASSERT_FALSE(fs::exists(run / "model"));
  ASSERT_FALSE(fs::exists(run / "predict"));
  fs::create_directories(run / "model.tmp-AbC123");  // as a killed export leaves it
  const Result resumed = RunBinary(Mrpc("cut") + predict + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const json out = json::parse(resumed.out);
  EXPECT_EQ(out["model"], (run / "model").string()) << resumed.out;
  EXPECT_EQ(out["predict"], (run / "predict").string()) << resumed.out;
  EXPECT_TRUE(ReadText((run / "model" / "model.safetensors").string()) ==
              ReadText((dir_ / "straight" / "model" / "model.safetensors").string()));
  EXPECT_EQ(ReadText((run / "predict" / "MRPC.tsv").string()),
            ReadText((dir_ / "straight" / "predict" / "MRPC.tsv").string()));
  EXPECT_FALSE(fs::exists(run / "model.tmp-AbC123"));
  // Another file to predict, on the finished run.
  const Result again =
      RunBinary(Mrpc("cut") + " --predict " + (dir_ / "train.tsv").string() + " --resume");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const std::string predicted = ReadText((run / "predict" / "MRPC.tsv").string());
  EXPECT_EQ(std::count(predicted.begin(), predicted.end(), '\n'), 1 + 200) << predicted;
}

// Two ranks under `packed-bert launch` (Gloo over loopback) share each
// step's micro-batches and the evaluation, and train as one process
// accumulating the same micro-batches (dropout on: micro-batch g of a step
// draws the same masks wherever it runs; one intra-op thread everywhere).
// The two sum each gradient in another order, so they agree to rounding:
// with optim.eps 1 (Adam's step then nearly linear in the gradient, which
// a tiny eps makes arbitrarily sensitive where a gradient is near 0) each
// tensor's change from the start differs by at most the micro-batch's
// tokens (the depth of the gradient's sums) times fp32's epsilon, per step,
// relative to that change, plus 1e-6 of the largest change (the attention
// key biases, whose exact gradient is 0, change by rounding alone).
TEST_F(FinetuneTest, TwoRanksEqualOneProcessAccumulating) {
  // 32 sequences per step at a packing factor of about 1.55: 21 rows, in
  // micro-batches of 10, 10 and 1 (the second rank's second micro-batch
  // is empty).
  const std::string common =
      " --set finetune.epochs=1 --set finetune.micro_batch_rows=10 --threads 1"
      " --set optim.eps=1 --set optim.lr=1";
  const Result one = RunBinary(Mrpc("one") + common);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const Result two =
      RunBinary("launch --nproc-per-node 2 --master-port 29741 --grace-s 20 -- packed-bert " +
                Mrpc("two") + common);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  // Rank 0 alone prints (launch prefixes its lines).
  const size_t at = two.out.find("[rank 0] {");
  ASSERT_NE(at, std::string::npos) << two.out;
  EXPECT_EQ(two.out.find("[rank 1]"), std::string::npos) << two.out;
  const json a = json::parse(one.out), b = json::parse(two.out.substr(at + 9));
  ASSERT_EQ(a["steps"], b["steps"]);
  EXPECT_EQ(a["accuracy"], b["accuracy"]);
  EXPECT_EQ(a["f1"], b["f1"]);
  // At most 10 rows of at most 64 tokens per micro-batch.
  const double relative = a["steps"].get<double>() * 640 * std::numeric_limits<float>::epsilon();
  pbert::testing::ExpectTrainedAlike((dir_ / "init.safetensors").string(),
                                     (dir_ / "one/model/model.safetensors").string(),
                                     (dir_ / "two/model/model.safetensors").string(), relative);
  EXPECT_FALSE(fs::exists(dir_ / "two" / "rank1"));
}

// The loop's levers reach fine-tuning through the binary: the profile of
// steps 2 to 3, metrics.jsonl with the task's metrics and the model's
// FLOP/s (which plot draws, its evaluation score the task's own), the
// TensorBoard events, checkpoints rotated to train.keep_checkpoints, a
// key fine-tuning does not read named in one line; and steps whose loss
// is not finite skipped until train.max_bad_steps ends the run.
TEST_F(FinetuneTest, TheLoopsLeversReachFineTuning) {
  const fs::path run = dir_ / "run";
  const Result r = RunBinary(Mrpc("run") +
                             " --set finetune.epochs=2 --set finetune.checkpoint_every_steps=2"
                             " --set train.keep_checkpoints=2 --set train.profile_steps=2:3"
                             " --set train.micro_batch_rows=4 --set finetune.log_every_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("train.micro_batch_rows does nothing here: finetune sets it"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(run / "profile.md"));
  EXPECT_TRUE(fs::exists(run / "profile" / "trace.json"));
  EXPECT_TRUE(fs::exists(run / "events.out.tfevents.packed-bert"));
  EXPECT_FALSE(fs::exists(run / "mllog.txt")) << "fine-tuning writes no MLLOG";
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(run / "checkpoints")) checkpoints += e.is_directory();
  EXPECT_EQ(checkpoints, 2);
  int train_lines = 0, eval_lines = 0;
  std::istringstream lines(ReadText((run / "metrics.jsonl").string()));
  for (std::string line; std::getline(lines, line);) {
    const json parsed = json::parse(line);
    if (parsed["kind"] == "train") {
      ++train_lines;
      EXPECT_TRUE(parsed.contains("accuracy")) << line;
      EXPECT_GT(parsed["model_tflops"].get<double>(), 0) << line;
    } else {
      ++eval_lines;
      EXPECT_EQ(parsed["metric"], "f1") << line;  // MRPC's own
    }
  }
  EXPECT_EQ(train_lines, json::parse(r.out)["steps"].get<int>());
  EXPECT_EQ(eval_lines, 2);
  const Result plot = RunBinary("plot " + run.string());
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  const std::string curves = ReadText((run / "learning_curves.svg").string());
  EXPECT_NE(curves.find("eval f1"), std::string::npos);
  // Word embeddings near the float's largest value: finite weights whose
  // sums overflow, so every step's loss is not finite and is skipped.
  auto weights = formats::ReadSafetensors((dir_ / "init.safetensors").string());
  ASSERT_TRUE(weights.ok()) << weights.status();
  for (auto& [name, tensor] : *weights) {
    if (name == "bert.embeddings.word_embeddings.weight") tensor.fill_(3e38);
  }
  const std::string huge = (dir_ / "huge.safetensors").string();
  ASSERT_TRUE(formats::WriteSafetensors(*weights, huge, {{"format", "pt"}}).ok());
  const Result bad = RunBinary(Mrpc("bad", "", "mrpc", huge) + " --set train.max_bad_steps=2");
  EXPECT_NE(bad.exit_code, 0) << bad.err;
  EXPECT_NE(
      bad.err.find("2 steps in a row had a non-finite loss or gradient (train.max_bad_steps)"),
      std::string::npos)
      << bad.err;
}

// A resume continues the run it was given or says why not: the training
// file changed in place (one label flipped) is refused, naming it, and
// --force goes on knowingly.
TEST_F(FinetuneTest, AChangedTrainingFileIsRefusedOnResumeByName) {
  const std::string train = (dir_ / "changed.tsv").string();
  WriteFile(train, MrpcFile(200, 3));
  const std::string command =
      Mrpc("run", train) + " --set finetune.epochs=2 --set finetune.checkpoint_every_steps=2";
  const Result stopped = RunBinary(command, "PBERT_FAULT=after-step:3:0:TERM");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  std::string text = ReadText(train);
  const size_t line = text.find('\n') + 1;
  text[line] = text[line] == '0' ? '1' : '0';
  WriteFile(train, text);
  const Result refused = RunBinary(command + " --resume");
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("was trained with other data at finetune.train_file " + train),
            std::string::npos)
      << refused.err;
  const Result forced = RunBinary(command + " --resume --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
}

// A run holds its folder: a second one into it, while the first runs (here
// stopped by SIGSTOP after its first step), is refused in one line.
TEST_F(FinetuneTest, ASecondRunIntoAFolderInUseIsRefused) {
  const Result started =
      RunShell(absl::StrCat("PBERT_FAULT=after-step:1:0:STOP ", pbert::testing::BinaryPath(), " ",
                            Mrpc("run"), " >/dev/null 2>/dev/null & echo $!"));
  const int pid = std::stoi(started.out);
  auto stopped = [&] {
    const std::string stat = ReadText(absl::StrCat("/proc/", pid, "/stat"));
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && stat.substr(paren + 2, 1) == "T";
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!stopped() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(stopped());
  const Result second = RunBinary(Mrpc("run"));
  ::kill(pid, SIGKILL);
  RunShell(absl::StrCat("while kill -0 ", pid, " 2>/dev/null; do sleep 0.05; done"));
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_NE(second.err.find(absl::StrCat("packed-bert finetune: error: run.output_dir '",
                                         (dir_ / "run").string(),
                                         "' is in use by another packed-bert run (pid ", pid, ")")),
            std::string::npos)
      << second.err;
}

TEST_F(FinetuneTest, BadInputIsOneLineAndLeavesNothing) {
  const std::string bad_json = WriteFile((dir_ / "bad.json").string(), "{\"data\": [");
  const std::string offset = WriteFile(
      (dir_ / "offset.json").string(),
      R"({"data": [{"paragraphs": [{"context": "w110 w111 w112", "qas": [{"id": "x7", "question": "w111", "answers": [{"text": "w112", "answer_start": 4}]}]}]}]})");
  const std::string label = WriteFile((dir_ / "label.tsv").string(),
                                      "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                      "1\t1\t2\tw110\tw111\nyes\t3\t4\tw112\tw113\n");
  const std::string long_question = WriteFile(
      (dir_ / "long.json").string(),
      R"({"data": [{"paragraphs": [{"context": "w110 w111 w112", "qas": [{"id": "long1", "question": "w111 w111 w111 w111 w111 w111 w111 w111 w111 w111 w111 w111 w111 w111 w111 w111 w111", "answers": [{"text": "w112", "answer_start": 10}]}]}]}]})");
  struct Case {
    std::string arguments, message;
  } cases[] = {
      {Squad("r1", bad_json), bad_json + ": not a SQuAD JSON file"},
      {Squad("r2", offset), offset + ": question x7, answer 0: \"w112\" is not at answer_start 4"},
      {Mrpc("r3", label), label + ": line 3: unknown label \"yes\""},
      {Mrpc("r4", "", "rte"), "train.tsv: line 1: the header has no column \"sentence1\""},
      {Squad("r5", long_question),
       long_question + ": question long1: 17 tokens, more than finetune.max_query_length 16"},
      {Squad("r6", "", (dir_ / "missing.safetensors").string()), "missing.safetensors"},
      {Mrpc("r7", "", "sst3"), "finetune.task"},
      {Mrpc("r8") + " --set finetune.max_seq_length=1",
       "finetune.max_seq_length 1 leaves no room for a sequence"},
  };
  for (const Case& c : cases) {
    const Result r = RunBinary(c.arguments);
    EXPECT_EQ(r.exit_code, 2) << c.arguments << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    // One line (a warning about the machine may come before it).
    const size_t at = r.err.find("packed-bert finetune: error: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n', at), r.err.size() - 1) << r.err;
  }
  for (const char* run : {"r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"}) {
    EXPECT_FALSE(fs::exists(dir_ / run)) << run << " was left behind";
  }
}

// Weights are taken for what they are: another task's fine-tuned model is
// no model of this task (scored, it is refused; started from, its encoder
// is taken and the head drawn anew), and pretraining weights are no
// fine-tuned model to score.
TEST_F(FinetuneTest, TheWeightsGivenAreTakenForWhatTheyAre) {
  ASSERT_EQ(RunBinary(Mrpc("mrpc") + " --set finetune.epochs=1").exit_code, 0);
  const std::string model = (dir_ / "mrpc" / "model").string();
  std::string checkpoint;
  for (const auto& e : fs::directory_iterator(dir_ / "mrpc" / "checkpoints")) {
    checkpoint = e.path().string();
  }
  // An RTE-format pair file (two labels too, so the head has its shape).
  std::string rte = "index\tsentence1\tsentence2\tlabel\n";
  for (int i = 0; i < 24; ++i) {
    absl::StrAppend(&rte, i, "\tw1", i % 10, " w12", "\tw13 w14", "\t",
                    i % 2 ? "entailment" : "not_entailment", "\n");
  }
  const std::string rte_file = WriteFile((dir_ / "rte.tsv").string(), rte);
  const std::string as_rte = absl::StrCat("finetune", model_, " --task rte --eval ", rte_file,
                                          " --set finetune.max_seq_length=64 --output ");
  for (const std::string& weights : {model, checkpoint, checkpoint + "/model.safetensors"}) {
    const Result scored = RunBinary(as_rte + (dir_ / "e1").string() + " --evaluate " + weights);
    EXPECT_EQ(scored.exit_code, 2) << scored.err;
    EXPECT_NE(scored.err.find(weights + " is a model fine-tuned for mrpc, not for rte: evaluate "
                                        "it as mrpc (finetune.task)"),
              std::string::npos)
        << scored.err;
  }
  const std::string pretrained = (dir_ / "init.safetensors").string();
  const Result pretraining =
      RunBinary(as_rte + (dir_ / "e2").string() + " --evaluate " + pretrained);
  EXPECT_EQ(pretraining.exit_code, 2) << pretraining.err;
  EXPECT_NE(pretraining.err.find(pretrained + " holds pretraining weights, not a model fine-tuned "
                                              "for rte: fine-tune them first"),
            std::string::npos)
      << pretraining.err;
  EXPECT_FALSE(fs::exists(dir_ / "e1"));
  EXPECT_FALSE(fs::exists(dir_ / "e2"));
  // Started from: the encoder and pooler, an RTE head of its own.
  const Result started = RunBinary(
      absl::StrCat("finetune", model_, " --task rte --train ", rte_file, " --eval ", rte_file,
                   " --init ", checkpoint, " --set run.output_dir=", (dir_ / "rte").string(),
                   " --set finetune.max_seq_length=64 --set finetune.epochs=1"));
  ASSERT_EQ(started.exit_code, 0) << started.err;
  EXPECT_NE(started.err.find(checkpoint + " is a model fine-tuned for mrpc: its encoder and pooler "
                                          "are taken, and rte's head is drawn anew"),
            std::string::npos)
      << started.err;
  const json config = json::parse(ReadText((dir_ / "rte" / "model" / "config.json").string()));
  EXPECT_EQ(config["finetuning_task"], "rte");
}

// Ctrl-C on `finetune ... | tee`: the same signal ends tee, and every
// later write meets a closed pipe; the run still saves its interrupt
// checkpoint (it was killed by SIGPIPE, status 141, before it), only its
// result line is lost (exit 1), and --resume continues it to the end.
TEST_F(FinetuneTest, AClosedPipeLosesNoCheckpoint) {
  const Result piped = RunShell(
      absl::StrCat("bash -c 'PBERT_FAULT=after-step:3:0:INT ", pbert::testing::BinaryPath(), " ",
                   Mrpc("piped"), " --set finetune.epochs=1 2>&1 | true; echo ${PIPESTATUS[0]}'"));
  EXPECT_EQ(piped.out, "1\n") << piped.err;
  EXPECT_TRUE(fs::exists(dir_ / "piped" / "checkpoints" / "step-00000003"));
  const Result resumed = RunBinary(Mrpc("piped") + " --set finetune.epochs=1 --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(json::parse(resumed.out)["status"], "done") << resumed.out;
}

// A fine-tuning run folder belongs to its task: another task's run into
// it is refused, and so is its checkpoint continued as another task's,
// even with --force (the head is another); the run's own outputs are never
// its inputs.
TEST_F(FinetuneTest, AnotherTasksRunNeverContinuesOrReplacesOne) {
  ASSERT_EQ(RunBinary(Mrpc("run") + " --set finetune.epochs=1").exit_code, 0);
  const fs::path run = dir_ / "run";
  std::string checkpoint;
  for (const auto& e : fs::directory_iterator(run / "checkpoints")) checkpoint = e.path().string();
  const auto listing = [](const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) files[e.path().string()] = ReadText(e.path().string());
    }
    return files;
  };
  const auto before = listing(run);
  const Result into = RunBinary(Mrpc("run", "", "rte"));
  EXPECT_EQ(into.exit_code, 2) << into.err;
  EXPECT_NE(into.err.find("holds a mrpc run (" + (run / "run.lock").string() +
                          "), which a rte run must not write into"),
            std::string::npos)
      << into.err;
  // Its checkpoints copied to a folder of their own (no run.lock).
  const fs::path other = dir_ / "other";
  fs::create_directories(other);
  fs::copy(run / "checkpoints", other / "checkpoints", fs::copy_options::recursive);
  const auto copied = listing(other);
  const std::string copy = (other / "checkpoints" / fs::path(checkpoint).filename()).string();
  for (const char* force : {"", " --force"}) {
    const Result continued = RunBinary(Mrpc("other", "", "wnli") + " --resume" + force);
    EXPECT_EQ(continued.exit_code, 2) << continued.err;
    EXPECT_NE(continued.err.find(
                  copy + " is a checkpoint of a mrpc run, which a wnli run cannot continue"),
              std::string::npos)
        << continued.err;
    EXPECT_EQ(listing(other), copied);
  }
  EXPECT_EQ(listing(run), before);
  // The dev file kept where the run writes its predictions.
  fs::create_directories(dir_ / "kept");
  const std::string kept = (dir_ / "kept" / "predictions.json").string();
  fs::copy_file(dir_ / "dev.json", kept);
  std::string command = Squad("kept");
  const std::string dev = (dir_ / "dev.json").string();
  command.replace(command.find(dev), dev.size(), kept);
  const Result input = RunBinary(command);
  EXPECT_EQ(input.exit_code, 2) << input.err;
  EXPECT_NE(input.err.find("finetune.eval_file " + kept +
                           " is the run folder's predictions.json, which this run writes"),
            std::string::npos)
      << input.err;
  EXPECT_EQ(ReadText(kept), ReadText(dev));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_ / "kept")) left.push_back(e.path().string());
  EXPECT_EQ(left, std::vector<std::string>{kept});
}

// Each GLUE task as download_glue_data.py lays it out: the train and dev
// files (CoLA's without a header, MNLI's dev files with five annotators'
// labels), the test files (an index column, no label; QQP's "id"), and
// the submission files the benchmark takes.
struct GlueLayout {
  std::string task;
  std::string header, dev_header, test_header;  // "" no header
  std::vector<std::string> labels;              // empty: a score (STS-B)
  // A line of the train or dev file, of example i, sentences a and b.
  std::function<std::string(int i, const std::string& a, const std::string& b,
                            const std::string& label, bool dev)>
      line;
  std::function<std::string(int i, const std::string& a, const std::string& b)> test_line;
  std::vector<std::string> submissions;  // matched, then (MNLI) mismatched
  bool pair = true;
};

std::vector<GlueLayout> GlueLayouts() {
  using S = const std::string&;
  const std::string mnli_columns =
      "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
      "sentence1_parse\tsentence2_parse\tsentence1\tsentence2";
  const auto nli = [](int i, S a, S b, S label, bool) {
    return absl::StrCat(i, "\t", a, "\t", b, "\t", label);
  };
  const auto nli_test = [](int i, S a, S b) { return absl::StrCat(i, "\t", a, "\t", b); };
  return {
      {"cola",
       "",
       "",
       "index\tsentence",
       {"0", "1"},
       [](int, S a, S, S label, bool) {
         return absl::StrCat("gj04\t", label, "\t", label == "0" ? "*" : "", "\t", a);
       },
       [](int i, S a, S) { return absl::StrCat(i, "\t", a); },
       {"CoLA.tsv"},
       false},
      {"sst2",
       "sentence\tlabel",
       "",
       "index\tsentence",
       {"0", "1"},
       [](int, S a, S, S label, bool) { return absl::StrCat(a, " \t", label); },
       [](int i, S a, S) { return absl::StrCat(i, "\t", a); },
       {"SST-2.tsv"},
       false},
      {"mrpc",
       "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
       "",
       "index\t#1 ID\t#2 ID\t#1 String\t#2 String",
       {"0", "1"},
       [](int i, S a, S b, S label, bool) {
         return absl::StrCat(label, "\t", 1000 + i, "\t", 2000 + i, "\t", a, "\t", b);
       },
       [](int i, S a, S b) {
         return absl::StrCat(i, "\t", 1000 + i, "\t", 2000 + i, "\t", a, "\t", b);
       },
       {"MRPC.tsv"}},
      {"stsb",
       "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
       "",
       "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
       {},
       [](int i, S a, S b, S score, bool) {
         return absl::StrCat(i, "\tmain-captions\tMSRvid\t2012test\t", 5000 + i, "\tnone\tnone\t",
                             a, "\t", b, "\t", score);
       },
       [](int i, S a, S b) {
         return absl::StrCat(i, "\tmain-news\theadlines\t2015\t", 5000 + i, "\tnone\tnone\t", a,
                             "\t", b);
       },
       {"STS-B.tsv"}},
      {"qqp",
       "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
       "",
       "id\tquestion1\tquestion2",
       {"0", "1"},
       [](int i, S a, S b, S label, bool) {
         return absl::StrCat(300000 + i, "\t", 2 * i, "\t", 2 * i + 1, "\t", a, "\t", b, "\t",
                             label);
       },
       [](int i, S a, S b) { return absl::StrCat(i, "\t", a, "\t", b); },
       {"QQP.tsv"}},
      {"mnli",
       mnli_columns + "\tlabel1\tgold_label",
       mnli_columns + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label",
       mnli_columns,
       {"contradiction", "entailment", "neutral"},
       [](int i, S a, S b, S label, bool dev) {
         return absl::StrCat(
             i, "\t", 7000 + i, "\t", 7000 + i, "n\tfiction\t( ", a, " )\t( ", b, " )\t(ROOT ", a,
             ")\t(ROOT ", b, ")\t", a, "\t", b, "\t", label,
             dev ? absl::StrCat("\t", label, "\tneutral\t", label, "\t", label) : std::string(),
             "\t", label);
       },
       [](int i, S a, S b) {
         return absl::StrCat(i, "\t", 9000 + i, "\t", 9000 + i, "c\tslate\t( ", a, " )\t( ", b,
                             " )\t(ROOT ", a, ")\t(ROOT ", b, ")\t", a, "\t", b);
       },
       {"MNLI-m.tsv", "MNLI-mm.tsv"}},
      {"qnli",
       "index\tquestion\tsentence\tlabel",
       "",
       "index\tquestion\tsentence",
       {"entailment", "not_entailment"},
       nli,
       nli_test,
       {"QNLI.tsv"}},
      {"rte",
       "index\tsentence1\tsentence2\tlabel",
       "",
       "index\tsentence1\tsentence2",
       {"entailment", "not_entailment"},
       nli,
       nli_test,
       {"RTE.tsv"}},
      {"wnli",
       "index\tsentence1\tsentence2\tlabel",
       "",
       "index\tsentence1\tsentence2",
       {"0", "1"},
       nli,
       nli_test,
       {"WNLI.tsv"}},
  };
}

// Examples over the test vocabulary's words whose label (or score) the
// words tell: the first sentence's words come from a band of the
// vocabulary of their class (STS-B: of their score, 0 to 5), so that a
// tiny model learns it in a few epochs; one label in ten is drawn at random.
struct GlueExamples {
  std::vector<std::string> a, b, labels;
};

GlueExamples MakeGlueExamples(const GlueLayout& layout, int n, uint32_t seed) {
  std::mt19937 random(seed);
  const int classes = layout.labels.empty() ? 6 : static_cast<int>(layout.labels.size());
  const int band = (kVocab - 110) / classes;
  GlueExamples out;
  for (int i = 0; i < n; ++i) {
    const int c = std::uniform_int_distribution<int>(0, classes - 1)(random);
    std::uniform_int_distribution<int> in_band(110 + c * band, 110 + (c + 1) * band - 1);
    std::string a, b;
    const int la = std::uniform_int_distribution<int>(2, 20)(random);
    const int lb = std::uniform_int_distribution<int>(2, 20)(random);
    for (int k = 0; k < la; ++k) a += (k ? " w" : "w") + std::to_string(in_band(random));
    for (int k = 0; k < lb; ++k) b += (k ? " " : "") + Word(random);
    const int label = random() % 10 == 0 ? static_cast<int>(random() % classes) : c;
    out.a.push_back(a);
    out.b.push_back(layout.pair ? b : "");
    out.labels.push_back(layout.labels.empty()
                             ? absl::StrFormat("%.3f", label + (random() % 5) / 10.0)
                             : layout.labels[static_cast<size_t>(label)]);
  }
  return out;
}

std::string GlueFileOf(const GlueLayout& layout, const GlueExamples& e, bool dev) {
  const std::string& header = dev && !layout.dev_header.empty() ? layout.dev_header : layout.header;
  std::string out = header.empty() ? "" : header + "\n";
  for (size_t i = 0; i < e.a.size(); ++i) {
    out += layout.line(static_cast<int>(i), e.a[i], e.b[i], e.labels[i], dev) + "\n";
  }
  return out;
}

// The dev file's pairs in the test file's layout.
std::string GlueTestFileOf(const GlueLayout& layout, const GlueExamples& e) {
  std::string out = layout.test_header + "\n";
  for (size_t i = 0; i < e.a.size(); ++i) {
    out += layout.test_line(static_cast<int>(i), e.a[i], e.b[i]) + "\n";
  }
  return out;
}

class GlueTaskTest : public FinetuneTest, public ::testing::WithParamInterface<GlueLayout> {};

// A GLUE task end to end through the binary: trained on its train file,
// scored on its dev file (MNLI's matched and mismatched in one run, both
// logged), its test file predicted into the benchmark's submission file;
// the test files here hold the dev files' pairs, so that scikit-learn's and
// scipy's metrics of the predictions written equal the run's. The model's
// weights scored and predicting alone (--evaluate) write the same files.
TEST_P(GlueTaskTest, TrainsScoresAndPredictsItsSubmission) {
  const GlueLayout& layout = GetParam();
  const bool mnli = layout.task == "mnli";
  const GlueExamples train = MakeGlueExamples(layout, 120, 11);
  std::vector<GlueExamples> devs = {MakeGlueExamples(layout, 40, 12)};
  if (mnli) devs.push_back(MakeGlueExamples(layout, 30, 13));
  const std::string files = (dir_ / "glue").string();
  WriteFile(files + "/train.tsv", GlueFileOf(layout, train, false));
  const char* dev_names[] = {"dev_matched.tsv", "dev_mismatched.tsv"};
  const char* test_names[] = {"test_matched.tsv", "test_mismatched.tsv"};
  for (size_t d = 0; d < devs.size(); ++d) {
    WriteFile(files + "/" + dev_names[d], GlueFileOf(layout, devs[d], true));
    WriteFile(files + "/" + test_names[d], GlueTestFileOf(layout, devs[d]));
  }
  const std::string predict = absl::StrCat(" --predict ", files, "/test_matched.tsv");
  std::string sets = absl::StrCat(" --eval ", files, "/dev_matched.tsv", predict);
  if (mnli) {
    absl::StrAppend(&sets, " --set finetune.eval_mismatched_file=", files,
                    "/dev_mismatched.tsv --set finetune.predict_mismatched_file=", files,
                    "/test_mismatched.tsv");
  }
  const std::string common = absl::StrCat("finetune", model_, " --task ", layout.task, sets,
                                          " --set finetune.max_seq_length=48");
  const fs::path run = dir_ / "run";
  const Result r = RunBinary(
      absl::StrCat(common, " --train ", files, "/train.tsv --init ",
                   (dir_ / "init.safetensors").string(), " --set run.output_dir=", run.string(),
                   " --set finetune.epochs=10 --set finetune.batch_size=8 --set optim.lr=3e-3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["predict"], (run / "predict").string());
  // Each epoch's evaluation in metrics.jsonl holds every dev file's metrics.
  int evaluations = 0;
  std::istringstream lines(ReadText((run / "metrics.jsonl").string()));
  for (std::string line; std::getline(lines, line);) {
    const json parsed = json::parse(line);
    if (parsed["kind"] != "eval") continue;
    ++evaluations;
    EXPECT_TRUE(parsed.contains(layout.labels.empty() ? "pearson" : "accuracy")) << line;
    if (mnli) EXPECT_TRUE(parsed.contains("mismatched_accuracy")) << line;
  }
  EXPECT_EQ(evaluations, 10);
  // The submission files, scored by scikit-learn and scipy against the dev
  // files' labels.
  json reference_input = json::array();
  for (size_t d = 0; d < devs.size(); ++d) {
    const std::string submission = (run / "predict" / layout.submissions[d]).string();
    ASSERT_TRUE(fs::exists(submission)) << submission;
    reference_input.push_back({{"file", submission},
                               {"labels", devs[d].labels},
                               {"names", layout.labels},
                               {"task", layout.task}});
  }
  std::vector<std::string> listed;
  for (const auto& e : fs::directory_iterator(run / "predict")) {
    listed.push_back(e.path().filename().string());
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, layout.submissions);
  WriteFile((dir_ / "reference.json").string(), reference_input.dump());
  const std::string script = R"(
import csv, json, sys
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from scipy.stats import pearsonr, spearmanr
out = []
for case in json.load(open(sys.argv[1])):
    with open(case["file"], newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == ["index", "prediction"], rows[0]
    assert [int(r[0]) for r in rows[1:]] == list(range(len(case["labels"]))), "indices"
    names = case["names"]
    if names:
        truth = [names.index(x) for x in case["labels"]]
        predicted = [names.index(r[1]) for r in rows[1:]]
        m = {"accuracy": accuracy_score(truth, predicted)}
        if case["task"] in ("mrpc", "qqp"):
            m["f1"] = f1_score(truth, predicted)
        if case["task"] == "cola":
            m["mcc"] = matthews_corrcoef(truth, predicted)
        m["distinct"] = len(set(predicted))
    else:
        truth = [float(x) for x in case["labels"]]
        predicted = [float(r[1]) for r in rows[1:]]
        m = {"pearson": pearsonr(predicted, truth)[0], "spearman": spearmanr(predicted, truth)[0]}
        m["distinct"] = len(set(predicted))
    out.append(m)
json.dump(out, open(sys.argv[2], "w"))
)";
  WriteFile((dir_ / "reference.py").string(), script);
  const Result reference = RunShell(absl::StrCat(
      "/usr/bin/python3 ", (dir_ / "reference.py").string(), " ",
      (dir_ / "reference.json").string(), " ", (dir_ / "reference_out.json").string()));
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const json expected = json::parse(ReadText((dir_ / "reference_out.json").string()));
  // Not a constant answer: the metrics are of predictions that differ.
  EXPECT_GT(expected[0]["distinct"].get<int>(), 1) << expected.dump();
  for (size_t d = 0; d < devs.size(); ++d) {
    for (const auto& [metric, value] : expected[d].items()) {
      if (metric == "distinct") continue;
      const std::string name = d == 0 ? metric : "mismatched_" + metric;
      ASSERT_TRUE(out.contains(name)) << name << " " << r.out;
      // Scores are written to 9 significant digits, each within 5e-9 of
      // itself: the correlations move by less than 1e-6.
      EXPECT_NEAR(out[name].get<double>(), value.get<double>(),
                  layout.labels.empty() ? 1e-6 : 1e-12)
          << name;
    }
  }
  // Scored and predicted alone, into a folder of its own, written whole.
  const fs::path evaluation = dir_ / "evaluation";
  const std::string model = (run / "model" / "model.safetensors").string();
  const Result alone =
      RunBinary(absl::StrCat(common, " --evaluate ", model, " --output ", evaluation.string()));
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  const json scored = json::parse(alone.out);
  const json written = json::parse(ReadText((evaluation / "evaluation.json").string()));
  EXPECT_EQ(written, scored);
  for (const auto& [metric, value] : expected[0].items()) {
    if (metric != "distinct") EXPECT_EQ(scored[metric], out[metric]) << metric;
  }
  for (const std::string& submission : layout.submissions) {
    EXPECT_EQ(ReadText((evaluation / "predict" / submission).string()),
              ReadText((run / "predict" / submission).string()))
        << submission;
  }
  // Again into the same folder: refused without --overwrite, which
  // replaces it.
  const Result again =
      RunBinary(absl::StrCat(common, " --evaluate ", model, " --output ", evaluation.string()));
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("add --overwrite"), std::string::npos) << again.err;
  // What the evaluation did not write, at any depth, it never replaces.
  const std::string mine = WriteFile((evaluation / "predict" / "notes.txt").string(), "mine\n");
  const Result kept = RunBinary(absl::StrCat(common, " --evaluate ", model, " --output ",
                                             evaluation.string(), " --overwrite"));
  EXPECT_EQ(kept.exit_code, 2) << kept.err;
  EXPECT_NE(kept.err.find(evaluation.string() + " is a folder holding predict/notes.txt; "
                                                "--overwrite replaces only an evaluation folder"),
            std::string::npos)
      << kept.err;
  EXPECT_EQ(ReadText(mine), "mine\n");
  fs::remove(mine);
  const Result replaced = RunBinary(absl::StrCat(common, " --evaluate ", model, " --output ",
                                                 evaluation.string(), " --overwrite"));
  EXPECT_EQ(replaced.exit_code, 0) << replaced.err;
  // The dev file itself given to predict: said so, and predicted as its
  // test twin (numbered in file order where it has no index column).
  std::string other = common;
  other.erase(other.find(predict), predict.size());
  const fs::path labeled = dir_ / "labeled";
  const Result predicted_dev =
      RunBinary(absl::StrCat(other, " --evaluate ", model, " --predict ", files,
                             "/dev_matched.tsv --output ", labeled.string()));
  ASSERT_EQ(predicted_dev.exit_code, 0) << predicted_dev.err;
  EXPECT_NE(predicted_dev.err.find(files + "/dev_matched.tsv: "), std::string::npos)
      << predicted_dev.err;
  EXPECT_NE(predicted_dev.err.find("its labels not scored"), std::string::npos)
      << predicted_dev.err;
  const auto predictions = [](const fs::path& path) {
    std::vector<std::string> column;
    std::istringstream in(ReadText(path.string()));
    for (std::string line; std::getline(in, line);) column.push_back(line.substr(line.find('\t')));
    return column;
  };
  const std::string submission = layout.submissions[0];
  EXPECT_EQ(predictions(labeled / "predict" / submission),
            predictions(run / "predict" / submission));
  // A test file whose index is not a whole number: one line naming the
  // file and line, nothing written.
  std::string test = GlueTestFileOf(layout, devs[0]);
  const size_t third = test.find('\n', test.find('\n', test.find('\n') + 1) + 1) + 1;
  test.replace(third, test.find('\t', third) - third, "0x10");
  const std::string bad = WriteFile(files + "/bad_test.tsv", test);
  const fs::path refused = dir_ / "refused";
  const Result bad_index = RunBinary(absl::StrCat(other, " --evaluate ", model, " --predict ", bad,
                                                  " --output ", refused.string()));
  EXPECT_EQ(bad_index.exit_code, 2) << bad_index.err;
  EXPECT_NE(bad_index.err.find(bad + ": line 4: the index \"0x10\" is not a whole number"),
            std::string::npos)
      << bad_index.err;
  EXPECT_FALSE(fs::exists(refused));
  // An index given twice (it would stand twice in the submission): one
  // line naming both lines, nothing written.
  std::string twice = GlueTestFileOf(layout, devs[0]);
  const size_t second = twice.find('\n') + 1;
  const std::string first_index = twice.substr(second, twice.find('\t', second) - second);
  twice.replace(third, twice.find('\t', third) - third, first_index);
  const std::string repeated = WriteFile(files + "/twice_test.tsv", twice);
  const Result twice_index = RunBinary(absl::StrCat(
      other, " --evaluate ", model, " --predict ", repeated, " --output ", refused.string()));
  EXPECT_EQ(twice_index.exit_code, 2) << twice_index.err;
  EXPECT_NE(twice_index.err.find(absl::StrCat(repeated, ": line 4: the index ", first_index,
                                              " is line 2's too")),
            std::string::npos)
      << twice_index.err;
  EXPECT_FALSE(fs::exists(refused));
}

INSTANTIATE_TEST_SUITE_P(EveryTask, GlueTaskTest, ::testing::ValuesIn(GlueLayouts()),
                         [](const ::testing::TestParamInfo<GlueLayout>& info) {
                           return info.param.task;
                         });

}  // namespace
}  // namespace pbert::app
