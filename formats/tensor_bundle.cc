#include "formats/tensor_bundle.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/mmap_file.h"
#include "common/status.h"

namespace pbert::formats {
namespace {

using Bytes = absl::Span<const uint8_t>;

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;  // LevelDB's, kept by TensorFlow
constexpr size_t kFooterSize = 48;       // two block handles padded to 40 bytes, then the magic
constexpr size_t kBlockTrailerSize = 5;  // compression type, masked CRC-32C

// TensorFlow's DataType numbers (types.proto) that hold plain numbers.
struct TensorFlowType {
  int number;
  const char* name;
  std::optional<at::ScalarType> type;
};

constexpr TensorFlowType kTypes[] = {
    {1, "DT_FLOAT", at::kFloat},      {2, "DT_DOUBLE", at::kDouble},
    {3, "DT_INT32", at::kInt},        {4, "DT_UINT8", at::kByte},
    {5, "DT_INT16", at::kShort},      {6, "DT_INT8", at::kChar},
    {7, "DT_STRING", std::nullopt},   {9, "DT_INT64", at::kLong},
    {10, "DT_BOOL", at::kBool},       {14, "DT_BFLOAT16", at::kBFloat16},
    {19, "DT_HALF", at::kHalf},       {20, "DT_RESOURCE", std::nullopt},
    {21, "DT_VARIANT", std::nullopt},
};

// A cursor over protobuf wire format or table bytes; every read is bounded.
class Reader {
 public:
  explicit Reader(Bytes bytes) : bytes_(bytes) {}
  bool done() const { return pos_ == bytes_.size(); }
  size_t pos() const { return pos_; }

  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == bytes_.size()) return false;
      uint8_t b = bytes_[pos_++];
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }
  bool Fixed(int n, uint64_t* out) {
    if (bytes_.size() - pos_ < static_cast<size_t>(n)) return false;
    uint64_t v = 0;
    for (int b = 0; b < n; ++b) v |= uint64_t{bytes_[pos_ + b]} << (8 * b);
    pos_ += n;
    *out = v;
    return true;
  }
  bool Take(uint64_t n, Bytes* out) {
    if (bytes_.size() - pos_ < n) return false;
    *out = bytes_.subspan(pos_, n);
    pos_ += n;
    return true;
  }

  // One protobuf field: its number, wire type and (for varint/fixed) value
  // or (for length-delimited) bytes.
  bool Field(int* number, int* wire, uint64_t* value, Bytes* bytes) {
    uint64_t tag;
    if (!Varint(&tag)) return false;
    *number = static_cast<int>(tag >> 3);
    *wire = static_cast<int>(tag & 7);
    switch (*wire) {
      case 0:
        return Varint(value);
      case 1:
        return Fixed(8, value);
      case 2:
        return Varint(value) && Take(*value, bytes);
      case 5:
        return Fixed(4, value);
      default:
        return false;  // groups are not used by these messages
    }
  }

 private:
  Bytes bytes_;
  size_t pos_ = 0;
};

struct Entry {
  int dtype = 0;
  std::vector<int64_t> shape;
  bool unknown_rank = false;
  int64_t shard = 0;
  int64_t offset = 0;
  int64_t size = 0;
  std::optional<uint32_t> crc32c;
  bool sliced = false;
};

absl::StatusOr<std::vector<int64_t>> ParseShape(Bytes bytes, bool* unknown_rank) {
  std::vector<int64_t> shape;
  Reader r(bytes);
  while (!r.done()) {
    int number, wire;
    uint64_t value = 0;
    Bytes sub;
    if (!r.Field(&number, &wire, &value, &sub)) return absl::DataLossError("malformed shape");
    if (number == 2 && wire == 2) {  // Dim { int64 size = 1; string name = 2; }
      Reader d(sub);
      int64_t size = 0;
      while (!d.done()) {
        int n, w;
        uint64_t v = 0;
        Bytes s;
        if (!d.Field(&n, &w, &v, &s)) return absl::DataLossError("malformed shape dimension");
        if (n == 1 && w == 0) size = static_cast<int64_t>(v);
      }
      if (size < 0) return absl::DataLossError("a negative dimension");
      if (shape.size() == kMaxTensorRank) {
        return absl::DataLossError(absl::StrCat("a tensor of more than ", kMaxTensorRank,
                                                " dimensions, which no weight has"));
      }
      shape.push_back(size);
    } else if (number == 3 && wire == 0) {
      *unknown_rank = value != 0;
    }
  }
  return shape;
}

absl::StatusOr<Entry> ParseEntry(Bytes bytes) {
  Entry e;
  Reader r(bytes);
  while (!r.done()) {
    int number, wire;
    uint64_t value = 0;
    Bytes sub;
    if (!r.Field(&number, &wire, &value, &sub)) {
      return absl::DataLossError("malformed BundleEntryProto");
    }
    if (number == 1 && wire == 0) e.dtype = static_cast<int>(value);
    if (number == 2 && wire == 2) {
      ASSIGN_OR_RETURN(e.shape, ParseShape(sub, &e.unknown_rank));
    }
    if (number == 3 && wire == 0) e.shard = static_cast<int64_t>(value);
    if (number == 4 && wire == 0) e.offset = static_cast<int64_t>(value);
    if (number == 5 && wire == 0) e.size = static_cast<int64_t>(value);
    if (number == 6 && wire == 5) e.crc32c = static_cast<uint32_t>(value);
    if (number == 7) e.sliced = true;
  }
  return e;
}

class Table {
 public:
  Table(std::string path, Bytes file) : path_(std::move(path)), file_(file) {}

  // Calls `visit(key, value)` for every entry, in key order.
  absl::Status ForEach(const std::function<absl::Status(const std::string&, Bytes)>& visit) {
    if (file_.size() < kFooterSize) return Bad("shorter than a table footer");
    Bytes footer = file_.subspan(file_.size() - kFooterSize);
    Reader f(footer);
    uint64_t meta_offset, meta_size, index_offset, index_size, magic;
    if (!f.Varint(&meta_offset) || !f.Varint(&meta_size) || !f.Varint(&index_offset) ||
        !f.Varint(&index_size)) {
      return Bad("malformed footer");
    }
    Reader m(footer.subspan(kFooterSize - 8));
    m.Fixed(8, &magic);
    if (magic != kTableMagic) return Bad("no table magic number at the end (not a .index file)");
    ASSIGN_OR_RETURN(Bytes index, Block(index_offset, index_size));
    return Entries(index, [&](const std::string&, Bytes handle) -> absl::Status {
      Reader h(handle);
      uint64_t offset, size;
      if (!h.Varint(&offset) || !h.Varint(&size)) return Bad("malformed block handle");
      ASSIGN_OR_RETURN(Bytes data, Block(offset, size));
      return Entries(data, visit);
    });
  }

 private:
  absl::Status Bad(const std::string& what) const {
    return absl::DataLossError(
        absl::StrCat(path_, ": not a valid TensorFlow checkpoint index: ", what));
  }

  absl::StatusOr<Bytes> Block(uint64_t offset, uint64_t size) const {
    if (offset > file_.size() || size > file_.size() - offset ||
        file_.size() - offset - size < kBlockTrailerSize) {
      return Bad(absl::StrCat("a block at byte ", offset, " runs past the end (truncated?)"));
    }
    Bytes contents = file_.subspan(offset, size);
    const uint8_t type = file_[offset + size];
    uint32_t stored;
    std::memcpy(&stored, file_.data() + offset + size + 1, 4);
    const uint32_t actual = MaskCrc32c(Crc32c(file_.subspan(offset, size + 1)));
    if (kChecksumsCompared && stored != actual) {
      return Bad(absl::StrCat("the block at byte ", offset, " fails its CRC"));
    }
    if (type != 0) {
      return Bad(absl::StrCat("the block at byte ", offset, " is compressed (type ", type,
                              "); TensorFlow writes checkpoint indexes uncompressed"));
    }
    return contents;
  }

  // The entries of a block: prefix-compressed keys, then restart offsets.
  absl::Status Entries(Bytes block,
                       const std::function<absl::Status(const std::string&, Bytes)>& visit) const {
    if (block.size() < 4) return Bad("a block too short for its restart count");
    uint32_t restarts;
    std::memcpy(&restarts, block.data() + block.size() - 4, 4);
    if (restarts > (block.size() - 4) / 4) return Bad("a block's restart count exceeds it");
    Reader r(block.first(block.size() - 4 - 4 * uint64_t{restarts}));
    std::string key;
    while (!r.done()) {
      uint64_t shared, unshared, length;
      Bytes suffix, value;
      if (!r.Varint(&shared) || !r.Varint(&unshared) || !r.Varint(&length) || shared > key.size() ||
          !r.Take(unshared, &suffix) || !r.Take(length, &value)) {
        return Bad(absl::StrCat("a malformed entry after key '", key, "'"));
      }
      key.resize(shared);
      key.append(reinterpret_cast<const char*>(suffix.data()), suffix.size());
      RETURN_IF_ERROR(visit(key, value));
    }
    return absl::OkStatus();
  }

  std::string path_;
  Bytes file_;
};

}  // namespace

std::string TensorBundlePrefix(const std::string& path) {
  if (absl::EndsWith(path, ".index")) return path.substr(0, path.size() - 6);
  size_t data = path.rfind(".data-");
  if (data != std::string::npos && path.find("-of-", data) != std::string::npos) {
    return path.substr(0, data);
  }
  return path;
}

bool IsTensorBundle(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(TensorBundlePrefix(path) + ".index", error);
}

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> ReadTensorBundle(
    const std::string& path) {
  const std::string prefix = TensorBundlePrefix(path);
  const std::string index_path = prefix + ".index";
  ASSIGN_OR_RETURN(MappedFile index, MappedFile::Open(index_path));
  std::map<std::string, Entry> entries;  // the table's keys are sorted and unique
  int64_t shards = -1;
  Table table(index_path, index.bytes());
  RETURN_IF_ERROR(table.ForEach([&](const std::string& key, Bytes value) -> absl::Status {
    if (key.empty()) {  // BundleHeaderProto
      Reader r(value);
      shards = 1;
      while (!r.done()) {
        int number, wire;
        uint64_t v = 0;
        Bytes sub;
        if (!r.Field(&number, &wire, &v, &sub)) {
          return absl::DataLossError(absl::StrCat(index_path, ": malformed bundle header"));
        }
        if (number == 1 && wire == 0) shards = static_cast<int64_t>(v);
        if (number == 2 && wire == 0 && v != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              index_path, ": a big-endian checkpoint; only little-endian ones are read"));
        }
      }
      return absl::OkStatus();
    }
    auto entry = ParseEntry(value);
    if (!entry.ok()) {
      return absl::DataLossError(
          absl::StrCat(index_path, ": tensor '", key, "': ", entry.status().message()));
    }
    entries[key] = *entry;
    return absl::OkStatus();
  }));
  if (shards < 1 || shards > 100000) {
    return absl::DataLossError(
        absl::StrCat(index_path, ": no bundle header (or an impossible shard count)"));
  }

  std::map<int64_t, MappedFile> data_files;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, e] : entries) {
    auto bad = [&, &name = name](const std::string& what) {
      return absl::DataLossError(absl::StrCat(index_path, ": tensor '", name, "': ", what));
    };
    const TensorFlowType* type = nullptr;
    for (const TensorFlowType& t : kTypes) {
      if (t.number == e.dtype) type = &t;
    }
    if (type == nullptr || !type->type) {
      return absl::InvalidArgumentError(absl::StrCat(
          index_path, ": tensor '", name, "' has dtype ",
          type == nullptr ? absl::StrCat("number ", e.dtype) : type->name,
          ", which is not read (float, double, half, bfloat16, integer and bool tensors are)"));
    }
    if (e.sliced) return bad("is stored in slices (a partitioned variable); not supported");
    if (e.unknown_rank) return bad("has an unknown rank");
    if (e.shard < 0 || e.shard >= shards) return bad(absl::StrCat("names shard ", e.shard));
    int64_t numel = 1;
    for (int64_t d : e.shape) {
      if (d > 0 && numel > (int64_t{1} << 40) / d) return bad("has an impossible shape");
      numel *= d;
    }
    const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(*type->type));
    if (e.size != bytes) {
      return bad(absl::StrCat("its shape [", absl::StrJoin(e.shape, ","), "] of ", type->name,
                              " needs ", bytes, " bytes, the index says ", e.size));
    }
    auto file = data_files.find(e.shard);
    if (file == data_files.end()) {
      const std::string data_path =
          absl::StrFormat("%s.data-%05d-of-%05d", prefix, e.shard, shards);
      auto mapped = MappedFile::Open(data_path);
      if (!mapped.ok()) {
        return absl::NotFoundError(
            absl::StrCat(index_path, ": tensor '", name, "' is in ", data_path,
                         ", which cannot be read: ", mapped.status().message()));
      }
      file = data_files.emplace(e.shard, std::move(*mapped)).first;
    }
    Bytes data = file->second.bytes();
    if (e.offset < 0 || static_cast<uint64_t>(e.offset) > data.size() ||
        static_cast<uint64_t>(e.size) > data.size() - e.offset) {
      return bad(absl::StrCat("bytes [", e.offset, ", ", e.offset + e.size, ") lie beyond its ",
                              data.size(), "-byte data file (truncated?)"));
    }
    Bytes content = data.subspan(e.offset, e.size);
    if (kChecksumsCompared && e.crc32c && MaskCrc32c(Crc32c(content)) != *e.crc32c) {
      return bad("its bytes fail their CRC-32C (the data file is damaged)");
    }
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(*type->type));
    CopyBytes(t.data_ptr(), content.data(), bytes);
    out.emplace_back(name, std::move(t));
  }
  return out;
}

}  // namespace pbert::formats
