// bench/kernels: the fused kernels against their CPU twins, after llm.c's
// dev/cuda: the layers' (kernels/layer_cuda.h through
// model/fused_layers_kernels.h, twins kernels/layer_cpu.h) and LAMB's
// (kernels/lamb_cuda.h through optim/lamb_fused.h, twins
// kernels/lamb_cpu.h). For each layer operation (bias and GELU,
// bias-dropout-residual-LayerNorm, forward and backward) at BERT-base's and
// BERT-large's shapes, bf16 activations with bf16 and with fp32
// parameters, the one-pass fp8 cast (whose bytes must equal the twin's:
// difference 0 or 1), and for LAMB's step and the gradient norm over BERT-base's
// and BERT-large's parameters (fp32 weights and gradients; bf16 gradients
// and weight copies, as with master weights): the largest difference
// between the kernel's outputs and its twin's (on the first --check-tokens
// tokens, or LAMB's embeddings and first layer, as a share of the twin's
// largest magnitude), the kernel's time (CUDA events, the median of
// --repeat runs after 3 warm-up runs, on --tokens tokens or every
// parameter), the bytes the operation must move and its bandwidth as a
// share of the card's (H100 3.35 TB/s, H200 4.8 TB/s). Last a line
// "[key] ..." (scripts/gpu's summary reads it). Well under a minute.
//
//   build-gpu/bench/kernels [--tokens 16384] [--check-tokens 2048] [--repeat 20]
//
// On a machine without a GPU, or a build without the kernels, it says so
// in one line (exit 2).
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpu/gpu.h"
#include "kernels/layer_cpu.h"
#include "kernels/fp8_cpu.h"
#include "kernels/lamb_cpu.h"
#include "model/fp8_kernels.h"
#include "model/fused_layers_kernels.h"
#include "optim/lamb.h"
#include "optim/lamb_fused.h"
#include "train/peak_flops.h"

namespace {

namespace fused = pbert::model::fused_kernels;
namespace twin = pbert::kernels::cpu;
using pbert::kernels::ColumnBlocks;
using pbert::kernels::DropoutBits;
using pbert::kernels::ElementType;

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "bench/kernels: %s\nusage: kernels [--tokens N] [--check-tokens N] [--repeat N]\n",
               why.c_str());
  return 2;
}

ElementType TypeOf(at::ScalarType t) {
  return t == at::kBFloat16 ? ElementType::kBFloat16 : ElementType::kFloat;
}

// The largest |a - b| over the largest |b|, of two tensors of one shape.
double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kCPU, at::kDouble), y = b.to(at::kCPU, at::kDouble);
  const double scale = std::max(y.abs().max().item<double>(), 1e-30);
  return (x - y).abs().max().item<double>() / scale;
}

struct Shape {
  const char* model;
  int64_t hidden, ffn;
};

struct Row {
  std::string op, model, types;
  int64_t rows = 0, cols = 0;
  double error = 0, seconds = 0, bytes = 0;
};

int Main(int argc, char** argv) {
  int64_t tokens = 16384, check_tokens = 2048;
  int repeat = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage("flag " + flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--tokens" && absl::SimpleAtoi(value, &tokens) && tokens > 0) {
    } else if (flag == "--check-tokens" && absl::SimpleAtoi(value, &check_tokens) &&
               check_tokens > 0) {
    } else if (flag == "--repeat" && absl::SimpleAtoi(value, &repeat) && repeat > 0) {
    } else {
      return Usage("bad flag or value: " + flag + " " + value);
    }
  }
  check_tokens = std::min(check_tokens, tokens);
  if (!pbert::gpu::Built() || torch::cuda::device_count() == 0 || !fused::Built()) {
    std::fprintf(stderr, "bench/kernels: %s; run it on a GPU machine (scripts/gpu)\n",
                 !pbert::gpu::Built()               ? "this build has no CUDA"
                 : torch::cuda::device_count() == 0 ? "no CUDA GPU here"
                                                    : "this build has no CUDA kernels");
    return 2;
  }
  auto facts = pbert::gpu::Describe(0);
  if (!facts.ok()) return Usage(std::string(facts.status().message()));
  const double bandwidth = pbert::train::GpuPeakBandwidth(facts->name);
  auto timer = pbert::gpu::EventTimer::Create(0);
  if (!timer.ok()) return Usage(std::string(timer.status().message()));
  const c10::Device gpu(c10::kCUDA, 0);
  const DropoutBits bits{0x5eed5eedULL, static_cast<uint32_t>(0.1 * 4294967296.0)};
  const double scale = 1.0 / (1.0 - 0.1);
  std::printf("# %s; LibTorch %s; %lld tokens timed (the median of %d runs), the twins on the "
              "first %lld\n\n",
              facts->name.c_str(), TORCH_VERSION, static_cast<long long>(tokens), repeat,
              static_cast<long long>(check_tokens));
  // The median time of `run` on the GPU.
  auto median_time = [&](const std::function<void()>& run) {
    for (int k = 0; k < 3; ++k) run();
    std::vector<double> seconds;
    for (int k = 0; k < repeat; ++k) {
      (*timer)->Start();
      run();
      seconds.push_back((*timer)->StopSeconds());
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  };
  std::vector<Row> rows;
  const Shape shapes[] = {{"base", 768, 3072}, {"large", 1024, 4096}};
  const std::pair<at::ScalarType, at::ScalarType> types[] = {{at::kBFloat16, at::kBFloat16},
                                                             {at::kBFloat16, at::kFloat}};
  try {
    for (const Shape& shape : shapes) {
      for (const auto& [act, param] : types) {
        const std::string type_name = absl::StrCat(c10::toString(act), "/", c10::toString(param));
        const double sa = act == at::kBFloat16 ? 2 : 4, sp = param == at::kBFloat16 ? 2 : 4;
        auto on = [&](at::ScalarType t) { return torch::TensorOptions().device(gpu).dtype(t); };
        torch::manual_seed(5);
        // Bias and GELU over [tokens, ffn].
        {
          const int64_t n = tokens, f = shape.ffn, c = check_tokens;
          const at::Tensor y = torch::randn({n, f}, on(act)), g = torch::randn({n, f}, on(act));
          const at::Tensor bias = 0.5 * torch::randn({f}, on(param));
          Row forward{"bias + GELU, forward", shape.model, type_name, n, f};
          forward.seconds = median_time([&] { (void)fused::BiasGeluForward(y, bias); });
          forward.bytes = n * f * 2 * sa + f * sp;
          const at::Tensor yc = y.narrow(0, 0, c).contiguous(), gc = g.narrow(0, 0, c).contiguous();
          const at::Tensor yh = yc.cpu(), gh = gc.cpu(), bh = bias.cpu();
          at::Tensor out = torch::empty_like(yh);
          twin::BiasGeluForward(yh.data_ptr(), bh.data_ptr(), out.data_ptr(), c, f, TypeOf(act),
                                TypeOf(param));
          forward.error = RelativeError(fused::BiasGeluForward(yc, bias), out);
          rows.push_back(forward);
          Row backward{"bias + GELU, backward", shape.model, type_name, n, f};
          backward.seconds = median_time([&] { (void)fused::BiasGeluBackward(g, y, bias); });
          backward.bytes = n * f * 3 * sa + f * sp + ColumnBlocks(n) * f * 4.0;
          at::Tensor dy = torch::empty_like(yh);
          at::Tensor partials = torch::empty({ColumnBlocks(c), f});
          twin::BiasGeluBackward(gh.data_ptr(), yh.data_ptr(), bh.data_ptr(), dy.data_ptr(),
                                 partials.data_ptr<float>(), c, f, TypeOf(act), TypeOf(param));
          auto [kdy, kdb] = fused::BiasGeluBackward(gc, yc, bias);
          backward.error = std::max(RelativeError(kdy, dy), RelativeError(kdb, partials.sum(0)));
          rows.push_back(backward);
        }
        // Bias, dropout, residual and LayerNorm over [tokens, hidden].
        {
          const int64_t n = tokens, h = shape.hidden, c = check_tokens;
          const at::Tensor y = torch::randn({n, h}, on(act));
          const at::Tensor residual = torch::randn({n, h}, on(param));
          const at::Tensor grad = torch::randn({n, h}, on(param));
          const at::Tensor bias = 0.1 * torch::randn({h}, on(param));
          const at::Tensor gamma = 1 + 0.1 * torch::randn({h}, on(param));
          const at::Tensor beta = 0.1 * torch::randn({h}, on(param));
          Row forward{"bias, dropout, residual, LayerNorm, forward", shape.model, type_name, n, h};
          forward.seconds = median_time(
              [&] { (void)fused::NormForward(y, bias, residual, gamma, beta, bits, scale, 1e-12); });
          forward.bytes = n * h * (sa + 3 * sp) + n * 8.0;
          const at::Tensor yc = y.narrow(0, 0, c).contiguous();
          const at::Tensor rc = residual.narrow(0, 0, c).contiguous();
          const at::Tensor gc = grad.narrow(0, 0, c).contiguous();
          auto [kout, kz, kmean, krstd] =
              fused::NormForward(yc, bias, rc, gamma, beta, bits, scale, 1e-12);
          const at::Tensor yh = yc.cpu(), rh = rc.cpu(), gh = gc.cpu(), bh = bias.cpu(),
                           gmh = gamma.cpu(), bth = beta.cpu();
          at::Tensor z = torch::empty_like(rh), out = torch::empty_like(rh);
          at::Tensor mean = torch::empty({c}), rstd = torch::empty({c});
          twin::BiasDropoutAddNormForward(
              {yh.data_ptr(), bh.data_ptr(), rh.data_ptr(), gmh.data_ptr(), bth.data_ptr(),
               z.data_ptr(), out.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>()},
              c, h, bits, static_cast<float>(scale), 1e-12f, TypeOf(act), TypeOf(param));
          forward.error = std::max(RelativeError(kout, out), RelativeError(kz, z));
          rows.push_back(forward);
          auto [out_n, z_n, mean_n, rstd_n] =
              fused::NormForward(y, bias, residual, gamma, beta, bits, scale, 1e-12);
          Row backward{"bias, dropout, residual, LayerNorm, backward", shape.model, type_name, n,
                       h};
          backward.seconds = median_time([&] {
            (void)fused::NormBackward(grad, z_n, mean_n, rstd_n, gamma, bits, scale, act);
          });
          backward.bytes = n * h * (sa + 3 * sp) + n * 8.0 + 3 * ColumnBlocks(n) * h * 4.0;
          // The twin's backward from the kernel's forward statistics (the
          // same z, mean and rstd on both sides).
          const at::Tensor zh = kz.cpu(), meanh = kmean.cpu(), rstdh = krstd.cpu();
          at::Tensor dz = torch::empty_like(rh), dy = torch::empty_like(yh);
          at::Tensor partials = torch::empty({3, ColumnBlocks(c), h});
          twin::BiasDropoutAddNormBackward(
              {gh.data_ptr(), zh.data_ptr(), meanh.data_ptr<float>(), rstdh.data_ptr<float>(),
               gmh.data_ptr(), dz.data_ptr(), dy.data_ptr(), partials[0].data_ptr<float>(),
               partials[1].data_ptr<float>(), partials[2].data_ptr<float>()},
              c, h, bits, static_cast<float>(scale), TypeOf(act), TypeOf(param));
          auto [kdz, kdy, kdb, kdg, kdbt] =
              fused::NormBackward(gc, kz, kmean, krstd, gamma, bits, scale, act);
          const at::Tensor sums = partials.sum(1);
          backward.error = std::max({RelativeError(kdz, dz), RelativeError(kdy, dy),
                                     RelativeError(kdb, sums[0]), RelativeError(kdg, sums[1]),
                                     RelativeError(kdbt, sums[2])});
          rows.push_back(backward);
        }
      }
    }
    // The one-pass fp8 cast (kernels/fp8_cuda.h): the encoder's input to
    // the feed-forward's first product, [tokens, hidden] in bf16, to e4m3
    // with its transpose and amax; the bytes must equal the twin's.
    if (pbert::model::fp8_kernels::Built()) {
      for (const Shape& shape : shapes) {
        const int64_t n = tokens, h = shape.hidden, c = check_tokens;
        const at::Tensor x = torch::randn({n, h}, torch::TensorOptions().device(gpu)).to(
            at::kBFloat16);
        const at::Tensor scale = torch::full({}, 64.0f, torch::TensorOptions().device(gpu));
        auto cast_on = [&](const at::Tensor& source, int64_t rows, const at::Tensor& on_scale,
                           at::Tensor& q, at::Tensor& q_t, at::Tensor& amax, at::Tensor& inv) {
          q = torch::empty({rows, h}, source.options().dtype(at::kByte));
          q_t = torch::empty({h, rows}, source.options().dtype(at::kByte));
          amax = torch::zeros({}, source.options().dtype(at::kFloat));
          inv = torch::zeros({}, source.options().dtype(at::kFloat));
          pbert::kernels::Fp8Cast cast;
          cast.x = source.data_ptr();
          cast.type = ElementType::kBFloat16;
          cast.rows = cast.padded_rows = rows;
          cast.cols = h;
          cast.scale = on_scale.data_ptr<float>();
          cast.out = q.data_ptr<uint8_t>();
          cast.out_t = q_t.data_ptr<uint8_t>();
          cast.amax = amax.data_ptr<float>();
          cast.inverse_scale = inv.data_ptr<float>();
          if (source.is_cuda()) {
            pbert::model::fp8_kernels::Cast(cast, source);
          } else {
            twin::CastFp8(cast);
          }
        };
        at::Tensor q, q_t, amax, inv;
        Row row{"fp8 cast (e4m3, transposed, amax)", shape.model, "bf16", n, h};
        row.seconds = median_time([&] { cast_on(x, n, scale, q, q_t, amax, inv); });
        row.bytes = n * h * (2.0 + 1 + 1);
        const at::Tensor xc = x.narrow(0, 0, c).contiguous();
        at::Tensor kq, kq_t, kamax, kinv, tq, tq_t, tamax, tinv;
        cast_on(xc, c, scale, kq, kq_t, kamax, kinv);
        cast_on(xc.cpu(), c, scale.cpu(), tq, tq_t, tamax, tinv);
        const bool same = at::equal(kq.cpu(), tq) && at::equal(kq_t.cpu(), tq_t) &&
                          at::equal(kamax.cpu(), tamax) && at::equal(kinv.cpu(), tinv);
        row.error = same ? 0 : 1;  // bytes: equal or not
        rows.push_back(row);
      }
    }
    // LAMB over each model's parameter shapes (the encoder's and the
    // embeddings', as one group), the kernel on the GPU and its twin on
    // copies: the weights after one step, and the gradient norms.
    for (const Shape& shape : shapes) {
      const int64_t h = shape.hidden, f = shape.ffn;
      const int layers = h == 768 ? 12 : 24;
      std::vector<int64_t> sizes = {30528 * h, 512 * h, 2 * h, h, h};
      for (int l = 0; l < layers; ++l) {
        for (int64_t n : {3 * h * h, 3 * h, h * h, h, h, h, f * h, f, h * f, h, h, h}) {
          sizes.push_back(n);
        }
      }
      int64_t total = 0;
      for (int64_t n : sizes) total += n;
      for (const bool lean : {false, true}) {  // lean: bf16 gradients and weight copies
        torch::manual_seed(3);
        pbert::optim::FusedLambGroup group;
        for (int64_t n : sizes) {
          group.weights.push_back(0.05 * torch::randn({n}, torch::TensorOptions().device(gpu)));
          group.grads.push_back(
              (1e-3 * torch::randn({n}, torch::TensorOptions().device(gpu)))
                  .to(lean ? at::kBFloat16 : at::kFloat));
          group.exp_avg.push_back(1e-4 * torch::randn({n}, torch::TensorOptions().device(gpu)));
          group.exp_avg_sq.push_back(
              1e-8 * torch::rand({n}, torch::TensorOptions().device(gpu)));
          if (lean) group.bf16_weights.push_back(group.weights.back().to(at::kBFloat16));
        }
        group.bias_correction1 = 1 - std::pow(0.9, 10);
        group.bias_correction2 = 1 - std::pow(0.999, 10);
        pbert::optim::LambOptions options(1e-3);
        // The twin's copies of the state before the step, of the tensors
        // it checks: the embeddings' and the first layer's (each tensor's
        // step depends on its own norms only; the kernel steps them all).
        const size_t checked = std::min<size_t>(sizes.size(), 17);
        std::vector<at::Tensor> w, g, m, v, w16;
        for (size_t i = 0; i < checked; ++i) {
          w.push_back(group.weights[i].cpu());
          g.push_back(group.grads[i].cpu());
          m.push_back(group.exp_avg[i].cpu());
          v.push_back(group.exp_avg_sq[i].cpu());
          if (lean) w16.push_back(group.bf16_weights[i].cpu());
        }
        pbert::optim::FusedLambStep(group, options);
        int64_t checked_total = 0;
        for (size_t i = 0; i < checked; ++i) checked_total += sizes[i];
        at::Tensor update = torch::empty({checked_total});
        pbert::kernels::LambGroup k;
        k.bf16_grads = lean;
        int64_t offset = 0;
        for (size_t i = 0; i < checked; ++i) {
          k.weights.push_back(w[i].data_ptr<float>());
          k.grads.push_back(g[i].data_ptr());
          k.exp_avg.push_back(m[i].data_ptr<float>());
          k.exp_avg_sq.push_back(v[i].data_ptr<float>());
          k.update.push_back(update.data_ptr<float>() + offset);
          if (lean) k.bf16_weights.push_back(static_cast<uint16_t*>(w16[i].data_ptr()));
          k.sizes.push_back(sizes[i]);
          offset += sizes[i];
        }
        pbert::optim::SetLambScalars(options, group.bias_correction1, group.bias_correction2, k);
        std::vector<double> norms(2 * checked);
        twin::LambStep(k, norms.data());
        const std::string types = lean ? "fp32, bf16 gradients and copies" : "fp32";
        Row step{"LAMB step", shape.model, types, static_cast<int64_t>(sizes.size()), total};
        double error = 0;
        for (size_t i = 0; i < checked; ++i) {
          error = std::max(error, RelativeError(group.weights[i], w[i]));
          if (lean) error = std::max(error, RelativeError(group.bf16_weights[i], w16[i]));
        }
        step.error = error;
        step.seconds = median_time([&] { pbert::optim::FusedLambStep(group, options); });
        // kernels/lamb_cuda.h: 40 bytes a parameter (38 with bf16
        // gradients, 2 more for the bf16 copy written).
        step.bytes = static_cast<double>(total) * 40.0;
        rows.push_back(step);
        Row norm{"gradient norms", shape.model, lean ? "bf16" : "fp32",
                 static_cast<int64_t>(sizes.size()), total};
        const at::Tensor kernel_norms = pbert::optim::FusedSquaredNorms(group.grads);
        std::vector<const void*> pointers;
        for (const at::Tensor& t : g) pointers.push_back(t.data_ptr());
        std::vector<double> twin_norms(checked);
        twin::SquaredNorms(pointers, std::vector<int64_t>(sizes.begin(), sizes.begin() + checked),
                           lean, twin_norms.data());
        norm.error = RelativeError(
            kernel_norms.narrow(0, 0, static_cast<int64_t>(checked)),
            torch::tensor(twin_norms, torch::TensorOptions().dtype(at::kDouble)));
        norm.seconds = median_time([&] { (void)pbert::optim::FusedSquaredNorms(group.grads); });
        norm.bytes = static_cast<double>(total) * (lean ? 2 : 4);
        rows.push_back(norm);
      }
    }
  } catch (const std::exception& e) {
    std::string why = e.what();
    return Usage(why.substr(0, why.find('\n')));
  }
  std::printf("| operation | model | act/param | rows x cols | largest difference from the twin "
              "| us | MB moved | TB/s | share of %s |\n|---|---|---|---|---|---|---|---|---|\n",
              bandwidth > 0 ? absl::StrFormat("%.2f TB/s", bandwidth / 1e12).c_str() : "the card");
  double worst_error = 0, least_share = 1;
  for (const Row& r : rows) {
    const double rate = r.bytes / r.seconds;
    std::printf("| %s | %s | %s | %lld x %lld | %.2e | %.1f | %.1f | %.2f | %s |\n", r.op.c_str(),
                r.model.c_str(), r.types.c_str(), static_cast<long long>(r.rows),
                static_cast<long long>(r.cols), r.error, r.seconds * 1e6, r.bytes / 1e6,
                rate / 1e12,
                bandwidth > 0 ? absl::StrFormat("%.0f%%", 100 * rate / bandwidth).c_str() : "-");
    worst_error = std::max(worst_error, r.error);
    if (bandwidth > 0) least_share = std::min(least_share, rate / bandwidth);
  }
  std::printf("\n[key] %zu kernels, largest difference from the twins %.1e, %s\n", rows.size(),
              worst_error,
              bandwidth > 0 ? absl::StrFormat("at least %.0f%% of the card's bandwidth",
                                              100 * least_share)
                                  .c_str()
                            : "the card's bandwidth unknown");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
