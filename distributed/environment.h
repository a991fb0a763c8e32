// Where this process stands in a distributed run, from the variables that
// torchrun (or `packed-bert launch`) sets: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Without them: one process.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace pbert::distributed {

struct Environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  bool distributed() const { return world_size > 1; }
};

// Reads the variables through `get` (getenv by default); fails, naming the
// variable, on values that are not integers or do not fit together.
absl::StatusOr<Environment> EnvironmentFrom(
    const std::function<const char*(const char*)>& get = nullptr);

}  // namespace pbert::distributed
