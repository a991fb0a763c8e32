// A log file that a run appends to (lines, or a binary log's records) and a
// resumed run cuts back to the length it had at the checkpoint, so that
// what describes work that is redone after a crash does not appear twice.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pbert {

class AppendLog {
 public:
  // Opens `path` (created if missing) and cuts it to `keep_bytes`; fails if
  // it is shorter than that (lines the checkpoint counted were lost).
  static absl::StatusOr<std::unique_ptr<AppendLog>> Open(const std::string& path,
                                                         uint64_t keep_bytes);
  // OK if `path` is missing or a file; else (a named pipe, which would hold
  // the writer, a folder, a device) an error naming what it is. Open checks
  // it too; a run checks its logs with it before it writes anything.
  static absl::Status CheckPath(const std::string& path);
  ~AppendLog();
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;

  // Appends `line` and a newline in one write.
  absl::Status Append(absl::string_view line);
  // Appends `bytes` as they are, in one write (a binary log's record).
  absl::Status Write(absl::string_view bytes);
  // Makes what was appended durable (before a checkpoint records bytes()).
  absl::Status Sync();
  uint64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  AppendLog(std::string path, int fd, uint64_t bytes) : path_(std::move(path)), fd_(fd), bytes_(bytes) {}
  std::string path_;
  int fd_;
  uint64_t bytes_;
};

}  // namespace pbert
