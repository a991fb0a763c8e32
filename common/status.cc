#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace pbert {

absl::Status ErrnoError(absl::string_view what, int errno_value) {
  std::string message = absl::StrCat(what, ": ", std::strerror(errno_value));
  switch (errno_value) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    // A path the system cannot take as given: the user's to change.
    case ENAMETOOLONG:
    case ELOOP:
    case ENOTDIR:
    case EISDIR:
    case EROFS:
      return absl::InvalidArgumentError(message);
    case ENOSPC:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string FirstLine(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  const std::string what = FirstLine(e);
  return what.find("not enough memory") != std::string::npos ||
         what.find("out of memory") != std::string::npos;
}

}  // namespace pbert
