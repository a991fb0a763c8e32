// Packing benchmark: every algorithm on the published BERT length
// histograms (time, efficiency, distance to the lower bound), then the
// assignment of all Wikipedia sequences to rows (time and peak memory).
//
//   build/bench/packing [SHARED_DATA_DIR]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "data/histogram.h"
#include "data/packing/algorithms.h"
#include "data/packing/pack_index.h"
#include "data/packing/report.h"
#include "tests/source_paths.h"

namespace {

using pbert::data::LengthHistogram;

// Resident and peak resident memory of this process, in MB.
double ProcStatusMb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return 0;
}

void ResetPeakMemory() { std::ofstream("/proc/self/clear_refs") << "5"; }

struct Case {
  const char* algorithm;
  int depth;
};

int PackTable(const std::string& path, int max_len) {
  auto histogram = pbert::data::ReadHistogramFile(path, max_len);
  if (!histogram.ok()) {
    std::fprintf(stderr, "%s\n", std::string(histogram.status().message()).c_str());
    return 1;
  }
  std::printf("\n## %s (max length %d)\n\n", path.c_str(), max_len);
  const Case cases[] = {{"none", 1},   {"greedy", 8}, {"ffd", 8},   {"spfhp", 3},
                        {"spfhp", 8},  {"spfhp", 12}, {"lpfhp", 3}, {"lpfhp", 8},
                        {"lpfhp", 12}, {"nnlshp", 3}, {"lp", 3},    {"lp", 8}};
  std::vector<pbert::data::PackingReport> reports;
  for (const Case& c : cases) {
    auto run = pbert::data::RunPacking(c.algorithm, *histogram, {max_len, c.depth, 1});
    if (!run.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.algorithm, std::string(run.status().message()).c_str());
      return 1;
    }
    reports.push_back(run->report);
  }
  std::printf("%s", pbert::data::ReportTable(reports).c_str());
  return 0;
}

int AssignBench(const std::string& path) {
  auto histogram = pbert::data::ReadHistogramFile(path, 512);
  if (!histogram.ok()) return 1;
  // The lengths of a store in its (shuffled) record order.
  std::vector<uint16_t> lengths;
  lengths.reserve(histogram->sequences());
  for (int l = 1; l <= 512; ++l) lengths.insert(lengths.end(), histogram->counts[l], l);
  std::shuffle(lengths.begin(), lengths.end(), std::mt19937_64(1));
  auto plan = pbert::data::PackLp(*histogram, {512, 8, 0});
  if (!plan.ok()) return 1;

  double before = ProcStatusMb("VmRSS");
  ResetPeakMemory();
  auto start = std::chrono::steady_clock::now();
  auto index = pbert::data::AssignSequences(*plan, lengths, 1);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double peak = ProcStatusMb("VmHWM");
  if (!index.ok()) return 1;
  auto verify_start = std::chrono::steady_clock::now();
  bool ok = index->Verify(lengths).ok();
  double verify_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - verify_start).count();
  std::printf("\n## Assignment of %zu sequences to %llu rows (lp, depth 8)\n\n", lengths.size(),
              static_cast<unsigned long long>(index->rows()));
  std::printf("%-34s %10s\n", "measure", "value");
  std::printf("%-34s %10.3f\n", "assign seconds", seconds);
  std::printf("%-34s %10.1f\n", "assign extra peak memory (MB)", peak - before);
  std::printf("%-34s %10.1f\n", "input lengths (MB, mmapped in use)",
              lengths.size() * sizeof(uint16_t) / 1048576.0);
  std::printf("%-34s %10.3f\n", "verify seconds", verify_seconds);
  std::printf("%-34s %10s\n", "partition verified", ok ? "yes" : "NO");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : pbert::testing::SharedDataDir();
  std::printf("# packing benchmark\n");
  int status = PackTable(dir + "/histogram_wikipedia_512.txt", 512);
  status |= PackTable(dir + "/histogram_squad_384.txt", 384);
  status |= AssignBench(dir + "/histogram_wikipedia_512.txt");
  return status;
}
