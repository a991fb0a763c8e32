#include "data/tokenizer.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/source_paths.h"

namespace pbert::data {
namespace {

constexpr const char* kVocabName = "bert-base-uncased-vocab.txt";

std::string Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("pbert_tok_" + name);
}

class TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PBERT_REQUIRE_SHARED(kVocabName);
    auto vocabulary = Vocabulary::Load(testing::SharedData(kVocabName));
    ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
    vocabulary_ = std::make_shared<const Vocabulary>(std::move(*vocabulary));
    tokenizer_ = std::make_unique<Tokenizer>(vocabulary_, true);
  }
  std::vector<std::string> Pieces(const std::string& text) {
    std::vector<std::string> out;
    for (int32_t id : tokenizer_->Encode(text)) out.push_back(vocabulary_->token(id));
    return out;
  }
  std::shared_ptr<const Vocabulary> vocabulary_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

using Strings = std::vector<std::string>;

TEST_F(TokenizerTest, SpecialTokensOfTheStandardVocabulary) {
  EXPECT_EQ(vocabulary_->size(), 30522);
  EXPECT_EQ(vocabulary_->special().pad, 0);
  EXPECT_EQ(vocabulary_->special().unk, 100);
  EXPECT_EQ(vocabulary_->special().cls, 101);
  EXPECT_EQ(vocabulary_->special().sep, 102);
  EXPECT_EQ(vocabulary_->special().mask, 103);
}

TEST_F(TokenizerTest, LowerCasesSplitsPunctuationAndWordPieces) {
  EXPECT_EQ(Pieces("Hello, WORLD!"), (Strings{"hello", ",", "world", "!"}));
  EXPECT_EQ(Pieces("unaffable"), (Strings{"una", "##ffa", "##ble"}));
  EXPECT_EQ(Pieces("self-governed"), (Strings{"self", "-", "governed"}));
  EXPECT_EQ(Pieces("  \t\n"), Strings{});
}

TEST_F(TokenizerTest, StripsAccentsAfterLowerCasing) {
  EXPECT_EQ(tokenizer_->BasicTokens("Ångström naïve CAFÉ"), (Strings{"angstrom", "naive", "cafe"}));
}

TEST_F(TokenizerTest, CjkCharactersStandAlone) {
  EXPECT_EQ(tokenizer_->BasicTokens("ab中文cd"), (Strings{"ab", "中", "文", "cd"}));
}

TEST_F(TokenizerTest, ControlCharactersAreDroppedAndSpacesSplit) {
  // BEL and a zero-width joiner (Cf) vanish; NBSP (Zs) and U+2028 split.
  EXPECT_EQ(tokenizer_->BasicTokens("a\x07"
                                    "b c\u200dd e\u00a0f g\u2028h"),
            (Strings{"ab", "cd", "e", "f", "g", "h"}));
}

TEST_F(TokenizerTest, UnknownAndOverlongWords) {
  EXPECT_EQ(Pieces("\U0001F600"), Strings{"[UNK]"});  // an emoji is no punctuation
  // Up to 200 characters a word is split (Google's tokenization.py); longer
  // is [UNK]. Hugging Face's limit of 100 is a constructor argument.
  EXPECT_GT(Pieces(std::string(200, 'a')).size(), 1u);
  EXPECT_EQ(Pieces(std::string(201, 'a')), Strings{"[UNK]"});
  Tokenizer hugging_face(vocabulary_, /*lower_case=*/true, 100);
  std::vector<int32_t> ids = hugging_face.Encode(std::string(101, 'a'));
  EXPECT_EQ(ids, std::vector<int32_t>{tokenizer_->vocabulary().special().unk});
}

TEST_F(TokenizerTest, InvalidUtf8BytesAreDropped) {
  EXPECT_EQ(tokenizer_->BasicTokens("ab\xff\xfe"
                                    "cd"),
            Strings{"abcd"});
}

// Runs the independent Python reference (tests/data/bert_tokenizer_reference.py)
// and `packed-bert tokenize`'s code path on the same file.
void ExpectParity(const Tokenizer& tokenizer, const std::string& text_path, bool cased) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3";
  // The reference's output goes to the temporary folder: the shared data
  // folder is read-only input.
  std::string expected_path =
      Temp(std::filesystem::path(text_path).filename().string() + (cased ? ".cased" : "") +
           ".expected");
  std::string command = std::string("/usr/bin/python3 ") + pbert::testing::SourceDir() +
                        "/tests/data/bert_tokenizer_reference.py " +
                        testing::SharedData(kVocabName) + (cased ? " --cased" : "") + " < " +
                        text_path + " > " + expected_path;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream text(text_path, std::ios::binary), expected(expected_path);
  std::string line, want;
  int line_number = 0, mismatches = 0;
  while (std::getline(text, line)) {
    ++line_number;
    ASSERT_TRUE(std::getline(expected, want)) << "reference output ends at line " << line_number;
    std::string got;
    for (int32_t id : tokenizer.Encode(line)) got += (got.empty() ? "" : " ") + std::to_string(id);
    if (got != want && ++mismatches <= 5) {
      ADD_FAILURE() << text_path << ":" << line_number << "\n  ours: " << got
                    << "\n  reference: " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(line_number, 0);
}

TEST_F(TokenizerTest, MatchesTheReferenceOnWikipedia) {
  for (const char* name : {"wiki_00", "wiki_01"}) {
    PBERT_REQUIRE_SHARED(name);
    ExpectParity(*tokenizer_, testing::SharedData(name), false);
  }
}

TEST_F(TokenizerTest, MatchesTheReferenceOnUnicodeEdgeCases) {
  std::string path = Temp("edge.txt");
  std::string text =
      "Ångström naïve café résumé Ελληνικά ΣΟΦΟΣ İstanbul straße ﬁne\n"
      "中文字符 日本語のテキスト 한국어 mixed中English\n"
      "emoji 😀👍🏽 flags 🇫🇷 and ❤️ hearts\n"
      "controls a\x01"
      "b\x7f"
      "c\u200bd\u200de\ufeff f\u00adg\n"
      "spaces a\u00a0b\u2003c\u3000d\u2028e\u2029f\n"
      "punct «quoted» „low“ ‘single’ — dash – en … ellipsis ¿qué? ¡sí! 『括弧』\n"
      "symbols ± × ÷ € £ ¥ © ® ™ ° µ ∑ √ ∞ ≤ ≥ ≠\n"
      "combining e\u0301 a\u0308 n\u0303 o\u0327\n"
      "fullwidth ＡＢＣ１２３！？\n" +
      std::string(101, 'x') + " " + std::string(100, 'y') +
      "\n"
      "invalid \xff\xfe bytes \xc3( here\n"
      "numbers 3.14159 1,000,000 2nd 42%\n";
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  ExpectParity(*tokenizer_, path, false);
  Tokenizer cased(vocabulary_, false);
  ExpectParity(cased, path, true);
}

TEST(VocabularyTest, MissingSpecialTokenNamesTheFile) {
  std::string path = Temp("vocab_nomask.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n").ok());
  auto v = Vocabulary::Load(path);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(std::string(v.status().message()),
            path +
                ": the vocabulary has no [MASK] token; use a BERT vocab.txt with [PAD], "
                "[UNK], [CLS], [SEP] and [MASK]");
  ASSERT_TRUE(WriteFileAtomically(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhi\nhi\n").ok());
  EXPECT_EQ(std::string(Vocabulary::Load(path).status().message()),
            path + ":7: token 'hi' appears twice");
  // A blank line would be the empty token and shift every later id.
  ASSERT_TRUE(WriteFileAtomically(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhi\n\nyo\n").ok());
  EXPECT_EQ(std::string(Vocabulary::Load(path).status().message()),
            path +
                ":7: a blank line, where vocab.txt has one token per line (BERT's tokenizer "
                "would give it id 6 and shift every later token's id); remove it, or write a "
                "placeholder such as [unused] in its place if the ids must stay");
  ASSERT_TRUE(WriteFileAtomically(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n \t\n").ok());
  EXPECT_EQ(Vocabulary::Load(path).status().code(), absl::StatusCode::kInvalidArgument);
  // A byte order mark would make the first token "\uFEFF[PAD]" unseen.
  ASSERT_TRUE(WriteFileAtomically(path, "\xEF\xBB\xBF[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n").ok());
  EXPECT_EQ(std::string(Vocabulary::Load(path).status().message()),
            path +
                ":1: starts with a UTF-8 byte order mark, which would become part of its "
                "first token; remove it: sed -i '1s/^\\xEF\\xBB\\xBF//' " +
                path);
  // Windows line ends are whitespace, as in BERT's tokenization.py.
  ASSERT_TRUE(
      WriteFileAtomically(path, "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhi\r\n").ok());
  ASSERT_TRUE(Vocabulary::Load(path).ok());
  EXPECT_EQ(Vocabulary::Load(path)->token(5), "hi");
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_FALSE(Vocabulary::Load(path).ok());
  EXPECT_EQ(Vocabulary::Load(Temp("none.txt")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pbert::data
