// Logging for the whole project: spdlog behind one header, a `[component]`
// prefix on every line, and only rank 0 speaking below warnings by default.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/choices.h"
#include "spdlog/spdlog.h"

namespace pbert::logging {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };
inline constexpr Choice<Level> kLevels[] = {
    {"trace", Level::kTrace}, {"debug", Level::kDebug}, {"info", Level::kInfo},
    {"warn", Level::kWarn},   {"error", Level::kError}, {"off", Level::kOff}};
constexpr ChoiceList<Level> ChoicesOf(Level) { return kLevels; }

// Sets the level and the process rank. Ranks other than 0 log warnings and
// errors only, so that N processes do not print N copies of each line.
void Init(Level level, int rank = 0);

// The logger of one component, created on first use; its lines read
// "[12:00:01.123] [info] [pack] ...".
std::shared_ptr<spdlog::logger> Get(absl::string_view component);

}  // namespace pbert::logging
