// Synthetic pre-training sequences for the benchmarks: lengths drawn from a
// histogram, and sequences of those lengths shaped as BERT's instances.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/histogram.h"
#include "data/instance.h"
#include "tests/source_paths.h"

namespace pbert::bench {

// Sequences of the given lengths: [CLS] A [SEP] B [SEP], random tokens, 15%
// of the others masked (at most 76, MLPerf's limit at 512).
inline std::vector<data::Instance> MakeSequences(const std::vector<int>& lengths, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> token(1000, 30000);
  std::bernoulli_distribution mask(0.15);
  std::vector<data::Instance> out(lengths.size());
  for (size_t n = 0; n < lengths.size(); ++n) {
    data::Instance& in = out[n];
    const int len = lengths[n], split = len / 2;
    for (int i = 0; i < len; ++i) {
      const bool special = i == 0 || i == split || i == len - 1;
      in.input_ids.push_back(i == 0 ? 101 : special ? 102 : token(rng));
      in.segment_ids.push_back(i <= split ? 0 : 1);
      if (!special && in.masked_positions.size() < 76 && mask(rng)) {
        in.masked_positions.push_back(i);
        in.masked_ids.push_back(token(rng));
      }
    }
    in.next_sentence_label = static_cast<int>(rng() % 2);
  }
  return out;
}

// Lengths drawn from `histogram` (counts by length, at least 8), or uniform
// in [32, max_len] when it is empty.
inline std::vector<int> DrawLengths(const std::vector<uint64_t>& histogram, size_t count,
                                    uint32_t seed, int max_len = 512) {
  std::mt19937 rng(seed);
  std::vector<int> out(count);
  if (histogram.empty()) {
    std::uniform_int_distribution<int> uniform(32, max_len);
    for (int& l : out) l = uniform(rng);
    return out;
  }
  std::discrete_distribution<int> pick(histogram.begin(), histogram.end());
  for (int& l : out) l = std::max(8, pick(rng));
  return out;
}

// The histogram lengths are drawn from: the file `given` (--histogram),
// which must be read; or, with none given, Wikipedia-512's published one in
// ../shared/data, or uniform lengths where that is absent.
struct HistogramChoice {
  std::vector<uint64_t> counts;  // empty: uniform
  std::string described;         // for the benchmark's heading
};
inline absl::StatusOr<HistogramChoice> ChooseHistogram(const std::string& given, int max_len) {
  const std::string path =
      given.empty() ? std::string(testing::SharedDataDir()) + "/histogram_wikipedia_512.txt"
                    : given;
  auto read = data::ReadHistogramFile(path, max_len);
  if (read.ok()) return HistogramChoice{read->counts, path};
  if (!given.empty()) return read.status();
  return HistogramChoice{{},
                         "uniform in [32, " + std::to_string(max_len) + "] (no ../shared/data)"};
}

// A new folder PARENT/pbert_NAME.XXXXXX for a benchmark's files (its own:
// nothing else in PARENT is touched); the error names --dir.
inline absl::StatusOr<std::string> NewBenchFolder(const std::string& parent,
                                                  const std::string& name) {
  std::string pattern = parent + "/pbert_" + name + ".XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::InvalidArgumentError("--dir " + parent + ": cannot make a folder in it (" +
                                      std::strerror(errno) + ")");
  }
  return pattern;
}

}  // namespace pbert::bench
