#include "common/atomic_file.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/scratch_folder.h"

namespace pbert {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::ScratchFolder(); }
  void TearDown() override { fs::remove_all(dir_); }
  size_t FilesIn() const {
    return std::distance(fs::directory_iterator(dir_), fs::directory_iterator{});
  }
  fs::path dir_;
};

TEST_F(AtomicFileTest, CommitReplacesTheFileWhole) {
  std::string path = dir_ / "out.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());
  auto writer = AtomicFileWriter::Create(path);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->Write("new ").ok());
  ASSERT_TRUE(writer->Write("contents").ok());
  // Until the commit, readers still see the old file.
  EXPECT_EQ(*ReadFile(path), "old contents");
  EXPECT_EQ(writer->size(), 12u);
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(*ReadFile(path), "new contents");
  EXPECT_EQ(FilesIn(), 1u);
}

TEST_F(AtomicFileTest, AbandonedWriteLeavesNothing) {
  std::string path = dir_ / "out.txt";
  {
    auto writer = AtomicFileWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->Write("partial").ok());
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(FilesIn(), 0u);
}

TEST_F(AtomicFileTest, OfTwoWritersRefusingToReplaceExactlyOneCommits) {
  // Both start before either commits, as two commands racing to one path.
  const std::string path = dir_ / "out.txt";
  const std::string folder = dir_ / "folder";
  {
    auto first = AtomicFileWriter::Create(path);
    auto second = AtomicFileWriter::Create(path);
    ASSERT_TRUE(first.ok() && second.ok());
    ASSERT_TRUE(first->Write("first").ok());
    ASSERT_TRUE(second->Write("second").ok());
    EXPECT_TRUE(first->Commit(Existing::kRefuse).ok());
    const absl::Status late = second->Commit(Existing::kRefuse);
    EXPECT_EQ(late.code(), absl::StatusCode::kAlreadyExists);
    EXPECT_EQ(late.message(), path +
                                  " exists (made meanwhile by another command?); remove it "
                                  "or choose another path");
    // Folders alike.
    auto a = AtomicFolderWriter::Create(folder);
    auto b = AtomicFolderWriter::Create(folder);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a->Commit(Existing::kRefuse).ok());
    EXPECT_EQ(b->Commit(Existing::kRefuse).code(), absl::StatusCode::kAlreadyExists);
  }
  EXPECT_EQ(*ReadFile(path), "first");
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_EQ(FilesIn(), 2u) << "a refused writer left its temporary";
}

TEST_F(AtomicFileTest, StaleTemporariesOfKilledWritersGoLiveOnesStay) {
  const std::string path = dir_ / "out.txt";
  // A writer that dies without cleaning up, as under kill -9.
  pid_t child = ::fork();
  if (child == 0) {
    auto writer = AtomicFileWriter::Create(path);
    if (writer.ok()) (void)writer->Write("half of it");
    ::_exit(0);  // no destructors
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(FilesIn(), 1u) << "the killed writer's temporary";
  {
    auto live = AtomicFileWriter::Create(path);  // a writer still at work
    ASSERT_TRUE(live.ok());
    ASSERT_TRUE(WriteFileAtomically(path, "done").ok());
    EXPECT_EQ(*ReadFile(path), "done");
    EXPECT_TRUE(fs::exists(live->temp_path())) << "a running writer's temporary stays";
    EXPECT_EQ(FilesIn(), 2u) << "the stale temporary went";
  }
  EXPECT_EQ(FilesIn(), 1u);
  // Files of other names that merely look alike are not touched.
  ASSERT_TRUE(WriteFileAtomically((dir_ / "out.txt.tmp.my-notes").string(), "mine").ok());
  ASSERT_TRUE(WriteFileAtomically((dir_ / "other.txt").string(), "other").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "again").ok());
  EXPECT_EQ(FilesIn(), 3u);
}

TEST_F(AtomicFileTest, ReadFileRefusesWhatIsNotAFileWithoutWaiting) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // nobody will ever write to it
  EXPECT_EQ(ReadFile(fifo).status().message(), fifo + " is a named pipe (FIFO); give a file");
  EXPECT_EQ(ReadFile("/dev/zero").status().message(),
            "/dev/zero is a character device; give a file");
  EXPECT_EQ(ReadFile(dir_.string()).status().message(),
            dir_.string() + " is a folder; give a file");
  ASSERT_TRUE(WriteFileAtomically((dir_ / "f").string(), std::string(100000, 'x')).ok());
  EXPECT_EQ(*ReadFile((dir_ / "f").string()), std::string(100000, 'x'));
}

TEST_F(AtomicFileTest, MissingDirectoryIsAClearError) {
  auto writer = AtomicFileWriter::Create((dir_ / "no_such_dir" / "out.txt").string());
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("no_such_dir"), std::string::npos);
}

// mkdtemp makes folders private (0700); ours get the permissions of any
// folder the process makes, so a run folder shared with a group keeps its
// checkpoints shared.
TEST_F(AtomicFileTest, TemporaryFoldersHaveTheUsualPermissions) {
  const mode_t old = ::umask(027);
  auto made = CreateTemporaryFolder((dir_ / "step-1.tmp-").string());
  ::umask(old);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->rfind((dir_ / "step-1.tmp-").string(), 0), 0u);
  struct stat st;
  ASSERT_EQ(::stat(made->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(AtomicFileTest, CommitTwiceFails) {
  auto writer = AtomicFileWriter::Create((dir_ / "x").string());
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_FALSE(writer->Commit().ok());
}

}  // namespace
}  // namespace pbert
