#include "common/config.h"

#include <chrono>
#include <filesystem>

#include "absl/strings/match.h"
#include "common/atomic_file.h"
#include "gtest/gtest.h"

namespace pbert::config {
namespace {

struct TrainSection {
  int64_t steps = 100;
  double lr = 1e-3;
  bool shuffle = true;
  std::string optimizer = "lamb";
  std::vector<std::string> inputs;

  template <class V>
  void Visit(V& v) {
    v.Field("steps", &steps, "optimizer steps", AtLeast<int64_t>(1));
    v.Field("lr", &lr, "peak learning rate", InRange(0.0, 1.0));
    v.Field("shuffle", &shuffle, "shuffle each epoch");
    v.Field("optimizer", &optimizer, "lamb or adam", OneOf({"lamb", "adam"}));
    v.Field("inputs", &inputs, "input files");
  }
  absl::Status Validate() const {
    if (optimizer == "adam" && lr > 0.1) return absl::InvalidArgumentError("adam needs lr <= 0.1");
    return absl::OkStatus();
  }
};

enum class Color { kRed, kGreen, kBlue };
inline constexpr Choice<Color> kColors[] = {
    {"red", Color::kRed}, {"green", Color::kGreen}, {"blue", Color::kBlue}};
constexpr ChoiceList<Color> ChoicesOf(Color) { return kColors; }

// Fields another struct lends a section (as LAMB's options lend optim's).
struct Shade {
  double alpha = 0.5;
  template <class V>
  void Visit(V& v) {
    v.Field("alpha", &alpha, "opacity", InRange(0.0, 1.0));
  }
};

struct RunSection {
  int64_t threads = 0;
  Color color = Color::kGreen;
  Shade shade;
  std::string output = "out";
  template <class V>
  void Visit(V& v) {
    v.Field("threads", &threads, "threads", AtLeast<int64_t>(0));
    v.Field("output", &output, "a folder");
    v.Field("color", &color, "the color");
    v.Include(&shade);
  }
};

struct TestConfig {
  RunSection run;
  TrainSection train;
  template <class V>
  void Visit(V& v) {
    v.Section("run", &run, "run");
    v.Section("train", &train, "training");
  }
};

class ConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = std::filesystem::temp_directory_path() /
                       (std::string("pbert_cfg_") +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
    EXPECT_TRUE(WriteFileAtomically(path, text).ok());
    return path;
  }
  absl::Status LoadText(const std::string& text, std::vector<std::string> sets = {}) {
    path_ = Write(text);
    config_ = TestConfig();
    return Load(path_, SetFlags(sets), &config_);
  }
  TestConfig config_;
  std::string path_;
};

TEST_F(ConfigTest, DefaultsWithoutAFile) {
  ASSERT_TRUE(Load("", {}, &config_).ok());
  EXPECT_EQ(config_.train.steps, 100);
  EXPECT_EQ(config_.train.optimizer, "lamb");
}

TEST_F(ConfigTest, FileValuesReplaceDefaults) {
  ASSERT_TRUE(LoadText("train:\n  steps: 7\n  lr: 0.5\n  inputs: [a.txt, b.txt]\n").ok());
  EXPECT_EQ(config_.train.steps, 7);
  EXPECT_DOUBLE_EQ(config_.train.lr, 0.5);
  EXPECT_EQ(config_.train.inputs, (std::vector<std::string>{"a.txt", "b.txt"}));
  EXPECT_TRUE(config_.train.shuffle);
}

TEST_F(ConfigTest, SetOverridesTheFile) {
  ASSERT_TRUE(LoadText("train:\n  steps: 7\n", {"train.steps=9", "run.threads=2"}).ok());
  EXPECT_EQ(config_.train.steps, 9);
  EXPECT_EQ(config_.run.threads, 2);
}

TEST_F(ConfigTest, UnknownKeyNamesPathFileLineAndSuggestion) {
  absl::Status s = LoadText("run:\n  threads: 1\ntrain:\n  step: 5\n");
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()),
            path_ + ":4:3: train.step: unknown key; did you mean 'steps'?");
}

TEST_F(ConfigTest, UnknownSectionListsKnownOnes) {
  absl::Status s = LoadText("model:\n  layers: 2\n");
  EXPECT_EQ(std::string(s.message()),
            path_ + ":1:1: model: unknown key; known keys here: run, train");
}

TEST_F(ConfigTest, WrongTypeNamesKeyAndLine) {
  absl::Status s = LoadText("train:\n  steps: 7\n  lr: fast\n");
  EXPECT_EQ(std::string(s.message()), path_ + ":3:7: train.lr: expected a number, got 'fast'");
  s = LoadText("train:\n  steps: 2.5\n");
  EXPECT_EQ(std::string(s.message()), path_ + ":2:10: train.steps: expected an integer, got '2.5'");
  s = LoadText("train:\n  inputs: a.txt\n");
  EXPECT_EQ(std::string(s.message()),
            path_ + ":2:11: train.inputs: expected a list of scalars, got 'a.txt'");
  s = LoadText("train: 3\n");
  EXPECT_EQ(std::string(s.message()), path_ + ":1:8: train: must be a map of keys (a section)");
}

TEST_F(ConfigTest, ChecksRejectOutOfRangeValues) {
  absl::Status s = LoadText("train:\n  steps: 0\n");
  EXPECT_EQ(std::string(s.message()), path_ + ":2:10: train.steps: must be >= 1");
  s = LoadText("train:\n  optimizer: sgd\n");
  EXPECT_EQ(std::string(s.message()),
            path_ + ":2:14: train.optimizer: 'sgd' is not one of: lamb or adam");
}

// A section's own check names the flags that set the keys it mentions,
// not whichever flag of the section comes first; without such a flag,
// where the section is.
TEST_F(ConfigTest, SectionCheckNamesTheFlagsOfTheKeysItMentions) {
  absl::Status s = LoadText("train:\n  optimizer: adam\n", {"train.inputs=[a]", "train.lr=0.5"});
  EXPECT_EQ(std::string(s.message()), "--set train.lr=0.5: train: adam needs lr <= 0.1");
  s = LoadText("train:\n  optimizer: adam\n  lr: 0.5\n", {"train.steps=3"});
  EXPECT_EQ(std::string(s.message()), path_ + ":2:3: train: adam needs lr <= 0.1");
  s = LoadText("train:\n  steps: 3\n", {"train.optimizer=adam", "train.lr=0.5"});
  EXPECT_EQ(std::string(s.message()), "--set train.lr=0.5: train: adam needs lr <= 0.1");
}

TEST_F(ConfigTest, SectionValidateRunsAfterFields) {
  absl::Status s = LoadText("train:\n  optimizer: adam\n  lr: 0.5\n");
  EXPECT_EQ(std::string(s.message()), path_ + ":2:3: train: adam needs lr <= 0.1");
}

TEST_F(ConfigTest, EmptyOverrideClearsAString) {
  ASSERT_TRUE(LoadText("train:\n  optimizer: adam\n", {"train.optimizer="}).code() ==
              absl::StatusCode::kInvalidArgument);  // "" is not lamb or adam
  ASSERT_TRUE(LoadText("train:\n  inputs: [a]\n", {"train.inputs=[]"}).ok());
  EXPECT_TRUE(config_.train.inputs.empty());
}

// A path or name on the command line is the text typed, not YAML: "#"
// starts no comment, "*" no alias, quotes and newlines stay; and it reads
// back the same from a dumped config (as a resume reads config.yaml).
TEST_F(ConfigTest, StringOverridesAreTakenAsTyped) {
  for (const std::string typed :
       {"st #1", "*st", "&anchor st", "a: b", "it's \"quoted\"", "two\nlines", "na\u00efve/\u00fc",
        "[draft]", "{x}", "~", "null", "yes", " padded ", "- item", "%TAG", "@at", "`tick`"}) {
    ASSERT_TRUE(LoadText("run:\n  threads: 1\n", {"run.output=" + typed}).ok()) << typed;
    EXPECT_EQ(config_.run.output, typed);
    const std::string dumped = Dump(config_);
    ASSERT_TRUE(LoadText(dumped).ok()) << dumped;
    EXPECT_EQ(config_.run.output, typed) << dumped;
  }
  // Other fields still read YAML, and text that is none is named as such.
  ASSERT_TRUE(LoadText("", {"train.inputs=[a.txt, 'b #2.txt']"}).ok());
  EXPECT_EQ(config_.train.inputs, (std::vector<std::string>{"a.txt", "b #2.txt"}));
  const absl::Status bad = LoadText("", {"run.threads=*x"});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("expected an integer, got '*x'"), std::string::npos) << bad;
  // A check on a string field sees the whole text.
  EXPECT_FALSE(LoadText("", {"train.optimizer=lamb #fast"}).ok());
}

TEST_F(ConfigTest, BadOverrideNamesTheFlag) {
  EXPECT_EQ(std::string(LoadText("", {"train.steps=many"}).message()),
            "--set train.steps=many: train.steps: expected an integer, got 'many'");
  EXPECT_EQ(std::string(LoadText("", {"train.stepz=3"}).message()),
            "--set train.stepz=3: train.stepz: unknown key; did you mean 'steps'?");
  EXPECT_EQ(std::string(LoadText("", {"steps"}).message()),
            "--set steps: expected section.key=value, e.g. --set run.threads=2");
  EXPECT_EQ(std::string(LoadText("train:\n  steps: 3\n", {"train.steps.x=1"}).message()),
            "--set train.steps.x=1: 'train.steps' is a value, not a section");
}

TEST_F(ConfigTest, MissingFileAndSyntaxErrors) {
  absl::Status s = Load("/nonexistent/x.yaml", {}, &config_);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/x.yaml"), std::string::npos);
  s = LoadText("train:\n  steps: [1, 2\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind(path_ + ":", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("YAML syntax: a '[' list that no ']' closes (yaml-cpp: end of "
                             "sequence flow not found)"),
            std::string::npos)
      << s.message();
  s = LoadText("train:\n  optimizer: \"lamb\\q\"\n");
  EXPECT_NE(s.message().find("YAML syntax: a backslash in a double-quoted value that starts no "
                             "escape (use single quotes, or '\\\\') (yaml-cpp: unknown escape "
                             "character: q)"),
            std::string::npos)
      << s.message();
}

TEST_F(ConfigTest, NullValueIsAnError) {
  absl::Status s = LoadText("train:\n  steps:\n");
  EXPECT_EQ(
      std::string(s.message()),
      path_ + ":2:3: train.steps: has no value; give one or delete the key to use the default");
}

TEST_F(ConfigTest, DumpLoadsBackToTheSameConfig) {
  ASSERT_TRUE(LoadText("train:\n  steps: 42\n  lr: 0.25\n  inputs: [x]\n  shuffle: false\n").ok());
  std::string dumped = Dump(config_);
  TestConfig reloaded;
  std::string path = Write(dumped);
  ASSERT_TRUE(Load(path, {}, &reloaded).ok()) << dumped;
  EXPECT_EQ(Dump(reloaded), dumped);
  EXPECT_EQ(reloaded.train.steps, 42);
  EXPECT_FALSE(reloaded.train.shuffle);
  EXPECT_NE(dumped.find("# optimizer steps"), std::string::npos);
}

// A config packed-bert wrote and something cut short (at a line's end or
// inside one) is refused, not read with defaults for the keys it lost; the
// same text whole, or without its first line, is read.
TEST_F(ConfigTest, CutWrittenConfigsAreRefused) {
  ASSERT_TRUE(LoadText("train:\n  steps: 42\n  inputs: [x]\n").ok());
  const std::string dumped = Dump(config_);
  ASSERT_EQ(dumped.rfind(std::string(kDumpFirstLine) + "\n", 0), 0u) << dumped;
  const size_t last = dumped.rfind(kDumpLastLine);
  ASSERT_NE(last, std::string::npos);
  int refused = 0;
  for (size_t cut = dumped.find('\n') + 1; cut < dumped.size() - 1; cut += 7) {
    const absl::Status s = LoadText(dumped.substr(0, cut));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_NE(s.message().find(path_ + ": cut short"), std::string::npos) << s;
    ++refused;
  }
  EXPECT_GT(refused, 5);
  ASSERT_TRUE(LoadText(dumped).ok());
  EXPECT_EQ(config_.train.steps, 42);
  // What a user kept of a cut file, its first line deleted, is theirs.
  const std::string kept = dumped.substr(dumped.find('\n') + 1, last - dumped.find('\n') - 1);
  ASSERT_TRUE(LoadText(kept.substr(0, kept.find("inputs"))).ok());
  EXPECT_EQ(config_.train.steps, 42);
}

TEST_F(ConfigTest, EnumFieldsReadTheirChoicesAndSuggestOne) {
  ASSERT_TRUE(LoadText("run:\n  color: blue\n  alpha: 0.25\n").ok());
  EXPECT_EQ(config_.run.color, Color::kBlue);
  EXPECT_EQ(config_.run.shade.alpha, 0.25);
  absl::Status s = LoadText("run:\n  color: bleu\n");
  EXPECT_EQ(std::string(s.message()),
            path_ + ":2:10: run.color: 'bleu' is not one of: red, green or blue; did you mean "
                    "'blue'?");
  s = LoadText("run:\n  color: [red]\n");
  EXPECT_EQ(std::string(s.message()),
            path_ + ":2:10: run.color: expected one of: red, green or blue, got a list");
  ASSERT_TRUE(LoadText("").ok());
  const std::string dumped = Dump(config_);
  EXPECT_NE(dumped.find("color: green  # red, green or blue: the color"), std::string::npos)
      << dumped;
  EXPECT_NE(dumped.find("alpha: 0.5  # opacity"), std::string::npos) << dumped;
}

TEST_F(ConfigTest, NumbersMustBeFiniteAndDumpShortestExact) {
  absl::Status s = LoadText("train:\n  lr: .inf\n");
  EXPECT_EQ(std::string(s.message()), path_ + ":2:7: train.lr: expected a finite number, got '.inf'");
  EXPECT_EQ(std::string(LoadText("", {"train.lr=.nan"}).message()),
            "--set train.lr=.nan: train.lr: expected a finite number, got '.nan'");
  for (double v : {0.1, 4e-4, 1e-6, 0.999, 1.0 / 3.0, 123456789.125, 5e-324}) {
    EXPECT_EQ(std::strtod(ShortestText(v).c_str(), nullptr), v) << ShortestText(v);
  }
  EXPECT_EQ(ShortestText(0.1), "0.1");
}

// A number written non-zero that a double cannot hold in full (it would
// read as 0 or as a subnormal) is refused; so is a value below a strict
// bound.
TEST_F(ConfigTest, NumbersThatUnderflowAreRefused) {
  const std::string full = "expected a number a double holds in full (at least 2.2e-308 in size)";
  EXPECT_EQ(std::string(LoadText("", {"train.lr=1e-400"}).message()),
            "--set train.lr=1e-400: train.lr: " + full + ", got '1e-400'");
  absl::Status s = LoadText("train:\n  lr: 3e-320\n");
  EXPECT_EQ(std::string(s.message()), path_ + ":2:7: train.lr: " + full + ", got '3e-320'");
  EXPECT_TRUE(LoadText("train:\n  lr: 0e5\n").ok()) << "a zero written as such is zero";
  EXPECT_EQ(Above(0.0)(0.0), "must be > 0");
  EXPECT_EQ(Above(0.0)(1e-300), "");
}

// A tab in the indentation and a second document are named with their line;
// YAML says neither in so many words (the second it drops silently).
TEST_F(ConfigTest, TabsAndSecondDocumentsAreNamed) {
  absl::Status s = LoadText("train:\n\tsteps: 3\n");
  EXPECT_EQ(std::string(s.message()),
            path_ + ":2:1: a tab indents this line; YAML indents with spaces only");
  s = LoadText("train:\n  steps: 3\n---\ntrain:\n  steps: 4\n");
  EXPECT_EQ(std::string(s.message()),
            path_ +
                ":4: a second YAML document (after '---'); a config file holds one: merge "
                "them, or give the other to its own command");
  ASSERT_TRUE(LoadText("# a comment\n\t# indented by a tab\ntrain:\n  steps: 5 # x\t\n---\n").ok());
  EXPECT_EQ(config_.train.steps, 5);
}

// YAML's merge key adds the keys a map does not set itself, first map first.
TEST_F(ConfigTest, MergeKeysAddWhatTheMapDoesNotSet) {
  ASSERT_TRUE(LoadText("train:\n  <<: {steps: 7, lr: 0.5}\n  lr: 0.25\n").ok());
  EXPECT_EQ(config_.train.steps, 7);
  EXPECT_DOUBLE_EQ(config_.train.lr, 0.25);
  ASSERT_TRUE(LoadText("run: {threads: &n 3}\ntrain:\n  <<: [{steps: *n}, {steps: 9, shuffle: "
                       "false}]\n")
                  .ok());
  EXPECT_EQ(config_.train.steps, 3);
  EXPECT_FALSE(config_.train.shuffle);
  // What a merge adds is checked as if written out.
  EXPECT_EQ(std::string(LoadText("train:\n  <<: {step: 7}\n").message()),
            path_ + ":2:8: train.step: unknown key; did you mean 'steps'?");
  EXPECT_EQ(std::string(LoadText("train:\n  <<: 5\n").message()),
            path_ + ":2:7: '<<' merges maps (<<: *name or <<: [*a, *b]); this is not one");
}

// A few hundred bytes of nested aliases stand for billions of values: the
// file is refused at once instead of being walked for minutes.
TEST_F(ConfigTest, AnAliasBombIsRefusedAtOnce) {
  std::string text = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    const char prev = static_cast<char>(c - 1);
    text += absl::StrCat(std::string(1, c), ": &", std::string(1, c), " [");
    for (int i = 0; i < 9; ++i) text += absl::StrCat(i ? ", " : "", "*", std::string(1, prev));
    text += "]\n";
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = LoadText(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("aliases"), std::string::npos) << s.message();
  EXPECT_LT(seconds, 5.0);  // 9^10 values: hours if walked
}

// Structure no config has, refused in one line naming the file and the
// limit before anything recurses over it: an alias inside the value it
// names (a sequence or a map: a value without end, which overflowed the
// stack of the duplicate-key check), nesting past 64 levels, in the file
// or in a --set value.
TEST_F(ConfigTest, AliasCyclesAndDeepNestingAreRefusedInOneLine) {
  for (const char* text : {"cyc: &c [*c]\n", "train: &m {inputs: *m}\n",
                           "train:\n  inputs: &l [a, [b, *l]]\n"}) {
    absl::Status s = LoadText(text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(s.message().rfind(path_ + ":", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("an alias (*name) inside the value it names"), std::string::npos)
        << s.message();
  }
  const std::string deep = "train:\n  inputs: " + std::string(200, '[') + std::string(200, ']') + "\n";
  absl::Status s = LoadText(deep);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("nested over 64 levels deep"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  s = LoadText("train: {steps: 3}\n", {"train.inputs=&l [*l]"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("--set train.inputs=&l [*l]:", 0), 0u) << s.message();
  // Nesting a config may have is read as before.
  ASSERT_TRUE(LoadText("train:\n  inputs: &i [a.txt]\nrun: {threads: 2}\n").ok());
}

// A config is bounded in bytes before YAML reads it, since YAML's parser
// takes time and memory far beyond the size of a long flow list (6.5 MB:
// 25 s and 3.7 GB before its values could be counted): 256 KiB of comment
// lines load (the tab check looks at each line's indentation only; it once
// scanned the rest of the file from every line), a file or a --set value
// over that is refused unread, naming the limit.
TEST_F(ConfigTest, AConfigIsBoundedInBytesBeforeItIsRead) {
  std::string text = "train:\n  steps: 7\n";
  while (text.size() + 17 <= (256 << 10)) text += "# a comment line\n";
  ASSERT_TRUE(LoadText(text).ok());
  EXPECT_EQ(config_.train.steps, 7);
  std::string list = "[0";
  while (list.size() < (300 << 10)) list += ",0";
  list += "]";
  absl::Status s = LoadText("train: {inputs: " + list + "}\n");
  EXPECT_NE(s.message().find(" bytes, over the 262144 a config may have"), std::string::npos) << s;
  s = LoadText("train: {steps: 3}\n", {"train.inputs=" + list});
  EXPECT_EQ(s.message(), absl::StrCat("--set train.inputs=...: a value of ", list.size(),
                                      " bytes, over the 262144 a whole config may have"));
}

TEST(ConfigFileTest, ADuplicateKeyOrSectionNamesBothLines) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "pbert_config_duplicate.yaml").string();
  ASSERT_TRUE(WriteFileAtomically(path, "train:\n  steps: 5\n  lr: 0.1\n  steps: 6\n").ok());
  TestConfig config;
  EXPECT_EQ(std::string(Load(path, {}, &config).message()),
            path + ":4:3: train.steps: given twice (first at line 2); keep one");
  ASSERT_TRUE(WriteFileAtomically(path, "run:\n  threads: 1\ntrain:\n  lr: 0.1\nrun:\n  threads: 2\n").ok());
  EXPECT_EQ(std::string(Load(path, {}, &config).message()),
            path + ":5:1: run: given twice (first at line 1); keep one");
  // A complex key (a list or a map as a key): one line, exit 2's status.
  ASSERT_TRUE(WriteFileAtomically(path, "train:\n  ? [a, b]\n  : 1\n").ok());
  absl::Status complex = Load(path, {}, &config);
  EXPECT_EQ(complex.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(complex.message()),
            path + ":2:5: a key that is a list in train; a config's keys are names");
  ASSERT_TRUE(WriteFileAtomically(path, "? {x: 1}\n: 1\n").ok());
  EXPECT_EQ(std::string(Load(path, {}, &config).message()),
            path + ":1:3: a key that is a map; a config's keys are names");
  // Nesting past YAML's own guard (500 levels): said in our words, not its
  // "bad file".
  ASSERT_TRUE(
      WriteFileAtomically(path, "a: " + std::string(1000, '[') + std::string(1000, ']') + "\n")
          .ok());
  const std::string deep(Load(path, {}, &config).message());
  EXPECT_TRUE(absl::StartsWith(deep, path + ":1:")) << deep;
  EXPECT_TRUE(absl::EndsWith(deep, ": values nested deeper than YAML's reader follows; a config "
                                   "nests three"))
      << deep;
}

}  // namespace
}  // namespace pbert::config
