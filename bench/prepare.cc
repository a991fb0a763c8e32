// Data preparation benchmark: text to instances on wiki_00 + wiki_01 (the
// MLPerf BERT sample), in MB of text per second, with 1 thread and with all
// CPUs side by side, split into its stages; then what the checks on every
// record cost: reading the store back with each record validated (as every
// consumer reads it) against reading it unchecked, and opening it (manifest
// and shard checks) against a verify of every checksum.
//
//   build/bench/prepare [SHARED_DATA_DIR]
#include "data/prepare.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "data/store.h"
#include "tests/source_paths.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Reads every record of the store at `dir` twice over, taking turns:
// validated (InstanceStore::Read) and unchecked (InstanceStore::Get).
void MeasureChecks(const std::string& dir, double prepare_seconds) {
  auto start = std::chrono::steady_clock::now();
  auto store = pbert::data::InstanceStore::Open(dir);
  const double open_seconds = Seconds(start);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", std::string(store.status().message()).c_str());
    return;
  }
  const uint64_t n = store->size();
  double checked = 0, unchecked = 0;
  uint64_t tokens = 0;
  for (int round = 0; round < 3; ++round) {
    start = std::chrono::steady_clock::now();
    pbert::data::Instance in;
    for (uint64_t i = 0; i < n; ++i) {
      if (!store->Read(i, &in).ok()) std::abort();
      tokens += in.input_ids.size();
    }
    checked += Seconds(start);
    start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < n; ++i) tokens += store->Get(i).input_ids.size();
    unchecked += Seconds(start);
  }
  start = std::chrono::steady_clock::now();
  const bool verified = store->Verify().ok();
  const double verify_seconds = Seconds(start);
  std::printf("\n# checks on the %llu records just written (3 passes each, taking turns)\n",
              static_cast<unsigned long long>(n));
  std::printf("open (manifest, shard headers, length tables): %.4f s\n", open_seconds);
  std::printf("read every record validated: %.3f s, unchecked: %.3f s; the checks cost "
              "%.0f ns per record, %.2f%% of the time prepare took to write them\n",
              checked / 3, unchecked / 3, (checked - unchecked) / 3 / n * 1e9,
              100.0 * (checked - unchecked) / 3 / prepare_seconds);
  std::printf("verify (every checksum): %.3f s, %s\n", verify_seconds,
              verified ? "ok" : "FAILED");
  if (tokens == 0) std::printf("(no tokens)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : pbert::testing::SharedDataDir();
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("# prepare benchmark: wiki_00 + wiki_01, max length 128, dupe factor 10\n\n");
  std::printf("%-8s %10s %12s %10s %10s\n", "threads", "text MB", "instances", "seconds", "MB/s");
  double rate[2] = {0, 0};
  int row = 0;
  std::string kept;  // the store of the last run, for the checks
  double kept_seconds = 0;
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
    if (threads == cpus) {
      kept = o.output;
      kept_seconds = seconds;
    } else {
      std::filesystem::remove_all(o.output);
    }
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
  MeasureChecks(kept, kept_seconds);
  std::filesystem::remove_all(kept);
  return 0;
}
