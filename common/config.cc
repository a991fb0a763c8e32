#include "common/config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/status.h"
#include "common/structured_text.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/parser.h"

namespace pbert::config {
Check<std::string> OneOf(std::vector<std::string> choices) {
  return [choices](const std::string& v) -> std::string {
    if (std::find(choices.begin(), choices.end(), v) != choices.end()) return "";
    return absl::StrCat("'", v, "' is not one of: ", ChoicesHint(choices, v));
  };
}

std::string ShortestText(double value) {
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  return error == std::errc() ? std::string(text, end) : absl::StrCat(value);
}

Reader::Reader(YAML::Node node, std::string path, const Sources* sources)
    : node_(node), path_(std::move(path)), sources_(sources) {}

bool Reader::Lookup(const std::string& key, YAML::Node* value, YAML::Node* key_node) const {
  if (!node_.IsMap()) return false;
  for (const auto& entry : node_) {
    if (entry.first.Scalar() != key) continue;
    value->reset(entry.second);
    if (key_node != nullptr) key_node->reset(entry.first);
    return true;
  }
  return false;
}

std::string Reader::PathOf(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

std::string Reader::Where(const std::string& key, const YAML::Node& node) const {
  std::string path = PathOf(key);
  // An override of this key, or of a section holding it, wins.
  for (const auto& [overridden, flag] : sources_->overrides) {
    if (path == overridden || absl::StartsWith(overridden, path + ".")) return flag;
  }
  return InFile(node);
}

std::string Reader::InFile(const YAML::Node& node) const {
  if (node.IsDefined() && !node.Mark().is_null() && !sources_->file.empty()) {
    return absl::StrCat(sources_->file, ":", node.Mark().line + 1, ":", node.Mark().column + 1);
  }
  return sources_->file.empty() ? "default config" : absl::StrCat(sources_->file, " (default)");
}

void Reader::Fail(const std::string& key, const YAML::Node& node, const std::string& what) {
  if (!status_.ok()) return;
  status_ =
      absl::InvalidArgumentError(absl::StrCat(Where(key, node), ": ", PathOf(key), ": ", what));
}

namespace {

// Whether `text` has `word` as a whole word (not inside a longer name).
bool MentionsWord(const std::string& text, const std::string& word) {
  auto part_of_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const size_t end = at + word.size();
    if ((at == 0 || !part_of_name(text[at - 1])) &&
        (end == text.size() || !part_of_name(text[end]))) {
      return true;
    }
  }
  return false;
}

}  // namespace

void Reader::FailSection(const std::string& key, const YAML::Node& node, const std::string& what) {
  if (!status_.ok()) return;
  const std::string path = PathOf(key);
  std::vector<std::string> flags;
  for (const auto& [overridden, flag] : sources_->overrides) {
    if (absl::StartsWith(overridden, path + ".") &&
        MentionsWord(what, overridden.substr(path.size() + 1))) {
      flags.push_back(flag);
    }
  }
  const std::string where = flags.empty() ? InFile(node) : absl::StrJoin(flags, ", ");
  status_ = absl::InvalidArgumentError(absl::StrCat(where, ": ", path, ": ", what));
}

absl::Status Reader::Finish() {
  if (!status_.ok() || !node_.IsMap()) return status_;
  for (const auto& entry : node_) {
    std::string key = entry.first.as<std::string>();
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    const std::string closest = Closest(known_, key);
    const std::string hint = closest.empty()
                                 ? absl::StrCat("; known keys here: ", absl::StrJoin(known_, ", "))
                                 : absl::StrCat("; did you mean '", closest, "'?");
    Fail(key, entry.first, absl::StrCat("unknown key", hint));
    break;
  }
  return status_;
}

namespace {

void FlattenInto(const YAML::Node& node, const std::string& prefix,
                 std::map<std::string, std::string>* out) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      std::string key = entry.first.Scalar();
      FlattenInto(entry.second, prefix.empty() ? key : absl::StrCat(prefix, ".", key), out);
    }
    return;
  }
  YAML::Emitter emitter;
  emitter << YAML::Flow << node;
  (*out)[prefix] = emitter.c_str();
}

}  // namespace

std::map<std::string, std::string> Flatten(const YAML::Node& root) {
  std::map<std::string, std::string> out;
  FlattenInto(root, "", &out);
  return out;
}

bool ReadsBackPlain(const std::string& text) {
  if (text.empty()) return true;  // the emitter quotes it itself
  try {
    const YAML::Node node = YAML::Load(text);
    return node.IsScalar() && node.Scalar() == text;
  } catch (const YAML::Exception&) {
    return false;
  }
}

namespace {

// A config holds a few hundred values in three levels; CheckYamlTree
// refuses a tree past these limits (an alias bomb, an alias cycle, deep
// nesting) before any walk below, and a file past kMaxConfigBytes is not read.
// The bytes are bounded first because YAML's parser spends time and memory
// far beyond the text's size on a long flow list (6.5 MB took 25 s and 3.7
// GB before its values were counted).
constexpr int64_t kMaxValues = 100'000;
constexpr size_t kMaxConfigBytes = size_t{256} << 10;

}  // namespace

std::vector<Override> SetFlags(const std::vector<std::string>& assignments) {
  std::vector<Override> out;
  for (const std::string& a : assignments) out.push_back({a, absl::StrCat("--set ", a)});
  return out;
}

absl::Status ApplyOverrides(const std::vector<Override>& overrides, YAML::Node* root,
                            Sources* sources) {
  for (const Override& o : overrides) {
    const std::string& text = o.assignment;
    const std::string& flag = o.origin;
    size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": expected section.key=value, e.g. --set run.threads=2"));
    }
    std::string path = text.substr(0, eq);
    std::vector<std::string> parts = absl::StrSplit(path, '.');
    if (std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": empty part in key '", path, "'"));
    }
    const std::string typed = text.substr(eq + 1);
    if (typed.size() > kMaxConfigBytes) {
      // The flag as given, its value left out.
      absl::string_view given = flag;
      absl::ConsumeSuffix(&given, typed);
      return absl::InvalidArgumentError(absl::StrCat(given, "...: a value of ", typed.size(),
                                                     " bytes, over the ", kMaxConfigBytes,
                                                     " a whole config may have"));
    }
    YAML::Node value;
    try {
      // "key=" clears a string: an empty value, not YAML's null.
      value = typed.empty() ? YAML::Node(std::string()) : YAML::Load(typed);
    } catch (const YAML::Exception&) {
      // Not YAML ("*draft" reads as an alias): the text itself, which a
      // string field takes and any other field names as what it got.
      value = YAML::Node(typed);
    }
    RETURN_IF_ERROR(CheckYamlTree(value, flag, kMaxValues));
    sources->literal[path] = typed;
    if (!root->IsDefined() || root->IsNull()) *root = YAML::Node(YAML::NodeType::Map);
    YAML::Node current;
    current.reset(*root);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      YAML::Node next = current[parts[i]];
      if (next.IsDefined() && !next.IsNull() && !next.IsMap()) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": '", absl::StrJoin(parts.begin(), parts.begin() + i + 1, "."),
                         "' is a value, not a section"));
      }
      if (!next.IsDefined() || next.IsNull()) current[parts[i]] = YAML::Node(YAML::NodeType::Map);
      YAML::Node child = current[parts[i]];
      current.reset(child);
    }
    current[parts.back()] = value;
    sources->overrides[path] = flag;
  }
  return absl::OkStatus();
}

namespace {

// YAML parsers keep both entries of a key written twice; a config is
// refused instead, naming both lines (a second `run:` section too).
absl::Status CheckNoDuplicateKeys(const YAML::Node& node, const std::string& file,
                                  const std::string& path) {
  if (node.IsSequence()) {
    for (const auto& item : node) RETURN_IF_ERROR(CheckNoDuplicateKeys(item, file, path));
  }
  if (!node.IsMap()) return absl::OkStatus();
  std::map<std::string, int> first_line;
  for (const auto& entry : node) {
    const int line = entry.first.Mark().line + 1;
    if (!entry.first.IsScalar()) {  // YAML's complex key, `? [a, b]`
      return absl::InvalidArgumentError(absl::StrCat(
          file, ":", line, ":", entry.first.Mark().column + 1, ": a key that is ",
          entry.first.IsMap() ? "a map" : entry.first.IsSequence() ? "a list" : "empty",
          path.empty() ? "" : absl::StrCat(" in ", path), "; a config's keys are names"));
    }
    const std::string key = entry.first.Scalar();
    const std::string full = path.empty() ? key : absl::StrCat(path, ".", key);
    auto [it, inserted] = first_line.emplace(key, line);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(file, ":", line, ":",
                                                     entry.first.Mark().column + 1, ": ", full,
                                                     ": given twice (first at line ", it->second,
                                                     "); keep one"));
    }
    RETURN_IF_ERROR(CheckNoDuplicateKeys(entry.second, file, full));
  }
  return absl::OkStatus();
}

// The checks of a tree as read, in order: its shape, then its keys.
absl::Status CheckTree(const YAML::Node& root, const std::string& file) {
  RETURN_IF_ERROR(CheckYamlTree(root, file, kMaxValues));
  return CheckNoDuplicateKeys(root, file, "");
}

// YAML's merge key: `<<: *base` (or a list of maps) in a map adds the keys
// of the merged maps it does not set itself; yaml-cpp reads `<<` as a plain
// key. Applied depth first, so merged maps have their own merges applied.
absl::Status ApplyMergeKeys(YAML::Node node, const std::string& file) {
  if (node.IsSequence()) {
    for (YAML::Node item : node) RETURN_IF_ERROR(ApplyMergeKeys(item, file));
  }
  if (!node.IsMap()) return absl::OkStatus();
  std::optional<YAML::Node> merged;
  for (auto entry : node) {
    if (entry.first.Scalar() == "<<") {
      merged = entry.second;
    } else {
      RETURN_IF_ERROR(ApplyMergeKeys(entry.second, file));
    }
  }
  if (!merged) return absl::OkStatus();
  std::vector<YAML::Node> sources;
  if (merged->IsMap()) sources.push_back(*merged);
  if (merged->IsSequence()) {
    for (YAML::Node item : *merged) sources.push_back(item);
  }
  if (sources.empty() ||
      std::any_of(sources.begin(), sources.end(), [](const YAML::Node& n) { return !n.IsMap(); })) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ":", merged->Mark().line + 1, ":", merged->Mark().column + 1,
                     ": '<<' merges maps (<<: *name or <<: [*a, *b]); this is not one"));
  }
  node.remove("<<");
  // The first map listed wins over later ones, the map's own keys over all.
  for (YAML::Node source : sources) {
    RETURN_IF_ERROR(ApplyMergeKeys(source, file));
    for (auto entry : source) {
      const YAML::Node& present = node;  // (a const look-up adds no key)
      if (!present[entry.first.Scalar()].IsDefined()) {
        node.force_insert(entry.first, entry.second);
      }
    }
  }
  return absl::OkStatus();
}

// Where a YAML document holds something: its first event that is not a
// null (an empty document, or the end of the stream, holds nothing).
class FirstContent : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> mark;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Saw(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Saw(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Saw(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Saw(mark);
  }
  void OnMapEnd() override {}

 private:
  void Saw(const YAML::Mark& at) {
    if (!mark) mark = at;
  }
};

// The one YAML document of `text`. Tabs in indentation (YAML's error for
// them names no tab) and a second document (which YAML::Load would drop
// silently) are errors naming their line.
absl::StatusOr<YAML::Node> LoadOneDocument(const std::string& text, const std::string& name) {
  if (text.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is ", text.size(),
                                                   " bytes, over the ", kMaxConfigBytes,
                                                   " a config may have; a config is a few KB"));
  }
  // One pass: each line is looked at up to its first non-blank character.
  size_t line = 1, start = 0;
  bool whole = !absl::StartsWith(text, kDumpFirstLine);
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    if (!whole && absl::string_view(text).substr(start, end - start) == kDumpLastLine) whole = true;
    const size_t first = std::min(text.find_first_not_of(" \t", start), end);
    const size_t tab = absl::string_view(text).substr(start, first - start).find('\t');
    if (tab != absl::string_view::npos && first < end && text[first] != '#') {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", line, ":", tab + 1,
                                                     ": a tab indents this line; YAML indents with "
                                                     "spaces only"));
    }
    start = end + 1;
    ++line;
  }
  if (!whole) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": cut short: a config packed-bert writes ends with the line '", kDumpLastLine,
        "', which this one lacks after ", line - 1, " lines; copy it again whole (or delete its "
        "first line to read what is left, the keys it lost taking their defaults)"));
  }
  // The first document, then whether a second holds anything: two
  // documents at most are parsed (yaml-cpp 0.7's LoadAll, which reads them
  // all, never returns on some damaged texts: yaml-cpp#1319).
  YAML::Node first = YAML::Load(text);
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  FirstContent skipped, second;
  if (parser.HandleNextDocument(skipped) && parser.HandleNextDocument(second) && second.mark) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ":", second.mark->line + 1,
        ": a second YAML document (after '---'); a config file holds one: merge them, or give "
        "the other to its own command"));
  }
  return first;
}

}  // namespace

namespace {

// yaml-cpp's words for the mistakes people make in a config, with what
// the mistake likely is, then its words in brackets; others as they are.
std::string YamlAdvice(const std::string& message) {
  static constexpr std::pair<const char*, const char*> kAdvice[] = {
      {"end of map not found",
       "a line indented unlike the keys of its section (the keys of one section line up)"},
      {"end of sequence not found",
       "a line indented unlike the items of its list (the items of one list line up)"},
      {"end of map flow not found", "a '{' that no '}' closes"},
      {"end of sequence flow not found", "a '[' list that no ']' closes"},
      {"illegal map value",
       "a ':' where no key can be (a key indented under a value, or a value holding ': ' that "
       "needs quotes)"},
      {"illegal block entry", "a '- ' list item where a key belongs (indent it under its key)"},
      {"illegal map key", "a '?' key where none can be"},
      {"illegal EOF in scalar", "a quote that is not closed"},
      {"unknown escape character",
       "a backslash in a double-quoted value that starts no escape (use single quotes, or "
       "'\\\\')"},
      {"the referenced anchor is not defined",
       "an alias (*name) with no anchor (&name) before it"},
      {"illegal flow end", "a ']' or '}' that closes nothing"},
  };
  for (const auto& [theirs, ours] : kAdvice) {
    if (absl::StartsWith(message, theirs)) return absl::StrCat(ours, " (yaml-cpp: ", message, ")");
  }
  return message;
}

// YAML's own error at its position in `name`, in our words where its are
// not (its guard against deep nesting says "bad file").
absl::Status YamlError(const std::string& name, const YAML::Exception& e) {
  const std::string where = absl::StrCat(name, ":", e.mark.line + 1, ":", e.mark.column + 1);
  if (dynamic_cast<const YAML::DeepRecursion*>(&e) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": values nested deeper than YAML's reader follows; a config nests three"));
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": YAML syntax: ", YamlAdvice(e.msg)));
}

}  // namespace

absl::Status ParseTree(const std::string& text, const std::string& name, YAML::Node* root,
                       Sources* sources) {
  sources->file = name;
  try {
    ASSIGN_OR_RETURN(*root, LoadOneDocument(text, name));
    RETURN_IF_ERROR(CheckTree(*root, name));
    RETURN_IF_ERROR(ApplyMergeKeys(*root, name));
  } catch (const YAML::Exception& e) {
    return YamlError(name, e);
  }
  if (root->IsNull()) *root = YAML::Node(YAML::NodeType::Map);
  if (!root->IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the top level must be a map of sections"));
  }
  return absl::OkStatus();
}

absl::Status LoadTree(const std::string& file, const std::vector<Override>& overrides,
                      YAML::Node* root, Sources* sources) {
  sources->file = file;
  *root = YAML::Node(YAML::NodeType::Map);
  if (!file.empty()) {
    if (::access(file.c_str(), R_OK) != 0) {  // (not opened: a named pipe would block)
      return absl::NotFoundError(absl::StrCat(
          "config file '", file, "' not found or not readable; see configs/ for examples"));
    }
    RETURN_IF_ERROR(CheckReadableFile(file, "config file"));
    ASSIGN_OR_RETURN(const std::string text, ReadFile(file));
    try {
      ASSIGN_OR_RETURN(YAML::Node loaded, LoadOneDocument(text, file));
      RETURN_IF_ERROR(CheckTree(loaded, file));
      RETURN_IF_ERROR(ApplyMergeKeys(loaded, file));
      if (loaded.IsMap()) {
        *root = loaded;
      } else if (loaded.IsDefined() && !loaded.IsNull()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ":", loaded.Mark().line + 1, ": the top level must be a map of sections"));
      }
    } catch (const YAML::Exception& e) {
      return YamlError(file, e);
    }
  }
  return ApplyOverrides(overrides, root, sources);
}

}  // namespace pbert::config
