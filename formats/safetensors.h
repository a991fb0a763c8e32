// Hugging Face's safetensors files: an 8-byte header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw bytes
// (little-endian, C order). Written atomically; read through a memory map.
// Layout: docs/formats.md.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "formats/named_tensors.h"

namespace pbert::formats {

// Writes `tensors` (any device; copied to the host) in the order given;
// `metadata` goes to the header's "__metadata__". `existing`: what happens
// to a file already at `path` (common/atomic_file.h).
absl::Status WriteSafetensors(const NamedTensors& tensors, const std::string& path,
                              const std::map<std::string, std::string>& metadata = {},
                              Existing existing = Existing::kReplace);

// Every tensor of the file (CPU, the file's dtype), in name order. A damaged
// file is a DataLoss error naming the file and what is wrong.
absl::StatusOr<NamedTensors> ReadSafetensors(const std::string& path);

}  // namespace pbert::formats
