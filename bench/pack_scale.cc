// bench/pack_scale: packing and the pack index at the size of MLPerf's
// phase-2 data set (NVIDIA's preparation: about 156.7M sequences), without
// the store: the sequences' lengths are drawn from Wikipedia-512's length
// histogram (the published one, or uniform in [32, 512] where
// ../shared/data is absent), 2 bytes each, as `pack --store` reads them
// from a store's index. Then, timed one after the other, what `pack` does
// (the histogram, lp's plan, the assignment of sequences to rows) and
// writes, and what `train` does with the index when it starts (reading it,
// checking it against the lengths, its checksum). Prints each phase's
// seconds and the process's peak RSS after it, and the index's size.
//
//   build/bench/pack_scale [--sequences 156700000] [--depth 8] [--histogram FILE]
//       [--dir DIR]
//
// The index (4 bytes per sequence) is written into a new folder of its own,
// DIR/pbert_pack_scale.XXXXXX (DIR: the temporary folder by default), which
// goes at the end.
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "bench/synthetic.h"
#include "data/packing/pack.h"
#include "data/packing/pack_index.h"
#include "tests/source_paths.h"

namespace {

constexpr int kMaxLen = 512;

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "bench/pack_scale: %s\nusage: pack_scale [--sequences N] [--depth D] "
               "[--histogram FILE] [--dir DIR]\n",
               why.c_str());
  return 2;
}

double PeakRssGiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1 << 20);  // KiB to GiB
}

class Phases {
 public:
  Phases() { std::printf("| phase | seconds | peak RSS GiB |\n|---|---|---|\n"); }
  void Done(const char* what) {
    const auto now = std::chrono::steady_clock::now();
    std::printf("| %s | %.2f | %.2f |\n", what, std::chrono::duration<double>(now - last_).count(),
                PeakRssGiB());
    std::fflush(stdout);
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

int main(int argc, char** argv) {
  int64_t sequences = 156'700'000;
  int depth = 8;
  std::string histogram;  // --histogram; default: bench/synthetic.h's
  std::string parent = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--sequences" && absl::SimpleAtoi(value, &sequences) && sequences > 0 &&
        sequences <= UINT32_MAX) {
    } else if (flag == "--depth" && absl::SimpleAtoi(value, &depth) && depth > 0) {
    } else if (flag == "--histogram") {
      histogram = value;
    } else if (flag == "--dir") {
      parent = value;
    } else {
      return Usage("bad argument " + flag + " " + value);
    }
  }
  auto chosen = pbert::bench::ChooseHistogram(histogram, kMaxLen);
  if (!chosen.ok()) return Usage(std::string(chosen.status().message()));
  const std::vector<uint64_t>& counts = chosen->counts;
  const std::string& lengths_from = chosen->described;
  auto made = pbert::bench::NewBenchFolder(parent, "pack_scale");
  if (!made.ok()) return Usage(std::string(made.status().message()));
  const std::string folder = *made;
  // The folder goes however this ends.
  struct Remove {
    std::string path;
    ~Remove() { std::filesystem::remove_all(path); }
  } remove{folder};
  const std::string out = folder + "/rows.pbpack";
  std::printf("# %lld sequences (lengths %s), lp at depth %d, rows of %d; the index at %s\n\n",
              static_cast<long long>(sequences), lengths_from.c_str(), depth, kMaxLen, out.c_str());
  Phases phases;
  // Drawn in blocks, kept as 16-bit lengths as a store's index keeps them.
  std::vector<uint16_t> lengths(static_cast<size_t>(sequences));
  constexpr size_t kBlock = 1 << 22;
  for (size_t begin = 0; begin < lengths.size(); begin += kBlock) {
    const size_t n = std::min(kBlock, lengths.size() - begin);
    const std::vector<int> block =
        pbert::bench::DrawLengths(counts, n, static_cast<uint32_t>(begin / kBlock), kMaxLen);
    std::copy(block.begin(), block.end(), lengths.begin() + static_cast<int64_t>(begin));
  }
  phases.Done("lengths drawn (not pack's work; 2 bytes each)");
  auto packed = pbert::data::PackLengths("lp", lengths, {kMaxLen, depth, 1});
  if (!packed.ok()) return Usage(std::string(packed.status().message()));
  phases.Done("pack: histogram, lp's plan, sequences assigned to rows");
  if (auto s = packed->index.Write(out, "lp"); !s.ok()) return Usage(std::string(s.message()));
  phases.Done("pack: the index written");
  const double rows = static_cast<double>(packed->index.rows());
  packed->index = {};
  auto index = pbert::data::PackIndex::Read(out);
  if (!index.ok()) return Usage(std::string(index.status().message()));
  phases.Done("train's start: the index read");
  if (auto s = index->Verify(lengths); !s.ok()) return Usage(std::string(s.message()));
  phases.Done("train's start: the index checked against the lengths");
  const uint64_t checksum = index->Checksum();
  phases.Done("train's start: the index's checksum");
  const double bytes = static_cast<double>(std::filesystem::file_size(out));
  std::printf(
      "\n%.0f rows (packing factor %.3f, efficiency %.4f%%); the index file %.0f MB (%.2f bytes "
      "per sequence), checksum %016llx\n",
      rows, packed->run.report.packing_factor, 100 * packed->run.report.efficiency, bytes / 1e6,
      bytes / static_cast<double>(sequences), static_cast<unsigned long long>(checksum));
  return 0;
}
