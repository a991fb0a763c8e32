// Model benchmark: training-step throughput on CPU for batches of the same
// shape [B,S], side by side in one run:
//   padded, key mask  one sequence per row, the usual [B,1,1,S] padding mask
//   padded, block     one sequence per row, our block-diagonal [B,1,S,S] mask
//   packed, block     rows packed with up to D sequences (lpfhp plan)
//   packed, bf16      the same under bf16 autocast (fp32 master weights)
// All in the dense layout (model.attention: dense, the paper's formulation).
// The first two give the cost of the block-diagonal mask; the last the gain
// of packing, in real (non-padding) tokens per second.
//
//   build/bench/model [--steps N] [--threads T]   (N/2 rounds, at least 3)
#include <torch/torch.h>

#include <algorithm>
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
#include "model/precision.h"
#include "tests/source_paths.h"
#include "tasks/pretraining.h"
#include "train/inputs.h"

namespace {

using pbert::data::Instance;

constexpr int kMaxLen = 128;
constexpr int kRows = 16;
constexpr int kDepth = 8;

// Lengths like BERT's Wikipedia data, scaled from 512 to kMaxLen tokens.
std::vector<int> SampleLengths(int count, std::mt19937& rng) {
  auto h = pbert::data::ReadHistogramFile(
      std::string(pbert::testing::SharedDataDir()) + "/histogram_wikipedia_512.txt", 512);
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

struct Case {
  const char* name;
  const pbert::data::PackedBatch* batch;
  at::Tensor mask;  // defined: the dense layout with this mask
  pbert::model::Precision precision;
  std::vector<double> seconds;  // per step, one entry per round
  pbert::model::Inputs inputs;  // made once, as the loader makes them ahead of the step
};

// The case's inputs in the dense layout: with the block-diagonal mask of
// its sequences, or with its own mask.
void MakeInputs(const pbert::model::BertForPreTraining& model, Case& c) {
  pbert::model::BertOptions options = model->options;
  options.attention(pbert::model::AttentionKind::kDense);
  const auto plan = pbert::model::InputPlan::For(options, c10::kCPU, c.precision, torch::kFloat);
  c.inputs = pbert::train::MakeInputs(*c.batch, plan);
  pbert::tasks::AddPretrainingInputs(*c.batch, plan, &c.inputs);
  if (c.mask.defined()) c.inputs.attention = pbert::model::DenseMask{c.mask};
}

// One training step: forward (under autocast if asked), losses, backward.
void Step(pbert::model::BertForPreTraining& model, const Case& c) {
  model->zero_grad();
  pbert::model::PretrainingLogits logits;
  {
    pbert::model::AutocastGuard autocast(c.precision, c10::DeviceType::CPU);
    logits = model(c.inputs);
  }
  auto sums = pbert::model::ComputeSums(logits, pbert::tasks::PretrainingTargetsOf(c.inputs));
  pbert::model::PretrainingLoss(sums, pbert::model::MlmLossMode::kPerToken,
                                pbert::tasks::PretrainingTotals(*c.batch))
      .backward();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  std::vector<uint16_t> lengths;
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
      "%d threads, medians of %d rounds of 2 steps\n\n",
      static_cast<long long>(options.hidden_size()), static_cast<long long>(options.num_layers()),
      kRows, kMaxLen, static_cast<long long>(packed.mlm_positions.size(1)), at::get_num_threads(),
      std::max(3, steps / 2));
  // The cases take turns, round after round, so that drift in the machine's
  // speed hits them alike; each reports its median round.
  std::vector<Case> cases = {
      {"padded, key mask", &padded, key_mask, pbert::model::Precision::kFp32, {}, {}},
      {"padded, block mask", &padded, {}, pbert::model::Precision::kFp32, {}, {}},
      {"packed, block mask", &packed, {}, pbert::model::Precision::kFp32, {}, {}},
      {"packed, block, bf16 amp", &packed, {}, pbert::model::Precision::kBf16, {}, {}},
  };
  for (Case& c : cases) MakeInputs(model, c);
  for (Case& c : cases) Step(model, c);  // warm-up
  const int rounds = std::max(3, steps / 2);
  for (int round = 0; round < rounds; ++round) {
    for (Case& c : cases) {
      auto start = std::chrono::steady_clock::now();
      Step(model, c);
      Step(model, c);
      c.seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 2);
    }
  }
  std::printf("%-24s %12s %14s %16s\n", "batch", "s/step", "real tokens", "real tokens/s");
  std::vector<double> step_time, rate;
  for (const Case& c : cases) {
    double t = Median(c.seconds);
    double tokens = (c.batch->sequence_ids > 0).sum().item<double>();
    step_time.push_back(t);
    rate.push_back(tokens / t);
    std::printf("%-24s %12.4f %14.0f %16.0f\n", c.name, t, tokens, tokens / t);
  }
  std::printf("\nblock-diagonal mask cost: %+.1f%% time per step (padded, block vs key mask)\n",
              100.0 * (step_time[1] / step_time[0] - 1.0));
  std::printf("packing speed-up: %.2fx real tokens/s (packed, block vs padded, key mask)\n",
              rate[2] / rate[0]);
  std::printf("bf16 autocast vs fp32: %.2fx time per step (packed)\n", step_time[3] / step_time[2]);
  return 0;
}
