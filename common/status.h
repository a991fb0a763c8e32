// Status helpers used at every I/O, config and CLI boundary.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define PBERT_CONCAT_INNER_(a, b) a##b
#define PBERT_CONCAT_(a, b) PBERT_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` yields a non-OK status.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status pbert_status_ = (expr);         \
    if (!pbert_status_.ok()) return pbert_status_; \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, F())`: binds the value of a StatusOr or returns
// its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  PBERT_ASSIGN_OR_RETURN_IMPL_(PBERT_CONCAT_(pbert_statusor_, __LINE__), lhs, expr)

#define PBERT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

namespace pbert {

// Prefixes a status message with context ("reading foo.bin: ...") and keeps
// its code.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

// A status for a failed system call, with errno's text.
absl::Status ErrnoError(absl::string_view what, int errno_value);

// The first line of an exception's message: LibTorch's carry a C++ stack
// trace after it, which is no use to a user.
std::string FirstLine(const std::exception& e);

// Names for a one-line message: the first `shown` of `names`, then "and N
// more" (a file of a million tensors must not make a message of 10 MB).
std::string NameList(const std::vector<std::string>& names, size_t shown = 8);

// Whether `e` is an allocation failure: std::bad_alloc, or LibTorch's
// allocators ("not enough memory", "out of memory").
bool IsOutOfMemory(const std::exception& e);

}  // namespace pbert
