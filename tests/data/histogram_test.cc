#include "data/histogram.h"

#include <filesystem>

#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace pbert::data {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = std::filesystem::temp_directory_path() / name;
  EXPECT_TRUE(WriteFileAtomically(path, text).ok());
  return path;
}

TEST(HistogramTest, CountsLengthsAndBounds) {
  auto h = HistogramOf(std::vector<uint16_t>{3, 1, 3, 8}, 8);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->sequences(), 4u);
  EXPECT_EQ(h->tokens(), 15u);
  EXPECT_EQ(h->counts[3], 2u);
  EXPECT_EQ(h->LowerBoundRows(), 2u);  // ceil(15 / 8)
  EXPECT_DOUBLE_EQ(h->TheoreticalSpeedup(), 4.0 * 8 / 15);
  EXPECT_FALSE(HistogramOf(std::vector<uint16_t>{9}, 8).ok());
  EXPECT_FALSE(HistogramOf(std::vector<uint16_t>{0}, 8).ok());
}

TEST(HistogramTest, ReadsCommentsAndCounts) {
  std::string path = WriteTemp("pbert_hist_ok.txt", "# comment\n0\n5\n\n2\n");
  auto h = ReadHistogramFile(path, 4);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->counts, (std::vector<uint64_t>{0, 0, 5, 2, 0}));
}

TEST(HistogramTest, ErrorsNameFileAndLine) {
  std::string path = WriteTemp("pbert_hist_bad.txt", "# c\n1\nx\n");
  EXPECT_EQ(ReadHistogramFile(path, 8).status().message(),
            path + ":3: expected a non-negative integer count, got 'x'");
  path = WriteTemp("pbert_hist_long.txt", "1\n0\n4\n");
  EXPECT_EQ(ReadHistogramFile(path, 2).status().message(),
            path +
                ":3: 4 sequences of length 3 exceed the maximum length 2; raise --max-len "
                "(data.max_seq_len)");
  // 2^53 tokens in all is the most (exact in a double); 10^18 sequences of
  // length 2 would wrap a 64-bit count of tokens.
  path = WriteTemp("pbert_hist_huge.txt", "0\n1000000000000000000\n");
  EXPECT_EQ(ReadHistogramFile(path, 8).status().message(),
            path + ":2: the counts up to here hold more than 2^53 tokens; a histogram counts the "
                   "sequences of one dataset, far fewer");
  path = WriteTemp("pbert_hist_edge.txt", "0\n4503599627370496\n");  // 2^52 x 2 = 2^53
  EXPECT_TRUE(ReadHistogramFile(path, 8).ok());
  path = WriteTemp("pbert_hist_empty.txt", "# nothing\n");
  EXPECT_FALSE(ReadHistogramFile(path, 8).ok());
  EXPECT_EQ(ReadHistogramFile("/nonexistent/h.txt", 8).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(HistogramTest, SharedWikipediaHistogramMatchesItsPublishedSize) {
  PBERT_REQUIRE_SHARED("histogram_wikipedia_512.txt");
  auto h = ReadHistogramFile(testing::SharedData("histogram_wikipedia_512.txt"), 512);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->sequences(), 16'279'552u);
  EXPECT_NEAR(h->TheoreticalSpeedup(), 2.0013, 5e-5);  // the paper's bound
}

}  // namespace
}  // namespace pbert::data
