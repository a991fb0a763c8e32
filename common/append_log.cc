#include "common/append_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status.h"

namespace pbert {

namespace {

absl::Status NotALog(const std::string& path, unsigned mode) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, " is ", NotAFile(mode), ", where a log file is kept; move it away",
      S_ISLNK(mode) ? " (a log is never written through a link, which would write, cut or "
                      "replace what it points at)"
                    : ""));
}

// Moves `path` aside to the first free PATH.damaged, PATH.damaged-2, ...;
// returns the name it took.
absl::StatusOr<std::string> SetAside(const std::string& path) {
  for (int n = 1; n < 1000; ++n) {
    const std::string to = absl::StrCat(path, ".damaged", n == 1 ? "" : absl::StrCat("-", n));
    struct stat st;
    if (::lstat(to.c_str(), &st) == 0) continue;
    RETURN_IF_ERROR(RenameWithoutReplacing(path, to));
    return to;
  }
  return absl::AlreadyExistsError(
      absl::StrCat("cannot set ", path, " aside: ", path, ".damaged up to -999 are taken"));
}

// A log shorter than the checkpoint counted: set aside, and begun again
// from its whole records. Returns the bytes kept; `note` says what was done.
absl::StatusOr<uint64_t> Recover(const std::string& path, uint64_t keep_bytes,
                                 const WholeRecords& whole_records, std::string* note) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *note = absl::StrCat(path, " is missing, where the checkpoint counted ", keep_bytes,
                         " bytes: a new one is begun");
    return 0;
  }
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path, keep_bytes));
  const uint64_t kept = std::min<uint64_t>(whole_records(text), text.size());
  ASSIGN_OR_RETURN(const std::string aside, SetAside(path));
  RETURN_IF_ERROR(WriteFileAtomically(path, absl::string_view(text).substr(0, kept)));
  *note = absl::StrCat(path, " holds ", text.size(), " bytes, where the checkpoint counted ",
                       keep_bytes, " (cut or replaced since): set aside as ", aside,
                       "; the log goes on from its first ", kept, " bytes (its whole records)");
  return kept;
}

}  // namespace

uint64_t WholeLines(absl::string_view text) {
  const size_t last = text.rfind('\n');
  return last == absl::string_view::npos ? 0 : last + 1;
}

absl::Status AppendLog::CheckPath(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return NotALog(path, st.st_mode);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AppendLog>> AppendLog::Open(const std::string& path,
                                                           uint64_t keep_bytes,
                                                           const WholeRecords& whole_records) {
  // Only a file is a log: what else is there (a named pipe would block this
  // open, or take the lines away) is named before it is opened.
  RETURN_IF_ERROR(CheckPath(path));
  struct stat st;
  std::string recovery;
  if (whole_records && keep_bytes > 0 &&
      (::stat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) < keep_bytes)) {
    ASSIGN_OR_RETURN(keep_bytes, Recover(path, keep_bytes, whole_records, &recovery));
  }
  // Never through a link (put there since the check above).
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0666);
  if (fd < 0 && errno == ELOOP) return NotALog(path, S_IFLNK);
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
  std::unique_ptr<AppendLog> log(new AppendLog(path, fd, keep_bytes));
  log->recovery_ = std::move(recovery);
  return log;
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
