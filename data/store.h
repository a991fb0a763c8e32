// The instance store: pretraining instances in memory-mapped shards, read
// without loading a shard into RAM. A store is a folder with store.json (the
// manifest) and shard-NNNNN.pbstore files; docs/formats.md has the layout.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/append_log.h"
#include "common/mmap_file.h"
#include "data/histogram.h"
#include "data/instance.h"
#include "data/source.h"

namespace pbert::data {

// The pack index `prepare` keeps in a store made from packed HDF5, beside
// its shards.
inline constexpr char kKeptPackIndex[] = "packs.pbpack";

inline constexpr uint32_t kStoreVersion = 2;

struct StoreInfo {
  uint32_t vocab_size = 0;
  uint64_t vocab_checksum = 0;
  uint32_t max_len = 0;
  uint32_t max_predictions = 0;
  std::string source;  // free text: how the store was made
};

// The limits and vocabulary of the store at `dir`, from its store.json
// alone (checked against its checksum): what a command takes from a store
// before it opens the shards.
absl::StatusOr<StoreInfo> ReadStoreInfo(const std::string& dir);

// Whether a store may be written at `dir`: its parents are folders; it does
// not exist, or (`overwrite`) is a store; no file of `inputs` (what the
// store is made from) lies inside it. InvalidArgument or AlreadyExists.
absl::Status CheckStoreTarget(const std::string& dir, const std::vector<std::string>& inputs,
                              bool overwrite);

// One shard's records, each checked against the store's limits ([CLS] A
// [SEP] B [SEP] segments, ids below vocab_size, positions inside the
// sequence) and encoded as it is added. StoreWriter fills one after
// another; an import fills several at once, one per thread.
class ShardBuilder {
 public:
  explicit ShardBuilder(const StoreInfo& info);

  // An error says what is wrong with the instance (the caller names it).
  absl::Status Add(const Instance& instance);
  uint64_t records() const { return lengths_.size(); }
  const std::vector<uint16_t>& lengths() const { return lengths_; }
  // Writes the records as shard `index` of the store `store_id` to `path`
  // (atomically: the whole file or none) and returns the payload's
  // checksum, store.json's entry for it.
  absl::StatusOr<uint64_t> Write(const std::string& path, uint32_t index, uint64_t store_id) const;
  void Clear();

 private:
  StoreInfo info_;
  int id_bytes_;
  std::vector<uint16_t> lengths_;
  std::vector<uint64_t> offsets_;
  // The records, in blocks of a few MB: a growing shard is never copied.
  std::vector<std::string> body_;
  uint64_t body_bytes_ = 0;
};

// A shard file's name in its store: shard-00000.pbstore for shard 0.
std::string ShardFileName(uint32_t index);

// Writes a store into a temporary folder beside `dir` and renames it into
// place on Finish(), so a failed or interrupted run leaves nothing behind.
class StoreWriter {
 public:
  // `overwrite`: an existing store at `dir` is replaced on Finish(), not
  // before, so a failed run leaves it as it was.
  static absl::StatusOr<std::unique_ptr<StoreWriter>> Create(const std::string& dir,
                                                             const StoreInfo& info,
                                                             uint64_t records_per_shard,
                                                             bool overwrite = false);
  ~StoreWriter();

  // Checks the instance against the store's limits ([CLS] A [SEP] B [SEP]
  // segments, ids below vocab_size, positions inside the sequence).
  absl::Status Add(const Instance& instance);
  absl::Status Finish();
  uint64_t records() const { return records_; }
  // The folder being written: files put here before Finish() become part
  // of the store (and vanish with it if it fails).
  const std::string& staging_dir() const { return temp_dir_; }

 private:
  StoreWriter(std::string dir, std::string temp_dir, StoreInfo info, uint64_t per_shard,
              bool overwrite);
  absl::Status FlushShard();

  std::string dir_, temp_dir_;
  StoreInfo info_;
  uint64_t per_shard_;
  uint64_t records_ = 0;
  ShardBuilder shard_;
  std::vector<std::pair<uint64_t, uint64_t>> shards_;  // records, checksum
  uint64_t store_id_;
  bool overwrite_;
  bool finished_ = false;
  int lock_fd_ = -1;  // marks temp_dir_ as in use (common/atomic_file.h)
};

// A store written shard by shard, in any order and from several threads,
// into the folder `dir`.partial, with a journal (import.log: one line per
// shard done, fsynced) of what each shard was made from. A run that stops
// early (an error, a kill, a full disk, a lost machine) leaves the folder;
// the same work run again finds its shards there and makes only the rest.
// Finish() writes store.json and renames the folder to `dir`. The folder
// holds no store.json before then, so nothing takes it for a store.
class PartialStore {
 public:
  // A shard an earlier run wrote, as its journal line says.
  struct Done {
    uint64_t records = 0;
    uint64_t checksum = 0;
    std::string work;  // what it was made from (the caller's words)
    std::string note;  // the caller's figures about it
  };

  // Opens `dir`.partial, continuing the import there if its journal was
  // begun for the same `info` and `plan` (the caller's description of how
  // shards are made: options, not inputs), or starting a new one (an
  // import of other options there is removed first, with a warning). A
  // folder there that is not an import, or one that another running
  // process writes, is an error that names it. `overwrite`: as StoreWriter.
  static absl::StatusOr<std::unique_ptr<PartialStore>> Open(const std::string& dir,
                                                            const StoreInfo& info,
                                                            const std::string& plan,
                                                            bool overwrite);
  // Keeps the folder if a shard was done in it (for the next run), else
  // removes it, unless Finish() succeeded.
  ~PartialStore();
  PartialStore(const PartialStore&) = delete;
  PartialStore& operator=(const PartialStore&) = delete;

  // Shard `index` as an earlier run made it from `work`, its file checked
  // (size and header); null if there is none.
  const Done* Resumed(uint32_t index, const std::string& work) const;
  // Shards resumed from earlier runs.
  size_t resumed() const { return done_.size(); }
  // Writes `shard` as shard `index`, then its journal line: safe to call
  // from several threads at once.
  absl::Status Write(uint32_t index, const ShardBuilder& shard, const std::string& work,
                     const std::string& note);
  // Once shards [0, count) are all written or resumed: store.json, then
  // the rename to the store.
  // `also`: the names of files the import put into the folder that belong
  // in the store beside its shards (a kept pack index); anything else there
  // is removed, and named.
  absl::Status Finish(uint32_t count, const std::vector<std::string>& also = {});

  const std::string& staging_dir() const { return staging_; }
  // Shards in the folder now, resumed or written by this run.
  size_t shards_done() const;

 private:
  PartialStore(std::string dir, std::string staging, StoreInfo info, uint64_t store_id,
               bool overwrite, int lock_fd);

  std::string dir_, staging_;
  StoreInfo info_;
  uint64_t store_id_;
  bool overwrite_;
  int lock_fd_;
  std::unique_ptr<AppendLog> journal_;
  mutable std::mutex mu_;
  std::map<uint32_t, Done> done_;     // resumed
  std::map<uint32_t, Done> written_;  // by this run
  bool finished_ = false;
};

// What opening a store checks beyond its manifest.
enum class StoreChecks {
  kHeaders,    // every shard's header and size (enough to read lengths)
  kChecksums,  // also every shard's checksum: the data read is the data written
};

// The shards whose checksums one of several processes checks: shard i is
// part (i mod parts)'s. Ranks that open one store together each take their
// part, so that each shard is read once between them, not once per rank.
struct ShardShare {
  int part = 0;
  int parts = 1;
};

class InstanceStore : public SequenceSource {
 public:
  // Maps every shard and checks headers and sizes, and with kChecksums the
  // checksum of every shard of `share` (all CPUs, a progress bar for large
  // stores); Verify() checks more. Commands that train or evaluate on the
  // records use kChecksums, so that a changed byte is refused as verify
  // refuses it; train's ranks each check their share.
  static absl::StatusOr<InstanceStore> Open(const std::string& dir,
                                            StoreChecks checks = StoreChecks::kHeaders,
                                            ShardShare share = {});

  uint64_t size() const override { return total_; }
  InstanceLimits limits() const override {
    return {info_.vocab_size, info_.max_len, info_.max_predictions};
  }
  const std::string& name() const override { return dir_; }
  const StoreInfo& info() const { return info_; }
  uint64_t vocab_checksum() const override { return info_.vocab_checksum; }
  // Of store.json's limits, vocabulary checksum and shard checksums (which
  // cover every record): not of its path or store id.
  uint64_t content_checksum() const override { return content_checksum_; }
  const std::string& dir() const { return dir_; }
  int id_bytes() const { return id_bytes_; }

  uint16_t Length(uint64_t index) const override;
  // Record `index` without checks; for records Verify() has passed.
  Instance Get(uint64_t index) const;
  // Record `index`, its offsets, counts and values checked first: a damaged
  // record is an error naming its shard and index.
  absl::Status Read(uint64_t index, Instance* out) const override;
  // Every record's length, in order: 2 bytes per sequence.
  std::vector<uint16_t> Lengths() const override;
  LengthHistogram Histogram() const;

  // Checks every shard's checksum and every record's bounds; the error names
  // the shard file and the first bad record. `progress` gets records done.
  absl::Status Verify(const std::function<void(uint64_t)>& progress = nullptr) const;
  // Checks the checksum of every shard of `share` (parallel over shards);
  // the error names the first damaged shard.
  absl::Status VerifyChecksums(ShardShare share = {}) const;

 private:
  static absl::StatusOr<InstanceStore> OpenHeaders(const std::string& dir);
  struct Shard {
    std::string path;
    MappedFile file;
    uint64_t first = 0;  // global index of its first record
    uint64_t records = 0;
    const uint16_t* lengths = nullptr;
    const uint64_t* offsets = nullptr;
    const uint8_t* body = nullptr;
    uint64_t body_bytes = 0;
  };
  InstanceStore() = default;
  // Maps shard `index` from `path`, checks its header against store.json's
  // entry (`records`, `checksum`) and its length table, and appends it.
  absl::Status AddShard(const std::string& path, uint32_t index, uint64_t records,
                        uint64_t checksum, uint64_t store_id);
  const Shard& ShardOf(uint64_t index) const;
  absl::Status ReadRecord(const Shard& shard, uint64_t local, Instance* out) const;

  std::string dir_;
  StoreInfo info_;
  int id_bytes_ = 2;
  uint64_t total_ = 0;
  uint64_t content_checksum_ = 0;
  std::vector<std::shared_ptr<Shard>> shards_;
};

}  // namespace pbert::data
