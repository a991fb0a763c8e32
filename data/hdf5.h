// BERT pretraining data in HDF5, in the three layouts MLPerf users have
// (docs/formats.md):
//  - MLPerf (fixed width): input_ids, input_mask, segment_ids [N,S],
//    masked_lm_positions, masked_lm_ids [N,P], next_sentence_labels [N],
//    zero-padded; our instances can be written back to it.
//  - NVIDIA variable-length: the same without input_mask, each row a
//    variable-length array (HDF5 vlen) holding only the used entries.
//  - NVIDIA packed: vlen rows of several sequences each, with per-sequence
//    packed_input_len and packed_masked_lm_len, masked_lm_positions offset
//    into the row and one next_sentence_labels entry per sequence.
// Every row is checked as it is read; errors name the file and the row.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "data/instance.h"

namespace pbert::data {

enum class Hdf5Layout { kFixed, kVariable, kPacked };

// Whether `path` is a regular file in HDF5's format. A pipe or device is
// never read, so that the reader given it next starts at its first byte.
bool IsHdf5File(const std::string& path);

// "MLPerf fixed-width", "NVIDIA variable-length", "NVIDIA packed".
const char* Hdf5LayoutName(Hdf5Layout layout);

// What a file holds, told from its datasets' types and extents alone.
struct Hdf5Shape {
  Hdf5Layout layout = Hdf5Layout::kFixed;
  int64_t rows = 0;  // packed rows hold several sequences
};

class Hdf5Reader {
 public:
  // The layout and rows of `path` without reading a row (an import plans
  // its work with it); Open checks the file whole.
  static absl::StatusOr<Hdf5Shape> Inspect(const std::string& path);

  // Opens `path`, tells its layout from its datasets and checks that they
  // exist with matching shapes (an error names the dataset that differs)
  // and hold at least one row. The variable-length layouts are read (and
  // every row checked) here, whole: NVIDIA's shards are small.
  static absl::StatusOr<std::unique_ptr<Hdf5Reader>> Open(const std::string& path);
  ~Hdf5Reader();

  Hdf5Layout layout() const { return layout_; }
  // Rows in the file (packed rows hold several sequences).
  int64_t size() const { return rows_; }
  // The widest row in tokens (fixed width: the datasets' width, whatever
  // the sequences' lengths), and the most masked slots of one sequence
  // (fixed width: the slot datasets' width).
  int max_len() const { return max_len_; }
  int max_predictions() const { return max_predictions_; }

  // The sequences of rows [begin, begin + count), row after row, without
  // padding (fixed width: a row's length is the sum of its input_mask, its
  // masked slots those with a non-zero position). `depths`, if given,
  // receives each row's number of sequences.
  absl::StatusOr<std::vector<Instance>> Read(int64_t begin, int64_t count,
                                             std::vector<int>* depths = nullptr);

 private:
  struct Impl;
  explicit Hdf5Reader(std::unique_ptr<Impl> impl);

  absl::Status ReadVariable();
  absl::Status CheckNotEmpty() const;

  std::unique_ptr<Impl> impl_;
  std::string path_;
  Hdf5Layout layout_ = Hdf5Layout::kFixed;
  int64_t rows_ = 0;
  int max_len_ = 0;
  int max_predictions_ = 0;
};

// Writes `instances` in the MLPerf format (the NVIDIA writer's dtypes: int32
// ids and positions, int8 masks, segments and labels; gzip), atomically;
// `existing`: what happens to a file already at `path`.
absl::Status WriteHdf5(const std::string& path, const std::vector<Instance>& instances, int max_len,
                       int max_predictions, Existing existing = Existing::kReplace);

}  // namespace pbert::data
