// The state a component saves with each checkpoint: a struct that lists its
// fields once for JSON (nlohmann's NLOHMANN_DEFINE_TYPE_INTRUSIVE), read
// back with one check that every field is there with its type.
#pragma once

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pbert {

// `json` as a T; a missing or mistyped field is a DataLoss error naming
// `what` (e.g. "the evaluation state").
template <class T>
absl::StatusOr<T> ReadSavedState(const nlohmann::json& json, absl::string_view what) {
  try {
    return json.get<T>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("malformed ", what, " (", e.what(), ")"));
  }
}

}  // namespace pbert
