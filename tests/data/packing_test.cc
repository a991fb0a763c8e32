#include <random>

#include "data/packing/algorithms.h"
#include "data/packing/report.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace pbert::data {
namespace {

LengthHistogram Shared(const std::string& name, int max_len) {
  auto h = ReadHistogramFile(testing::SharedData(name), max_len);
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *h : LengthHistogram(max_len);
}

PackingReport PackReport(const std::string& algorithm, const LengthHistogram& h, int depth) {
  PackingOptions options{h.max_len(), depth, 1};
  auto run = RunPacking(algorithm, h, options);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? run->report : PackingReport{};
}

// Published results (the paper's Table 1 and the authors' code), see
// ../shared/data/README.md.
struct Published {
  const char* histogram;
  int max_len;
  const char* algorithm;
  int depth;
  double efficiency_percent;  // as published, with its rounding
  double tolerance_percent;   // half a unit of the last published digit
  double speedup;
  uint64_t rows;  // 0 when not published
};

class PublishedTest : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedTest, ReproducesThePublishedEfficiency) {
  const Published& p = GetParam();
  PBERT_REQUIRE_SHARED(p.histogram);
  PackingReport r = PackReport(p.algorithm, Shared(p.histogram, p.max_len), p.depth);
  EXPECT_NEAR(100.0 * r.efficiency, p.efficiency_percent, p.tolerance_percent);
  if (p.speedup > 0) EXPECT_NEAR(r.packing_factor, p.speedup, 5e-5);
  if (p.rows > 0) EXPECT_EQ(r.rows, p.rows);
}

INSTANTIATE_TEST_SUITE_P(
    Paper, PublishedTest,
    ::testing::Values(
        Published{"histogram_wikipedia_512.txt", 512, "none", 1, 50.0, 0.05, 1.0, 16'279'552},
        Published{"histogram_wikipedia_512.txt", 512, "spfhp", 2, 80.5, 0.05, 1.6116, 0},
        Published{"histogram_wikipedia_512.txt", 512, "spfhp", 3, 89.44, 0.005, 1.7900, 0},
        Published{"histogram_wikipedia_512.txt", 512, "spfhp", 4, 93.9, 0.05, 1.8801, 0},
        Published{"histogram_wikipedia_512.txt", 512, "spfhp", 8, 98.9, 0.05, 1.9794, 0},
        Published{"histogram_wikipedia_512.txt", 512, "spfhp", 12, 99.604, 0.0005, 1.99340,
                  8'166'708},
        Published{"histogram_wikipedia_512.txt", 512, "lpfhp", 12, 99.8129, 0.00005, 1.99758, 0},
        Published{"histogram_squad_384.txt", 384, "spfhp", 12, 97.5466, 0.00005, 2.17732, 0},
        Published{"histogram_squad_384.txt", 384, "lpfhp", 12, 97.7386, 0.00005, 0, 0}),
    [](const ::testing::TestParamInfo<Published>& info) {
      std::string name = info.param.histogram;
      name = name.substr(10, name.find('.') - 10);  // "histogram_" .. ".txt"
      return name + "_" + info.param.algorithm + "_depth" + std::to_string(info.param.depth);
    });

TEST(PackingTargetsTest, NnlshpAtDepthThreeBeatsThePaper) {
  PBERT_REQUIRE_SHARED("histogram_wikipedia_512.txt");
  PackingReport r = PackReport("nnlshp", Shared("histogram_wikipedia_512.txt", 512), 3);
  EXPECT_GE(r.efficiency, 0.9975);
  EXPECT_LE(r.rows, 8'155'059u);  // the paper's NNLSHP rows
  EXPECT_LE(r.depth_used, 3);
}

TEST(PackingTargetsTest, LpIsWithinATenthOfAPercentOfTheBound) {
  PBERT_REQUIRE_SHARED("histogram_wikipedia_512.txt");
  LengthHistogram h = Shared("histogram_wikipedia_512.txt", 512);
  PackingReport r = PackReport("lp", h, 8);
  EXPECT_GE(r.efficiency, 0.999);
  // Within a few rows of the best plan any algorithm could find at depth 8.
  EXPECT_GE(r.rows, r.lp_bound_rows);
  EXPECT_LE(r.rows, r.lp_bound_rows + 50);
  EXPECT_LE(static_cast<double>(r.rows), 1.001 * static_cast<double>(r.lower_bound_rows));
  EXPECT_LE(r.depth_used, 8);
  auto plan = PackLp(h, {512, 8, 0});
  ASSERT_TRUE(plan.ok());
  const double lp_bound = plan->proven_bound;
  // The LP optimum bounds every plan from below, and tokens/S bounds it.
  EXPECT_GE(lp_bound, static_cast<double>(h.tokens()) / 512 - 1e-6);
  EXPECT_LE(lp_bound, static_cast<double>(plan->rows()));
}

// Places one sequence at a time: the textbook first-fit decreasing.
PackingPlan NaiveFfd(const LengthHistogram& h, const PackingOptions& o) {
  std::vector<std::vector<int>> rows;
  std::vector<int> space;
  for (int l = h.max_len(); l >= 1; --l) {
    for (uint64_t k = 0; k < h.counts[l]; ++k) {
      size_t r = 0;
      while (r < rows.size() && (space[r] < l || static_cast<int>(rows[r].size()) >= o.max_depth)) {
        ++r;
      }
      if (r == rows.size()) {
        rows.emplace_back();
        space.push_back(o.max_len);
      }
      rows[r].push_back(l);
      space[r] -= l;
    }
  }
  StrategyCounter counter;
  for (auto& row : rows) counter.Add(row, 1);
  return counter.ToPlan(o.max_len);
}

LengthHistogram RandomHistogram(std::mt19937& rng, int max_len, int sequences) {
  LengthHistogram h(max_len);
  // A skewed mix like real data: many short, a bump of full-length ones.
  std::geometric_distribution<int> shortish(4.0 / max_len);
  std::bernoulli_distribution full(0.1);
  for (int i = 0; i < sequences; ++i) {
    int l = full(rng) ? max_len : 1 + std::min(shortish(rng), max_len - 1);
    ++h.counts[l];
  }
  return h;
}

TEST(FirstFitDecreasingTest, EqualsPlacingOneSequenceAtATime) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    int max_len = 16 + trial * 7;
    int depth = 1 + trial % 6;
    LengthHistogram h = RandomHistogram(rng, max_len, 300 + 40 * trial);
    PackingOptions o{max_len, depth, 0};
    PackingPlan fast = PackFfd(h, o);
    PackingPlan naive = NaiveFfd(h, o);
    ASSERT_EQ(fast.strategies.size(), naive.strategies.size()) << "trial " << trial;
    for (size_t i = 0; i < fast.strategies.size(); ++i) {
      EXPECT_EQ(fast.strategies[i].lengths, naive.strategies[i].lengths);
      EXPECT_EQ(fast.strategies[i].count, naive.strategies[i].count);
    }
  }
}

TEST(PackingAlgorithmsTest, EveryAlgorithmPlacesEverySequenceOnce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 12; ++trial) {
    int max_len = 32 << (trial % 4);  // 32 .. 256
    int depth = 1 + trial % 8;
    LengthHistogram h = RandomHistogram(rng, max_len, 2000 + 500 * trial);
    for (const PackingAlgorithm& a : PackingAlgorithms()) {
      auto run = RunPacking(a.name, h, {max_len, depth, static_cast<uint64_t>(trial)});
      ASSERT_TRUE(run.ok()) << a.name << ": " << run.status();  // RunPacking checks the plan
      EXPECT_GE(run->report.rows, h.LowerBoundRows()) << a.name;
      EXPECT_LE(run->report.depth_used, depth) << a.name;
      if (std::string(a.name) != "none") {
        EXPECT_LE(run->report.rows, PackNone(h, {max_len, depth, 0}).rows()) << a.name;
      }
    }
  }
}

TEST(PackingAlgorithmsTest, LpIsNeverWorseThanItsStartingHeuristic) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 10; ++trial) {
    LengthHistogram h = RandomHistogram(rng, 128, 5000);
    PackingOptions o{128, 2 + trial % 5, 0};
    auto lp = PackLp(h, o);
    ASSERT_TRUE(lp.ok());
    EXPECT_LE(lp->rows(), PackLpfhp(h, o).rows() + 2 * static_cast<uint64_t>(o.max_depth));
  }
}

TEST(RepairPlanTest, EmptiesMissingSlotsAndPlacesLeftovers) {
  LengthHistogram h(10);
  h.counts[3] = 4;
  h.counts[6] = 1;
  h.counts[9] = 2;
  // Plans 3 rows of [6,3] (two 6s too many, one 3 short) and nothing of 9.
  PackingPlan approximate{10, {{{6, 3}, 3}}};
  PackingOptions o{10, 3, 0};
  PackingPlan plan = RepairPlan(approximate, h, o);
  ASSERT_TRUE(CheckPlan(plan, h, o).ok()) << CheckPlan(plan, h, o);
  // Two rows lose their 6 and become [3]; the spare 3 joins the first of
  // them, and each 9 needs a new row: [6,3] [3,3] [3] [9] [9].
  EXPECT_EQ(plan.rows(), 5u);
  EXPECT_EQ(plan.strategies.size(), 4u);
}

TEST(CheckPlanTest, RejectsLostDuplicatedAndOverfullRows) {
  LengthHistogram h(8);
  h.counts[4] = 2;
  PackingOptions o{8, 2, 0};
  EXPECT_TRUE(CheckPlan({8, {{{4, 4}, 1}}}, h, o).ok());
  EXPECT_FALSE(CheckPlan({8, {{{4}, 1}}}, h, o).ok());               // one lost
  EXPECT_FALSE(CheckPlan({8, {{{4, 4}, 1}, {{4}, 1}}}, h, o).ok());  // one twice
  LengthHistogram h5(8);
  h5.counts[5] = 2;
  EXPECT_FALSE(CheckPlan({8, {{{5, 5}, 1}}}, h5, o).ok());         // over 8 tokens
  EXPECT_FALSE(CheckPlan({8, {{{4, 4}, 1}}}, h, {8, 1, 0}).ok());  // over depth
}

}  // namespace
}  // namespace pbert::data
