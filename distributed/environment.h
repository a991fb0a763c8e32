// Where this process stands in a distributed run, from the variables its
// launcher sets. Three launchers are understood, and the innermost wins
// (a torchrun inside a Slurm job describes its workers; Slurm's variables
// then describe torchrun itself):
//
//   1. torchrun or `packed-bert launch`: RANK, WORLD_SIZE, LOCAL_RANK,
//      LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
//      TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
//      TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE;
//   2. Open MPI's mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
//      _LOCAL_SIZE;
//   3. Slurm's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//      SLURM_NTASKS_PER_NODE (or SLURM_NNODES), and the first host of
//      SLURM_JOB_NODELIST as the master address.
//
// MASTER_ADDR and MASTER_PORT, when set, apply to any of them; else the
// config's dist.master_addr / dist.master_port (or Slurm's first host).
// Without any: one process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pbert::distributed {

struct Environment {
  // "single process", "torchrun", "packed-bert launch", "Open MPI", "Slurm"
  std::string source = "single process";
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;  // GROUP_RANK, SLURM_NODEID, or rank / local_world_size
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Under torchrun: the agent hosts the rendezvous store and every worker
  // joins it as a client, under the prefix /worker/attempt_<restart_count>.
  bool use_agent_store = false;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;

  bool distributed() const { return world_size > 1; }
};

// Defaults for what the launcher leaves open (from the config's dist section).
struct EnvironmentDefaults {
  std::string master_addr;  // "" = 127.0.0.1, or Slurm's first host
  int master_port = 29500;
};

// Reads the variables through `get` (getenv by default); fails with one line
// naming the variables on values that are not integers, that are missing
// their partners (RANK without WORLD_SIZE) or that do not fit together.
absl::StatusOr<Environment> EnvironmentFrom(
    const std::function<const char*(const char*)>& get = nullptr,
    const EnvironmentDefaults& defaults = {});

// The first host of a Slurm node list: "gpu[07-09,12],cpu3" -> "gpu07".
std::string FirstSlurmHost(const std::string& nodelist);

}  // namespace pbert::distributed
