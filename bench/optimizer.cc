// bench/optimizer: one LAMB step over the parameters of BERT models (tiny,
// base, large), grouped as train groups them (decay and trust ratio; bias
// and LayerNorm without), two ways, taking turns:
//
//   per-parameter  LAMB as packed-bert ran it before its multi-tensor step:
//                  a fused two-pass CPU loop per parameter (kept here as the
//                  baseline)
//   multi-tensor   optim::Lamb: _foreach_ operations over all parameters
//
// and the global gradient norm accumulated in double (optim::GlobalGradNorm)
// beside the float norm it replaced. Prints medians, the ratio, and the
// largest difference between the two sides' weights after all rounds.
//
//   build/bench/optimizer [--rounds 5] [--models tiny,base,large] [--threads N]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/model_sizes.h"
#include "common/platform.h"
#include "model/bert.h"
#include "optim/lamb.h"

namespace {

using pbert::optim::Lamb;
using pbert::optim::LambOptions;

using Shape = pbert::bench::ModelSize;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Time(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The baseline: one parameter's LAMB update on the CPU in two passes over
// memory (contiguous float tensors): the first updates the moments and sums
// |w|^2 and |u|^2 over fixed blocks, the second applies the update,
// recomputed from the moments.
void PerParameterStep(float* w, const float* g, float* m, float* v, int64_t n,
                      const LambOptions& options, double c1, double c2) {
  const auto [beta1, beta2] = options.betas();
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float a1 = static_cast<float>(1 - beta1), a2 = static_cast<float>(1 - beta2);
  const float tc1 = static_cast<float>(c1), tc2 = static_cast<float>(c2);
  const float eps = static_cast<float>(options.eps()), wd = static_cast<float>(options.weight_decay());
  auto update = [&](int64_t i) {
    const float u = (m[i] / tc1) / (std::sqrt(v[i] / tc2) + eps);
    return wd != 0 ? u + wd * w[i] : u;
  };
  const int64_t block = 16384, blocks = (n + block - 1) / block;
  std::vector<double> w_sq(blocks), u_sq(blocks);
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      double ws = 0, us = 0;
      for (int64_t i = b * block, end = std::min(n, i + block); i < end; ++i) {
        m[i] = m[i] * b1 + a1 * g[i];
        v[i] = v[i] * b2 + a2 * (g[i] * g[i]);
        const float u = update(i);
        ws += static_cast<double>(w[i]) * w[i];
        us += static_cast<double>(u) * u;
      }
      w_sq[b] = ws;
      u_sq[b] = us;
    }
  });
  double ws = 0, us = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    ws += w_sq[b];
    us += u_sq[b];
  }
  const double w_norm = std::sqrt(ws), u_norm = std::sqrt(us);
  const float step = static_cast<float>(
      -options.lr() * (options.trust_ratio() && w_norm > 0 && u_norm > 0 ? w_norm / u_norm : 1.0));
  at::parallel_for(0, n, block, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) w[i] = w[i] + step * update(i);
  });
}

// A copy of the model's parameters with gradients, grouped as train groups
// them, and their moments.
struct Side {
  std::vector<at::Tensor> params;
  std::vector<LambOptions> options;  // each parameter's group's
  std::vector<at::Tensor> m, v;
  int64_t steps = 0;
  std::unique_ptr<Lamb> lamb;  // the multi-tensor side
};

Side MakeSide(pbert::model::BertForPreTraining& model, bool multi_tensor) {
  Side side;
  torch::OrderedDict<std::string, at::Tensor> named;
  torch::manual_seed(2);
  for (const auto& item : model->named_parameters()) {
    at::Tensor p = item.value().detach().clone().requires_grad_();
    p.mutable_grad() = torch::randn_like(p) * 1e-3;
    named.insert(item.key(), p);
  }
  const LambOptions options(1e-4);
  auto groups = pbert::optim::BertParamGroups(named, options, true);
  for (const auto& group : groups) {
    for (const auto& p : group.params()) {
      side.params.push_back(p);
      side.options.push_back(static_cast<const LambOptions&>(group.options()));
      side.m.push_back(torch::zeros_like(p));
      side.v.push_back(torch::zeros_like(p));
    }
  }
  if (multi_tensor) side.lamb = std::make_unique<Lamb>(std::move(groups), options);
  return side;
}

void Step(Side& side) {
  if (side.lamb) {
    side.lamb->step();
    return;
  }
  at::NoGradGuard no_grad;
  side.steps += 1;
  for (size_t i = 0; i < side.params.size(); ++i) {
    const auto [beta1, beta2] = side.options[i].betas();
    const double t = static_cast<double>(side.steps);
    PerParameterStep(side.params[i].data_ptr<float>(), side.params[i].grad().data_ptr<float>(),
                     side.m[i].data_ptr<float>(), side.v[i].data_ptr<float>(),
                     side.params[i].numel(), side.options[i], 1 - std::pow(beta1, t),
                     1 - std::pow(beta2, t));
  }
}

int Main(int argc, char** argv) {
  int rounds = 5, threads = 0;
  std::vector<std::string> models = {"tiny", "base", "large"};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--rounds" && has_value && absl::SimpleAtoi(argv[i + 1], &rounds) && rounds > 0) {
      ++i;
    } else if (flag == "--threads" && has_value && absl::SimpleAtoi(argv[i + 1], &threads) &&
               threads > 0) {
      ++i;
    } else if (flag == "--models" && has_value) {
      models = absl::StrSplit(argv[++i], ',');
    } else {
      std::fprintf(stderr,
                   "bench/optimizer: bad argument '%s'\nusage: optimizer [--rounds N] "
                   "[--models tiny,base,large] [--threads N]\n",
                   argv[i]);
      return 2;
    }
  }
  pbert::TuneMalloc();
  pbert::IgnoreOpenBlasCoretype();
  pbert::TuneOpenBlasKernels();
  at::set_num_threads(threads > 0 ? threads
                                  : static_cast<int>(std::thread::hardware_concurrency()));
  std::printf("# one LAMB step, CPU, %d threads, medians of %d rounds (one warm-up round first)\n",
              at::get_num_threads(), rounds);
  std::printf("%-6s %11s %8s %16s %15s %7s %11s %12s %12s\n", "model", "parameters", "tensors",
              "per-parameter s", "multi-tensor s", "ratio", "max |dw|", "norm f64 s",
              "norm f32 s");
  for (const std::string& name : models) {
    const Shape* found = pbert::bench::FindModelSize(name);
    if (found == nullptr) {
      std::fprintf(stderr,
                   "bench/optimizer: unknown model '%s' (tiny, mini, medium, base or large)\n",
                   name.c_str());
      return 2;
    }
    const Shape& s = *found;
    torch::manual_seed(1);
    pbert::model::BertForPreTraining model(s.Options());
    Side baseline = MakeSide(model, false), multi = MakeSide(model, true);
    model = nullptr;  // only the copies are stepped
    int64_t count = 0;
    for (const auto& p : baseline.params) count += p.numel();
    std::vector<double> per_parameter, multi_tensor, norm64, norm32;
    for (int r = 0; r <= rounds; ++r) {
      const double a = Time([&] { Step(baseline); });
      const double b = Time([&] { Step(multi); });
      const auto& params = multi.params;
      const double t64 = Time([&] { (void)pbert::optim::GlobalGradNorm(params).item<double>(); });
      const double t32 = Time([&] {
        std::vector<at::Tensor> norms;
        for (const auto& p : params) norms.push_back(p.grad().norm(2));
        (void)torch::stack(norms).norm(2).item<double>();
      });
      if (r == 0) continue;
      per_parameter.push_back(a);
      multi_tensor.push_back(b);
      norm64.push_back(t64);
      norm32.push_back(t32);
    }
    double difference = 0;
    for (size_t i = 0; i < baseline.params.size(); ++i) {
      difference = std::max(
          difference, (baseline.params[i] - multi.params[i]).abs().max().item<double>());
    }
    std::printf("%-6s %11lld %8zu %16.4f %15.4f %7.2f %11.2e %12.4f %12.4f\n", s.name.c_str(),
                static_cast<long long>(count), baseline.params.size(), Median(per_parameter),
                Median(multi_tensor), Median(multi_tensor) / Median(per_parameter), difference,
                Median(norm64), Median(norm32));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pbert::UsePassiveOpenMpWait(argv);  // as packed-bert train runs
  return Main(argc, argv);
}
