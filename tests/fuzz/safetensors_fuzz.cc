// safetensors files: the header's length, its JSON, each tensor's dtype,
// shape and offsets against the bytes behind it.
#include "formats/safetensors.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/touch_tensors.h"

namespace pbert::fuzz::safetensors {

PBERT_FUZZ_TARGET(safetensors) {
  auto read = formats::ReadSafetensors(WriteInput("model.safetensors", input));
  if (!read.ok()) return false;
  (void)TouchTensors(*read);
  return true;
}

}  // namespace pbert::fuzz::safetensors
