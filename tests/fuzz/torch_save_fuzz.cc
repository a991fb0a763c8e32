// Whole torch.save files: the zip archive (its directory, zip64 records,
// local headers, CRC-32s) before the pickle in it.
#include "formats/torch_save.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/touch_tensors.h"

namespace pbert::fuzz::torch_save {

PBERT_FUZZ_TARGET(torch_save) {
  auto read = formats::ReadTorchSave(WriteInput("model.pt", input));
  if (!read.ok()) return false;
  (void)TouchTensors(read->tensors);
  return true;
}

}  // namespace pbert::fuzz::torch_save
