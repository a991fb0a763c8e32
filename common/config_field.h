// What an option struct needs to list its fields for the config (common/
// config.h), without YAML: the checks on one field's value. A library's
// options include this header only; the YAML reader and writer visit them.
//
//   struct LoaderOptions {
//     int threads = 1;
//     template <class V> void Visit(V& v) {
//       v.Field("loader_threads", &threads, "background threads", config::InRange(1, 64));
//     }
//   };
//
// Enum fields list their choices once, with the enum (common/choices.h);
// v.Include(&other) visits another struct's fields in the same section.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/choices.h"

namespace pbert::config {

// A check on one field's value: returns "" when fine, else what is wrong and
// what would be right.
template <class T>
using Check = std::function<std::string(const T&)>;

template <class T>
Check<T> AtLeast(T lo) {
  return [lo](const T& v) { return v >= lo ? "" : absl::StrCat("must be >= ", lo); };
}

template <class T>
Check<T> Above(T lo) {
  return [lo](const T& v) { return v > lo ? "" : absl::StrCat("must be > ", lo); };
}

template <class T>
Check<T> InRange(T lo, T hi) {
  return [lo, hi](const T& v) {
    return (v >= lo && v <= hi) ? "" : absl::StrCat("must be in [", lo, ", ", hi, "]");
  };
}

// For string fields whose choices come from a registry (the packing
// algorithms); enums list theirs with ChoicesOf instead.
Check<std::string> OneOf(std::vector<std::string> choices);

}  // namespace pbert::config
