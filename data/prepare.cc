#include "data/prepare.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/hdf5.h"
#include "data/packing/pack_index.h"
#include "data/store.h"
#include "data/tokenizer.h"

namespace pbert::data {
namespace {

// One progress bar over all inputs, in their bytes: a file's bytes count
// as its rows are read, so that the rate and ETA cover thousands of shards.
class ImportProgress {
 public:
  ImportProgress(const std::vector<std::string>& inputs, const PrepareProgress& progress)
      : progress_(progress) {
    for (const std::string& path : inputs) {
      std::error_code error;
      const uintmax_t size = std::filesystem::file_size(path, error);
      bytes_.push_back(error ? 0 : static_cast<uint64_t>(size));
      total_ += bytes_.back();
    }
  }
  // Input `input` starts.
  void Start(size_t input) { input_ = input, rows_ = counted_ = 0; }
  // `rows` more of its `of` rows read.
  void Rows(uint64_t rows, uint64_t of) {
    rows_ += rows;
    const uint64_t bytes = bytes_[input_];
    const uint64_t counted = of == 0 ? bytes : bytes * std::min(rows_, of) / of;
    if (progress_ && counted > counted_) progress_("import", counted - counted_, total_);
    counted_ = counted;
  }

 private:
  const PrepareProgress& progress_;
  std::vector<uint64_t> bytes_;  // of each input
  uint64_t total_ = 0;
  size_t input_ = 0;
  uint64_t rows_ = 0, counted_ = 0;  // of the current input
};

void Count(const Instance& in, PrepareSummary* summary) {
  summary->instances += 1;
  summary->tokens += in.length();
  summary->masked_tokens += in.masked_positions.size();
  summary->random_next += in.next_sentence_label;
  summary->histogram.counts[in.length()] += 1;
}

absl::Status ImportHdf5(const PrepareOptions& o, const Vocabulary& vocabulary,
                        const PrepareProgress& progress, PrepareSummary* summary) {
  std::unique_ptr<StoreWriter> writer;
  // Every row's sequence count (its sequences are the next ones in input
  // order) and every sequence's length: 3 bytes a sequence at most.
  std::vector<uint8_t> row_depths;
  std::vector<uint16_t> lengths;
  std::vector<Instance> picked_from;  // with o.pick: every sequence, in input order
  bool packed = false;
  ImportProgress bar(o.inputs, progress);
  for (size_t input = 0; input < o.inputs.size(); ++input) {
    const std::string& path = o.inputs[input];
    ASSIGN_OR_RETURN(auto reader, Hdf5Reader::Open(path));
    bar.Start(input);
    auto read_rows = [&](size_t rows) { bar.Rows(rows, static_cast<uint64_t>(reader->size())); };
    packed |= reader->layout() == Hdf5Layout::kPacked;
    // A fixed-width file's width says nothing of its sequences (a 512-wide
    // file may hold none longer than 128): those are checked as they are
    // read. A variable-length file's widest row is its longest sequence (or
    // packed row), known now.
    const bool fixed = reader->layout() == Hdf5Layout::kFixed;
    if (!fixed && reader->max_len() > o.instances.max_seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " holds ", reader->layout() == Hdf5Layout::kPacked ? "packed rows" : "sequences",
          " of up to ", reader->max_len(),
          " tokens; raise data.max_seq_len to ", reader->max_len()));
    }
    int longest = 0;  // of a fixed-width file's sequences, once one is too long
    int64_t first_too_long = -1;
    if (writer == nullptr) {
      // NVIDIA's variable-length files have no fixed slot count: MLPerf's 76
      // at 512 (or the first file's widest, if wider) bounds the store.
      const int predictions =
          reader->layout() == Hdf5Layout::kFixed
              ? reader->max_predictions()
              : std::max(reader->max_predictions(), o.instances.max_predictions_per_seq);
      StoreInfo info{static_cast<uint32_t>(vocabulary.size()), vocabulary.checksum(),
                     static_cast<uint32_t>(o.instances.max_seq_len),
                     static_cast<uint32_t>(predictions),
                     absl::StrCat(Hdf5LayoutName(reader->layout()), " HDF5")};
      ASSIGN_OR_RETURN(writer, StoreWriter::Create(o.output, info, static_cast<uint64_t>(o.records_per_shard),
                                                  o.overwrite));
    }
    constexpr int64_t kChunk = 8192;
    for (int64_t begin = 0; begin < reader->size(); begin += kChunk) {
      std::vector<int> depths;
      ASSIGN_OR_RETURN(auto chunk,
                       reader->Read(begin, std::min(kChunk, reader->size() - begin), &depths));
      if (fixed) {
        for (size_t r = 0; r < chunk.size(); ++r) {
          if (chunk[r].length() <= o.instances.max_seq_len) continue;
          if (first_too_long < 0) first_too_long = begin + static_cast<int64_t>(r);
          longest = std::max(longest, chunk[r].length());
        }
        // Read on to the end to name the longest; write nothing more.
        if (first_too_long >= 0) {
          read_rows(depths.size());
          continue;
        }
      }
      if (o.pick > 0) {  // picked from all inputs at the end
        for (Instance& in : chunk) picked_from.push_back(std::move(in));
        read_rows(depths.size());
        continue;
      }
      size_t next = 0;
      for (size_t r = 0; r < depths.size(); ++r) {
        const int depth = depths[r];
        if (depth > 255) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": row ", begin + static_cast<int64_t>(r), " holds ", depth,
                           " sequences; a packed row may hold at most 255"));
        }
        row_depths.push_back(static_cast<uint8_t>(depth));
        for (int k = 0; k < depth; ++k, ++next) {
          lengths.push_back(static_cast<uint16_t>(chunk[next].length()));
          RETURN_IF_ERROR(Annotate(writer->Add(chunk[next]), path));
          Count(chunk[next], summary);
        }
      }
      read_rows(depths.size());
    }
    if (first_too_long >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " holds sequences of up to ", longest, " tokens (the first at row ",
                       first_too_long, "), more than data.max_seq_len ", o.instances.max_seq_len,
                       "; raise data.max_seq_len to ", longest));
    }
  }
  if (o.pick > 0) {
    ASSIGN_OR_RETURN(std::vector<uint64_t> picks, PickEvenly(picked_from.size(), static_cast<uint64_t>(o.pick)));
    for (uint64_t i : picks) {
      RETURN_IF_ERROR(writer->Add(picked_from[i]));
      Count(picked_from[i], summary);
    }
    return writer->Finish();  // a pick of sequences keeps no rows
  }
  if (packed) {
    // Their packing, kept: train reads it with data.pack_index, or re-packs.
    ASSIGN_OR_RETURN(PackIndex index,
                     PackIndexFromRows(o.instances.max_seq_len, row_depths, lengths));
    RETURN_IF_ERROR(
        index.Write(absl::StrCat(writer->staging_dir(), "/", kKeptPackIndex), "nvidia-packed"));
    summary->kept_rows = index.rows();
  }
  return writer->Finish();
}

CorpusFormat CorpusFormatOf(InputFormat format) {
  switch (format) {
    case InputFormat::kWiki:
      return CorpusFormat::kWikiExtractor;
    case InputFormat::kText:
      return CorpusFormat::kText;
    case InputFormat::kAuto:
    case InputFormat::kHdf5:
      break;
  }
  return CorpusFormat::kAuto;
}

// kAuto: HDF5 if every input is an HDF5 file; else text, each file's kind
// (WikiExtractor or plain) told by its first line.
absl::StatusOr<InputFormat> ResolveInputFormat(InputFormat format,
                                               const std::vector<std::string>& inputs) {
  if (format != InputFormat::kAuto) return format;
  const std::string* hdf5 = nullptr;
  const std::string* text = nullptr;
  for (const std::string& path : inputs) (IsHdf5File(path) ? hdf5 : text) = &path;
  if (hdf5 != nullptr && text != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(*hdf5, " is HDF5 and ", *text,
                     " is not; prepare HDF5 and text inputs into separate stores"));
  }
  return hdf5 != nullptr ? InputFormat::kHdf5 : InputFormat::kAuto;
}

}  // namespace

absl::StatusOr<std::vector<uint64_t>> PickEvenly(uint64_t total, uint64_t n) {
  if (n > total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot pick ", n, " sequences from ", total, "; lower prepare.pick or add inputs"));
  }
  const double ratio = static_cast<double>(total) / static_cast<double>(n);
  std::vector<uint64_t> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint64_t>(static_cast<double>(i) * ratio);
  return out;
}

absl::StatusOr<PrepareSummary> Prepare(const PrepareOptions& o, const PrepareProgress& progress) {
  if (o.inputs.empty()) {
    return absl::InvalidArgumentError("nothing to prepare: give input files (prepare.inputs)");
  }
  if (o.output.empty()) {
    return absl::InvalidArgumentError("prepare needs an output folder: --out STORE (data.store)");
  }
  // Fail before the work, not after it.
  ASSIGN_OR_RETURN(const InputFormat input_format, ResolveInputFormat(o.input_format, o.inputs));
  // Text is masked here: [CLS] and two [SEP] never are, so more slots than a
  // sequence has other tokens could never be filled.
  if (input_format != InputFormat::kHdf5 &&
      o.instances.max_predictions_per_seq > o.instances.max_seq_len - 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prepare.max_predictions_per_seq ", o.instances.max_predictions_per_seq,
        " is more than a sequence of data.max_seq_len ", o.instances.max_seq_len, " can mask (",
        o.instances.max_seq_len - 3, " tokens besides [CLS] and [SEP]); lower it"));
  }
  std::vector<std::string> read = o.inputs;
  read.push_back(o.vocab);
  RETURN_IF_ERROR(CheckStoreTarget(o.output, read, o.overwrite));
  ASSIGN_OR_RETURN(Vocabulary loaded, Vocabulary::Load(o.vocab));
  auto vocabulary = std::make_shared<const Vocabulary>(std::move(loaded));
  PrepareSummary summary;
  summary.histogram = LengthHistogram(o.instances.max_seq_len);
  if (input_format == InputFormat::kHdf5) {
    RETURN_IF_ERROR(ImportHdf5(o, *vocabulary, progress, &summary));
    return summary;
  }

  std::vector<Document> documents;
  for (const std::string& path : o.inputs) {
    RETURN_IF_ERROR(ReadCorpus(
        path, CorpusFormatOf(input_format),
        [&](Document&& d) { documents.push_back(std::move(d)); }, &summary.corpus));
    if (progress) progress("read", 1, o.inputs.size());
  }

  // Tokenize documents on all threads; each writes only its own slots.
  Tokenizer tokenizer(vocabulary, o.lower_case, o.max_chars_per_word);
  std::vector<TokenizedDocument> tokenized(documents.size());
  uint64_t text_bytes = 0;
  for (const Document& d : documents) {
    for (const std::string& sentence : d) text_bytes += sentence.size() + 1;
  }
  const uint64_t sequence_holds = static_cast<uint64_t>(o.instances.max_seq_len - 3);
  std::mutex long_mu;
  auto tokenize = [&](size_t first, size_t last) {
    uint64_t long_sentences = 0, cut = 0, longest = 0;
    for (size_t d = first; d < last; ++d) {
      uint64_t bytes = 0;
      for (const std::string& sentence : documents[d]) {
        std::vector<int32_t> ids = tokenizer.Encode(sentence);
        bytes += sentence.size() + 1;
        if (ids.size() > sequence_holds) {
          long_sentences += 1;
          cut += ids.size() - sequence_holds;
          longest = std::max<uint64_t>(longest, ids.size());
        }
        if (!ids.empty()) tokenized[d].push_back(std::move(ids));
      }
      if (progress) progress("tokenize", bytes, text_bytes);
    }
    std::lock_guard<std::mutex> lock(long_mu);
    summary.long_sentences += long_sentences;
    summary.long_sentence_tokens_cut += cut;
    summary.longest_sentence = std::max(summary.longest_sentence, longest);
  };
  const size_t workers = std::max<size_t>(1, std::min<size_t>(o.threads, documents.size()));
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back(tokenize, documents.size() * w / workers,
                      documents.size() * (w + 1) / workers);
  }
  for (auto& t : pool) t.join();
  documents.clear();
  if (summary.long_sentences > 0) {
    logging::Get("prepare")->warn(
        "{} sentence(s) hold more tokens than a sequence of {} has room for ({}; the longest: "
        "{}): {} of their tokens are cut off in every instance that uses them; split such lines "
        "into sentences, or raise data.max_seq_len",
        summary.long_sentences, o.instances.max_seq_len, sequence_holds, summary.longest_sentence,
        summary.long_sentence_tokens_cut);
  }

  std::vector<Instance> instances = CreateInstances(tokenized, tokenizer, o.instances, o.threads);
  if (instances.empty()) {
    return absl::InvalidArgumentError(
        "the inputs made no instances: documents need sentences with tokens");
  }
  if (o.pick > 0) {
    ASSIGN_OR_RETURN(std::vector<uint64_t> picks, PickEvenly(instances.size(), static_cast<uint64_t>(o.pick)));
    std::vector<Instance> kept;
    kept.reserve(picks.size());
    for (uint64_t i : picks) kept.push_back(std::move(instances[i]));
    instances = std::move(kept);
  }
  StoreInfo info{static_cast<uint32_t>(vocabulary->size()), vocabulary->checksum(),
                 static_cast<uint32_t>(o.instances.max_seq_len),
                 static_cast<uint32_t>(o.instances.max_predictions_per_seq),
                 absl::StrCat("prepare of ", o.inputs.size(), " file(s), seed ", o.instances.seed)};
  ASSIGN_OR_RETURN(auto writer, StoreWriter::Create(o.output, info, static_cast<uint64_t>(o.records_per_shard),
                                                  o.overwrite));
  for (size_t i = 0; i < instances.size(); ++i) {
    RETURN_IF_ERROR(writer->Add(instances[i]));
    Count(instances[i], &summary);
    if (progress && ((i + 1) % 4096 == 0 || i + 1 == instances.size())) {
      progress("write", i % 4096 + 1, instances.size());
    }
  }
  RETURN_IF_ERROR(writer->Finish());
  return summary;
}

}  // namespace pbert::data
