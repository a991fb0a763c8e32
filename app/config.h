// The experiment config as the commands load it (train/experiment.h holds
// its sections): defaults < --config FILE < --set SECTION.KEY=VALUE <
// a command's own flags; then the process is set up from the run section.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "app/cli.h"
#include "distributed/communicator.h"
#include "train/experiment.h"

namespace pbert::app {

using train::ExperimentConfig;

// A command's own flag that sets a config key, e.g. {"max-len",
// "data.max_seq_len"}; it takes priority over --set.
struct FlagKey {
  std::string flag;
  std::string key;
};

// Loads --config (or `default_file` without it) and --set (plus --threads,
// --log-level and `shorthands`), then sets up logging and the intra-op
// thread count from the result. `given`, if not null, gets the keys that
// the file or a flag set ("data.max_seq_len"); the others are defaults.
absl::StatusOr<ExperimentConfig> LoadConfig(const Args& args,
                                            const std::vector<FlagKey>& shorthands = {},
                                            const std::string& default_file = "",
                                            std::set<std::string>* given = nullptr);

// One warning line when the environment holds OpenBLAS to slower kernels
// than the CPU runs (common/platform.h); for the commands that compute.
void WarnIfSlowKernels();

// Joins the run's process group (a group of one without a launcher):
// torchrun's, launch's, Slurm's or Open MPI's environment; `component`
// names the log line that says where the process stands.
absl::StatusOr<std::unique_ptr<distributed::Communicator>> JoinProcessGroup(
    const ExperimentConfig& config, const distributed::Environment& environment,
    const c10::Device& device, const std::string& component);

// Creates run.output_dir (and its parents) if missing.
absl::Status CreateOutputDir(const ExperimentConfig& config);

// Fails, before any work, where CreateOutputDir or writing into the folder
// would fail (a file at run.output_dir, a folder that cannot be written).
absl::Status CheckOutputDir(const ExperimentConfig& config);

// Writes the effective config to `<run.output_dir>/config.yaml`.
// `effective`: values derived from the config for this run (e.g. the
// packing-adjusted optimizer), appended as a comment so that loading the file
// again does not apply them twice.
absl::Status WriteEffectiveConfig(const ExperimentConfig& config,
                                  const std::string& effective = "");

}  // namespace pbert::app
