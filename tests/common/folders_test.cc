#include "common/folders.h"

#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/scratch_folder.h"

namespace pbert {
namespace {

namespace fs = std::filesystem;

class FoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::ScratchFolder();
    fs::create_directories(root_ / "store");
    std::ofstream(root_ / "file.txt") << "x";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string At(const std::string& name) const { return (root_ / name).string(); }
  fs::path root_;
};

TEST_F(FoldersTest, InsideMeansTheFolderOrBelowItAfterResolving) {
  EXPECT_TRUE(IsInside(At("store"), At("store")));
  EXPECT_TRUE(IsInside(At("store/shard-00000.pbstore"), At("store")));
  EXPECT_TRUE(IsInside(At("other/../store/x"), At("store")));
  EXPECT_FALSE(IsInside(At("store2/x"), At("store")));  // a prefix of the name is not inside
  EXPECT_FALSE(IsInside(At("file.txt"), At("store")));
  fs::create_directory_symlink(root_ / "store", root_ / "link");
  EXPECT_TRUE(IsInside(At("link/x"), At("store")));
}

TEST_F(FoldersTest, CreateFolderNamesTheKeyAndWhatToDo) {
  EXPECT_TRUE(CreateFolder(At("a/b/c"), "run.output_dir").ok());
  EXPECT_TRUE(fs::is_directory(At("a/b/c")));
  EXPECT_EQ(CreateFolder(At("file.txt"), "run.output_dir").message(),
            "run.output_dir '" + At("file.txt") + "' is a file; name a folder");
  EXPECT_EQ(CreateFolder(At("file.txt/run"), "run.output_dir").message(),
            "cannot create run.output_dir '" + At("file.txt/run") +
                "': Not a directory; choose a folder you can write");
  EXPECT_EQ(CreateFolder("", "run.output_dir").message(), "run.output_dir is empty; name a folder");
}

TEST_F(FoldersTest, CheckWritableFailsBeforeTheWorkNamingWhatToDo) {
  EXPECT_TRUE(CheckWritable(At("out.hdf5"), "output", Writes::kFile).ok());
  EXPECT_TRUE(CheckWritable(At("a/b/store"), "the store", Writes::kFolder).ok());
  EXPECT_TRUE(CheckWritable(At("store/"), "the store", Writes::kFolder).ok());
  EXPECT_FALSE(fs::exists(At("a"))) << "a check makes nothing";
  EXPECT_EQ(CheckWritable(At("a/out.hdf5"), "output", Writes::kFile).message(),
            "cannot write output " + At("a/out.hdf5") + ": its folder " + At("a") +
                " does not exist; create it or choose another");
  EXPECT_EQ(CheckWritable(At("file.txt/b/store"), "the store", Writes::kFolder).message(),
            "cannot write the store " + At("file.txt/b/store") + ": " + At("file.txt") +
                " is a file, not a folder; choose another");
  EXPECT_EQ(CheckWritable(At("out/"), "output", Writes::kFile).message(),
            "output " + At("out/") + " names a folder; name the file to write");
  // The temporary beside it needs 11 more bytes of the name's limit (255 on
  // most file systems).
  const long name_max = ::pathconf(root_.c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 11);
  const std::string fits(name_max - 11, 'n'), too_long(name_max - 10, 'n');
  EXPECT_TRUE(CheckWritable(At(fits), "output", Writes::kFile).ok());
  EXPECT_EQ(CheckWritable(At(too_long), "output", Writes::kFile).message(),
            "cannot write output " + At(too_long) + ": its name has " +
                std::to_string(name_max - 10) + " bytes; names in " + root_.string() +
                " hold at most " + std::to_string(name_max) +
                ", and 11 go to the temporary written beside it: choose a shorter name");
  // A path over the system's limit (PATH_MAX, with the temporary's bytes).
  std::string deep = At("");
  while (deep.size() < PATH_MAX) deep += "/dddddddddd";
  const absl::Status long_path = CheckWritable(deep, "--out", Writes::kFile);
  EXPECT_EQ(long_path.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_path.message().find("bytes; paths hold at most " + std::to_string(PATH_MAX - 1)),
            std::string::npos)
      << long_path;
  EXPECT_EQ(WithoutTrailingSlash("a/b//"), "a/b");
  EXPECT_EQ(WithoutTrailingSlash("/"), "/");
}

// What CreateFolder would refuse, found before anything is made.
TEST_F(FoldersTest, CheckFolderTargetMakesNothing) {
  EXPECT_TRUE(CheckFolderTarget(At("store"), "run.output_dir").ok());
  EXPECT_TRUE(CheckFolderTarget(At("a/b"), "run.output_dir").ok());
  EXPECT_FALSE(fs::exists(At("a")));
  EXPECT_EQ(CheckFolderTarget(At("file.txt"), "run.output_dir").message(),
            "run.output_dir '" + At("file.txt") + "' is a file; name a folder");
  EXPECT_EQ(CheckFolderTarget(At("file.txt/run"), "run.output_dir").message(),
            "cannot write run.output_dir " + At("file.txt/run") + ": " + At("file.txt") +
                " is a file, not a folder; choose another");
  if (::geteuid() != 0) {  // root writes anywhere
    fs::permissions(At("store"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_EQ(CheckFolderTarget(At("store"), "run.output_dir").message(),
              "cannot write run.output_dir '" + At("store") +
                  "': Permission denied; choose a folder you can write");
    fs::permissions(At("store"), fs::perms::owner_all);
  }
}

TEST_F(FoldersTest, CreatedFoldersGoAgainWhileEmptyUnlessKept) {
  {
    CreatedFolders created(At("x/y/z"));
    ASSERT_TRUE(CreateFolder(At("x/y/z"), "dir").ok());
  }
  EXPECT_FALSE(fs::exists(At("x"))) << "all three were made here and are empty";
  {
    CreatedFolders created(At("x/y/z"));
    ASSERT_TRUE(CreateFolder(At("x/y/z"), "dir").ok());
    std::ofstream(At("x/y/kept.txt")) << "x";
  }
  EXPECT_FALSE(fs::exists(At("x/y/z")));
  EXPECT_TRUE(fs::exists(At("x/y/kept.txt"))) << "a folder with a file stays, and its parents";
  {
    CreatedFolders created(At("store/new"));  // store existed before
    ASSERT_TRUE(CreateFolder(At("store/new"), "dir").ok());
    created.Keep();
  }
  EXPECT_TRUE(fs::is_directory(At("store/new")));
  {
    CreatedFolders created(At("store/gone"));
    ASSERT_TRUE(CreateFolder(At("store/gone"), "dir").ok());
  }
  EXPECT_FALSE(fs::exists(At("store/gone")));
  EXPECT_TRUE(fs::is_directory(At("store"))) << "what existed before is never removed";
}

}  // namespace
}  // namespace pbert
