#include "model/fp8.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/torch_compat_ops.h"
#include "gpu/gpu.h"
#include "kernels/fp8_cpu.h"
#include "model/bert_options.h"
#include "model/fp8_kernels.h"

#if PBERT_TORCH_AT_LEAST(2, 4)
#include <ATen/ops/_scaled_mm.h>
#endif

namespace pbert::model {

double Fp8Max(Fp8Format format) { return kernels::Fp8Largest(format); }

Fp8Format FormatOf(Fp8Role role) {
  return role == kFp8GradOutput ? Fp8Format::kE5m2 : Fp8Format::kE4m3;
}

namespace {
std::array<std::atomic<int64_t>, kFp8Roles> fp8_casts_so_far;
}  // namespace

std::array<int64_t, 3> Fp8CastsSoFar() {
  std::array<int64_t, 3> casts;
  for (int64_t role = 0; role < kFp8Roles; ++role) casts[role] = fp8_casts_so_far[role].load();
  return casts;
}

bool Fp8Built() { return PBERT_TORCH_AT_LEAST(2, 1); }

void Fp8Options::Inactive(Precision precision, config::InactiveKeys* keys) const {
  if (precision != Precision::kFp8) {
    keys->Keys({"model.fp8_amax_history", "model.fp8_margin", "model.fp8_emulation"},
               absl::StrCat("model.precision is ", NameOf(precision), ", not fp8"));
  }
}

absl::Status CheckFp8(const Fp8Options& options, const BertOptions& bert,
                      const c10::Device& device) {
  if (!Fp8Built()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.precision fp8 needs LibTorch 2.1 or later (its float8 dtypes); this build has ",
        TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ": use bf16"));
  }
  if (options.emulation) return absl::OkStatus();
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(
        "model.precision fp8 needs a GPU with FP8 products (compute capability 8.9 or later); "
        "on this CPU use bf16, or model.fp8_emulation: true to emulate them (slow: for tests "
        "and learning curves)");
  }
  if (!PBERT_TORCH_AT_LEAST(2, 4)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.precision fp8 multiplies through at::_scaled_mm of LibTorch 2.4 or later; this "
        "build has ",
        TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ": use bf16"));
  }
  auto facts = gpu::Describe(device.index() < 0 ? 0 : device.index());
  if (!facts.ok()) return facts.status();
  if (facts->major * 10 + facts->minor < 89) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.precision fp8 needs a GPU with FP8 products (compute capability 8.9 or later); ",
        facts->name, " is ", facts->major, ".", facts->minor, ": use bf16"));
  }
  // _scaled_mm's operands have sizes that are multiples of 16 (the token
  // count is padded inside Fp8Linear).
  for (const auto& [key, width] : {std::pair<const char*, int64_t>{"hidden_size", bert.hidden_size()},
                                   {"intermediate_size", bert.intermediate_size()}}) {
    if (width % 16 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.precision fp8: model.", key, " ", width,
          " is not a multiple of 16, which FP8 products need; use bf16"));
    }
  }
  return absl::OkStatus();
}

// --- the checkpointed state ---------------------------------------------

namespace {

std::string Base64Floats(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian hosts
  return absl::Base64Escape(bytes);
}

std::vector<float> FloatsOfBase64(const std::string& text, size_t count, const char* what) {
  std::string bytes;
  if (!absl::Base64Unescape(text, &bytes) || bytes.size() != count * sizeof(float)) {
    throw nlohmann::json::other_error::create(
        501, absl::StrCat("fp8.", what, " is not ", count, " fp32 values in base64"), nullptr);
  }
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

std::vector<float> HostFloats(const at::Tensor& t) {
  const at::Tensor host = t.detach().to(at::kCPU, at::kFloat).contiguous();
  return {host.data_ptr<float>(), host.data_ptr<float>() + host.numel()};
}

}  // namespace

void to_json(nlohmann::json& json, const Fp8ScalingState& s) {
  json = {{"products", s.products},
          {"history", s.history},
          {"scale", Base64Floats(s.scale)},
          {"amax_history", Base64Floats(s.amax_history)}};
}

void from_json(const nlohmann::json& json, Fp8ScalingState& s) {
  json.at("products").get_to(s.products);
  json.at("history").get_to(s.history);
  if (s.products < 0 || s.history < 0 || s.products > (1 << 24) || s.history > (1 << 16)) {
    throw nlohmann::json::other_error::create(
        501, absl::StrCat("fp8 holds ", s.products, " products of ", s.history, " steps"),
        nullptr);
  }
  const auto n = static_cast<size_t>(s.products * kFp8Roles);
  s.scale = FloatsOfBase64(json.at("scale").get<std::string>(), n, "scale");
  s.amax_history = FloatsOfBase64(json.at("amax_history").get<std::string>(),
                                  n * static_cast<size_t>(s.history), "amax_history");
  // What Update leaves: finite scales above 0, finite maxima not below 0.
  for (float v : s.scale) {
    if (!(std::isfinite(v) && v > 0)) {
      throw nlohmann::json::other_error::create(
          501, absl::StrCat("fp8.scale holds ", v, ", which no run saves"), nullptr);
    }
  }
  for (float v : s.amax_history) {
    if (!(std::isfinite(v) && v >= 0)) {
      throw nlohmann::json::other_error::create(
          501, absl::StrCat("fp8.amax_history holds ", v, ", which no run saves"), nullptr);
    }
  }
}

Fp8Scaling::Fp8Scaling(int64_t products, const Fp8Options& options, const c10::Device& device)
    : options_(options) {
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  scale_ = at::ones({products, kFp8Roles}, f32);
  amax_ = at::zeros({products, kFp8Roles}, f32);
  history_ = at::zeros({options.amax_history, products, kFp8Roles}, f32);
  max_ = at::tensor({Fp8Max(FormatOf(kFp8Input)), Fp8Max(FormatOf(kFp8Weight)),
                     Fp8Max(FormatOf(kFp8GradOutput))},
                    at::kFloat)
             .to(device);
}

Fp8Slot Fp8Scaling::Slot(int64_t product) const {
  if (weight_casts_.empty()) weight_casts_.resize(static_cast<size_t>(products()));
  return {scale_[product], amax_[product], options_.emulation,
          keep_weight_casts_ ? &weight_casts_[static_cast<size_t>(product)] : nullptr, &step_};
}

void Fp8Scaling::Update() {
  at::NoGradGuard no_grad;
  ++step_;
  // Every product's entries in one pass (kernels/fp8_ops.h): the CPU twin,
  // or one launch on a GPU with the kernels; else ATen's operations, the
  // same arithmetic.
  const bool one_pass = scale_.is_cpu() || (scale_.is_cuda() && fp8_kernels::Built());
  if (one_pass) {
    kernels::Fp8ScaleUpdate u;
    u.amax = amax_.data_ptr<float>();
    u.scale = scale_.data_ptr<float>();
    u.history = history_.data_ptr<float>();
    u.largest = max_.data_ptr<float>();
    u.entries = amax_.numel();
    u.length = history_.size(0);
    u.factor = static_cast<float>(std::ldexp(1.0, static_cast<int>(options_.margin)));
    if (scale_.is_cpu()) {
      kernels::cpu::UpdateFp8Scales(u);
    } else {
      fp8_kernels::UpdateScales(u, scale_);
    }
    return;
  }
  // Newest first: the history moves down one step, the step's maxima on top.
  const int64_t h = history_.size(0);
  if (h > 1) history_.narrow(0, 1, h - 1).copy_(history_.narrow(0, 0, h - 1).clone());
  history_[0].copy_(at::where(at::isfinite(amax_), amax_, at::zeros_like(amax_)));
  const at::Tensor largest = std::get<0>(history_.max(0));
  const at::Tensor candidate = max_ / largest / std::ldexp(1.0, static_cast<int>(options_.margin));
  scale_.copy_(at::where(largest.gt(0).logical_and(at::isfinite(candidate)), candidate, scale_));
  amax_.zero_();
}

Fp8ScalingState Fp8Scaling::State() const {
  Fp8ScalingState s;
  s.products = products();
  s.history = history_.size(0);
  s.scale = HostFloats(scale_);
  s.amax_history = HostFloats(history_);
  return s;
}

absl::Status Fp8Scaling::Restore(const Fp8ScalingState& s) {
  if (s.products != products() || s.history != history_.size(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint's fp8 scales are of ", s.products, " products with a history of ",
        s.history, " steps; this model has ", products(), " products and model.fp8_amax_history ",
        history_.size(0), ": resume with the config the checkpoint was trained with"));
  }
  at::NoGradGuard no_grad;
  const auto host = at::TensorOptions().dtype(at::kFloat);
  scale_.copy_(at::from_blob(const_cast<float*>(s.scale.data()), scale_.sizes(), host));
  history_.copy_(at::from_blob(const_cast<float*>(s.amax_history.data()), history_.sizes(), host));
  amax_.zero_();
  ++step_;
  return absl::OkStatus();
}

// --- the product ---------------------------------------------------------

#if PBERT_TORCH_AT_LEAST(2, 1)

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void CountCast(Fp8Role role) { fp8_casts_so_far[role].fetch_add(1, std::memory_order_relaxed); }

at::ScalarType DtypeOf(Fp8Format format) {
  return format == Fp8Format::kE4m3 ? at::kFloat8_e4m3fn : at::kFloat8_e5m2;
}

// amax = max(amax, max |x|), on the device; a NaN stays (Update drops it).
void Record(const at::Tensor& amax, const at::Tensor& x) {
  amax.copy_(at::maximum(amax, x.abs().amax().to(at::kFloat)));
}

// (a @ b) * inv_a * inv_b (+ bias) in `out` dtype, of a [M, K] and b
// [K, N] in float8, as _scaled_mm computes it; the emulation accumulates in
// fp32, the GPU's tensor cores in about 14 bits between promotions to fp32
// (fewer promotions with `fast_accumulation`).
at::Tensor ScaledProduct(const at::Tensor& a, const at::Tensor& b, const at::Tensor& inv_a,
                         const at::Tensor& inv_b, const at::Tensor& bias, at::ScalarType out,
                         bool emulate, bool fast_accumulation) {
  // _scaled_mm's operands, made on both paths and checked on both, so that
  // the emulation's tests prove what the GPU receives: a row-major, b
  // column-major; its bias, where it takes one, in the output's dtype.
  const at::Tensor lhs = a.contiguous();
  const at::Tensor rhs = b.t().contiguous().t();
  const bool bias_inside = bias.defined() && (out == at::kBFloat16 || out == at::kHalf);
  const at::Tensor inside = bias_inside ? bias.to(out) : at::Tensor();
  const absl::Status operands = CheckScaledMmOperands(lhs, rhs, inv_a, inv_b, inside, out);
  TORCH_CHECK(operands.ok(), "fp8 product: ", std::string(operands.message()));
  if (emulate) {
    at::Tensor y = at::mm(lhs.to(at::kFloat), rhs.to(at::kFloat)).mul_(inv_a * inv_b);
    if (bias.defined()) y.add_(bias.to(at::kFloat));
    return y.to(out);
  }
#if PBERT_TORCH_AT_LEAST(2, 4)
  // Fast accumulation (fewer promotions of the tensor cores' partial sums
  // to fp32) forward, where Transformer Engine uses it, not for gradients.
  at::Tensor y = at::_scaled_mm(lhs, rhs, inv_a, inv_b,
                                bias_inside ? std::optional<at::Tensor>(inside) : std::nullopt,
                                std::nullopt, out, fast_accumulation);
  if (bias.defined() && !bias_inside) y.add_(bias.to(out));
  return y;
#else
  TORCH_CHECK(false, "FP8 products need LibTorch 2.4 or later");
#endif
}

// Rows added to a [M, K] operand so that M is a multiple of 16, as
// _scaled_mm needs (the emulation too: its operands are the GPU's).
int64_t PadRows(int64_t rows) { return (16 - rows % 16) % 16; }

at::Tensor Padded(const at::Tensor& x2, int64_t pad) {
  return pad == 0 ? x2 : at::constant_pad_nd(x2, {0, 0, 0, pad}, 0);
}

// A tensor cast to fp8 once: q, [m + pad, k], and its transpose q_t,
// [k, m + pad], both contiguous; inv, 1 / the scale it was cast with
// (0-dim fp32), the product's scale argument.
struct Cast {
  at::Tensor q, q_t, inv;
};

// x2 [m, k] times `scale` (0-dim fp32), saturated and rounded to `format`,
// with `pad` zero rows below, and transposed; where `amax` is defined,
// amax = max(amax, max |x2|). One pass (kernels/fp8_ops.h): the CPU twin on
// the CPU, the kernel on a GPU (a build with the kernels), both for fp32
// and bf16 tensors; else ATen's operations, which give the same bytes
// (Fp8Test.TheOnePassCastEqualsATensCastBitForBit).
Cast CastFp8(const at::Tensor& x2_in, const at::Tensor& scale, Fp8Format format, int64_t pad,
             const at::Tensor& amax) {
  const at::Tensor x2 = x2_in.contiguous();
  const int64_t m = x2.size(0), k = x2.size(1);
  const at::ScalarType type = x2.scalar_type();
  const bool one_pass = (type == at::kFloat || type == at::kBFloat16) && m + pad > 0 && k > 0 &&
                        (x2.is_cpu() || (x2.is_cuda() && fp8_kernels::Built()));
  if (!one_pass) {
    if (amax.defined()) Record(amax, x2);
    const at::Tensor q = QuantizeFp8(Padded(x2, pad), scale, format);
    return {q, q.t().contiguous(), scale.reciprocal()};
  }
  const auto bytes = x2.options().dtype(DtypeOf(format));
  Cast c{at::empty({m + pad, k}, bytes), at::empty({k, m + pad}, bytes),
         at::empty({}, x2.options().dtype(at::kFloat))};
  kernels::Fp8Cast cast;
  cast.x = x2.data_ptr();
  cast.type = type == at::kBFloat16 ? kernels::ElementType::kBFloat16 : kernels::ElementType::kFloat;
  cast.rows = m;
  cast.cols = k;
  cast.padded_rows = m + pad;
  const at::Tensor scale32 = scale.to(at::kFloat).contiguous();
  cast.scale = scale32.data_ptr<float>();
  cast.kind = format;
  cast.out = static_cast<uint8_t*>(c.q.data_ptr());
  cast.out_t = static_cast<uint8_t*>(c.q_t.data_ptr());
  TORCH_CHECK(!amax.defined() || (amax.scalar_type() == at::kFloat && amax.numel() == 1 &&
                                  amax.device() == x2.device()),
              "fp8: an amax slot must be one fp32 value on the tensor's device");
  cast.amax = amax.defined() ? amax.data_ptr<float>() : nullptr;
  cast.inverse_scale = c.inv.data_ptr<float>();
  if (x2.is_cpu()) {
    kernels::cpu::CastFp8(cast);
  } else {
    fp8_kernels::Cast(cast, x2);
  }
  return c;
}

class Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
 public:
  // qw, qw_t, inv_w: the weight's cast (CastWeight), made outside so that
  // a step's micro-batches can share it.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& qw, const at::Tensor& qw_t,
                            const at::Tensor& inv_w, const at::Tensor& scale,
                            const at::Tensor& amax, int64_t out_dtype, bool emulate, bool record) {
    // The arithmetic below is the product's own: autocast must not cast it.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t k = x.size(-1), n = weight.size(0);
    const at::Tensor x2 = x.reshape({-1, k});
    const int64_t m = x2.size(0), pad = PadRows(m);
    // Each operand cast once, with the transposed copy its gradient's
    // product takes: x^T for the weight's gradient, w^T for the input's.
    const Cast cx = CastFp8(x2, scale[kFp8Input], Fp8Format::kE4m3, pad,
                            record ? amax[kFp8Input] : at::Tensor());
    CountCast(kFp8Input);
    const at::Tensor has_bias = bias.numel() > 0 ? bias : at::Tensor();
    at::Tensor y = ScaledProduct(cx.q, qw.t(), cx.inv, inv_w, has_bias,
                                 static_cast<at::ScalarType>(out_dtype), emulate,
                                 /*fast_accumulation=*/true);
    if (pad > 0) y = y.narrow(0, 0, m);
    ctx->save_for_backward({cx.q_t, qw_t});
    // The inverse scales the operands were cast with, for the gradients'
    // products (the scales may be updated before the backward runs).
    ctx->saved_data["inv_x"] = cx.inv;
    ctx->saved_data["inv_w"] = inv_w;
    // The state's tensors ride outside the saved variables: other products
    // update their rows in place (one version counter) before this backward.
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["amax"] = amax;
    ctx->saved_data["emulate"] = emulate;
    ctx->saved_data["record"] = record;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["w_dtype"] = weight.scalar_type();
    ctx->saved_data["b_dtype"] = bias.scalar_type();
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = n;
    return y.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &qx_t = saved[0], &qw_t = saved[1];  // [K, M + pad], [K, N]
    const at::Tensor scale = ctx->saved_data["scale"].toTensor();
    const at::Tensor amax = ctx->saved_data["amax"].toTensor();
    const bool emulate = ctx->saved_data["emulate"].toBool();
    const std::vector<int64_t> x_sizes = ctx->saved_data["x_sizes"].toIntVector();
    const at::Tensor g = grads[0].reshape({-1, qw_t.size(1)});
    const int64_t m = g.size(0), pad = qx_t.size(1) - m;
    const Cast cg = CastFp8(g, scale[kFp8GradOutput], Fp8Format::kE5m2, pad,
                            ctx->saved_data["record"].toBool() ? amax[kFp8GradOutput]
                                                               : at::Tensor());
    CountCast(kFp8GradOutput);
    const at::Tensor inv_g = cg.inv;
    const at::Tensor inv_x = ctx->saved_data["inv_x"].toTensor();
    const at::Tensor inv_w = ctx->saved_data["inv_w"].toTensor();
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      // [M, N] @ [N, K]
      dx = ScaledProduct(cg.q, qw_t.t(), inv_g, inv_w, at::Tensor(),
                         ctx->saved_data["x_dtype"].toScalarType(), emulate,
                         /*fast_accumulation=*/false);
      if (pad > 0) dx = dx.narrow(0, 0, m);
      dx = dx.view(x_sizes);
    }
    if (ctx->needs_input_grad(1)) {
      // [N, M] @ [M, K]; padded rows are zero on both sides.
      dw = ScaledProduct(cg.q_t, qx_t.t(), inv_g, inv_x, at::Tensor(),
                         ctx->saved_data["w_dtype"].toScalarType(), emulate,
                         /*fast_accumulation=*/false);
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) {
      // From the unquantized gradient, as Transformer Engine does.
      db = g.to(at::kFloat).sum(0).to(ctx->saved_data["b_dtype"].toScalarType());
    }
    return {dx,           dw,           db,           at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The weight's cast for its product: the one the slot keeps for this step
// (Fp8WeightCast) or a new one, kept there.
Cast CastWeight(const at::Tensor& weight, int64_t version, const Fp8Slot& slot, bool record) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  at::NoGradGuard no_grad;
  Fp8WeightCast* kept = slot.weight_cast;
  const int64_t step = slot.step != nullptr ? *slot.step : -1;
  if (kept != nullptr && kept->step == step && kept->data == weight.data_ptr() &&
      kept->version == version && kept->type == weight.scalar_type() &&
      weight.sizes().equals(kept->sizes) && (kept->recorded || !record)) {
    return {kept->q, kept->q_t, kept->inv};
  }
  Cast c = CastFp8(weight, slot.scale[kFp8Weight], Fp8Format::kE4m3, 0,
                   record ? slot.amax[kFp8Weight] : at::Tensor());
  CountCast(kFp8Weight);
  if (kept != nullptr) {
    *kept = {
        c.q,  c.q_t, c.inv, weight.data_ptr(), version, weight.sizes().vec(), weight.scalar_type(),
        step, record};
  }
  return c;
}

}  // namespace

absl::Status CheckScaledMmOperands(const at::Tensor& a, const at::Tensor& b,
                                   const at::Tensor& scale_a, const at::Tensor& scale_b,
                                   const at::Tensor& bias, at::ScalarType out) {
  auto shape = [](const at::Tensor& t) {
    return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "] with strides [",
                        absl::StrJoin(t.strides(), ", "), "]");
  };
  auto fp8 = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat8_e4m3fn || t.scalar_type() == at::kFloat8_e5m2;
  };
  if (a.dim() != 2 || b.dim() != 2) return absl::InvalidArgumentError("operands must be matrices");
  if (!fp8(a) || !fp8(b)) {
    return absl::InvalidArgumentError(absl::StrCat("operands must be float8 (e4m3fn or e5m2), not ",
                                                   c10::toString(a.scalar_type()), " and ",
                                                   c10::toString(b.scalar_type())));
  }
  if (a.scalar_type() == at::kFloat8_e5m2 && b.scalar_type() == at::kFloat8_e5m2) {
    return absl::InvalidArgumentError("cuBLASLt multiplies no two e5m2 operands");
  }
  if (a.size(1) != b.size(0)) {
    return absl::InvalidArgumentError(absl::StrCat("operands ", shape(a), " and ", shape(b),
                                                   " cannot be multiplied"));
  }
  if (a.size(0) % 16 != 0 || a.size(1) % 16 != 0 || b.size(1) % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "every size must be a multiple of 16: ", shape(a), " times ", shape(b)));
  }
  if (a.stride(1) != 1 || a.stride(0) != a.size(1)) {
    return absl::InvalidArgumentError(absl::StrCat("the left operand must be row-major: ", shape(a)));
  }
  if (b.stride(0) != 1 || b.stride(1) != b.size(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the right operand must be column-major: ", shape(b)));
  }
  for (const at::Tensor* scale : {&scale_a, &scale_b}) {
    if (!scale->defined() || scale->numel() != 1 || scale->scalar_type() != at::kFloat) {
      return absl::InvalidArgumentError("each scale must be one fp32 value (tensor-wise scaling)");
    }
  }
  if (bias.defined()) {
    if (out != at::kBFloat16 && out != at::kHalf) {
      return absl::InvalidArgumentError("a bias goes with a bf16 or fp16 output only");
    }
    if (bias.scalar_type() != out || bias.dim() != 1 || bias.size(0) != b.size(1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the bias must be [", b.size(1), "] in the output's dtype ", c10::toString(out)));
    }
  }
  return absl::OkStatus();
}

at::Tensor QuantizeFp8(const at::Tensor& x, const at::Tensor& scale, Fp8Format format) {
  const double max = Fp8Max(format);
  return at::clamp(x.to(at::kFloat) * scale, -max, max).to(DtypeOf(format));
}

at::Tensor Fp8Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     const Fp8Slot& slot, bool record, int64_t weight_version) {
  const at::ScalarType out = torch_compat::ProductDtype(x);
  // An empty tensor for "no bias", as the fused layers take it.
  const at::Tensor b = bias.defined() ? bias : at::empty({0}, weight.options());
  const int64_t version =
      weight_version >= 0 ? weight_version : static_cast<int64_t>(weight._version());
  const Cast w = CastWeight(weight, version, slot, record);
  return Fp8LinearFunction::apply(x, weight, b, w.q, w.q_t, w.inv, slot.scale, slot.amax,
                                  static_cast<int64_t>(out), slot.emulate, record);
}

#else  // LibTorch before 2.1: no float8 dtypes; CheckFp8 refuses fp8.

absl::Status CheckScaledMmOperands(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                   const at::Tensor&, const at::Tensor&, at::ScalarType) {
  return absl::FailedPreconditionError("fp8 products need LibTorch 2.1 or later");
}

at::Tensor QuantizeFp8(const at::Tensor&, const at::Tensor&, Fp8Format) {
  TORCH_CHECK(false, "FP8 needs LibTorch 2.1 or later");
}

at::Tensor Fp8Linear(const at::Tensor&, const at::Tensor&, const at::Tensor&, const Fp8Slot&, bool,
                     int64_t) {
  TORCH_CHECK(false, "FP8 needs LibTorch 2.1 or later");
}

#endif

}  // namespace pbert::model
