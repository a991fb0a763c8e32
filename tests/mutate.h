// Mutations of a file's bytes for the readers' fuzz tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace pbert::testing {

// One of: flip bytes, cut the end, insert junk, overwrite with small or huge
// integers (lengths, counts and offsets are where readers trust too much).
inline std::string Mutate(const std::string& original, std::mt19937_64& rng) {
  std::string s = original;
  std::uniform_int_distribution<int> kind(0, 4);
  auto pos = [&]() { return s.empty() ? 0 : static_cast<size_t>(rng() % s.size()); };
  switch (kind(rng)) {
    case 0:
      for (int i = 0, n = 1 + static_cast<int>(rng() % 8); i < n && !s.empty(); ++i) {
        s[pos()] ^= static_cast<char>(1 << (rng() % 8));
      }
      break;
    case 1:
      s.resize(pos());
      break;
    case 2:
      s.insert(pos(), std::string(1 + rng() % 16, static_cast<char>(rng())));
      break;
    case 3: {
      const uint64_t values[] = {0, 1, 0xFFFF, 0xFFFFFFFF, ~0ull, 1ull << 40};
      uint64_t v = values[rng() % 6];
      size_t at = pos();
      for (int b = 0; b < 8 && at + b < s.size(); ++b) s[at + b] = static_cast<char>(v >> (8 * b));
      break;
    }
    default: {
      // Replace a digit or a character of a text format.
      size_t at = pos();
      if (!s.empty()) s[at] = "0123456789:-[]{}\",. \n"[rng() % 21];
    }
  }
  return s;
}

}  // namespace pbert::testing
