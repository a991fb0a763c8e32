// TensorFlow checkpoints (tensor bundles): the index's table (blocks,
// varints, checksums, the bundle's protocol buffers) and the data shard it
// points into. The input's parts: the .index file, then the data file.
#include "formats/tensor_bundle.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/touch_tensors.h"

namespace pbert::fuzz::tensor_bundle {

PBERT_FUZZ_TARGET(tensor_bundle) {
  const auto parts = Parts(input, 2);
  const std::string index = WriteInput("model.ckpt.index", parts[0]);
  WriteInput("model.ckpt.data-00000-of-00001", parts[1]);
  auto read = formats::ReadTensorBundle(index);
  if (!read.ok()) return false;
  (void)TouchTensors(*read);
  return true;
}

}  // namespace pbert::fuzz::tensor_bundle
