// Text as Python sees it, for the task readers and scorers that must agree
// with Python scripts character for character (Google's run_squad.py, the
// official SQuAD evaluation): code points, Python's whitespace, str.split().
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pbert::tasks {

// UTF-8 to code points; an invalid byte becomes U+FFFD.
std::u32string ToCodePoints(absl::string_view utf8);
std::string ToUtf8(std::u32string_view text);

// Python's str.isspace().
bool IsPythonSpace(char32_t c);
// Google's run_squad.py is_whitespace: space, \t, \r, \n, U+202F.
bool IsSquadSpace(char32_t c);

// Python's str.split() with no argument.
std::vector<std::u32string> SplitPython(std::u32string_view text);
// " ".join(text.split())
std::u32string JoinedWords(std::u32string_view text);

}  // namespace pbert::tasks
