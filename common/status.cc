#include "common/status.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace pbert {

namespace {

// The process limit behind an errno, in words: "" if none is.
std::string LimitOf(int errno_value) {
  struct rlimit limit {};
  if (errno_value == EFBIG && getrlimit(RLIMIT_FSIZE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    return absl::StrCat(" (files may grow to ", limit.rlim_cur,
                        " bytes in this process: raise ulimit -f)");
  }
  if (errno_value == EMFILE && getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    return absl::StrCat(" (this process may open ", limit.rlim_cur,
                        " files at once: raise ulimit -n)");
  }
  if (errno_value == ENFILE) return " (the system's limit of open files is reached)";
  // A mapping or allocation the address-space limit refused.
  if (errno_value == ENOMEM && getrlimit(RLIMIT_AS, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    return absl::StrCat(" (the address space is limited to ", limit.rlim_cur >> 20,
                        " MiB in this process: raise ulimit -v)");
  }
  return "";
}

}  // namespace

absl::Status ErrnoError(absl::string_view what, int errno_value) {
  std::string message =
      absl::StrCat(what, ": ", std::strerror(errno_value), LimitOf(errno_value));
  switch (errno_value) {
    case EFBIG:
    case EMFILE:
    case ENFILE:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
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
    case ENOMEM:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string FirstLine(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

std::string NameList(const std::vector<std::string>& names, size_t shown) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", names[i]);
  }
  if (names.size() > shown) absl::StrAppend(&out, " and ", names.size() - shown, " more");
  return out;
}

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  const std::string what = FirstLine(e);
  // LibTorch's allocators: "not enough memory" (1.13's CPU), "can't
  // allocate memory" (2.x's CPU, errno ENOMEM), "out of memory" (CUDA).
  return what.find("not enough memory") != std::string::npos ||
         what.find("can't allocate memory") != std::string::npos ||
         what.find("out of memory") != std::string::npos;
}

}  // namespace pbert
