// The multi-tensor launches' plan (kernels/multi_tensor.h), which the fused
// LAMB step and gradient norm launch through: every chunk of every
// non-empty tensor in exactly one block, in order, within each launch's
// limits, a tensor cut between launches going on in the next one's first
// slot.
#include "kernels/multi_tensor.h"

#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pbert::kernels {
namespace {

TEST(MultiTensorTest, EveryChunkIsPlannedOnceWithinTheLimits) {
  constexpr int kTensors = 4, kBlocks = 8;
  constexpr int64_t kChunk = 10;
  std::mt19937 random(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> sizes(1 + random() % 30);
    for (int64_t& n : sizes) {
      const int kind = static_cast<int>(random() % 4);
      n = kind == 0 ? 0 : kind == 1 ? 1 + random() % 10 : kind == 2 ? 1 + random() % 40
                                                                      : 1 + random() % 200;
    }
    std::vector<std::pair<int, int>> seen;  // (tensor, chunk) in launch order
    int launches = 0;
    int carried = -1;  // the tensor the last launch left unfinished
    const int result = ForEachPlan<kTensors, kBlocks>(
        sizes, kChunk, [&](const MultiTensorPlan<kTensors, kBlocks>& plan) {
          ++launches;
          EXPECT_GE(plan.slots, 1);
          EXPECT_LE(plan.slots, kTensors);
          EXPECT_GE(plan.blocks, 1);
          EXPECT_LE(plan.blocks, kBlocks);
          if (carried >= 0) EXPECT_EQ(plan.tensor[0], carried) << "trial " << trial;
          for (int s = 0; s < plan.slots; ++s) {
            EXPECT_EQ(plan.n[s], sizes[plan.tensor[s]]);
            EXPECT_GT(plan.n[s], 0) << "an empty tensor was planned";
          }
          for (int b = 0; b < plan.blocks; ++b) {
            EXPECT_LT(plan.block_slot[b], plan.slots);
            seen.emplace_back(plan.tensor[plan.block_slot[b]], plan.block_chunk[b]);
          }
          const auto& last = seen.back();
          carried = (last.second + 1) * kChunk < sizes[last.first] ? last.first : -1;
          return 0;
        });
    EXPECT_EQ(result, 0);
    std::vector<std::pair<int, int>> want;
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (int64_t c = 0; c * kChunk < sizes[i]; ++c) want.emplace_back(static_cast<int>(i), c);
    }
    EXPECT_EQ(seen, want) << "trial " << trial;
    EXPECT_EQ(carried, -1);
    // As few launches as the limits allow: each full but the last, or cut
    // by its tensors.
    int blocks = static_cast<int>(want.size());
    EXPECT_GE(launches, (blocks + kBlocks - 1) / kBlocks);
  }
}

TEST(MultiTensorTest, TheFirstFailedLaunchEndsThePlanWithItsResult) {
  const std::vector<int64_t> sizes(20, 25);
  int calls = 0;
  const int result = ForEachPlan<4, 8>(sizes, 10, [&](const MultiTensorPlan<4, 8>&) {
    return ++calls == 2 ? 7 : 0;
  });
  EXPECT_EQ(result, 7);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ((ForEachPlan<4, 8>(std::vector<int64_t>{0, 0}, 10,
                               [](const MultiTensorPlan<4, 8>&) { return 1; })),
            0)
      << "nothing to launch";
}

}  // namespace
}  // namespace pbert::kernels
