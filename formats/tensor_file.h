// A file of named tensors in any format packed-bert reads, told apart by its
// contents: safetensors, torch.save (zip archives: a state dict, bare or
// under "model") and TensorFlow tensor bundles (named by their prefix or
// their .index file). No knowledge of what the tensors are: the model maps
// their names (model/weights.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/choices.h"
#include "formats/safetensors.h"

namespace pbert::formats {

enum class TensorFormat { kSafetensors, kTorchSave, kTensorBundle };
inline constexpr Choice<TensorFormat> kTensorFormats[] = {
    {"safetensors", TensorFormat::kSafetensors},
    {"torch", TensorFormat::kTorchSave},
    {"tensorflow", TensorFormat::kTensorBundle},
};
constexpr ChoiceList<TensorFormat> ChoicesOf(TensorFormat) { return kTensorFormats; }

struct TensorFile {
  TensorFormat format = TensorFormat::kSafetensors;
  NamedTensors tensors;              // in the file's order (safetensors: name order)
  std::vector<std::string> skipped;  // entries that are no tensors (torch.save)
};

// Reads `path`. A pickle file of PyTorch before 1.6 is refused with what to
// do; a damaged file is a DataLoss error naming it.
absl::StatusOr<TensorFile> ReadTensorFile(const std::string& path);

}  // namespace pbert::formats
