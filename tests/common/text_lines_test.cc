#include "common/text_lines.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scratch_folder.h"

namespace pbert {
namespace {

namespace fs = std::filesystem;

class TextLinesTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::ScratchFolder(); }
  void TearDown() override { fs::remove_all(root_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = root_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // Every line of `path`, and the status at the end.
  static std::pair<std::vector<std::string>, absl::Status> ReadAll(
      const std::string& path, size_t max = TextLines::kMaxLineBytes) {
    auto lines = TextLines::Open(path, "input", Readable::kStream, max);
    if (!lines.ok()) return {{}, lines.status()};
    std::vector<std::string> out;
    std::string line;
    while (lines->Next(&line)) {
      out.push_back(line);
      EXPECT_EQ(lines->line_number(), out.size());
    }
    return {out, lines->status()};
  }
  fs::path root_;
};

using Lines = std::vector<std::string>;

TEST_F(TextLinesTest, SplitsAtNewlinesLikeGetline) {
  auto [lines, status] = ReadAll(Write("a.txt", "one\n\ntwo\r\nlast"));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(lines, (Lines{"one", "", "two\r", "last"}));
  std::tie(lines, status) = ReadAll(Write("b.txt", "x\n"));
  EXPECT_EQ(lines, (Lines{"x"}));
  std::tie(lines, status) = ReadAll(Write("empty.txt", ""));
  EXPECT_TRUE(status.ok());
  EXPECT_TRUE(lines.empty());
}

TEST_F(TextLinesTest, LinesAcrossBlocksComeWhole) {
  // Lines of 3 MiB, 1 byte and 700 KiB: they straddle the 1 MiB reads.
  const std::string a(3 << 20, 'a'), b = "b", c(700 << 10, 'c');
  auto [lines, status] = ReadAll(Write("big.txt", a + "\n" + b + "\n" + c + "\n"));
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], a);
  EXPECT_EQ(lines[1], b);
  EXPECT_EQ(lines[2], c);
}

TEST_F(TextLinesTest, ANulByteNamesItsLine) {
  // The NUL is on line 4, in the second block of the file.
  const std::string first((1 << 20) + 10, 'x');
  const std::string path = Write("bin.txt", first + "\nok\nok\nab" + std::string(1, '\0') + "\n");
  auto [lines, status] = ReadAll(path);
  EXPECT_EQ(status.message(), path + ":4: a NUL byte; this looks like a binary file, not text");
  EXPECT_TRUE(lines.empty())
      << "the first line ends in the block that holds the NUL, refused whole";
}

TEST_F(TextLinesTest, ALineOverTheLimitIsRefused) {
  const std::string path = Write("long.txt", "short\n" + std::string(100, 'x') + "\nafter\n");
  auto [lines, status] = ReadAll(path, 64);
  EXPECT_EQ(status.message(),
            path +
                ":2: a line longer than 64 bytes; expected text with one sentence, paragraph "
                "or entry per line");
  EXPECT_EQ(lines, (Lines{"short"}));
  std::tie(lines, status) = ReadAll(path, 100);  // exactly at the limit
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(lines.size(), 3u);
}

TEST_F(TextLinesTest, EndlessZerosEndAtTheFirstBlock) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero here";
  auto [lines, status] = ReadAll("/dev/zero");
  EXPECT_EQ(status.message(), "/dev/zero:1: a NUL byte; this looks like a binary file, not text");
}

TEST_F(TextLinesTest, APipeIsReadOnceFromItsStart) {
  // A named pipe as bash's <(...) gives: a writer that goes once.
  const std::string path = root_ / "fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(path) << "first\nsecond\n"; });
  auto [lines, status] = ReadAll(path);
  writer.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(lines, (Lines{"first", "second"}));
}

// Where a file is expected (a metrics file, a vocabulary), a named pipe is
// refused at once by its type: opening it would wait for a writer.
TEST_F(TextLinesTest, APipeWhereAFileBelongsIsRefusedWithoutWaiting) {
  const std::string path = root_ / "fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(TextLines::Open(path, "metrics file").status().message(),
            "metrics file " + path + " is a named pipe (FIFO); give a file");
  EXPECT_EQ(TextLines::Open("/dev/null", "vocabulary").status().message(),
            "vocabulary /dev/null is a character device; give a file");
}

TEST_F(TextLinesTest, APipeIsReadOnceWrittenAndRefusedIfNothingComes) {
  const std::string path = root_ / "fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // Nobody writes: an error once the wait is over, not a reader held forever.
  EXPECT_EQ(TextLines::Open(path, "input", Readable::kStream, TextLines::kMaxLineBytes, 200)
                .status()
                .message(),
            "input " + path +
                " is a pipe that nothing was written to within 0.2 s; start its "
                "writer first, or give a file");
  // A writer that comes after the reader opened, and writes a little later.
  std::thread writer([&] {
    std::ofstream out(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    out << "one\ntwo\n";
  });
  auto lines = TextLines::Open(path, "input", Readable::kStream, TextLines::kMaxLineBytes, 10000);
  ASSERT_TRUE(lines.ok()) << lines.status();
  std::string line;
  ASSERT_TRUE(lines->Next(&line));
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(lines->Next(&line));
  EXPECT_EQ(line, "two");
  EXPECT_FALSE(lines->Next(&line));
  EXPECT_TRUE(lines->status().ok()) << lines->status();
  writer.join();
}

TEST_F(TextLinesTest, AFolderOrAMissingFileIsOneLine) {
  EXPECT_EQ(TextLines::Open(root_.string(), "vocabulary").status().message(),
            "vocabulary " + root_.string() + " is a folder; give a file");
  EXPECT_EQ(
      TextLines::Open(root_ / "none.txt", "vocabulary").status().message(),
      "cannot open vocabulary " + (root_ / "none.txt").string() + ": No such file or directory");
}

}  // namespace
}  // namespace pbert
