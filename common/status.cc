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
    case ENOSPC:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace pbert
