#include "model/dropout.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "model/inputs.h"

namespace pbert::model {
namespace {

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
    const kernels::DropoutBits bits = DrawDropout(p);
    const double scale = DropoutScale(bits);
    at::Tensor mask = DropoutMask(x.numel(), bits);
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

// The slots this thread's DrawDropout calls take, while recording, and
// whether they take their seeds from them (a stand-in replay) or draw.
thread_local DropoutSeedSlots* recording = nullptr;
thread_local bool host_replay = false;

uint64_t DrawSeed() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

}  // namespace

DropoutSeedSlots::DropoutSeedSlots(const c10::Device& device, int64_t capacity)
    : slots_(at::zeros({capacity}, at::TensorOptions().dtype(at::kLong).device(device))) {}

DropoutSeedSlots::Recording::Recording(DropoutSeedSlots& slots) {
  TORCH_CHECK(recording == nullptr, "dropout seed slots: a recording is already alive");
  slots.used_ = 0;
  recording = &slots;
}

DropoutSeedSlots::Recording::~Recording() { recording = nullptr; }

DropoutSeedSlots::HostReplay::HostReplay() { host_replay = true; }

DropoutSeedSlots::HostReplay::~HostReplay() { host_replay = false; }

const uint64_t* DropoutSeedSlots::Take() {
  TORCH_CHECK(used_ < slots_.numel(), "a captured micro-batch draws more than ", slots_.numel(),
              " dropout masks");
  return reinterpret_cast<const uint64_t*>(slots_.data_ptr<int64_t>()) + used_++;
}

const uint64_t* DropoutSeedSlots::Take(uint64_t seed) {
  const uint64_t* slot = Take();
  if (slots_.is_cpu()) *const_cast<uint64_t*>(slot) = seed;
  return slot;
}

void DropoutSeedSlots::Refill() {
  if (used_ == 0) return;
  std::vector<int64_t> seeds(static_cast<size_t>(used_));
  for (int64_t& seed : seeds) seed = static_cast<int64_t>(DrawSeed());
  const at::Tensor host = at::from_blob(seeds.data(), {used_}, at::TensorOptions().dtype(at::kLong));
  slots_.narrow(0, 0, used_).copy_(HostToDevice(host, slots_.device()));
}

at::Tensor DropoutSeedSlots::Values() const { return slots_.narrow(0, 0, used_).cpu(); }

kernels::DropoutBits DrawDropout(double p) {
  kernels::DropoutBits bits;
  if (recording != nullptr && host_replay) {
    TORCH_CHECK(recording->slots_.is_cpu(), "a host replay reads its seeds on the CPU");
    bits.seed_slot = recording->Take();
    bits.seed = *bits.seed_slot;
  } else {
    bits.seed = DrawSeed();
    if (recording != nullptr) bits.seed_slot = recording->Take(bits.seed);
  }
  const double p32 = std::round(p * 4294967296.0);
  bits.threshold = static_cast<uint32_t>(std::min(p32, 4294967295.0));
  return bits;
}

double DropoutScale(const kernels::DropoutBits& bits) {
  return 1.0 / (1.0 - bits.threshold / 4294967296.0);
}

// Element i keeps its value where kernels::DropoutKeeps: one hash per pair
// of elements, in parallel, the same for any thread count.
at::Tensor DropoutMask(int64_t n, const kernels::DropoutBits& bits) {
  at::Tensor mask = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  uint8_t* out = mask.data_ptr<uint8_t>();
  at::parallel_for(0, (n + 1) / 2, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t hash = kernels::DropoutPairHash(bits, j);
      out[2 * j] = kernels::DropoutHalfKeeps(bits, static_cast<uint32_t>(hash));
      if (2 * j + 1 < n) out[2 * j + 1] = kernels::DropoutHalfKeeps(bits, static_cast<uint32_t>(hash >> 32));
    }
  });
  return mask;
}

at::Tensor ApplyDropoutMask(const at::Tensor& x, const at::Tensor& mask, double scale) {
  return ApplyMask(x, mask, scale).view(x.sizes());
}

at::Tensor Dropout(const at::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  TORCH_CHECK(p < 1.0, "dropout probability ", p, " is not below 1");
  if (!x.device().is_cpu()) return at::dropout(x, p, /*train=*/true);  // CUDA: LibTorch's own
  return DropoutFunction::apply(x, p);
}

}  // namespace pbert::model
