// torch.save's pickle (data.pkl) and its storages, put in a well-formed
// archive here, so that the fuzzer's changes reach the unpickler rather
// than the archive's CRC-32s. The input's parts: data.pkl, then the
// records data/0, data/1, data/2 (fuzz_target.h's Parts).
#include <cstdint>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "formats/torch_save.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/touch_tensors.h"

namespace pbert::fuzz::pickle {

void Put(std::string* out, uint64_t value, int bytes) {
  for (int b = 0; b < bytes; ++b) out->push_back(static_cast<char>(value >> (8 * b)));
}

// A zip archive of `records` (name, bytes), stored, as torch.save writes it.
std::string Zip(const std::vector<std::pair<std::string, absl::string_view>>& records) {
  std::string out, directory;
  for (const auto& [name, bytes] : records) {
    const uint32_t crc = Crc32(
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    const uint64_t local = out.size();
    Put(&out, 0x04034b50, 4);
    Put(&out, 20, 2);  // version needed
    Put(&out, 0, 2);   // flags
    Put(&out, 0, 2);   // stored
    Put(&out, 0, 4);   // time, date
    Put(&out, crc, 4);
    Put(&out, bytes.size(), 4);
    Put(&out, bytes.size(), 4);
    Put(&out, name.size(), 2);
    Put(&out, 0, 2);
    out += name;
    out.append(bytes.data(), bytes.size());
    Put(&directory, 0x02014b50, 4);
    Put(&directory, 20, 2);  // version made by
    Put(&directory, 20, 2);
    Put(&directory, 0, 2);
    Put(&directory, 0, 2);
    Put(&directory, 0, 4);
    Put(&directory, crc, 4);
    Put(&directory, bytes.size(), 4);
    Put(&directory, bytes.size(), 4);
    Put(&directory, name.size(), 2);
    Put(&directory, 0, 2);  // extra
    Put(&directory, 0, 2);  // comment
    Put(&directory, 0, 2);  // disk
    Put(&directory, 0, 2);  // internal attributes
    Put(&directory, 0, 4);  // external attributes
    Put(&directory, local, 4);
    directory += name;
  }
  const uint64_t directory_at = out.size();
  out += directory;
  Put(&out, 0x06054b50, 4);
  Put(&out, 0, 4);  // disks
  Put(&out, records.size(), 2);
  Put(&out, records.size(), 2);
  Put(&out, directory.size(), 4);
  Put(&out, directory_at, 4);
  Put(&out, 0, 2);
  return out;
}

PBERT_FUZZ_TARGET(pickle) {
  const auto parts = Parts(input, 4);
  const std::string archive = Zip({{"archive/data.pkl", parts[0]},
                                   {"archive/data/0", parts[1]},
                                   {"archive/data/1", parts[2]},
                                   {"archive/data/2", parts[3]},
                                   {"archive/version", "3\n"}});
  auto read = formats::ReadTorchSave(WriteInput("model.pt", archive));
  if (!read.ok()) return false;
  (void)TouchTensors(read->tensors);
  return true;
}

}  // namespace pbert::fuzz::pickle
