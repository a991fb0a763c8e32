#include "formats/safetensors.h"

#include <ATen/ATen.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "gtest/gtest.h"

namespace pbert::formats {
namespace {

std::string Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("pbert_safetensors_" + name);
}

TEST(SafetensorsTest, WritesAndReadsEveryDtype) {
  NamedTensors written = {
      {"b.f32", at::arange(6, at::kFloat).reshape({2, 3})},
      {"a.i64", at::arange(4, at::kLong)},
      {"c.bf16", at::ones({3}, at::kBFloat16)},
      {"d.bool", at::arange(4, at::kLong).gt(1)},
      {"e.empty", at::empty({0, 5}, at::kDouble)},
  };
  const std::string path = Temp("roundtrip.safetensors");
  ASSERT_TRUE(WriteSafetensors(written, path, {{"format", "pt"}, {"step", "7"}}).ok());
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), written.size());
  // In name order, each with its dtype, shape and values.
  EXPECT_EQ((*read)[0].first, "a.i64");
  for (const auto& [name, tensor] : *read) {
    const auto& original = *std::find_if(written.begin(), written.end(),
                                         [&](const auto& w) { return w.first == name; });
    EXPECT_EQ(tensor.scalar_type(), original.second.scalar_type()) << name;
    EXPECT_TRUE(at::equal(tensor, original.second)) << name;
  }
}

TEST(SafetensorsTest, CorruptFilesAreClearErrors) {
  std::string path = Temp("corrupt.safetensors");
  ASSERT_TRUE(WriteFileAtomically(path, std::string("\x10\0\0\0\0\0\0\0{\"a\":", 13)).ok());
  auto result = ReadSafetensors(path);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find(path), std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(path, "abc").ok());
  EXPECT_EQ(ReadSafetensors(path).status().code(), absl::StatusCode::kDataLoss);
  // A shape whose size overflows 64 bits is refused, not allocated.
  const std::string header =
      R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})";
  const uint64_t length = header.size();
  ASSERT_TRUE(
      WriteFileAtomically(path, std::string(reinterpret_cast<const char*>(&length), 8) + header)
          .ok());
  result = ReadSafetensors(path);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(result.status().message().find("shape larger than the file"), std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace pbert::formats
