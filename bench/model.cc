// Model benchmark: training-step throughput on CPU for batches of the same
// shape [B,S], side by side in one run:
//   padded, key mask  one sequence per row, the usual [B,1,1,S] padding mask
//   padded, block     one sequence per row, our block-diagonal [B,1,S,S] mask
//   packed, block     rows packed with up to D sequences (lpfhp plan)
// The first two give the cost of the block-diagonal mask; the last the gain
// of packing, in real (non-padding) tokens per second.
//
//   build/bench/model [--steps N] [--threads T]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "data/histogram.h"
#include "data/packing/algorithms.h"
#include "model/bert.h"
#include "model/losses.h"

namespace {

using pbert::data::Instance;

constexpr int kMaxLen = 128;
constexpr int kRows = 16;
constexpr int kDepth = 8;

// Lengths like BERT's Wikipedia data, scaled from 512 to kMaxLen tokens.
std::vector<int> SampleLengths(int count, std::mt19937& rng) {
  auto h = pbert::data::ReadHistogramFile(
      std::string(PBERT_SHARED_DATA_DIR) + "/histogram_wikipedia_512.txt", 512);
  std::vector<double> weights(kMaxLen + 1, 0.0);
  if (h.ok()) {
    for (int l = 1; l <= 512; ++l) weights[(l * kMaxLen + 511) / 512] += h->counts[l];
  } else {
    std::fill(weights.begin() + 8, weights.end(), 1.0);  // no shared data: uniform
  }
  weights[0] = weights[1] = weights[2] = 0;
  std::discrete_distribution<int> length(weights.begin(), weights.end());
  std::vector<int> out(count);
  for (int& l : out) l = length(rng);
  return out;
}

Instance MakeInstance(int length, std::mt19937& rng) {
  std::uniform_int_distribution<int> token(5, 30000);
  Instance in;
  for (int i = 0; i < length; ++i) {
    in.input_ids.push_back(i == 0 ? 101 : token(rng));
    in.segment_ids.push_back(i < length / 2 ? 0 : 1);
  }
  int masked = std::max(1, static_cast<int>(0.15 * length));
  for (int m = 0; m < masked && m + 1 < length; ++m) {
    in.masked_positions.push_back(m + 1);
    in.masked_ids.push_back(token(rng));
  }
  return in;
}

struct Result {
  double seconds_per_step;
  double real_tokens;
};

Result Time(pbert::model::BertForPreTraining& model, const pbert::data::PackedBatch& batch,
            const at::Tensor& mask, int steps) {
  auto step = [&] {
    model->zero_grad();
    auto sums = pbert::model::ComputeSums(model(batch, mask), batch);
    pbert::model::PretrainingLoss(sums, pbert::model::MlmLossMode::kPerToken,
                                  pbert::model::TotalsOf(sums))
        .backward();
  };
  step();  // warm-up
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {seconds / steps, (batch.sequence_ids > 0).sum().item<double>()};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 10, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  if (threads > 0)
    at::set_num_threads(threads);
  else
    at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  torch::manual_seed(0);
  auto options = pbert::model::BertOptions()
                     .hidden_size(256)
                     .num_layers(4)
                     .num_heads(4)
                     .intermediate_size(1024)
                     .max_position_embeddings(kMaxLen);
  pbert::model::BertForPreTraining model(options);

  std::mt19937 rng(1);
  // Enough sequences for kRows packed rows, and the first kRows for the
  // padded batch.
  std::vector<Instance> pool;
  for (int l : SampleLengths(kRows * kDepth, rng)) pool.push_back(MakeInstance(l, rng));
  std::vector<std::vector<const Instance*>> padded_rows, packed_rows;
  for (int r = 0; r < kRows; ++r) padded_rows.push_back({&pool[r]});
  std::vector<uint32_t> lengths;
  for (const auto& in : pool) lengths.push_back(in.length());
  auto histogram = *pbert::data::HistogramOf(lengths, kMaxLen);
  auto plan = pbert::data::PackLpfhp(histogram, {kMaxLen, kDepth, 0});
  // Deal the pool into the plan's rows, longest strategies first, until kRows.
  std::vector<std::vector<const Instance*>> by_length(kMaxLen + 1);
  for (const auto& in : pool) by_length[in.length()].push_back(&in);
  for (const auto& s : plan.strategies) {
    for (uint64_t c = 0; c < s.count && static_cast<int>(packed_rows.size()) < kRows; ++c) {
      std::vector<const Instance*> row;
      for (int l : s.lengths) {
        row.push_back(by_length[l].back());
        by_length[l].pop_back();
      }
      packed_rows.push_back(row);
    }
  }
  // The same MLM slots per row for both: as many as the packed rows need.
  auto packed = *pbert::data::MakeBatch(packed_rows, {kMaxLen, kDepth, 0});
  auto padded = *pbert::data::MakeBatch(
      padded_rows, {kMaxLen, kDepth, static_cast<int>(packed.mlm_positions.size(1))});
  auto key_mask = torch::zeros({kRows, 1, 1, kMaxLen})
                      .masked_fill_((padded.sequence_ids == 0).view({kRows, 1, 1, kMaxLen}),
                                    -std::numeric_limits<float>::infinity());

  std::printf(
      "# model benchmark: BERT hidden %lld, %lld layers, batch [%d,%d], %lld MLM slots per row, "
      "%d threads, %d steps\n\n",
      static_cast<long long>(options.hidden_size()), static_cast<long long>(options.num_layers()),
      kRows, kMaxLen, static_cast<long long>(packed.mlm_positions.size(1)), at::get_num_threads(),
      steps);
  Result key = Time(model, padded, key_mask, steps);
  Result block = Time(model, padded, {}, steps);
  Result pack = Time(model, packed, {}, steps);
  std::printf("%-20s %12s %14s %16s\n", "batch", "s/step", "real tokens", "real tokens/s");
  for (auto [name, r] : {std::pair{"padded, key mask", key}, std::pair{"padded, block mask", block},
                         std::pair{"packed, block mask", pack}}) {
    std::printf("%-20s %12.4f %14.0f %16.0f\n", name, r.seconds_per_step, r.real_tokens,
                r.real_tokens / r.seconds_per_step);
  }
  std::printf("\nblock-diagonal mask cost: %+.1f%% time per step (padded, block vs key mask)\n",
              100.0 * (block.seconds_per_step / key.seconds_per_step - 1.0));
  std::printf(
      "packing speed-up: %.2fx real tokens/s (packed, block vs padded, key mask)\n",
      (pack.real_tokens / pack.seconds_per_step) / (key.real_tokens / key.seconds_per_step));
  return 0;
}
