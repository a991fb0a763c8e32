// Reads tensors from a file written by PyTorch's torch.save (the zip format
// of PyTorch 1.6 and later) without Python: the archive's data.pkl is read
// by a small unpickler for the opcodes torch.save emits, and each tensor is
// rebuilt from its storage record. Layout and limits: docs/formats.md.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/named_tensors.h"

namespace pbert::formats {

struct TorchSaveTensors {
  // The state dict's tensors by key, in the file's order: the top-level dict
  // if its values are tensors, else its "model" (or "state_dict") entry, as
  // NVIDIA's MLPerf checkpoints wrap it.
  NamedTensors tensors;
  // Keys of that dict that hold something else (numbers, strings, ...).
  std::vector<std::string> skipped;
};

// Fails with one line naming the file and what is wrong: not a zip archive
// (or the legacy pre-1.6 format), damaged records, opcodes or objects
// outside what torch.save writes for tensors, storages that do not hold the
// tensor, no dict of tensors.
absl::StatusOr<TorchSaveTensors> ReadTorchSave(const std::string& path);

}  // namespace pbert::formats
