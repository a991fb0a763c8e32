// RUN_DIR/events.out.tfevents.packed-bert, written by rank 0: the run's
// scalars as a TensorBoard event file, for `tensorboard --logdir RUN_DIR`
// (or a folder of runs). The file is TFRecord framing around Event protocol
// buffers, written here without TensorFlow or protobuf (docs/training.md,
// TensorBoard). Like metrics.jsonl, its length is saved with each
// checkpoint and a resume cuts it back to it, so no step appears twice.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/append_log.h"

namespace pbert::train {

inline constexpr char kTensorBoardFile[] = "events.out.tfevents.packed-bert";

// One scalar: a tag such as "train/loss" and its value.
using Scalar = std::pair<std::string, double>;

// The length of the longest start of `text` made of whole TFRecord records
// (their lengths and checksums intact).
uint64_t WholeTfRecords(absl::string_view text);

class TensorBoardLog {
 public:
  // Opens `path`, cut back to `keep_bytes` (a file shorter than that is set
  // aside and the log goes on from its whole records, common/append_log.h);
  // a new (empty) file starts with the file_version event that TensorBoard
  // reads first, stamped now.
  static absl::StatusOr<std::unique_ptr<TensorBoardLog>> Open(const std::string& path,
                                                              uint64_t keep_bytes);

  // Writes one event at `step` holding `scalars`, stamped `wall_time`
  // (seconds since the epoch).
  absl::Status Write(int64_t step, const std::vector<Scalar>& scalars, double wall_time);
  absl::Status Sync() { return file_->Sync(); }
  uint64_t bytes() const { return file_->bytes(); }
  // What Open did to a file shorter than the checkpoint counted; "" if none.
  const std::string& recovery() const { return file_->recovery(); }

 private:
  explicit TensorBoardLog(std::unique_ptr<AppendLog> file) : file_(std::move(file)) {}
  std::unique_ptr<AppendLog> file_;
};

}  // namespace pbert::train
