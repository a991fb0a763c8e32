#include "kernels/lamb_cpu.h"

#include <cmath>

#include "kernels/layer_cpu.h"

namespace pbert::kernels::cpu {

void LambStep(const LambGroup& group, double* norms) {
  const size_t tensors = group.sizes.size();
  LambScalars s = group.scalars;
  if (group.clip != nullptr) s.clip = static_cast<float>(*group.clip);
  for (size_t t = 0; t < tensors; ++t) {
    double w_sq = 0, u_sq = 0;
    for (int64_t i = 0; i < group.sizes[t]; ++i) {
      const float g = group.bf16_grads ? FromBf16(static_cast<const uint16_t*>(group.grads[t])[i])
                                       : static_cast<const float*>(group.grads[t])[i];
      const float w = group.weights[t][i];
      float m = group.exp_avg[t][i], v = group.exp_avg_sq[t][i];
      const float u = LambDirection(g, w, m, v, s);
      group.exp_avg[t][i] = m;
      group.exp_avg_sq[t][i] = v;
      group.update[t][i] = u;
      w_sq += static_cast<double>(w) * w;
      u_sq += static_cast<double>(u) * u;
    }
    norms[t] = w_sq;
    norms[tensors + t] = u_sq;
  }
  for (size_t t = 0; t < tensors; ++t) {
    const float ratio =
        LambTrustRatio(std::sqrt(norms[t]), std::sqrt(norms[tensors + t]), group.trust_ratio);
    uint16_t* w16 = group.bf16_weights.empty() ? nullptr : group.bf16_weights[t];
    for (int64_t i = 0; i < group.sizes[t]; ++i) {
      const float w = LambApply(group.weights[t][i], group.update[t][i], ratio, group.lr);
      group.weights[t][i] = w;
      if (w16 != nullptr) w16[i] = ToBf16(w);
    }
  }
}

void SquaredNorms(const std::vector<const void*>& tensors, const std::vector<int64_t>& sizes,
                  bool bf16, double* norms) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    double sum = 0;
    for (int64_t i = 0; i < sizes[t]; ++i) {
      const double v = bf16 ? FromBf16(static_cast<const uint16_t*>(tensors[t])[i])
                            : static_cast<const float*>(tensors[t])[i];
      sum += v * v;
    }
    norms[t] = sum;
  }
}

}  // namespace pbert::kernels::cpu
