// Text that came from outside (a file's names and values, a message quoting
// them) made safe to show on one line of a terminal: control characters
// (a newline that would forge a line, ESC that would clear the screen)
// escaped, and a line too long to read cut in its middle.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace pbert {

// The longest line Printable leaves whole, in bytes.
inline constexpr size_t kMaxPrintedBytes = 2000;

// `text` with each C0 control character, DEL and each C1 control character
// (U+0080-U+009F) written as an escape (\n, \r, \t, \xNN, \u0085), and, where
// the result is longer than `max_bytes`, its middle replaced by
// " ... (N bytes left out) ... ".
std::string Printable(absl::string_view text, size_t max_bytes = kMaxPrintedBytes);

}  // namespace pbert
