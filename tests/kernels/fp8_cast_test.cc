// The one-pass fp8 cast's CPU twin (kernels/fp8_cpu.h), which the fp8
// emulation casts through and the CUDA kernel mirrors: every byte against
// the formats' definitions (tests/kernels/fp8_reference.h), the transposed
// copy and the padding rows, the largest magnitude (a NaN kept) and the
// inverse scale, from fp32 and bf16.
// tests/model/fp8_test.cc checks the same casts against ATen's, bit for bit.
#include "kernels/fp8_cpu.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/layer_cpu.h"
#include "tests/kernels/fp8_reference.h"

namespace pbert::kernels {
namespace {

using testing::RoundToFormat;

// Floats across both formats' ranges: random magnitudes from below the
// smallest subnormal to past the largest value, each format's values and
// the midpoints between neighbours (ties), zeros, infinities.
std::vector<float> Probes() {
  std::vector<float> v = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), 448.0f, 464.0f, 57344.0f,
                          61440.0f, 1e30f, -1e30f};
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> exponent(-24, 20), mantissa(1, 2);
  for (int i = 0; i < 6000; ++i) {
    const float x = static_cast<float>(mantissa(gen) * std::exp2(exponent(gen)));
    v.push_back(i % 2 ? x : -x);
  }
  for (Fp8Kind kind : {Fp8Kind::kE4m3, Fp8Kind::kE5m2}) {
    for (int byte = 0; byte < 256; ++byte) {
      const float value = FromFp8(static_cast<uint8_t>(byte), kind);
      const float next = FromFp8(static_cast<uint8_t>((byte & 0x80) | ((byte & 0x7f) + 1)), kind);
      if (!std::isfinite(value)) continue;
      v.push_back(value);
      if (std::isfinite(next) && (byte & 0x7f) != 0x7f) v.push_back(0.5f * (value + next));
    }
  }
  return v;
}

TEST(Fp8CastTest, EveryByteIsTheNearestValueOfItsFormatTiesToEven) {
  const std::vector<float> probes = Probes();
  const int64_t cols = 16, rows = static_cast<int64_t>(probes.size()) / cols;
  for (Fp8Kind kind : {Fp8Kind::kE4m3, Fp8Kind::kE5m2}) {
    for (ElementType type : {ElementType::kFloat, ElementType::kBFloat16}) {
      for (const float scale : {1.0f, 0.25f, 1024.0f}) {
        std::vector<float> x(probes.begin(), probes.begin() + rows * cols);
        std::vector<uint16_t> x16(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          x16[i] = cpu::ToBf16(x[i]);
          if (type == ElementType::kBFloat16) x[i] = cpu::FromBf16(x16[i]);
        }
        const int64_t padded = rows + 16 - rows % 16;
        std::vector<uint8_t> out(padded * cols, 0xaa), out_t(padded * cols, 0xaa);
        float amax = 0.5f, inverse = 0;
        Fp8Cast cast;
        cast.inverse_scale = &inverse;
        cast.x = type == ElementType::kFloat ? static_cast<const void*>(x.data()) : x16.data();
        cast.type = type;
        cast.rows = rows;
        cast.cols = cols;
        cast.padded_rows = padded;
        cast.scale = &scale;
        cast.kind = kind;
        cast.out = out.data();
        cast.out_t = out_t.data();
        cast.amax = &amax;
        cpu::CastFp8(cast);
        float largest = 0.5f;
        int64_t wrong = 0;
        for (int64_t r = 0; r < padded; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            const uint8_t q = out[r * cols + c];
            ASSERT_EQ(out_t[c * padded + r], q) << "the transpose at " << r << ", " << c;
            if (r >= rows) {
              ASSERT_EQ(q, 0) << "a padding row";
              continue;
            }
            const float v = x[r * cols + c];
            largest = std::max(largest, std::fabs(v));
            const double want = RoundToFormat(static_cast<double>(v * scale), kind);
            const double got = FromFp8(q, kind);
            if (!(got == want && std::signbit(got) == std::signbit(want))) ++wrong;
          }
        }
        EXPECT_EQ(wrong, 0) << "bytes off their nearest value";
        EXPECT_EQ(amax, largest) << "the largest magnitude (over the earlier 0.5)";
        EXPECT_EQ(inverse, 1.0f / scale) << "the product's inverse scale";
      }
    }
  }
}

TEST(Fp8CastTest, ANanStaysANanAndTheTransposeIsOptional) {
  const std::vector<float> x = {1.0f, -2.0f, std::nanf(""), 3.0f};
  const float scale = 1.0f;
  std::vector<uint8_t> out(16 * 2, 0xaa);
  float amax = 0.0f;
  Fp8Cast cast;
  cast.x = x.data();
  cast.rows = 2;
  cast.cols = 2;
  cast.padded_rows = 16;
  cast.scale = &scale;
  cast.out = out.data();
  cast.amax = &amax;
  cpu::CastFp8(cast);
  EXPECT_TRUE(std::isnan(amax)) << "a NaN's magnitude stays (the step is then skipped)";
  EXPECT_TRUE(std::isnan(FromFp8(out[2], Fp8Kind::kE4m3)));
  EXPECT_EQ(FromFp8(out[1], Fp8Kind::kE4m3), -2.0f);
  amax = 0;
  cast.amax = nullptr;  // not recorded
  cpu::CastFp8(cast);
  EXPECT_EQ(amax, 0.0f);
}

}  // namespace
}  // namespace pbert::kernels
