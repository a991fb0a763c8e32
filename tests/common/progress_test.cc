#include "common/progress.h"

#include "gtest/gtest.h"

namespace pbert {
namespace {

TEST(ProgressTest, FormatsBarRateAndEta) {
  EXPECT_EQ(FormatProgress("pack", 5'000'000, 10'000'000, "seq", 2.0, 10),
            "pack  [#####-----]   50.0%  5.0M/10.0M seq  2.5M seq/s  ETA 2s");
}

TEST(ProgressTest, FinishedWorkShowsTotalTime) {
  EXPECT_EQ(FormatProgress("prepare", 120, 120, "docs", 75.0, 0),
            "prepare  100.0%  120/120 docs  1.6 docs/s  in 1m15s");
}

TEST(ProgressTest, UnknownTotalShowsCountAndRate) {
  EXPECT_EQ(FormatProgress("read", 1500, 0, "lines", 0.4, 20),
            "read  1.5k lines  3.8k lines/s  in 0s");
}

TEST(ProgressTest, RateCountsOnlyWorkAfterTheStart) {
  // A resumed run at step 500 of 1000 that did 50 steps in 20 s.
  EXPECT_EQ(FormatProgress("train", 550, 1000, "steps", 20.0, 0, 500),
            "train   55.0%  550/1.0k steps  2.5 steps/s  ETA 3m00s");
}

TEST(ProgressTest, CountsFromSeveralAdds) {
  Progress progress("test", 10, "items");
  progress.Add(3);
  progress.Add(4);
  EXPECT_EQ(progress.done(), 7u);
  progress.Finish();
}

}  // namespace
}  // namespace pbert
