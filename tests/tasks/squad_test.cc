// SQuAD 1.1 and 2.0 as run_squad.py reads, featurizes and answers them
// (answers, n-best lists with their probabilities, 2.0's null odds),
// checked against an independent Python reference written from that
// algorithm (tests/tasks/squad_reference.py), and scored as the official
// script (../shared/tools/squad/evaluate-v2.0.py, with --na-prob-file for
// 2.0) scores the same predictions.
#include "tasks/squad.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/data/shared_data.h"
#include "tests/scratch_folder.h"
#include "tests/source_paths.h"

namespace pbert::tasks {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kVocabName = "bert-base-uncased-vocab.txt";

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A SQuAD file whose contexts hold what run_squad.py treats specially:
// accents, answers inside words ("1990" of "1990s"), punctuation, runs of
// whitespace and U+202F, a no-break space inside an answer (which
// run_squad.py cannot find, and leaves out of training), several answers,
// and contexts long enough for several windows.
json TrickyFile() {
  std::string longer;
  for (int i = 0; i < 40; ++i) {
    longer += "Sentence " + std::to_string(i) + " tells of the river Zoë crossed in " +
              std::to_string(1800 + i) + ", near the café of Saint-Étienne. ";
  }
  auto qa = [](const std::string& context, const std::string& id, const std::string& question,
               std::vector<std::string> answers) {
    json q = {{"id", id}, {"question", question}, {"answers", json::array()}};
    for (const auto& a : answers) {
      const size_t at = context.find(a);
      EXPECT_NE(at, std::string::npos) << a;
      // answer_start counts characters (code points), not bytes.
      size_t chars = 0;
      for (size_t i = 0; i < at; ++i)
        chars += (static_cast<unsigned char>(context[i]) & 0xC0) != 0x80;
      q["answers"].push_back({{"text", a}, {"answer_start", chars}});
    }
    return q;
  };
  const std::string c1 =
      "Café Zoë opened in the 1990s  in  Saint-Étienne (France); its owner, Jean-Luc Picard, "
      "was born in 1856.\tThe\u202Fcafé serves \u201Ccr\u00E8me br\u00FBl\u00E9e\u201D and "
      "New\u00A0York "
      "cheesecake.";
  json data = json::array();
  data.push_back(
      {{"title", "Cafés"},
       {"paragraphs",
        {{{"context", c1},
          {"qas",
           {qa(c1, "q1", "When did Café Zoë open?", {"1990"}),
            qa(c1, "q2", "Where did the café open?", {"Saint-Étienne", "Saint-Étienne (France)"}),
            qa(c1, "q3", "Who owns it?", {"Jean-Luc Picard"}),
            qa(c1, "q4", "What dessert does it serve?", {"cr\u00E8me br\u00FBl\u00E9e"}),
            qa(c1, "q5", "Which cheesecake?", {"New\u00A0York cheesecake"}),
            qa(c1, "q6", "When was the owner born?", {"1856."})}}}}}});
  data.push_back(
      {{"title", "River"},
       {"paragraphs",
        {{{"context", longer},
          {"qas",
           {qa(longer, "r1", "Which year did sentence 3 tell of?", {"1803"}),
            qa(longer, "r2", "What did Zoë cross in 1837?", {"river Zoë crossed in 1837"}),
            qa(longer, "r3", "Near what, in sentence 20?", {"café of Saint-Étienne"})}}}}}});
  return {{"version", "1.1"}, {"data", data}};
}

// The tricky file as SQuAD 2.0: besides its questions, questions its
// contexts do not answer (is_impossible, no answers).
json TrickyFileV2() {
  json file = TrickyFile();
  file["version"] = "v2.0";
  int n = 0;
  for (json& article : file["data"]) {
    for (json& paragraph : article["paragraphs"]) {
      for (const char* question : {"Who painted the café?", "When did the river freeze?",
                                   "What is the capital of Peru?"}) {
        paragraph["qas"].push_back({{"id", "no" + std::to_string(n++)},
                                    {"question", question},
                                    {"answers", json::array()},
                                    {"is_impossible", true}});
      }
    }
  }
  return file;
}

class SquadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = pbert::testing::ScratchFolder();
    if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3";
    PBERT_REQUIRE_SHARED(kVocabName);
    auto vocabulary = data::Vocabulary::Load(pbert::testing::SharedData(kVocabName));
    ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
    tokenizer_ = std::make_unique<data::Tokenizer>(
        std::make_shared<data::Vocabulary>(std::move(*vocabulary)), true);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The files the tests compare on, each with whether it is SQuAD 2.0:
  // the tricky one in both versions, and cloze questions made from
  // Wikipedia by scripts/cloze_squad.py (2.0's with unanswerable ones).
  std::vector<std::pair<std::string, bool>> Files() {
    std::vector<std::pair<std::string, bool>> files;
    WriteText(dir_ / "tricky.json", TrickyFile().dump());
    files.emplace_back((dir_ / "tricky.json").string(), false);
    WriteText(dir_ / "tricky2.json", TrickyFileV2().dump());
    files.emplace_back((dir_ / "tricky2.json").string(), true);
    if (fs::exists(pbert::testing::SharedData("wiki_01"))) {
      for (const bool v2 : {false, true}) {
        const std::string name = v2 ? "cloze2" : "cloze";
        const std::string command = std::string("/usr/bin/python3 ") + pbert::testing::SourceDir() +
                                    "/scripts/cloze_squad.py " +
                                    pbert::testing::SharedData("wiki_01") + " " +
                                    (dir_ / (name + "_train.json")).string() + " " +
                                    (dir_ / (name + "_dev.json")).string() + " --questions 400" +
                                    (v2 ? " --version-2" : "") + " > /dev/null";
        EXPECT_EQ(std::system(command.c_str()), 0) << command;
        files.emplace_back((dir_ / (name + "_train.json")).string(), v2);
      }
    }
    return files;
  }

  // Runs the reference on `path`; returns its features (and with `logits`
  // its predictions, n-best lists and null odds in `predictions`).
  std::vector<json> Reference(const std::string& path, const SquadOptions& o, bool training,
                              const std::string& logits = "", json* predictions = nullptr) {
    std::string command =
        std::string("/usr/bin/python3 ") + pbert::testing::SourceDir() +
        "/tests/tasks/squad_reference.py " + pbert::testing::SharedData(kVocabName) + " " + path +
        " " + std::to_string(o.max_seq_length) + " " + std::to_string(o.doc_stride) + " " +
        std::to_string(o.max_query_length) + " " + (training ? "1" : "0") + " " +
        (dir_ / "features.jsonl").string() + (o.version_2_with_negative ? " --version-2" : "");
    if (!logits.empty()) {
      command += " --logits " + logits + " --n-best " + std::to_string(o.n_best) +
                 " --max-answer " + std::to_string(o.max_answer_length) + " --null-threshold " +
                 std::to_string(o.null_score_diff_threshold) + " --predictions " +
                 (dir_ / "predictions.json").string();
    }
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::vector<json> out;
    std::ifstream in(dir_ / "features.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    if (predictions != nullptr) *predictions = json::parse(ReadText(dir_ / "predictions.json"));
    return out;
  }

  fs::path dir_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
};

// The settings of a file: Google's, and narrow windows over every context
// (2.0: a threshold that changes some answers).
std::vector<SquadOptions> Settings(bool v2) {
  SquadOptions standard;  // 384, 128, 64: Google's
  SquadOptions narrow;
  narrow.max_seq_length = 48;
  narrow.doc_stride = 16;
  narrow.max_query_length = 12;
  narrow.truncate_questions = true;
  standard.version_2_with_negative = narrow.version_2_with_negative = v2;
  narrow.null_score_diff_threshold = v2 ? 1.5 : 0.0;
  return {standard, narrow};
}

TEST_F(SquadTest, FeaturesMatchTheReference) {
  for (const auto& [path, v2] : Files()) {
    auto set = ReadSquad(path, {v2, true});
    ASSERT_TRUE(set.ok()) << set.status();
    for (const SquadOptions& options : Settings(v2)) {
      for (bool training : {true, false}) {
        SCOPED_TRACE(path + " at " + std::to_string(options.max_seq_length) +
                     (training ? ", training" : ""));
        auto ours = MakeSquadFeatures(*set, *tokenizer_, options, training);
        ASSERT_TRUE(ours.ok()) << ours.status();
        const std::vector<json> reference = Reference(path, options, training);
        ASSERT_EQ(ours->features.size(), reference.size());
        EXPECT_GE(reference.size(), set->examples.size() - (training ? 1 : 0));
        int mismatches = 0;
        for (size_t i = 0; i < reference.size() && mismatches < 5; ++i) {
          const SquadFeature& f = ours->features[i];
          const json& r = reference[i];
          const bool same =
              f.example == r["example"].get<int>() &&
              f.feature.sequence.input_ids == r["ids"].get<std::vector<int32_t>>() &&
              f.feature.sequence.segment_ids == r["segments"].get<std::vector<int32_t>>() &&
              f.feature.start == r["start"].get<int>() && f.feature.end == r["end"].get<int>() &&
              f.word == r["word"].get<std::vector<int32_t>>() &&
              f.max_context == r["max_context"].get<std::vector<uint8_t>>();
          if (!same) ADD_FAILURE() << "feature " << i << " differs; reference: " << r.dump();
          mismatches += !same;
        }
        if (training && path.find("tricky") != std::string::npos) {
          // The no-break space of q5's answer: left out, as run_squad.py does.
          EXPECT_EQ(ours->unanswerable, 1);
        }
      }
    }
  }
}

TEST_F(SquadTest, AnswersMatchTheReference) {
  std::mt19937 random(7);
  // Logits in quarters: ties among starts, ends and sums are common, so the
  // order among equals (Python's stable sorts) is checked too; sums of
  // quarters are exact, so the null odds compare exactly.
  std::uniform_int_distribution<int> quarter(-24, 24);
  for (const auto& [path, v2] : Files()) {
    auto set = ReadSquad(path, {v2, true});
    ASSERT_TRUE(set.ok()) << set.status();
    for (SquadOptions options : Settings(v2)) {
      options.max_answer_length = 6;
      SCOPED_TRACE(path + " at " + std::to_string(options.max_seq_length));
      auto features = MakeSquadFeatures(*set, *tokenizer_, options, false);
      ASSERT_TRUE(features.ok()) << features.status();
      std::vector<SpanLogits> logits;
      json written = json::array();
      for (const auto& f : features->features) {
        SpanLogits l;
        for (size_t i = 0; i < f.word.size(); ++i) {
          l.start.push_back(quarter(random) / 4.0f);
          l.end.push_back(quarter(random) / 4.0f);
        }
        if (v2 && f.example % 2 == 0) {  // [CLS] in every window that may beat the spans
          l.start[0] = 4.0f + static_cast<float>(std::abs(quarter(random))) / 4.0f;
          l.end[0] = 4.0f + static_cast<float>(std::abs(quarter(random))) / 4.0f;
        }
        written.push_back({l.start, l.end});
        logits.push_back(std::move(l));
      }
      WriteText(dir_ / "logits.json", written.dump());
      json expected;
      Reference(path, options, false, (dir_ / "logits.json").string(), &expected);
      auto ours = PredictAnswers(*set, *features, logits, *tokenizer_, options);
      ASSERT_TRUE(ours.ok()) << ours.status();
      ASSERT_EQ(ours->size(), expected["predictions"].size());
      int differ = 0, answered = 0, null = 0;
      for (const SquadAnswer& answer : *ours) {
        answered += answer.text != "empty" && !answer.text.empty();
        null += answer.text.empty();
        const json& nbest = expected["nbest"][answer.id];
        bool same = expected["predictions"][answer.id].get<std::string>() == answer.text &&
                    nbest.size() == answer.nbest.size();
        for (size_t k = 0; same && k < nbest.size(); ++k) {
          const NbestAnswer& n = answer.nbest[k];
          // The probabilities: the same double arithmetic, exp to within
          // an ulp or two.
          same = nbest[k]["text"].get<std::string>() == n.text &&
                 std::abs(nbest[k]["probability"].get<double>() - n.probability) <= 1e-14 &&
                 nbest[k]["start_logit"].get<double>() == n.start_logit &&
                 nbest[k]["end_logit"].get<double>() == n.end_logit;
        }
        if (v2) same = same && expected["null_odds"][answer.id].get<double>() == answer.null_odds;
        if (!same && ++differ <= 5) {
          ADD_FAILURE() << answer.id << ": ours \"" << answer.text << "\" " << NbestJson({answer})
                        << (v2 ? " odds " + std::to_string(answer.null_odds) : "") << ", reference "
                        << expected["predictions"][answer.id] << " " << nbest.dump() << " "
                        << (v2 ? expected["null_odds"][answer.id].dump() : "");
        }
      }
      EXPECT_GT(answered, static_cast<int>(ours->size()) / 4);
      if (v2) EXPECT_GT(null, 0);
    }
  }
}

// The official script's scores of `predictions` on `file` (SQuAD 2.0's
// with its null odds as --na-prob-file).
json OfficialScores(const fs::path& dir, const json& file, const SquadPredictions& predictions,
                    bool v2) {
  const std::string script =
      std::string(pbert::testing::SharedDataDir()) + "/../tools/squad/evaluate-v2.0.py";
  WriteText(dir / "dev.json", file.dump());
  EXPECT_TRUE(
      WriteFileAtomically((dir / "predictions.json").string(), PredictionsJson(predictions)).ok());
  EXPECT_TRUE(
      WriteFileAtomically((dir / "null_odds.json").string(), NullOddsJson(predictions)).ok());
  const std::string command = "/usr/bin/python3 " + script + " " + (dir / "dev.json").string() +
                              " " + (dir / "predictions.json").string() + " -o " +
                              (dir / "eval.json").string() +
                              (v2 ? " --na-prob-file " + (dir / "null_odds.json").string() : "");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return json::parse(ReadText(dir / "eval.json"));
}

// Answers that exercise every step of the normalization: articles (also
// inside words, and next to non-ASCII letters), ASCII and other
// punctuation, case, accents, whitespace, partial overlaps, repeats.
const std::vector<std::string>& ScoredAnswers() {
  static const std::vector<std::string> answers = {"the 1990",
                                                   "Saint-Étienne",
                                                   "an owner Jean Luc  picard",
                                                   "Crème Brûlée!",
                                                   "the the New York",
                                                   "born in 1856",
                                                   "A river—the Zoë",
                                                   "1803 1803 1803",
                                                   "café of the Saint\u2013Étienne",
                                                   ""};
  return answers;
}

class SquadScoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = pbert::testing::ScratchFolder();
    const std::string script =
        std::string(pbert::testing::SharedDataDir()) + "/../tools/squad/evaluate-v2.0.py";
    if (!fs::exists(script)) GTEST_SKIP() << "needs " << script;
    if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
      GTEST_SKIP() << "the official script needs python3-numpy";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SquadScoreTest, ScoresMatchTheOfficialScript) {
  const json file = TrickyFile();
  WriteText(dir_ / "dev.json", file.dump());
  auto set = ReadSquad((dir_ / "dev.json").string());
  ASSERT_TRUE(set.ok()) << set.status();
  SquadPredictions predictions;
  for (size_t i = 0; i < set->examples.size(); ++i) {
    predictions.push_back({set->examples[i].id, ScoredAnswers()[i % ScoredAnswers().size()]});
  }
  const json official = OfficialScores(dir_, file, predictions, false);
  const SquadScore ours = ScoreSquad(*set, predictions);
  EXPECT_NEAR(ours.exact_match, official["exact"].get<double>(), 1e-9);
  EXPECT_NEAR(ours.f1, official["f1"].get<double>(), 1e-9);
  EXPECT_EQ(ours.answered, official["total"].get<int64_t>());
  // Not a trivial agreement: some right, some partly, some wrong.
  EXPECT_GT(ours.f1, ours.exact_match);
  EXPECT_GT(ours.exact_match, 0);
  EXPECT_LT(ours.f1, 100);
}

TEST_F(SquadScoreTest, Version2ScoresMatchTheOfficialScriptWithItsNullOdds) {
  const json file = TrickyFileV2();
  WriteText(dir_ / "dev2.json", file.dump());
  auto set = ReadSquad((dir_ / "dev2.json").string(), {true, true});
  ASSERT_TRUE(set.ok()) << set.status();
  // Null odds of every sign, ties among them; "" whenever they exceed the
  // threshold 0, as a run answers (so the script's --na-prob-thresh 1.0
  // changes nothing); spans right, partly right and wrong, on questions
  // with and without answers.
  SquadPredictions predictions;
  for (size_t i = 0; i < set->examples.size(); ++i) {
    SquadAnswer answer{set->examples[i].id, ScoredAnswers()[(3 * i) % ScoredAnswers().size()]};
    answer.null_odds = static_cast<double>(static_cast<int>((7 * i) % 11) - 5) / 2;
    if (answer.null_odds > 0) answer.text = "";
    predictions.push_back(std::move(answer));
  }
  const json official = OfficialScores(dir_, file, predictions, true);
  const SquadScore ours = ScoreSquad(*set, predictions);
  const std::pair<const char*, double> compared[] = {{"exact", ours.exact_match},
                                                     {"f1", ours.f1},
                                                     {"HasAns_exact", ours.has_answer_exact},
                                                     {"HasAns_f1", ours.has_answer_f1},
                                                     {"NoAns_exact", ours.no_answer_exact},
                                                     {"NoAns_f1", ours.no_answer_f1},
                                                     {"best_exact", ours.best_exact},
                                                     {"best_exact_thresh", ours.best_exact_thresh},
                                                     {"best_f1", ours.best_f1},
                                                     {"best_f1_thresh", ours.best_f1_thresh}};
  for (const auto& [key, value] : compared) {
    ASSERT_TRUE(official.contains(key)) << key << " " << official.dump();
    EXPECT_NEAR(value, official[key].get<double>(), 1e-9) << key;
  }
  EXPECT_EQ(ours.has_answer, official["HasAns_total"].get<int64_t>());
  EXPECT_EQ(ours.no_answer, official["NoAns_total"].get<int64_t>());
  // Not trivial: the null answer right on some, wrong on others, and a
  // threshold better than 0.
  EXPECT_GT(ours.no_answer_exact, 0);
  EXPECT_LT(ours.no_answer_exact, 100);
  EXPECT_GT(ours.best_f1, ours.f1);
}

// Bad files need no vocabulary: one line naming the file and the question.
class SquadInputTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = pbert::testing::ScratchFolder(); }
  void TearDown() override { fs::remove_all(dir_); }
  absl::Status Read(const std::string& text, SquadReading reading = {}) {
    WriteText(dir_ / "bad.json", text);
    return ReadSquad((dir_ / "bad.json").string(), reading).status();
  }
  fs::path dir_;
};

TEST_F(SquadInputTest, BadFilesAreNamedInOneLine) {
  const std::string context = R"("context": "Paris is the capital of France.")";
  const std::string v2 = R"({"data": [{"paragraphs": [{)" + context + R"(, "qas": [)";
  const std::string paris = R"("answers": [{"text": "Paris", "answer_start": 0}])";
  struct Case {
    std::string text, expected;
    SquadReading reading = {};
  } cases[] = {
      // SQuAD 2.0's questions: read as 1.1 names the key; answers and
      // is_impossible must agree.
      {v2 + R"({"id": "n", "question": "?", "answers": [], "is_impossible": true}]}]}]})",
       "question n: is_impossible: a SQuAD 2.0 question; set finetune.version_2_with_negative"},
      {v2 + R"({"id": "n", "question": "?", )" + paris + R"(, "is_impossible": true}]}]}]})",
       "question n: is_impossible and has 1 answers",
       {true, true}},
      {v2 + R"({"id": "n", "question": "?", "answers": [], "is_impossible": false}]}]}]})",
       "question n: has no answer and is not is_impossible",
       {true, true}},
      {v2 + R"({"id": "n", "question": "?", "answers": [], "is_impossible": "yes"}]}]}]})",
       "question n: has an \"is_impossible\" that is no bool",
       {true, true}},
      // Values that pass a parser but not their use.
      {R"({"data": [{"paragraphs": [{"context": " \t\n\u202f ", "qas": [{"id": "w", "question": "?", "answers": []}]}]}]})",
       "data[0].paragraphs[0]: its context holds no word"},
      {v2 +
           R"({"id": "big", "question": "?", "answers": [{"text": "Paris", "answer_start": 9223372036854775807}]}]}]}]})",
       "question big, answer 0: \"Paris\" is not at answer_start 9223372036854775807"},
      {v2 +
           R"({"id": "big", "question": "?", "answers": [{"text": "Paris", "answer_start": 18446744073709551615}]}]}]}]})",
       "is not at answer_start 18446744073709551615"},
      {v2 +
           R"({"id": "big", "question": "?", "answers": [{"text": "Paris", "answer_start": -3}]}]}]}]})",
       "is not at answer_start -3"},
      {v2 + R"({"id": "sp", "question": "?", "answers": [{"text": " ", "answer_start": 5}]}]}]}]})",
       "question sp, answer 0: is only whitespace"},
      {"{\"data\": [", "not a SQuAD JSON file"},
      {"[1, 2]", "the file: is not a JSON object"},
      {"{\"version\": \"1.1\"}", "the file: has no \"data\" list"},
      {R"({"data": [{"paragraphs": [{"qas": []}]}]})", "data[0].paragraphs[0]: has no \"context\""},
      {R"({"data": [{"paragraphs": [{)" + context +
           R"(, "qas": [{"id": "a", "question": "Capital?", "answers": [{"text": "Paris", "answer_start": 3}]}]}]}]})",
       "question a, answer 0: \"Paris\" is not at answer_start 3"},
      {R"({"data": [{"paragraphs": [{)" + context +
           R"(, "qas": [{"id": "a", "question": "Capital?", "answers": [{"text": "Paris", "answer_start": 99}]}]}]}]})",
       "is not at answer_start 99 of its context (31 characters"},
      {R"({"data": [{"paragraphs": [{)" + context +
           R"(, "qas": [{"id": "a", "question": "?", "answers": []}]}]}]})",
       "question a: has no answer"},
      {R"({"data": [{"paragraphs": [{)" + context +
           R"(, "qas": [{"id": "a", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]}, {"id": "a", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]}]}]}]})",
       "question a: its id is used twice"},
      {R"({"data": [{"paragraphs": [{)" + context +
           R"(, "qas": [{"id": "a", "question": "?", "answers": [{"text": "Paris", "answer_start": "0"}]}]}]}]})",
       "has no integer \"answer_start\""},
  };
  for (const Case& c : cases) {
    const absl::Status status = Read(c.text, c.reading);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(status.message().find((dir_ / "bad.json").string()), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.expected), std::string::npos) << status;
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
  }
}

TEST_F(SquadInputTest, AQuestionOverTheQueryLimitIsNamedUnlessCut) {
  // A vocabulary of its own: specials and the words of the file.
  WriteText(dir_ / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nparis\nis\nthe\ncapital\n");
  auto vocabulary = data::Vocabulary::Load((dir_ / "vocab.txt").string());
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  data::Tokenizer tokenizer(std::make_shared<data::Vocabulary>(std::move(*vocabulary)), true);
  WriteText(dir_ / "q.json", R"({"data": [{"paragraphs": [{"context": "Paris is the capital",
      "qas": [{"id": "long", "question": "is is is is is is paris the capital",
               "answers": [{"text": "Paris", "answer_start": 0}]}]}]}]})");
  auto set = ReadSquad((dir_ / "q.json").string());
  ASSERT_TRUE(set.ok()) << set.status();
  SquadOptions options;
  options.max_query_length = 8;
  auto refused = MakeSquadFeatures(*set, tokenizer, options, true);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("question long: 9 tokens, more than "
                                            "finetune.max_query_length 8"),
            std::string::npos)
      << refused.status();
  options.truncate_questions = true;
  auto cut = MakeSquadFeatures(*set, tokenizer, options, true);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->truncated_questions, 1);
  ASSERT_EQ(cut->features.size(), 1u);
  // [CLS] 8 question tokens [SEP], then "paris" at 10: the answer.
  EXPECT_EQ(cut->features[0].feature.start, 10);
  EXPECT_EQ(cut->features[0].feature.end, 10);
}

}  // namespace
}  // namespace pbert::tasks
