// A log file that a run appends to (lines, or a binary log's records) and a
// resumed run cuts back to the length it had at the checkpoint, so that
// what describes work that is redone after a crash does not appear twice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pbert {

// The length of the longest start of a log's text made of whole records
// (whole lines; whole TFRecord records).
using WholeRecords = std::function<uint64_t(absl::string_view text)>;

// WholeRecords of a text log: up to its last newline.
uint64_t WholeLines(absl::string_view text);

class AppendLog {
 public:
  // Opens `path` (created if missing) and cuts it to `keep_bytes`. A file
  // shorter than that (cut, replaced or moved away since the checkpoint
  // counted it) fails, unless `whole_records` is given: then the file is
  // set aside as PATH.damaged (PATH.damaged-2, ... if taken), the log goes
  // on from its whole records, and recovery() says what was done.
  static absl::StatusOr<std::unique_ptr<AppendLog>> Open(
      const std::string& path, uint64_t keep_bytes, const WholeRecords& whole_records = nullptr);
  // OK if `path` is missing or a file; else (a named pipe, which would hold
  // the writer, a folder, a device, a symbolic link, which it would be
  // written through) an error naming what it is. Open checks
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
  // What Open did to a log shorter than the checkpoint counted, in a
  // sentence; "" when it was whole.
  const std::string& recovery() const { return recovery_; }

 private:
  AppendLog(std::string path, int fd, uint64_t bytes) : path_(std::move(path)), fd_(fd), bytes_(bytes) {}
  std::string path_;
  int fd_;
  uint64_t bytes_;
  std::string recovery_;
};

}  // namespace pbert
