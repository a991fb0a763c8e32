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

// An integer from a file is taken only when the JSON number is one within
// the type's range: nlohmann's get<T>() would truncate 2.5 and convert
// 2.9e19 into a uint64_t with undefined behaviour.
TEST(StructuredTextTest, IntegersAreTakenOnlyWithinTheirType) {
  const auto json = nlohmann::json::parse(
      R"({"small": 7, "float12": 12.0, "negative": -3, "big": 29000000000000000000.0,
          "half": 2.5, "wide": 4294967296, "text": "7", "top": 18446744073709551615})");
  EXPECT_EQ(IntegerOf<uint32_t>(json.at("small")), 7u);
  EXPECT_EQ(IntegerOf<int>(json.at("float12")), 12);
  EXPECT_EQ(IntegerOf<int64_t>(json.at("negative")), -3);
  EXPECT_EQ(IntegerOf<uint64_t>(json.at("top")), 18446744073709551615ull);
  EXPECT_EQ(IntegerOf<int64_t>(json.at("wide")), 4294967296);
  auto refused = [&](auto read, const char* key) {
    try {
      read(json.at(key));
    } catch (const nlohmann::json::type_error& e) {
      return std::string(e.what());
    }
    return std::string("taken");
  };
  EXPECT_EQ(refused([](const auto& v) { return IntegerOf<uint64_t>(v); }, "big"),
            "[json.exception.type_error.302] expected an integer from 0 to 18446744073709551615, "
            "found 2.9e+19");
  EXPECT_NE(refused([](const auto& v) { return IntegerOf<uint64_t>(v); }, "negative"), "taken");
  EXPECT_NE(refused([](const auto& v) { return IntegerOf<int>(v); }, "half"), "taken");
  EXPECT_NE(refused([](const auto& v) { return IntegerOf<uint32_t>(v); }, "wide"), "taken");
  EXPECT_EQ(refused([](const auto& v) { return IntegerOf<int>(v); }, "text"),
            "[json.exception.type_error.302] expected an integer from -2147483648 to 2147483647, "
            "found a string");
  EXPECT_EQ(IntegersOf<int64_t>(nlohmann::json::parse("[1, 2.0, -3]")),
            (std::vector<int64_t>{1, 2, -3}));
  EXPECT_NE(refused([](const auto& v) { return IntegersOf<int64_t>(v); }, "small"), "taken");
}

}  // namespace
}  // namespace pbert
