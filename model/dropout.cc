#include "model/dropout.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <mutex>

namespace pbert::model {
namespace {

// SplitMix64's finaliser: a bijective mix of a 64-bit counter.
inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Element i keeps its value when 32 bits of the hash of (seed, i / 2) are at
// or above `threshold` = p * 2^32: two elements per hash.
at::Tensor DrawMask(int64_t n, uint64_t seed, uint32_t threshold) {
  at::Tensor mask = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  uint8_t* out = mask.data_ptr<uint8_t>();
  const int64_t pairs = (n + 1) / 2;
  at::parallel_for(0, pairs, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t bits = Mix(seed + static_cast<uint64_t>(j) * 0x9e3779b97f4a7c15ULL);
      const int64_t i = 2 * j;
      out[i] = static_cast<uint32_t>(bits) >= threshold;
      if (i + 1 < n) out[i + 1] = static_cast<uint32_t>(bits >> 32) >= threshold;
    }
  });
  return mask;
}

// out = x * mask * scale, elementwise over contiguous tensors.
at::Tensor ApplyMask(const at::Tensor& x, const at::Tensor& mask, double scale) {
  at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  const int64_t n = in.numel();
  const uint8_t* m = mask.data_ptr<uint8_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, in.scalar_type(), "pbert_dropout", [&] {
    const scalar_t* src = in.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t s = static_cast<acc_t>(scale);
    at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        dst[i] = static_cast<scalar_t>(static_cast<acc_t>(src[i]) * (m[i] ? s : acc_t(0)));
      }
    });
  });
  return out;
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            double p) {
    uint64_t seed;
    {
      auto generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      seed = generator.get<at::CPUGeneratorImpl>()->random64();
    }
    // p in units of 2^-32; the scale keeps the expectation exact for it.
    const double p32 = std::round(p * 4294967296.0);
    const uint32_t threshold = static_cast<uint32_t>(std::min(p32, 4294967295.0));
    const double scale = 1.0 / (1.0 - threshold / 4294967296.0);
    at::Tensor mask = DrawMask(x.numel(), seed, threshold);
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = scale;
    return ApplyMask(x, mask, scale).view(x.sizes());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor mask = ctx->get_saved_variables()[0];
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor& grad = grads[0];
    return {ApplyMask(grad, mask, scale).view(grad.sizes()), at::Tensor()};
  }
};

}  // namespace

at::Tensor Dropout(const at::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  TORCH_CHECK(p < 1.0, "dropout probability ", p, " is not below 1");
  if (!x.device().is_cpu()) return at::dropout(x, p, /*train=*/true);  // CUDA: LibTorch's own
  return DropoutFunction::apply(x, p);
}

}  // namespace pbert::model
