#include "data/instances.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "data/corpus.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/data/shared_data.h"
#include "tests/source_paths.h"

namespace pbert::data {
namespace {

class InstancesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PBERT_REQUIRE_SHARED("wiki_00");
    PBERT_REQUIRE_SHARED("bert-base-uncased-vocab.txt");
    auto vocabulary = Vocabulary::Load(testing::SharedData("bert-base-uncased-vocab.txt"));
    ASSERT_TRUE(vocabulary.ok());
    tokenizer_ = std::make_unique<Tokenizer>(
        std::make_shared<const Vocabulary>(std::move(*vocabulary)), true);
    CorpusStats stats;
    ASSERT_TRUE(ReadCorpus(
                    testing::SharedData("wiki_00"), CorpusFormat::kWikiExtractor,
                    [&](Document&& d) {
                      TokenizedDocument t;
                      for (const auto& s : d) {
                        auto ids = tokenizer_->Encode(s);
                        if (!ids.empty()) t.push_back(ids);
                      }
                      documents_.push_back(t);
                    },
                    &stats)
                    .ok());
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<TokenizedDocument> documents_;
};

TEST_F(InstancesTest, EveryInstanceHasTheReferenceShape) {
  InstanceOptions o;
  o.max_seq_len = 128;
  o.dupe_factor = 2;
  auto instances = *CreateInstances(documents_, *tokenizer_, o, 2);
  ASSERT_GT(instances.size(), 1000u);
  const auto& special = tokenizer_->vocabulary().special();
  int mask = 0, kept = 0, replaced = 0, masked_total = 0;
  for (const Instance& in : instances) {
    ASSERT_LE(in.length(), 128);
    ASSERT_EQ(in.input_ids.front(), special.cls);
    ASSERT_EQ(in.input_ids.back(), special.sep);
    int a = 0;
    while (in.segment_ids[a] == 0) ++a;
    ASSERT_EQ(in.input_ids[a - 1], special.sep);  // [CLS] A [SEP] | B [SEP]
    ASSERT_GE(a, 3);
    ASSERT_GE(in.length() - a, 2);
    int expected = std::min(20, std::max(1, static_cast<int>(std::nearbyint(in.length() * 0.15))));
    ASSERT_EQ(static_cast<int>(in.masked_positions.size()), expected);
    for (size_t m = 0; m < in.masked_positions.size(); ++m) {
      int32_t now = in.input_ids[in.masked_positions[m]];
      mask += now == special.mask;
      kept += now == in.masked_ids[m];
      replaced += now != special.mask && now != in.masked_ids[m];
      ++masked_total;
    }
  }
  // The 80/10/10 rule (a random replacement can draw the same token: rare).
  EXPECT_NEAR(static_cast<double>(mask) / masked_total, 0.8, 0.01);
  EXPECT_NEAR(static_cast<double>(kept) / masked_total, 0.1, 0.01);
  EXPECT_NEAR(static_cast<double>(replaced) / masked_total, 0.1, 0.01);
}

TEST_F(InstancesTest, DeterministicForASeedWhateverTheThreads) {
  InstanceOptions o;
  o.max_seq_len = 64;
  o.dupe_factor = 1;
  auto one = *CreateInstances(documents_, *tokenizer_, o, 1);
  auto two = *CreateInstances(documents_, *tokenizer_, o, 2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].input_ids, two[i].input_ids);
    ASSERT_EQ(one[i].masked_positions, two[i].masked_positions);
  }
  o.seed = 7;
  auto other = *CreateInstances(documents_, *tokenizer_, o, 2);
  EXPECT_NE(other[0].input_ids, one[0].input_ids);
}

TEST_F(InstancesTest, WholeWordMaskingMasksEveryPieceOfAWord) {
  InstanceOptions o;
  o.max_seq_len = 128;
  o.dupe_factor = 1;
  o.whole_word_mask = true;
  int checked = 0;
  const auto made = CreateInstances(documents_, *tokenizer_, o, 2);
  ASSERT_TRUE(made.ok()) << made.status();
  for (const Instance& in : *made) {
    std::vector<int32_t> original = in.input_ids;
    for (size_t m = 0; m < in.masked_positions.size(); ++m) {
      original[in.masked_positions[m]] = in.masked_ids[m];
    }
    std::vector<bool> masked(in.length(), false);
    for (int32_t p : in.masked_positions) masked[p] = true;
    const auto& special = tokenizer_->vocabulary().special();
    for (int i = 1; i < in.length(); ++i) {
      // A piece right after [CLS] or [SEP] (the segment was truncated
      // mid-word) joins the word before the marker, as in the reference.
      if (original[i - 1] == special.cls || original[i - 1] == special.sep) continue;
      if (!tokenizer_->StartsWord(original[i]) && original[i] != special.sep) {
        ASSERT_EQ(masked[i], masked[i - 1]) << "a word split by the mask at " << i;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// Statistics of the instances from `documents` by our generator and by
// tests/data/pretraining_reference.py; they must agree within sampling noise.
void CompareWithReference(const std::vector<TokenizedDocument>& documents,
                          const Tokenizer& tokenizer, const InstanceOptions& o) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3";
  std::string docs = std::filesystem::temp_directory_path() / "pbert_reference_docs.txt";
  {
    std::ofstream out(docs);
    for (const auto& d : documents) {
      for (const auto& s : d) {
        for (size_t i = 0; i < s.size(); ++i) out << (i ? " " : "") << s[i];
        out << "\n";
      }
      out << "\n";
    }
  }
  const auto& special = tokenizer.vocabulary().special();
  std::string stats_path = docs + ".json";
  std::string command =
      std::string("/usr/bin/python3 ") + pbert::testing::SourceDir() +
      "/tests/data/pretraining_reference.py " + docs + " " + std::to_string(o.max_seq_len) + " " +
      std::to_string(o.dupe_factor) + " " + std::to_string(o.short_seq_prob) + " " +
      std::to_string(o.masked_lm_prob) + " " + std::to_string(o.max_predictions_per_seq) + " " +
      std::to_string(tokenizer.vocabulary().size()) + " " + std::to_string(special.cls) + " " +
      std::to_string(special.sep) + " " + std::to_string(special.mask) + " > " + stats_path;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(stats_path);
  auto reference = nlohmann::json::parse(in);

  auto instances = *CreateInstances(documents, tokenizer, o, 2);
  double n = instances.size(), length = 0, full = 0, shorter = 0, masked = 0, random_next = 0;
  for (const Instance& i : instances) {
    length += i.length();
    full += i.length() == o.max_seq_len;
    shorter += i.length() < o.max_seq_len / 2;
    masked += i.masked_positions.size();
    random_next += i.next_sentence_label;
  }
  SCOPED_TRACE(reference.dump());
  EXPECT_NEAR(n / reference["instances"].get<double>(), 1.0, 0.02);
  EXPECT_NEAR(length / n / reference["mean_length"].get<double>(), 1.0, 0.01);
  EXPECT_NEAR(full / n, reference["full_length_share"].get<double>(), 0.015);
  EXPECT_NEAR(shorter / n, reference["short_share"].get<double>(), 0.01);
  EXPECT_NEAR(masked / n / reference["masked_per_instance"].get<double>(), 1.0, 0.01);
  EXPECT_NEAR(random_next / n, reference["random_next_share"].get<double>(), 0.015);
}

TEST_F(InstancesTest, StatisticsMatchAnIndependentReferenceGenerator) {
  // The short target is drawn once per document, so a few long articles
  // make its effect noisy: the sentences are regrouped into many documents
  // of five, which keeps the comparison within sampling noise.
  std::vector<TokenizedDocument> small;
  for (const auto& d : documents_) {
    for (size_t i = 0; i < d.size(); i += 5) {
      small.emplace_back(d.begin() + i, d.begin() + std::min(d.size(), i + 5));
    }
  }
  ASSERT_GT(small.size(), 1000u);
  InstanceOptions o;
  o.max_seq_len = 128;
  o.dupe_factor = 5;
  CompareWithReference(small, *tokenizer_, o);
}

// The well-formed byte sequences of the Unicode Standard's Table 3-7, and
// what falls outside it: a Latin-1 byte, an overlong form, a surrogate,
// above U+10FFFF, a sequence cut short, a stray continuation byte.
TEST(Utf8Test, TakesWellFormedUtf8AndNamesTheFirstBadByte) {
  for (const char* good : {"plain ASCII", "Caf\xc3\xa9", "\xe2\x82\xac 5", "\xe0\xa0\x80",
                           "\xed\x9f\xbf", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", ""}) {
    EXPECT_TRUE(CheckUtf8(good, "f.txt", 1).ok()) << good;
  }
  const std::pair<const char*, int> bad[] = {
      {"Caf\xe9 au lait", 4}, {"a\xc0\x80", 2},     {"\xed\xa0\x80", 1}, {"ok \xf4\x90\x80\x80", 4},
      {"\xf5\x80\x80\x80", 1}, {"end \xe2\x82", 5}, {"\x80", 1},          {"\xc3\xa9\xbf", 3}};
  for (const auto& [text, column] : bad) {
    absl::Status s = CheckUtf8(text, "f.txt", 7);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(std::string(s.message()).find(absl::StrCat("f.txt:7: not UTF-8 (byte 0x")),
              std::string::npos);
    EXPECT_NE(std::string(s.message()).find(absl::StrCat(" at column ", column, ")")),
              std::string::npos)
        << s.message();
  }
}

TEST(SentenceSplitTest, SplitsAtSentenceEndsOnly) {
  using Strings = std::vector<std::string>;
  EXPECT_EQ(SplitSentences("Dr. Smith went home. He slept well!  Then (he) woke."),
            (Strings{"Dr. Smith went home.", "He slept well!", "Then (he) woke."}));
  EXPECT_EQ(SplitSentences("J. R. R. Tolkien wrote it in 1937. It sold."),
            (Strings{"J. R. R. Tolkien wrote it in 1937.", "It sold."}));
  EXPECT_EQ(SplitSentences("He said \"Stop.\" Then he left. pH was 3.5 e.g. low."),
            (Strings{"He said \"Stop.\"", "Then he left. pH was 3.5 e.g. low."}));
  EXPECT_EQ(SplitSentences("Is it? Yes. 2020 was odd."),
            (Strings{"Is it?", "Yes.", "2020 was odd."}));
  EXPECT_EQ(SplitSentences("   "), Strings{});
}

TEST(CorpusTest, WikiExtractorDropsTitlesAndSplitsSentences) {
  std::string path = std::filesystem::temp_directory_path() / "pbert_corpus_wiki.txt";
  std::ofstream(path)
      << "<doc id=\"1\" title=\"A\">\nA\n\nFirst one. Second one.\n\nThird.\n</doc>\n"
         "<doc id=\"2\" title=\"B\">\nB\n\nOnly.\n</doc>\n";
  std::vector<Document> docs;
  CorpusStats stats;
  // kAuto takes it for WikiExtractor from its first line: titles dropped.
  ASSERT_TRUE(ReadCorpus(
                  path, CorpusFormat::kAuto, [&](Document&& d) { docs.push_back(d); }, &stats)
                  .ok());
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], (Document{"First one.", "Second one.", "Third."}));
  EXPECT_EQ(docs[1], (Document{"Only."}));
  EXPECT_EQ(stats.sentences, 4u);
}

TEST(CorpusTest, AByteOrderMarkIsNotText) {
  // An editor's mark before "<doc", and one more where a second file was
  // appended with cat: still WikiExtractor, two documents, no mark in text.
  std::string path = std::filesystem::temp_directory_path() / "pbert_corpus_bom.txt";
  std::ofstream(path) << "\xEF\xBB\xBF<doc id=\"1\" title=\"A\">\nA\n\nFirst one.\n</doc>\n"
                         "\xEF\xBB\xBF<doc id=\"2\" title=\"B\">\nB\n\xEF\xBB\xBFOnly.\n</doc>\n";
  std::vector<Document> docs;
  CorpusStats stats;
  ASSERT_TRUE(ReadCorpus(
                  path, CorpusFormat::kAuto, [&](Document&& d) { docs.push_back(d); }, &stats)
                  .ok());
  EXPECT_EQ(docs, (std::vector<Document>{{"First one."}, {"Only."}}));
  std::filesystem::remove(path);
}

TEST(CorpusTest, PlainTextHasBlankLinesBetweenDocuments) {
  std::string path = std::filesystem::temp_directory_path() / "pbert_corpus_text.txt";
  std::ofstream(path) << "One.\nTwo.\n\n\nThree.\n";
  std::vector<Document> docs;
  CorpusStats stats;
  ASSERT_TRUE(ReadCorpus(
                  path, CorpusFormat::kText, [&](Document&& d) { docs.push_back(d); }, &stats)
                  .ok());
  EXPECT_EQ(docs, (std::vector<Document>{{"One.", "Two."}, {"Three."}}));
  docs.clear();
  ASSERT_TRUE(ReadCorpus(
                  path, CorpusFormat::kAuto, [&](Document&& d) { docs.push_back(d); }, &stats)
                  .ok());
  EXPECT_EQ(docs, (std::vector<Document>{{"One.", "Two."}, {"Three."}}));
}

TEST(CorpusTest, EmptyAndBinaryFilesAreClearErrors) {
  std::string path = std::filesystem::temp_directory_path() / "pbert_corpus_bad.txt";
  std::ofstream(path) << "";
  CorpusStats stats;
  auto none = [](Document&&) {};
  auto status = ReadCorpus(path, CorpusFormat::kText, none, &stats);
  EXPECT_EQ(std::string(status.message()),
            path +
                " holds no sentences (the file is empty); expected WikiExtractor output or one "
                "sentence per line");
  EXPECT_EQ(ReadCorpus(path, CorpusFormat::kAuto, none, &stats), status);
  std::ofstream(path, std::ios::binary) << std::string("ab\0cd\n", 6);
  status = ReadCorpus(path, CorpusFormat::kText, none, &stats);
  EXPECT_EQ(std::string(status.message()),
            path + ":1: a NUL byte; this looks like a binary file, not text");
}

}  // namespace
}  // namespace pbert::data
