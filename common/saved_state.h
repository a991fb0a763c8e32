// The state a component saves with each checkpoint: a struct that lists its
// fields once for JSON (nlohmann's NLOHMANN_DEFINE_TYPE_INTRUSIVE), read
// back with one check that every field is there with its type.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pbert {

// Every number a component saves, at any depth, is one no run saves
// otherwise: a count (steps, sequences, positions, byte lengths) is an
// integer from 0 to 2^53, and a number written as a float (seconds,
// scores, which a correlation makes negative, a loss scale) lies within
// +-2^31. Anything else in a state file is damage, not a state; the bound
// on floats also keeps nlohmann's unchecked conversion of a float into an
// integer field (3e9 into an int) defined.
inline absl::Status CheckSavedNumbers(const nlohmann::json& json, absl::string_view what) {
  std::vector<std::pair<std::string, const nlohmann::json*>> pending = {{"", &json}};
  while (!pending.empty()) {
    auto [path, value] = std::move(pending.back());
    pending.pop_back();
    if (value->is_structured()) {
      for (const auto& [key, inner] : value->items()) {
        pending.emplace_back(path.empty() ? key : absl::StrCat(path, ".", key), &inner);
      }
      continue;
    }
    if (!value->is_number()) continue;
    const double v = value->get<double>();
    const bool fits = value->is_number_float() ? (v > -2147483648.0 && v < 2147483648.0)
                                               : (v >= 0 && v < 9007199254740992.0);
    if (!fits) {
      return absl::DataLossError(absl::StrCat("malformed ", what, ": ", path, " is ",
                                              value->dump(), ", which no run saves"));
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
