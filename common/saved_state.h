// The state a component saves with each checkpoint: a struct that lists its
// fields once for JSON (nlohmann's NLOHMANN_DEFINE_TYPE_INTRUSIVE), read
// back with one check that every field is there with its type.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pbert {

// Every number a component saves (steps, counts, positions, byte
// lengths, seconds, accuracies, a loss scale) is finite, not negative and
// below 2^53; anything else in a state file is damage, not a state.
inline absl::Status CheckSavedNumbers(const nlohmann::json& json, absl::string_view what) {
  if (!json.is_object()) return absl::OkStatus();
  for (const auto& [key, value] : json.items()) {
    if (!value.is_number()) continue;
    const double v = value.get<double>();
    if (!(v >= 0 && v < 9007199254740992.0)) {
      return absl::DataLossError(absl::StrCat("malformed ", what, ": ", key, " is ", value.dump(),
                                              ", which no run saves"));
    }
  }
  return absl::OkStatus();
}

// `json` as a T; a missing or mistyped field, or a number no run saves, is
// a DataLoss error naming `what` (e.g. "the evaluation state").
template <class T>
absl::StatusOr<T> ReadSavedState(const nlohmann::json& json, absl::string_view what) {
  if (absl::Status numbers = CheckSavedNumbers(json, what); !numbers.ok()) return numbers;
  try {
    return json.get<T>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("malformed ", what, " (", e.what(), ")"));
  }
}

}  // namespace pbert
