#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pbert {
namespace {

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string NameOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Files get an open-file-description write lock, which libraries that open
// the temporary again by name (HDF5, which flocks files itself) neither
// conflict with nor release; folders, which cannot be opened for writing,
// get an flock.
bool LockFile(int fd) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  return ::fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

}  // namespace

int LockTemporary(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return -1;
  const bool folder = S_ISDIR(info.st_mode);
  int fd = ::open(path.c_str(), (folder ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
  if (fd < 0) return -1;
  if (folder ? ::flock(fd, LOCK_EX | LOCK_NB) != 0 : !LockFile(fd)) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int RemoveStaleTemporaries(const std::string& path, absl::string_view marker) {
  const std::string dir = DirectoryOf(path), prefix = absl::StrCat(NameOf(path), marker);
  std::vector<std::string> stale;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    // mkstemp's and mkdtemp's six characters, and a store's ".old".
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    absl::string_view rest = absl::string_view(name).substr(prefix.size());
    if (absl::EndsWith(rest, ".old")) rest.remove_suffix(4);
    if (rest.size() == 6 && std::all_of(rest.begin(), rest.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c));
        })) {
      stale.push_back(entry.path().string());
    }
  }
  int removed = 0;
  for (const std::string& candidate : stale) {
    int fd = LockTemporary(candidate);
    if (fd < 0) continue;  // in use by a running process (or gone meanwhile)
    std::filesystem::remove_all(candidate, error);
    ::close(fd);
    if (!error) ++removed;
  }
  return removed;
}

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  RemoveStaleTemporaries(path, ".tmp.");
  std::string pattern = path + ".tmp.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  int fd = ::mkstemp(buffer.data());
  if (fd < 0) {
    return ErrnoError(absl::StrCat("cannot create a temporary file beside ", path,
                                   " (does its directory exist and is it writable?)"),
                      errno);
  }
  LockFile(fd);  // a new file: nobody else can hold it
  return AtomicFileWriter(path, std::string(buffer.data()), fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

absl::Status WriteFully(int fd, absl::Span<const uint8_t> data, const std::string& path) {
  const uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(absl::StrCat("cannot write ", path), errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Write(absl::Span<const uint8_t> data) {
  if (fd_ < 0) return absl::FailedPreconditionError("write after commit: " + path_);
  RETURN_IF_ERROR(WriteFully(fd_, data, path_));
  size_ += data.size();
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Write(absl::string_view text) {
  return Write(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

absl::Status RenameWithoutReplacing(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return absl::OkStatus();
  }
  int err = errno;
  struct stat info;
  if ((err == EINVAL || err == ENOSYS) && ::stat(from.c_str(), &info) == 0 &&
      !S_ISDIR(info.st_mode)) {
    // A file system without RENAME_NOREPLACE: a hard link fails as atomically.
    if (::link(from.c_str(), to.c_str()) == 0) {
      ::unlink(from.c_str());
      return absl::OkStatus();
    }
    err = errno;
  }
  if (err == EEXIST || err == ENOTEMPTY) {
    return absl::AlreadyExistsError(absl::StrCat(
        to, " exists (made meanwhile by another command?); remove it or choose another path"));
  }
  return ErrnoError(absl::StrCat("cannot rename ", from, " to ", to), err);
}

absl::Status AtomicFileWriter::Commit(Existing existing) {
  if (fd_ < 0) return absl::FailedPreconditionError("commit called twice: " + path_);
  // mkstemp creates 0600 files; give the result the usual permissions.
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0 || ::fsync(fd_) != 0) {
    return ErrnoError(absl::StrCat("cannot flush ", temp_path_), errno);
  }
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    return ErrnoError(absl::StrCat("cannot close ", temp_path_), err);
  }
  if (existing == Existing::kRefuse) {
    if (absl::Status renamed = RenameWithoutReplacing(temp_path_, path_); !renamed.ok()) {
      ::unlink(temp_path_.c_str());
      return renamed;
    }
  } else if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    return ErrnoError(absl::StrCat("cannot rename ", temp_path_, " to ", path_), err);
  }
  // Make the rename itself durable.
  int dir_fd = ::open(DirectoryOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CreateTemporaryFolder(const std::string& prefix) {
  std::string pattern = prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return ErrnoError(absl::StrCat("cannot create a temporary folder ", pattern), errno);
  }
  // mkdtemp makes it private (0700); the result gets the usual permissions.
  // umask can only be read by setting it: set it straight back.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::chmod(pattern.c_str(), 0777 & ~mask) != 0) {
    const int err = errno;
    ::rmdir(pattern.c_str());
    return ErrnoError(absl::StrCat("cannot set the permissions of ", pattern), err);
  }
  return pattern;
}

absl::StatusOr<AtomicFolderWriter> AtomicFolderWriter::Create(const std::string& path) {
  // Temporary folders of killed earlier attempts go; a running one's stay.
  RemoveStaleTemporaries(path, ".tmp-");
  ASSIGN_OR_RETURN(const std::string temp, CreateTemporaryFolder(path + ".tmp-"));
  int fd = LockTemporary(temp);
  if (fd < 0) {
    int err = errno;
    std::error_code ignored;
    std::filesystem::remove_all(temp, ignored);
    return ErrnoError(absl::StrCat("cannot lock ", temp), err);
  }
  return AtomicFolderWriter(path, temp, fd);
}

AtomicFolderWriter::AtomicFolderWriter(AtomicFolderWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      lock_fd_(std::exchange(other.lock_fd_, -1)) {}

AtomicFolderWriter::~AtomicFolderWriter() {
  if (lock_fd_ < 0) return;
  std::error_code ignored;
  std::filesystem::remove_all(temp_path_, ignored);
  ::close(lock_fd_);
}

absl::Status AtomicFolderWriter::Commit(Existing existing) {
  if (lock_fd_ < 0) return absl::FailedPreconditionError("commit called twice: " + path_);
  RETURN_IF_ERROR(SyncPath(temp_path_));
  std::error_code error;
  if (existing == Existing::kRefuse) {
    RETURN_IF_ERROR(RenameWithoutReplacing(temp_path_, path_));
  } else {
    // The old folder is moved aside first: one of the two is whole at
    // every moment.
    const std::string old = temp_path_ + ".old";
    const bool replacing = std::filesystem::exists(path_, error);
    if (replacing && ::rename(path_.c_str(), old.c_str()) != 0) {
      return ErrnoError(absl::StrCat("cannot move ", path_, " aside"), errno);
    }
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      int err = errno;
      if (replacing) ::rename(old.c_str(), path_.c_str());
      return ErrnoError(absl::StrCat("cannot rename ", temp_path_, " to ", path_), err);
    }
    if (replacing) std::filesystem::remove_all(old, error);
  }
  ::close(std::exchange(lock_fd_, -1));
  return SyncPath(DirectoryOf(path_));
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(writer.Write(contents));
  return writer.Commit();
}

absl::Status WriteFolderAtomically(const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& files,
                                   Existing existing) {
  ASSIGN_OR_RETURN(AtomicFolderWriter folder, AtomicFolderWriter::Create(path));
  for (const auto& [name, contents] : files) {
    const std::filesystem::path file = std::filesystem::path(folder.temp_path()) / name;
    if (file.parent_path() != folder.temp_path()) {
      std::error_code error;
      std::filesystem::create_directories(file.parent_path(), error);
      if (error) {
        return ErrnoError(absl::StrCat("cannot create ", file.parent_path().string()),
                          error.value());
      }
    }
    RETURN_IF_ERROR(WriteFileAtomically(file.string(), contents));
    if (file.parent_path() != folder.temp_path()) RETURN_IF_ERROR(SyncPath(file.parent_path()));
  }
  return folder.Commit(existing);
}

absl::Status SyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot open ", path), errno);
  int result = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (result != 0) return ErrnoError(absl::StrCat("cannot flush ", path), err);
  return absl::OkStatus();
}

std::string NotAFile(unsigned mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "";
}

absl::Status CheckReadableFile(const std::string& path, absl::string_view what, Readable readable) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return ErrnoError(absl::StrCat("cannot open ", what, " ", path), errno);
  }
  const std::string kind = NotAFile(st.st_mode);
  if (!kind.empty() && (readable == Readable::kFile || S_ISDIR(st.st_mode))) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is ", kind, "; give a file"));
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return ErrnoError(absl::StrCat("cannot read ", what, " ", path), errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) {
  // Opened without blocking, and read only if it is a file: a named pipe or
  // a device in its place is refused, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot open ", path), errno);
  struct stat st;
  std::string out;
  absl::Status status;
  if (::fstat(fd, &st) != 0) {
    status = ErrnoError(absl::StrCat("cannot open ", path), errno);
  } else if (const std::string kind = NotAFile(st.st_mode); !kind.empty()) {
    status = absl::InvalidArgumentError(absl::StrCat(path, " is ", kind, "; give a file"));
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path, " is ", st.st_size, " bytes, over the ", max_bytes,
                     " its reader takes; it is not the file meant"));
  } else {
    out.reserve(static_cast<size_t>(st.st_size));
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = ErrnoError(absl::StrCat("cannot read ", path), errno);
        break;
      }
      if (n == 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return out;
}

}  // namespace pbert
