#include "app/config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "app/runtime.h"
#include "common/atomic_file.h"
#include "common/config.h"
#include "common/folders.h"
#include "common/logging.h"
#include "common/platform.h"
#include "common/status.h"

namespace pbert::app {

absl::StatusOr<ExperimentConfig> LoadConfig(const Args& args,
                                            const std::vector<FlagKey>& shorthands,
                                            const std::string& default_file,
                                            std::set<std::string>* given) {
  std::vector<config::Override> overrides = config::SetFlags(args.GetAll("set"));
  std::vector<FlagKey> flags = {{"threads", "run.threads"}, {"log-level", "run.log_level"}};
  flags.insert(flags.end(), shorthands.begin(), shorthands.end());
  for (const FlagKey& f : flags) {
    if (!args.Has(f.flag)) continue;
    overrides.push_back({absl::StrCat(f.key, "=", args.Get(f.flag)),
                         absl::StrCat("--", f.flag, " ", args.Get(f.flag))});
  }
  ExperimentConfig config;
  RETURN_IF_ERROR(config::Load(args.Get("config", default_file), overrides, &config, given));
  // Under torchrun only rank 0 logs below warnings.
  ASSIGN_OR_RETURN(distributed::Environment environment, config.dist.ReadEnvironment());
  logging::Init(config.run.log_level, environment.rank);
  ASSIGN_OR_RETURN(const ThreadEnvironment pools, ReadThreadEnvironment());
  const int cpus = AvailableCpus();
  // run.threads 0: OMP_NUM_THREADS where it is set (torchrun and launch set
  // it), else this process's share of the CPUs, when several workers of a
  // distributed run share the node.
  std::string chosen = "run.threads";
  if (config.run.threads == 0 && pools.omp_num_threads > 0) {
    config.run.threads = pools.omp_num_threads;
    chosen = "OMP_NUM_THREADS";
  }
  if (config.run.threads > cpus) {
    // More threads than CPUs only makes the threads wait for each other.
    logging::Get("run")->warn("{} {} is more than the {} CPUs this process may use; using {}",
                              chosen, config.run.threads, cpus, cpus);
    config.run.threads = cpus;
  }
  int threads = SetIntraOpThreads(
      config.run.threads > 0 ? static_cast<int>(config.run.threads)
                             : std::max(1, cpus / std::max(1, environment.local_world_size)));
  logging::Get("run")->debug("intra-op threads: {}", threads);
  if (const BlasKernels& blas = TuneOpenBlasKernels(); !blas.note.empty()) {
    logging::Get("run")->debug("{}", blas.note);
  }
  TakeBlasBuffers();
  return config;
}

void WarnIfSlowKernels() {
  if (const BlasKernels& blas = TuneOpenBlasKernels(); blas.slower) {
    logging::Get("run")->warn("{}", blas.note);
  }
}

absl::Status CreateOutputDir(const ExperimentConfig& config) {
  return CreateFolder(config.run.output_dir, "run.output_dir");
}

absl::Status CheckOutputDir(const ExperimentConfig& config) {
  return CheckFolderTarget(config.run.output_dir, "run.output_dir");
}

absl::Status WriteEffectiveConfig(const ExperimentConfig& config, const std::string& effective) {
  RETURN_IF_ERROR(CreateOutputDir(config));
  std::string text = config::Dump(config);
  if (!effective.empty()) absl::StrAppend(&text, "\n# effective: ", effective, "\n");
  return WriteFileAtomically(config.run.output_dir + "/config.yaml", text);
}

absl::StatusOr<std::unique_ptr<distributed::Communicator>> JoinProcessGroup(
    const ExperimentConfig& config, const distributed::Environment& environment,
    const c10::Device& device, const std::string& component) {
  const distributed::Backend backend =
      distributed::ResolveBackend(config.dist.backend, device.is_cuda());
  if (environment.distributed()) {
    logging::Get(component)->info(
        "rank {} of {} ({}; local rank {} of {}, node {}), {} process group at {}:{}",
        environment.rank, environment.world_size, environment.source, environment.local_rank,
        environment.local_world_size, environment.node_rank, NameOf(backend),
        environment.master_addr, environment.master_port);
  }
  return distributed::Communicator::Create(environment, backend, config.dist.timeout(), device);
}

}  // namespace pbert::app
