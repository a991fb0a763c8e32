// The fused layer kernels' CPU twins (kernels/layer_cpu.h) against double
// precision, in each pair of element types the model hands the kernels,
// within bounds derived from their fp32 arithmetic (tests/kernels/
// error_bounds.h for GELU; the LayerNorm bounds as the CUDA test's, which
// holds the kernels to the same ones). bench/kernels compares the kernels
// with these twins on a GPU.
#include "kernels/layer_cpu.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/error_bounds.h"

namespace pbert::kernels {
namespace {

using testing::kBf16Unit;
using testing::kFp32Unit;

// A tensor of `type`: its elements as stored, and as doubles.
struct Buffer {
  ElementType type;
  std::vector<float> f;
  std::vector<uint16_t> h;
  Buffer(ElementType t, size_t n) : type(t) {
    if (t == ElementType::kFloat) {
      f.assign(n, 0.f);
    } else {
      h.assign(n, 0);
    }
  }
  void* data() { return type == ElementType::kFloat ? static_cast<void*>(f.data()) : h.data(); }
  double at(size_t i) const {
    return type == ElementType::kFloat ? f[i] : cpu::FromBf16(h[i]);
  }
  // Sets element i to v rounded to the type; returns the stored value.
  double set(size_t i, double v) {
    if (type == ElementType::kFloat) {
      f[i] = static_cast<float>(v);
    } else {
      h[i] = cpu::ToBf16(static_cast<float>(v));
    }
    return at(i);
  }
};

double Unit(ElementType t) { return t == ElementType::kBFloat16 ? kBf16Unit : kFp32Unit; }
std::string Name(ElementType act, ElementType param) {
  auto one = [](ElementType t) { return t == ElementType::kFloat ? "fp32" : "bf16"; };
  return std::string(one(act)) + "/" + one(param);
}

constexpr std::pair<ElementType, ElementType> kPairs[] = {
    {ElementType::kFloat, ElementType::kFloat},
    {ElementType::kBFloat16, ElementType::kFloat},
    {ElementType::kBFloat16, ElementType::kBFloat16}};

// Counts the elements over their bound and keeps the worst.
struct Check {
  std::string what;
  int64_t over = 0;
  double worst = 0;  // the largest error as a share of its bound
  void operator()(double got, double want, double bound) {
    const double error = std::fabs(got - want);
    over += !(error <= bound);
    if (bound > 0) worst = std::max(worst, error / bound);
  }
  ~Check() { EXPECT_EQ(over, 0) << what << ": over its bound (worst " << worst << " of it)"; }
};

TEST(LayerTwinsTest, BiasGeluForwardAndBackwardAreWithinTheirRounding) {
  constexpr int64_t N = 1100, F = 2048;  // N > kMaxColumnBlocks: blocks of 1 and 2 rows
  for (const auto& [act, param] : kPairs) {
    const std::string name = Name(act, param);
    const double ua = Unit(act);
    std::mt19937_64 random(31);
    std::normal_distribution<double> normal;
    Buffer y(act, N * F), g(act, N * F), bias(param, F), out(act, N * F), dy(act, N * F);
    std::vector<double> x(N * F), gd(N * F);
    std::vector<double> b(F);
    for (int64_t c = 0; c < F; ++c) b[c] = bias.set(c, 0.5 * normal(random));
    for (int64_t i = 0; i < N * F; ++i) {
      x[i] = y.set(i, 2 * normal(random)) + b[i % F];  // the tail below -3 included
      gd[i] = g.set(i, normal(random));
    }
    std::vector<float> partials(ColumnBlocks(N) * F);
    ASSERT_TRUE(cpu::BiasGeluForward(y.data(), bias.data(), out.data(), N, F, act, param));
    ASSERT_TRUE(cpu::BiasGeluBackward(g.data(), y.data(), bias.data(), dy.data(), partials.data(),
                                      N, F, act, param));
    std::vector<double> dbias(F, 0), dbias_bound(F, 0), dbias_abs(F, 0), dbias_sum(F, 0);
    {
      Check out_check{name + " GELU output"}, dy_check{name + " GELU d y"};
      for (int64_t i = 0; i < N * F; ++i) {
        const double e = std::erf(x[i] * 0.70710678118654752);
        const double gelu = 0.5 * x[i] * (1 + e);
        const double grad =
            0.5 * (1 + e) + x[i] * std::exp(-0.5 * x[i] * x[i]) * testing::kInvSqrt2Pi;
        const testing::GeluBound bound = testing::GeluErrorBound(x[i]);
        out_check(out.at(i), gelu, bound.out + ua * std::fabs(gelu));
        const double want = gd[i] * grad;
        const double fp32_bound = std::fabs(gd[i]) * bound.grad + kFp32Unit * std::fabs(want);
        dy_check(dy.at(i), want, fp32_bound + ua * std::fabs(want));
        dbias[i % F] += want;
        dbias_bound[i % F] += fp32_bound;
        dbias_abs[i % F] += std::fabs(want);
      }
    }
    for (size_t k = 0; k < partials.size(); ++k) dbias_sum[k % F] += partials[k];
    Check bias_check{name + " GELU d bias (the partials summed)"};
    for (int64_t c = 0; c < F; ++c) {
      // Each partial sums at most ceil(N / blocks) rows in fp32.
      const int64_t depth = (N + ColumnBlocks(N) - 1) / ColumnBlocks(N);
      bias_check(dbias_sum[c], dbias[c], dbias_bound[c] + depth * kFp32Unit * dbias_abs[c]);
    }
  }
}

TEST(LayerTwinsTest, BiasDropoutAddNormForwardAndBackwardAreWithinTheirRounding) {
  constexpr int64_t N = 1300, H = 1024;
  const DropoutBits bits{0x5eed5eedULL, static_cast<uint32_t>(0.1 * 4294967296.0)};
  const double scale = 1.0 / (1.0 - bits.threshold / 4294967296.0);
  for (const auto& [act, param] : kPairs) {
    const std::string name = Name(act, param);
    const double ua = Unit(act), up = Unit(param), ue = up + H * kFp32Unit;
    std::mt19937_64 random(7);
    std::normal_distribution<double> normal;
    Buffer y(act, N * H), bias(param, H), residual(param, N * H), gamma(param, H), beta(param, H);
    Buffer z(param, N * H), out(param, N * H), grad(param, N * H), dz(param, N * H), dy(act, N * H);
    std::vector<double> yd(N * H), rd(N * H), gd(N * H), b(H), gm(H), bt(H);
    for (int64_t c = 0; c < H; ++c) {
      b[c] = bias.set(c, 0.1 * normal(random));
      gm[c] = gamma.set(c, 1 + 0.1 * normal(random));
      bt[c] = beta.set(c, 0.1 * normal(random));
    }
    for (int64_t i = 0; i < N * H; ++i) {
      yd[i] = y.set(i, normal(random));
      rd[i] = residual.set(i, normal(random));
      gd[i] = grad.set(i, normal(random));
    }
    std::vector<float> mean(N), rstd(N), partials(3 * ColumnBlocks(N) * H);
    const float scale32 = static_cast<float>(scale);
    ASSERT_TRUE(cpu::BiasDropoutAddNormForward(
        {y.data(), bias.data(), residual.data(), gamma.data(), beta.data(), z.data(), out.data(),
         mean.data(), rstd.data()},
        N, H, bits, scale32, 1e-12f, act, param));
    const int64_t blocks = ColumnBlocks(N);
    ASSERT_TRUE(cpu::BiasDropoutAddNormBackward(
        {grad.data(), z.data(), mean.data(), rstd.data(), gamma.data(), dz.data(), dy.data(),
         partials.data(), partials.data() + blocks * H, partials.data() + 2 * blocks * H},
        N, H, bits, scale32, act, param));
    Check out_check{name + " LayerNorm output"}, dz_check{name + " d residual"},
        dy_check{name + " d y"};
    std::vector<double> db(H, 0), db_bound(H, 0), db_abs(H, 0), dg(H, 0), dg_bound(H, 0),
        dg_abs(H, 0), dbt(H, 0), dbt_abs(H, 0);
    std::vector<double> zr(H), xhat(H), mask(H);
    for (int64_t r = 0; r < N; ++r) {
      const int64_t row = r * H;
      double mu = 0, var = 0, zmax = 0;
      for (int64_t c = 0; c < H; ++c) {
        mask[c] = DropoutKeeps(bits, row + c) ? 1.0 : 0.0;
        zr[c] = (yd[row + c] + b[c]) * mask[c] * static_cast<double>(scale32) + rd[row + c];
        mu += zr[c];
        zmax = std::max(zmax, std::fabs(zr[c]));
      }
      mu /= H;
      for (int64_t c = 0; c < H; ++c) var += (zr[c] - mu) * (zr[c] - mu);
      const double inv = 1 / std::sqrt(var / H + 1e-12);
      double mean_gg = 0, mean_ggx = 0, a = 0;
      for (int64_t c = 0; c < H; ++c) {
        xhat[c] = (zr[c] - mu) * inv;
        const double gg = gd[row + c] * gm[c];
        mean_gg += gg / H;
        mean_ggx += gg * xhat[c] / H;
        a += std::fabs(gg) * (1 + std::fabs(xhat[c])) / H;
      }
      for (int64_t c = 0; c < H; ++c) {
        const double spread = 2 * ue * zmax * inv * (1 + std::fabs(xhat[c]));  // xhat's error
        const double o = xhat[c] * gm[c] + bt[c];
        out_check(out.at(row + c), o, 2 * std::fabs(gm[c]) * spread + up * std::fabs(o));
        const double gg = gd[row + c] * gm[c];
        const double dzr = inv * (gg - mean_gg - xhat[c] * mean_ggx);
        const double dz_bound = 2 * inv * spread * (std::fabs(gg) + 2 * a);
        dz_check(dz.at(row + c), dzr, dz_bound + up * std::fabs(dzr));
        const double dyr = dzr * mask[c] * scale;
        const double dy_bound = mask[c] * scale * dz_bound;
        dy_check(dy.at(row + c), dyr, dy_bound + ua * std::fabs(dyr));
        db[c] += dyr;
        db_bound[c] += dy_bound;
        db_abs[c] += std::fabs(dyr);
        dg[c] += gd[row + c] * xhat[c];
        dg_bound[c] += 2 * std::fabs(gd[row + c]) * spread;
        dg_abs[c] += std::fabs(gd[row + c] * xhat[c]);
        dbt[c] += gd[row + c];
        dbt_abs[c] += std::fabs(gd[row + c]);
      }
    }
    const int64_t depth = (N + blocks - 1) / blocks;
    Check db_check{name + " d bias"}, dg_check{name + " d gamma"}, dbt_check{name + " d beta"};
    std::vector<double> sums(3 * H, 0);
    for (int64_t k = 0; k < 3; ++k) {
      for (int64_t p = 0; p < blocks; ++p) {
        for (int64_t c = 0; c < H; ++c) sums[k * H + c] += partials[(k * blocks + p) * H + c];
      }
    }
    for (int64_t c = 0; c < H; ++c) {
      db_check(sums[c], db[c], db_bound[c] + depth * kFp32Unit * db_abs[c]);
      dg_check(sums[H + c], dg[c], dg_bound[c] + depth * kFp32Unit * dg_abs[c]);
      dbt_check(sums[2 * H + c], dbt[c], depth * kFp32Unit * dbt_abs[c]);
    }
  }
}

// Rows wider than the kernels take are refused, as the kernels refuse them.
TEST(LayerTwinsTest, RowsWiderThanTheKernelsTakeAreRefused) {
  std::vector<float> wide((kMaxNormCols + 1) * 2), partials(3 * (kMaxNormCols + 1) * 2);
  std::vector<float> stats(2);
  const NormForward forward{wide.data(), wide.data(), wide.data(), wide.data(), wide.data(),
                            wide.data(), wide.data(), stats.data(), stats.data()};
  EXPECT_FALSE(cpu::BiasDropoutAddNormForward(forward, 2, kMaxNormCols + 1, {}, 1.f, 1e-12f,
                                              ElementType::kFloat, ElementType::kFloat));
  std::vector<float> gelu((kMaxGeluCols + 1) * 2), gelu_partials((kMaxGeluCols + 1) * 2);
  EXPECT_FALSE(cpu::BiasGeluBackward(gelu.data(), gelu.data(), gelu.data(), gelu.data(),
                                     gelu_partials.data(), 2, kMaxGeluCols + 1,
                                     ElementType::kFloat, ElementType::kFloat));
}

// bf16 as the GPU stores it: nearest, ties to even, NaN kept.
TEST(LayerTwinsTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(cpu::ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(cpu::FromBf16(cpu::ToBf16(1.0f + 1.0f / 256)), 1.0f);  // a tie: to even (1.0)
  EXPECT_EQ(cpu::FromBf16(cpu::ToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);  // a tie: to even
  EXPECT_EQ(cpu::FromBf16(cpu::ToBf16(1.0f + 1.5f / 256)), 1.0f + 2.0f / 256);
  EXPECT_TRUE(std::isnan(cpu::FromBf16(cpu::ToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(cpu::FromBf16(cpu::ToBf16(3.4e38f))));  // past bf16's largest: inf
}

}  // namespace
}  // namespace pbert::kernels
