// `packed-bert finetune` on the two tasks of short sentences, as a user
// runs them: named entities from CoNLL-format files (--task ner) and
// multi-label classification from GoEmotions-format files (--task
// multilabel), made here over the test vocabulary. Each trains, scores and
// predicts through the binary; its scores equal an independent scorer's on
// the predictions it wrote (conlleval's state machine; sklearn's F1);
// packed predictions equal unpacked ones; a crash resumes to the very
// weights; two ranks train as one process accumulating; its export is a
// Hugging Face model of its class; a bad file is one line naming file and
// line, exit 2, nothing left.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/app/binary.h"
#include "tests/app/same_training.h"
#include "tests/data/random_instances.h"
#include "tests/scratch_folder.h"
#include "tests/source_paths.h"

namespace pbert::app::token_tasks {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::ReadText;
using testing::Result;
using testing::RunBinary;
using testing::RunShell;
using testing::WriteFile;

constexpr int kVocab = 500;

// Words of the test vocabulary: w110 ... w499.
int WordId(std::mt19937& random) {
  return std::uniform_int_distribution<int>(110, kVocab - 1)(random);
}

// A CoNLL-2003 file of `sentences` sentences of 3 to 14 words (word, POS,
// chunk, tag), documents marked by -DOCSTART-: w110-w139 start a person,
// a w140-w159 after a person's word continues it, w160-w189 are a place.
// IOB2, or IOB1 (a chunk's first word I- unless it follows one of its type).
// `tags` false: the words alone, a file to predict.
std::string ConllFile(int sentences, uint32_t seed, bool iob1 = false, bool tags = true) {
  std::mt19937 random(seed);
  std::string out = tags ? "-DOCSTART- -X- -X- O\n\n" : "";
  for (int s = 0; s < sentences; ++s) {
    std::string previous = "O";
    const auto type = [&] { return previous.size() > 2 ? previous.substr(2) : ""; };
    const int n = std::uniform_int_distribution<int>(3, 14)(random);
    for (int i = 0; i < n; ++i) {
      const int w = WordId(random);
      std::string tag = "O";
      if (w < 140) {
        tag = iob1 && type() != "PER" ? "I-PER" : "B-PER";
      } else if (w < 160 && type() == "PER") {
        tag = "I-PER";
      } else if (w >= 160 && w < 190) {
        tag = iob1 && type() != "LOC" ? "I-LOC" : "B-LOC";
      }
      previous = tag;
      absl::StrAppend(&out, "w", w, tags ? absl::StrCat(" NN B-NP ", tag) : "", "\n");
    }
    out += "\n";
    if (tags && s % 50 == 49) out += "-DOCSTART- -X- -X- O\n\n";
  }
  return out;
}

// A GoEmotions-format file of `texts` texts (text, label ids, id; no
// header) over 4 labels: label k where the text holds a word of
// w110+40k ... w149+40k; label 3 where it holds none of the others.
std::string EmotionsFile(int texts, uint32_t seed) {
  std::mt19937 random(seed);
  std::string out;
  for (int t = 0; t < texts; ++t) {
    std::string text;
    std::vector<bool> has(4, false);
    const int n = std::uniform_int_distribution<int>(2, 12)(random);
    for (int i = 0; i < n; ++i) {
      const int w = WordId(random);
      if (w < 230) has[(w - 110) / 40] = true;
      absl::StrAppend(&text, text.empty() ? "" : " ", "w", w);
    }
    if (!has[0] && !has[1] && !has[2]) has[3] = true;
    std::string ids;
    for (int k = 0; k < 4; ++k) {
      if (has[k]) absl::StrAppend(&ids, ids.empty() ? "" : ",", k);
    }
    absl::StrAppend(&out, text, "\t", ids, "\te", seed, "_", t, "\n");
  }
  return out;
}

struct TaskFiles {
  std::string task;
  std::string train, dev, test;  // file names in the scratch folder
  std::string predictions;       // what a labeled evaluation writes
  std::vector<std::string> metrics;
};

void PrintTo(const TaskFiles& files, std::ostream* out) { *out << files.task; }

class TokenTasksTest : public ::testing::TestWithParam<TaskFiles> {
 protected:
  void SetUp() override {
    dir_ = pbert::testing::ScratchFolder();
    vocab_ = pbert::testing::WriteTestVocab((dir_ / "vocab.txt").string(), kVocab);
    WriteFile((dir_ / "train.txt").string(), ConllFile(240, 1));
    WriteFile((dir_ / "dev.txt").string(), ConllFile(40, 2, /*iob1=*/true));
    WriteFile((dir_ / "test.txt").string(), ConllFile(30, 3, false, /*tags=*/false));
    WriteFile((dir_ / "train.tsv").string(), EmotionsFile(240, 4));
    WriteFile((dir_ / "dev.tsv").string(), EmotionsFile(40, 5));
    WriteFile((dir_ / "test.tsv").string(), EmotionsFile(30, 6));
    WriteFile((dir_ / "labels.txt").string(), "joy\nanger\nsurprise\nneutral\n");
    model_ = absl::StrCat(" --config ", pbert::testing::SourceDir(),
                          "/configs/bert-tiny.yaml --set model.vocab_size=", kVocab,
                          " --set model.hidden_size=32 --set model.intermediate_size=64",
                          " --set prepare.vocab=", vocab_, " --log-level warn");
    const Result init =
        RunBinary("model init" + model_ + " --out " + (dir_ / "init.safetensors").string());
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Common() const {
    return absl::StrCat(model_, " --task ", GetParam().task, " --set finetune.max_seq_length=32",
                        " --set finetune.batch_size=16 --set optim.lr=1e-3");
  }
  // A run into `run` of the task's files; `train` replaces its training file.
  std::string Run(const std::string& run, const std::string& train = "") const {
    const TaskFiles& f = GetParam();
    return absl::StrCat("finetune", Common(), " --train ", Path(train.empty() ? f.train : train),
                        " --eval ", Path(f.dev), " --init ", Path("init.safetensors"),
                        " --set run.output_dir=", Path(run));
  }

  fs::path dir_;
  std::string vocab_, model_;
};

TEST_P(TokenTasksTest, TrainsScoresAndPredictsAsTheIndependentScorerScores) {
  const TaskFiles& f = GetParam();
  const Result r = RunBinary(
      Run("run") + " --set finetune.epochs=6 --set optim.lr=5e-3 --predict " + Path(f.test));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["status"], "done");
  for (const std::string& metric : f.metrics) {
    ASSERT_TRUE(out.contains(metric)) << r.out;
  }
  // The scorer's own reading of the predictions the run wrote for its dev file.
  const std::string scorer =
      std::string(pbert::testing::SourceDir()) + "/tests/tasks/token_and_label_reference.py";
  const Result reference = RunShell(
      f.task == "ner"
          ? absl::StrCat("/usr/bin/python3 ", scorer, " conll ", Path("run/predictions.txt"))
          : absl::StrCat("/usr/bin/python3 ", scorer, " multilabel ", Path(f.dev), " ",
                         Path("run/predictions.tsv"), " 0.5"));
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const json expected = json::parse(reference.out);
  for (const auto& [metric, value] : expected.items()) {
    if (!out.contains(metric)) continue;
    EXPECT_NEAR(out[metric].get<double>(), value.get<double>(), 1e-12) << metric;
  }
  // It learnt something: the rules of the files are a word's own.
  EXPECT_GT(out[f.metrics[0]].get<double>(), 0.3) << r.out;
  // The file to predict, each of its records once.
  const std::string predicted = ReadText(Path("run/predict/" + f.predictions));
  if (f.task == "ner") {
    const std::string test = ReadText(Path(f.test));
    EXPECT_EQ(std::count(predicted.begin(), predicted.end(), '\n'),
              std::count(test.begin(), test.end(), '\n'));
  } else {
    EXPECT_EQ(std::count(predicted.begin(), predicted.end(), '\n'), 1 + 30);
    EXPECT_EQ(predicted.rfind("id\tlabels\tjoy\tanger\tsurprise\tneutral\n", 0), 0u);
  }
  // The export: a Hugging Face model of its class, its labels named.
  const Result exported =
      RunShell(absl::StrCat("/usr/bin/python3 ", pbert::testing::SourceDir(),
                            "/tests/model/check_hf_export.py ", Path("run/model"), " ", vocab_));
  EXPECT_EQ(exported.exit_code, 0) << exported.out << exported.err;
  const json config = json::parse(ReadText(Path("run/model/config.json")));
  if (f.task == "ner") {
    EXPECT_EQ(config["architectures"][0], "BertForTokenClassification");
    EXPECT_EQ(config["id2label"]["1"], "B-PER");  // CoNLL-2003's nine, in their order
    EXPECT_EQ(config["id2label"].size(), 9u);
  } else {
    EXPECT_EQ(config["architectures"][0], "BertForSequenceClassification");
    EXPECT_EQ(config["problem_type"], "multi_label_classification");
    EXPECT_EQ(config["id2label"]["3"], "neutral");
  }
  // The same weights evaluated packed and one sequence a row: the same
  // predictions (NER's tags; each probability within fp32's rounding of
  // the encoder's sums, 1e-5).
  std::map<std::string, std::string> predictions;
  for (const char* packing : {"lpfhp", "none"}) {
    const std::string output = Path(absl::StrCat("evaluated-", packing));
    const Result e = RunBinary(
        absl::StrCat("finetune --evaluate ", Path("run/model"), Common(), " --eval ", Path(f.dev),
                     " --set packing.algorithm=", packing, " --output ", output));
    ASSERT_EQ(e.exit_code, 0) << e.err;
    predictions[packing] = ReadText(output + "/" + f.predictions);
    EXPECT_EQ(json::parse(e.out)[f.metrics[0]], out[f.metrics[0]]) << packing;
  }
  if (f.task == "ner") {
    EXPECT_EQ(predictions["lpfhp"], predictions["none"]);
  } else {
    const std::vector<std::string> a = absl::StrSplit(predictions["lpfhp"], '\n');
    const std::vector<std::string> b = absl::StrSplit(predictions["none"], '\n');
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 1; i + 1 < a.size(); ++i) {
      const std::vector<std::string> x = absl::StrSplit(a[i], '\t'), y = absl::StrSplit(b[i], '\t');
      ASSERT_EQ(x.size(), 6u);
      EXPECT_EQ(x[0], y[0]);
      for (size_t k = 2; k < x.size(); ++k) {
        EXPECT_NEAR(std::stod(x[k]), std::stod(y[k]), 1e-5) << a[i] << " / " << b[i];
      }
    }
  }
}

// A crash (SIGKILL after step 5, a checkpoint every 2 steps) resumes to the
// very weights and scores of a run that never stopped.
TEST_P(TokenTasksTest, ACrashResumesExactly) {
  const std::string common = " --set finetune.epochs=2 --set finetune.checkpoint_every_steps=2";
  const Result straight = RunBinary(Run("straight") + common);
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  ASSERT_GT(json::parse(straight.out)["total_steps"].get<int>(), 6);
  const Result crashed = RunBinary(Run("crashed") + common, "PBERT_FAULT=after-step:5");
  EXPECT_EQ(crashed.exit_code, -1);  // killed
  const Result recovered = RunBinary(Run("crashed") + common + " --resume");
  ASSERT_EQ(recovered.exit_code, 0) << recovered.err;
  const json a = json::parse(straight.out), b = json::parse(recovered.out);
  for (const std::string& metric : GetParam().metrics) EXPECT_EQ(a[metric], b[metric]) << metric;
  // Byte for byte (compared as a whole: the bytes themselves say nothing).
  EXPECT_TRUE(ReadText(Path("crashed/model/model.safetensors")) ==
              ReadText(Path("straight/model/model.safetensors")));
}

// Two ranks under `packed-bert launch` (Gloo over loopback) train as one
// process accumulating the same micro-batches: each tensor's change from
// the start within the micro-batch's tokens times fp32's epsilon per step,
// relative to that change, plus 1e-6 of the largest change
// (FinetuneTest.TwoRanksEqualOneProcessAccumulating's bound, with Adam's
// eps 1).
TEST_P(TokenTasksTest, TwoRanksEqualOneProcessAccumulating) {
  const std::string common =
      " --set finetune.epochs=1 --set finetune.micro_batch_rows=3 --threads 1"
      " --set optim.eps=1 --set optim.lr=1";
  const Result one = RunBinary(Run("one") + common);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const Result two = RunBinary(absl::StrCat("launch --nproc-per-node 2 --master-port ",
                                            GetParam().task == "ner" ? 29761 : 29762,
                                            " --grace-s 20 -- packed-bert ", Run("two"), common));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const size_t at = two.out.find("[rank 0] {");
  ASSERT_NE(at, std::string::npos) << two.out;
  const json a = json::parse(one.out), b = json::parse(two.out.substr(at + 9));
  ASSERT_EQ(a["steps"], b["steps"]);
  // At most 3 rows of at most 32 tokens per micro-batch.
  const double relative = a["steps"].get<double>() * 96 * std::numeric_limits<float>::epsilon();
  pbert::testing::ExpectTrainedAlike(Path("init.safetensors"), Path("one/model/model.safetensors"),
                                     Path("two/model/model.safetensors"), relative);
}

// Bad files: one line naming the file and line (and what to do), exit 2,
// no run folder left.
TEST_P(TokenTasksTest, ABadFileIsOneLineNamingFileAndLine) {
  const TaskFiles& f = GetParam();
  const std::vector<std::pair<std::string, std::string>> cases =
      f.task == "ner"
          ? std::vector<
                std::pair<std::string, std::string>>{{"w120 NN B-NP B-PER\nw130\n",
                                                      ":2: one column"},
                                                     {"w120 NN B-NP B-PER\nw121 NN B-NP B-CITY\n",
                                                      ":2: the tag \"B-CITY\" is not one"},
                                                     {"w120 NN B-NP B-PER\n\n\x01 NN B-NP O\n",
                                                      ":3: a sentence whose words give no token"},
                                                     {"-DOCSTART- -X- -X- O\n\n", ": no sentence"}}
          : std::vector<std::pair<std::string, std::string>>{
                {"w120 w121\t0\ta\nw122\n", ":2: 1 tab-separated columns"},
                {"w120 w121\t0,4\ta\n", ":1: the label id \"4\" is not a whole number below 4"},
                {"w120 w121\t0,x\ta\n", ":1: the label id \"x\""},
                {"  \t1\tb\n", ":1: an empty text"}};
  int k = 0;
  for (const auto& [text, expected] : cases) {
    const std::string file = Path(absl::StrCat("bad", k++, f.task == "ner" ? ".txt" : ".tsv"));
    WriteFile(file, text);
    // The unknown tag: a dev file's, against the training file's tags.
    const bool dev = expected.find("the tag") != std::string::npos;
    const std::string command =
        dev ? absl::StrCat("finetune", Common(), " --train ", Path(f.train), " --eval ", file,
                           " --init ", Path("init.safetensors"),
                           " --set run.output_dir=", Path("bad"))
            : Run("bad", fs::path(file).filename().string());
    const Result r = RunBinary(command);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(file + expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "bad"));
  }
}

INSTANTIATE_TEST_SUITE_P(Tasks, TokenTasksTest,
                         ::testing::Values(TaskFiles{"ner",
                                                     "train.txt",
                                                     "dev.txt",
                                                     "test.txt",
                                                     "predictions.txt",
                                                     {"f1", "precision", "recall", "accuracy"}},
                                           TaskFiles{"multilabel",
                                                     "train.tsv",
                                                     "dev.tsv",
                                                     "test.tsv",
                                                     "predictions.tsv",
                                                     {"micro_f1", "macro_f1", "exact_match"}}),
                         [](const ::testing::TestParamInfo<TaskFiles>& info) {
                           return std::string(info.param.task == "ner" ? "Ner" : "MultiLabel");
                         });

}  // namespace
}  // namespace pbert::app::token_tasks
