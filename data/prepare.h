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
  std::string input_format = "auto";  // auto, wiki, text or hdf5
  std::string vocab;
  bool lower_case = true;
  int max_chars_per_word = Tokenizer::kDefaultMaxCharsPerWord;
  InstanceOptions instances;
  uint64_t records_per_shard = 1 << 18;
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
};

// Reports (stage, units done, units in all; 0 if unknown).
using PrepareProgress = std::function<void(const std::string&, uint64_t, uint64_t)>;

// The input formats: "auto" (WikiExtractor if the file starts with "<doc",
// else text), "wiki", "text", "hdf5".
std::vector<std::string> InputFormatNames();

absl::StatusOr<PrepareSummary> Prepare(const PrepareOptions& options,
                                       const PrepareProgress& progress = nullptr);

}  // namespace pbert::data
