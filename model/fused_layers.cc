#include "model/fused_layers.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/csrc/autograd/custom_function.h>

#include <tuple>

#include "common/torch_compat_ops.h"
#include "model/dropout.h"
#include "model/fused_layers_kernels.h"

namespace pbert::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The functions take an empty tensor for "no bias": LibTorch 1.13's
// autograd functions take no undefined inputs.
bool HasBias(const at::Tensor& bias) { return bias.numel() > 0; }

at::Tensor BiasOrEmpty(const at::Tensor& bias, const at::Tensor& y) {
  return bias.defined() ? bias : at::empty({0}, y.options());
}

// A seed slot's address (kernels::DropoutBits::seed_slot) as an autograd
// function's integer argument, and back.
int64_t SlotArgument(const uint64_t* slot) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(slot));
}
const uint64_t* SlotOf(int64_t argument) {
  return reinterpret_cast<const uint64_t*>(static_cast<uintptr_t>(argument));
}

kernels::DropoutBits BitsOf(AutogradContext* ctx) {
  kernels::DropoutBits bits;
  bits.seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
  bits.threshold = static_cast<uint32_t>(ctx->saved_data["threshold"].toInt());
  bits.seed_slot = SlotOf(ctx->saved_data["seed_slot"].toInt());
  return bits;
}

// Whether the kernels (or their CPU twins) take y: its last dimension the
// bias', on the bias' device.
bool KernelsTake(const at::Tensor& y, const at::Tensor& bias, bool taken) {
  return taken && y.dim() >= 1 && y.device() == bias.device() && y.size(-1) == bias.numel();
}

// x * scale where the mask keeps, 0 elsewhere; nothing without dropout.
at::Tensor Masked(const at::Tensor& x, const at::Tensor& mask, double scale) {
  if (!mask.defined()) return x;
  if (x.is_cpu()) return ApplyDropoutMask(x, mask, scale);
  // Off the CPU only in tests (the reference against the kernels).
  return x.mul(scale).masked_fill_(mask.to(x.device()).view(x.sizes()) == 0, 0);
}

class BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y_in, const at::Tensor& bias) {
    const at::Tensor y = y_in.contiguous();
    const bool kernel = KernelsTake(y, bias, fused_kernels::TakesGelu(y.scalar_type(), bias));
    ctx->saved_data["kernel"] = kernel;
    ctx->saved_data["y_dtype"] = y.scalar_type();
    if (kernel) {
      ctx->save_for_backward({y, bias});
      return fused_kernels::BiasGeluForward(y, bias);
    }
    const at::Tensor u = HasBias(bias) ? y + bias : y;
    ctx->save_for_backward({u, bias});
    return at::gelu(u).to(y.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& bias = saved[1];
    if (ctx->saved_data["kernel"].toBool()) {
      auto [dy, dbias] = fused_kernels::BiasGeluBackward(grads[0], saved[0], bias);
      return {dy, dbias};
    }
    const at::Tensor& u = saved[0];
    const at::Tensor du = at::gelu_backward(grads[0].to(u.scalar_type()), u);
    return {du.to(ctx->saved_data["y_dtype"].toScalarType()),
            HasBias(bias) ? at::sum_to(du, bias.sizes()).to(bias.scalar_type()) : at::Tensor()};
  }
};

class BiasDropoutAddNormFunction : public torch::autograd::Function<BiasDropoutAddNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y_in, const at::Tensor& bias,
                            const at::Tensor& residual, const at::Tensor& gamma,
                            const at::Tensor& beta, int64_t seed, int64_t threshold,
                            int64_t seed_slot, double eps) {
    const at::Tensor y = y_in.contiguous();
    kernels::DropoutBits bits;
    bits.seed = static_cast<uint64_t>(seed);
    bits.threshold = static_cast<uint32_t>(threshold);
    bits.seed_slot = SlotOf(seed_slot);  // the kernels' only (the reference draws with `seed`)
    const double scale = bits.threshold > 0 ? DropoutScale(bits) : 1.0;
    const bool kernel =
        KernelsTake(y, bias, fused_kernels::TakesNorm(y.scalar_type(), bias, gamma));
    ctx->saved_data["kernel"] = kernel;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["threshold"] = threshold;
    ctx->saved_data["seed_slot"] = seed_slot;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["y_dtype"] = y.scalar_type();
    ctx->saved_data["residual_dtype"] = residual.scalar_type();
    if (kernel) {
      auto [out, z, mean, rstd] =
          fused_kernels::NormForward(y, bias, residual, gamma, beta, bits, scale, eps);
      ctx->save_for_backward({z, mean, rstd, gamma, bias});
      return out;
    }
    // The unfused modules' operations: LayerNorm(Dropout(y + bias) + residual)
    // in the LayerNorm weight's dtype (model/bert.cc, Normalize).
    const at::Tensor u = HasBias(bias) ? y + bias : y;
    const at::Tensor mask = bits.threshold > 0 ? DropoutMask(u.numel(), bits) : at::Tensor();
    const at::Tensor z = (Masked(u, mask, scale) + residual).to(gamma.scalar_type());
    auto [out, mean, rstd] = at::native_layer_norm(z, {z.size(-1)}, gamma, beta, eps);
    ctx->saved_data["u_dtype"] = u.scalar_type();
    ctx->save_for_backward({z, mean, rstd, gamma, bias, beta, mask});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &z = saved[0], &mean = saved[1], &rstd = saved[2], &gamma = saved[3],
                     &bias = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::ScalarType y_dtype = ctx->saved_data["y_dtype"].toScalarType();
    const at::ScalarType residual_dtype = ctx->saved_data["residual_dtype"].toScalarType();
    if (ctx->saved_data["kernel"].toBool()) {
      auto [dz, dy, dbias, dgamma, dbeta] = fused_kernels::NormBackward(
          grads[0], z, mean, rstd, gamma, BitsOf(ctx), scale, y_dtype);
      return {dy,          dbias,       dz.to(residual_dtype), dgamma, dbeta,
              at::Tensor(), at::Tensor(), at::Tensor(),         at::Tensor()};
    }
    const at::Tensor &beta = saved[5], &mask = saved[6];
    auto [dz, dgamma, dbeta] = at::native_layer_norm_backward(
        grads[0].contiguous(), z, {z.size(-1)}, mean, rstd, gamma, beta, {true, true, true});
    const at::Tensor du = Masked(dz.to(ctx->saved_data["u_dtype"].toScalarType()), mask, scale);
    return {du.to(y_dtype),
            HasBias(bias) ? at::sum_to(du, bias.sizes()).to(bias.scalar_type()) : at::Tensor(),
            dz.to(residual_dtype),
            dgamma,
            dbeta,
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

// The whole of parts that lie end to end in one storage (JoinRows).
class JoinRowsFunction : public torch::autograd::Function<JoinRowsFunction> {
 public:
  // Three parts, as LibTorch 1.13's autograd functions take no list of
  // differentiable inputs.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            const at::Tensor& c) {
    const variable_list parts = {a, b, c};
    std::vector<int64_t> rows;
    for (const at::Tensor& p : parts) rows.push_back(p.size(0));
    ctx->saved_data["rows"] = rows;
    if (!EndToEnd(parts)) return at::cat(parts, 0);
    std::vector<int64_t> sizes = parts.front().sizes().vec();
    sizes[0] = 0;
    for (int64_t r : rows) sizes[0] += r;
    const at::Tensor& first = parts.front();
    // An alias of the storage (set_, not a view autograd tracks): the
    // function's own output, whose gradient is split below.
    return at::empty({0}, first.options())
        .set_(first.storage(), first.storage_offset(), sizes, first.strides());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<int64_t> rows = ctx->saved_data["rows"].toIntVector();
    variable_list out;
    int64_t start = 0;
    for (int64_t r : rows) {
      out.push_back(grads[0].narrow(0, start, r));
      start += r;
    }
    return out;
  }

  // Whether the parts are contiguous and each starts where the one before
  // ends, in one storage.
  static bool EndToEnd(const variable_list& parts) {
    const at::Tensor& first = parts.front();
    int64_t next = first.storage_offset();
    for (const at::Tensor& p : parts) {
      if (!p.is_contiguous() || !p.storage().is_alias_of(first.storage()) ||
          p.storage_offset() != next || p.scalar_type() != first.scalar_type() ||
          p.sizes().slice(1) != first.sizes().slice(1)) {
        return false;
      }
      next += p.numel();
    }
    return true;
  }
};

}  // namespace

at::Tensor JoinRows(const std::vector<at::Tensor>& parts) {
  TORCH_CHECK(parts.size() == 3, "JoinRows: three parts, not ", parts.size());
  return JoinRowsFunction::apply(parts[0], parts[1], parts[2]);
}

void PackRows(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return;
  at::NoGradGuard no_grad;
  const at::Tensor packed = at::cat(tensors, 0);  // a new, contiguous buffer
  int64_t start = 0;
  for (const at::Tensor& t : tensors) {
    at::Tensor(t).set_data(packed.narrow(0, start, t.size(0)));
    start += t.size(0);
  }
}

bool FusedLayerKernelsBuilt() { return fused_kernels::Built(); }

void UseFusedLayerTwins(bool on) { fused_kernels::SetTwinsOnCpu(on); }

FusedPath BiasGeluPath(const at::Tensor& x, const at::Tensor& bias) {
  if (fused_kernels::TakesGelu(torch_compat::ProductDtype(x), bias)) return FusedPath::kKernels;
  return x.is_cpu() ? FusedPath::kReference : FusedPath::kUnfused;
}

FusedPath BiasDropoutAddNormPath(const at::Tensor& x, const at::Tensor& bias,
                                 const at::Tensor& gamma) {
  if (fused_kernels::TakesNorm(torch_compat::ProductDtype(x), bias, gamma)) {
    return FusedPath::kKernels;
  }
  return x.is_cpu() ? FusedPath::kReference : FusedPath::kUnfused;
}

at::Tensor BiasGelu(const at::Tensor& y, const at::Tensor& bias) {
  return BiasGeluFunction::apply(y, BiasOrEmpty(bias, y));
}

at::Tensor BiasDropoutAddNorm(const at::Tensor& y, const at::Tensor& bias,
                              const at::Tensor& residual, const at::Tensor& gamma,
                              const at::Tensor& beta, double p, double eps, bool training) {
  TORCH_CHECK(p < 1.0, "dropout probability ", p, " is not below 1");
  const kernels::DropoutBits bits = training && p > 0.0 ? DrawDropout(p) : kernels::DropoutBits{};
  return BiasDropoutAddNorm(y, bias, residual, gamma, beta, bits, eps);
}

at::Tensor BiasDropoutAddNorm(const at::Tensor& y, const at::Tensor& bias,
                              const at::Tensor& residual, const at::Tensor& gamma,
                              const at::Tensor& beta, const kernels::DropoutBits& bits,
                              double eps) {
  return BiasDropoutAddNormFunction::apply(y, BiasOrEmpty(bias, y), residual, gamma, beta,
                                           static_cast<int64_t>(bits.seed),
                                           static_cast<int64_t>(bits.threshold),
                                           SlotArgument(bits.seed_slot), eps);
}

}  // namespace pbert::model
