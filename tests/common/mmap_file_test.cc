#include "common/mmap_file.h"

#include <filesystem>

#include "common/atomic_file.h"
#include "gtest/gtest.h"

namespace pbert {
namespace {

TEST(MappedFileTest, SeesTheFileBytes) {
  std::string path = std::filesystem::temp_directory_path() / "pbert_mmap_test.bin";
  ASSERT_TRUE(WriteFileAtomically(path, std::string("abc\0def", 7)).ok());
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->size(), 7u);
  EXPECT_EQ(file->bytes()[3], 0);
  EXPECT_EQ(file->bytes()[6], 'f');
  MappedFile moved = std::move(*file);
  EXPECT_EQ(moved.size(), 7u);
  EXPECT_EQ(moved.bytes()[0], 'a');
  std::filesystem::remove(path);
}

TEST(MappedFileTest, EmptyFileMapsToEmptySpan) {
  std::string path = std::filesystem::temp_directory_path() / "pbert_mmap_empty.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->size(), 0u);
  std::filesystem::remove(path);
}

TEST(MappedFileTest, MissingFileIsNotFoundAndNamed) {
  auto file = MappedFile::Open("/nonexistent/pbert.bin");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/pbert.bin"), std::string::npos);
}

TEST(MappedFileTest, DirectoryIsRejected) {
  auto file = MappedFile::Open(std::filesystem::temp_directory_path());
  ASSERT_FALSE(file.ok());
}

}  // namespace
}  // namespace pbert
