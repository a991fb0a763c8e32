#include "distributed/environment.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pbert::distributed {

absl::StatusOr<Environment> EnvironmentFrom(const std::function<const char*(const char*)>& get) {
  auto read = get ? get : [](const char* name) -> const char* { return std::getenv(name); };
  Environment env;
  auto integer = [&](const char* name, int* out) -> absl::Status {
    const char* value = read(name);
    if (value == nullptr || *value == '\0') return absl::OkStatus();
    if (!absl::SimpleAtoi(value, out)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", name, "='", value, "' is not an integer"));
    }
    return absl::OkStatus();
  };
  for (auto [name, field] : {std::pair{"RANK", &env.rank}, std::pair{"WORLD_SIZE", &env.world_size},
                             std::pair{"LOCAL_RANK", &env.local_rank},
                             std::pair{"LOCAL_WORLD_SIZE", &env.local_world_size},
                             std::pair{"MASTER_PORT", &env.master_port}}) {
    absl::Status status = integer(name, field);
    if (!status.ok()) return status;
  }
  if (const char* addr = read("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    env.master_addr = addr;
  }
  if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("RANK=", env.rank,
                                                   " and WORLD_SIZE=", env.world_size,
                                                   " do not fit: need 0 <= RANK < WORLD_SIZE"));
  }
  if (env.local_world_size < 1 || env.local_rank < 0 || env.local_rank >= env.local_world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("LOCAL_RANK=", env.local_rank, " and LOCAL_WORLD_SIZE=", env.local_world_size,
                     " do not fit: need 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE"));
  }
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT=", env.master_port, " is not a port (1..65535)"));
  }
  return env;
}

}  // namespace pbert::distributed
