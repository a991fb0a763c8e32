// Writes a file so that readers see either the old file or the complete new
// one, never a half-written one: data goes to a temporary file beside the
// target, which is fsynced and renamed over it on Commit().
//
// A writer holds a lock on its temporary while it lives (an open file
// description lock on a file, an flock on a folder); the kernel drops it when
// the process ends, however it ends. So a temporary left by a killed
// process is recognisable as stale (no lock), and the next writer of the same
// target removes it, while one in use by a running process is left alone.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pbert {

// What publishing a file or folder does to one already at its path.
enum class Existing {
  kReplace,  // replaced as a whole (readers see the old one or the new one)
  kRefuse,   // the commit fails (AlreadyExists) and the temporary goes; atomic:
             // of two writers racing to one new path, exactly one succeeds
};

class AtomicFileWriter {
 public:
  // Creates the temporary file in the target's directory.
  static absl::StatusOr<AtomicFileWriter> Create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Removes the temporary file unless Commit() succeeded.
  ~AtomicFileWriter();

  absl::Status Write(absl::Span<const uint8_t> data);
  absl::Status Write(absl::string_view text);
  // Bytes written so far through Write().
  uint64_t size() const { return size_; }
  // The temporary file, for libraries that write by file name (HDF5): they
  // write there, and Commit() publishes what they wrote.
  const std::string& temp_path() const { return temp_path_; }
  // Flushes, fsyncs and renames the temporary file to the target.
  absl::Status Commit(Existing existing = Existing::kReplace);

 private:
  AtomicFileWriter(std::string path, std::string temp_path, int fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Creates a new folder named `prefix` + six random characters, with the
// permissions of any folder the process makes (0777 less the umask), not
// mkdtemp's private 0700: a run folder readable by its group keeps its
// checkpoints readable too.
absl::StatusOr<std::string> CreateTemporaryFolder(const std::string& prefix);

// A folder written whole or not at all: its files are written into a
// temporary folder beside the target (locked while this writer lives,
// removed unless committed), which Commit renames to the target.
class AtomicFolderWriter {
 public:
  // The target's parent folder must exist.
  static absl::StatusOr<AtomicFolderWriter> Create(const std::string& path);

  AtomicFolderWriter(AtomicFolderWriter&& other) noexcept;
  AtomicFolderWriter& operator=(AtomicFolderWriter&&) = delete;
  AtomicFolderWriter(const AtomicFolderWriter&) = delete;
  AtomicFolderWriter& operator=(const AtomicFolderWriter&) = delete;
  ~AtomicFolderWriter();

  // Where to write the folder's files.
  const std::string& temp_path() const { return temp_path_; }
  // fsyncs the temporary folder and renames it to the target. kReplace
  // moves an existing target aside first and removes it after, so that one
  // whole folder is there at every moment.
  absl::Status Commit(Existing existing);

 private:
  AtomicFolderWriter(std::string path, std::string temp_path, int lock_fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), lock_fd_(lock_fd) {}

  std::string path_;
  std::string temp_path_;
  int lock_fd_ = -1;  // the temporary's lock; -1 once committed
};

// Renames `from` to `to`, failing with AlreadyExists (and leaving both as
// they were) if `to` exists: renameat2's RENAME_NOREPLACE, or for a file on
// a file system without it, link and unlink. Atomic: of two such renames to
// one path, one fails.
absl::Status RenameWithoutReplacing(const std::string& from, const std::string& to);

// Removes the temporaries of `path` that no running process holds: entries
// of its folder named `<name of path><marker>XXXXXX` (six letters or digits,
// as mkstemp and mkdtemp make them, optionally followed by ".old"; marker
// ".tmp." for files, ".tmp-" for folders). Returns how many it removed.
int RemoveStaleTemporaries(const std::string& path, absl::string_view marker);

// Takes the lock that marks `path` (a temporary file or folder) as in use;
// returns the descriptor to keep open while it is, or -1 with errno set.
int LockTemporary(const std::string& path);

// Writes `contents` to `path` atomically.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Writes the folder `path` whole or not at all (AtomicFolderWriter): each
// file's contents under its name, a relative path ("predict/CoLA.tsv").
absl::Status WriteFolderAtomically(const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& files,
                                   Existing existing);

// Writes all of `data` to `fd` (retrying short writes and EINTR); `path`
// names the file in the error.
absl::Status WriteFully(int fd, absl::Span<const uint8_t> data, const std::string& path);

// fsyncs a file or folder, so that what was written or renamed in it lasts.
absl::Status SyncPath(const std::string& path);

// What may be read: a regular file, or (kStream) also a pipe or a device,
// read once from its start (bash's `<(zcat a.gz)`, /dev/stdin).
enum class Readable { kFile, kStream };

// OK if `path` is a file this process can open for reading; otherwise one
// clear error: not found, not readable, a folder where a file belongs, and
// for kFile a named pipe, a device or a socket (which could keep a reader
// waiting for ever), named as such. `what` says what the file is for
// ("config file", "vocabulary").
absl::Status CheckReadableFile(const std::string& path, absl::string_view what,
                               Readable readable = Readable::kFile);

// "a folder", "a named pipe (FIFO)", "a character device", "a block
// device", "a socket", "a symbolic link" (an lstat's) for the st_mode of
// what is not a regular file; "" for a regular file.
std::string NotAFile(unsigned mode);

// Reads a whole (small) file into a string. A folder, pipe, device or
// socket at `path` is an error naming what it is (never waited on); so is a
// file over `max_bytes`, refused before a byte of it is read.
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     uint64_t max_bytes = uint64_t{1} << 30);

}  // namespace pbert
