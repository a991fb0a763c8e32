// `prepare`: raw text (WikiExtractor output or one sentence per line) or
// MLPerf HDF5 files into an instance store.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/corpus.h"
#include "data/histogram.h"
#include "data/instances.h"

namespace pbert::data {

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string input_format = "auto";  // one of InputFormatNames()
  std::string vocab;
  bool lower_case = true;
  int max_chars_per_word = Tokenizer::kDefaultMaxCharsPerWord;
  InstanceOptions instances;
  uint64_t records_per_shard = 1 << 18;
  uint64_t pick = 0;  // > 0: keep this many sequences, PickEvenly
  int threads = 1;
  std::string output;  // the store folder; must not exist yet unless `overwrite`
  bool overwrite = false;  // replace an existing store once the new one is complete
};

struct PrepareSummary {
  CorpusStats corpus;
  uint64_t instances = 0;
  uint64_t tokens = 0;
  uint64_t masked_tokens = 0;
  uint64_t random_next = 0;
  LengthHistogram histogram;
  // HDF5 input with NVIDIA-packed files: their rows, kept as a pack index
  // in the store folder (kKeptPackIndex); 0 otherwise.
  uint64_t kept_rows = 0;
};

// The pack index `prepare` writes into a store made from packed HDF5.
inline constexpr char kKeptPackIndex[] = "packs.pbpack";

// Reports (stage, units done, units in all; 0 if unknown).
using PrepareProgress = std::function<void(const std::string&, uint64_t, uint64_t)>;

// The input formats: "auto" (WikiExtractor if the file starts with "<doc",
// else text), "wiki", "text", "hdf5" (any layout of data/hdf5.h; the rows of
// NVIDIA-packed files are kept as the store's kKeptPackIndex).
std::vector<std::string> InputFormatNames();

// MLPerf's eval-set selection (pick_eval_samples.py): of `total` sequences,
// the `n` at floor(i * (total / n)) for i < n, the ratio in double precision
// as Python computes it. Fails if n > total.
absl::StatusOr<std::vector<uint64_t>> PickEvenly(uint64_t total, uint64_t n);

absl::StatusOr<PrepareSummary> Prepare(const PrepareOptions& options,
                                       const PrepareProgress& progress = nullptr);

}  // namespace pbert::data
