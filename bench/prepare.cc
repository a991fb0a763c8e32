// Data preparation benchmark: text to instances on wiki_00 + wiki_01 (the
// MLPerf BERT sample), in MB of text per second, with 1 thread and with all
// CPUs side by side, split into its stages.
//
//   build/bench/prepare [SHARED_DATA_DIR]
#include "data/prepare.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : PBERT_SHARED_DATA_DIR;
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("# prepare benchmark: wiki_00 + wiki_01, max length 128, dupe factor 10\n\n");
  std::printf("%-8s %10s %12s %10s %10s\n", "threads", "text MB", "instances", "seconds", "MB/s");
  double rate[2] = {0, 0};
  int row = 0;
  for (int threads : {1, cpus}) {
    pbert::data::PrepareOptions o;
    o.inputs = {dir + "/wiki_00", dir + "/wiki_01"};
    o.vocab = dir + "/bert-base-uncased-vocab.txt";
    o.instances.max_seq_len = 128;
    o.instances.dupe_factor = 10;
    o.threads = threads;
    o.output =
        std::filesystem::temp_directory_path() / ("pbert_bench_prepare_" + std::to_string(threads));
    std::filesystem::remove_all(o.output);
    auto start = std::chrono::steady_clock::now();
    auto summary = pbert::data::Prepare(o);
    double seconds = Seconds(start);
    std::filesystem::remove_all(o.output);
    if (!summary.ok()) {
      std::fprintf(stderr, "%s\n", std::string(summary.status().message()).c_str());
      return 1;
    }
    double mb = summary->corpus.bytes / 1e6;
    rate[row++] = mb / seconds;
    std::printf("%-8d %10.2f %12llu %10.3f %10.2f\n", threads, mb,
                static_cast<unsigned long long>(summary->instances), seconds, mb / seconds);
  }
  std::printf("\nspeed-up with %d threads: %.2fx\n", cpus, rate[1] / rate[0]);
  return 0;
}
