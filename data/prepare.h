// `prepare`: raw text (WikiExtractor output or one sentence per line) or
// MLPerf HDF5 files into an instance store.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/choices.h"
#include "common/config_field.h"
#include "data/corpus.h"
#include "data/histogram.h"
#include "data/instances.h"
#include "data/store.h"

namespace pbert::data {

// The input formats: kAuto is HDF5 if every input is an HDF5 file, else
// text, WikiExtractor for each file whose first line starts with "<doc";
// kHdf5 is any layout of data/hdf5.h (the rows of NVIDIA-packed files are
// kept as the store's kKeptPackIndex).
enum class InputFormat { kAuto, kWiki, kText, kHdf5 };
inline constexpr Choice<InputFormat> kInputFormats[] = {{"auto", InputFormat::kAuto},
                                                        {"wiki", InputFormat::kWiki},
                                                        {"text", InputFormat::kText},
                                                        {"hdf5", InputFormat::kHdf5}};
constexpr ChoiceList<InputFormat> ChoicesOf(InputFormat) { return kInputFormats; }

struct PrepareOptions {
  std::vector<std::string> inputs;
  InputFormat input_format = InputFormat::kAuto;
  std::string vocab;
  bool lower_case = true;
  int max_chars_per_word = Tokenizer::kDefaultMaxCharsPerWord;
  // max_seq_len and seed come from the config's data and run sections.
  InstanceOptions instances;
  int64_t records_per_shard = 1 << 18;
  int64_t pick = 0;  // > 0: keep this many sequences, PickEvenly
  int threads = 1;
  std::string output;  // the store folder; must not exist yet unless `overwrite`
  bool overwrite = false;  // replace an existing store once the new one is complete

  // The config's prepare section.
  template <class V>
  void Visit(V& v) {
    using config::InRange;
    v.Field("inputs", &inputs, "input files: WikiExtractor output, plain text or MLPerf/NVIDIA HDF5");
    v.Field("input_format", &input_format,
            "auto: HDF5 if the inputs are HDF5 files; else WikiExtractor for a file that starts "
            "with <doc, plain text for others");
    v.Field("vocab", &vocab, "BERT vocab.txt");
    v.Field("lower_case", &lower_case, "lower-case and strip accents (uncased vocabularies)");
    v.Field("max_chars_per_word", &max_chars_per_word,
            "longer words become [UNK] (200 as Google's tokenization.py; Hugging Face: 100)",
            InRange(1, 1 << 20));
    v.Include(&instances);
    v.Field("records_per_shard", &records_per_shard, "instances per store shard file",
            InRange<int64_t>(1, 1 << 30));
    v.Field("pick", &pick,
            "keep this many sequences, evenly spaced as MLPerf's pick_eval_samples.py picks the "
            "eval set (10000); 0 keeps all",
            InRange<int64_t>(0, int64_t{1} << 40));
  }
};

struct PrepareSummary {
  CorpusStats corpus;
  uint64_t instances = 0;
  uint64_t tokens = 0;
  uint64_t masked_tokens = 0;
  uint64_t random_next = 0;
  LengthHistogram histogram;
  // Sentences with more tokens than one sequence holds (max_seq_len - 3,
  // besides [CLS] and two [SEP]), the tokens beyond that in all of them, and
  // the longest: their ends are cut off in every instance that uses them.
  uint64_t long_sentences = 0;
  uint64_t long_sentence_tokens_cut = 0;
  uint64_t longest_sentence = 0;
  // Text input: the tokens of its sentences, and how many of them are [UNK].
  uint64_t text_tokens = 0;
  uint64_t unknown_tokens = 0;
  // HDF5 input with NVIDIA-packed files: their rows, kept as a pack index
  // in the store folder (kKeptPackIndex); 0 otherwise.
  uint64_t kept_rows = 0;
};

// Reports (stage, units done, units in all; 0 if unknown). A stage's first
// report gives the units an earlier run did (an import that continues), 0
// for a new one; each later report, the units done since the last.
using PrepareProgress = std::function<void(const std::string&, uint64_t, uint64_t)>;


// MLPerf's eval-set selection (pick_eval_samples.py): of `total` sequences,
// the `n` at floor(i * (total / n)) for i < n, the ratio in double precision
// as Python computes it. Fails if n > total.
absl::StatusOr<std::vector<uint64_t>> PickEvenly(uint64_t total, uint64_t n);

absl::StatusOr<PrepareSummary> Prepare(const PrepareOptions& options,
                                       const PrepareProgress& progress = nullptr);

}  // namespace pbert::data
