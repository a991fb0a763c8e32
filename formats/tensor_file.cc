#include "formats/tensor_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/mmap_file.h"
#include "common/status.h"
#include "formats/tensor_bundle.h"
#include "formats/torch_save.h"

namespace pbert::formats {

absl::StatusOr<TensorFile> ReadTensorFile(const std::string& path) {
  TensorFile out;
  if (IsTensorBundle(path)) {
    out.format = TensorFormat::kTensorBundle;
    ASSIGN_OR_RETURN(out.tensors, ReadTensorBundle(path));
    return out;
  }
  RETURN_IF_ERROR(CheckReadableFile(path, "weights file"));
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto bytes = file.bytes();
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) {
    out.format = TensorFormat::kTorchSave;
    ASSIGN_OR_RETURN(TorchSaveTensors saved, ReadTorchSave(path));
    out.tensors = std::move(saved.tensors);
    out.skipped = std::move(saved.skipped);
    return out;
  }
  if (bytes.size() >= 2 && bytes[0] == 0x80 && bytes[1] <= 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is a pickle file (torch.save before PyTorch 1.6, or _use_new_zipfile_"
              "serialization=False); re-save it with a recent torch.save"));
  }
  out.format = TensorFormat::kSafetensors;
  ASSIGN_OR_RETURN(out.tensors, ReadSafetensors(path));
  return out;
}

}  // namespace pbert::formats
