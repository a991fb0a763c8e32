// MLPerf's HDF5 shards (fixed-width, variable-length and packed layouts):
// inspected, opened and every row read.
#include "data/hdf5.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz::hdf5 {

PBERT_FUZZ_TARGET(hdf5) {
  const std::string path = WriteInput("part-00000.hdf5", input);
  (void)data::Hdf5Reader::Inspect(path);
  auto reader = data::Hdf5Reader::Open(path);
  if (!reader.ok()) return false;
  std::vector<int> depths;
  return (*reader)->Read(0, (*reader)->size(), &depths).ok();
}

}  // namespace pbert::fuzz::hdf5
