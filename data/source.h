// Where a loader reads sequences from: an instance store (memory-mapped) or
// the rows of an MLPerf HDF5 file (read into memory; eval sets are small).
// Every record is checked against the source's limits when it is read, so a
// damaged record is an error naming it, never bad data in a batch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/instance.h"

namespace pbert::data {

class SequenceSource {
 public:
  virtual ~SequenceSource() = default;

  virtual uint64_t size() const = 0;
  virtual InstanceLimits limits() const = 0;
  // The file or folder, for messages.
  virtual const std::string& name() const = 0;
  virtual uint16_t Length(uint64_t index) const = 0;
  // Every record's length, in order.
  virtual std::vector<uint16_t> Lengths() const;
  // Record `index`, checked against limits(); the error names the record.
  virtual absl::Status Read(uint64_t index, Instance* out) const = 0;
  // The checksum of the vocabulary the ids come from; 0 where the source
  // does not record it (HDF5 files).
  virtual uint64_t vocab_checksum() const { return 0; }
  // A checksum of every record, the limits and the vocabulary's checksum:
  // equal for the same data, whatever its path. 0 where unknown.
  virtual uint64_t content_checksum() const { return 0; }
};

// Instances held in memory, each checked against `limits` on construction.
class MemorySource : public SequenceSource {
 public:
  static absl::StatusOr<std::shared_ptr<MemorySource>> Create(std::string name,
                                                              std::vector<Instance> instances,
                                                              InstanceLimits limits);

  uint64_t size() const override { return instances_.size(); }
  InstanceLimits limits() const override { return limits_; }
  const std::string& name() const override { return name_; }
  uint16_t Length(uint64_t index) const override;
  absl::Status Read(uint64_t index, Instance* out) const override;
  uint64_t content_checksum() const override { return content_checksum_; }

 private:
  MemorySource() = default;
  std::string name_;
  std::vector<Instance> instances_;
  InstanceLimits limits_;
  uint64_t content_checksum_ = 0;
};

// Opens `path`: an instance store folder, or an MLPerf HDF5 file whose ids
// must lie below `vocab_size` (HDF5 files do not record their vocabulary).
// `limit` >= 0 keeps only the first `limit` sequences.
absl::StatusOr<std::shared_ptr<SequenceSource>> OpenSequences(const std::string& path,
                                                              uint32_t vocab_size,
                                                              int64_t limit = -1);

}  // namespace pbert::data
