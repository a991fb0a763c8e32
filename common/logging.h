// Logging for the whole project: spdlog behind one header, a `[component]`
// prefix on every line, and only rank 0 speaking below warnings by default.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

namespace pbert::logging {

// Parses "trace", "debug", "info", "warn", "error" or "off".
absl::StatusOr<spdlog::level::level_enum> ParseLevel(absl::string_view name);
// Those names, in that order.
std::vector<std::string> LevelNames();

// Sets the level and the process rank. Ranks other than 0 log warnings and
// errors only, so that N processes do not print N copies of each line.
void Init(spdlog::level::level_enum level, int rank = 0);

// The logger of one component, created on first use; its lines read
// "[12:00:01.123] [info] [pack] ...".
std::shared_ptr<spdlog::logger> Get(absl::string_view component);

}  // namespace pbert::logging
