// The event file against an independent reader (tests/tensorboard_reader.h).
#include "train/tensorboard.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/scratch_folder.h"
#include "tests/tensorboard_reader.h"

namespace pbert::train {
namespace {

namespace fs = std::filesystem;
using pbert::testing::ReadEvents;

TEST(TensorBoardTest, TheReadersCrcIsCrc32c) {
  // RFC 3720, B.4: CRC-32C of 32 zero bytes, and the standard check value.
  EXPECT_EQ(pbert::testing::BitwiseCrc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(pbert::testing::BitwiseCrc32c("123456789"), 0xE3069283u);
}

class TensorBoardFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = pbert::testing::ScratchFolder();
    path_ = (dir_ / "events.out.tfevents.test").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(TensorBoardFileTest, ANewFileStartsWithItsVersionThenHoldsEachStepsScalars) {
  auto log = TensorBoardLog::Open(path_, 0);
  ASSERT_TRUE(log.ok()) << log.status();
  // A tag longer than 127 bytes takes a two-byte length.
  const std::string long_tag = "train/" + std::string(200, 'x');
  ASSERT_TRUE((*log)->Write(3, {{"train/loss", 2.5}, {"train/mfu", 0.4375}}, 1.7e9 + 0.25).ok());
  ASSERT_TRUE((*log)->Write(300, {{long_tag, -1e-3}, {"eval/mlm_accuracy", 0.61}}, 1.7e9 + 9).ok());
  ASSERT_TRUE((*log)->Sync().ok());
  EXPECT_EQ((*log)->bytes(), fs::file_size(path_));

  const auto events = ReadEvents(path_);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);  // stamped now
  EXPECT_TRUE(events[0].scalars.empty());
  EXPECT_EQ(events[1].step, 3);
  EXPECT_EQ(events[1].wall_time, 1.7e9 + 0.25);
  EXPECT_EQ(events[1].scalars, (std::map<std::string, float>{{"train/loss", 2.5f},
                                                              {"train/mfu", 0.4375f}}));
  EXPECT_EQ(events[2].step, 300);
  EXPECT_EQ(events[2].scalars, (std::map<std::string, float>{{long_tag, -1e-3f},
                                                              {"eval/mlm_accuracy", 0.61f}}));
}

TEST_F(TensorBoardFileTest, AResumeCutsTheFileBackToTheCheckpointsLength) {
  uint64_t at_checkpoint = 0;
  {
    auto log = TensorBoardLog::Open(path_, 0);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->Write(1, {{"train/loss", 3}}, 1).ok());
    at_checkpoint = (*log)->bytes();
    ASSERT_TRUE((*log)->Write(2, {{"train/loss", 2}}, 2).ok());  // to be redone
  }
  {
    auto log = TensorBoardLog::Open(path_, at_checkpoint);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->Write(2, {{"train/loss", 1.5}}, 3).ok());
  }
  const auto events = ReadEvents(path_);
  ASSERT_EQ(events.size(), 3u);  // the version, step 1, step 2 once
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[2].step, 2);
  EXPECT_EQ(events[2].scalars.at("train/loss"), 1.5f);

  // A file shorter than the checkpoint counted (cut or replaced since) is
  // set aside, and the log goes on from its whole records: here the last
  // record lost its last 7 bytes.
  const uint64_t whole = fs::file_size(path_);
  fs::resize_file(path_, whole - 7);
  {
    auto cut = TensorBoardLog::Open(path_, whole);
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_NE((*cut)->recovery().find("set aside as " + path_ + ".damaged;"), std::string::npos)
        << (*cut)->recovery();
    EXPECT_EQ(fs::file_size(path_ + ".damaged"), whole - 7);
    ASSERT_TRUE((*cut)->Write(3, {{"train/loss", 1}}, 4).ok());
  }
  const auto kept = ReadEvents(path_);
  ASSERT_EQ(kept.size(), 3u);  // the version, step 1, and step 3 after the cut
  EXPECT_EQ(kept[1].step, 1);
  EXPECT_EQ(kept[2].step, 3);
  // Moved away: a new file, which starts with the version event; the
  // second file set aside takes the next free name.
  fs::resize_file(path_, 5);
  {
    auto lost = TensorBoardLog::Open(path_, whole);
    ASSERT_TRUE(lost.ok()) << lost.status();
    EXPECT_TRUE(fs::exists(path_ + ".damaged-2"));
  }
  const auto fresh = ReadEvents(path_);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].file_version, "brain.Event:2");
}

}  // namespace
}  // namespace pbert::train
