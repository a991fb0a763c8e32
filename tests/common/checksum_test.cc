#include "common/checksum.h"

#include <string>

#include "gtest/gtest.h"

namespace pbert {
namespace {

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ChecksumTest, MatchesPublishedXxh3Values) {
  // XXH3_64bits of the empty input with seed 0, from the xxHash reference.
  EXPECT_EQ(Checksum64({}), 0x2D06800538D394C2ull);
}

TEST(ChecksumTest, Crc32cMatchesPublishedValues) {
  // The CRC-32C check value, and the test vectors of RFC 3720 (iSCSI), B.4.
  EXPECT_EQ(Crc32c(Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32c(Bytes(std::string(32, '\0'))), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(Bytes(std::string(32, '\xff'))), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(Bytes(ascending)), 0x46DD794Eu);
  // Continuing a value equals one pass over the concatenation.
  EXPECT_EQ(Crc32c(Bytes(ascending.substr(13)), Crc32c(Bytes(ascending.substr(0, 13)))),
            0x46DD794Eu);
  EXPECT_NE(MaskCrc32c(0x46DD794Eu), 0x46DD794Eu);
}

TEST(ChecksumTest, Crc32MatchesPublishedValues) {
  // The CRC-32 check value (zip, zlib, PNG), and "The quick brown fox...".
  EXPECT_EQ(Crc32(Bytes("123456789")), 0xCBF43926u);
  EXPECT_EQ(Crc32(Bytes("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
  EXPECT_EQ(Crc32(Bytes("")), 0u);
}

TEST(ChecksumTest, StreamEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 10000; ++i) data.push_back(static_cast<char>(i * 7919));
  ChecksumStream stream;
  stream.Update(Bytes(data.substr(0, 1)));
  stream.Update(Bytes(data.substr(1, 4095)));
  stream.Update(Bytes(data.substr(4096)));
  EXPECT_EQ(stream.Digest(), Checksum64(Bytes(data)));
}

TEST(ChecksumTest, DetectsAOneBitChange) {
  std::string data(1000, 'a');
  uint64_t before = Checksum64(Bytes(data));
  data[500] ^= 1;
  EXPECT_NE(Checksum64(Bytes(data)), before);
}

}  // namespace
}  // namespace pbert
