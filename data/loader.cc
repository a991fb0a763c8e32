#include "data/loader.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/random.h"

namespace pbert::data {

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<const SequenceSource> source,
                                                       std::shared_ptr<const PackIndex> index,
                                                       const LoaderOptions& options,
                                                       LoaderPosition start) {
  const int64_t full = options.world_size * options.batches_per_step * options.rows_per_batch;
  if (options.rows_per_batch < 1 || options.batches_per_step < 1 || options.world_size < 1 ||
      options.rank < 0 || options.rank >= options.world_size || options.threads < 1 ||
      options.prefetch < 1 || options.rows_per_step < 0 || options.rows_per_step > full) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loader options out of range: rows_per_batch ", options.rows_per_batch,
        ", batches_per_step ", options.batches_per_step, ", rows_per_step ", options.rows_per_step,
        ", rank ", options.rank, " of ", options.world_size, ", threads ", options.threads,
        ", prefetch ", options.prefetch));
  }
  RETURN_IF_ERROR(Annotate(index->Verify(source->Lengths()),
                           absl::StrCat("the pack index does not fit ", source->name(),
                                        " (pack it again)")));
  if (index->rows() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(source->name(), " holds no sequences"));
  }
  if (index->max_len() > options.shape.max_len || index->plan().depth_used() > options.shape.max_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the pack index has rows of ", index->max_len(), " tokens and up to ",
        index->plan().depth_used(), " sequences; batches allow ", options.shape.max_len, " and ",
        options.shape.max_depth));
  }
  if (options.single_pass && start.rows > index->rows()) {
    return absl::InvalidArgumentError("a single-pass loader cannot start past its pass");
  }
  std::unique_ptr<Loader> loader(new Loader(std::move(source), std::move(index), options, start));
  for (int t = 0; t < options.threads; ++t) loader->threads_.emplace_back(&Loader::Work, loader.get());
  return loader;
}

Loader::Loader(std::shared_ptr<const SequenceSource> source, std::shared_ptr<const PackIndex> index,
               const LoaderOptions& options, LoaderPosition start)
    : source_(std::move(source)), index_(std::move(index)), options_(options), start_(start) {}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

uint64_t Loader::RowsPerStep() const {
  if (options_.rows_per_step > 0) return static_cast<uint64_t>(options_.rows_per_step);
  return static_cast<uint64_t>(options_.world_size * options_.batches_per_step *
                               options_.rows_per_batch);
}

uint64_t Loader::StepsPerPass() const {
  const uint64_t left = index_->rows() - std::min(index_->rows(), start_.rows);
  return (left + RowsPerStep() - 1) / RowsPerStep();
}

uint64_t Loader::RowAt(uint64_t row) {
  const uint64_t n = index_->rows();
  const uint64_t epoch = row / n, offset = row % n;
  if (!options_.shuffle) return offset;
  std::shared_ptr<const std::vector<uint32_t>> order;
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    auto it = orders_.find(epoch);
    if (it != orders_.end()) order = it->second;
  }
  if (order == nullptr) {
    // Each epoch's order is its own random stream, so any position can be
    // reached without replaying earlier epochs.
    auto fresh = std::make_shared<std::vector<uint32_t>>(n);
    std::iota(fresh->begin(), fresh->end(), 0u);
    Rng rng(options_.seed, epoch);
    rng.Shuffle(*fresh);
    if (options_.group_by_length) {
      std::vector<uint32_t> tokens(n, 0);
      for (uint64_t row = 0; row < n; ++row) {
        for (uint32_t id : index_->Row(row)) tokens[row] += source_->Length(id);
      }
      std::stable_sort(fresh->begin(), fresh->end(),
                       [&](uint32_t a, uint32_t b) { return tokens[a] < tokens[b]; });
      // Micro-batches of B rows of like length, in a shuffled order.
      const uint64_t B = static_cast<uint64_t>(options_.rows_per_batch);
      std::vector<uint64_t> chunks((n + B - 1) / B);
      std::iota(chunks.begin(), chunks.end(), uint64_t{0});
      rng.Shuffle(chunks);
      std::vector<uint32_t> grouped;
      grouped.reserve(n);
      for (uint64_t c : chunks) {
        for (uint64_t i = c * B; i < std::min<uint64_t>(n, (c + 1) * B); ++i) {
          grouped.push_back((*fresh)[i]);
        }
      }
      *fresh = std::move(grouped);
    }
    std::lock_guard<std::mutex> lock(order_mu_);
    order = orders_.emplace(epoch, std::move(fresh)).first->second;
    // Workers are at most a few steps apart: older epochs are done with.
    while (orders_.size() > 2 && orders_.begin()->first + 1 < epoch) orders_.erase(orders_.begin());
  }
  return (*order)[offset];
}

absl::StatusOr<StepBatches> Loader::Build(uint64_t step) {
  const uint64_t B = options_.rows_per_batch;
  uint64_t begin = start_.rows + step * RowsPerStep();
  uint64_t end = begin + RowsPerStep();
  if (options_.single_pass) end = std::min<uint64_t>(end, index_->rows());
  StepBatches out;
  out.first_micro_batch = static_cast<uint64_t>(options_.rank * options_.batches_per_step);
  std::vector<Instance> storage;
  for (int64_t k = 0; k < options_.batches_per_step; ++k) {
    const uint64_t chunk = static_cast<uint64_t>(options_.rank * options_.batches_per_step + k);
    const uint64_t first = begin + chunk * B;
    const uint64_t last = std::min(end, first + B);
    if (first >= last) break;
    std::vector<uint64_t> rows;
    size_t sequences = 0;
    for (uint64_t r = first; r < last; ++r) {
      rows.push_back(RowAt(r));
      sequences += index_->Row(rows.back()).size();
    }
    storage.assign(sequences, Instance());
    std::vector<std::vector<const Instance*>> layout;
    std::vector<int64_t> records;
    size_t next = 0;
    for (uint64_t row : rows) {
      layout.emplace_back();
      for (uint32_t id : index_->Row(row)) {
        RETURN_IF_ERROR(source_->Read(id, &storage[next]));
        out.tokens += storage[next].length();
        layout.back().push_back(&storage[next++]);
        records.push_back(id);
      }
    }
    ASSIGN_OR_RETURN(PackedBatch batch, MakeBatch(layout, options_.shape));
    batch.records = std::move(records);
    if (options_.prepare) {
      ASSIGN_OR_RETURN(std::any prepared, options_.prepare(batch));
      out.prepared.push_back(std::move(prepared));
    } else {
      out.batches.push_back(std::move(batch));
    }
    out.sequences += sequences;
    out.rows += rows.size();
  }
  return out;
}

void Loader::Work() {
  const uint64_t limit = options_.single_pass ? StepsPerPass() : UINT64_MAX;
  while (true) {
    uint64_t step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || (next_to_build_ < limit &&
                             next_to_build_ < consumed_ + static_cast<uint64_t>(options_.prefetch));
      });
      if (stopping_) return;
      step = next_to_build_++;
    }
    absl::StatusOr<StepBatches> built;
    try {
      built = Build(step);
    } catch (const std::exception& e) {
      // LibTorch reports allocation failures and the like by exception.
      const bool memory = IsOutOfMemory(e);
      built =
          absl::Status(memory ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal,
                       absl::StrCat("building the batches of step ", step, ": ", FirstLine(e),
                                    memory ? "; lower train.micro_batch_rows" : ""));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.emplace(step, std::move(built));
    }
    cv_.notify_all();
  }
}

absl::StatusOr<StepBatches> Loader::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (options_.single_pass && consumed_ >= StepsPerPass()) return StepBatches();
  const uint64_t step = consumed_;
  cv_.wait(lock, [&] { return ready_.count(step) > 0; });
  auto node = ready_.extract(step);
  ++consumed_;
  lock.unlock();
  cv_.notify_all();
  return std::move(node.mapped());
}

}  // namespace pbert::data
