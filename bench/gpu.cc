// bench/gpu: training steps on a GPU, bf16: packed-bert on packed rows (the
// varlen layout: the model on the real tokens only, FlashAttention) against
// what users run otherwise, Hugging Face's BertForPreTraining with SDPA on
// the same sequences each padded to a row of 512, in micro-batches of as
// many rows as packed-bert's, gradients accumulated (bench/hf_peer.py,
// started by --peer, after this process has returned its cached GPU
// memory), for BERT-base and BERT-large. Both sides train on the same
// sequences per step (lengths from Wikipedia's published histogram, or
// uniform when none is given), in bf16 autocast with fp32 weights, and are
// timed over the same steps after warm-up steps. Prints per model and side
// real tokens/s, sequences/s, model TFLOP/s and MFU (the model's own FLOPs
// per real token, attention over each sequence's own length, against the
// GPU's dense bf16 peak), peak GPU memory, and the ratio of real tokens/s.
//
//   build-gpu/bench/gpu [--models base,large] [--rows 32] [--steps 20] [--warmup 5]
//       [--histogram FILE] [--peer "python3 bench/hf_peer.py"] [--lengths-out FILE]
//       [--profile N]
//
// --profile N: after the timed steps, N more steps of packed-bert under
// LibTorch's profiler, and per model the table train.profile_steps writes
// to profile.md (train/profiler.h, docs/performance.md).
//
// On a machine without a GPU it says so in one line (exit 2).
#include "gpu/gpu.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/model_sizes.h"
#include "bench/synthetic.h"
#include "data/batch.h"
#include "data/histogram.h"
#include "data/packing/pack.h"
#include "distributed/communicator.h"
#include "model/bert.h"
#include "model/flops.h"
#include "nlohmann/json.hpp"
#include "train/peak_flops.h"
#include "train/profiler.h"
#include "train/step.h"
#include "train/trainee.h"

namespace {

using pbert::bench::DrawLengths;
using pbert::bench::MakeSequences;
using pbert::data::Instance;
using json = nlohmann::json;

constexpr int kMaxLen = 512;

using Shape = pbert::bench::ModelSize;

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "bench/gpu: %s\nusage: gpu [--models base,large] [--rows N] [--steps N] "
               "[--warmup N] [--histogram FILE] [--peer COMMAND] [--lengths-out FILE] "
               "[--profile N]\n",
               why.c_str());
  return 2;
}

struct Side {
  double seconds = 0, tokens = 0, sequences = 0, flops = 0, peak_bytes = 0;
};

void Print(const std::string& model, const std::string& side, const Side& r, double peak) {
  const double tflops = r.flops / r.seconds / 1e12;
  std::printf("| %s | %s | %.0f | %.1f | %.1f | %s | %.1f |\n", model.c_str(), side.c_str(),
              r.tokens / r.seconds, r.sequences / r.seconds, tflops,
              peak > 0 ? absl::StrCat(static_cast<int>(100 * tflops * 1e12 / peak + 0.5), "%").c_str()
                       : "-",
              r.peak_bytes / (1 << 30));
}

int Main(int argc, char** argv) {
  std::vector<std::string> models = {"base", "large"};
  int rows = 32, steps = 20, warmup = 5, profile = 0;
  std::string histogram_path, peer, lengths_out = "gpu-lengths.json";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage("flag " + flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--models") {
      models = absl::StrSplit(value, ',');
    } else if (flag == "--rows" && absl::SimpleAtoi(value, &rows) && rows > 0) {
    } else if (flag == "--steps" && absl::SimpleAtoi(value, &steps) && steps > 0) {
    } else if (flag == "--warmup" && absl::SimpleAtoi(value, &warmup) && warmup >= 0) {
    } else if (flag == "--histogram") {
      histogram_path = value;
    } else if (flag == "--peer") {
      peer = value;
    } else if (flag == "--lengths-out") {
      lengths_out = value;
    } else if (flag == "--profile" && absl::SimpleAtoi(value, &profile) && profile >= 0) {
    } else {
      return Usage("bad flag or value: " + flag + " " + value);
    }
  }
  if (!pbert::gpu::Built() || torch::cuda::device_count() == 0) {
    std::fprintf(stderr, "bench/gpu: no CUDA GPU here (%s); run it on a GPU machine "
                         "(scripts/gpu)\n",
                 pbert::gpu::Built() ? "none visible" : "this build has no CUDA");
    return 2;
  }
  std::vector<uint64_t> histogram;
  if (!histogram_path.empty()) {
    auto read = pbert::data::ReadHistogramFile(histogram_path, kMaxLen);
    if (!read.ok()) return Usage(std::string(read.status().message()));
    histogram = read->counts;
  }
  auto facts = pbert::gpu::Describe(0);
  if (!facts.ok()) return Usage(std::string(facts.status().message()));
  const double peak = pbert::train::GpuPeakFlops(facts->name, pbert::model::Precision::kBf16);
  std::printf(
      "# %s, %d SMs; LibTorch %s; bf16 autocast, fp32 weights; rows of %d tokens, "
      "%d packed rows per step (the peer: the same sequences, one per row, %d rows per "
      "micro-batch); %d warm-up and %d timed steps; lengths %s\n\n",
      facts->name.c_str(), facts->multiprocessors, TORCH_VERSION, kMaxLen, rows, rows, warmup,
      steps, histogram.empty() ? "uniform in [32, 512]" : histogram_path.c_str());
  std::printf("| model | side | real tokens/s | sequences/s | model TFLOP/s | MFU (bf16 peak %.0f "
              "TFLOP/s) | peak GiB |\n|---|---|---|---|---|---|---|\n",
              peak / 1e12);
  const c10::Device device(c10::kCUDA, 0);
  auto communicator = pbert::distributed::Communicator::Single();
  std::vector<std::string> ratios, profiles;
  for (const std::string& name : models) {
    const Shape* found = pbert::bench::FindModelSize(name);
    if (found == nullptr)
      return Usage("unknown model " + name + " (tiny, mini, medium, base, large)");
    const Shape& s = *found;
    // Enough sequences for every step's rows, packed by lp at depth 8.
    const int total_steps = warmup + steps;
    std::vector<int> lengths = DrawLengths(histogram, static_cast<size_t>(rows) * 4 * total_steps, 7);
    std::vector<uint16_t> lengths16(lengths.begin(), lengths.end());
    auto packed = pbert::data::PackLengths("lp", lengths16, {kMaxLen, 8, 1});
    if (!packed.ok()) return Usage(std::string(packed.status().message()));
    std::vector<Instance> instances = MakeSequences(lengths, 11);
    std::vector<pbert::data::PackedBatch> batches;
    json plan = json::array();  // per step: the lengths the peer trains on
    for (int step = 0; step < total_steps; ++step) {
      std::vector<std::vector<const Instance*>> layout;
      json step_lengths = json::array();
      for (int r = 0; r < rows; ++r) {
        layout.emplace_back();
        for (uint32_t id : packed->index.Row(static_cast<uint64_t>(step) * rows + r)) {
          layout.back().push_back(&instances[id]);
          step_lengths.push_back(lengths[id]);
        }
      }
      auto batch = pbert::data::MakeBatch(layout, {kMaxLen, 8, 0});
      if (!batch.ok()) return Usage(std::string(batch.status().message()));
      batches.push_back(std::move(*batch));
      plan.push_back(step_lengths);
    }
    pbert::train::TraineeOptions options;
    options.bert = pbert::model::BertOptions()
                       .hidden_size(s.hidden)
                       .num_layers(s.layers)
                       .num_heads(s.heads)
                       .intermediate_size(s.ffn)
                       .attention(pbert::model::AttentionKind::kVarlen);
    options.lamb = pbert::optim::LambOptions(1e-4);
    options.precision = pbert::model::Precision::kBf16;
    options.device = device;
    options.seed = 1;
    Side ours;
    {
      auto trainee = pbert::train::Trainee::Make(options, *communicator);
      if (!trainee.ok()) return Usage(std::string(trainee.status().message()));
      // Every step's inputs on the GPU before the clock starts, as the
      // loader's threads make them ahead of the steps in a run.
      auto prepared = pbert::train::Prepare(batches, (*trainee)->input_plan());
      if (!prepared.ok()) return Usage(std::string(prepared.status().message()));
      (void)pbert::gpu::ResetPeakMemory(0);
      std::chrono::steady_clock::time_point start;
      for (int step = 0; step < total_steps; ++step) {
        if (step == warmup) {
          (void)pbert::gpu::Synchronize(0);
          start = std::chrono::steady_clock::now();
        }
        auto result =
            pbert::train::TrainStep(**trainee, *communicator, {(*prepared)[step]}, 1e-4, {});
        if (!result.ok()) return Usage(std::string(result.status().message()));
        if (step < warmup) continue;
        ours.tokens += static_cast<double>(batches[step].tokens);
        ours.sequences += static_cast<double>(batches[step].sequences.size());
        ours.flops +=
            pbert::model::TrainingFlops((*trainee)->model()->options, (*prepared)[step].work);
      }
      (void)pbert::gpu::Synchronize(0);
      ours.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ours.peak_bytes = static_cast<double>(pbert::gpu::Memory(0)->peak_allocated);
      if (profile > 0) {
        // The same steps again, under the profiler: the table of profile.md.
        pbert::train::StepProfiler profiler({1, profile}, "", device);
        for (int step = 1; step <= profile; ++step) {
          if (!profiler.Before(step).ok()) return Usage("the profiler did not start");
          const auto begin = std::chrono::steady_clock::now();
          auto result = pbert::train::TrainStep(
              **trainee, *communicator, {(*prepared)[(step - 1) % total_steps]}, 1e-4, {});
          if (!result.ok()) return Usage(std::string(result.status().message()));
          (void)pbert::gpu::Synchronize(0);
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          if (!profiler.After(step, seconds).ok()) return Usage("the profiler did not finish");
        }
        if (profiler.summary() != nullptr) {
          profiles.push_back(absl::StrCat("## ", s.name, "\n\n",
                                          profiler.summary()->Markdown({1, profile})));
        }
      }
    }
    Print(s.name, "packed-bert, packed rows (varlen)", ours, peak);
    if (peer.empty()) continue;
    // The peer gets the GPU's whole memory: this process's cached blocks go
    // back to the driver first.
    (void)pbert::gpu::ReleaseCachedMemory(0);
    // The peer: the same steps' sequences, one per row, from a file, in
    // micro-batches of as many rows as packed-bert's.
    std::ofstream(lengths_out) << json{{"hidden", s.hidden}, {"layers", s.layers},
                                       {"heads", s.heads},   {"ffn", s.ffn},
                                       {"max_len", kMaxLen}, {"warmup", warmup},
                                       {"micro_rows", rows}, {"steps", plan}}
                                      .dump();
    const std::string command = peer + " " + lengths_out;
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    size_t n;
    while (pipe != nullptr && (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
    const int status = pipe != nullptr ? pclose(pipe) : -1;
    json r = json::parse(out.substr(out.rfind('{') == std::string::npos ? 0 : out.rfind('{')), nullptr,
                         false);
    if (status != 0 || r.is_discarded()) {
      std::printf("| %s | Hugging Face BertForPreTraining (SDPA), padded | failed: %s | | | | |\n",
                  s.name.c_str(), command.c_str());
      continue;
    }
    Side theirs;
    theirs.seconds = r["seconds"].get<double>();
    theirs.tokens = r["tokens"].get<double>();
    theirs.sequences = r["sequences"].get<double>();
    theirs.peak_bytes = r["peak_bytes"].get<double>();
    theirs.flops = ours.flops * (theirs.tokens / ours.tokens);  // the same sequences: the same model FLOPs
    Print(s.name, absl::StrCat("Hugging Face BertForPreTraining (SDPA, torch ",
                               r["torch"].get<std::string>(), "), padded"),
          theirs, peak);
    ratios.push_back(absl::StrFormat("%s: packed-bert / Hugging Face, real tokens/s: %.2f", s.name,
                                     (ours.tokens / ours.seconds) / (theirs.tokens / theirs.seconds)));
  }
  std::printf("\n");
  for (const std::string& line : ratios) std::printf("%s\n", line.c_str());
  for (const std::string& table : profiles) std::printf("\n%s", table.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
