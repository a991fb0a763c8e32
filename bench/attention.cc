// bench/attention: self-attention forward and backward on packed rows, in
// the ways LibTorch 1.13 offers on CPU, the cases taking turns over rounds:
//
//   hand-written  matmul, + block-diagonal mask, softmax, matmul
//   sdpa          at::_scaled_dot_product_attention with the same additive mask
//                 (model/attention.cc's dense layout)
//   masked-softmax  matmul, at::_masked_softmax with a boolean mask, matmul
//   blocked       each sequence within its own block (model/attention.cc's
//                 blocked layout, also through sdpa)
//   varlen        the same over the real tokens end to end (the varlen
//                 layout without FlashAttention, as on a CPU)
//
// for rows of S tokens holding 1, 2, 4 or 8 sequences of equal length (no
// padding: the layouts differ only in how attention skips the other
// sequences), and prints the median time, the speed against hand-written,
// and the largest difference of each output from the hand-written one.
//
//   build/bench/attention [--rounds 7] [--threads 2] [--len 512] [--rows 4]
#include "model/attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "data/batch.h"
#include "train/inputs.h"

namespace {

using pbert::model::AttentionLayout;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  int rounds = 7, threads = 2, S = 512, B = 4;
  const int64_t hidden = 256, heads = 4, d = hidden / heads;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int value = std::stoi(argv[i + 1]);
    if (flag == "--rounds") rounds = value;
    else if (flag == "--threads") threads = value;
    else if (flag == "--len") S = value;
    else if (flag == "--rows") B = value;
  }
  at::set_num_threads(threads);
  torch::manual_seed(1);
  std::printf("attention forward + backward, %d rows of %d tokens, hidden %lld, %lld heads, %d threads\n\n",
              B, S, static_cast<long long>(hidden), static_cast<long long>(heads), threads);
  std::printf("%-7s %-15s %10s %9s %14s\n", "depth", "variant", "median ms", "speed", "max |diff|");
  for (int depth : {1, 2, 4, 8}) {
    // Rows of `depth` sequences of S / depth tokens.
    std::vector<pbert::data::Instance> instances(static_cast<size_t>(B) * depth);
    for (auto& in : instances) {
      in.input_ids.assign(S / depth, 5);
      in.segment_ids.assign(S / depth, 0);
    }
    std::vector<std::vector<const pbert::data::Instance*>> rows(B);
    for (size_t i = 0; i < instances.size(); ++i) rows[i / depth].push_back(&instances[i]);
    auto batch = pbert::data::MakeBatch(rows, {S, depth, 0});
    if (!batch.ok()) {
      std::fprintf(stderr, "%s\n", std::string(batch.status().message()).c_str());
      return 1;
    }
    // Each layout as the loader makes it (train/inputs.h), on the CPU in fp32.
    auto layout = [&](pbert::model::AttentionKind kind) {
      pbert::model::InputPlan plan;
      plan.attention = kind;
      return pbert::train::MakeInputs(*batch, plan).attention;
    };
    const AttentionLayout dense = layout(pbert::model::AttentionKind::kDense);
    const AttentionLayout blocked = layout(pbert::model::AttentionKind::kBlocked);
    const AttentionLayout varlen = layout(pbert::model::AttentionKind::kVarlen);
    at::Tensor allowed = std::get<pbert::model::DenseMask>(dense).mask.eq(0);  // [B,1,S,S]
    at::Tensor disallowed = allowed.logical_not().expand({B, heads, S, S}).contiguous();
    auto q = torch::randn({B, S, hidden}, torch::requires_grad());
    auto k = torch::randn({B, S, hidden}, torch::requires_grad());
    auto v = torch::randn({B, S, hidden}, torch::requires_grad());
    auto split = [&](const at::Tensor& x) { return x.view({B, S, heads, d}).transpose(1, 2); };
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<std::pair<std::string, std::function<at::Tensor()>>> variants = {
        {"hand-written",
         [&] {
           auto scores = at::matmul(split(q), split(k).transpose(-1, -2)) * scale +
                         std::get<pbert::model::DenseMask>(dense).mask;
           return at::matmul(at::softmax(scores, -1), split(v))
               .transpose(1, 2)
               .reshape({B, S, hidden});
         }},
        {"sdpa", [&] { return pbert::model::Attend(q, k, v, heads, dense, 0.0); }},
        {"masked-softmax",
         [&] {
           auto scores = at::matmul(split(q), split(k).transpose(-1, -2)) * scale;
           // mask_type 2: a boolean mask of the scores' own shape.
           auto probs = at::_masked_softmax(scores, disallowed, -1, 2);
           return at::matmul(probs, split(v)).transpose(1, 2).reshape({B, S, hidden});
         }},
        {"blocked", [&] { return pbert::model::Attend(q, k, v, heads, blocked, 0.0); }},
        {"varlen",
         [&] {
           auto tokens = [&](const at::Tensor& x) { return x.reshape({B * S, hidden}); };
           return pbert::model::Attend(tokens(q), tokens(k), tokens(v), heads, varlen, 0.0)
               .view({B, S, hidden});
         }},
    };
    at::Tensor reference;
    {
      torch::NoGradGuard no_grad;
      reference = variants[0].second();
    }
    std::vector<std::vector<double>> times(variants.size());
    std::vector<double> diffs(variants.size());
    std::vector<bool> failed(variants.size(), false);
    for (int round = 0; round <= rounds; ++round) {
      for (size_t i = 0; i < variants.size(); ++i) {
        if (failed[i]) continue;
        auto start = std::chrono::steady_clock::now();
        at::Tensor out;
        try {
          out = variants[i].second();
          out.sum().backward();
        } catch (const std::exception& e) {
          // Not every path exists with a backward on CPU in every LibTorch.
          failed[i] = true;
          std::string what = e.what();
          std::printf("%-7d %-15s not available: %s\n", depth, variants[i].first.c_str(),
                      what.substr(0, what.find('\n')).c_str());
          continue;
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              start)
                        .count();
        q.mutable_grad().reset();
        k.mutable_grad().reset();
        v.mutable_grad().reset();
        if (round > 0) times[i].push_back(ms);  // round 0 warms up
        diffs[i] = (out.detach() - reference).abs().max().item<double>();
      }
    }
    const double base = Median(times[0]);
    for (size_t i = 0; i < variants.size(); ++i) {
      if (failed[i]) continue;
      std::printf("%-7d %-15s %10.2f %8.2fx %14.2e\n", depth, variants[i].first.c_str(),
                  Median(times[i]), base / Median(times[i]), diffs[i]);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
