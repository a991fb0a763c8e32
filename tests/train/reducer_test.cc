// Gradients reduced while backward runs (distributed/gradient_reducer.h)
// against the same buckets reduced after backward, and against one process
// accumulating every rank's micro-batches, on 2 and 3 Gloo ranks on
// loopback, over steps with accumulation and a step in which the last rank
// has no micro-batch at all.
//
// The model is the tiny BERT in double precision, so that the differences
// are rounding alone: the ranks' sums add the same terms as one process in
// another order, each gradient a sum of under kTerms terms of at most the
// largest gradient entry (tests/train/step_test.cc derives the bound), and
// LAMB turns a gradient error dg into at most lr * dg / eps_lamb per step.
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "distributed/communicator.h"
#include "gtest/gtest.h"
#include "model/bert.h"
#include "tests/train/model_batches.h"
#include "tests/spawn_ranks.h"
#include "train/step.h"
#include "train/trainee.h"

namespace pbert::distributed {
namespace {

using train::Trainee;
using train::TraineeOptions;
using train::TrainStep;
using Rows = std::vector<std::vector<const data::Instance*>>;

constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kTerms = 1 << 16;  // > 48 sequences x 30 tokens x FFN width 64
constexpr double kLr = 1e-2;
constexpr int kPerRank = 2;  // micro-batches per rank per step
constexpr int kSteps = 3;

std::unique_ptr<Trainee> MakeTrainee(distributed::Communicator& communicator, bool overlap) {
  TraineeOptions options;
  options.bert = model::testing::TinyOptions();
  options.lamb = optim::LambOptions(kLr);
  options.seed = 21;
  options.dtype = torch::kDouble;
  options.overlap = overlap;
  options.bucket_bytes = 4096;  // many buckets of the tiny model's 0.2 MB
  return std::move(*Trainee::Make(options, communicator));
}

double MaxDifference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Checks `trainee`'s gradients and weights against `reference`'s after
// step `step`.
void ExpectClose(Trainee& trainee, Trainee& reference, int step, const char* what) {
  double largest = 0;
  for (const auto& p : reference.model().parameters()) {
    largest = std::max(largest, p.grad().abs().max().item<double>());
  }
  const double dg = kTerms * kEps * largest;
  auto a = trainee.model().named_parameters(), b = reference.model().named_parameters();
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_LE(MaxDifference(a[k].value().grad(), b[k].value().grad()), dg)
        << what << ": gradient of " << a[k].key() << " at step " << step;
    EXPECT_LE(MaxDifference(a[k].value(), b[k].value()),
              (step + 1) * kLr * dg / optim::LambOptions().eps())
        << what << ": " << a[k].key() << " after step " << step;
  }
}

// One rank of the group: every rank makes the same rows; micro-batch g of a
// step is rank g / kPerRank's. In the last step the last rank has none.
TEST(ReducerWorker, OverlappedPlainAndAlone) {
  if (std::getenv("PBERT_REDUCER_WORKER") == nullptr) {
    GTEST_SKIP() << "runs only as a rank of ReducerTest.*";
  }
  auto env = distributed::EnvironmentFrom();
  ASSERT_TRUE(env.ok()) << env.status();
  auto group = distributed::Communicator::Create(*env, distributed::Backend::kGloo,
                                                  std::chrono::seconds(60));
  ASSERT_TRUE(group.ok()) << group.status();
  auto alone = distributed::Communicator::Single();
  const int ranks = env->world_size, rank = env->rank;
  auto instances = model::testing::RandomInstances(16 * ranks * kPerRank, 6, 30, 97, 7);
  Rows rows = model::testing::PackInOrder(instances, 2, 64);
  auto overlapped = MakeTrainee(**group, true);
  auto plain = MakeTrainee(**group, false);
  auto reference = MakeTrainee(*alone, true);
  EXPECT_GT(overlapped->reducer().buckets(), 3);
  size_t next = 0;
  for (int step = 0; step < kSteps; ++step) {
    const int micro = step + 1 < kSteps ? ranks * kPerRank : (ranks - 1) * kPerRank;
    std::vector<data::PackedBatch> all, mine;
    for (int g = 0; g < micro; ++g) {
      Rows part(rows.begin() + static_cast<int64_t>(next),
                rows.begin() + static_cast<int64_t>(next + 2));
      next += 2;
      all.push_back(*data::MakeBatch(part, {64, 2, 0}));
      if (g / kPerRank == rank) mine.push_back(all.back());
    }
    auto a = TrainStep(*overlapped, **group, mine, kLr, {});
    auto b = TrainStep(*plain, **group, mine, kLr, {});
    auto c = TrainStep(*reference, *alone, all, kLr, {});
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    ASSERT_TRUE(a->applied && b->applied && c->applied);
    EXPECT_EQ(a->metrics.sequences, c->metrics.sequences) << "step " << step;
    EXPECT_NEAR(a->metrics.loss, c->metrics.loss, kTerms * kEps * c->metrics.loss);
    EXPECT_NEAR(a->grad_norm, c->grad_norm, kTerms * kEps * c->grad_norm);
    ExpectClose(*overlapped, *plain, step, "overlapped against plain");
    ExpectClose(*overlapped, *reference, step, "overlapped against one process");
  }
  (*group)->Barrier();
}

TEST(ReducerTest, TwoRanks) { testing::RunRanks("ReducerWorker.*", "PBERT_REDUCER_WORKER", 2); }

TEST(ReducerTest, ThreeRanks) { testing::RunRanks("ReducerWorker.*", "PBERT_REDUCER_WORKER", 3); }

}  // namespace
}  // namespace pbert::distributed
