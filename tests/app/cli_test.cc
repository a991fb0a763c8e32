// Runs the real `packed-bert` binary as a user would and checks exit codes
// and messages.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "app/cli.h"
#include "data/hdf5.h"
#include "tests/data/random_instances.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pbert::app {
namespace {

struct Result {
  int exit_code;
  std::string out;
  std::string err;
};

Result RunBinary(const std::string& arguments) {
  // ctest runs tests in parallel processes: one stderr file per test.
  std::string err_path = std::filesystem::temp_directory_path() /
                         (std::string("pbert_cli_") +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                          ".stderr");
  std::string command =
      std::string(PBERT_BINARY) + " " + arguments + " 2>" + err_path + " </dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  int status = pclose(pipe);
  std::ifstream err_file(err_path);
  std::stringstream err;
  err << err_file.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err.str()};
}

std::string WriteConfig(const std::string& name, const std::string& text) {
  std::string path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

TEST(CliTest, HelpListsCommands) {
  Result r = RunBinary("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("pack "), std::string::npos);
  EXPECT_NE(r.out.find("train"), std::string::npos);
  r = RunBinary("pack --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--max-depth D"), std::string::npos);
}

TEST(CliTest, PlannedCommandSaysSoWithExitTwo) {
  Result r = RunBinary("train --config x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert train: not yet available in this version; see 'packed-bert --help'\n");
}

TEST(CliTest, ConfigTypoIsOneClearLine) {
  std::string path = WriteConfig("pbert_cli_typo.yaml", "run:\n  thread: 2\n");
  Result r = RunBinary("config dump --config " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert config: error: " + path +
                       ":2:3: run.thread: unknown key; did you mean 'threads'?\n");
}

TEST(CliTest, StringWhereANumberBelongs) {
  std::string path = WriteConfig("pbert_cli_type.yaml", "data:\n  max_seq_len: long\n");
  Result r = RunBinary("config dump --config " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert config: error: " + path +
                       ":2:16: data.max_seq_len: expected an integer, got 'long'\n");
}

TEST(CliTest, MissingConfigFile) {
  Result r = RunBinary("config dump --config /nonexistent/run.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert config: error: config file '/nonexistent/run.yaml' not found or "
                   "not readable; see configs/ for examples\n");
}

TEST(CliTest, UnknownFlag) {
  Result r = RunBinary("pack --max-lenght 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "packed-bert pack: error: unknown flag --max-lenght; see 'packed-bert pack --help'\n");
}

TEST(CliTest, ConfigDumpAppliesPriorities) {
  std::string path = WriteConfig("pbert_cli_ok.yaml", "run:\n  threads: 1\n  seed: 7\n");
  Result r = RunBinary("config dump --config " + path + " --set run.threads=2 --log-level warn");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("threads: 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seed: 7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("log_level: warn"), std::string::npos) << r.out;
}

TEST(CliTest, PackPrintsOneJsonObjectPerAlgorithm) {
  std::string hist = WriteConfig("pbert_cli_hist.txt", "# lengths 1..8\n0\n0\n4\n2\n0\n0\n1\n3\n");
  Result r = RunBinary("pack --histogram " + hist + " --max-len 8 --compare --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u);
  for (const std::string& line : lines) {
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"algorithm", "max_depth", "sequences", "packs", "efficiency",
                            "packing_factor", "depth_used", "lower_bound_packs", "seconds"}) {
      EXPECT_TRUE(j.contains(key)) << key << " in " << line;
    }
    EXPECT_EQ(j["sequences"], 10);
    // 4x3 + 2x4 + 7 + 3x8 = 51 tokens: at least 7 rows of 8.
    EXPECT_GE(j["packs"].get<int>(), 7);
  }
}

TEST(CliTest, ScoreOfPackedAndUnpackedDataAgree) {
  std::string data = std::filesystem::temp_directory_path() / "pbert_cli_score.hdf5";
  std::string weights = std::filesystem::temp_directory_path() / "pbert_cli_score.safetensors";
  ASSERT_TRUE(data::WriteHdf5(data, testing::RandomInstances(60, 5, 40, 500, 3), 64, 40).ok());
  const std::string model = std::string(" --config ") + PBERT_SOURCE_DIR +
                            "/configs/bert-tiny.yaml --set model.vocab_size=500"
                            " --set model.max_position_embeddings=64 --log-level warn";
  Result init = RunBinary("model init" + model + " --seed 5 --out " + weights);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  Result alone = RunBinary("score" + model + " --weights " + weights + " --data " + data);
  Result packed = RunBinary("score" + model + " --weights " + weights + " --data " + data +
                            " --pack lp --max-depth 4 --batch-rows 5");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  auto a = nlohmann::json::parse(alone.out), p = nlohmann::json::parse(packed.out);
  EXPECT_EQ(a["sequences"], 60);
  EXPECT_EQ(p["sequences"], 60);
  EXPECT_LT(p["rows"].get<int>(), 60);
  EXPECT_EQ(a["masked_tokens"], p["masked_tokens"]);
  EXPECT_GT(a["masked_tokens"].get<int>(), 0);
  EXPECT_EQ(a["mlm_accuracy"], p["mlm_accuracy"]);
  EXPECT_EQ(a["nsp_accuracy"], p["nsp_accuracy"]);
  EXPECT_NEAR(a["mlm_loss_per_token"].get<double>(), p["mlm_loss_per_token"].get<double>(), 1e-5);
  // Untrained: the loss is near ln(vocab).
  EXPECT_NEAR(a["mlm_loss_per_token"].get<double>(), std::log(500.0), 0.5);
}

TEST(CliTest, ScoreRejectsWeightsOfAnotherShape) {
  std::string data = std::filesystem::temp_directory_path() / "pbert_cli_score2.hdf5";
  std::string weights = std::filesystem::temp_directory_path() / "pbert_cli_score2.safetensors";
  ASSERT_TRUE(data::WriteHdf5(data, testing::RandomInstances(4, 5, 20, 500, 4), 32, 20).ok());
  const std::string config = std::string(" --config ") + PBERT_SOURCE_DIR + "/configs/bert-tiny.yaml";
  ASSERT_EQ(RunBinary("model init" + config + " --set model.vocab_size=500 --out " + weights)
                .exit_code, 0);
  Result r = RunBinary("score" + config + " --set model.vocab_size=600 --weights " + weights +
                       " --data " + data);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mis-shaped: bert.embeddings.word_embeddings.weight (file [500,128], "
                       "model [600,128])"), std::string::npos) << r.err;
}

TEST(CliTest, ExitCodesFollowTheStatus) {
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::DataLossError("x")), 1);
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
}

}  // namespace
}  // namespace pbert::app
