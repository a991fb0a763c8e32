// Copying bytes that a reader took from a file, where the count may be 0:
// an empty vector's or tensor's data() may be a null pointer, which memcpy
// must not get even for 0 bytes (undefined behaviour, which the
// sanitizers report).
#pragma once

#include <cstddef>
#include <cstring>

namespace pbert {

// Copies `n` bytes from `from` to `to`; nothing (no pointer read) when `n`
// is 0.
inline void CopyBytes(void* to, const void* from, size_t n) {
  if (n > 0) std::memcpy(to, from, n);
}

}  // namespace pbert
