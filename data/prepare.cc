#include "data/prepare.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/bytes.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/status.h"
#include "common/structured_text.h"
#include "data/hdf5.h"
#include "data/packing/pack_index.h"
#include "data/store.h"
#include "data/tokenizer.h"
#include "nlohmann/json.hpp"

namespace pbert::data {
namespace {

// One progress bar over all inputs, in their bytes: a file's bytes count
// as its rows are read (in proportion), so that the rate and ETA cover
// thousands of shards. Safe to call from several threads.
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
  uint64_t total() const { return total_; }
  // The bytes that rows [begin, end) of input `input`, of `rows`, stand for.
  uint64_t Bytes(size_t input, int64_t begin, int64_t end, int64_t rows) const {
    auto at = [&](int64_t row) {
      return rows == 0 ? bytes_[input] : bytes_[input] * static_cast<uint64_t>(row) / rows;
    };
    return at(end) - at(begin);
  }
  // The first report: bytes done by an earlier run.
  void Start(uint64_t resumed) {
    if (progress_) progress_("import", resumed, total_);
  }
  void Add(uint64_t bytes) {
    if (progress_ && bytes > 0) progress_("import", bytes, total_);
  }

 private:
  const PrepareProgress& progress_;
  std::vector<uint64_t> bytes_;  // of each input
  uint64_t total_ = 0;
};

void Count(const Instance& in, PrepareSummary* summary) {
  summary->instances += 1;
  summary->tokens += in.length();
  summary->masked_tokens += in.masked_positions.size();
  summary->random_next += in.next_sentence_label;
  summary->histogram.counts[in.length()] += 1;
}

// The store's limits for HDF5 inputs, from the first input.
absl::StatusOr<StoreInfo> Hdf5StoreInfo(const PrepareOptions& o, const Vocabulary& vocabulary) {
  ASSIGN_OR_RETURN(auto first, Hdf5Reader::Open(o.inputs[0]));
  // NVIDIA's variable-length files have no fixed slot count: MLPerf's 76
  // at 512 (or the first file's widest, if wider) bounds the store.
  const int predictions =
      first->layout() == Hdf5Layout::kFixed
          ? first->max_predictions()
          : std::max(first->max_predictions(), o.instances.max_predictions_per_seq);
  return StoreInfo{static_cast<uint32_t>(vocabulary.size()), vocabulary.checksum(),
                   static_cast<uint32_t>(o.instances.max_seq_len),
                   static_cast<uint32_t>(predictions),
                   absl::StrCat(Hdf5LayoutName(first->layout()), " HDF5")};
}

// Rows [begin, end) of input `input`, appended in input order to `out`
// (`depths`: each row's sequence count), each sequence checked against the
// store's limits; errors name the file and the row.
absl::Status ReadRows(
    const PrepareOptions& o, size_t input, int64_t begin, int64_t end, Hdf5Reader& reader,
    const std::function<absl::Status(int64_t row, int depth, std::vector<Instance>&)>& take) {
  const std::string& path = o.inputs[input];
  // A fixed-width file's width says nothing of its sequences (a 512-wide
  // file may hold none longer than 128): those are checked as they are
  // read. A variable-length file's widest row is its longest sequence (or
  // packed row), known once it is open.
  const bool fixed = reader.layout() == Hdf5Layout::kFixed;
  if (!fixed && reader.max_len() > o.instances.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " holds ", reader.layout() == Hdf5Layout::kPacked ? "packed rows" : "sequences",
        " of up to ", reader.max_len(), " tokens; raise data.max_seq_len to ", reader.max_len()));
  }
  int longest = 0;  // of a fixed-width file's sequences, once one is too long
  int64_t first_too_long = -1;
  constexpr int64_t kChunk = 8192;
  std::vector<Instance> row;
  for (int64_t at = begin; at < end; at += kChunk) {
    std::vector<int> depths;
    ASSIGN_OR_RETURN(std::vector<Instance> chunk,
                     reader.Read(at, std::min(kChunk, end - at), &depths));
    if (fixed) {
      for (size_t r = 0; r < chunk.size(); ++r) {
        if (chunk[r].length() <= o.instances.max_seq_len) continue;
        if (first_too_long < 0) first_too_long = at + static_cast<int64_t>(r);
        longest = std::max(longest, chunk[r].length());
      }
      if (first_too_long >= 0) continue;  // read on to name the longest
    }
    size_t next = 0;
    for (size_t r = 0; r < depths.size(); ++r) {
      const int64_t index = at + static_cast<int64_t>(r);
      if (depths[r] > 255) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": row ", index, " holds ", depths[r],
                         " sequences; a packed row may hold at most 255"));
      }
      row.clear();
      for (int k = 0; k < depths[r]; ++k) row.push_back(std::move(chunk[next++]));
      absl::Status taken = take(index, depths[r], row);
      if (!taken.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": row ", index, ": ", taken.message()));
      }
    }
  }
  if (first_too_long >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds sequences of up to ", longest, " tokens (the first at row ",
                     first_too_long, "), more than data.max_seq_len ", o.instances.max_seq_len,
                     "; raise data.max_seq_len to ", longest));
  }
  return absl::OkStatus();
}

// MLPerf's eval set (prepare.pick): every sequence of the inputs in order,
// then the picked ones into a store. Eval inputs are small: one thread.
absl::Status ImportHdf5Picked(const PrepareOptions& o, const StoreInfo& info,
                              const PrepareProgress& progress, PrepareSummary* summary) {
  ImportProgress bar(o.inputs, progress);
  bar.Start(0);
  std::vector<Instance> all;
  for (size_t input = 0; input < o.inputs.size(); ++input) {
    ASSIGN_OR_RETURN(auto reader, Hdf5Reader::Open(o.inputs[input]));
    RETURN_IF_ERROR(ReadRows(o, input, 0, reader->size(), *reader,
                             [&](int64_t, int, std::vector<Instance>& row) {
                               for (Instance& in : row) all.push_back(std::move(in));
                               return absl::OkStatus();
                             }));
    bar.Add(bar.Bytes(input, 0, reader->size(), reader->size()));
  }
  ASSIGN_OR_RETURN(std::vector<uint64_t> picks,
                   PickEvenly(all.size(), static_cast<uint64_t>(o.pick)));
  ASSIGN_OR_RETURN(
      auto writer,
      StoreWriter::Create(o.output, info, static_cast<uint64_t>(o.records_per_shard), o.overwrite));
  for (uint64_t i : picks) {
    RETURN_IF_ERROR(writer->Add(all[i]));
    Count(all[i], summary);
  }
  return writer->Finish();  // a pick of sequences keeps no rows
}

// The import's unit of work: rows [begin, end) of one input.
struct Piece {
  size_t input;
  int64_t begin, end, rows;  // rows: the input's
};

// The store's shards, each made of consecutive pieces of at most
// records_per_shard rows in all: an input longer than that is cut into
// pieces; a variable-length input (read whole when opened) is one piece.
// Made from the inputs' row counts alone, so the same whatever the threads.
absl::StatusOr<std::vector<std::vector<Piece>>> PlanShards(const PrepareOptions& o, bool* packed) {
  std::vector<std::vector<Piece>> shards;
  int64_t in_shard = 0;
  for (size_t input = 0; input < o.inputs.size(); ++input) {
    ASSIGN_OR_RETURN(Hdf5Shape shape, Hdf5Reader::Inspect(o.inputs[input]));
    *packed |= shape.layout == Hdf5Layout::kPacked;
    const int64_t cut =
        shape.layout == Hdf5Layout::kFixed ? o.records_per_shard : std::max<int64_t>(shape.rows, 1);
    for (int64_t begin = 0; begin < shape.rows || begin == 0; begin += cut) {
      const Piece piece{input, begin, std::min(shape.rows, begin + cut), shape.rows};
      if (shards.empty() || in_shard + (piece.end - piece.begin) > o.records_per_shard) {
        shards.emplace_back();
        in_shard = 0;
      }
      shards.back().push_back(piece);
      in_shard += piece.end - piece.begin;
    }
  }
  return shards;
}

// What a shard is made from, for the journal: each piece's file (absolute
// path, inode, size, modification time and status-change time) and rows.
// A changed file is made again: also one changed in place with its
// modification time set back (touch -d), which leaves a new change time,
// which no user can set.
std::string WorkOf(const PrepareOptions& o, const std::vector<Piece>& pieces) {
  nlohmann::json work = nlohmann::json::array();
  for (const Piece& p : pieces) {
    const std::string& path = o.inputs[p.input];
    struct stat st {};
    ::stat(path.c_str(), &st);
    std::error_code error;
    const std::string absolute = std::filesystem::absolute(path, error).lexically_normal().string();
    work.push_back({absolute, static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
                    static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                    static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec,
                    p.begin, p.end});
  }
  return work.dump();
}

// A shard's figures, in its journal line.
struct ShardFigures {
  explicit ShardFigures(int max_len) : lengths(max_len + 1, 0) {}
  uint64_t instances = 0, tokens = 0, masked = 0, random_next = 0;
  std::vector<uint64_t> lengths;  // [length]: sequences
};

std::string NoteOf(const ShardFigures& f) {
  nlohmann::json histogram = nlohmann::json::array();
  for (size_t length = 1; length < f.lengths.size(); ++length) {
    if (f.lengths[length] > 0) histogram.push_back({length, f.lengths[length]});
  }
  return nlohmann::json{{"instances", f.instances},
                        {"tokens", f.tokens},
                        {"masked", f.masked},
                        {"random_next", f.random_next},
                        {"lengths", histogram}}
      .dump();
}

bool ParseNote(const std::string& note, ShardFigures* f) {
  const int max_len = static_cast<int>(f->lengths.size()) - 1;
  if (!CheckJsonText(note, "a journal note", note.size()).ok()) return false;
  auto json = nlohmann::json::parse(note, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return false;
  try {
    f->instances = IntegerOf<uint64_t>(json.at("instances"));
    f->tokens = IntegerOf<uint64_t>(json.at("tokens"));
    f->masked = IntegerOf<uint64_t>(json.at("masked"));
    f->random_next = IntegerOf<uint64_t>(json.at("random_next"));
    for (const auto& pair : json.at("lengths")) {
      const int length = IntegerOf<int>(pair.at(0));
      if (length < 1 || length > max_len) return false;
      f->lengths[length] += IntegerOf<uint64_t>(pair.at(1));
    }
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

void AddFigures(const ShardFigures& f, PrepareSummary* summary) {
  summary->instances += f.instances;
  summary->tokens += f.tokens;
  summary->masked_tokens += f.masked;
  summary->random_next += f.random_next;
  for (size_t length = 1; length < f.lengths.size(); ++length) {
    summary->histogram.counts[length] += f.lengths[length];
  }
}

// A shard's rows, for the pack index of packed inputs: each row's sequence
// count, then each sequence's length; a file beside the shard until the
// store is finished.
struct ShardRows {
  std::vector<uint8_t> depths;
  std::vector<uint16_t> lengths;
};

std::string RowsPath(const std::string& staging, uint32_t shard) {
  return absl::StrFormat("%s/rows-%05d.bin", staging, shard);
}

absl::Status WriteRows(const std::string& path, const ShardRows& rows) {
  std::string bytes;
  const uint64_t counts[2] = {rows.depths.size(), rows.lengths.size()};
  bytes.append(reinterpret_cast<const char*>(counts), sizeof(counts));
  bytes.append(reinterpret_cast<const char*>(rows.depths.data()), rows.depths.size());
  bytes.append(reinterpret_cast<const char*>(rows.lengths.data()), rows.lengths.size() * 2);
  return WriteFileAtomically(path, bytes);
}

bool ReadRowsFile(const std::string& path, ShardRows* rows) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  uint64_t counts[2];
  if (!bytes.ok() || bytes->size() < sizeof(counts)) return false;
  std::memcpy(counts, bytes->data(), sizeof(counts));
  // Each count against the file's size before any arithmetic on it.
  const uint64_t body = bytes->size() - sizeof(counts);
  if (counts[0] > body || counts[1] > body / 2 || body != counts[0] + counts[1] * 2) return false;
  const char* p = bytes->data() + sizeof(counts);
  rows->depths.assign(p, p + counts[0]);
  rows->lengths.resize(counts[1]);
  CopyBytes(rows->lengths.data(), p + counts[0], counts[1] * 2);
  return true;
}

// Whether a kept shard's figures and rows are those of the shard the
// journal names (`records` sequences from `plan_rows` input rows): they are
// checked as strongly as the shard, since train's packing comes from them.
bool KeptShardAgrees(const ShardFigures& figures, const ShardRows* rows, uint64_t records,
                     int64_t plan_rows) {
  if (figures.instances != records) return false;
  if (rows == nullptr) return true;
  if (rows->depths.size() != static_cast<uint64_t>(plan_rows) || rows->lengths.size() != records) {
    return false;
  }
  uint64_t sequences = 0;
  for (uint8_t depth : rows->depths) {
    if (depth == 0) return false;
    sequences += depth;
  }
  std::vector<uint64_t> lengths(figures.lengths.size(), 0);
  for (uint16_t length : rows->lengths) {
    if (length == 0 || length >= lengths.size()) return false;
    lengths[length] += 1;
  }
  return sequences == records && lengths == figures.lengths;
}

// The HDF5 import: shards made in parallel (each from its own inputs, by
// one thread), written as they are done into STORE.partial with a journal
// line each, so that an interrupted import continues where it stopped.
// The store's bytes do not depend on the thread count.
absl::Status ImportHdf5(const PrepareOptions& o, const StoreInfo& info,
                        const PrepareProgress& progress, PrepareSummary* summary) {
  bool packed = false;
  ASSIGN_OR_RETURN(const std::vector<std::vector<Piece>> plan, PlanShards(o, &packed));
  const std::string plan_words = absl::StrCat("hdf5 import 1; rows per shard ", o.records_per_shard,
                                              packed ? "; rows kept" : "");
  ASSIGN_OR_RETURN(auto store, PartialStore::Open(o.output, info, plan_words, o.overwrite));
  const auto shards = static_cast<uint32_t>(plan.size());
  ImportProgress bar(o.inputs, progress);
  std::vector<ShardRows> rows(packed ? shards : 0);
  std::vector<uint8_t> resumed(shards, 0);
  uint64_t resumed_bytes = 0;
  for (uint32_t k = 0; k < shards; ++k) {
    const PartialStore::Done* done = store->Resumed(k, WorkOf(o, plan[k]));
    ShardFigures figures(o.instances.max_seq_len);
    int64_t plan_rows = 0;
    for (const Piece& p : plan[k]) plan_rows += p.end - p.begin;
    if (done == nullptr || !ParseNote(done->note, &figures) ||
        (packed && !ReadRowsFile(RowsPath(store->staging_dir(), k), &rows[k])) ||
        !KeptShardAgrees(figures, packed ? &rows[k] : nullptr, done->records, plan_rows)) {
      if (packed) rows[k] = ShardRows();
      continue;
    }
    resumed[k] = 1;
    AddFigures(figures, summary);
    for (const Piece& p : plan[k]) resumed_bytes += bar.Bytes(p.input, p.begin, p.end, p.rows);
  }
  const uint32_t to_make =
      shards - static_cast<uint32_t>(std::count(resumed.begin(), resumed.end(), uint8_t{1}));
  if (to_make < shards) {
    logging::Get("prepare")->info("continuing the import in {}: {} of {} shards done before",
                                  store->staging_dir(), shards - to_make, shards);
  }
  bar.Start(resumed_bytes);

  std::mutex mu;  // guards summary, failure
  std::atomic<uint32_t> next{0};
  std::atomic<bool> failed{false};
  uint32_t failed_shard = shards;
  absl::Status failure;
  auto make = [&](uint32_t k, ShardBuilder& builder) -> absl::Status {
    builder.Clear();
    ShardFigures figures(o.instances.max_seq_len);
    ShardRows shard_rows;
    for (const Piece& p : plan[k]) {
      ASSIGN_OR_RETURN(auto reader, Hdf5Reader::Open(o.inputs[p.input]));
      if (reader->size() != p.rows) {
        return absl::FailedPreconditionError(
            absl::StrCat(o.inputs[p.input], " changed during the import (", reader->size(),
                         " rows, ", p.rows, " before); run again once it is written"));
      }
      RETURN_IF_ERROR(ReadRows(o, p.input, p.begin, p.end, *reader,
                               [&](int64_t, int depth, std::vector<Instance>& row) {
                                 if (packed)
                                   shard_rows.depths.push_back(static_cast<uint8_t>(depth));
                                 for (const Instance& in : row) {
                                   RETURN_IF_ERROR(builder.Add(in));
                                   figures.instances += 1;
                                   figures.tokens += in.length();
                                   figures.masked += in.masked_positions.size();
                                   figures.random_next += in.next_sentence_label;
                                   figures.lengths[in.length()] += 1;
                                   if (packed) shard_rows.lengths.push_back(in.length());
                                 }
                                 return absl::OkStatus();
                               }));
      bar.Add(bar.Bytes(p.input, p.begin, p.end, p.rows));
      if (failed.load()) return absl::OkStatus();  // another shard failed: stop soon
    }
    if (packed) RETURN_IF_ERROR(WriteRows(RowsPath(store->staging_dir(), k), shard_rows));
    RETURN_IF_ERROR(store->Write(k, builder, WorkOf(o, plan[k]), NoteOf(figures)));
    std::lock_guard<std::mutex> lock(mu);
    AddFigures(figures, summary);
    if (packed) rows[k] = std::move(shard_rows);
    return absl::OkStatus();
  };
  auto worker = [&] {
    ShardBuilder builder(info);
    for (uint32_t k = next++; k < shards && !failed.load(); k = next++) {
      if (resumed[k]) continue;
      absl::Status made = make(k, builder);
      if (made.ok()) continue;
      std::lock_guard<std::mutex> lock(mu);
      failed = true;
      if (k < failed_shard) failed_shard = k, failure = made;  // the first in input order
    }
  };
  const uint32_t workers = std::max<uint32_t>(1, std::min<uint32_t>(o.threads, to_make));
  if (absl::Status ran = RunWorkers(
          static_cast<int>(workers), [&](int) { worker(); }, "importing HDF5 shards");
      !ran.ok()) {
    std::lock_guard<std::mutex> lock(mu);
    if (failure.ok()) failure = ran;
  }
  if (!failure.ok()) {
    const size_t done = store->shards_done();
    if (done == 0) return failure;  // and the folder goes
    return absl::Status(failure.code(),
                        absl::StrCat(failure.message(), "; ", done, " of ", shards,
                                     " store shards are made and kept in ", store->staging_dir(),
                                     ": the same command run again continues there"));
  }
  if (packed) {
    // Their packing, kept: train reads it with data.pack_index, or re-packs.
    ShardRows all;
    for (ShardRows& r : rows) {
      all.depths.insert(all.depths.end(), r.depths.begin(), r.depths.end());
      all.lengths.insert(all.lengths.end(), r.lengths.begin(), r.lengths.end());
      r = ShardRows();
    }
    ASSIGN_OR_RETURN(PackIndex index,
                     PackIndexFromRows(o.instances.max_seq_len, all.depths, all.lengths));
    RETURN_IF_ERROR(
        index.Write(absl::StrCat(store->staging_dir(), "/", kKeptPackIndex), "nvidia-packed"));
    for (uint32_t k = 0; k < shards; ++k) {
      std::error_code ignored;
      std::filesystem::remove(RowsPath(store->staging_dir(), k), ignored);
    }
    summary->kept_rows = index.rows();
    return store->Finish(shards, {kKeptPackIndex});
  }
  return store->Finish(shards);
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
    return absl::InvalidArgumentError(absl::StrCat("cannot pick ", n, " sequences from ", total,
                                                   "; lower prepare.pick or add inputs"));
  }
  const double ratio = static_cast<double>(total) / static_cast<double>(n);
  std::vector<uint64_t> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint64_t>(static_cast<double>(i) * ratio);
  return out;
}

namespace {

// The vocabulary fits the text when few of its tokens are [UNK]: the text
// of BERT's own corpus has about one in ten thousand. Most of them [UNK]
// (a vocabulary of another language or case, or of special tokens only)
// would make a store of [UNK]: refused; many, a warning.
absl::Status CheckVocabularyFits(const PrepareSummary& summary, const PrepareOptions& o) {
  if (summary.text_tokens == 0) return absl::OkStatus();
  const double share =
      static_cast<double>(summary.unknown_tokens) / static_cast<double>(summary.text_tokens);
  const std::string what = absl::StrFormat(
      "%.1f%% of the %d tokens of the inputs are [UNK]: the vocabulary %s does not fit their "
      "text (another language's, or %s)",
      100 * share, summary.text_tokens, o.vocab,
      o.lower_case ? "a cased one: set prepare.lower_case false"
                   : "an uncased one: set prepare.lower_case true");
  if (share > 0.5) {
    return absl::InvalidArgumentError(absl::StrCat(what, "; give the vocabulary of the model"));
  }
  if (share > 0.01) logging::Get("prepare")->warn("{}", what);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PrepareSummary> Prepare(const PrepareOptions& o, const PrepareProgress& progress) {
  if (o.inputs.empty()) {
    return absl::InvalidArgumentError("nothing to prepare: give input files (prepare.inputs)");
  }
  if (o.output.empty()) {
    return absl::InvalidArgumentError("prepare needs an output folder: --out STORE (data.store)");
  }
  // Each input once: the same file named twice (or by a link) would be
  // imported twice, its documents doubled in the store.
  std::map<std::string, std::string> seen;
  for (const std::string& input : o.inputs) {
    std::error_code error;
    const std::string file = std::filesystem::weakly_canonical(input, error).string();
    if (error) continue;  // the reader names what is wrong with it
    const auto [it, added] = seen.emplace(file, input);
    if (!added) {
      return absl::InvalidArgumentError(
          absl::StrCat(input, " is the file ", it->second,
                       " again (the same file given twice); give each input once"));
    }
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
    ASSIGN_OR_RETURN(const StoreInfo info, Hdf5StoreInfo(o, *vocabulary));
    RETURN_IF_ERROR(o.pick > 0 ? ImportHdf5Picked(o, info, progress, &summary)
                               : ImportHdf5(o, info, progress, &summary));
    return summary;
  }

  std::vector<Document> documents;
  if (progress) progress("read", 0, o.inputs.size());
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
  const int32_t unk = vocabulary->special().unk;
  auto tokenize = [&](size_t first, size_t last) {
    uint64_t long_sentences = 0, cut = 0, longest = 0, tokens = 0, unknown = 0;
    for (size_t d = first; d < last; ++d) {
      uint64_t bytes = 0;
      for (const std::string& sentence : documents[d]) {
        std::vector<int32_t> ids = tokenizer.Encode(sentence);
        tokens += ids.size();
        unknown += static_cast<uint64_t>(std::count(ids.begin(), ids.end(), unk));
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
    summary.text_tokens += tokens;
    summary.unknown_tokens += unknown;
  };
  if (progress) progress("tokenize", 0, text_bytes);
  const size_t workers = std::max<size_t>(1, std::min<size_t>(o.threads, documents.size()));
  RETURN_IF_ERROR(RunWorkers(
      static_cast<int>(workers),
      [&](int w) {
        tokenize(documents.size() * w / workers, documents.size() * (w + 1) / workers);
      },
      "tokenizing"));
  documents.clear();
  RETURN_IF_ERROR(CheckVocabularyFits(summary, o));
  if (summary.long_sentences > 0) {
    logging::Get("prepare")->warn(
        "{} sentence(s) hold more tokens than a sequence of {} has room for ({}; the longest: "
        "{}): {} of their tokens are cut off in every instance that uses them; split such lines "
        "into sentences, or raise data.max_seq_len",
        summary.long_sentences, o.instances.max_seq_len, sequence_holds, summary.longest_sentence,
        summary.long_sentence_tokens_cut);
  }

  ASSIGN_OR_RETURN(std::vector<Instance> instances,
                   CreateInstances(tokenized, tokenizer, o.instances, o.threads));
  if (instances.empty()) {
    return absl::InvalidArgumentError(
        "the inputs made no instances: documents need sentences with tokens");
  }
  if (o.pick > 0) {
    ASSIGN_OR_RETURN(std::vector<uint64_t> picks,
                     PickEvenly(instances.size(), static_cast<uint64_t>(o.pick)));
    std::vector<Instance> kept;
    kept.reserve(picks.size());
    for (uint64_t i : picks) kept.push_back(std::move(instances[i]));
    instances = std::move(kept);
  }
  StoreInfo info{static_cast<uint32_t>(vocabulary->size()), vocabulary->checksum(),
                 static_cast<uint32_t>(o.instances.max_seq_len),
                 static_cast<uint32_t>(o.instances.max_predictions_per_seq),
                 absl::StrCat("prepare of ", o.inputs.size(), " file(s), seed ", o.instances.seed)};
  ASSIGN_OR_RETURN(
      auto writer,
      StoreWriter::Create(o.output, info, static_cast<uint64_t>(o.records_per_shard), o.overwrite));
  if (progress) progress("write", 0, instances.size());
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
