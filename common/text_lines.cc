#include "common/text_lines.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status.h"

namespace pbert {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;

std::string Bytes(size_t n) {
  return n % (size_t{1} << 20) == 0 ? absl::StrCat(n >> 20, " MiB") : absl::StrCat(n, " bytes");
}

}  // namespace

absl::StatusOr<TextLines> TextLines::Open(const std::string& path, absl::string_view what,
                                          Readable readable, size_t max_line_bytes,
                                          int pipe_first_byte_ms) {
  RETURN_IF_ERROR(CheckReadableFile(path, what, readable));
  // Opened without blocking (opening a named pipe waits for a writer), then
  // read blocking, once a pipe has something to read or its writer is gone.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot open ", what, " ", path), errno);
  TextLines lines(fd, /*owned=*/true, path, max_line_bytes);
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return ErrnoError(absl::StrCat("cannot open ", what, " ", path), errno);
  if (S_ISFIFO(st.st_mode)) {
    struct pollfd ready = {fd, POLLIN, 0};
    int n;
    do {
      n = ::poll(&ready, 1, pipe_first_byte_ms);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return ErrnoError(absl::StrCat("cannot read ", what, " ", path), errno);
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", path, " is a pipe that nothing was written to within ",
                       pipe_first_byte_ms / 1000.0, " s; start its writer first, or give a file"));
    }
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return ErrnoError(absl::StrCat("cannot read ", what, " ", path), errno);
  }
  return lines;
}

TextLines TextLines::StandardInput(size_t max_line_bytes) {
  return TextLines(STDIN_FILENO, /*owned=*/false, "standard input", max_line_bytes);
}

TextLines::TextLines(TextLines&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      owned_(other.owned_),
      name_(std::move(other.name_)),
      max_line_bytes_(other.max_line_bytes_),
      buffer_(std::move(other.buffer_)),
      start_(other.start_),
      scanned_(other.scanned_),
      end_(other.end_),
      line_number_(other.line_number_),
      status_(std::move(other.status_)) {}

TextLines::~TextLines() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

bool TextLines::Fill() {
  if (start_ > 0) {  // drop what was read before growing the buffer
    buffer_.erase(0, start_);
    start_ = 0;
  }
  const size_t old_size = buffer_.size();
  buffer_.resize(old_size + kBlockBytes);
  ssize_t n;
  do {
    n = ::read(fd_, buffer_.data() + old_size, kBlockBytes);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    status_ = ErrnoError(absl::StrCat("cannot read ", name_), errno);
    buffer_.resize(old_size);
    return false;
  }
  buffer_.resize(old_size + static_cast<size_t>(n));
  if (n == 0) return false;
  // A NUL byte is refused in the block it arrives in, so that endless
  // binary input (/dev/zero) ends at once rather than at the line limit.
  const char* block = buffer_.data() + old_size;
  if (const void* nul = std::memchr(block, '\0', static_cast<size_t>(n)); nul != nullptr) {
    const char* at = static_cast<const char*>(nul);
    const uint64_t line =
        line_number_ + 1 + std::count(static_cast<const char*>(buffer_.data() + start_), at, '\n');
    status_ = absl::InvalidArgumentError(
        absl::StrCat(name_, ":", line, ": a NUL byte; this looks like a binary file, not text"));
    return false;
  }
  return true;
}

bool TextLines::TooLong() {
  status_ = absl::InvalidArgumentError(
      absl::StrCat(name_, ":", line_number_ + 1, ": a line longer than ", Bytes(max_line_bytes_),
                   "; expected text with one sentence, paragraph or entry per line"));
  return false;
}

bool TextLines::Next(std::string* line) {
  if (!status_.ok()) return false;
  while (true) {
    const size_t unread = buffer_.size() - start_;
    const char* from = buffer_.data() + start_ + scanned_;
    const void* newline = std::memchr(from, '\n', unread - scanned_);
    if (newline != nullptr) {
      const size_t length = static_cast<const char*>(newline) - (buffer_.data() + start_);
      if (length > max_line_bytes_) return TooLong();
      line->assign(buffer_, start_, length);
      start_ += length + 1;
      scanned_ = 0;
      ++line_number_;
      return true;
    }
    scanned_ = unread;
    if (unread > max_line_bytes_) return TooLong();
    if (end_ || !Fill()) {
      end_ = true;
      if (!status_.ok() || buffer_.size() == start_) return false;
      line->assign(buffer_, start_, std::string::npos);  // the last line, without '\n'
      start_ = buffer_.size();
      scanned_ = 0;
      ++line_number_;
      return true;
    }
  }
}

}  // namespace pbert
