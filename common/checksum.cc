#include "common/checksum.h"

// The state struct is only complete with static-linking declarations.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <array>

namespace pbert {

struct ChecksumStream::State {
  XXH3_state_t xxh;
};

uint64_t Checksum64(absl::Span<const uint8_t> data) {
  return XXH3_64bits(data.data(), data.size());
}

ChecksumStream::ChecksumStream() : state_(std::make_unique<State>()) {
  XXH3_64bits_reset(&state_->xxh);
}

ChecksumStream::~ChecksumStream() = default;

void ChecksumStream::Update(absl::Span<const uint8_t> data) {
  XXH3_64bits_update(&state_->xxh, data.data(), data.size());
}

uint64_t ChecksumStream::Digest() const { return XXH3_64bits_digest(&state_->xxh); }

namespace {

// Slicing-by-8 tables for a reflected CRC-32 polynomial.
using Crc32Tables = std::array<std::array<uint32_t, 256>, 8>;

Crc32Tables MakeCrc32Tables(uint32_t polynomial) {
  Crc32Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (polynomial & (0u - (crc & 1)));
    t[0][i] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (int i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}

uint32_t Crc32With(const Crc32Tables& t, absl::Span<const uint8_t> data, uint32_t crc) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = crc ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                         uint32_t{p[3]} << 24);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
  }
  for (; n > 0; --n, ++p) crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xff];
  return ~crc;
}

}  // namespace

uint32_t Crc32c(absl::Span<const uint8_t> data, uint32_t crc) {
  static const Crc32Tables tables = MakeCrc32Tables(0x82f63b78u);  // Castagnoli
  return Crc32With(tables, data, crc);
}

uint32_t Crc32(absl::Span<const uint8_t> data, uint32_t crc) {
  static const Crc32Tables tables = MakeCrc32Tables(0xedb88320u);  // IEEE 802.3
  return Crc32With(tables, data, crc);
}

}  // namespace pbert
