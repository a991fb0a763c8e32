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
#include <set>
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

// The settings among `given` (the keys a config file or --set gave) that do
// nothing in a run, one line each with why. Each option's component says
// which of its own keys cannot act, and why (e.g. model::ModelConfig::
// Inactive), beside its fields.
class InactiveKeys {
 public:
  explicit InactiveKeys(const std::set<std::string>& given) : given_(given) {}
  // Each of `keys` given.
  void Keys(const std::vector<std::string>& keys, const std::string& why) {
    for (const std::string& key : keys) {
      if (given_.count(key) > 0) lines_.push_back(absl::StrCat(key, " does nothing here: ", why));
    }
  }
  // Every given key of a section (`prefix`, e.g. "mlperf.").
  void Section(const std::string& prefix, const std::string& why) {
    for (const std::string& key : given_) {
      if (key.rfind(prefix, 0) == 0) {
        lines_.push_back(absl::StrCat(key, " does nothing here: ", why));
      }
    }
  }
  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  const std::set<std::string>& given_;
  std::vector<std::string> lines_;
};

}  // namespace pbert::config
