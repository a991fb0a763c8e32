// bench/scaling: load balance of data-parallel training with variable-length
// sequences, simulated on the real length histograms (the paper's Figure 5).
//
// W workers each take b sequences per step, drawn at random from the
// histogram; a step lasts as long as its slowest worker. Per step and
// worker, the work in token slots is:
//   padding    b x S, whatever the lengths (every worker equal, mostly padding)
//   unpadding  the sum of its b lengths (no padding, but workers differ: the
//              slowest sets the pace, and the more workers, the slower it is)
//   packing    b / p rows of S tokens, p the packing factor of `lp` on the
//              histogram (every worker equal, almost no padding)
// Printed per W: for unpadding, the slowest worker's tokens against the mean
// (averaged over steps); and for each method, the efficiency: real tokens
// over W x the slowest worker's slots, which is the share of the machine
// doing useful work.
//
//   build/bench/scaling [--per-worker 32] [--steps 2000] [--histogram FILE --max-len S]
//
// Defaults: ../shared/data/histogram_wikipedia_512.txt (S 512) and
// histogram_squad_384.txt (S 384), 32 sequences per worker, 2,000 steps.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "data/histogram.h"
#include "data/packing/report.h"
#include "tests/source_paths.h"

namespace {

int Simulate(const std::string& path, int S, int per_worker, int steps) {
  auto histogram = pbert::data::ReadHistogramFile(path, S);
  if (!histogram.ok()) {
    std::cerr << "bench/scaling: " << histogram.status() << "\n";
    return 2;
  }
  auto packed = pbert::data::RunPacking("lp", *histogram, {S, 8, 1});
  if (!packed.ok()) {
    std::cerr << "bench/scaling: " << packed.status() << "\n";
    return 1;
  }
  const double packing_factor = packed->report.packing_factor;
  const double packing_efficiency = packed->report.efficiency;
  const double mean_length = static_cast<double>(histogram->tokens()) / histogram->sequences();
  std::printf(
      "\n%s (max length %d): %llu sequences, mean length %.1f; lp packing factor %.4f, "
      "efficiency %.2f%%; %d sequences per worker per step, %d steps\n",
      path.c_str(), S, static_cast<unsigned long long>(histogram->sequences()), mean_length,
      packing_factor, 100 * packing_efficiency, per_worker, steps);
  std::printf("%8s %14s %16s %14s %14s %18s\n", "workers", "padding", "unpadding", "packing",
              "unpadding", "packing over");
  std::printf("%8s %14s %16s %14s %14s %18s\n", "", "efficiency", "slowest / mean", "efficiency",
              "efficiency", "unpadding");
  std::discrete_distribution<int> length(histogram->counts.begin(), histogram->counts.end());
  std::mt19937_64 rng(2021);
  for (int workers = 1; workers <= 1024; workers *= 2) {
    // Fewer steps for many workers: the same number of worker-steps.
    const int n = std::max(20, steps / std::max(1, workers / 8));
    double ratio = 0, real = 0, slowest_total = 0;
    for (int step = 0; step < n; ++step) {
      double slowest = 0, sum = 0;
      for (int w = 0; w < workers; ++w) {
        double tokens = 0;
        for (int k = 0; k < per_worker; ++k) tokens += length(rng);
        slowest = std::max(slowest, tokens);
        sum += tokens;
      }
      ratio += slowest / (sum / workers);
      real += sum;
      slowest_total += slowest * workers;
    }
    const double unpadding = real / slowest_total;
    // Padding and packing give every worker the same slots: their
    // efficiency is the real share of those slots, for any W.
    const double padding = mean_length / S;
    std::printf("%8d %13.1f%% %16.3f %13.1f%% %13.1f%% %17.3fx\n", workers, 100 * padding,
                ratio / n, 100 * packing_efficiency, 100 * unpadding,
                packing_efficiency / unpadding);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int per_worker = 32, steps = 2000, S = 0;
  std::string path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--per-worker") per_worker = std::stoi(value);
    else if (flag == "--steps") steps = std::stoi(value);
    else if (flag == "--histogram") path = value;
    else if (flag == "--max-len") S = std::stoi(value);
    else {
      std::cerr << "usage: bench/scaling [--per-worker B] [--steps N] [--histogram FILE "
                   "--max-len S]\n";
      return 2;
    }
  }
  if (!path.empty()) return Simulate(path, S > 0 ? S : 512, per_worker, steps);
  const std::string shared = pbert::testing::SharedDataDir();
  int status = Simulate(shared + "/histogram_wikipedia_512.txt", 512, per_worker, steps);
  if (status != 0) return status;
  return Simulate(shared + "/histogram_squad_384.txt", 384, per_worker, steps);
}
