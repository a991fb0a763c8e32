// Data preparation benchmark: text to instances on wiki_00 + wiki_01 (the
// MLPerf BERT sample), in MB of text per second, with 1 thread and with all
// CPUs side by side, split into its stages; then what the checks on every
// record cost: reading the store back with each record validated (as every
// consumer reads it) against reading it unchecked, and opening it (manifest
// and shard checks) against a verify of every checksum.
//
// With --reference, the tokenization of the same text against Google's
// tokenization.py (what create_pretraining_data.py runs, one process):
// every line through prepare's tokenizer on 1 thread and on all CPUs (the
// lines split between the threads as prepare splits documents), taking
// turns with bench/tokenization_peer.py, best of 3 rounds each; the token
// counts must agree.
//
//   build/bench/prepare [SHARED_DATA_DIR] [--reference PATH/tokenization.py]
#include "data/prepare.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "data/store.h"
#include "data/tokenizer.h"
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

// Tokens of `lines` [first, last), as prepare's tokenize stage makes them.
uint64_t TokenizeLines(const pbert::data::Tokenizer& tokenizer,
                       const std::vector<std::string>& lines, size_t first, size_t last) {
  uint64_t tokens = 0;
  std::vector<int32_t> ids;
  for (size_t i = first; i < last; ++i) {
    ids.clear();
    tokenizer.Encode(lines[i], &ids);
    tokens += ids.size();
  }
  return tokens;
}

int MeasureTokenization(const std::string& dir, int cpus, const std::string& reference) {
  const std::vector<std::string> files = {dir + "/wiki_00", dir + "/wiki_01"};
  const std::string vocab_path = dir + "/bert-base-uncased-vocab.txt";
  std::vector<std::string> lines;
  double mb = 0;
  for (const std::string& file : files) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      mb += (line.size() + 1) / 1e6;
      lines.push_back(line);
    }
  }
  auto vocabulary = pbert::data::Vocabulary::Load(vocab_path);
  if (!vocabulary.ok()) {
    std::fprintf(stderr, "%s\n", std::string(vocabulary.status().message()).c_str());
    return 1;
  }
  const pbert::data::Tokenizer tokenizer(
      std::make_shared<const pbert::data::Vocabulary>(std::move(*vocabulary)), true,
      pbert::data::Tokenizer::kDefaultMaxCharsPerWord);
  std::string command = std::string("/usr/bin/python3 ") + pbert::testing::SourceDir() +
                        "/bench/tokenization_peer.py '" + reference + "' '" + vocab_path + "'";
  for (const std::string& file : files) command += " '" + file + "'";
  double best[3] = {1e30, 1e30, 1e30};  // reference, 1 thread, all CPUs
  uint64_t tokens[3] = {0, 0, 0};
  for (int round = 0; round < 3; ++round) {
    FILE* peer = ::popen(command.c_str(), "r");
    char buffer[256] = {0};
    const bool read = peer != nullptr && std::fgets(buffer, sizeof(buffer), peer) != nullptr;
    const int status = peer != nullptr ? ::pclose(peer) : -1;
    unsigned long long n = 0;
    double seconds = 0;
    if (!read || status != 0 ||
        std::sscanf(buffer, "{\"tokens\": %llu, \"seconds\": %lf", &n, &seconds) != 2) {
      std::fprintf(stderr, "the reference failed (%s): %s\n", command.c_str(), buffer);
      return 1;
    }
    tokens[0] = n;
    best[0] = std::min(best[0], seconds);
    for (int side = 1; side <= 2; ++side) {
      const size_t threads = side == 1 ? 1 : static_cast<size_t>(cpus);
      std::vector<uint64_t> counts(threads, 0);
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      for (size_t t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          counts[t] = TokenizeLines(tokenizer, lines, lines.size() * t / threads,
                                    lines.size() * (t + 1) / threads);
        });
      }
      for (auto& thread : pool) thread.join();
      best[side] = std::min(best[side], Seconds(start));
      tokens[side] = 0;
      for (uint64_t c : counts) tokens[side] += c;
    }
  }
  std::printf(
      "\n# tokenization of every line of wiki_00 + wiki_01 (%.2f MB), against Google's "
      "tokenization.py (%s), best of 3 rounds taking turns\n\n| tokenizer | threads | tokens | "
      "seconds | MB/s | x tokenization.py |\n|---|---|---|---|---|---|\n",
      mb, reference.c_str());
  const char* names[3] = {"tokenization.py (Python)", "packed-bert", "packed-bert"};
  const int threads[3] = {1, 1, cpus};
  for (int side = 0; side < 3; ++side) {
    std::printf("| %s | %d | %llu | %.3f | %.2f | %.1fx |\n", names[side], threads[side],
                static_cast<unsigned long long>(tokens[side]), best[side], mb / best[side],
                best[0] / best[side]);
  }
  const bool same = tokens[0] == tokens[1] && tokens[1] == tokens[2];
  std::printf("\ntoken counts %s\n", same ? "agree" : "DIFFER");
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = pbert::testing::SharedDataDir();
  std::string reference;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reference" && i + 1 < argc) {
      reference = argv[++i];
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: prepare [SHARED_DATA_DIR] [--reference PATH/tokenization.py]\n");
      return 2;
    } else {
      dir = arg;
    }
  }
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
  return reference.empty() ? 0 : MeasureTokenization(dir, cpus, reference);
}
