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

// A file of `header` (JSON) and `data` bytes, as the format lays them out.
std::string WriteRaw(const std::string& name, const std::string& header, size_t data) {
  const std::string path = Temp(name);
  const uint64_t length = header.size();
  EXPECT_TRUE(WriteFileAtomically(path, std::string(reinterpret_cast<const char*>(&length), 8) +
                                            header + std::string(data, '\0'))
                  .ok());
  return path;
}

// The entries' byte ranges cover the data exactly, each byte once, as the
// format (and its reference reader) requires: an overlap, a gap before,
// between or after the tensors, and a tensor named twice are each refused
// in one line naming the fault, before any tensor is allocated.
TEST(SafetensorsTest, OffsetsCoverTheDataOnceAndNamesAreUnique) {
  auto entry = [](const std::string& name, int begin, int end) {
    return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(end - begin) +
           "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
  };
  struct Case {
    const char* name;
    std::string header;
    size_t data;
    const char* fault;
  };
  const Case cases[] = {
      {"overlap", "{" + entry("a", 0, 8) + "," + entry("b", 4, 12) + "}", 12,
       "tensor 'b' overlaps another (bytes 4 to 12)"},
      {"gap-between", "{" + entry("a", 0, 4) + "," + entry("b", 8, 12) + "}", 12,
       "bytes 4 to 8 of the data belong to no tensor"},
      {"gap-before", "{" + entry("a", 4, 8) + "}", 8,
       "bytes 0 to 4 of the data belong to no tensor"},
      {"gap-after", "{" + entry("a", 0, 4) + "}", 8,
       "bytes 4 to 8 of the data belong to no tensor"},
      {"same-range", "{" + entry("a", 0, 4) + "," + entry("b", 0, 4) + "}", 4, "overlaps another"},
      {"named-twice", "{" + entry("a", 0, 4) + "," + entry("a", 4, 8) + "}", 8,
       "tensor 'a' is in the header twice"},
      {"deep", "{\"__metadata__\":" + std::string(100, '[') + std::string(100, ']') + "}", 0,
       "nests values 101 levels deep"},
      {"dtype", "{\"a\":{\"dtype\":\"X99\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
       "tensor 'a' has an unsupported safetensors dtype 'X99' (F32, F16, BF16, F64, I64, I32, "
       "I16, I8, U8, BOOL are read)"},
      // A tensor of 1 element in 9 (or 100,001) dimensions.
      {"rank", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
       "tensor 'a' has 9 dimensions, more than the 8 a weight may have"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteRaw(std::string("bad-") + c.name, c.header, c.data);
    auto read = ReadSafetensors(path);
    ASSERT_FALSE(read.ok()) << c.name;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << c.name;
    const std::string message(read.status().message());
    EXPECT_EQ(message.rfind(path + ": not a valid safetensors file: ", 0), 0u) << message;
    EXPECT_NE(message.find(c.fault), std::string::npos) << c.name << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // Out of order in the header, but covering the data once: read.
  const std::string good =
      WriteRaw("out-of-order", "{" + entry("b", 4, 12) + "," + entry("a", 0, 4) + "}", 12);
  auto read = ReadSafetensors(good);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 2u);
  // A header length past the format's 100 MB limit, refused before reading it.
  const std::string huge = Temp("huge-header");
  const uint64_t length = 100'000'001;
  std::string bytes(reinterpret_cast<const char*>(&length), 8);
  bytes.resize(8 + length, ' ');
  ASSERT_TRUE(WriteFileAtomically(huge, bytes).ok());
  auto refused = ReadSafetensors(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("over the format's limit of 100000000"),
            std::string::npos)
      << refused.status();
  std::filesystem::remove(huge);
}

// The writer refuses what no reader could read back as written: a name
// given twice, an empty name, the metadata's own key.
TEST(SafetensorsTest, TheWriterRefusesNamesItCannotWriteOnce) {
  const std::string path = Temp("writer.safetensors");
  for (const NamedTensors& named :
       {NamedTensors{{"a", at::ones({2})}, {"a", at::zeros({2})}},
        NamedTensors{{"", at::ones({2})}}, NamedTensors{{"__metadata__", at::ones({2})}}}) {
    absl::Status status = WriteSafetensors(named, path, {});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(status.message().rfind(path + ": cannot write a tensor named '", 0), 0u) << status;
    EXPECT_FALSE(std::filesystem::exists(path));
  }
}

}  // namespace
}  // namespace pbert::formats
