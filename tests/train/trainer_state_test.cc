#include "train/trainer_state.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pbert::train {
namespace {

TrainerState Example() {
  TrainerState s;
  s.loop = {1234, 56789, 321.5, "", 2, "00112233aabbccdd"};
  s.loader.rows = 9876;
  s.random.cpu = "0a0b0c";
  s.loss_scale = {1024.0, 17};
  s.evaluation = {60000, 3, 0.61, 0.65, 0};
  s.stop = {1, 4};
  s.mllog = {4096, 1700000000123, 0};
  s.metrics = {2048};
  return s;
}

void ExpectSame(const TrainerState& a, const TrainerState& b) {
  EXPECT_EQ(ToJson(a), ToJson(b));
  EXPECT_EQ(a.loop.step, b.loop.step);
  EXPECT_EQ(a.loader.rows, b.loader.rows);
  EXPECT_EQ(a.mllog.run_start_ms, b.mllog.run_start_ms);
}

TEST(TrainerStateTest, Version3ReadsBackWhole) {
  TrainerState s = Example();
  s.loop.rows_per_step = 64;
  s.loop.rows_per_batch = 16;
  s.loop.batches_per_step = 2;
  s.evaluation.metrics = {{"exact_match", 61.5}, {"f1", 70.25}};
  const nlohmann::json json = ToJson(s);
  EXPECT_EQ(json.at("version"), 3);
  EXPECT_EQ(json.at("evaluation").at("next_samples"), 60000);
  auto read = TrainerStateFromJson(nlohmann::json::parse(json.dump()), "x/trainer_state.json");
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSame(*read, s);
}

// Version 2 of earlier releases named pretraining's score (its MLM
// accuracy) as such and kept no metrics: read into version 3's names.
TEST(TrainerStateTest, Version2IsRead) {
  nlohmann::json json = ToJson(Example());
  json["version"] = 2;
  nlohmann::json& evaluation = json["evaluation"];
  evaluation["last_mlm_accuracy"] = evaluation["last_score"];
  evaluation["best_mlm_accuracy"] = evaluation["best_score"];
  for (const char* key : {"last_score", "best_score", "metrics"}) evaluation.erase(key);
  auto read = TrainerStateFromJson(json, "v2/trainer_state.json");
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSame(*read, Example());
  EXPECT_EQ(read->evaluation.best_score, 0.65);
}

// The event file's length joined the metrics part after version 2 was
// released: a checkpoint without it has written no event file.
TEST(TrainerStateTest, TheEventFilesLengthIsSavedAndMayBeAbsent) {
  TrainerState s = Example();
  s.metrics.tensorboard_bytes = 512;
  nlohmann::json json = ToJson(s);
  EXPECT_EQ(json.at("metrics").at("tensorboard_bytes"), 512);
  auto read = TrainerStateFromJson(json, "x/trainer_state.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->metrics.tensorboard_bytes, 512u);
  json["metrics"].erase("tensorboard_bytes");
  read = TrainerStateFromJson(json, "x/trainer_state.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->metrics.tensorboard_bytes, 0u);
  EXPECT_EQ(read->metrics.bytes, 2048u);
}

// Version 1 of earlier releases, field by field as docs/training.md listed
// it, is read into the same state.
TEST(TrainerStateTest, Version1IsRead) {
  const nlohmann::json v1 = {{"version", 1},
                             {"step", 1234},
                             {"samples", 56789},
                             {"loader_rows", 9876},
                             {"next_eval_samples", 60000},
                             {"evaluations", 3},
                             {"last_mlm_accuracy", 0.61},
                             {"best_mlm_accuracy", 0.65},
                             {"samples_to_target", 0},
                             {"bad_steps_in_row", 1},
                             {"skipped_steps", 4},
                             {"train_seconds", 321.5},
                             {"block_start_samples", 50000},
                             {"run_start_ms", 1700000000123},
                             {"run_seconds", 0},
                             {"mllog_bytes", 4096},
                             {"metrics_bytes", 2048},
                             {"cpu_rng", "0a0b0c"},
                             {"loss_scale", 1024.0},
                             {"loss_scale_good_steps", 17},
                             {"world_size", 2},
                             {"train_index_checksum", "00112233aabbccdd"},
                             {"status", ""}};
  auto read = TrainerStateFromJson(v1, "old/trainer_state.json");
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSame(*read, Example());
}

TEST(TrainerStateTest, OtherVersionsAndMissingFieldsAreNamedErrors) {
  nlohmann::json json = ToJson(Example());
  json["version"] = 4;
  auto read = TrainerStateFromJson(json, "c/trainer_state.json");
  ASSERT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);  // exit 2
  EXPECT_EQ(read.status().message(),
            "c/trainer_state.json: trainer state version 4; this packed-bert reads versions 1 to "
            "3: resume with the packed-bert that wrote it, or a newer one");
  json["version"] = 3;
  json["evaluation"].erase("evaluations");
  read = TrainerStateFromJson(json, "c/trainer_state.json");
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find("c/trainer_state.json"), std::string::npos);
  EXPECT_NE(read.status().message().find("part 'evaluation'"), std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find("evaluations"), std::string::npos)
      << read.status().message();
  json = ToJson(Example());
  json.erase("stop");
  read = TrainerStateFromJson(json, "c/trainer_state.json");
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find("part 'stop'"), std::string::npos)
      << read.status().message();
}

// Numbers no run saves (a negative position, a count past 2^53, a time
// that is not finite, a float too large for the integer it fills) are
// damage, named with the part and the key.
TEST(TrainerStateTest, NegativeOrAbsurdValuesAreRefused) {
  const std::vector<std::tuple<const char*, const char*, nlohmann::json>> bad = {
      {"loader", "rows", -5},
      {"loop", "step", -1},
      {"loop", "samples", 1e300},
      {"loop", "world_size", 3e9},
      {"stop", "bad_steps_in_row", 2147483648.0},
      {"evaluation", "next_samples", -1000},
      {"mllog", "bytes", -1}};
  for (const auto& [part, key, value] : bad) {
    nlohmann::json json = ToJson(Example());
    json[part][key] = value;
    auto read = TrainerStateFromJson(json, "c/trainer_state.json");
    ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << part << "." << key;
    EXPECT_EQ(read.status().message(),
              absl::StrCat("malformed trainer state c/trainer_state.json, part '", part, "': ", key,
                           " is ", value.dump(), ", which no run saves"));
  }
}

// A score is a float that may be negative (a correlation: CoLA's Matthews
// coefficient, STS-B's Pearson), at the top of the evaluation state and
// among its metrics.
TEST(TrainerStateTest, NegativeScoresAreStates) {
  nlohmann::json json = ToJson(Example());
  json["evaluation"]["last_score"] = -0.25;
  json["evaluation"]["metrics"] = nlohmann::json::array({nlohmann::json::array({"mcc", -0.125})});
  auto read = TrainerStateFromJson(json, "c/trainer_state.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->evaluation.last_score, -0.25);
  json["evaluation"]["metrics"][0][1] = -1e300;
  read = TrainerStateFromJson(json, "c/trainer_state.json");
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find("metrics.0.1 is -1e+300"), std::string::npos)
      << read.status().message();
}

// The parts must agree: a loader past the sequences trained on, or a world
// of no ranks, is damage too (and refused under --force as well).
TEST(TrainerStateTest, PartsThatDisagreeAreRefused) {
  nlohmann::json json = ToJson(Example());
  json["loop"]["world_size"] = 0;
  auto read = TrainerStateFromJson(json, "c/trainer_state.json");
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read.status().message(),
            "malformed trainer state c/trainer_state.json: world_size 0, which no run saves");
  json = ToJson(Example());
  json["loader"]["rows"] = 1000000000000;  // 10^12 rows after 56789 sequences
  read = TrainerStateFromJson(json, "c/trainer_state.json");
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read.status().message(),
            "malformed trainer state c/trainer_state.json: the loader is at row 1000000000000 "
            "after 1234 steps of 56789 sequences; a run reads at least one row per step and one "
            "sequence per row");
  json["loader"]["rows"] = 1233;  // fewer rows than steps
  EXPECT_EQ(TrainerStateFromJson(json, "c/trainer_state.json").status().code(),
            absl::StatusCode::kDataLoss);
  json["loader"]["rows"] = 56789;  // every row one sequence: possible
  EXPECT_TRUE(TrainerStateFromJson(json, "c/trainer_state.json").ok());
}

}  // namespace
}  // namespace pbert::train
