// Typed experiment configs from YAML.
//
// A config is a struct of sections; each section is a struct with defaults
// that lists its fields once, in a Visit() template:
//
//   struct RunConfig {
//     int64_t threads = 0;
//     template <class V> void Visit(V& v) {
//       v.Field("threads", &threads, "intra-op threads; 0 = all CPUs", AtLeast<int64_t>(0));
//     }
//     absl::Status Validate() const { return absl::OkStatus(); }  // cross-field checks
//   };
//
// The same list drives loading (type checks, unknown keys, per-field checks,
// each error naming the key and its file:line or --set flag) and dumping.
// Priority: defaults < file < `--set section.key=value`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

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
Check<T> InRange(T lo, T hi) {
  return [lo, hi](const T& v) {
    return (v >= lo && v <= hi) ? "" : absl::StrCat("must be in [", lo, ", ", hi, "]");
  };
}

Check<std::string> OneOf(std::vector<std::string> choices);

// One value given on the command line: `assignment` is "section.key=value",
// `origin` what the user typed, for errors ("--set a.b=1", "--max-len 12").
struct Override {
  std::string assignment;
  std::string origin;
};

// `--set` flags as overrides.
std::vector<Override> SetFlags(const std::vector<std::string>& assignments);

// Where each value came from: "file.yaml:12:5" or the override's origin.
struct Sources {
  std::string file;                              // "" when there is no file
  std::map<std::string, std::string> overrides;  // key path -> origin
};

// Visitor that fills a config from a YAML tree.
class Reader {
 public:
  Reader(YAML::Node node, std::string path, const Sources* sources);

  template <class T>
  void Field(const char* key, T* value, const std::string& help, Check<T> check = nullptr);

  template <class S>
  void Section(const char* key, S* section, const char* help);

  // The first error met, or the first key that no field claimed.
  absl::Status Finish();

 private:
  // The value at `key` of this map (and the key itself, whose position
  // errors about a missing value point at), if the key is there.
  bool Lookup(const std::string& key, YAML::Node* value, YAML::Node* key_node = nullptr) const;
  std::string PathOf(const std::string& key) const;
  // "file.yaml:3:7" or "--set a.b=1" for the value at `key` (or this map).
  std::string Where(const std::string& key, const YAML::Node& node) const;
  void Fail(const std::string& key, const YAML::Node& node, const std::string& what);
  template <class T>
  bool Decode(const YAML::Node& node, T* out, std::string* expected);

  YAML::Node node_;
  std::string path_;
  const Sources* sources_;
  std::vector<std::string> known_;
  absl::Status status_;
};

// Visitor that prints a config as YAML, with each field's help as a comment.
class Writer {
 public:
  explicit Writer(YAML::Emitter* out) : out_(out) {}

  template <class T>
  void Field(const char* key, T* value, const std::string& help, Check<T> = nullptr) {
    *out_ << YAML::Key << key << YAML::Value << *value << YAML::Comment(help);
  }

  template <class S>
  void Section(const char* key, S* section, const char* help) {
    *out_ << YAML::Newline << YAML::Comment(help) << YAML::Key << key << YAML::Value
          << YAML::BeginMap;
    section->Visit(*this);
    *out_ << YAML::EndMap;
  }

 private:
  YAML::Emitter* out_;
};

// Parses the overrides into the YAML tree `root` (values are read as YAML,
// so lists like "[1, 2]" work) and records them in `sources`.
absl::Status ApplyOverrides(const std::vector<Override>& overrides, YAML::Node* root,
                            Sources* sources);

// Reads `file` (may be "" for defaults only) and the overrides into a tree.
absl::Status LoadTree(const std::string& file, const std::vector<Override>& overrides,
                      YAML::Node* root, Sources* sources);

// Loads a config struct whose Visit() lists top-level sections.
template <class C>
absl::Status Load(const std::string& file, const std::vector<Override>& overrides, C* config) {
  YAML::Node root;
  Sources sources;
  absl::Status status = LoadTree(file, overrides, &root, &sources);
  if (!status.ok()) return status;
  Reader reader(root, "", &sources);
  config->Visit(reader);
  return reader.Finish();
}

// The effective config as YAML text.
template <class C>
std::string Dump(const C& config) {
  C copy = config;
  YAML::Emitter out;
  out << YAML::BeginMap;
  Writer writer(&out);
  copy.Visit(writer);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

// Every leaf of a YAML tree as "section.key" -> its value in flow style,
// e.g. {"run.seed": "1", "prepare.inputs": "[a, b]"}.
std::map<std::string, std::string> Flatten(const YAML::Node& root);

// ---- implementation of the templates ----

template <class T>
bool Reader::Decode(const YAML::Node& node, T* out, std::string* expected) {
  if constexpr (std::is_same_v<T, bool>) {
    *expected = "true or false";
  } else if constexpr (std::is_integral_v<T>) {
    *expected = "an integer";
  } else if constexpr (std::is_floating_point_v<T>) {
    *expected = "a number";
  } else if constexpr (std::is_same_v<T, std::string>) {
    *expected = "a string";
  } else {
    *expected = "a list of scalars";
  }
  if constexpr (std::is_same_v<T, std::string> || std::is_arithmetic_v<T>) {
    if (!node.IsScalar()) return false;
  } else {
    if (!node.IsSequence()) return false;
  }
  try {
    *out = node.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

template <class T>
void Reader::Field(const char* key, T* value, const std::string& help, Check<T> check) {
  (void)help;
  known_.push_back(key);
  if (!status_.ok()) return;
  YAML::Node child, key_node;
  bool present = Lookup(key, &child, &key_node);
  if (present && !child.IsNull()) {
    std::string expected;
    if (!Decode(child, value, &expected)) {
      std::string got = child.IsScalar() ? absl::StrCat("'", child.Scalar(), "'")
                                         : (child.IsMap() ? "a map" : "a list");
      Fail(key, child, absl::StrCat("expected ", expected, ", got ", got));
      return;
    }
  } else if (present) {
    Fail(key, key_node, "has no value; give one or delete the key to use the default");
    return;
  }
  if (check) {
    std::string problem = check(*value);
    if (!problem.empty()) Fail(key, child, problem);
  }
}

template <class S>
void Reader::Section(const char* key, S* section, const char* help) {
  (void)help;
  known_.push_back(key);
  if (!status_.ok()) return;
  YAML::Node child;
  bool present = Lookup(key, &child);
  if (present && !child.IsNull() && !child.IsMap()) {
    Fail(key, child, "must be a map of keys (a section)");
    return;
  }
  Reader inner(child, PathOf(key), sources_);
  section->Visit(inner);
  status_ = inner.Finish();
  if (!status_.ok()) return;
  absl::Status valid = section->Validate();
  if (!valid.ok()) Fail(key, child, std::string(valid.message()));
}

}  // namespace pbert::config
