// FP8 products (model/fp8.h) on the CPU, by emulation: the quantization
// against the formats' definitions, the delayed scales against their
// formula, the product and its gradients against a double-precision
// computation over the same quantized values, and the model's wiring.
// LibTorch 1.13 has no float8 dtypes: there the tests that quantize skip,
// saying so; the scales' arithmetic and state are tested in every build.
#include "model/fp8.h"

#include <torch/torch.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "common/torch_compat.h"
#include "gtest/gtest.h"
#include "kernels/fp8_cpu.h"
#include "model/bert.h"
#include "model/precision.h"
#include "tests/kernels/fp8_reference.h"
#include "tests/train/model_batches.h"

namespace pbert::model {
namespace {

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

#define SKIP_WITHOUT_FLOAT8()                                                              \
  if (!Fp8Built()) {                                                                       \
    GTEST_SKIP() << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR       \
                 << " has no float8 dtypes (2.1 and later): fp8 is refused in this build"; \
  }

using kernels::testing::RoundToFormat;

// Values across each format's range: random ones from below the smallest
// subnormal to past the largest value, every value of the format and the
// midpoints between neighbours (ties), zeros, infinities.
std::vector<float> Probes(Fp8Format format) {
  std::vector<float> v = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> exponent(-24, 20), mantissa(1, 2);
  for (int i = 0; i < 4000; ++i) {
    const float x = static_cast<float>(mantissa(gen) * std::exp2(exponent(gen)));
    v.push_back(i % 2 ? x : -x);
  }
  const int mantissa_bits = format == Fp8Format::kE4m3 ? 3 : 2;
  const int min_exponent = format == Fp8Format::kE4m3 ? -6 : -14;
  for (int e = min_exponent; std::ldexp(1.0, e) <= Fp8Max(format); ++e) {
    const double ulp = std::ldexp(1.0, e - mantissa_bits);
    for (int m = 0; m < (2 << mantissa_bits); ++m) {
      const double value = (e == min_exponent ? 0 : std::ldexp(1.0, e)) + m * ulp;
      for (double x : {value, value + ulp / 2, -(value + ulp / 2)}) {
        v.push_back(static_cast<float>(x));  // exact in fp32
      }
    }
  }
  return v;
}

TEST(Fp8Test, QuantizationRoundsToTheNearestValueOfTheFormatAndSaturates) {
  SKIP_WITHOUT_FLOAT8();
  for (Fp8Format format : {Fp8Format::kE4m3, Fp8Format::kE5m2}) {
    const std::vector<float> probes = Probes(format);
    const at::Tensor x = at::tensor(probes);
    // Power-of-two scales are exact; 3.7 makes x * scale round in fp32 first.
    for (float scale : {1.0f, 0.125f, 3.7f}) {
      const at::Tensor q =
          QuantizeFp8(x, at::scalar_tensor(scale, at::kFloat), format).to(at::kFloat);
      const float* got = q.data_ptr<float>();
      int wrong = 0;
      for (size_t i = 0; i < probes.size(); ++i) {
        const float scaled = probes[i] * scale;  // one fp32 rounding, as the tensor's
        const double want = RoundToFormat(scaled, format);
        if (static_cast<double>(got[i]) != want && wrong++ < 5) {
          ADD_FAILURE() << probes[i] << " x " << scale << " gave " << got[i] << ", not " << want
                        << (format == Fp8Format::kE4m3 ? " (e4m3)" : " (e5m2)");
        }
      }
      EXPECT_EQ(wrong, 0) << "values quantized wrongly, of " << probes.size();
    }
    // Infinities saturate; NaN stays NaN.
    const at::Tensor one = at::scalar_tensor(1.0, at::kFloat);
    const at::Tensor inf = at::tensor({std::numeric_limits<float>::infinity(), 1e30f});
    EXPECT_TRUE(at::equal(QuantizeFp8(inf, one, format).to(at::kFloat),
                          at::full({2}, Fp8Max(format), at::kFloat)));
    EXPECT_TRUE(QuantizeFp8(at::tensor({std::nanf("")}), one, format)
                    .to(at::kFloat)
                    .isnan()
                    .all()
                    .item<bool>());
  }
}

// Sets the step's maxima of every product and role to `v`.
void StepMaxima(Fp8Scaling& scaling, float v) { scaling.amax().fill_(v); }

// scale = max / max(history) / 2^margin, in fp32 as the tensors compute
// it; kept where max(history) is 0 or the result not finite; non-finite
// maxima enter the history as 0.
TEST(Fp8Test, ScalesFollowTheLargestMagnitudeOfTheirHistory) {
  Fp8Options options;
  options.amax_history = 3;
  options.margin = 1;
  Fp8Scaling scaling(2, options, at::kCPU);
  EXPECT_TRUE(at::equal(scaling.scale(), at::ones({2, 3}))) << "the first scales are 1";
  const float inf = std::numeric_limits<float>::infinity();
  // 1e-40 alone in the history: 448 / 1e-40 is not finite in fp32, so the
  // scale stays.
  const std::vector<float> steps = {0.0f, 2.0f, 0.5f, inf, std::nanf(""), 0.25f, 0.0f,
                                    0.0f, 0.0f, 1e-40f, 3.0f};
  std::vector<float> history;  // newest first
  float scale[3] = {1, 1, 1};
  const float max[3] = {448, 448, 57344};
  for (float amax : steps) {
    StepMaxima(scaling, amax);
    scaling.Update();
    history.insert(history.begin(), std::isfinite(amax) ? amax : 0.0f);
    history.resize(std::min<size_t>(history.size(), 3));
    const float largest = *std::max_element(history.begin(), history.end());
    for (int r = 0; r < 3; ++r) {
      const float candidate = max[r] / largest / 2.0f;
      if (largest > 0 && std::isfinite(candidate)) scale[r] = candidate;
    }
    for (int p = 0; p < 2; ++p) {
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(scaling.scale()[p][r].item<float>(), scale[r])
            << "after a step of maximum " << amax << ", product " << p << ", role " << r;
      }
    }
    EXPECT_EQ(scaling.history()[0][1][2].item<float>(), history[0]);
    EXPECT_TRUE(at::equal(scaling.amax(), at::zeros({2, 3}))) << "the maxima start again";
  }
}

TEST(Fp8Test, TheStateRoundTripsThroughJsonAndItsReaderRefusesDamage) {
  Fp8Options options;
  options.amax_history = 4;
  Fp8Scaling scaling(3, options, at::kCPU);
  for (float amax : {1.5f, 0.25f, 7.0f}) {
    StepMaxima(scaling, amax);
    scaling.Update();
  }
  const nlohmann::json json = scaling.State();
  Fp8Scaling restored(3, options, at::kCPU);
  ASSERT_TRUE(restored.Restore(json.get<Fp8ScalingState>()).ok());
  EXPECT_TRUE(at::equal(restored.scale(), scaling.scale()));
  EXPECT_TRUE(at::equal(restored.history(), scaling.history()));

  Fp8Options longer = options;
  longer.amax_history = 5;
  const absl::Status other = Fp8Scaling(3, longer, at::kCPU).Restore(json.get<Fp8ScalingState>());
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.message().find("model.fp8_amax_history"), std::string::npos) << other;

  nlohmann::json truncated = json;
  truncated["scale"] = "AAAA";
  EXPECT_THROW(truncated.get<Fp8ScalingState>(), nlohmann::json::exception);
  Fp8ScalingState negative = json.get<Fp8ScalingState>();
  negative.scale[4] = -1;
  EXPECT_THROW(nlohmann::json(negative).get<Fp8ScalingState>(), nlohmann::json::exception);
}

// y = x w^T + b and its gradients, emulated, against sums in double of the
// quantized values (RoundToFormat): fp32 accumulation over K terms, with
// power-of-two scales (exact inverses), is within (K + 2) fp32 epsilons of
// the sum of the terms' magnitudes.
TEST(Fp8Test, TheEmulatedProductEqualsADoublePrecisionComputationOfTheQuantizedValues) {
  SKIP_WITHOUT_FLOAT8();
  const int64_t M = 37, K = 48, N = 32;  // (K and N multiples of 16, as _scaled_mm's)
  torch::manual_seed(4);
  const at::Tensor x = (at::randn({M, K}) * 3).requires_grad_();
  const at::Tensor w = (at::randn({N, K}) * 0.05).requires_grad_();
  const at::Tensor b = at::randn({N}).requires_grad_();
  const at::Tensor g = at::randn({M, N}) * 1e-4;
  Fp8Options options;
  options.emulation = true;
  Fp8Scaling scaling(1, options, at::kCPU);
  const float scales[3] = {16.0f, 1024.0f, 262144.0f};  // input, weight, gradient
  for (int r = 0; r < 3; ++r) scaling.scale()[0][r].fill_(scales[r]);
  const at::Tensor y = Fp8Linear(x, w, b, scaling.Slot(0), /*record=*/true);
  ASSERT_EQ(y.scalar_type(), at::kFloat);
  y.backward(g);

  auto quantized = [](const at::Tensor& t, float scale, Fp8Format format) {
    at::Tensor out = at::empty(t.sizes(), at::kDouble);
    const at::Tensor f = t.detach().contiguous();
    for (int64_t i = 0; i < t.numel(); ++i) {
      out.data_ptr<double>()[i] =
          RoundToFormat(f.data_ptr<float>()[i] * scale, format) / scale;  // exact: 2^k
    }
    return out;
  };
  const at::Tensor qx = quantized(x, scales[0], Fp8Format::kE4m3);
  const at::Tensor qw = quantized(w, scales[1], Fp8Format::kE4m3);
  const at::Tensor qg = quantized(g, scales[2], Fp8Format::kE5m2);
  auto expect_within = [](const at::Tensor& got, const at::Tensor& want,
                          const at::Tensor& magnitude, int64_t depth, const char* what) {
    const at::Tensor bound = magnitude * ((depth + 2) * kEps32);
    const at::Tensor excess = (got.to(at::kDouble) - want).abs() - bound;
    EXPECT_LE(excess.max().item<double>(), 0.0)
        << what << ": largest error " << (got.to(at::kDouble) - want).abs().max().item<double>();
  };
  const at::Tensor b64 = b.detach().to(at::kDouble);
  expect_within(y.detach(), at::mm(qx, qw.t()) + b64, at::mm(qx.abs(), qw.abs().t()) + b64.abs(),
                K, "y");
  expect_within(x.grad(), at::mm(qg, qw), at::mm(qg.abs(), qw.abs()), N, "dx");
  expect_within(w.grad(), at::mm(qg.t(), qx), at::mm(qg.abs().t(), qx.abs()), M, "dw");
  // The bias' gradient from the gradient itself, unquantized.
  const at::Tensor g64 = g.to(at::kDouble);
  expect_within(b.grad(), g64.sum(0), g64.abs().sum(0), M, "db");
  // A product (rather than a copy of one of its terms): the quantization did
  // change the values.
  EXPECT_GT((qx - x.detach().to(at::kDouble)).abs().max().item<double>(), 0.0);

  // The step's maxima, by role.
  EXPECT_EQ(scaling.amax()[0][kFp8Input].item<float>(), x.abs().max().item<float>());
  EXPECT_EQ(scaling.amax()[0][kFp8Weight].item<float>(), w.abs().max().item<float>());
  EXPECT_EQ(scaling.amax()[0][kFp8GradOutput].item<float>(), g.abs().max().item<float>());
}

// The maxima of a step are those of all its micro-batches; evaluation
// records none. Under bf16 autocast the product is bf16, its input's
// gradient in the input's dtype.
TEST(Fp8Test, AStepRecordsTheLargestMagnitudesOfAllItsMicroBatches) {
  SKIP_WITHOUT_FLOAT8();
  Fp8Options options;
  options.emulation = true;
  Fp8Scaling scaling(1, options, at::kCPU);
  const at::Tensor w = at::full({16, 16}, 0.5).requires_grad_();
  float largest = 0;
  for (float v : {3.0f, 5.0f, 2.0f}) {
    const at::Tensor x = at::full({2, 4, 16}, v).requires_grad_();
    const at::Tensor y = Fp8Linear(x, w, at::Tensor(), scaling.Slot(0), true);
    y.sum().backward();
    largest = std::max(largest, v);
    EXPECT_EQ(scaling.amax()[0][kFp8Input].item<float>(), largest);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 4, 16}));
  }
  EXPECT_EQ(scaling.amax()[0][kFp8GradOutput].item<float>(), 1.0f);
  const at::Tensor before = scaling.amax().clone();
  {
    torch::NoGradGuard no_grad;
    Fp8Linear(at::full({4, 16}, 100.0), w, at::Tensor(), scaling.Slot(0), false);
  }
  EXPECT_TRUE(at::equal(scaling.amax(), before)) << "evaluation recorded its maxima";
  if (CpuRunsBf16().ok()) {
    AutocastGuard autocast(Precision::kBf16, c10::DeviceType::CPU);
    const at::Tensor x = at::ones({4, 16}).requires_grad_();
    const at::Tensor y = Fp8Linear(x, w, at::Tensor(), scaling.Slot(0), true);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    y.sum().backward();
    EXPECT_EQ(x.grad().scalar_type(), at::kFloat);
  }
}

// A step's first micro-batch casts each weight; the others take that cast,
// the same bytes: the outputs, gradients and maxima of two micro-batches
// equal those of a scaling that casts the weight every time. A weight is
// cast again after Update, after a change in place, and where it was cast
// without recording its maximum (evaluation) and a training micro-batch
// follows.
TEST(Fp8Test, AStepCastsEachWeightOnceForAllItsMicroBatches) {
  SKIP_WITHOUT_FLOAT8();
  Fp8Options options;
  options.emulation = true;
  Fp8Scaling kept(1, options, at::kCPU), each(1, options, at::kCPU);
  each.KeepWeightCasts(false);
  torch::manual_seed(3);
  const at::Tensor w0 = at::randn({32, 16}), bias = at::randn({32});
  const at::Tensor wk = w0.clone().requires_grad_(), we = w0.clone().requires_grad_();
  auto casts_of = [](const std::function<at::Tensor()>& product) {
    const std::array<int64_t, 3> before = Fp8CastsSoFar();
    const at::Tensor y = product();
    y.pow(2).sum().backward();
    const std::array<int64_t, 3> after = Fp8CastsSoFar();
    return std::array<int64_t, 3>{after[0] - before[0], after[1] - before[1], after[2] - before[2]};
  };
  auto micro_batch = [&](uint64_t seed, bool record) {
    torch::manual_seed(seed);
    const at::Tensor x = at::randn({3, 5, 16}) * static_cast<double>(seed);
    at::Tensor yk, ye;
    const auto casts = casts_of([&] { return yk = Fp8Linear(x, wk, bias, kept.Slot(0), record); });
    casts_of([&] { return ye = Fp8Linear(x, we, bias, each.Slot(0), record); });
    EXPECT_TRUE(at::equal(yk, ye)) << "micro-batch " << seed;
    return casts;
  };
  using Casts = std::array<int64_t, 3>;  // input, weight, output gradient
  EXPECT_EQ(micro_batch(1, true), (Casts{1, 1, 1}));
  EXPECT_EQ(micro_batch(2, true), (Casts{1, 0, 1})) << "the weight cast again in the step";
  EXPECT_EQ(micro_batch(3, true), (Casts{1, 0, 1}));
  EXPECT_TRUE(at::equal(wk.grad(), we.grad()));
  EXPECT_TRUE(at::equal(kept.amax(), each.amax()));
  for (Fp8Scaling* s : {&kept, &each}) s->Update();
  EXPECT_TRUE(at::equal(kept.scale(), each.scale()));
  EXPECT_EQ(micro_batch(4, true), (Casts{1, 1, 1})) << "a new step's weight not cast";
  {
    torch::NoGradGuard no_grad;
    wk.mul_(-2);
    we.mul_(-2);
  }
  EXPECT_EQ(micro_batch(5, true), (Casts{1, 1, 1})) << "a weight changed in place not cast";
  for (Fp8Scaling* s : {&kept, &each}) s->Update();
  EXPECT_EQ(micro_batch(6, false), (Casts{1, 1, 1}));
  EXPECT_EQ(micro_batch(7, true), (Casts{1, 1, 1})) << "its maximum never recorded";
  EXPECT_EQ(kept.amax()[0][kFp8Weight].item<float>(), wk.abs().max().item<float>());
  EXPECT_TRUE(at::equal(wk.grad(), we.grad()));
  EXPECT_TRUE(at::equal(kept.amax(), each.amax()));
}

// In the model: each micro-batch casts every encoder product's input and
// output gradient, the step every weight once.
TEST(Fp8Test, AMicroBatchCastsInputsAndGradientsAndAStepEachWeightOnce) {
  SKIP_WITHOUT_FLOAT8();
  auto base = testing::TinyOptions();
  auto instances = testing::RandomInstances(6, 6, 20, base.vocab_size(), 4);
  const int max_len = static_cast<int>(base.max_position_embeddings());
  const auto rows = testing::PackInOrder(instances, 3, max_len);
  auto batch = *data::MakeBatch(rows, {max_len, 3, 0});
  for (bool fused_qkv : {true, false}) {
    const auto options = base.fused_qkv(fused_qkv);
    torch::manual_seed(2);
    BertForPreTraining model(options);
    Fp8Options fp8;
    fp8.emulation = true;
    Fp8Scaling scaling(BertModelImpl::Fp8Products(options), fp8, at::kCPU);
    model->bert->UseFp8(scaling);
    model->train();
    const int64_t p = scaling.products();
    auto micro_batch = [&] {
      const std::array<int64_t, 3> before = Fp8CastsSoFar();
      auto sums = testing::SumsOf(testing::Forward(model, batch), batch);
      PretrainingLoss(sums, MlmLossMode::kPerToken, testing::TotalsOf(batch)).backward();
      const std::array<int64_t, 3> after = Fp8CastsSoFar();
      return std::array<int64_t, 3>{after[0] - before[0], after[1] - before[1],
                                    after[2] - before[2]};
    };
    using Casts = std::array<int64_t, 3>;  // input, weight, output gradient
    EXPECT_EQ(micro_batch(), (Casts{p, p, p})) << "fused_qkv " << fused_qkv;
    EXPECT_EQ(micro_batch(), (Casts{p, 0, p})) << "fused_qkv " << fused_qkv;
    scaling.Update();
    EXPECT_EQ(micro_batch(), (Casts{p, p, p})) << "fused_qkv " << fused_qkv;
    {
      // A weight changed in place within the step (the first layer's key):
      // its product casts again, joined or not.
      torch::NoGradGuard no_grad;
      model->named_parameters()["bert.encoder.layer.0.attention.self.key.weight"].mul_(0.5);
    }
    EXPECT_EQ(micro_batch(), (Casts{p, 1, p})) << "fused_qkv " << fused_qkv;
  }
}

// Every product of the encoder computes in fp8 (each of its three roles
// records a maximum), the heads do not, with and without one QKV product
// and the fused layers.
TEST(Fp8Test, EveryEncoderProductOfTheModelRunsInFp8) {
  SKIP_WITHOUT_FLOAT8();
  auto base = testing::TinyOptions();
  auto instances = testing::RandomInstances(5, 6, 20, base.vocab_size(), 9);
  const int max_len = static_cast<int>(base.max_position_embeddings());
  const auto rows = testing::PackInOrder(instances, 3, max_len);
  auto batch = *data::MakeBatch(rows, {max_len, 3, 0});
  for (bool fused_qkv : {true, false}) {
    for (bool fused_layers : {false, true}) {
      const auto options = base.fused_qkv(fused_qkv).fused_layers(fused_layers);
      torch::manual_seed(2);
      BertForPreTraining model(options);
      Fp8Options fp8;
      fp8.emulation = true;
      Fp8Scaling scaling(BertModelImpl::Fp8Products(options), fp8, at::kCPU);
      EXPECT_EQ(scaling.products(), options.num_layers() * (fused_qkv ? 4 : 6));
      model->bert->UseFp8(scaling);
      model->train();
      auto sums = testing::SumsOf(testing::Forward(model, batch), batch);
      at::Tensor loss = PretrainingLoss(sums, MlmLossMode::kPerToken, testing::TotalsOf(batch));
      loss.backward();
      EXPECT_TRUE(std::isfinite(loss.item<double>()));
      EXPECT_TRUE(scaling.amax().gt(0).all().item<bool>())
          << "a product without fp8: " << scaling.amax() << " (fused_qkv " << fused_qkv
          << ", fused_layers " << fused_layers << ")";
    }
  }
}

// The operands at::_scaled_mm takes (CheckScaledMmOperands, which both
// paths of every product run, so the other tests here prove the GPU's
// operands): each of its conditions refused, naming it.
TEST(Fp8Test, TheScaledProductsOperandsAreCheckedAsTheGpuTakesThem) {
  SKIP_WITHOUT_FLOAT8();
#if PBERT_TORCH_AT_LEAST(2, 1)
  const at::Tensor a = torch::randn({32, 64}).to(at::kFloat8_e4m3fn);
  const at::Tensor b = torch::randn({48, 64}).to(at::kFloat8_e4m3fn).t();  // [64, 48] column-major
  const at::Tensor one = torch::ones({}), bias = torch::zeros({48}, at::kBFloat16);
  EXPECT_TRUE(CheckScaledMmOperands(a, b, one, one, bias, at::kBFloat16).ok());
  EXPECT_TRUE(CheckScaledMmOperands(a, b, one, one, at::Tensor(), at::kFloat).ok());
  auto refused = [&](const at::Tensor& x, const at::Tensor& y, const at::Tensor& sa,
                     const at::Tensor& bb, at::ScalarType out, const std::string& says) {
    const absl::Status s = CheckScaledMmOperands(x, y, sa, one, bb, out);
    EXPECT_FALSE(s.ok()) << says;
    EXPECT_NE(std::string(s.message()).find(says), std::string::npos) << s.message();
  };
  refused(a.to(at::kFloat), b, one, {}, at::kFloat, "must be float8");
  refused(a.to(at::kFloat8_e5m2), b.to(at::kFloat8_e5m2), one, {}, at::kFloat, "no two e5m2");
  refused(a, b.narrow(0, 0, 32), one, {}, at::kFloat, "cannot be multiplied");
  refused(a.narrow(0, 0, 30), b, one, {}, at::kFloat, "multiple of 16");
  refused(a.t().contiguous().t(), b, one, {}, at::kFloat, "left operand must be row-major");
  refused(a, b.contiguous(), one, {}, at::kFloat, "right operand must be column-major");
  refused(a, b, torch::ones({2}), {}, at::kFloat, "one fp32 value");
  refused(a, b, one.to(at::kDouble), {}, at::kFloat, "one fp32 value");
  refused(a, b, one, bias.to(at::kFloat), at::kFloat, "bf16 or fp16 output only");
  refused(a, b, one, torch::zeros({16}, at::kBFloat16), at::kBFloat16, "the bias must be [48]");
  // An emulated product of rows that are no multiple of 16: padded, as on
  // the GPU, and checked.
  Fp8Options options;
  options.emulation = true;
  Fp8Scaling scaling(1, options, c10::Device(c10::kCPU));
  const at::Tensor y = Fp8Linear(torch::randn({37, 64}), torch::randn({48, 64}),
                                 torch::randn({48}), scaling.Slot(0), true);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{37, 48}));
#endif
}

// The one-pass cast (kernels/fp8_cpu.h, which the products cast through on
// the CPU, and whose per-element code the CUDA kernel runs) gives ATen's
// bytes: QuantizeFp8, the clamp and cast that the products used before,
// from fp32 and bf16, for both formats and several scales, and the largest
// magnitude as ATen's amax.
TEST(Fp8Test, TheOnePassCastEqualsATensCastBitForBit) {
  SKIP_WITHOUT_FLOAT8();
  for (const Fp8Format format : {Fp8Format::kE4m3, Fp8Format::kE5m2}) {
    for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
      for (const float s : {1.0f, 0.125f, 4096.0f}) {
        const std::vector<float> probes = Probes(format);
        const int64_t cols = 16, rows = static_cast<int64_t>(probes.size()) / cols;
        const at::Tensor x = torch::tensor(std::vector<float>(probes.begin(),
                                                              probes.begin() + rows * cols))
                                 .view({rows, cols})
                                 .to(type);
        const at::Tensor scale = torch::full({}, s);
        const at::Tensor aten = QuantizeFp8(x, scale, format).view(at::kByte);
        at::Tensor bytes = torch::empty({rows, cols}, at::kByte);
        at::Tensor transposed = torch::empty({cols, rows}, at::kByte);
        float amax = 0;
        kernels::Fp8Cast cast;
        cast.x = x.data_ptr();
        cast.type = type == at::kFloat ? kernels::ElementType::kFloat
                                       : kernels::ElementType::kBFloat16;
        cast.rows = cast.padded_rows = rows;
        cast.cols = cols;
        cast.scale = scale.data_ptr<float>();
        cast.kind = format;
        cast.out = bytes.data_ptr<uint8_t>();
        cast.out_t = transposed.data_ptr<uint8_t>();
        cast.amax = &amax;
        kernels::cpu::CastFp8(cast);
        EXPECT_TRUE(at::equal(bytes, aten)) << "format " << static_cast<int>(format) << ", "
                                            << c10::toString(type) << ", scale " << s;
        EXPECT_TRUE(at::equal(transposed, aten.t()));
        EXPECT_EQ(amax, x.abs().amax().to(at::kFloat).item<float>());
      }
    }
  }
}

TEST(Fp8Test, ItIsRefusedWhereItCannotRunNamingTheKey) {
  const BertOptions bert = testing::TinyOptions();
  Fp8Options options;
  const absl::Status cpu = CheckFp8(options, bert, at::kCPU);
  EXPECT_EQ(cpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cpu.message().find("model.precision fp8"), std::string::npos) << cpu;
  options.emulation = true;
  const absl::Status emulated = CheckFp8(options, bert, at::kCPU);
  if (Fp8Built()) {
    EXPECT_TRUE(emulated.ok()) << emulated;
  } else {
    EXPECT_NE(emulated.message().find("LibTorch 2.1"), std::string::npos) << emulated;
  }
}

}  // namespace
}  // namespace pbert::model
