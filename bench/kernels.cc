// bench/kernels: the fused layer kernels (kernels/layer_cuda.h, through
// model/fused_layers_kernels.h) against their CPU twins
// (kernels/layer_cpu.h), after llm.c's dev/cuda. For each operation (bias
// and GELU, bias-dropout-residual-LayerNorm, forward and backward) at
// BERT-base's and BERT-large's shapes, bf16 activations with bf16 and with
// fp32 parameters: the largest difference between the kernel's outputs and
// its twin's (on the first --check-tokens tokens, as a share of the twin's
// largest magnitude), the kernel's time (CUDA events, the median of
// --repeat runs after 3 warm-up runs, on --tokens tokens), the bytes the
// operation must move and its bandwidth as a share of the card's (H100
// 3.35 TB/s, H200 4.8 TB/s). Last a line "[key] ..." (scripts/gpu's
// summary reads it). Well under a minute of GPU time.
//
//   build-gpu/bench/kernels [--tokens 16384] [--check-tokens 2048] [--repeat 20]
//
// On a machine without a GPU, or a build without the kernels, it says so
// in one line (exit 2).
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpu/gpu.h"
#include "kernels/layer_cpu.h"
#include "model/fused_layers_kernels.h"
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
