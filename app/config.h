// The experiment config of `packed-bert`: one typed struct per YAML section.
// Sections and keys are documented in docs/config.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "app/cli.h"
#include "common/config.h"

namespace pbert::app {

struct RunConfig {
  std::string output_dir = "runs/default";
  int64_t seed = 12345;
  int64_t threads = 0;
  std::string log_level = "info";

  template <class V>
  void Visit(V& v) {
    v.Field("output_dir", &output_dir, "folder for the run's outputs (created if missing)");
    v.Field("seed", &seed, "seed of every random choice of the run", config::AtLeast<int64_t>(0));
    v.Field("threads", &threads, "intra-op threads; 0 = all CPUs available to the process",
            config::AtLeast<int64_t>(0));
    v.Field("log_level", &log_level, "trace, debug, info, warn, error or off",
            config::OneOf({"trace", "debug", "info", "warn", "error", "off"}));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct DataConfig {
  int64_t max_seq_len = 512;
  std::string histogram;

  template <class V>
  void Visit(V& v) {
    v.Field("max_seq_len", &max_seq_len, "tokens per row (S), the length packs fill",
            config::InRange<int64_t>(8, 65535));
    v.Field("histogram", &histogram,
            "a bare length histogram to pack without a store (line i = count of length i)");
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct PackingConfig {
  std::string algorithm = "lp";
  int64_t max_depth = 8;

  template <class V>
  void Visit(V& v) {
    v.Field("algorithm", &algorithm, "none, greedy, ffd, spfhp, lpfhp, nnlshp or lp",
            config::OneOf({"none", "greedy", "ffd", "spfhp", "lpfhp", "nnlshp", "lp"}));
    v.Field("max_depth", &max_depth, "most sequences in one pack (D)",
            config::InRange<int64_t>(1, 64));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct ExperimentConfig {
  RunConfig run;
  DataConfig data;
  PackingConfig packing;

  template <class V>
  void Visit(V& v) {
    v.Section("run", &run, "where outputs go, seeds, threads, logging");
    v.Section("data", &data, "input data");
    v.Section("packing", &packing, "which sequences share a row");
  }
};

// A command's own flag that sets a config key, e.g. {"max-len",
// "data.max_seq_len"}; it takes priority over --set.
struct FlagKey {
  std::string flag;
  std::string key;
};

// Loads --config and --set (plus --threads, --log-level and `shorthands`),
// then sets up logging and the intra-op thread count from the result.
absl::StatusOr<ExperimentConfig> LoadConfig(const Args& args,
                                            const std::vector<FlagKey>& shorthands = {});

// Writes the effective config to `<run.output_dir>/config.yaml`.
absl::Status WriteEffectiveConfig(const ExperimentConfig& config);

}  // namespace pbert::app
