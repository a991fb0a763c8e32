// The MLPerf/NVIDIA BERT HDF5 format: one file of fixed-width datasets
// input_ids, input_mask, segment_ids [N,S], masked_lm_positions,
// masked_lm_ids [N,P] and next_sentence_labels [N], zero-padded. Existing
// MLPerf data is read as it is; our instances can be written back to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/instance.h"

namespace pbert::data {

class Hdf5Reader {
 public:
  // Opens `path` and checks that the six datasets exist with matching shapes.
  static absl::StatusOr<std::unique_ptr<Hdf5Reader>> Open(const std::string& path);
  ~Hdf5Reader();

  int64_t size() const { return rows_; }
  int max_len() const { return max_len_; }
  int max_predictions() const { return max_predictions_; }

  // Reads instances [begin, begin + count), dropping the padding: a row's
  // length is the sum of its input_mask, its masked slots those with a
  // non-zero position.
  absl::StatusOr<std::vector<Instance>> Read(int64_t begin, int64_t count);

 private:
  struct Impl;
  explicit Hdf5Reader(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  std::string path_;
  int64_t rows_ = 0;
  int max_len_ = 0;
  int max_predictions_ = 0;
};

// Writes `instances` in the MLPerf format (the NVIDIA writer's dtypes: int32
// ids and positions, int8 masks, segments and labels; gzip), atomically.
absl::Status WriteHdf5(const std::string& path, const std::vector<Instance>& instances, int max_len,
                       int max_predictions);

}  // namespace pbert::data
