#include "formats/safetensors.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/bytes.h"
#include "common/mmap_file.h"
#include "common/status.h"
#include "common/structured_text.h"
#include "nlohmann/json.hpp"

namespace pbert::formats {
namespace {

struct DtypeName {
  at::ScalarType type;
  const char* name;
};

constexpr DtypeName kDtypes[] = {
    {at::kFloat, "F32"}, {at::kHalf, "F16"},  {at::kBFloat16, "BF16"}, {at::kDouble, "F64"},
    {at::kLong, "I64"},  {at::kInt, "I32"},   {at::kShort, "I16"},     {at::kChar, "I8"},
    {at::kByte, "U8"},   {at::kBool, "BOOL"},
};

absl::StatusOr<const char*> NameOf(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return absl::InvalidArgumentError(absl::StrCat("no safetensors dtype for ", c10::toString(type)));
}

absl::StatusOr<at::ScalarType> TypeOf(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  std::string known;
  for (const auto& d : kDtypes) absl::StrAppend(&known, known.empty() ? "" : ", ", d.name);
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported safetensors dtype '", name, "' (", known, " are read)"));
}

// The safetensors format's own limit on its header (the reference reader's).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// The first key of the top-level object of JSON `text` that it holds twice
// (as written, escapes and all), "" if none is: one pass, strings skipped.
std::string RepeatedTopLevelKey(absl::string_view text) {
  std::set<absl::string_view> keys;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      const size_t start = i + 1;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
      const absl::string_view name = text.substr(start, i - start);
      size_t next = i + 1;
      while (next < text.size() && std::isspace(static_cast<unsigned char>(text[next]))) ++next;
      if (depth == 1 && next < text.size() && text[next] == ':' && !keys.insert(name).second) {
        return std::string(name);
      }
    }
  }
  return "";
}

// The parsed header and where the data starts, of a file held in `file`.
struct Header {
  nlohmann::json json;
  uint64_t data_start = 0;
};

absl::StatusOr<Header> ParseHeader(const std::string& path, absl::Span<const uint8_t> bytes) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid safetensors file: ", what));
  };
  uint64_t length;
  if (bytes.size() < sizeof(length)) return bad("shorter than its 8-byte header length");
  std::memcpy(&length, bytes.data(), sizeof(length));
  if (length > bytes.size() - sizeof(length)) return bad("header length beyond the end of file");
  if (length > kMaxHeaderBytes) {
    return bad(absl::StrCat("a header of ", length, " bytes, over the format's limit of ",
                            kMaxHeaderBytes));
  }
  Header header;
  const absl::string_view text(reinterpret_cast<const char*>(bytes.data()) + sizeof(length),
                               length);
  if (absl::Status checked = CheckJsonText(text, "its header", kMaxHeaderBytes); !checked.ok()) {
    return bad(std::string(checked.message()));
  }
  try {
    header.json = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("header is not JSON (", e.what(), ")"));
  }
  if (!header.json.is_object()) return bad("header is not a JSON object");
  // JSON keeps the last of two entries of one name; a tensor named twice
  // is refused instead (which of the two is meant?).
  if (const std::string twice = RepeatedTopLevelKey(text); !twice.empty()) {
    return bad(absl::StrCat("tensor '", twice, "' is in the header twice"));
  }
  header.data_start = sizeof(length) + length;
  return header;
}

}  // namespace

absl::Status WriteSafetensors(const NamedTensors& named, const std::string& path,
                              const std::map<std::string, std::string>& metadata,
                              Existing existing) {
  std::set<std::string> names;
  for (const auto& [name, value] : named) {
    if (name.empty() || name == "__metadata__" || !names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": cannot write a tensor named '", name, "'",
          name.empty() || name == "__metadata__" ? " (a name the format reserves or lacks)"
                                                 : " twice"));
    }
  }
  // The header's text is written entry by entry, in the tensors' order
  // (an ordered JSON object looks each key up in a list: quadratic in the
  // tensors); the names are unique, checked above.
  std::string text = "{";
  if (!metadata.empty())
    absl::StrAppend(&text, "\"__metadata__\":", nlohmann::json(metadata).dump());
  std::vector<at::Tensor> tensors;
  uint64_t offset = 0;
  for (const auto& [name, value] : named) {
    at::Tensor t = value.detach().to(at::kCPU).contiguous();
    ASSIGN_OR_RETURN(const char* dtype, NameOf(t.scalar_type()));
    uint64_t bytes = t.numel() * t.element_size();
    const nlohmann::ordered_json entry = {
        {"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    absl::StrAppend(&text, text.size() > 1 ? "," : "", nlohmann::json(name).dump(), ":",
                    entry.dump());
    offset += bytes;
    tensors.push_back(t);
  }
  text += "}";
  if (text.size() > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a header of ", text.size(), " bytes for ", named.size(),
        " tensors, over the format's limit of ", kMaxHeaderBytes, " that readers hold to"));
  }
  // The data starts 8-byte aligned, as the reference writer pads it.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t length = text.size();
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(writer.Write({reinterpret_cast<const uint8_t*>(&length), sizeof(length)}));
  RETURN_IF_ERROR(writer.Write(text));
  for (const at::Tensor& t : tensors) {
    RETURN_IF_ERROR(writer.Write({static_cast<const uint8_t*>(t.data_ptr()),
                                  static_cast<size_t>(t.numel() * t.element_size())}));
  }
  return writer.Commit(existing);
}

absl::StatusOr<NamedTensors> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto bytes = file.bytes();
  ASSIGN_OR_RETURN(Header header, ParseHeader(path, bytes));
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid safetensors file: ", what));
  };
  const uint64_t data_size = bytes.size() - header.data_start;
  // Every entry is checked before any tensor is allocated: its dtype, its
  // shape against the file, and all offsets together cover the data
  // exactly, each byte once (the format allows no overlap and no gap).
  struct Entry {
    std::string name;
    at::ScalarType type;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  try {
    for (const auto& [name, entry] : header.json.items()) {
      if (name == "__metadata__") continue;
      if (!entry.is_object()) return bad(absl::StrCat("tensor '", name, "' is not an object"));
      absl::StatusOr<at::ScalarType> type_of = TypeOf(entry.at("dtype").get<std::string>());
      if (!type_of.ok()) {
        return bad(absl::StrCat("tensor '", name, "' has an ", type_of.status().message()));
      }
      const at::ScalarType type = *type_of;
      std::vector<int64_t> shape = IntegersOf<int64_t>(entry.at("shape"));
      if (shape.size() > kMaxTensorRank) {
        return bad(absl::StrCat("tensor '", name, "' has ", shape.size(),
                                " dimensions, more than the ", kMaxTensorRank,
                                " a weight may have"));
      }
      auto offsets = IntegersOf<uint64_t>(entry.at("data_offsets"));
      uint64_t numel = 1;
      for (int64_t d : shape) {
        if (d < 0 || (d > 0 && numel > data_size / static_cast<uint64_t>(d))) {
          return bad(absl::StrCat("tensor '", name, "' has a shape larger than the file"));
        }
        numel *= static_cast<uint64_t>(d);
      }
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != numel * c10::elementSize(type)) {
        return bad(
            absl::StrCat("tensor '", name, "' has offsets that do not fit its shape or the file"));
      }
      entries.push_back({name, type, std::move(shape), offsets[0], offsets[1]});
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("malformed header entry (", e.what(), ")"));
  }
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;
  for (const Entry* e : by_offset) {
    if (e->begin < covered) {
      return bad(absl::StrCat("tensor '", e->name, "' overlaps another (bytes ", e->begin, " to ",
                              e->end, ")"));
    }
    if (e->begin > covered) {
      return bad(
          absl::StrCat("bytes ", covered, " to ", e->begin, " of the data belong to no tensor"));
    }
    covered = e->end;
  }
  if (covered != data_size) {
    return bad(
        absl::StrCat("bytes ", covered, " to ", data_size, " of the data belong to no tensor"));
  }
  std::map<std::string, at::Tensor> out;
  for (const Entry& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    // An empty tensor has no storage (a null pointer).
    CopyBytes(t.data_ptr(), bytes.data() + header.data_start + e.begin, e.end - e.begin);
    out[e.name] = t;
  }
  return NamedTensors(out.begin(), out.end());
}

}  // namespace pbert::formats
