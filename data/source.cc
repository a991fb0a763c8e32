#include "data/source.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/status.h"
#include "data/hdf5.h"
#include "data/store.h"

namespace pbert::data {

namespace {

// The first `size` sequences of another source.
class PrefixSource : public SequenceSource {
 public:
  PrefixSource(std::shared_ptr<const SequenceSource> inner, uint64_t size)
      : inner_(std::move(inner)), size_(size) {}
  uint64_t size() const override { return size_; }
  InstanceLimits limits() const override { return inner_->limits(); }
  const std::string& name() const override { return inner_->name(); }
  uint16_t Length(uint64_t index) const override { return inner_->Length(index); }
  absl::Status Read(uint64_t index, Instance* out) const override {
    if (index >= size_) {
      return absl::OutOfRangeError(absl::StrCat(name(), ": sequence ", index, " beyond ", size_));
    }
    return inner_->Read(index, out);
  }

 private:
  std::shared_ptr<const SequenceSource> inner_;
  uint64_t size_;
};

}  // namespace

std::vector<uint16_t> SequenceSource::Lengths() const {
  std::vector<uint16_t> out(size());
  for (uint64_t i = 0; i < out.size(); ++i) out[i] = Length(i);
  return out;
}

absl::StatusOr<std::shared_ptr<MemorySource>> MemorySource::Create(std::string name,
                                                                   std::vector<Instance> instances,
                                                                   InstanceLimits limits) {
  for (size_t i = 0; i < instances.size(); ++i) {
    absl::Status valid = ValidateInstance(instances[i], limits);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": sequence ", i, ": ", valid.message()));
    }
  }
  std::shared_ptr<MemorySource> source(new MemorySource());
  source->name_ = std::move(name);
  source->instances_ = std::move(instances);
  source->limits_ = limits;
  ChecksumStream checksum;
  auto add = [&](const void* data, size_t bytes) {
    checksum.Update({static_cast<const uint8_t*>(data), bytes});
  };
  add(&limits, sizeof(limits));
  for (const Instance& in : source->instances_) {
    for (const std::vector<int32_t>* field :
         {&in.input_ids, &in.segment_ids, &in.masked_positions, &in.masked_ids}) {
      const uint64_t n = field->size();
      add(&n, sizeof(n));
      add(field->data(), n * sizeof(int32_t));
    }
    add(&in.next_sentence_label, sizeof(in.next_sentence_label));
  }
  source->content_checksum_ = checksum.Digest();
  return source;
}

uint16_t MemorySource::Length(uint64_t index) const {
  return static_cast<uint16_t>(instances_[index].length());
}

absl::Status MemorySource::Read(uint64_t index, Instance* out) const {
  if (index >= instances_.size()) {
    return absl::OutOfRangeError(
        absl::StrCat(name_, ": sequence ", index, " beyond its ", instances_.size()));
  }
  *out = instances_[index];
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<SequenceSource>> OpenSequences(const std::string& path,
                                                              uint32_t vocab_size, int64_t limit) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    ASSIGN_OR_RETURN(InstanceStore store, InstanceStore::Open(path, StoreChecks::kChecksums));
    auto shared = std::make_shared<InstanceStore>(std::move(store));
    if (limit < 0 || static_cast<uint64_t>(limit) >= shared->size()) {
      return std::shared_ptr<SequenceSource>(shared);
    }
    return std::shared_ptr<SequenceSource>(
        std::make_shared<PrefixSource>(shared, static_cast<uint64_t>(limit)));
  }
  ASSIGN_OR_RETURN(auto reader, Hdf5Reader::Open(path));
  // Rows until `limit` sequences (a packed row holds several).
  const uint64_t wanted = limit < 0 ? UINT64_MAX : static_cast<uint64_t>(limit);
  std::vector<Instance> instances;
  constexpr int64_t kChunk = 4096;
  for (int64_t begin = 0; begin < reader->size() && instances.size() < wanted; begin += kChunk) {
    ASSIGN_OR_RETURN(auto chunk, reader->Read(begin, std::min(kChunk, reader->size() - begin)));
    for (auto& in : chunk) {
      if (instances.size() < wanted) instances.push_back(std::move(in));
    }
  }
  // A fixed-width file's width says nothing of its sequences (a 512-wide
  // file may hold none longer than 128): its longest sequence is its length.
  uint32_t longest = 0;
  for (const Instance& in : instances) longest = std::max<uint32_t>(longest, in.length());
  if (longest > kMaxSequenceLength) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds a sequence of ", longest,
                                                   " tokens; at most ", kMaxSequenceLength,
                                                   " are supported"));
  }
  InstanceLimits limits{vocab_size, std::max<uint32_t>(longest, 1),
                        static_cast<uint32_t>(reader->max_predictions())};
  ASSIGN_OR_RETURN(auto source, MemorySource::Create(path, std::move(instances), limits));
  return std::shared_ptr<SequenceSource>(std::move(source));
}

}  // namespace pbert::data
