// The loader: rows of a pack index -> the micro-batches of each optimizer
// step, built on background threads ahead of use. The unpacked case is a
// pack index of one sequence per row (packing.algorithm: none): the same
// path. Docs: docs/training.md ("The loader").
//
// The rows form one stream: epoch 0's order, then epoch 1's, ... (each a
// seeded shuffle of all rows, or the index order when shuffle is off). An
// optimizer step takes the next world_size x batches_per_step x
// rows_per_batch rows of the stream (or rows_per_step); rank r's
// micro-batch k is the chunk r x batches_per_step + k of them. The position is one number, the rows of
// the stream consumed by all ranks, so a resume (with any world size)
// continues at the exact next row.
#pragma once

#include <any>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config_field.h"
#include "data/batch.h"
#include "data/packing/pack_index.h"
#include "data/source.h"
#include "nlohmann/json.hpp"

namespace pbert::data {

struct LoaderOptions {
  int64_t rows_per_batch = 32;   // B: rows of one micro-batch
  int64_t batches_per_step = 1;  // micro-batches of one rank per optimizer step
  // Rows of a step over all ranks, when fewer than world_size x
  // batches_per_step x rows_per_batch: the step's last micro-batches are
  // then shorter, or none (fine-tuning's batch of so many sequences,
  // whatever the ranks). 0: every micro-batch full.
  int64_t rows_per_step = 0;
  BatchShape shape;              // S, D, M of every micro-batch
  int rank = 0;
  int world_size = 1;
  bool shuffle = true;  // a seeded shuffle of the rows per epoch; off: index order
  // Uniform-length ("smart") batching, with shuffle: each epoch's shuffled
  // rows are sorted by tokens (stably), cut into micro-batches of
  // rows_per_batch, and the micro-batches shuffled. Pair with
  // shape.fit_width, so that short batches are short.
  bool group_by_length = false;
  uint64_t seed = 0;
  // Stop after one pass over the rows (eval, score); the last step may be
  // short, and a rank may get fewer micro-batches or none.
  bool single_pass = false;
  int threads = 1;       // background threads building batches
  int prefetch = 4;      // steps built ahead of use, at most
  // What each built micro-batch becomes on the loader's threads, instead of
  // being handed out as it is: the training step's inputs on its device
  // (train/inputs.h makes them; the loader knows them only as std::any).
  using PrepareFunction = std::function<absl::StatusOr<std::any>(const PackedBatch&)>;
  PrepareFunction prepare;

  // The config's data keys of the loader (the rest comes from the train,
  // packing and dist sections and the communicator).
  template <class V>
  void Visit(V& v) {
    v.Field("loader_threads", &threads, "background threads building batches",
            config::InRange(1, 64));
    v.Field("prefetch_steps", &prefetch, "optimizer steps of batches built ahead",
            config::InRange(1, 1024));
  }
};

// Where the stream stands: rows consumed by all ranks since the start of
// epoch 0.
struct LoaderPosition {
  uint64_t rows = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(LoaderPosition, rows)
};

// The micro-batches of one rank for one optimizer step, with what they hold.
struct StepBatches {
  std::vector<PackedBatch> batches;  // without options.prepare
  std::vector<std::any> prepared;    // with it, what it made of each
  // The number of the first of them among the step's micro-batches over
  // all ranks (rank x batches_per_step; the rest follow it).
  uint64_t first_micro_batch = 0;
  uint64_t sequences = 0;  // in this rank's batches
  uint64_t tokens = 0;     // real tokens in this rank's batches
  uint64_t rows = 0;       // rows in this rank's batches
};

class Loader {
 public:
  // Checks the pack index against the source (the same lengths, every
  // sequence once) and the shape against both, then starts the threads.
  static absl::StatusOr<std::unique_ptr<Loader>> Create(
      std::shared_ptr<const SequenceSource> source, std::shared_ptr<const PackIndex> index,
      const LoaderOptions& options, LoaderPosition start = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next step's micro-batches for this rank. In single-pass mode an
  // empty result (no batches) after the last step on every rank.
  absl::StatusOr<StepBatches> Next();
  // After the steps returned so far.
  LoaderPosition position() const { return {start_.rows + consumed_ * RowsPerStep()}; }
  // Rows all ranks take per step.
  uint64_t RowsPerStep() const;
  // Steps of one pass in single-pass mode.
  uint64_t StepsPerPass() const;

 private:
  Loader(std::shared_ptr<const SequenceSource> source, std::shared_ptr<const PackIndex> index,
         const LoaderOptions& options, LoaderPosition start);
  void Work();
  absl::StatusOr<StepBatches> Build(uint64_t step);
  // Row id at stream position `row`.
  uint64_t RowAt(uint64_t row);

  std::shared_ptr<const SequenceSource> source_;
  std::shared_ptr<const PackIndex> index_;
  LoaderOptions options_;
  LoaderPosition start_;

  std::mutex order_mu_;  // the cached epoch orders
  std::map<uint64_t, std::shared_ptr<const std::vector<uint32_t>>> orders_;

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_to_build_ = 0;  // steps since start_
  uint64_t consumed_ = 0;
  bool stopping_ = false;
  std::map<uint64_t, absl::StatusOr<StepBatches>> ready_;
  std::vector<std::thread> threads_;
};

}  // namespace pbert::data
