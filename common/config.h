// Typed experiment configs from YAML.
//
// A config is a struct of sections; each section is a struct with defaults
// that lists its fields once, in a Visit() template (common/config_field.h),
// and may check them together in an optional Validate():
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

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/choices.h"
#include "common/config_field.h"
#include "yaml-cpp/yaml.h"

namespace pbert::config {

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
  // key path -> the override's value as typed: a string field (a path, a
  // name) takes it as it is, not as YAML ("run #1", "*draft", a newline).
  std::map<std::string, std::string> literal;
};

// The help text of an enum field: its choices, then `help`.
template <class E>
std::string FieldHelp(const std::string& help) {
  std::string choices = JoinChoices(ChoiceNames<E>());
  return help.empty() ? choices : absl::StrCat(choices, ": ", help);
}

// Whether `text` written as a plain YAML scalar reads back as itself (not
// "st #1", "*a", "[x]", "null", " padded ").
bool ReadsBackPlain(const std::string& text);

// The shortest text that reads back as exactly `value` ("0.1", "4e-04").
std::string ShortestText(double value);

// Visitor that fills a config from a YAML tree.
class Reader {
 public:
  Reader(YAML::Node node, std::string path, const Sources* sources);

  template <class T>
  void Field(const char* key, T* value, const std::string& help, Check<T> check = nullptr);

  template <class S>
  void Section(const char* key, S* section, const char* help);

  // Another struct's fields, in this section.
  template <class S>
  void Include(S* fields) {
    fields->Visit(*this);
  }

  // The first error met, or the first key that no field claimed.
  absl::Status Finish();

 private:
  // The value at `key` of this map (and the key itself, whose position
  // errors about a missing value point at), if the key is there.
  bool Lookup(const std::string& key, YAML::Node* value, YAML::Node* key_node = nullptr) const;
  std::string PathOf(const std::string& key) const;
  // "file.yaml:3:7" or "--set a.b=1" for the value at `key` (or this map).
  std::string Where(const std::string& key, const YAML::Node& node) const;
  // Where `node` is in the config file, or that it is a default.
  std::string InFile(const YAML::Node& node) const;
  void Fail(const std::string& key, const YAML::Node& node, const std::string& what);
  // A section's own check (Validate) failed: names the flags that set the
  // keys its message mentions, else where the section is.
  void FailSection(const std::string& key, const YAML::Node& node, const std::string& what);
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
    *out_ << YAML::Key << key << YAML::Value;
    if constexpr (HasChoices<T>::value) {
      *out_ << NameOf(*value) << YAML::Comment(FieldHelp<T>(help));
    } else if constexpr (std::is_floating_point_v<T>) {
      *out_ << ShortestText(*value) << YAML::Comment(help);
    } else if constexpr (std::is_same_v<T, std::string>) {
      // Quoted where the text would not read back as itself ("st #1", "*a").
      if (!ReadsBackPlain(*value)) *out_ << YAML::DoubleQuoted;
      *out_ << *value << YAML::Comment(help);
    } else {
      *out_ << *value << YAML::Comment(help);
    }
  }

  template <class S>
  void Section(const char* key, S* section, const char* help) {
    *out_ << YAML::Newline << YAML::Comment(help) << YAML::Key << key << YAML::Value
          << YAML::BeginMap;
    section->Visit(*this);
    *out_ << YAML::EndMap;
  }

  template <class S>
  void Include(S* fields) {
    fields->Visit(*this);
  }

 private:
  YAML::Emitter* out_;
};

// Parses the overrides into the YAML tree `root` (values are read as YAML,
// so lists like "[1, 2]" work; text that is no YAML stays text) and records
// them, and their text as typed, in `sources`.
absl::Status ApplyOverrides(const std::vector<Override>& overrides, YAML::Node* root,
                            Sources* sources);

// Reads `file` (may be "" for defaults only) and the overrides into a tree.
absl::Status LoadTree(const std::string& file, const std::vector<Override>& overrides,
                      YAML::Node* root, Sources* sources);

// Parses `text`, a config written by Dump, into a tree; `name` says where
// it came from in errors.
absl::Status ParseTree(const std::string& text, const std::string& name, YAML::Node* root,
                       Sources* sources);

// Every leaf of a YAML tree as "section.key" -> its value in flow style,
// e.g. {"run.seed": "1", "prepare.inputs": "[a, b]"}.
std::map<std::string, std::string> Flatten(const YAML::Node& root);

// Fills a config struct whose Visit() lists top-level sections from `root`.
template <class C>
absl::Status Read(const YAML::Node& root, const Sources& sources, C* config) {
  Reader reader(root, "", &sources);
  config->Visit(reader);
  return reader.Finish();
}

// Loads a config struct from `file` ("" for the defaults) and `overrides`.
// `given`, if not null, gets the keys the file or overrides set (as
// "section.key"); the others kept their defaults.
template <class C>
absl::Status Load(const std::string& file, const std::vector<Override>& overrides, C* config,
                  std::set<std::string>* given = nullptr) {
  YAML::Node root;
  Sources sources;
  absl::Status status = LoadTree(file, overrides, &root, &sources);
  if (!status.ok()) return status;
  if (given != nullptr) {
    for (const auto& [key, value] : Flatten(root)) given->insert(key);
  }
  return Read(root, sources, config);
}

// Loads a config struct from YAML text (a saved config.yaml's).
template <class C>
absl::Status LoadText(const std::string& text, const std::string& name, C* config) {
  YAML::Node root;
  Sources sources;
  absl::Status status = ParseTree(text, name, &root, &sources);
  if (!status.ok()) return status;
  return Read(root, sources, config);
}

// The first and last lines of every config Dump writes. A config that
// begins with the first and lacks the last was cut short (a copy or a disk
// that stopped half-way) and is refused, not read as defaults for the keys
// it lost.
inline constexpr char kDumpFirstLine[] = "# packed-bert config: every key, with its value in effect";
inline constexpr char kDumpLastLine[] = "# end of the packed-bert config";

// The effective config as YAML text.
template <class C>
std::string Dump(const C& config) {
  C copy = config;
  YAML::Emitter out;
  out << YAML::BeginMap;
  Writer writer(&out);
  copy.Visit(writer);
  out << YAML::EndMap;
  return std::string(kDumpFirstLine) + "\n" + out.c_str() + "\n" + kDumpLastLine + "\n";
}

// ---- implementation of the templates ----

template <class S, class = void>
struct HasValidate : std::false_type {};
template <class S>
struct HasValidate<S, std::void_t<decltype(std::declval<const S&>().Validate())>>
    : std::true_type {};

template <class T>
bool Reader::Decode(const YAML::Node& node, T* out, std::string* expected) {
  if constexpr (HasChoices<T>::value) {
    *expected = absl::StrCat("one of: ", JoinChoices(ChoiceNames<T>()));
    if (!node.IsScalar()) return false;
    for (const Choice<T>& c : Choices<T>()) {
      if (c.name == node.Scalar()) {
        *out = c.value;
        return true;
      }
    }
    return false;
  } else {
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
    } catch (const YAML::Exception&) {
      return false;
    }
    if constexpr (std::is_floating_point_v<T>) {
      // YAML's .inf and .nan are numbers, but no setting means them; nor
      // does a number written non-zero that is below what a double holds
      // in full (1e-400 reads as 0, 1e-320 as a subnormal).
      *expected = "a finite number";
      if (!std::isfinite(*out)) return false;
      if (*out != 0 && std::fabs(*out) < std::numeric_limits<T>::min()) {
        *expected = "a number a double holds in full (at least 2.2e-308 in size)";
        return false;
      }
      const std::string& text = node.Scalar();
      const std::string mantissa = text.substr(0, text.find_first_of("eE"));
      if (*out == 0 && mantissa.find_first_of("123456789") != std::string::npos) {
        *expected = "a number a double holds in full (at least 2.2e-308 in size)";
        return false;
      }
    }
    return true;
  }
}

template <class T>
void Reader::Field(const char* key, T* value, const std::string& help, Check<T> check) {
  (void)help;
  known_.push_back(key);
  if (!status_.ok()) return;
  YAML::Node child, key_node;
  bool present = Lookup(key, &child, &key_node);
  if constexpr (std::is_same_v<T, std::string>) {
    if (auto typed = sources_->literal.find(PathOf(key)); typed != sources_->literal.end()) {
      *value = typed->second;
      if (std::string problem = check ? check(*value) : ""; !problem.empty()) {
        Fail(key, child, problem);
      }
      return;
    }
  }
  if (present && !child.IsNull()) {
    std::string expected;
    if (!Decode(child, value, &expected)) {
      if constexpr (HasChoices<T>::value) {
        if (child.IsScalar()) {
          Fail(key, child, absl::StrCat("'", child.Scalar(), "' is not one of: ",
                                        ChoicesHint(ChoiceNames<T>(), child.Scalar())));
          return;
        }
      }
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
  if constexpr (HasValidate<S>::value) {
    absl::Status valid = section->Validate();
    if (!valid.ok()) FailSection(key, child, std::string(valid.message()));
  }
}

}  // namespace pbert::config
