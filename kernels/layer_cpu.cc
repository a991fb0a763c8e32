#include "kernels/layer_cpu.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace pbert::kernels::cpu {

uint16_t ToBf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float FromBf16(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value = 0;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

namespace {

// An element of a tensor of type `type`, read and written as the kernels'
// Load and Store do.
float Load(const void* p, int64_t i, ElementType type) {
  return type == ElementType::kFloat ? static_cast<const float*>(p)[i]
                                     : FromBf16(static_cast<const uint16_t*>(p)[i]);
}
void Store(void* p, int64_t i, float v, ElementType type) {
  if (type == ElementType::kFloat) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<uint16_t*>(p)[i] = ToBf16(v);
  }
}
float Round(float v, ElementType type) {
  return type == ElementType::kFloat ? v : FromBf16(ToBf16(v));
}

DropoutBits SeedOf(DropoutBits bits) {
  if (bits.seed_slot != nullptr) bits.seed = *bits.seed_slot;
  return bits;
}

}  // namespace

bool BiasGeluForward(const void* y, const void* bias, void* out, int64_t rows, int64_t cols,
                     ElementType act, ElementType param) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      Store(out, r * cols + c, Gelu(Load(y, r * cols + c, act) + Load(bias, c, param)), act);
    }
  }
  return true;
}

bool BiasGeluBackward(const void* grad, const void* y, const void* bias, void* dy,
                      float* bias_partials, int64_t rows, int64_t cols, ElementType act,
                      ElementType param) {
  if (rows == 0 || cols == 0) return true;
  if (cols > kMaxGeluCols) return false;
  const int64_t blocks = ColumnBlocks(rows);
  for (int64_t b = 0; b < blocks; ++b) {
    float* sum = bias_partials + b * cols;
    for (int64_t c = 0; c < cols; ++c) sum[c] = 0.f;
    for (int64_t r = b; r < rows; r += blocks) {
      const int64_t row = r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const float d = Load(grad, row + c, act) * GeluGrad(Load(y, row + c, act) + Load(bias, c, param));
        Store(dy, row + c, d, act);
        sum[c] += d;
      }
    }
  }
  return true;
}

bool BiasDropoutAddNormForward(const NormForward& a, int64_t rows, int64_t cols,
                               DropoutBits slot_bits, float scale, float eps, ElementType act,
                               ElementType param) {
  if (rows == 0 || cols == 0) return true;
  if (cols > kMaxNormCols) return false;
  const DropoutBits bits = SeedOf(slot_bits);
  const float inv_cols = 1.f / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = r * cols;
    float sum = 0.f;
    for (int64_t c = 0; c < cols; ++c) {
      const float kept = DropoutKeeps(bits, row + c) ? scale : 0.f;
      const float v = Round((Load(a.y, row + c, act) + Load(a.bias, c, param)) * kept +
                                Load(a.residual, row + c, param),
                            param);
      Store(a.z, row + c, v, param);
      sum += v;
    }
    const float mean = sum * inv_cols;
    float squares = 0.f;
    for (int64_t c = 0; c < cols; ++c) {
      const float d = Load(a.z, row + c, param) - mean;
      squares += d * d;
    }
    const float rstd = 1.f / std::sqrt(squares * inv_cols + eps);
    for (int64_t c = 0; c < cols; ++c) {
      Store(a.out, row + c,
            (Load(a.z, row + c, param) - mean) * rstd * Load(a.gamma, c, param) +
                Load(a.beta, c, param),
            param);
    }
    a.mean[r] = mean;
    a.rstd[r] = rstd;
  }
  return true;
}

bool BiasDropoutAddNormBackward(const NormBackward& a, int64_t rows, int64_t cols,
                                DropoutBits slot_bits, float scale, ElementType act,
                                ElementType param) {
  if (rows == 0 || cols == 0) return true;
  if (cols > kMaxNormCols) return false;
  const DropoutBits bits = SeedOf(slot_bits);
  const float inv_cols = 1.f / static_cast<float>(cols);
  const int64_t blocks = ColumnBlocks(rows);
  for (int64_t b = 0; b < blocks; ++b) {
    float* bias_sum = a.bias_partials + b * cols;
    float* gamma_sum = a.gamma_partials + b * cols;
    float* beta_sum = a.beta_partials + b * cols;
    for (int64_t c = 0; c < cols; ++c) bias_sum[c] = gamma_sum[c] = beta_sum[c] = 0.f;
    for (int64_t r = b; r < rows; r += blocks) {
      const int64_t row = r * cols;
      const float mean = a.mean[r], rstd = a.rstd[r];
      float sum_g = 0.f, sum_gx = 0.f;
      for (int64_t c = 0; c < cols; ++c) {
        const float g = Load(a.grad, row + c, param);
        const float xhat = (Load(a.z, row + c, param) - mean) * rstd;
        const float gg = g * Load(a.gamma, c, param);
        sum_g += gg;
        sum_gx += gg * xhat;
        gamma_sum[c] += g * xhat;
        beta_sum[c] += g;
      }
      const float mean_g = sum_g * inv_cols, mean_gx = sum_gx * inv_cols;
      for (int64_t c = 0; c < cols; ++c) {
        const float xhat = (Load(a.z, row + c, param) - mean) * rstd;
        const float d = rstd * (Load(a.grad, row + c, param) * Load(a.gamma, c, param) - mean_g -
                                xhat * mean_gx);
        Store(a.dz, row + c, d, param);
        const float du = DropoutKeeps(bits, row + c) ? d * scale : 0.f;
        Store(a.dy, row + c, du, act);
        bias_sum[c] += du;
      }
    }
  }
  return true;
}

}  // namespace pbert::kernels::cpu
