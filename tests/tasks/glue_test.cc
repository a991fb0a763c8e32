// The GLUE tasks' files read as distributed, their pairs featurized as
// run_classifier.py does, and their metrics equal to scikit-learn's and
// scipy's on the same predictions.
#include "tasks/glue.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scratch_folder.h"

namespace pbert::tasks {
namespace {

namespace fs = std::filesystem;

class GlueTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = pbert::testing::ScratchFolder(); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

// A line of each task's dev file, in its distributed layout.
struct Layout {
  const char* task;
  std::string file;
  std::string first, second;
  float label;
};

std::vector<Layout> Layouts() {
  return {
      {"cola", "gj04\t1\t\tOur friends won't buy this analysis.\n"
               "gj04\t0\t*\tThey drank the pub.\n",
       "They drank the pub.", "", 0},
      {"sst2", "sentence\tlabel\nit 's a charming journey . \t1\nunflinchingly bleak \t0\n",
       "unflinchingly bleak ", "", 0},
      {"mrpc", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
               "1\t1355540\t1355592\tHe said the foodservice pie.\tThe foodservice pie.\n"
               "0\t2029631\t2029565\tMagnarelli said.\tHis wife said.\n",
       "Magnarelli said.", "His wife said.", 0},
      {"stsb", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
               "score\n0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man with a hard "
               "hat is dancing.\tA man wearing a hard hat is dancing.\t5.000\n"
               "1\tmain-captions\tMSRvid\t2012test\t0005\tnone\tnone\tA young child is riding a "
               "horse.\tA child is riding a horse.\t4.750\n",
       "A young child is riding a horse.", "A child is riding a horse.", 4.75f},
      {"qqp", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
              "201359\t303345\t303346\tWhy are African-Americans so beautiful?\tWhy are hispanics "
              "so beautiful?\t0\n"
              "263843\t69383\t380476\tI want to pursue PhD in Computer Science?\tI handle social "
              "media?\t1\n",
       "I want to pursue PhD in Computer Science?", "I handle social media?", 1},
      {"mnli", "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
               "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\t"
               "label4\tlabel5\tgold_label\n"
               "0\t63735\t63735n\tslate\t( ( The ) )\t( ( The ) )\t(ROOT)\t(ROOT)\tThe new rights "
               "are nice enough\tEveryone really likes the newest benefits \tneutral\tentailment\t"
               "neutral\tneutral\tneutral\tneutral\n"
               "1\t91383\t91383c\tgovernment\t( x )\t( y )\t(ROOT)\t(ROOT)\tThis site includes a "
               "list.\tThe Government Executive articles are not on the site.\tcontradiction\t"
               "contradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\n",
       "This site includes a list.", "The Government Executive articles are not on the site.", 0},
      {"qnli", "index\tquestion\tsentence\tlabel\n0\tWhat came into force after the new "
               "constitution?\tThe Senate was created.\tentailment\n"
               "1\tWhat is the first major city?\tThe city is ranked.\tnot_entailment\n",
       "What is the first major city?", "The city is ranked.", 1},
      {"rte", "index\tsentence1\tsentence2\tlabel\n0\tDana Reeve died.\tChristopher Reeve had an "
              "accident.\tnot_entailment\n1\tYet, we now are.\tBush won.\tentailment\n",
       "Yet, we now are.", "Bush won.", 0},
      {"wnli", "index\tsentence1\tsentence2\tlabel\n0\tThe drain is clogged.\tThe hair is "
               "clogged.\t0\n1\tJane knocked.\tSusan answered.\t1\n",
       "Jane knocked.", "Susan answered.", 1},
  };
}

TEST_F(GlueTest, EveryTaskReadsItsOwnLayout) {
  for (const Layout& layout : Layouts()) {
    SCOPED_TRACE(layout.task);
    const GlueTask* task = FindGlueTask(layout.task);
    ASSERT_NE(task, nullptr);
    auto examples = ReadGlue(*task, Write(std::string(layout.task) + ".tsv", layout.file));
    ASSERT_TRUE(examples.ok()) << examples.status();
    ASSERT_EQ(examples->size(), 2u);
    EXPECT_EQ(examples->back().first, layout.first);
    EXPECT_EQ(examples->back().second, layout.second);
    EXPECT_EQ(examples->back().label, layout.label);
  }
}

TEST_F(GlueTest, AnotherTasksFileOrABadLineIsNamed) {
  const GlueTask& rte = *FindGlueTask("rte");
  const std::string mrpc = Write("mrpc.tsv", Layouts()[2].file);
  auto wrong = ReadGlue(rte, mrpc);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find(mrpc + ": line 1: the header has no column "
                                                 "\"sentence1\", \"sentence2\", \"label\" of "
                                                 "task rte"),
            std::string::npos)
      << wrong.status();
  // Any other file's first line is quoted only in part.
  auto json = ReadGlue(rte, Write("squad.json", "{\"data\": [" + std::string(100000, ' ') +
                                                    "\"long\"\t" + std::string(500, 'x') +
                                                    "]}\n"));
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(json.status().message().size(), 600u) << json.status();
  auto unknown = ReadGlue(rte, Write("rte.tsv", "index\tsentence1\tsentence2\tlabel\n"
                                                "0\ta\tb\tentailment\n1\ta\tb\tcontradiction\n"));
  EXPECT_NE(unknown.status().message().find(
                "rte.tsv: line 3: unknown label \"contradiction\" (rte's are \"entailment\", "
                "\"not_entailment\")"),
            std::string::npos)
      << unknown.status();
  auto columns = ReadGlue(*FindGlueTask("cola"), Write("cola.tsv", "gj04\t1\tsentence\n"));
  EXPECT_NE(columns.status().message().find("cola.tsv: line 1: 3 tab-separated columns"),
            std::string::npos)
      << columns.status();
  auto score = ReadGlue(*FindGlueTask("stsb"),
                        Write("stsb.tsv", "sentence1\tsentence2\tscore\na\tb\thigh\n"));
  EXPECT_NE(score.status().message().find("line 2: the score \"high\" is not a number"),
            std::string::npos)
      << score.status();
  auto empty = ReadGlue(*FindGlueTask("sst2"), Write("sst2.tsv", "sentence\tlabel\n"));
  EXPECT_NE(empty.status().message().find("holds no example"), std::string::npos);
}

TEST_F(GlueTest, PairsAreCutFromTheLongerSideFirst) {
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (char c = 'a'; c <= 'z'; ++c) vocab += std::string(1, c) + "\n";
  auto vocabulary = data::Vocabulary::Load(Write("vocab.txt", vocab));
  ASSERT_TRUE(vocabulary.ok());
  data::Tokenizer tokenizer(std::make_shared<data::Vocabulary>(std::move(*vocabulary)), true);
  // a: 6 tokens, b: 3; at 10 there is room for 7: a loses 2, as
  // _truncate_seq_pair pops from the longer one at a time.
  auto features = MakeGlueFeatures({{"a b c d e f", "x y z", 1, 1}, {"a b c d e f g h i j k", "", 0, 2}},
                                   tokenizer, 10);
  ASSERT_EQ(features.size(), 2u);
  const auto id = [&](char c) { return static_cast<int32_t>(5 + (c - 'a')); };
  EXPECT_EQ(features[0].sequence.input_ids,
            (std::vector<int32_t>{2, id('a'), id('b'), id('c'), id('d'), 3, id('x'), id('y'),
                                  id('z'), 3}));
  EXPECT_EQ(features[0].sequence.segment_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(features[0].label, 1);
  EXPECT_EQ(features[1].sequence.length(), 10);  // [CLS] 8 tokens [SEP]
  EXPECT_EQ(features[1].sequence.segment_ids, std::vector<int32_t>(10, 0));
}

TEST_F(GlueTest, MetricsEqualScikitLearnsAndScipys) {
  if (std::system("/usr/bin/python3 -c 'import sklearn, scipy' 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs python3-sklearn and python3-scipy";
  }
  std::mt19937 random(3);
  nlohmann::json cases = nlohmann::json::array();
  std::vector<std::vector<double>> ours;
  for (int c = 0; c < 6; ++c) {
    // Labels and predictions that agree often (as a trained model's), with
    // ties in the scores (Spearman's average ranks).
    const int n = 50 + 40 * c;
    std::vector<float> labels, predicted, score, truth;
    std::uniform_int_distribution<int> bit(0, 1), five(0, 20);
    std::bernoulli_distribution agree(0.5 + 0.08 * c);
    for (int i = 0; i < n; ++i) {
      labels.push_back(static_cast<float>(bit(random)));
      predicted.push_back(agree(random) ? labels.back() : static_cast<float>(bit(random)));
      truth.push_back(five(random) / 4.0f);
      score.push_back(agree(random) ? truth.back() : five(random) / 4.0f);
    }
    cases.push_back({{"labels", labels}, {"predicted", predicted}, {"truth", truth}, {"score", score}});
    ours.push_back({Accuracy(predicted, labels), BinaryF1(predicted, labels),
                    MatthewsCorrelation(predicted, labels), PearsonCorrelation(score, truth),
                    SpearmanCorrelation(score, truth)});
  }
  // Three-class predictions (MNLI) for Matthews' multiclass form.
  std::vector<float> labels3, predicted3;
  std::uniform_int_distribution<int> three(0, 2);
  for (int i = 0; i < 300; ++i) {
    labels3.push_back(static_cast<float>(three(random)));
    predicted3.push_back(i % 3 == 0 ? static_cast<float>(three(random)) : labels3.back());
  }
  std::ofstream(dir_ / "cases.json") << cases.dump();
  std::ofstream(dir_ / "three.json") << nlohmann::json({labels3, predicted3}).dump();
  const std::string script = R"(
import json, sys
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from scipy.stats import pearsonr, spearmanr
out = []
for c in json.load(open(sys.argv[1])):
    out.append([accuracy_score(c["labels"], c["predicted"]), f1_score(c["labels"], c["predicted"]),
                matthews_corrcoef(c["labels"], c["predicted"]), pearsonr(c["score"], c["truth"])[0],
                spearmanr(c["score"], c["truth"])[0]])
labels, predicted = json.load(open(sys.argv[2]))
out.append([matthews_corrcoef(labels, predicted)])
json.dump(out, open(sys.argv[3], "w"))
)";
  std::ofstream(dir_ / "reference.py") << script;
  const std::string command = "/usr/bin/python3 " + (dir_ / "reference.py").string() + " " +
                              (dir_ / "cases.json").string() + " " + (dir_ / "three.json").string() +
                              " " + (dir_ / "out.json").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dir_ / "out.json");
  const nlohmann::json reference = nlohmann::json::parse(in);
  const char* names[] = {"accuracy", "f1", "mcc", "pearson", "spearman"};
  for (size_t c = 0; c < ours.size(); ++c) {
    for (size_t m = 0; m < 5; ++m) {
      // Sums of at most 250 terms in double: well inside 1e-12.
      EXPECT_NEAR(ours[c][m], reference[c][m].get<double>(), 1e-12)
          << names[m] << " of case " << c;
    }
  }
  EXPECT_NEAR(MatthewsCorrelation(predicted3, labels3), reference.back()[0].get<double>(), 1e-12);
  // Each task reports its own metric first.
  EXPECT_EQ(GlueMetrics(*FindGlueTask("cola"), {1, 0}, {1, 0}).front().first, "mcc");
  EXPECT_EQ(GlueMetrics(*FindGlueTask("stsb"), {1, 2, 3}, {1, 2, 4}).size(), 2u);
}

}  // namespace
}  // namespace pbert::tasks
