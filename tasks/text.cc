#include "tasks/text.h"

#include <unicode/utf8.h>

namespace pbert::tasks {

std::u32string ToCodePoints(absl::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  const auto* s = reinterpret_cast<const uint8_t*>(utf8.data());
  const int32_t n = static_cast<int32_t>(utf8.size());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U8_NEXT(s, i, n, c);
    out.push_back(c < 0 ? U'\uFFFD' : static_cast<char32_t>(c));
  }
  return out;
}

std::string ToUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    uint8_t buffer[4];
    int32_t length = 0;
    UBool error = false;
    U8_APPEND(buffer, length, 4, static_cast<UChar32>(c), error);
    if (error) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
    }
  }
  return out;
}

bool IsPythonSpace(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
    case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsSquadSpace(char32_t c) {
  return c == U' ' || c == U'\t' || c == U'\r' || c == U'\n' || c == 0x202F;
}

std::vector<std::u32string> SplitPython(std::u32string_view text) {
  std::vector<std::u32string> words;
  bool in_word = false;
  for (char32_t c : text) {
    if (IsPythonSpace(c)) {
      in_word = false;
    } else {
      if (!in_word) words.emplace_back();
      words.back().push_back(c);
      in_word = true;
    }
  }
  return words;
}

std::u32string JoinedWords(std::u32string_view text) {
  std::u32string out;
  for (const auto& word : SplitPython(text)) {
    if (!out.empty()) out.push_back(U' ');
    out += word;
  }
  return out;
}

}  // namespace pbert::tasks
