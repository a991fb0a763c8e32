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
