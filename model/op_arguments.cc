#include "model/op_arguments.h"

#include <ATen/core/jit_type.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pbert::model {

absl::StatusOr<std::vector<c10::IValue>> ArgumentsByName(
    const c10::FunctionSchema& schema,
    const std::vector<std::pair<std::string, c10::IValue>>& named) {
  const std::vector<c10::Argument>& arguments = schema.arguments();
  for (const auto& entry : named) {
    const std::string& name = entry.first;
    const bool known = std::any_of(arguments.begin(), arguments.end(),
                                   [&](const c10::Argument& a) { return a.name() == name; });
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat(schema.name(), " has no argument ", name, " in this LibTorch"));
    }
  }
  std::vector<c10::IValue> stack;
  stack.reserve(arguments.size());
  for (const c10::Argument& argument : arguments) {
    const auto given = std::find_if(named.begin(), named.end(),
                                    [&](const auto& n) { return n.first == argument.name(); });
    if (given != named.end()) {
      stack.push_back(given->second);
    } else if (argument.default_value().has_value()) {
      stack.push_back(*argument.default_value());
    } else if (argument.type()->kind() == c10::TypeKind::OptionalType) {
      stack.emplace_back();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          schema.name(), " needs its argument ", argument.name(), ", which packed-bert does not know"));
    }
  }
  return stack;
}

}  // namespace pbert::model
