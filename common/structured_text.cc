#include "common/structured_text.h"

#include <yaml-cpp/yaml.h>

#include <utility>
#include <vector>

namespace pbert {

int JsonNesting(absl::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

absl::Status CheckJsonText(absl::string_view text, absl::string_view name, size_t max_bytes,
                           int max_depth) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is ", text.size(), " bytes, over the ", max_bytes,
                     " this reader takes; it is not a file packed-bert wrote"));
  }
  if (const int depth = JsonNesting(text); depth > max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " nests values ", depth, " levels deep, over the limit of ", max_depth,
                     "; it is not a file packed-bert wrote"));
  }
  return absl::OkStatus();
}

absl::Status CheckYamlTree(const YAML::Node& root, absl::string_view name, int64_t max_values,
                           int max_depth) {
  // Depth first with an explicit stack; `path` holds the nodes from the root
  // to the one visited, so that a node met again on its own path (an alias
  // inside its anchor) is a cycle.
  struct Frame {
    YAML::Node node;
    int depth;
  };
  std::vector<Frame> stack{{root, 0}};
  std::vector<YAML::Node> path;
  int64_t values = 0;
  while (!stack.empty()) {
    Frame frame = std::move(stack.back());
    stack.pop_back();
    path.resize(frame.depth);
    const YAML::Node& node = frame.node;
    for (const YAML::Node& above : path) {
      if (above.is(node)) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ":", node.Mark().line + 1, ": an alias (*name) inside the value it names makes "
            "a value without end; write the value out"));
      }
    }
    if (++values > max_values) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": more than ", max_values,
          " values once its aliases (*name) are expanded; a config needs a few hundred: write "
          "the values out"));
    }
    if (frame.depth > max_depth) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", node.Mark().line + 1,
                                                     ": values nested over ", max_depth,
                                                     " levels deep; a config nests three"));
    }
    if (!node.IsSequence() && !node.IsMap()) continue;
    path.push_back(node);
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (node.IsMap()) {
        stack.push_back({it->first, frame.depth + 1});
        stack.push_back({it->second, frame.depth + 1});
      } else {
        stack.push_back({*it, frame.depth + 1});
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pbert
