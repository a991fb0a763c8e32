// The instance store: pretraining instances in memory-mapped shards, read
// without loading a shard into RAM. A store is a folder with store.json (the
// manifest) and shard-NNNNN.pbstore files; docs/formats.md has the layout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mmap_file.h"
#include "data/histogram.h"
#include "data/instance.h"
#include "data/source.h"

namespace pbert::data {

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
  std::vector<uint16_t> lengths_;
  std::vector<uint64_t> offsets_;
  std::string body_;
  struct ShardEntry {
    std::string file;
    uint64_t records;
    uint64_t checksum;
  };
  std::vector<ShardEntry> shards_;
  uint64_t store_id_;
  bool overwrite_;
  bool finished_ = false;
  int lock_fd_ = -1;  // marks temp_dir_ as in use (common/atomic_file.h)
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
