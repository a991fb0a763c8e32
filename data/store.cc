#include "data/store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/folders.h"
#include "common/logging.h"
#include "common/outputs.h"
#include "common/parallel.h"
#include "common/progress.h"
#include "common/status.h"
#include "common/structured_text.h"
#include "nlohmann/json.hpp"

namespace pbert::data {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'P', 'B', 'S', 'T', 'O', 'R', 'E', '1'};
constexpr char kManifest[] = "store.json";
constexpr char kStoreFormat[] = "packed-bert instance store";
// About 100 bytes a shard: 256 MiB holds millions of shards.
constexpr uint64_t kMaxManifestBytes = uint64_t{256} << 20;

struct ShardHeader {
  char magic[8];
  uint32_t version;
  uint32_t id_bytes;
  uint32_t vocab_size;
  uint32_t max_len;
  uint32_t max_predictions;
  uint32_t reserved;
  uint64_t records;
  uint64_t vocab_checksum;
  uint64_t body_bytes;
  uint64_t payload_checksum;
  uint64_t store_id;     // the same in every shard of a store, and in its manifest
  uint32_t shard_index;  // the shard's place in the manifest
  uint32_t reserved2;
};
static_assert(sizeof(ShardHeader) == 80, "the shard header is part of the format");

// The manifest's own checksum: XXH3 of its text without the checksum key.
std::string ManifestChecksum(nlohmann::ordered_json manifest) {
  manifest.erase("manifest_checksum");
  const std::string text = manifest.dump(2);
  return absl::StrFormat("%016x",
                         Checksum64({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
}

uint64_t NewStoreId() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// Fixed part of a record in the body.
struct RecordHead {
  uint16_t length;
  uint16_t a_length;  // tokens of segment A: [CLS] A [SEP]
  uint16_t masked;
  uint8_t next_sentence_label;
  uint8_t reserved;
};
static_assert(sizeof(RecordHead) == 8, "the record layout is part of the format");

uint64_t LengthsBytes(uint64_t records) { return (records * 2 + 7) / 8 * 8; }

int IdBytes(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

uint64_t RecordBytes(const RecordHead& head, int id_bytes) {
  return sizeof(RecordHead) + static_cast<uint64_t>(head.length) * id_bytes +
         static_cast<uint64_t>(head.masked) * (2 + id_bytes);
}

// Writes `values` as `width`-byte little-endian integers at `out`; returns
// the end.
char* PutAll(char* out, const std::vector<int32_t>& values, int width) {
  for (int32_t v : values) {
    if (width == 2) {
      const uint16_t narrow = static_cast<uint16_t>(v);
      std::memcpy(out, &narrow, 2);
    } else {
      const uint32_t wide = static_cast<uint32_t>(v);
      std::memcpy(out, &wide, 4);
    }
    out += width;
  }
  return out;
}

int32_t GetId(const uint8_t* p, int id_bytes) {
  if (id_bytes == 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, p, 4);
  return static_cast<int32_t>(v);
}

// store.json, checked against its own checksum and its ranges.
struct Manifest {
  StoreInfo info;
  uint64_t store_id = 0;
  uint64_t records = 0;
  struct Shard {
    std::string file;
    uint64_t records = 0;
    uint64_t checksum = 0;
  };
  std::vector<Shard> shards;
};

absl::StatusOr<Manifest> ReadManifest(const std::string& dir) {
  std::string manifest_path = dir + "/" + kManifest;
  std::error_code error;
  if (!fs::exists(manifest_path, error) && error && error != std::errc::no_such_file_or_directory &&
      error != std::errc::not_a_directory) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": ", error.message(), "; give the folder of an instance store"));
  }
  if (!fs::exists(manifest_path, error)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not an instance store (no ", kManifest,
                                            "); create one with packed-bert prepare"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFile(manifest_path, kMaxManifestBytes));
  auto damaged = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": ", what, "; the store is damaged, prepare it again"));
  };
  Manifest out;
  auto parsed = ParseJson<nlohmann::ordered_json>(text, manifest_path, kMaxManifestBytes);
  if (!parsed.ok()) {
    return parsed.status().code() == absl::StatusCode::kDataLoss ? damaged("not valid JSON")
                                                                 : parsed.status();
  }
  try {
    const nlohmann::ordered_json& manifest = *parsed;
    if (IntegerOf<uint32_t>(manifest.at("version")) != kStoreVersion) {
      return absl::InvalidArgumentError(absl::StrCat(
          manifest_path, ": store format version ", IntegerOf<uint32_t>(manifest.at("version")),
          ", this build reads ", kStoreVersion, "; prepare the store again"));
    }
    if (manifest.value("manifest_checksum", "") != ManifestChecksum(manifest)) {
      return damaged("its checksum does not match its contents (edited or cut)");
    }
    if (manifest.value("format", "") != kStoreFormat) {
      return damaged(absl::StrCat("its format is not \"", kStoreFormat, "\""));
    }
    if (!absl::SimpleHexAtoi(manifest.at("store_id").get<std::string>(), &out.store_id) ||
        !absl::SimpleHexAtoi(manifest.at("vocab_checksum").get<std::string>(),
                             &out.info.vocab_checksum)) {
      return damaged("store_id or vocab_checksum is not hexadecimal");
    }
    out.info.max_len = IntegerOf<uint32_t>(manifest.at("max_len"));
    out.info.max_predictions = IntegerOf<uint32_t>(manifest.at("max_predictions"));
    out.info.vocab_size = IntegerOf<uint32_t>(manifest.at("vocab_size"));
    out.info.source = manifest.value("source", "");
    if (out.info.max_len == 0 || out.info.max_len > kMaxSequenceLength ||
        out.info.vocab_size == 0) {
      return damaged("max_len or vocab_size out of range");
    }
    if (IntegerOf<uint32_t>(manifest.at("id_bytes")) !=
        static_cast<uint32_t>(IdBytes(out.info.vocab_size))) {
      return damaged(absl::StrCat("id_bytes ", IntegerOf<uint32_t>(manifest.at("id_bytes")),
                                  " does not fit vocab_size ", out.info.vocab_size));
    }
    out.records = IntegerOf<uint64_t>(manifest.at("records"));
    for (const auto& entry : manifest.at("shards")) {
      Manifest::Shard shard;
      shard.file = entry.at("file").get<std::string>();
      if (const std::string problem = PlainFileNameProblem(shard.file); !problem.empty()) {
        return damaged(absl::StrCat("shard name \"", absl::CEscape(shard.file),
                                    "\" is not a file name in the store folder: ", problem));
      }
      if (!absl::SimpleHexAtoi(entry.at("checksum").get<std::string>(), &shard.checksum)) {
        return damaged(absl::StrCat("the checksum of ", shard.file, " is not hexadecimal"));
      }
      shard.records = IntegerOf<uint64_t>(entry.at("records"));
      out.shards.push_back(std::move(shard));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": malformed (", e.what(), ")"));
  }
  return out;
}

}  // namespace

StoreWriter::StoreWriter(std::string dir, std::string temp_dir, StoreInfo info, uint64_t per_shard,
                         bool overwrite)
    : dir_(std::move(dir)),
      temp_dir_(std::move(temp_dir)),
      info_(std::move(info)),
      per_shard_(per_shard),
      shard_(info_),
      store_id_(NewStoreId()),
      overwrite_(overwrite),
      lock_fd_(LockTemporary(temp_dir_)) {}

StoreWriter::~StoreWriter() {
  if (!finished_) {
    std::error_code ignored;
    fs::remove_all(temp_dir_, ignored);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

namespace {

// What prepare writes in the store `dir`: its manifest, the shards it
// lists, a kept pack index (a store whose manifest is damaged, to prepare
// again: the shards it may hold by their names).
std::set<std::string> StoreEntries(const std::string& dir) {
  std::set<std::string> ours = {kManifest, kKeptPackIndex};
  if (absl::StatusOr<Manifest> manifest = ReadManifest(dir); manifest.ok()) {
    for (const Manifest::Shard& shard : manifest->shards) ours.insert(shard.file);
    return ours;
  }
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    uint32_t index = 0;
    const std::string name = entry.path().filename().string();
    if (name.size() == ShardFileName(0).size() && absl::SimpleAtoi(name.substr(6, 5), &index) &&
        name == ShardFileName(index)) {
      ours.insert(name);
    }
  }
  return ours;
}

}  // namespace

absl::Status CheckStoreTarget(const std::string& given, const std::vector<std::string>& inputs,
                              bool overwrite) {
  const std::string dir = WithoutTrailingSlash(given);
  if (const std::string kept = KeptContainerOf(dir); !kept.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the store ", dir, " ", kept, ", which only train writes; choose another folder"));
  }
  std::error_code error;
  // A store is written beside its path and renamed onto it: a symbolic link
  // there would be replaced, not followed; one that leads nowhere or to
  // itself is a mistake either way.
  if (fs::is_symlink(fs::symlink_status(dir, error))) {
    const bool dangling = !fs::exists(dir, error);
    return absl::InvalidArgumentError(absl::StrCat(dir, " is a symbolic link",
                                                   dangling ? " to nothing (or a loop)" : "",
                                                   "; name the store's folder itself"));
  }
  if (fs::exists(dir, error)) {
    if (!overwrite) {
      return absl::AlreadyExistsError(absl::StrCat(
          dir, " already exists; add --overwrite to replace it, or choose another folder"));
    }
    if (!fs::is_directory(dir, error) || !fs::exists(fs::path(dir) / kManifest, error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir,
          " exists and is not an instance store; --overwrite replaces only a store: choose "
          "another folder"));
    }
    // Only what prepare wrote there.
    if (const std::string other = ForeignEntries(dir, StoreEntries(dir)); !other.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, " is ", other, ", which prepare did not write; --overwrite replaces only a store: "
          "move them away, or choose another folder"));
    }
  }
  // A file in its path, an unwritable folder or too long a name.
  RETURN_IF_ERROR(CheckWritable(dir, "the store", Writes::kFolder));
  // What is read may not lie in what is replaced.
  for (const std::string& input : inputs) {
    if (IsInside(input, dir)) {
      return absl::InvalidArgumentError(absl::StrCat(input, " is read from inside ", dir,
                                                     ", which the store would replace; "
                                                     "choose another folder"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<StoreWriter>> StoreWriter::Create(const std::string& given,
                                                                 const StoreInfo& info,
                                                                 uint64_t records_per_shard,
                                                                 bool overwrite) {
  const std::string dir = WithoutTrailingSlash(given);  // its temporary lies beside it
  RETURN_IF_ERROR(CheckStoreTarget(dir, {}, overwrite));
  if (info.max_len == 0 || info.max_len > kMaxSequenceLength || info.vocab_size == 0 ||
      records_per_shard == 0) {
    return absl::InvalidArgumentError("store limits must be positive (max_len <= 65535)");
  }
  fs::path parent = fs::path(dir).parent_path();
  std::error_code error;
  if (!parent.empty()) fs::create_directories(parent, error);
  // Temporary folders of killed earlier attempts go; a running one's stay.
  RemoveStaleTemporaries(dir, ".tmp-");
  std::string pattern = dir + ".tmp-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    return ErrnoError(absl::StrCat("cannot create a temporary folder beside ", dir), errno);
  }
  // mkdtemp makes it private (0700); the store gets the usual permissions.
  fs::permissions(buffer.data(),
                  fs::perms::all & ~fs::perms::others_write & ~fs::perms::group_write, error);
  return std::unique_ptr<StoreWriter>(
      new StoreWriter(dir, std::string(buffer.data()), info, records_per_shard, overwrite));
}

std::string ShardFileName(uint32_t index) { return absl::StrFormat("shard-%05d.pbstore", index); }

ShardBuilder::ShardBuilder(const StoreInfo& info)
    : info_(info), id_bytes_(IdBytes(info.vocab_size)), offsets_{0} {}

absl::Status ShardBuilder::Add(const Instance& in) {
  RETURN_IF_ERROR(ValidateInstance(in, {info_.vocab_size, info_.max_len, info_.max_predictions}));
  const int length = in.length();
  int a_length = 0;
  while (a_length < length && in.segment_ids[a_length] == 0) ++a_length;
  RecordHead head{static_cast<uint16_t>(length), static_cast<uint16_t>(a_length),
                  static_cast<uint16_t>(in.masked_positions.size()),
                  static_cast<uint8_t>(in.next_sentence_label), 0};
  constexpr size_t kBlock = 4 << 20;
  const size_t bytes = RecordBytes(head, id_bytes_);
  if (body_.empty() || body_.back().size() + bytes > body_.back().capacity()) {
    body_.emplace_back().reserve(std::max(kBlock, bytes));
  }
  std::string& block = body_.back();
  const size_t start = block.size();
  block.resize(start + bytes);
  char* out = block.data() + start;
  std::memcpy(out, &head, sizeof(head));
  out = PutAll(out + sizeof(head), in.input_ids, id_bytes_);
  out = PutAll(out, in.masked_positions, 2);
  PutAll(out, in.masked_ids, id_bytes_);
  body_bytes_ += bytes;
  lengths_.push_back(static_cast<uint16_t>(length));
  offsets_.push_back(body_bytes_);
  return absl::OkStatus();
}

void ShardBuilder::Clear() {
  lengths_.clear();
  offsets_.assign(1, 0);
  body_.clear();
  body_bytes_ = 0;
}

absl::StatusOr<uint64_t> ShardBuilder::Write(const std::string& path, uint32_t index,
                                             uint64_t store_id) const {
  const uint64_t n = lengths_.size();
  // The payload: the length table (padded to 8 bytes), the offsets, the
  // body; written and checksummed piece by piece, never copied whole.
  std::string lengths(LengthsBytes(n), '\0');
  CopyBytes(lengths.data(), lengths_.data(), n * 2);
  std::vector<absl::Span<const uint8_t>> pieces = {
      {reinterpret_cast<const uint8_t*>(lengths.data()), lengths.size()},
      {reinterpret_cast<const uint8_t*>(offsets_.data()), offsets_.size() * 8}};
  for (const std::string& block : body_) {
    pieces.emplace_back(reinterpret_cast<const uint8_t*>(block.data()), block.size());
  }
  ChecksumStream checksum;
  for (const auto& piece : pieces) checksum.Update(piece);
  ShardHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kStoreVersion;
  header.id_bytes = static_cast<uint32_t>(id_bytes_);
  header.vocab_size = info_.vocab_size;
  header.max_len = info_.max_len;
  header.max_predictions = info_.max_predictions;
  header.records = n;
  header.vocab_checksum = info_.vocab_checksum;
  header.body_bytes = body_bytes_;
  header.payload_checksum = checksum.Digest();
  header.store_id = store_id;
  header.shard_index = index;
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(writer.Write({reinterpret_cast<const uint8_t*>(&header), sizeof(header)}));
  for (const auto& piece : pieces) RETURN_IF_ERROR(writer.Write(piece));
  RETURN_IF_ERROR(writer.Commit());
  return header.payload_checksum;
}

absl::Status StoreWriter::Add(const Instance& in) {
  absl::Status added = shard_.Add(in);
  if (!added.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("instance ", records_, ": ", added.message()));
  }
  ++records_;
  if (shard_.records() == per_shard_) RETURN_IF_ERROR(FlushShard());
  return absl::OkStatus();
}

absl::Status StoreWriter::FlushShard() {
  if (shard_.records() == 0) return absl::OkStatus();
  const auto index = static_cast<uint32_t>(shards_.size());
  ASSIGN_OR_RETURN(uint64_t checksum,
                   shard_.Write(temp_dir_ + "/" + ShardFileName(index), index, store_id_));
  shards_.emplace_back(shard_.records(), checksum);
  shard_.Clear();
  return absl::OkStatus();
}

namespace {

// Writes store.json for `shards` (records, checksum) into `staging` and
// renames `staging` to `dir`. With `overwrite` the store at `dir` is moved
// aside first and removed after: one of the two is whole at every moment.
// Without, of two writers racing to one new store, one fails here.
absl::Status PublishStore(const std::string& staging, const std::string& dir, const StoreInfo& info,
                          uint64_t store_id,
                          const std::vector<std::pair<uint64_t, uint64_t>>& shards,
                          bool overwrite) {
  uint64_t records = 0;
  for (const auto& shard : shards) records += shard.first;
  nlohmann::ordered_json manifest;
  manifest["format"] = kStoreFormat;
  manifest["version"] = kStoreVersion;
  manifest["records"] = records;
  manifest["max_len"] = info.max_len;
  manifest["max_predictions"] = info.max_predictions;
  manifest["vocab_size"] = info.vocab_size;
  manifest["vocab_checksum"] = absl::StrFormat("%016x", info.vocab_checksum);
  manifest["id_bytes"] = IdBytes(info.vocab_size);
  manifest["source"] = info.source;
  manifest["store_id"] = absl::StrFormat("%016x", store_id);
  manifest["shards"] = nlohmann::json::array();
  for (size_t i = 0; i < shards.size(); ++i) {
    manifest["shards"].push_back({{"file", ShardFileName(static_cast<uint32_t>(i))},
                                  {"records", shards[i].first},
                                  {"checksum", absl::StrFormat("%016x", shards[i].second)}});
  }
  manifest["manifest_checksum"] = ManifestChecksum(manifest);
  RETURN_IF_ERROR(WriteFileAtomically(staging + "/" + kManifest, manifest.dump(2) + "\n"));
  std::error_code error;
  const std::string old = staging + ".old";
  if (overwrite && fs::exists(dir)) {
    fs::rename(dir, old, error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot move ", dir, " aside: ", error.message()));
    }
  }
  if (!overwrite) {
    RETURN_IF_ERROR(RenameWithoutReplacing(staging, dir));
  } else {
    fs::rename(staging, dir, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("cannot rename ", staging, " to ", dir, ": ", error.message()));
    }
  }
  fs::remove_all(old, error);
  return absl::OkStatus();
}

}  // namespace

absl::Status StoreWriter::Finish() {
  RETURN_IF_ERROR(FlushShard());
  RETURN_IF_ERROR(PublishStore(temp_dir_, dir_, info_, store_id_, shards_, overwrite_));
  finished_ = true;
  return absl::OkStatus();
}

namespace {

constexpr char kJournal[] = "import.log";
constexpr char kJournalFormat[] = "packed-bert partial store";

nlohmann::ordered_json InfoJson(const StoreInfo& info) {
  return {{"vocab_size", info.vocab_size},
          {"vocab_checksum", absl::StrFormat("%016x", info.vocab_checksum)},
          {"max_len", info.max_len},
          {"max_predictions", info.max_predictions},
          {"source", info.source}};
}

// The file of a journalled shard is the one its line describes, checked as
// strongly as a shard just made: a file of its own (no link), its header,
// its size, and its data against the checksum (a flipped byte is found
// here, not by verify after the import says it is done).
bool ShardFileMatches(const std::string& path, const StoreInfo& info, uint64_t store_id,
                      uint32_t index, const PartialStore::Done& done) {
  std::error_code error;
  if (!fs::is_regular_file(fs::symlink_status(path, error))) return false;
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok()) return false;
  const auto bytes = file->bytes();
  ShardHeader header{};
  if (bytes.size() < sizeof(header)) return false;
  std::memcpy(&header, bytes.data(), sizeof(header));
  return std::memcmp(header.magic, kMagic, sizeof(kMagic)) == 0 &&
         header.version == kStoreVersion && header.store_id == store_id &&
         header.shard_index == index && header.records == done.records &&
         header.payload_checksum == done.checksum && header.vocab_size == info.vocab_size &&
         header.max_len == info.max_len && header.max_predictions == info.max_predictions &&
         header.vocab_checksum == info.vocab_checksum && done.records <= bytes.size() &&
         header.body_bytes <= bytes.size() &&
         bytes.size() == sizeof(header) + LengthsBytes(done.records) + (done.records + 1) * 8 +
                             header.body_bytes &&
         Checksum64(bytes.subspan(sizeof(header))) == done.checksum;
}

// What differs between the journal's head `before` and this run's `now`,
// in the words of the options ("max_len 512, now 128").
std::string HeadChanges(const nlohmann::ordered_json& before, const nlohmann::ordered_json& now) {
  std::vector<std::string> changes;
  const nlohmann::ordered_json none;
  const nlohmann::ordered_json& old_info = before.contains("info") ? before["info"] : none;
  for (const auto& [key, value] : now["info"].items()) {
    const nlohmann::ordered_json was = old_info.is_object() ? old_info.value(key, none) : none;
    if (was != value) {
      changes.push_back(absl::StrCat(key == "max_len" ? "data.max_seq_len" : key, " ",
                                     was.is_null() ? "unset" : was.dump(), ", now ", value.dump()));
    }
  }
  if (before.value("plan", "") != now.value("plan", "")) {
    changes.push_back(absl::StrCat("the plan '", before.value("plan", ""), "', now '",
                                   now.value("plan", ""), "'"));
  }
  return NameList(changes);
}

}  // namespace

PartialStore::PartialStore(std::string dir, std::string staging, StoreInfo info, uint64_t store_id,
                           bool overwrite, int lock_fd)
    : dir_(std::move(dir)),
      staging_(std::move(staging)),
      info_(std::move(info)),
      store_id_(store_id),
      overwrite_(overwrite),
      lock_fd_(lock_fd) {}

PartialStore::~PartialStore() {
  journal_.reset();
  if (!finished_ && done_.empty() && written_.empty()) {
    std::error_code ignored;
    fs::remove_all(staging_, ignored);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::StatusOr<std::unique_ptr<PartialStore>> PartialStore::Open(const std::string& given,
                                                                 const StoreInfo& info,
                                                                 const std::string& plan,
                                                                 bool overwrite) {
  const std::string dir = WithoutTrailingSlash(given);
  RETURN_IF_ERROR(CheckStoreTarget(dir, {}, overwrite));
  if (info.max_len == 0 || info.max_len > kMaxSequenceLength || info.vocab_size == 0) {
    return absl::InvalidArgumentError("store limits must be positive (max_len <= 65535)");
  }
  const std::string staging = dir + ".partial";
  const std::string journal_path = staging + "/" + kJournal;
  std::error_code error;
  nlohmann::ordered_json head = {{"format", kJournalFormat},
                                 {"version", 1},
                                 {"store_id", ""},
                                 {"info", InfoJson(info)},
                                 {"plan", plan}};
  if (!fs::exists(staging, error)) {
    // Made whole beside it (journal header included), then renamed: a
    // folder named .partial always has its journal.
    const std::string parent = fs::path(dir).parent_path().string();
    if (!parent.empty()) fs::create_directories(parent, error);
    RemoveStaleTemporaries(staging, ".tmp-");
    ASSIGN_OR_RETURN(std::string fresh, CreateTemporaryFolder(staging + ".tmp-"));
    head["store_id"] = absl::StrFormat("%016x", NewStoreId());
    absl::Status made = WriteFileAtomically(fresh + "/" + kJournal, head.dump() + "\n");
    if (made.ok()) made = RenameWithoutReplacing(fresh, staging);
    if (!made.ok()) {
      fs::remove_all(fresh, error);
      if (!absl::IsAlreadyExists(made)) return made;  // else: another run made it first
    }
  }
  // Made by prepare itself, never a link: a link could lead the import to
  // reuse, or remove, another folder's files.
  if (fs::is_symlink(fs::symlink_status(staging, error)) ||
      fs::is_symlink(fs::symlink_status(journal_path, error))) {
    return absl::InvalidArgumentError(
        absl::StrCat(staging, " or its ", kJournal,
                     " is a symbolic link; prepare makes this folder itself: move the link away"));
  }
  if (!fs::is_directory(staging, error) || !fs::is_regular_file(journal_path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(staging, " exists and is not an import in progress (no ", kJournal,
                     "); packed-bert prepare writes its store there first: move it away"));
  }
  const int lock = LockTemporary(staging);
  if (lock < 0) {
    return absl::FailedPreconditionError(absl::StrCat("another process is writing the store ", dir,
                                                      " (", staging, " is in use); wait for it"));
  }
  // Closed on every early return; the store owns it once made.
  struct Held {
    int fd;
    ~Held() {
      if (fd >= 0) ::close(fd);
    }
  } held{lock};
  ASSIGN_OR_RETURN(std::string text, ReadFile(journal_path));
  // Lines up to the first that is cut off or unreadable (a kill during an
  // append) count; the rest is cut away when the journal is reopened.
  std::vector<nlohmann::ordered_json> lines;
  uint64_t kept_bytes = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;
    const absl::string_view line_text(text.data() + at, end - at);
    // A line nested past any the import writes is not its own: it ends the
    // journal's readable part, as a cut line does.
    if (!CheckJsonText(line_text, journal_path, text.size()).ok()) break;
    auto line = nlohmann::ordered_json::parse(line_text.begin(), line_text.end(), nullptr,
                                              /*allow_exceptions=*/false);
    if (line.is_discarded() || !line.is_object()) break;
    lines.push_back(std::move(line));
    at = kept_bytes = end + 1;
  }
  uint64_t store_id = 0;
  bool same = !lines.empty() && lines[0].value("format", "") == kJournalFormat &&
              lines[0].value("version", 0) == 1 && lines[0].contains("info") &&
              lines[0]["info"] == head["info"] && lines[0].value("plan", "") == plan &&
              absl::SimpleHexAtoi(lines[0].value("store_id", ""), &store_id);
  if (lines.empty() || !lines[0].is_object() || lines[0].value("format", "") != kJournalFormat) {
    return absl::InvalidArgumentError(absl::StrCat(
        journal_path, " is not a packed-bert import journal; move ", staging, " away"));
  }
  if (!same) {
    // Our own folder, begun with other options: nothing in it can be used
    // by this run. Finished shards are the work of hours at full scale:
    // kept unless the user says to start over (--overwrite).
    const size_t finished = lines.size() - 1;
    if (finished > 0 && !overwrite) {
      return absl::InvalidArgumentError(absl::StrCat(
          staging, " holds ", finished,
          " finished shard(s) of an import begun with other options (", HeadChanges(lines[0], head),
          "); nothing was removed: run the command it began with to continue it, or add "
          "--overwrite to start this import over"));
    }
    logging::Get("prepare")->warn(
        "{} holds an import begun with other options ({}){}; starting over", staging,
        HeadChanges(lines[0], head), finished > 0 ? ", and --overwrite is given" : "");
    for (const auto& entry : fs::directory_iterator(staging, error)) {
      fs::remove_all(entry.path(), error);
    }
    store_id = NewStoreId();
    head["store_id"] = absl::StrFormat("%016x", store_id);
    absl::Status reset = WriteFileAtomically(journal_path, head.dump() + "\n");
    RETURN_IF_ERROR(reset);
    lines.assign(1, head);
    kept_bytes = head.dump().size() + 1;
  }
  std::unique_ptr<PartialStore> store(
      new PartialStore(dir, staging, info, store_id, overwrite, lock));
  held.fd = -1;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& line = lines[i];
    Done done;
    uint32_t index = 0;
    try {
      index = IntegerOf<uint32_t>(line.at("shard"));
      done.records = IntegerOf<uint64_t>(line.at("records"));
      done.work = line.at("work").get<std::string>();
      done.note = line.at("note").get<std::string>();
      if (!absl::SimpleHexAtoi(line.at("checksum").get<std::string>(), &done.checksum)) continue;
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    // A later line for a shard (made again) replaces an earlier one.
    store->done_.erase(index);
    if (ShardFileMatches(staging + "/" + ShardFileName(index), info, store_id, index, done)) {
      store->done_[index] = std::move(done);
    }
  }
  // Temporaries of a killed run (this process holds the folder now).
  for (const auto& entry : fs::directory_iterator(staging, error)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
      fs::remove(entry.path(), error);
    }
  }
  ASSIGN_OR_RETURN(store->journal_, AppendLog::Open(journal_path, kept_bytes));
  return store;
}

const PartialStore::Done* PartialStore::Resumed(uint32_t index, const std::string& work) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = done_.find(index);
  return it != done_.end() && it->second.work == work ? &it->second : nullptr;
}

size_t PartialStore::shards_done() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = written_.size();
  for (const auto& [index, done] : done_) n += written_.count(index) == 0;
  return n;
}

absl::Status PartialStore::Write(uint32_t index, const ShardBuilder& shard, const std::string& work,
                                 const std::string& note) {
  ASSIGN_OR_RETURN(uint64_t checksum,
                   shard.Write(staging_ + "/" + ShardFileName(index), index, store_id_));
  nlohmann::ordered_json line = {{"shard", index},
                                 {"records", shard.records()},
                                 {"checksum", absl::StrFormat("%016x", checksum)},
                                 {"work", work},
                                 {"note", note}};
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(journal_->Append(line.dump()));
  RETURN_IF_ERROR(journal_->Sync());
  written_[index] = Done{shard.records(), checksum, work, note};
  return absl::OkStatus();
}

absl::Status PartialStore::Finish(uint32_t count, const std::vector<std::string>& also) {
  std::vector<std::pair<uint64_t, uint64_t>> shards;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t i = 0; i < count; ++i) {
      auto it = written_.find(i);
      if (it == written_.end()) it = done_.find(i);
      if (it == done_.end()) {
        return absl::InternalError(absl::StrCat("shard ", i, " of ", staging_, " was not made"));
      }
      shards.emplace_back(it->second.records, it->second.checksum);
    }
  }
  journal_.reset();
  // Only this import's shards go into the store: anything else in the
  // folder (a shard of an earlier import's larger plan, a stray file) is
  // removed, and named.
  std::set<std::string> ours(also.begin(), also.end());
  ours.insert(kJournal);
  for (uint32_t i = 0; i < count; ++i) ours.insert(ShardFileName(i));
  std::vector<std::string> strays;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(staging_, error)) {
    const std::string name = entry.path().filename().string();
    if (ours.count(name) == 0) strays.push_back(name);
  }
  for (const std::string& name : strays) fs::remove_all(fs::path(staging_) / name, error);
  if (!strays.empty()) {
    logging::Get("prepare")->warn("{}: left out of the store, as no part of this import: {}",
                                  staging_, NameList(strays));
  }
  RETURN_IF_ERROR(PublishStore(staging_, dir_, info_, store_id_, shards, overwrite_));
  finished_ = true;
  std::error_code ignored;
  fs::remove(fs::path(dir_) / kJournal, ignored);
  return absl::OkStatus();
}

absl::Status InstanceStore::AddShard(const std::string& path, uint32_t index, uint64_t records,
                                     uint64_t checksum, uint64_t store_id) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto shard = std::make_shared<Shard>(Shard{path, std::move(file), total_, records});
  auto bytes = shard->file.bytes();
  auto corrupt = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", what, "; the store is damaged, prepare it again"));
  };
  ShardHeader header;
  if (bytes.size() < sizeof(header)) return corrupt("shorter than its header");
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) return corrupt("wrong magic bytes");
  if (header.version != kStoreVersion) return corrupt("unknown shard version");
  if (header.store_id != store_id) {
    return corrupt("it belongs to another store (store id differs from store.json)");
  }
  if (header.shard_index != index) {
    return corrupt(absl::StrCat("it is shard ", header.shard_index,
                                " of its store, store.json lists it as shard ", index,
                                " (a copied or renamed shard)"));
  }
  // Every field of the header is store.json's (whose own checksum covers
  // it) or covered by the payload's checksum and the file's size.
  if (header.records != records || header.vocab_size != info_.vocab_size ||
      header.vocab_checksum != info_.vocab_checksum || header.max_len != info_.max_len ||
      header.max_predictions != info_.max_predictions || header.payload_checksum != checksum ||
      header.id_bytes != static_cast<uint32_t>(id_bytes_) || header.reserved != 0 ||
      header.reserved2 != 0) {
    return corrupt("header does not match store.json");
  }
  const uint64_t n = header.records;
  if (n > bytes.size() || header.body_bytes > bytes.size()) {
    return corrupt("its record count or body size exceeds the file");
  }
  const uint64_t expected = sizeof(header) + LengthsBytes(n) + (n + 1) * 8 + header.body_bytes;
  if (bytes.size() != expected) {
    return corrupt(
        absl::StrCat("truncated or padded: ", bytes.size(), " bytes, expected ", expected));
  }
  const uint8_t* p = bytes.data() + sizeof(header);
  shard->lengths = reinterpret_cast<const uint16_t*>(p);
  shard->offsets = reinterpret_cast<const uint64_t*>(p + LengthsBytes(n));
  shard->body = p + LengthsBytes(n) + (n + 1) * 8;
  shard->body_bytes = header.body_bytes;
  // Every length is used as an index (histograms, packing): check them all
  // now, two bytes each.
  for (uint64_t r = 0; r < n; ++r) {
    if (shard->lengths[r] == 0 || shard->lengths[r] > info_.max_len) {
      return corrupt(absl::StrCat("record ", r, " has length ", shard->lengths[r],
                                  " in its length table, outside 1..", info_.max_len));
    }
  }
  total_ += n;
  shards_.push_back(std::move(shard));
  return absl::OkStatus();
}

absl::StatusOr<InstanceStore> InstanceStore::Open(const std::string& dir, StoreChecks checks,
                                                  ShardShare share) {
  if (share.parts < 1 || share.part < 0 || share.part >= share.parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("no part ", share.part, " of ", share.parts, " to check of store ", dir));
  }
  ASSIGN_OR_RETURN(InstanceStore store, OpenHeaders(dir));
  if (checks == StoreChecks::kChecksums) RETURN_IF_ERROR(store.VerifyChecksums(share));
  return store;
}

absl::StatusOr<StoreInfo> ReadStoreInfo(const std::string& dir) {
  ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(dir));
  return manifest.info;
}

absl::StatusOr<InstanceStore> InstanceStore::OpenHeaders(const std::string& dir) {
  ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(dir));
  InstanceStore store;
  store.dir_ = dir;
  store.info_ = manifest.info;
  store.id_bytes_ = IdBytes(store.info_.vocab_size);
  std::string content = absl::StrCat(store.info_.vocab_size, " ", store.info_.vocab_checksum, " ",
                                     store.info_.max_len, " ", store.info_.max_predictions);
  uint32_t index = 0;
  for (const Manifest::Shard& shard : manifest.shards) {
    RETURN_IF_ERROR(store.AddShard(dir + "/" + shard.file, index++, shard.records, shard.checksum,
                                   manifest.store_id));
    absl::StrAppend(&content, " ", shard.records, ":", shard.checksum);
  }
  if (store.total_ != manifest.records) {
    return absl::DataLossError(absl::StrCat(dir, "/", kManifest,
                                            ": shard records do not add up; the store is "
                                            "damaged, prepare it again"));
  }
  store.content_checksum_ =
      Checksum64({reinterpret_cast<const uint8_t*>(content.data()), content.size()});
  return store;
}

const InstanceStore::Shard& InstanceStore::ShardOf(uint64_t index) const {
  size_t lo = 0, hi = shards_.size();
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    (shards_[mid]->first <= index ? lo : hi) = mid;
  }
  return *shards_[lo];
}

uint16_t InstanceStore::Length(uint64_t index) const {
  const Shard& shard = ShardOf(index);
  return shard.lengths[index - shard.first];
}

Instance InstanceStore::Get(uint64_t index) const {
  const Shard& shard = ShardOf(index);
  const uint8_t* p = shard.body + shard.offsets[index - shard.first];
  RecordHead head;
  std::memcpy(&head, p, sizeof(head));
  p += sizeof(head);
  Instance in;
  in.input_ids.resize(head.length);
  for (int i = 0; i < head.length; ++i, p += id_bytes_) in.input_ids[i] = GetId(p, id_bytes_);
  in.segment_ids.assign(head.length, 1);
  std::fill(in.segment_ids.begin(), in.segment_ids.begin() + head.a_length, 0);
  in.masked_positions.resize(head.masked);
  for (int m = 0; m < head.masked; ++m, p += 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    in.masked_positions[m] = v;
  }
  in.masked_ids.resize(head.masked);
  for (int m = 0; m < head.masked; ++m, p += id_bytes_) in.masked_ids[m] = GetId(p, id_bytes_);
  in.next_sentence_label = head.next_sentence_label;
  return in;
}

std::vector<uint16_t> InstanceStore::Lengths() const {
  std::vector<uint16_t> out;
  out.reserve(total_);
  for (const auto& shard : shards_)
    out.insert(out.end(), shard->lengths, shard->lengths + shard->records);
  return out;
}

LengthHistogram InstanceStore::Histogram() const {
  LengthHistogram h(static_cast<int>(info_.max_len));
  for (const auto& shard : shards_) {
    for (uint64_t i = 0; i < shard->records; ++i) ++h.counts[shard->lengths[i]];
  }
  return h;
}

absl::Status InstanceStore::ReadRecord(const Shard& shard, uint64_t local, Instance* out) const {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(shard.path, ": record ", local, " (store index ",
                                            shard.first + local, "): ", what,
                                            "; the store is damaged, prepare it again"));
  };
  const uint64_t begin = shard.offsets[local], end = shard.offsets[local + 1];
  if (begin > end || end > shard.body_bytes || end - begin < sizeof(RecordHead)) {
    return bad("its offsets point outside the shard");
  }
  RecordHead head;
  std::memcpy(&head, shard.body + begin, sizeof(head));
  if (RecordBytes(head, id_bytes_) != end - begin) return bad("its size does not match its counts");
  if (head.length != shard.lengths[local] || head.a_length > head.length) {
    return bad(absl::StrCat("length ", head.length, " or segment split ", head.a_length,
                            " does not match the length table"));
  }
  *out = Get(shard.first + local);
  absl::Status valid = ValidateInstance(*out, limits());
  if (!valid.ok()) return bad(std::string(valid.message()));
  return absl::OkStatus();
}

absl::Status InstanceStore::Read(uint64_t index, Instance* out) const {
  if (index >= total_) {
    return absl::OutOfRangeError(
        absl::StrCat(dir_, ": record ", index, " beyond the store's ", total_));
  }
  const Shard& shard = ShardOf(index);
  return ReadRecord(shard, index - shard.first, out);
}

namespace {

// OK if the shard's payload hashes to its header's checksum.
absl::Status CheckShardChecksum(const std::string& path, absl::Span<const uint8_t> bytes) {
  ShardHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (kChecksumsCompared && Checksum64(bytes.subspan(sizeof(header))) != header.payload_checksum) {
    return absl::DataLossError(absl::StrCat(
        path,
        ": checksum mismatch: its data changed after it was written; the store is damaged, "
        "prepare it again"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InstanceStore::VerifyChecksums(ShardShare share) const {
  std::vector<const Shard*> mine;
  uint64_t bytes = 0;
  for (size_t i = static_cast<size_t>(share.part); i < shards_.size();
       i += static_cast<size_t>(share.parts)) {
    mine.push_back(shards_[i].get());
    bytes += shards_[i]->file.bytes().size();
  }
  std::unique_ptr<Progress> progress;
  if (bytes > (uint64_t{1} << 30)) {
    progress = std::make_unique<Progress>("checksums", mine.size(), "shards");
  }
  std::atomic<size_t> next{0}, done{0};
  std::vector<absl::Status> status(mine.size());
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < mine.size();) {
      status[i] = CheckShardChecksum(mine[i]->path, mine[i]->file.bytes());
      ++done;
    }
  };
  const size_t threads =
      std::min<size_t>(mine.size(), std::max(1u, std::thread::hardware_concurrency()));
  RETURN_IF_ERROR(RunWorkers(
      static_cast<int>(threads), [&](int) { work(); }, "checking shards"));
  if (progress) {
    progress->Add(done.load());
    progress->Finish();
  }
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::Status InstanceStore::Verify(const std::function<void(uint64_t)>& progress) const {
  for (const auto& shard : shards_) {
    auto bytes = shard->file.bytes();
    RETURN_IF_ERROR(CheckShardChecksum(shard->path, bytes));
    if (shard->offsets[0] != 0 || shard->offsets[shard->records] != shard->body_bytes) {
      return absl::DataLossError(absl::StrCat(shard->path, ": offsets do not cover the records"));
    }
    Instance record;
    for (uint64_t i = 0; i < shard->records; ++i) {
      RETURN_IF_ERROR(ReadRecord(*shard, i, &record));
      if (progress && (i + 1) % 65536 == 0) progress(65536);
    }
    if (progress) progress(shard->records % 65536);
  }
  return absl::OkStatus();
}

}  // namespace pbert::data
