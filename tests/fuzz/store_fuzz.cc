// Instance stores: the manifest (store.json) and a shard, opened, verified
// and every record read. The input's parts: the manifest, the shard.
#include "data/store.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz::store {

PBERT_FUZZ_TARGET(store) {
  const auto parts = Parts(input, 2);
  const std::string manifest = WriteInput("store/store.json", parts[0]);
  WriteInput("store/" + data::ShardFileName(0), parts[1]);
  const std::string dir = manifest.substr(0, manifest.size() - std::string("/store.json").size());
  auto store = data::InstanceStore::Open(dir);
  if (!store.ok()) return false;
  (void)store->Histogram();
  if (!store->Verify().ok()) return false;
  data::Instance record;
  bool read = true;
  for (uint64_t i = 0; i < store->size(); ++i) read &= store->Read(i, &record).ok();
  return read;
}

}  // namespace pbert::fuzz::store
