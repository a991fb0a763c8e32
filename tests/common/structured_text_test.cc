#include "common/structured_text.h"

#include <string>

#include "common/status.h"
#include "gtest/gtest.h"

namespace pbert {
namespace {

// JSON nested past the limit (a million levels segfaulted every recursive
// reader) is refused by a linear scan, before the parser runs; brackets
// inside strings, escaped quotes included, are not nesting.
TEST(StructuredTextTest, JsonNestingIsCountedOutsideStrings) {
  EXPECT_EQ(JsonNesting(R"({"a": [1, {"b": [2]}]})"), 4);
  EXPECT_EQ(JsonNesting(R"({"a": "[[[[", "b": "\"[["})"), 1);
  EXPECT_EQ(JsonNesting("3"), 0);
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_EQ(JsonNesting(deep), 1'000'000);
  absl::StatusOr<nlohmann::json> parsed = ParseJson(deep, "store.json", 1 << 30);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(parsed.status().message()),
            "store.json nests values 1000000 levels deep, over the limit of 64; it is not a "
            "file packed-bert wrote");
}

TEST(StructuredTextTest, SizeAndSyntaxAreOneLineNamingTheFile) {
  absl::Status big = CheckJsonText(std::string(100, ' '), "x.json", 99);
  EXPECT_EQ(std::string(big.message()),
            "x.json is 100 bytes, over the 99 this reader takes; it is not a file packed-bert "
            "wrote");
  absl::StatusOr<nlohmann::json> bad = ParseJson("{\"a\": ", "x.json", 100);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.status().message().rfind("x.json is not valid JSON (", 0), 0u) << bad.status();
  EXPECT_EQ(bad.status().message().find('\n'), std::string::npos);
  // At the limit it parses, as ordered_json too.
  const std::string at_limit = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(ParseJson(at_limit, "x.json", 1000).ok());
  auto ordered = ParseJson<nlohmann::ordered_json>(R"({"b": 1, "a": 2})", "x.json", 100);
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(ordered->begin().key(), "b");
}

// A message names at most eight of a list, then how many more: a file of
// 300,000 unknown tensors gave an error line of 10 MB.
TEST(StructuredTextTest, NameListsInMessagesStopAfterEight) {
  std::vector<std::string> names;
  for (int i = 0; i < 300'000; ++i) names.push_back("t" + std::to_string(i));
  EXPECT_EQ(NameList(names), "t0, t1, t2, t3, t4, t5, t6, t7 and 299992 more");
  EXPECT_EQ(NameList({"a", "b"}), "a, b");
  EXPECT_EQ(NameList({}), "");
}

}  // namespace
}  // namespace pbert
