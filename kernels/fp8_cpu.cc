#include "kernels/fp8_cpu.h"

#include <cstring>

#include "kernels/layer_cpu.h"

namespace pbert::kernels::cpu {

void CastFp8(const Fp8Cast& c) {
  const float scale = *c.scale;
  if (c.inverse_scale != nullptr) *c.inverse_scale = 1.0f / scale;
  uint32_t largest = 0;
  for (int64_t r = 0; r < c.padded_rows; ++r) {
    for (int64_t col = 0; col < c.cols; ++col) {
      uint8_t q = 0;
      if (r < c.rows) {
        const int64_t i = r * c.cols + col;
        const float x = c.type == ElementType::kFloat ? static_cast<const float*>(c.x)[i]
                                                      : FromBf16(static_cast<const uint16_t*>(c.x)[i]);
        const uint32_t magnitude = MagnitudeBits(x);
        if (magnitude > largest) largest = magnitude;
        q = ToFp8(x * scale, c.kind);
      }
      c.out[r * c.cols + col] = q;
      if (c.out_t != nullptr) c.out_t[col * c.padded_rows + r] = q;
    }
  }
  if (c.amax != nullptr && largest > MagnitudeBits(*c.amax)) {
    std::memcpy(c.amax, &largest, sizeof(largest));
  }
}

void UpdateFp8Scales(const Fp8ScaleUpdate& update) {
  for (int64_t e = 0; e < update.entries; ++e) UpdateFp8Entry(update, e);
}

}  // namespace pbert::kernels::cpu
