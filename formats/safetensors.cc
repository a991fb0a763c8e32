#include "formats/safetensors.h"

#include <ATen/ops/empty.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/mmap_file.h"
#include "common/status.h"
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
  return absl::InvalidArgumentError(absl::StrCat("unsupported safetensors dtype '", name, "'"));
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
  Header header;
  try {
    header.json = nlohmann::json::parse(bytes.begin() + sizeof(length),
                                        bytes.begin() + sizeof(length) + length);
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("header is not JSON (", e.what(), ")"));
  }
  if (!header.json.is_object()) return bad("header is not a JSON object");
  header.data_start = sizeof(length) + length;
  return header;
}

}  // namespace

absl::Status WriteSafetensors(const NamedTensors& named, const std::string& path,
                              const std::map<std::string, std::string>& metadata,
                              Existing existing) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> tensors;
  uint64_t offset = 0;
  for (const auto& [name, value] : named) {
    at::Tensor t = value.detach().to(at::kCPU).contiguous();
    ASSIGN_OR_RETURN(const char* dtype, NameOf(t.scalar_type()));
    uint64_t bytes = t.numel() * t.element_size();
    header[name] = {
        {"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    tensors.push_back(t);
  }
  std::string text = header.dump();
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
  std::map<std::string, at::Tensor> out;
  try {
    for (const auto& [name, entry] : header.json.items()) {
      if (name == "__metadata__") continue;
      ASSIGN_OR_RETURN(at::ScalarType type, TypeOf(entry.at("dtype").get<std::string>()));
      std::vector<int64_t> shape = entry.at("shape").get<std::vector<int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
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
      at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
      std::memcpy(t.data_ptr(), bytes.data() + header.data_start + offsets[0],
                  offsets[1] - offsets[0]);
      out[name] = t;
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("malformed header entry (", e.what(), ")"));
  }
  return NamedTensors(out.begin(), out.end());
}

}  // namespace pbert::formats
