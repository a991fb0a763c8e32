// Pack indexes (.pbpack): read, and every row taken.
#include "data/packing/pack_index.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz::pack_index {

PBERT_FUZZ_TARGET(pack_index) {
  auto index = data::PackIndex::Read(WriteInput("packs.pbpack", input));
  if (!index.ok()) return false;
  for (uint64_t r = 0; r < index->rows(); ++r) (void)index->Row(r);
  return true;
}

}  // namespace pbert::fuzz::pack_index
