#include "common/printable.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pbert {
namespace {

// Whether byte `at` of `text` starts no UTF-8 character (a continuation).
bool Continues(absl::string_view text, size_t at) {
  return at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80;
}

}  // namespace

std::string Printable(absl::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // a C1 control, as UTF-8
      absl::StrAppendFormat(&out, "\\u%04x", next);
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out.size() <= max_bytes) return out;
  // The start and the end, which name the file and say what to do, kept.
  size_t head = max_bytes * 2 / 3, tail = out.size() - (max_bytes - head);
  while (head > 0 && Continues(out, head)) --head;
  while (Continues(out, tail)) ++tail;
  return absl::StrCat(out.substr(0, head), " ... (", tail - head, " bytes left out) ... ",
                      out.substr(tail));
}

}  // namespace pbert
