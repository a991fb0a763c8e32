// model/dropout.h against what dropout must be: the share of zeros, the
// scaling, the gradient through the same mask, reproducibility from
// torch::manual_seed for any thread count, and the identity in evaluation.
#include "model/dropout.h"

#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace pbert::model {
namespace {

TEST(DropoutTest, ZeroesTheShareAskedForAndScalesTheRest) {
  torch::manual_seed(3);
  const int64_t n = 1 << 20;
  for (double p : {0.1, 0.5, 0.9}) {
    at::Tensor x = torch::ones({n});
    at::Tensor y = Dropout(x, p, /*training=*/true);
    const double zeros = y.eq(0).sum().item<double>() / n;
    // Binomial: the standard deviation of the share is sqrt(p(1-p)/n) < 5e-4.
    EXPECT_NEAR(zeros, p, 3e-3) << "p " << p;
    at::Tensor kept = y.masked_select(y.ne(0));
    EXPECT_NEAR(kept.min().item<double>(), 1.0 / (1.0 - p), 1e-6);
    EXPECT_NEAR(kept.max().item<double>(), 1.0 / (1.0 - p), 1e-6);
    EXPECT_NEAR(y.mean().item<double>(), 1.0, 5e-3) << "the expectation is kept";
  }
}

TEST(DropoutTest, NeighboursAreNotCorrelated) {
  torch::manual_seed(4);
  at::Tensor keep = Dropout(torch::ones({1 << 20}), 0.5, true).ne(0).to(torch::kDouble);
  // Pairs share a hash: adjacent elements, and the two halves of each pair.
  at::Tensor a = keep.slice(0, 0, -1), b = keep.slice(0, 1);
  const double both = (a * b).mean().item<double>();
  EXPECT_NEAR(both, 0.25, 3e-3);
}

TEST(DropoutTest, GradientGoesThroughTheSameMask) {
  torch::manual_seed(5);
  at::Tensor x = torch::randn({4, 7, 33}, torch::requires_grad());
  at::Tensor y = Dropout(x, 0.3, true);
  at::Tensor g = torch::randn_like(y);
  y.backward(g);
  at::Tensor kept = y.ne(0);
  const double scale = 1.0 / 0.7;
  EXPECT_TRUE(torch::allclose(y, x.detach() * kept * scale, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(x.grad(), g * kept * scale, 1e-6, 1e-6));
}

TEST(DropoutTest, NonContiguousInputAndBf16) {
  torch::manual_seed(6);
  at::Tensor x = torch::randn({16, 32}).t();  // not contiguous
  at::Tensor y = Dropout(x, 0.2, true);
  EXPECT_EQ(y.sizes(), x.sizes());
  at::Tensor kept = y.ne(0);
  EXPECT_TRUE(torch::allclose(y, x * kept / 0.8, 1e-6, 1e-6));
  at::Tensor h = torch::randn({1000}).to(torch::kBFloat16);
  at::Tensor z = Dropout(h, 0.2, true);
  EXPECT_EQ(z.scalar_type(), torch::kBFloat16);
}

TEST(DropoutTest, SameSeedSameMaskForAnyThreadCount) {
  const int before = at::get_num_threads();
  at::Tensor x = torch::ones({300001});
  at::set_num_threads(1);
  torch::manual_seed(7);
  at::Tensor one = Dropout(x, 0.1, true);
  at::set_num_threads(2);
  torch::manual_seed(7);
  at::Tensor two = Dropout(x, 0.1, true);
  at::Tensor next = Dropout(x, 0.1, true);
  at::set_num_threads(before);
  EXPECT_TRUE(one.equal(two));
  EXPECT_FALSE(two.equal(next)) << "each call draws a new mask";
}

// A captured micro-batch's fused-layer masks come from seeds in slots that
// are refilled before each replay (train/captured_step.h): the slots must
// receive, in order, the seeds that as many eager draws from the same
// generator state give, and leave the generator where those draws leave it.
TEST(DropoutTest, SeedSlotsReceiveTheSeedsOfAsManyEagerDraws) {
  DropoutSeedSlots slots(torch::kCPU, 8);
  torch::manual_seed(11);
  std::vector<uint64_t> eager;
  {
    const DropoutSeedSlots::Recording recording(slots);
    const uint64_t* first = nullptr;
    for (int i = 0; i < 5; ++i) {
      const kernels::DropoutBits bits = DrawDropout(0.1);
      if (i == 0) first = bits.seed_slot;
      ASSERT_NE(bits.seed_slot, nullptr);
      EXPECT_EQ(bits.seed_slot, first + i) << "draw " << i << " takes the next slot";
      eager.push_back(bits.seed);
    }
  }
  EXPECT_EQ(slots.used(), 5);
  const kernels::DropoutBits after = DrawDropout(0.1);
  EXPECT_EQ(after.seed_slot, nullptr) << "outside a recording no slot is handed out";
  torch::manual_seed(11);
  slots.Refill();
  const at::Tensor values = slots.Values();
  ASSERT_EQ(values.numel(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(static_cast<uint64_t>(values[i].item<int64_t>()), eager[i]) << "slot " << i;
  }
  EXPECT_EQ(DrawDropout(0.1).seed, after.seed)
      << "the refill leaves the generator where the eager draws left it";
  // More draws than slots: an error, not a write past the end.
  DropoutSeedSlots two(torch::kCPU, 2);
  const DropoutSeedSlots::Recording recording(two);
  (void)DrawDropout(0.1);
  (void)DrawDropout(0.1);
  EXPECT_THROW((void)DrawDropout(0.1), c10::Error);
}

TEST(DropoutTest, IdentityInEvaluationOrAtZero) {
  at::Tensor x = torch::randn({5, 5});
  EXPECT_TRUE(Dropout(x, 0.5, false).equal(x));
  EXPECT_TRUE(Dropout(x, 0.0, true).equal(x));
}

}  // namespace
}  // namespace pbert::model
