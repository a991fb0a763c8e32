// Reading line-oriented text (corpora, vocabularies, histograms, logs) in
// one pass over one open file, so that a pipe (bash's `<(zcat a.gz)`) reads
// as a file does and nothing is read twice. What cannot be line-oriented text
// is refused as soon as it is seen, naming the file and line: a NUL byte
// (binary data, /dev/zero) or a line longer than the limit (no newlines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/atomic_file.h"

namespace pbert {

class TextLines {
 public:
  // 64 MiB: far above a paragraph of WikiExtractor output or a line of any
  // file this project reads.
  static constexpr size_t kMaxLineBytes = size_t{64} << 20;

  // How long a pipe may stay silent before its first byte: a named pipe
  // nobody writes to would otherwise hold the reader forever.
  static constexpr int kPipeFirstByteMs = 10000;

  // Opens `path`; `what` names it in errors ("vocabulary", "input").
  // A folder, a missing or unreadable file is an error, and so are a pipe,
  // a device and a socket unless `readable` is kStream (corpus text, which
  // may come through bash's `<(zcat a.gz)`); a pipe with nothing written to
  // it within `pipe_first_byte_ms` is an error then.
  static absl::StatusOr<TextLines> Open(const std::string& path, absl::string_view what,
                                        Readable readable = Readable::kFile,
                                        size_t max_line_bytes = kMaxLineBytes,
                                        int pipe_first_byte_ms = kPipeFirstByteMs);
  // Reads standard input (not closed at the end), named "standard input".
  static TextLines StandardInput(size_t max_line_bytes = kMaxLineBytes);

  TextLines(TextLines&& other) noexcept;
  TextLines& operator=(TextLines&& other) = delete;
  TextLines(const TextLines&) = delete;
  ~TextLines();

  // The next line, without its '\n', in *line: true. False at the end of the
  // file or on an error; status() tells them apart.
  bool Next(std::string* line);
  const absl::Status& status() const { return status_; }

  // The number of the line Next returned last (1-based).
  uint64_t line_number() const { return line_number_; }
  const std::string& name() const { return name_; }

 private:
  TextLines(int fd, bool owned, std::string name, size_t max_line_bytes)
      : fd_(fd), owned_(owned), name_(std::move(name)), max_line_bytes_(max_line_bytes) {}
  // Appends the next block of the file to buffer_; false at its end or on
  // an error (status_).
  bool Fill();
  // Sets status_ to the error for line line_number_ + 1; false.
  bool TooLong();

  int fd_;
  bool owned_;
  std::string name_;
  size_t max_line_bytes_;
  std::string buffer_;
  size_t start_ = 0;    // where the unread part of buffer_ begins
  size_t scanned_ = 0;  // bytes of the unread part known to hold no '\n'
  bool end_ = false;
  uint64_t line_number_ = 0;
  absl::Status status_;
};

}  // namespace pbert
