#include "common/append_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status.h"

namespace pbert {

namespace {

absl::Status NotALog(const std::string& path, unsigned mode) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is ", NotAFile(mode), ", where a log file is kept; move it away"));
}

}  // namespace

absl::Status AppendLog::CheckPath(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return NotALog(path, st.st_mode);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AppendLog>> AppendLog::Open(const std::string& path,
                                                           uint64_t keep_bytes) {
  // Only a file is a log: what else is there (a named pipe would block this
  // open, or take the lines away) is named before it is opened.
  RETURN_IF_ERROR(CheckPath(path));
  struct stat st;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot open ", path, " for writing"), errno);
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(absl::StrCat("cannot stat ", path), err);
  }
  if (!S_ISREG(st.st_mode)) {  // put there since the check above
    ::close(fd);
    return NotALog(path, st.st_mode);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(absl::StrCat("cannot open ", path, " for writing"), err);
  }
  if (static_cast<uint64_t>(st.st_size) < keep_bytes) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, " has ", st.st_size, " bytes, the checkpoint ",
                                            "counted ", keep_bytes, "; it was cut or replaced"));
  }
  if (::ftruncate(fd, static_cast<off_t>(keep_bytes)) != 0 ||
      ::lseek(fd, static_cast<off_t>(keep_bytes), SEEK_SET) < 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(absl::StrCat("cannot cut ", path, " to ", keep_bytes, " bytes"), err);
  }
  return std::unique_ptr<AppendLog>(new AppendLog(path, fd, keep_bytes));
}

AppendLog::~AppendLog() { ::close(fd_); }

absl::Status AppendLog::Append(absl::string_view line) { return Write(absl::StrCat(line, "\n")); }

absl::Status AppendLog::Write(absl::string_view bytes) {
  RETURN_IF_ERROR(WriteFully(
      fd_, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, path_));
  bytes_ += bytes.size();
  return absl::OkStatus();
}

absl::Status AppendLog::Sync() {
  if (::fsync(fd_) != 0) return ErrnoError(absl::StrCat("cannot flush ", path_), errno);
  return absl::OkStatus();
}

}  // namespace pbert
