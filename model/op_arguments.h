// Calling a LibTorch operator by its schema's argument names, for the
// private operators whose arguments change between versions (a version
// adds an argument with a default; model/attention.cc's cuDNN attention):
// the call is built against the schema the running LibTorch registered, not
// the one this file was compiled with.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pbert::model {

// The arguments of `schema` in its order, ready for a boxed call: each
// from `named` by its name; an argument not named takes its default, an
// optional one without a default None. An error names a named argument the
// schema lacks, or one it needs that is not named.
absl::StatusOr<std::vector<c10::IValue>> ArgumentsByName(
    const c10::FunctionSchema& schema,
    const std::vector<std::pair<std::string, c10::IValue>>& named);

}  // namespace pbert::model
