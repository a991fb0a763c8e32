// Reads a TensorFlow checkpoint in the tensor-bundle format (PREFIX.index +
// PREFIX.data-NNNNN-of-NNNNN, as tf.train.Saver writes since TF 1.0 and
// MLCommons publishes the BERT phase-1 checkpoint) without TensorFlow: the
// index is a LevelDB-style table of BundleEntryProto records, each naming a
// dtype, a shape and a range of a data file, checked with CRC-32C.
// Layout and limits: docs/formats.md.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/named_tensors.h"

namespace pbert::formats {

// The checkpoint's prefix from a path naming it: "model.ckpt-28252",
// "model.ckpt-28252.index" or one of its data files.
std::string TensorBundlePrefix(const std::string& path);

// True when `path` names a tensor bundle (its .index file exists).
bool IsTensorBundle(const std::string& path);

// Every tensor of the bundle, by name in the index's (sorted) order, on the
// CPU. Fails with one line naming the file and the tensor for: a truncated
// or damaged index (block or table checksums, bad varints), an unknown or
// unsupported dtype (strings, resources), sliced (partitioned) tensors, a
// data range outside its shard, a shape that does not match the size, a
// CRC-32C mismatch of the tensor's bytes, a big-endian bundle.
absl::StatusOr<NamedTensors> ReadTensorBundle(const std::string& path);

}  // namespace pbert::formats
