#include "model/checkpoint.h"

#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/mmap_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "model/tf_bundle.h"
#include "model/torch_save.h"
#include "model/weight_names.h"
#include "nlohmann/json.hpp"

namespace pbert::model {
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

std::string ShapeText(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

}  // namespace

namespace {

absl::Status WriteSafetensors(const std::vector<std::pair<std::string, at::Tensor>>& named,
                              const std::string& path,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> tensors;
  uint64_t offset = 0;
  for (const auto& [name, value] : named) {
    at::Tensor t = value.detach().to(torch::kCPU).contiguous();
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
  return writer.Commit();
}

}  // namespace

absl::Status SaveSafetensors(const torch::nn::Module& module, const std::string& path,
                             const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& item : module.named_parameters()) named.emplace_back(item.key(), item.value());
  return WriteSafetensors(named, path, metadata);
}

absl::Status SaveSafetensors(const std::map<std::string, at::Tensor>& tensors,
                             const std::string& path,
                             const std::map<std::string, std::string>& metadata) {
  return WriteSafetensors({tensors.begin(), tensors.end()}, path, metadata);
}

absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto bytes = file.bytes();
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid safetensors file: ", what));
  };
  uint64_t length;
  if (bytes.size() < sizeof(length)) return bad("shorter than its 8-byte header length");
  std::memcpy(&length, bytes.data(), sizeof(length));
  if (length > bytes.size() - sizeof(length)) return bad("header length beyond the end of file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + sizeof(length),
                                   bytes.begin() + sizeof(length) + length);
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("header is not JSON (", e.what(), ")"));
  }
  const uint64_t data_start = sizeof(length) + length;
  const uint64_t data_size = bytes.size() - data_start;
  std::map<std::string, at::Tensor> out;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      ASSIGN_OR_RETURN(at::ScalarType type, TypeOf(entry.at("dtype").get<std::string>()));
      std::vector<int64_t> shape = entry.at("shape").get<std::vector<int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != static_cast<uint64_t>(numel) * c10::elementSize(type)) {
        return bad(
            absl::StrCat("tensor '", name, "' has offsets that do not fit its shape or the file"));
      }
      at::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
      std::memcpy(t.data_ptr(), bytes.data() + data_start + offsets[0], offsets[1] - offsets[0]);
      out[name] = t;
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("malformed header entry (", e.what(), ")"));
  }
  return out;
}

std::vector<std::string> WeightFormatNames() { return {"safetensors", "torch", "tensorflow"}; }

absl::StatusOr<Weights> ReadWeights(const std::string& given) {
  // A checkpoint folder of ours stands for its weights.
  std::error_code error;
  const std::string path = std::filesystem::is_directory(given, error) &&
                                   std::filesystem::is_regular_file(given + "/model.safetensors")
                               ? given + "/model.safetensors"
                               : given;
  Weights out;
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::function<MappedName(const std::string&)> map_name = MapTorchName;
  if (IsTensorBundle(path)) {
    out.format = "tensorflow";
    ASSIGN_OR_RETURN(named, ReadTensorBundle(path));
    map_name = MapTensorFlowName;
  } else {
    RETURN_IF_ERROR(CheckReadableFile(path, "weights file"));
    ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
    auto bytes = file.bytes();
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) {
      out.format = "torch";
      ASSIGN_OR_RETURN(TorchSaveTensors saved, ReadTorchSave(path));
      named = std::move(saved.tensors);
      out.skipped = std::move(saved.skipped);
    } else if (bytes.size() >= 2 && bytes[0] == 0x80 && bytes[1] <= 5) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is a pickle file (torch.save before PyTorch 1.6, or _use_new_zipfile_"
                "serialization=False); re-save it with a recent torch.save"));
    } else {
      out.format = "safetensors";
      ASSIGN_OR_RETURN(auto tensors, ReadSafetensors(path));
      named.assign(tensors.begin(), tensors.end());
    }
  }
  for (auto& [name, tensor] : named) {
    MappedName mapped = map_name(name);
    if (mapped.fate == NameFate::kSkipped) {
      out.skipped.push_back(name);
    } else if (mapped.fate == NameFate::kUnknown) {
      out.unknown.push_back(name);
    } else {
      at::Tensor value = mapped.transpose && tensor.dim() == 2 ? tensor.t().contiguous() : tensor;
      auto [it, added] = out.tensors.emplace(mapped.name, value);
      if (added) continue;
      // Hugging Face state dicts hold the tied MLM bias twice, equal.
      if (!it->second.sizes().equals(value.sizes()) || !torch::equal(it->second, value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": two different tensors are both read as '", mapped.name, "'"));
      }
      out.skipped.push_back(name);
    }
  }
  return out;
}

absl::Status LoadWeights(torch::nn::Module& module, const std::string& path) {
  ASSIGN_OR_RETURN(Weights weights, ReadWeights(path));
  if (!weights.skipped.empty()) {
    logging::Get("model")->debug("{}: skipped {}", path, absl::StrJoin(weights.skipped, ", "));
  }
  auto params = module.named_parameters();
  std::map<std::string, at::Tensor> found;
  std::vector<std::string> unexpected = weights.unknown, misshaped, missing;
  for (const auto& [name, tensor] : weights.tensors) {
    const at::Tensor* target = params.find(name);
    if (target == nullptr) {
      unexpected.push_back(name);
      continue;
    }
    if (!target->sizes().equals(tensor.sizes())) {
      misshaped.push_back(absl::StrCat(name, " (file ", ShapeText(tensor.sizes()), ", model ",
                                       ShapeText(target->sizes()), ")"));
      continue;
    }
    found[name] = tensor;
  }
  for (const auto& item : params) {
    if (found.count(item.key()) == 0 &&
        std::find_if(misshaped.begin(), misshaped.end(), [&](const std::string& m) {
          return absl::StartsWith(m, item.key() + " ");
        }) == misshaped.end()) {
      missing.push_back(item.key());
    }
  }
  if (!missing.empty() || !unexpected.empty() || !misshaped.empty()) {
    std::vector<std::string> parts;
    if (!missing.empty()) parts.push_back(absl::StrCat("missing: ", absl::StrJoin(missing, ", ")));
    if (!unexpected.empty()) {
      parts.push_back(absl::StrCat("unexpected: ", absl::StrJoin(unexpected, ", ")));
    }
    if (!misshaped.empty()) {
      parts.push_back(absl::StrCat("mis-shaped: ", absl::StrJoin(misshaped, ", ")));
    }
    return absl::InvalidArgumentError(absl::StrCat(path, " does not match the model config (",
                                                   absl::StrJoin(parts, "; "),
                                                   "); check model.size and the vocabulary"));
  }
  torch::NoGradGuard no_grad;
  for (auto& item : params) item.value().copy_(found.at(item.key()));
  return absl::OkStatus();
}

}  // namespace pbert::model
