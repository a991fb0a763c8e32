#include "optim/schedule.h"

#include "gtest/gtest.h"
#include "optim/packing_adjustment.h"

namespace pbert::optim {
namespace {

TEST(ScheduleTest, WarmupThenPolynomialDecay) {
  ScheduleOptions o;
  o.peak_lr = 4e-3;
  o.warmup_steps = 100;
  o.total_steps = 1000;
  o.power = 1.0;
  o.end_lr = 0.0;
  EXPECT_DOUBLE_EQ(LearningRate(o, 0), 0.0);       // warmup starts at 0
  EXPECT_DOUBLE_EQ(LearningRate(o, 50), 2e-3);     // halfway up
  EXPECT_DOUBLE_EQ(LearningRate(o, 99), 3.96e-3);  // last warmup step
  EXPECT_DOUBLE_EQ(LearningRate(o, 100), 3.6e-3);  // decay counts from step 0
  EXPECT_DOUBLE_EQ(LearningRate(o, 500), 2e-3);
  EXPECT_DOUBLE_EQ(LearningRate(o, 1000), 0.0);
  EXPECT_DOUBLE_EQ(LearningRate(o, 5000), 0.0);  // stays at the end rate
}

TEST(ScheduleTest, PowerEndRateAndWarmupOffset) {
  ScheduleOptions o;
  o.peak_lr = 1.0;
  o.warmup_steps = 10;
  o.start_warmup_step = -10;  // MLPerf's offset: the ramp starts half done
  o.total_steps = 110;
  o.power = 2.0;
  o.end_lr = 0.1;
  EXPECT_DOUBLE_EQ(LearningRate(o, 0), 1.0);  // (0 + 10) / 10
  EXPECT_DOUBLE_EQ(LearningRate(o, 5), 1.5);  // the reference does not cap the ramp
  EXPECT_DOUBLE_EQ(LearningRate(o, 55), 0.9 * 0.25 + 0.1);
  o.start_warmup_step = 5;
  EXPECT_DOUBLE_EQ(LearningRate(o, 2), 0.0);  // before the ramp starts
  EXPECT_DOUBLE_EQ(LearningRate(o, 7), 0.2);
}

TEST(ScheduleTest, ConstantAndValidation) {
  ScheduleOptions o;
  o.kind = ScheduleKind::kConstant;
  o.peak_lr = 0.5;
  EXPECT_DOUBLE_EQ(LearningRate(o, 12345), 0.5);
  EXPECT_TRUE(o.Validate().ok());
  o.kind = ScheduleKind::kPoly;
  o.total_steps = 0;
  EXPECT_FALSE(o.Validate().ok());
  o.total_steps = 10;
  o.warmup_steps = 11;
  EXPECT_FALSE(o.Validate().ok());
  // A poly decay that would rise (end_lr above lr) is refused; equal is a
  // flat schedule, and a constant schedule never reads end_lr.
  o.warmup_steps = 0;
  o.end_lr = 0.75;
  EXPECT_EQ(o.Validate().message(),
            "end_lr 0.75 is above lr 0.5: the poly schedule decays from lr to end_lr; lower "
            "end_lr (MLPerf: 0)");
  o.end_lr = 0.5;
  EXPECT_TRUE(o.Validate().ok());
  o.end_lr = 0.75;
  o.kind = ScheduleKind::kConstant;
  EXPECT_TRUE(o.Validate().ok());
}

TEST(PackingAdjustmentTest, Modes) {
  OptimizerHyperparameters base{0.9, 0.999, 16};
  auto betas = AdjustForPacking(PackingAdjustment::kBetas, 1.99758, base);
  ASSERT_TRUE(betas.ok());
  EXPECT_NEAR(betas->beta1, std::pow(0.9, 1.99758), 1e-15);
  EXPECT_EQ(betas->accumulation_steps, 16);
  auto batch = AdjustForPacking(PackingAdjustment::kBatch, 1.99758, base);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->accumulation_steps, 8);
  EXPECT_EQ(batch->beta1, 0.9);
  EXPECT_EQ(AdjustForPacking(PackingAdjustment::kBatch, 3.0, {0.9, 0.999, 1})->accumulation_steps,
            1);
  EXPECT_EQ(AdjustForPacking(PackingAdjustment::kNone, 2.0, base)->beta2, 0.999);
  EXPECT_FALSE(AdjustForPacking(PackingAdjustment::kBetas, 0.5, base).ok());
}

}  // namespace
}  // namespace pbert::optim
