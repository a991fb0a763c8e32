#include "distributed/environment.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status.h"

namespace pbert::distributed {
namespace {

using Getter = std::function<const char*(const char*)>;

// The variable's integer value into `out`, at least `min`; left empty when
// unset or empty.
absl::Status ReadInt(const Getter& get, const char* name, std::optional<int>* out, int min = 0) {
  const char* value = get(name);
  if (value == nullptr || *value == '\0') return absl::OkStatus();
  int parsed;
  if (!absl::SimpleAtoi(value, &parsed)) {
    // Digits alone make a whole number, only one past what a count can be.
    absl::string_view digits = absl::StripAsciiWhitespace(value);
    absl::ConsumePrefix(&digits, "+");
    const bool whole = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c));
    });
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ", name, "='", value, "' is ",
        whole ? absl::StrCat("out of range: it must be at most ", std::numeric_limits<int>::max())
              : "not an integer"));
  }
  if (parsed < min) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, "=", parsed,
                                                   " is out of range: it must be ", min,
                                                   " or more"));
  }
  *out = parsed;
  return absl::OkStatus();
}

// A value that must lie below a count: `name`=`value` against `count_name`.
absl::Status CheckBelow(const char* name, int value, const char* count_name, int count) {
  if (value < count) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, "=", value, " and ", count_name, "=", count,
                                                 " do not fit: need ", name, " < ", count_name));
}

// The variables of one launcher, innermost first.
struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};
constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

}  // namespace

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
  const Getter get =
      get_or_null ? get_or_null : [](const char* name) -> const char* { return std::getenv(name); };
  Environment env;
  if (!defaults.master_addr.empty()) env.master_addr = defaults.master_addr;
  env.master_port = defaults.master_port;

  // The innermost launcher whose rank and size are set; each sets both.
  // An outer one's world must be shared out evenly by the inner one (a
  // torchrun per Slurm task or node): other sizes are two launchers (or a
  // leftover variable) that disagree.
  const Launcher* launcher = nullptr;
  std::optional<int> rank, size;
  for (const Launcher& l : kLaunchers) {
    std::optional<int> r, n, local_r, local_n;
    RETURN_IF_ERROR(ReadInt(get, l.rank, &r));
    RETURN_IF_ERROR(ReadInt(get, l.size, &n, 1));
    RETURN_IF_ERROR(ReadInt(get, l.local_rank, &local_r));
    RETURN_IF_ERROR(ReadInt(get, l.local_size, &local_n, 1));
    if (r.has_value() != n.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(r ? l.rank : l.size, " is set but ", r ? l.size : l.rank,
                       " is not; a launcher sets both (or unset both for a single process)"));
    }
    // (Slurm's job environment holds SLURM_NTASKS_PER_NODE outside srun.)
    if (!r && (local_r || local_n) && std::string(l.source) != "Slurm") {
      return absl::InvalidArgumentError(
          absl::StrCat(local_r ? l.local_rank : l.local_size, " is set but ", l.rank, " and ",
                       l.size, " are not; a launcher sets all of them (or unset ",
                       local_r ? l.local_rank : l.local_size, " for a single process)"));
    }
    if (!r) continue;
    if (launcher == nullptr) {
      launcher = &l;
      rank = r;
      size = n;
    } else if (*size < *n || *size % *n != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          launcher->source, "'s ", launcher->size, "=", *size, " and ", l.source, "'s ", l.size,
          "=", *n, " disagree: the inner launcher's world must share out the outer one's ",
          "(a multiple of it); unset the variables of the launcher that did not start this "
          "process"));
    }
  }
  std::optional<int> local_rank, local_size, node_rank, port;
  if (launcher != nullptr) {
    env.source = launcher->source;
    env.rank = *rank;
    env.world_size = *size;
    RETURN_IF_ERROR(ReadInt(get, launcher->local_rank, &local_rank));
    RETURN_IF_ERROR(ReadInt(get, launcher->local_size, &local_size));
  }
  if (env.source == "torchrun") {
    std::optional<int> restarts, max_restarts, nodes;
    RETURN_IF_ERROR(ReadInt(get, "GROUP_RANK", &node_rank));
    RETURN_IF_ERROR(ReadInt(get, "GROUP_WORLD_SIZE", &nodes, 1));
    RETURN_IF_ERROR(ReadInt(get, "TORCHELASTIC_RESTART_COUNT", &restarts));
    RETURN_IF_ERROR(ReadInt(get, "TORCHELASTIC_MAX_RESTARTS", &max_restarts));
    if (node_rank && nodes) {
      RETURN_IF_ERROR(CheckBelow("GROUP_RANK", *node_rank, "GROUP_WORLD_SIZE", *nodes));
    }
    if (restarts && max_restarts && *restarts > *max_restarts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TORCHELASTIC_RESTART_COUNT=", *restarts, " and TORCHELASTIC_MAX_RESTARTS=",
          *max_restarts, " do not fit: a launcher restarts its workers at most that often"));
    }
    env.restart_count = restarts.value_or(0);
    env.max_restarts = max_restarts.value_or(0);
    if (const char* id = get("TORCHELASTIC_RUN_ID"); id != nullptr) env.run_id = id;
    if (env.run_id.rfind("packed-bert", 0) == 0) env.source = "packed-bert launch";
    const char* agent = get("TORCHELASTIC_USE_AGENT_STORE");
    if (agent != nullptr && std::string(agent) != "True" && std::string(agent) != "False") {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable TORCHELASTIC_USE_AGENT_STORE='", agent,
                       "' is not True or False (as torchrun sets it); unset it"));
    }
    env.use_agent_store = agent != nullptr && std::string(agent) == "True";
  } else if (env.source == "Slurm") {
    std::optional<int> nodes;
    RETURN_IF_ERROR(ReadInt(get, "SLURM_NNODES", &nodes, 1));
    RETURN_IF_ERROR(ReadInt(get, "SLURM_NODEID", &node_rank));
    if (node_rank && nodes) {
      RETURN_IF_ERROR(CheckBelow("SLURM_NODEID", *node_rank, "SLURM_NNODES", *nodes));
    }
    // Without SLURM_NTASKS_PER_NODE: tasks spread evenly over the nodes.
    if (!local_size && nodes && *nodes > 0 && env.world_size % *nodes == 0) {
      local_size = env.world_size / *nodes;
    }
    if (const char* nodelist = get("SLURM_JOB_NODELIST");
        defaults.master_addr.empty() && nodelist != nullptr && *nodelist != '\0') {
      env.master_addr = FirstSlurmHost(nodelist);
    }
  }

  // A launcher that leaves the local pair open: one node.
  env.local_rank = local_rank.value_or(env.rank);
  env.local_world_size = local_size.value_or(env.world_size);
  if (const char* addr = get("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    env.master_addr = addr;
  }
  RETURN_IF_ERROR(ReadInt(get, "MASTER_PORT", &port));
  env.master_port = port.value_or(env.master_port);

  const Launcher& names = launcher != nullptr ? *launcher : kLaunchers[0];
  if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.rank, "=", env.rank, " and ", names.size, "=", env.world_size,
                     " do not fit: need 0 <= ", names.rank, " < ", names.size));
  }
  if (env.local_world_size < 1 || env.local_rank < 0 || env.local_rank >= env.local_world_size ||
      env.local_world_size > env.world_size) {
    // A value the launcher left unset is named as what it was taken for.
    const std::string local_size_text =
        local_size ? absl::StrCat(names.local_size, "=", env.local_world_size)
                   : absl::StrCat(names.local_size, " (unset: taken as ", names.size, "=",
                                  env.world_size, ", one node)");
    const std::string local_rank_text = local_rank
                                            ? absl::StrCat(names.local_rank, "=", env.local_rank)
                                            : absl::StrCat(names.local_rank, " (unset: taken as ",
                                                           names.rank, "=", env.local_rank, ")");
    return absl::InvalidArgumentError(absl::StrCat(
        local_rank_text, " and ", local_size_text,
        " do not fit: need 0 <= local rank < local size <= world size ", env.world_size));
  }
  env.node_rank = node_rank.value_or(env.rank / env.local_world_size);
  if (node_rank) {
    // A node holds at least one rank: no more nodes than ranks.
    RETURN_IF_ERROR(CheckBelow(env.source == "Slurm" ? "SLURM_NODEID" : "GROUP_RANK", env.node_rank,
                               names.size, env.world_size));
  }
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT=", env.master_port, " is not a port (1..65535)"));
  }
  return env;
}

}  // namespace pbert::distributed
