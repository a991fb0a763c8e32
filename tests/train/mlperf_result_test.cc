// train/mlperf_result.h: MLLOG files read back, and the olympic score
// against the one MLPerf's result summarizer computes (../shared/tools).
#include "train/mlperf_result.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/scratch_folder.h"
#include "tests/source_paths.h"

namespace pbert::train {
namespace {

namespace fs = std::filesystem;

// An MLLOG of a run that took `minutes` and ended with `status`.
std::string WriteRun(const fs::path& dir, const std::string& name, double minutes,
                     const std::string& status) {
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream out(path);
  const int64_t start = 1700000000000, stop = start + static_cast<int64_t>(minutes * 60000);
  out << "a line of other output\n";
  out << ":::MLLOG {\"namespace\":\"\",\"time_ms\":" << start
      << ",\"event_type\":\"INTERVAL_START\",\"key\":\"run_start\",\"value\":null,\"metadata\":{}}\n";
  out << ":::MLLOG {\"namespace\":\"\",\"time_ms\":" << stop - 5
      << ",\"event_type\":\"POINT_IN_TIME\",\"key\":\"eval_accuracy\",\"value\":0.7213,"
         "\"metadata\":{\"epoch_num\":123456}}\n";
  out << ":::MLLOG {\"namespace\":\"\",\"time_ms\":" << stop
      << ",\"event_type\":\"INTERVAL_END\",\"key\":\"run_stop\",\"value\":null,"
         "\"metadata\":{\"status\":\""
      << status << "\",\"epoch_num\":123456}}\n";
  return path;
}

class MlperfResultTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::ScratchFolder(); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(MlperfResultTest, ReadsTimeSamplesAndStatus) {
  auto run = ReadMlperfRun(WriteRun(dir_, "a.txt", 12.5, "success"));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->converged);
  EXPECT_DOUBLE_EQ(run->minutes, 12.5);
  EXPECT_EQ(run->samples, 123456);
  EXPECT_DOUBLE_EQ(run->last_accuracy, 0.7213);
  EXPECT_EQ(run->evaluations, 1);
  auto aborted = ReadMlperfRun(WriteRun(dir_, "b.txt", 3, "aborted"));
  ASSERT_TRUE(aborted.ok());
  EXPECT_FALSE(aborted->converged);

  std::ofstream(dir_ / "bad.txt") << ":::MLLOG {\"key\": \"run_start\"\n";
  EXPECT_EQ(std::string(ReadMlperfRun((dir_ / "bad.txt").string()).status().message()),
            (dir_ / "bad.txt").string() +
                ":1: not an MLLOG line (a JSON object with key and time_ms)");
  // Two runs in one file (two logs concatenated), and a run_stop before its
  // run_start, in the file or in time: one line each, naming the lines.
  const std::string a = WriteRun(dir_, "a.txt", 12.5, "success");
  const std::string two = (dir_ / "two.txt").string();
  ASSERT_EQ(std::system(("cat " + a + " " + a + " > " + two).c_str()), 0);
  EXPECT_EQ(std::string(ReadMlperfRun(two).status().message()),
            two +
                ":6: a second run_start (the first is on line 2); an MLLOG file holds one run: "
                "split it into one per run");
  const std::string reversed = (dir_ / "reversed.txt").string();
  ASSERT_EQ(std::system(("tac " + a + " > " + reversed).c_str()), 0);
  EXPECT_EQ(std::string(ReadMlperfRun(reversed).status().message()),
            reversed + ":1: run_stop before any run_start; not the MLLOG of one run");
  const std::string backwards = WriteRun(dir_, "backwards.txt", -2, "success");
  EXPECT_EQ(std::string(ReadMlperfRun(backwards).status().message()),
            backwards +
                ":4: run_stop's time_ms 1699999880000 is before run_start's 1700000000000 (line "
                "2); the file's clock or order is damaged");
  std::ofstream(dir_ / "none.txt") << "hello\n";
  EXPECT_FALSE(ReadMlperfRun((dir_ / "none.txt").string()).ok());
  EXPECT_FALSE(ReadMlperfRun((dir_ / "missing.txt").string()).ok());
}

// MLPerf's _compute_olympic_average on the converged runs' minutes.
std::optional<double> Reference(const std::vector<double>& minutes, int dropped) {
  const std::string tools = std::string(pbert::testing::SourceDir()) + "/../shared/tools";
  // The function's own source, taken out of the module (whose imports need
  // pandas) with ast.
  const std::string command = absl::StrCat(
      "cd ", tools,
      " && /usr/bin/python3 -c 'import ast; t = ast.parse(open(\"mlperf_logging/"
      "result_summarizer/result_summarizer.py\").read()); exec(compile(ast.Module([d for d in "
      "t.body if getattr(d, \"name\", \"\") == \"_compute_olympic_average\"], []), \"s\", "
      "\"exec\")); print(_compute_olympic_average([",
      absl::StrJoin(minutes, ","), "], ", dropped, ", 1))'");
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[128] = {};
  const bool read = std::fgets(buffer, sizeof(buffer), pipe) != nullptr;
  ::pclose(pipe);
  if (!read || std::string(buffer).rfind("None", 0) == 0) return std::nullopt;
  return std::stod(buffer);
}

TEST_F(MlperfResultTest, OlympicScoreIsTheSummarizers) {
  if (!fs::exists(std::string(pbert::testing::SourceDir()) + "/../shared/tools/mlperf_logging")) {
    GTEST_SKIP() << "needs ../shared/tools/mlperf_logging (MLPerf's result summarizer)";
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> time(20, 40);
  for (int trial = 0; trial < 6; ++trial) {
    const int n = 3 + trial;
    const int failed = trial % 3 == 2 ? 1 : 0;  // one run that did not converge
    std::vector<MlperfRun> runs;
    std::vector<double> minutes;
    for (int i = 0; i < n; ++i) {
      const bool ok = i >= failed;
      const double m = std::round(time(rng) * 1000) / 1000;
      auto run = ReadMlperfRun(
          WriteRun(dir_, absl::StrCat("t", trial, "_", i, ".txt"), m, ok ? "success" : "aborted"));
      ASSERT_TRUE(run.ok());
      runs.push_back(*run);
      if (ok) minutes.push_back(run->minutes);
    }
    const MlperfScore score = OlympicScore(runs);
    const std::optional<double> want = Reference(minutes, failed);
    ASSERT_EQ(score.minutes.has_value(), want.has_value()) << score.note;
    if (want) EXPECT_NEAR(*score.minutes, *want, 1e-9) << "trial " << trial;
  }
  // Two runs that did not converge: no valid score.
  std::vector<MlperfRun> runs(5);
  for (auto& r : runs) r.converged = true, r.minutes = 10;
  runs[0].converged = runs[1].converged = false;
  EXPECT_FALSE(OlympicScore(runs).minutes.has_value());
}

}  // namespace
}  // namespace pbert::train
