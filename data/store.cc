#include "data/store.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/folders.h"
#include "common/outputs.h"
#include "common/progress.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace pbert::data {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'P', 'B', 'S', 'T', 'O', 'R', 'E', '1'};
constexpr char kManifest[] = "store.json";

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
  uint64_t store_id;  // the same in every shard of a store, and in its manifest
  uint32_t shard_index;  // the shard's place in the manifest
  uint32_t reserved2;
};
static_assert(sizeof(ShardHeader) == 80, "the shard header is part of the format");

// The manifest's own checksum: XXH3 of its text without the checksum key.
std::string ManifestChecksum(nlohmann::ordered_json manifest) {
  manifest.erase("manifest_checksum");
  const std::string text = manifest.dump(2);
  return absl::StrFormat(
      "%016x", Checksum64({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
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

std::string ShardName(size_t i) { return absl::StrFormat("shard-%05d.pbstore", i); }

}  // namespace

StoreWriter::StoreWriter(std::string dir, std::string temp_dir, StoreInfo info, uint64_t per_shard,
                         bool overwrite)
    : dir_(std::move(dir)),
      temp_dir_(std::move(temp_dir)),
      info_(std::move(info)),
      per_shard_(per_shard),
      store_id_(NewStoreId()),
      overwrite_(overwrite),
      lock_fd_(LockTemporary(temp_dir_)) {
  offsets_.push_back(0);
}

StoreWriter::~StoreWriter() {
  if (!finished_) {
    std::error_code ignored;
    fs::remove_all(temp_dir_, ignored);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::Status CheckStoreTarget(const std::string& given, const std::vector<std::string>& inputs,
                              bool overwrite) {
  const std::string dir = WithoutTrailingSlash(given);
  if (const std::string kept = KeptContainerOf(dir); !kept.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the store ", dir, " ", kept, ", which only train writes; choose another folder"));
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
          dir, " exists and is not an instance store; --overwrite replaces only a store: choose "
               "another folder"));
    }
  }
  // A file in its path, an unwritable folder or too long a name.
  RETURN_IF_ERROR(CheckWritable(dir, "the store", Writes::kFolder));
  // What is read may not lie in what is replaced.
  for (const std::string& input : inputs) {
    if (IsInside(input, dir)) {
      return absl::InvalidArgumentError(
          absl::StrCat(input, " is read from inside ", dir, ", which the store would replace; "
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

absl::Status StoreWriter::Add(const Instance& in) {
  absl::Status valid =
      ValidateInstance(in, {info_.vocab_size, info_.max_len, info_.max_predictions});
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("instance ", records_, ": ", valid.message()));
  }
  const int length = in.length();
  int a_length = 0;
  while (a_length < length && in.segment_ids[a_length] == 0) ++a_length;
  const int id_bytes = IdBytes(info_.vocab_size);
  RecordHead head{static_cast<uint16_t>(length), static_cast<uint16_t>(a_length),
                  static_cast<uint16_t>(in.masked_positions.size()),
                  static_cast<uint8_t>(in.next_sentence_label), 0};
  const size_t start = body_.size();
  body_.resize(start + RecordBytes(head, id_bytes));
  char* out = body_.data() + start;
  std::memcpy(out, &head, sizeof(head));
  out = PutAll(out + sizeof(head), in.input_ids, id_bytes);
  out = PutAll(out, in.masked_positions, 2);
  PutAll(out, in.masked_ids, id_bytes);
  lengths_.push_back(static_cast<uint16_t>(length));
  offsets_.push_back(body_.size());
  ++records_;
  if (lengths_.size() == per_shard_) RETURN_IF_ERROR(FlushShard());
  return absl::OkStatus();
}

absl::Status StoreWriter::FlushShard() {
  if (lengths_.empty()) return absl::OkStatus();
  const uint64_t n = lengths_.size();
  std::string payload(LengthsBytes(n), '\0');
  std::memcpy(payload.data(), lengths_.data(), n * 2);
  payload.append(reinterpret_cast<const char*>(offsets_.data()), offsets_.size() * 8);
  payload += body_;
  ShardHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kStoreVersion;
  header.id_bytes = static_cast<uint32_t>(IdBytes(info_.vocab_size));
  header.vocab_size = info_.vocab_size;
  header.max_len = info_.max_len;
  header.max_predictions = info_.max_predictions;
  header.records = n;
  header.vocab_checksum = info_.vocab_checksum;
  header.body_bytes = body_.size();
  header.payload_checksum =
      Checksum64({reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
  header.store_id = store_id_;
  header.shard_index = static_cast<uint32_t>(shards_.size());
  std::string name = ShardName(shards_.size());
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(temp_dir_ + "/" + name));
  RETURN_IF_ERROR(writer.Write({reinterpret_cast<const uint8_t*>(&header), sizeof(header)}));
  RETURN_IF_ERROR(writer.Write(payload));
  RETURN_IF_ERROR(writer.Commit());
  shards_.push_back({name, n, header.payload_checksum});
  lengths_.clear();
  offsets_.assign(1, 0);
  body_.clear();
  return absl::OkStatus();
}

absl::Status StoreWriter::Finish() {
  RETURN_IF_ERROR(FlushShard());
  nlohmann::ordered_json manifest;
  manifest["format"] = "packed-bert instance store";
  manifest["version"] = kStoreVersion;
  manifest["records"] = records_;
  manifest["max_len"] = info_.max_len;
  manifest["max_predictions"] = info_.max_predictions;
  manifest["vocab_size"] = info_.vocab_size;
  manifest["vocab_checksum"] = absl::StrFormat("%016x", info_.vocab_checksum);
  manifest["id_bytes"] = IdBytes(info_.vocab_size);
  manifest["source"] = info_.source;
  manifest["store_id"] = absl::StrFormat("%016x", store_id_);
  manifest["shards"] = nlohmann::json::array();
  for (const ShardEntry& s : shards_) {
    manifest["shards"].push_back({{"file", s.file},
                                  {"records", s.records},
                                  {"checksum", absl::StrFormat("%016x", s.checksum)}});
  }
  manifest["manifest_checksum"] = ManifestChecksum(manifest);
  RETURN_IF_ERROR(WriteFileAtomically(temp_dir_ + "/" + kManifest, manifest.dump(2) + "\n"));
  std::error_code error;
  // The old store, if replaced, is moved aside first: one of the two is
  // whole at every moment.
  const std::string old = temp_dir_ + ".old";
  if (overwrite_ && fs::exists(dir_)) {
    fs::rename(dir_, old, error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot move ", dir_, " aside: ", error.message()));
    }
  }
  if (!overwrite_) {
    // Of two prepares racing to one new store, one fails here.
    RETURN_IF_ERROR(RenameWithoutReplacing(temp_dir_, dir_));
  } else {
    fs::rename(temp_dir_, dir_, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("cannot rename ", temp_dir_, " to ", dir_, ": ", error.message()));
    }
  }
  finished_ = true;
  fs::remove_all(old, error);
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

namespace {

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
  if (!fs::exists(manifest_path)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not an instance store (no ", kManifest,
                                            "); create one with packed-bert prepare"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFile(manifest_path));
  auto damaged = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": ", what, "; the store is damaged, prepare it again"));
  };
  Manifest out;
  try {
    auto manifest = nlohmann::ordered_json::parse(text);
    if (manifest.at("version").get<uint32_t>() != kStoreVersion) {
      return absl::InvalidArgumentError(absl::StrCat(
          manifest_path, ": store format version ", manifest.at("version").get<uint32_t>(),
          ", this build reads ", kStoreVersion, "; prepare the store again"));
    }
    if (manifest.value("manifest_checksum", "") != ManifestChecksum(manifest)) {
      return damaged("its checksum does not match its contents (edited or cut)");
    }
    if (!absl::SimpleHexAtoi(manifest.at("store_id").get<std::string>(), &out.store_id) ||
        !absl::SimpleHexAtoi(manifest.at("vocab_checksum").get<std::string>(),
                             &out.info.vocab_checksum)) {
      return damaged("store_id or vocab_checksum is not hexadecimal");
    }
    out.info.max_len = manifest.at("max_len").get<uint32_t>();
    out.info.max_predictions = manifest.at("max_predictions").get<uint32_t>();
    out.info.vocab_size = manifest.at("vocab_size").get<uint32_t>();
    out.info.source = manifest.value("source", "");
    if (out.info.max_len == 0 || out.info.max_len > kMaxSequenceLength ||
        out.info.vocab_size == 0) {
      return damaged("max_len or vocab_size out of range");
    }
    out.records = manifest.at("records").get<uint64_t>();
    for (const auto& entry : manifest.at("shards")) {
      Manifest::Shard shard;
      shard.file = entry.at("file").get<std::string>();
      if (shard.file.empty() || shard.file.find('/') != std::string::npos) {
        return damaged(
            absl::StrCat("shard name '", shard.file, "' is not a file in the store folder"));
      }
      if (!absl::SimpleHexAtoi(entry.at("checksum").get<std::string>(), &shard.checksum)) {
        return damaged(absl::StrCat("the checksum of ", shard.file, " is not hexadecimal"));
      }
      shard.records = entry.at("records").get<uint64_t>();
      out.shards.push_back(std::move(shard));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": malformed (", e.what(), ")"));
  }
  return out;
}

}  // namespace

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
  if (Checksum64(bytes.subspan(sizeof(header))) != header.payload_checksum) {
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
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
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
