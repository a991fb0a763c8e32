#include "distributed/environment.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pbert::distributed {
namespace {

using Getter = std::function<const char*(const char*)>;

// The variable's integer value; nullopt when unset or empty.
absl::StatusOr<std::optional<int>> Integer(const Getter& get, const char* name) {
  const char* value = get(name);
  if (value == nullptr || *value == '\0') return std::optional<int>();
  int out;
  if (!absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", value, "' is not an integer"));
  }
  return std::optional<int>(out);
}

// Rank and size of one launcher: both or neither.
struct Pair {
  std::optional<int> rank, size;
};

absl::StatusOr<Pair> ReadPair(const Getter& get, const char* rank_name, const char* size_name) {
  Pair p;
  auto rank = Integer(get, rank_name);
  if (!rank.ok()) return rank.status();
  auto size = Integer(get, size_name);
  if (!size.ok()) return size.status();
  p.rank = *rank;
  p.size = *size;
  if (p.rank.has_value() != p.size.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        p.rank ? rank_name : size_name, " is set but ", p.rank ? size_name : rank_name,
        " is not; a launcher sets both (or unset both for a single process)"));
  }
  return p;
}

}  // namespace

std::vector<std::string> BackendNames() { return {"auto", "gloo", "nccl"}; }

absl::StatusOr<std::string> ResolveBackend(const std::string& name, bool model_on_cuda) {
  if (name == "auto") {
#ifdef PBERT_WITH_NCCL
    if (model_on_cuda) return std::string("nccl");
#endif
    (void)model_on_cuda;
    return std::string("gloo");
  }
  if (name == "gloo" || name == "nccl") return name;
  return absl::InvalidArgumentError(
      absl::StrCat("distributed backend '", name, "' is not one of: auto, gloo, nccl"));
}

std::string FirstSlurmHost(const std::string& nodelist) {
  // Hosts are separated by commas outside brackets; a bracket holds ranges.
  size_t end = 0;
  int depth = 0;
  while (end < nodelist.size() && !(nodelist[end] == ',' && depth == 0)) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    ++end;
  }
  const std::string first = nodelist.substr(0, end);
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  // The first number of the first range, with its zero padding.
  size_t stop = open + 1;
  while (stop < first.size() && first[stop] != '-' && first[stop] != ',' && first[stop] != ']') {
    ++stop;
  }
  return first.substr(0, open) + first.substr(open + 1, stop - open - 1);
}

absl::StatusOr<Environment> EnvironmentFrom(const Getter& get_or_null,
                                            const EnvironmentDefaults& defaults) {
  const Getter get = get_or_null ? get_or_null
                                 : [](const char* name) -> const char* { return std::getenv(name); };
  Environment env;
  if (!defaults.master_addr.empty()) env.master_addr = defaults.master_addr;
  env.master_port = defaults.master_port;
  auto value_or = [](const std::optional<int>& v, int fallback) { return v ? *v : fallback; };

  auto torchrun = ReadPair(get, "RANK", "WORLD_SIZE");
  if (!torchrun.ok()) return torchrun.status();
  auto mpi = ReadPair(get, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  if (!mpi.ok()) return mpi.status();
  auto slurm = ReadPair(get, "SLURM_PROCID", "SLURM_NTASKS");
  if (!slurm.ok()) return slurm.status();

  const char* rank_name = "RANK";
  const char* size_name = "WORLD_SIZE";
  const char* local_rank_name = "LOCAL_RANK";
  const char* local_size_name = "LOCAL_WORLD_SIZE";
  std::optional<int> local_rank, local_size, node_rank;
  if (torchrun->rank) {
    env.source = "torchrun";
    env.rank = *torchrun->rank;
    env.world_size = *torchrun->size;
    auto lr = Integer(get, "LOCAL_RANK");
    auto ls = Integer(get, "LOCAL_WORLD_SIZE");
    auto gr = Integer(get, "GROUP_RANK");
    auto rc = Integer(get, "TORCHELASTIC_RESTART_COUNT");
    auto mr = Integer(get, "TORCHELASTIC_MAX_RESTARTS");
    for (const auto* s : {&lr, &ls, &gr, &rc, &mr}) {
      if (!s->ok()) return s->status();
    }
    local_rank = *lr;
    local_size = *ls;
    node_rank = *gr;
    env.restart_count = value_or(*rc, 0);
    env.max_restarts = value_or(*mr, 0);
    if (const char* id = get("TORCHELASTIC_RUN_ID"); id != nullptr) env.run_id = id;
    if (env.run_id.rfind("packed-bert", 0) == 0) env.source = "packed-bert launch";
    const char* agent = get("TORCHELASTIC_USE_AGENT_STORE");
    env.use_agent_store = agent != nullptr && std::string(agent) == "True";
  } else if (mpi->rank) {
    env.source = "Open MPI";
    rank_name = "OMPI_COMM_WORLD_RANK";
    size_name = "OMPI_COMM_WORLD_SIZE";
    env.rank = *mpi->rank;
    env.world_size = *mpi->size;
    local_rank_name = "OMPI_COMM_WORLD_LOCAL_RANK";
    local_size_name = "OMPI_COMM_WORLD_LOCAL_SIZE";
    auto lr = Integer(get, local_rank_name);
    auto ls = Integer(get, local_size_name);
    if (!lr.ok()) return lr.status();
    if (!ls.ok()) return ls.status();
    local_rank = *lr;
    local_size = *ls;
  } else if (slurm->rank) {
    env.source = "Slurm";
    rank_name = "SLURM_PROCID";
    size_name = "SLURM_NTASKS";
    env.rank = *slurm->rank;
    env.world_size = *slurm->size;
    local_rank_name = "SLURM_LOCALID";
    local_size_name = "SLURM_NTASKS_PER_NODE";
    auto lr = Integer(get, "SLURM_LOCALID");
    auto ls = Integer(get, "SLURM_NTASKS_PER_NODE");
    auto nodes = Integer(get, "SLURM_NNODES");
    auto node = Integer(get, "SLURM_NODEID");
    for (const auto* s : {&lr, &ls, &nodes, &node}) {
      if (!s->ok()) return s->status();
    }
    local_rank = *lr;
    local_size = *ls;
    // Without SLURM_NTASKS_PER_NODE: tasks spread evenly over the nodes.
    if (!local_size && *nodes && **nodes > 0 && env.world_size % **nodes == 0) {
      local_size = env.world_size / **nodes;
    }
    node_rank = *node;
    if (const char* nodes_list = get("SLURM_JOB_NODELIST");
        defaults.master_addr.empty() && nodes_list != nullptr && *nodes_list != '\0') {
      env.master_addr = FirstSlurmHost(nodes_list);
    }
  }

  env.local_rank = value_or(local_rank, env.source == "single process" ? 0 : env.rank);
  env.local_world_size = value_or(local_size, env.source == "single process" ? 1 : env.world_size);
  if (const char* addr = get("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    env.master_addr = addr;
  }
  auto port = Integer(get, "MASTER_PORT");
  if (!port.ok()) return port.status();
  if (*port) env.master_port = **port;

  if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(rank_name, "=", env.rank, " and ", size_name,
                                                   "=", env.world_size, " do not fit: need 0 <= ",
                                                   rank_name, " < ", size_name));
  }
  if (env.local_world_size < 1 || env.local_rank < 0 ||
      env.local_rank >= env.local_world_size || env.local_world_size > env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        local_rank_name, "=", env.local_rank, " and ", local_size_name, "=", env.local_world_size,
        " do not fit: need 0 <= local rank < local size <= world size ", env.world_size));
  }
  env.node_rank = value_or(node_rank, env.rank / env.local_world_size);
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT=", env.master_port, " is not a port (1..65535)"));
  }
  return env;
}

}  // namespace pbert::distributed
