// JSON and YAML as packed-bert reads them: every reader bounds a file's
// size and nesting before any parser or walk recurses over it. A value
// nested a million deep overflows the stack of any recursive reader (a
// segfault, not an error), and a YAML alias that refers to its own anchor
// makes a tree without end; both are refused here, in one line naming the
// file and the limit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace YAML {
class Node;
}

namespace pbert {

// The deepest nesting of any file packed-bert writes is 5 (a store's
// shard list, a trainer state's loader part); 64 leaves room for what a
// person writes by hand and is far below what a recursive reader's stack
// takes.
inline constexpr int kMaxNesting = 64;

// The deepest nesting of `text` read as JSON: brackets and braces outside
// strings, in one pass (text that is not JSON gets some number; the parser
// says what is wrong with it).
int JsonNesting(absl::string_view text);

// Whether `text` (`name`: the file it came from) is at most `max_bytes`
// long and nests at most `max_depth` levels; an error names the file and
// the limit (InvalidArgument: exit 2).
absl::Status CheckJsonText(absl::string_view text, absl::string_view name, size_t max_bytes,
                           int max_depth = kMaxNesting);

// Parses `text` after CheckJsonText. A syntax error is a DataLoss error
// naming `name` and where the parser stopped.
template <typename Json = nlohmann::json>
absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view name, size_t max_bytes,
                               int max_depth = kMaxNesting) {
  if (absl::Status checked = CheckJsonText(text, name, max_bytes, max_depth); !checked.ok()) {
    return checked;
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(name, " is not valid JSON (", e.what(), ")"));
  }
}

// `value` as the integer type T, or nlohmann's type_error (302) when it is
// not a JSON number holding an integer within T's range. nlohmann's own
// get<T>() converts a fraction by truncating it and a float out of T's
// range with undefined behaviour (2.9e19 as a uint64_t); every integer a
// reader takes from a file goes through here instead.
template <typename T, typename Json>
T IntegerOf(const Json& value) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using Limits = std::numeric_limits<T>;
  bool fits = false;
  T out = 0;
  if (value.is_number_unsigned()) {
    const uint64_t v = value.template get<uint64_t>();
    fits = v <= static_cast<uint64_t>(Limits::max());
    out = static_cast<T>(v);
  } else if (value.is_number_integer()) {
    const int64_t v = value.template get<int64_t>();
    fits = v >= 0 ? static_cast<uint64_t>(v) <= static_cast<uint64_t>(Limits::max())
                  : Limits::is_signed && v >= static_cast<int64_t>(Limits::min());
    out = static_cast<T>(v);
  } else if (value.is_number_float()) {
    // 12.0 is the integer 12; the bounds are powers of two, exact in double.
    const double v = value.template get<double>();
    const double top = std::ldexp(1.0, Limits::digits);
    fits = std::trunc(v) == v && v < top && (Limits::is_signed ? v >= -top : v >= 0);
    if (fits) out = static_cast<T>(v);
  }
  if (!fits) {
    throw Json::type_error::create(
        302, absl::StrCat("expected an integer from ", +Limits::min(), " to ", +Limits::max(),
                          ", found ",
                          value.is_number() ? value.dump() : std::string("a ") + value.type_name()),
        &value);
  }
  return out;
}

// `value`, an array, as integers of type T (IntegerOf each).
template <typename T, typename Json>
std::vector<T> IntegersOf(const Json& value) {
  if (!value.is_array()) {
    throw Json::type_error::create(302, absl::StrCat("expected an array of integers, found ",
                                                     value.type_name()),
                                   &value);
  }
  std::vector<T> out;
  out.reserve(value.size());
  for (const auto& element : value) out.push_back(IntegerOf<T>(element));
  return out;
}

// Walks a YAML tree once, before anything else does: refuses nesting deeper
// than `max_depth`, an alias inside the node it names (a cycle), and more
// than `max_values` values once aliases are expanded (an "alias bomb" of a
// few hundred bytes). Iterative: its own stack is on the heap.
absl::Status CheckYamlTree(const YAML::Node& root, absl::string_view name, int64_t max_values,
                           int max_depth = kMaxNesting);

}  // namespace pbert
