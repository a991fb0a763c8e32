#include "data/packing/pack_index.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/mmap_file.h"
#include "common/status.h"
#include "data/instance.h"
#include "data/random.h"

namespace pbert::data {
namespace {

// Fixed-size little-endian header; the payload after it is the strategy
// table then the ids. `checksum` covers the header (with the checksum field
// zeroed) and the payload, so that no header field can change unnoticed.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t max_len;
  uint64_t sequences;
  uint64_t rows;
  uint64_t strategies;
  uint64_t payload_bytes;
  uint64_t checksum;
  char algorithm[16];
};

uint64_t FileChecksum(Header header, absl::Span<const uint8_t> payload) {
  header.checksum = 0;
  ChecksumStream checksum;
  checksum.Update({reinterpret_cast<const uint8_t*>(&header), sizeof(header)});
  checksum.Update(payload);
  return checksum.Digest();
}
static_assert(sizeof(Header) == 72, "the header layout is part of the format");

template <class T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

PackIndex::PackIndex(PackingPlan plan, std::vector<uint32_t> sequence_ids)
    : plan_(std::move(plan)), ids_(std::move(sequence_ids)) {
  Index();
}

void PackIndex::Index() {
  row_start_.assign(1, 0);
  id_start_.assign(1, 0);
  for (const Strategy& s : plan_.strategies) {
    row_start_.push_back(row_start_.back() + s.count);
    id_start_.push_back(id_start_.back() + s.count * s.lengths.size());
  }
}

absl::Span<const uint32_t> PackIndex::Row(uint64_t r) const {
  size_t s = std::upper_bound(row_start_.begin(), row_start_.end(), r) - row_start_.begin() - 1;
  size_t depth = plan_.strategies[s].lengths.size();
  return absl::MakeConstSpan(ids_).subspan(id_start_[s] + (r - row_start_[s]) * depth, depth);
}

absl::Status PackIndex::Verify(absl::Span<const uint16_t> lengths) const {
  if (ids_.size() != lengths.size() || id_start_.back() != ids_.size()) {
    return absl::DataLossError(absl::StrCat("the pack index holds ", ids_.size(),
                                            " sequences, its rows ", id_start_.back(),
                                            ", the data ", lengths.size()));
  }
  std::vector<bool> seen(lengths.size(), false);
  for (size_t s = 0; s < plan_.strategies.size(); ++s) {
    const Strategy& strategy = plan_.strategies[s];
    if (strategy.tokens() > plan_.max_len) {
      return absl::DataLossError(absl::StrCat("strategy ", s, " overfills a row"));
    }
    if (strategy.lengths.empty() && strategy.count > 0) {
      return absl::DataLossError(absl::StrCat("strategy ", s, " has ", strategy.count,
                                              " rows that hold no sequence"));
    }
    for (uint64_t i = id_start_[s]; i < id_start_[s + 1]; ++i) {
      uint32_t id = ids_[i];
      int want = strategy.lengths[(i - id_start_[s]) % strategy.lengths.size()];
      if (id >= lengths.size() || seen[id]) {
        return absl::DataLossError(
            absl::StrCat("row ", row_start_[s] + (i - id_start_[s]) / strategy.lengths.size(),
                         " holds sequence ", id,
                         id >= lengths.size() ? ", beyond the data" : ", already in another row"));
      }
      if (lengths[id] != want) {
        return absl::DataLossError(absl::StrCat("sequence ", id, " has length ", lengths[id],
                                                ", its slot in the pack index says ", want));
      }
      seen[id] = true;
    }
  }
  return absl::OkStatus();
}

namespace {

std::string StrategyTable(const PackingPlan& plan) {
  std::string payload;
  for (const Strategy& s : plan.strategies) {
    Append(&payload, s.count);
    Append(&payload, static_cast<uint32_t>(s.lengths.size()));
    for (int l : s.lengths) Append(&payload, static_cast<uint32_t>(l));
  }
  return payload;
}

}  // namespace

uint64_t PackIndex::Checksum() const {
  std::string table = StrategyTable(plan_);
  ChecksumStream checksum;
  checksum.Update({reinterpret_cast<const uint8_t*>(table.data()), table.size()});
  checksum.Update({reinterpret_cast<const uint8_t*>(ids_.data()), ids_.size() * sizeof(uint32_t)});
  return checksum.Digest();
}

absl::Status PackIndex::Write(const std::string& path, const std::string& algorithm,
                              Existing existing) const {
  std::string payload = StrategyTable(plan_);
  Header header{};
  std::memcpy(header.magic, kPackIndexMagic, sizeof(header.magic));
  header.version = kPackIndexVersion;
  header.max_len = static_cast<uint32_t>(plan_.max_len);
  header.sequences = ids_.size();
  header.rows = rows();
  header.strategies = plan_.strategies.size();
  header.payload_bytes = payload.size() + ids_.size() * sizeof(uint32_t);
  std::strncpy(header.algorithm, algorithm.c_str(), sizeof(header.algorithm) - 1);
  payload.append(reinterpret_cast<const char*>(ids_.data()), ids_.size() * sizeof(uint32_t));
  header.checksum =
      FileChecksum(header, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});

  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(writer.Write({reinterpret_cast<const uint8_t*>(&header), sizeof(header)}));
  RETURN_IF_ERROR(writer.Write(payload));
  return writer.Commit(existing);
}

namespace {

// The strategy at payload[*at] (its row count, depth and slot lengths),
// `at` moved past it; an error says what is wrong with it, after the
// strategy's number.
absl::StatusOr<Strategy> ReadStrategy(const Header& header, absl::Span<const uint8_t> payload,
                                      size_t* at) {
  auto take = [&](void* out, size_t n) {
    if (*at + n > payload.size()) return false;
    CopyBytes(out, payload.data() + *at, n);
    *at += n;
    return true;
  };
  Strategy strategy;
  uint32_t depth;
  // A depth is checked against the bytes left before anything is sized by it.
  if (!take(&strategy.count, 8) || !take(&depth, 4) || depth > header.max_len ||
      depth > (payload.size() - *at) / sizeof(uint32_t)) {
    return absl::DataLossError(" is cut off");
  }
  // Every row holds at least one sequence (a row of none is no part of a
  // partition), and no strategy has more rows than there are sequences.
  if (depth == 0 && strategy.count > 0) {
    return absl::DataLossError(
        absl::StrCat(" has ", strategy.count, " rows that hold no sequence"));
  }
  if (strategy.count > header.sequences) {
    return absl::DataLossError(
        absl::StrCat(" has ", strategy.count, " rows for ", header.sequences, " sequences"));
  }
  strategy.lengths.resize(depth);
  for (uint32_t k = 0; k < depth; ++k) {
    uint32_t l;
    if (!take(&l, 4)) return absl::DataLossError(" is cut off");
    if (l == 0 || l > header.max_len) {
      return absl::DataLossError(
          absl::StrCat(" has a slot of length ", l, ", outside 1..", header.max_len));
    }
    strategy.lengths[k] = static_cast<int>(l);
  }
  return strategy;
}

}  // namespace

absl::StatusOr<PackIndex> PackIndex::Read(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto bytes = file.bytes();
  auto corrupt = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid pack index: ", what,
                                            "; re-run 'packed-bert pack' to rebuild it"));
  };
  Header header;
  if (bytes.size() < sizeof(header)) return corrupt("shorter than its header");
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kPackIndexMagic, sizeof(header.magic)) != 0) {
    return corrupt("wrong magic bytes");
  }
  if (header.version != kPackIndexVersion) {
    return corrupt(
        absl::StrCat("format version ", header.version, ", this build reads ", kPackIndexVersion));
  }
  if (bytes.size() - sizeof(header) != header.payload_bytes) {
    return corrupt(absl::StrCat("truncated or padded: ", bytes.size() - sizeof(header),
                                " payload bytes, the header says ", header.payload_bytes));
  }
  auto payload = bytes.subspan(sizeof(header));
  if (kChecksumsCompared && FileChecksum(header, payload) != header.checksum) {
    return corrupt("checksum mismatch");
  }

  // A row's length sizes what the plan's readers allocate (a histogram of
  // its lengths): within a store's sequences' bound.
  if (header.max_len == 0 || header.max_len > kMaxSequenceLength) {
    return corrupt(
        absl::StrCat("row length ", header.max_len, ", outside 1..", kMaxSequenceLength));
  }
  PackingPlan plan;
  plan.max_len = static_cast<int>(header.max_len);
  size_t at = 0;
  for (uint64_t s = 0; s < header.strategies; ++s) {
    absl::StatusOr<Strategy> strategy = ReadStrategy(header, payload, &at);
    if (!strategy.ok()) return corrupt(absl::StrCat("strategy ", s, strategy.status().message()));
    plan.strategies.push_back(*std::move(strategy));
  }
  // (Divided, not multiplied: a count of 2^62 and more would wrap.)
  const size_t left = payload.size() - at;
  if (left % sizeof(uint32_t) != 0 || left / sizeof(uint32_t) != header.sequences) {
    return corrupt(absl::StrCat("the id table holds ", left / sizeof(uint32_t),
                                " ids, the header counts ", header.sequences, " sequences"));
  }
  std::vector<uint32_t> ids(header.sequences);
  CopyBytes(ids.data(), payload.data() + at, ids.size() * sizeof(uint32_t));
  PackIndex index(std::move(plan), std::move(ids));
  if (index.rows() != header.rows || index.id_start_.back() != header.sequences) {
    return corrupt("row counts do not add up");
  }
  return index;
}

absl::StatusOr<PackIndex> AssignSequences(const PackingPlan& plan,
                                          absl::Span<const uint16_t> lengths, uint64_t seed) {
  const int S = plan.max_len;
  if (lengths.size() > UINT32_MAX) {
    return absl::OutOfRangeError("more than 2^32 sequences in one pack index");
  }
  // Counting sort of the ids by length: ids of length l occupy
  // [start[l], start[l+1]) of `pool`.
  std::vector<uint64_t> start(S + 2, 0);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] == 0 || lengths[i] > S) {
      return absl::OutOfRangeError(
          absl::StrCat("sequence ", i, " has length ", lengths[i], ", outside 1..", S));
    }
    ++start[lengths[i] + 1];
  }
  LengthHistogram coverage = plan.Coverage();
  for (int l = 1; l <= S; ++l) {
    if (coverage.counts[l] != start[l + 1]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the packing plan has ", coverage.counts[l], " slots of length ", l, ", the data ",
          start[l + 1], " sequences; the plan was made for other data"));
    }
  }
  for (int l = 1; l <= S + 1; ++l) start[l] += start[l - 1];
  std::vector<uint32_t> pool(lengths.size());
  {
    std::vector<uint64_t> next(start.begin(), start.end() - 1);
    for (size_t i = 0; i < lengths.size(); ++i) pool[next[lengths[i]]++] = static_cast<uint32_t>(i);
  }
  for (int l = 1; l <= S; ++l) {
    // One stream per length, so the result does not depend on the others.
    Rng rng(seed, static_cast<uint64_t>(l));
    rng.Shuffle(pool.begin() + static_cast<std::ptrdiff_t>(start[l]),
                pool.begin() + static_cast<std::ptrdiff_t>(start[l + 1]));
  }
  std::vector<uint32_t> ids;
  ids.reserve(lengths.size());
  std::vector<uint64_t> next(start.begin(), start.end() - 1);
  for (const Strategy& s : plan.strategies) {
    for (uint64_t row = 0; row < s.count; ++row) {
      for (int l : s.lengths) ids.push_back(pool[next[l]++]);
    }
  }
  return PackIndex(plan, std::move(ids));
}

absl::StatusOr<PackIndex> PackIndexFromRows(int max_len, absl::Span<const uint8_t> depths,
                                            absl::Span<const uint16_t> lengths) {
  // Rows grouped by strategy, in the order StrategyCounter gives plans
  // (lexicographic by lengths, longest first within a row).
  std::map<std::vector<int>, std::vector<uint32_t>> members;
  std::map<std::vector<int>, uint64_t> counts;
  uint64_t next = 0;
  std::vector<uint32_t> row;
  for (size_t r = 0; r < depths.size(); ++r) {
    if (next + depths[r] > lengths.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", r, " of ", depths.size(), " goes past the ", lengths.size(), " sequences"));
    }
    row.resize(depths[r]);
    for (uint32_t& id : row) id = static_cast<uint32_t>(next++);
    std::stable_sort(row.begin(), row.end(),
                     [&](uint32_t a, uint32_t b) { return lengths[a] > lengths[b]; });
    std::vector<int> shape;
    for (uint32_t id : row) shape.push_back(lengths[id]);
    auto& ids = members[shape];
    ids.insert(ids.end(), row.begin(), row.end());
    counts[shape] += 1;
  }
  if (next != lengths.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rows hold ", next, " of the ", lengths.size(), " sequences"));
  }
  PackingPlan plan;
  plan.max_len = max_len;
  std::vector<uint32_t> ids;
  for (auto& [shape, row_ids] : members) {
    plan.strategies.push_back({shape, counts[shape]});
    ids.insert(ids.end(), row_ids.begin(), row_ids.end());
  }
  PackIndex index(std::move(plan), std::move(ids));
  RETURN_IF_ERROR(index.Verify(lengths));
  return index;
}

}  // namespace pbert::data
