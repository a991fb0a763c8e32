// bench/gpu: training steps on a GPU, bf16: packed-bert on packed rows (the
// varlen layout: the model on the real tokens only, FlashAttention) against
// what users run otherwise, Hugging Face's BertForPreTraining with SDPA on
// the same sequences each padded to a row of 512, in micro-batches of as
// many rows as packed-bert's, gradients accumulated (bench/hf_peer.py,
// started by --peer, after this process has returned its cached GPU
// memory), for BERT-base and BERT-large. packed-bert runs as cases that
// take turns (each `steps / turns` timed steps a turn, after its warm-up
// steps): each lever added to the one before (autocast over fp32 weights
// with the _foreach LAMB; the fused LAMB; the vocabulary padded to 64; the
// one QKV product; the fused layers; bf16 weights with fp32 masters; static
// shapes; the captured step, run.cuda_graphs; with --fp8 1, the default, on
// GPUs with FP8 products, the encoder's products in fp8, model.precision
// fp8; a lever of the captured step or fp8 that fails is left out with a
// line saying why), then the fused-layers lever at each rows per
// step of --sweep. The peer trains on the first case's sequences, in bf16 autocast with fp32
// weights. Prints per model and case real tokens/s, sequences/s, model
// TFLOP/s and MFU (the model's own FLOPs per real token, attention over
// each sequence's own length, against the GPU's dense bf16 peak), the peak
// GPU memory the case needs alone (its weights, gradients and optimizer
// state, and the most a step allocates above them), the ratios to the
// peer, each lever's gain and the rows sweep.
//
//   build-gpu/bench/gpu [--models base,large] [--rows 32] [--steps 20] [--warmup 5]
//       [--histogram FILE] [--peer "python3 bench/hf_peer.py"] [--lengths-out FILE]
//       [--turns 4] [--sweep 16,32,48,64] [--profile N] [--fp8 1]
//
// --profile N: after the timed steps, N more steps of the first lever,
// the defaults and the last lever under LibTorch's profiler, and for each the table that
// train.profile_steps writes to profile.md (train/profiler.h,
// docs/performance.md).
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
#include <stdexcept>
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
               "[--warmup N] [--turns N] [--sweep 16,32,48,64] [--histogram FILE] "
               "[--peer COMMAND] [--lengths-out FILE] [--profile N] [--fp8 0|1]\n",
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

// The levers, each added to the one before (issue-style table: each row's
// gain over the row above), at the benchmark's rows per step; each is one
// switch of the config.
struct Lever {
  const char* label;
  bool fused_optimizer;
  int64_t vocab_padding;
  bool fused_qkv, fused_layers, master_weights;
  bool static_shapes = false, cuda_graphs = false;
  bool fp8 = false;
};
constexpr Lever kLevers[] = {
    {"autocast over fp32 weights, _foreach LAMB", false, 1, false, false, false},
    {"+ fused LAMB", true, 1, false, false, false},
    {"+ vocabulary padded to 64", true, 64, false, false, false},
    {"+ one QKV product", true, 64, true, false, false},
    {"+ fused bias-GELU, bias-dropout-residual-LayerNorm", true, 64, true, true, false},
    {"+ bf16 weights, fp32 masters", true, 64, true, true, true},
    {"+ static shapes", true, 64, true, true, true, true},
    {"+ captured step (CUDA graphs)", true, 64, true, true, true, true, true},
    {"+ fp8 encoder products (e4m3 forward, e5m2 backward, delayed scaling)", true, 64, true,
     true, true, true, true, true},
};
// The lever the rows sweep runs: every lever but the master weights.
constexpr size_t kSweepLever = 4;
// The last bf16 lever; the fp8 one comes after it where the GPU has FP8
// products (compute capability 8.9 on) and --fp8 1 asks for it.
constexpr size_t kBf16Levers = 8;

// The newest paths, whose failure leaves their lever out of the tables
// (with a line saying why) rather than ending the run: the captured step
// and fp8. Where the captured step failed, the fp8 lever runs without it.
bool Droppable(const Lever& lever) { return lever.cuda_graphs || lever.fp8; }

// One configuration of packed-bert's step: its levers and rows per step.
struct Case {
  std::string label;
  int rows = 32;
  Lever lever{};
  bool swept = false;  // one of the rows sweep's (or the sweep lever's own)
  bool dropped = false;  // a droppable lever that failed
  std::unique_ptr<pbert::train::Trainee> trainee;
  std::vector<pbert::train::MicroBatch> steps;  // every step's inputs, on the GPU
  std::vector<pbert::data::PackedBatch> batches;
  int64_t persistent_bytes = 0;  // weights, gradients, optimizer state
  int64_t transient_peak = 0;    // the most a step allocated above that
  Side side;
};

pbert::gpu::MemoryStats Memory() {
  auto m = pbert::gpu::Memory(0);
  if (!m.ok()) std::fprintf(stderr, "bench/gpu: %s\n", std::string(m.status().message()).c_str());
  return m.ok() ? *m : pbert::gpu::MemoryStats{};
}

int64_t Allocated() { return Memory().allocated; }

int Main(int argc, char** argv) {
  std::vector<std::string> models = {"base", "large"};
  int rows = 32, steps = 20, warmup = 5, profile = 0, turns = 4, fp8 = 1;
  std::vector<int> sweep;
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
    } else if (flag == "--turns" && absl::SimpleAtoi(value, &turns) && turns > 0) {
    } else if (flag == "--sweep") {
      for (absl::string_view r : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        int n = 0;
        if (!absl::SimpleAtoi(r, &n) || n <= 0) return Usage("bad --sweep " + value);
        sweep.push_back(n);
      }
    } else if (flag == "--histogram") {
      histogram_path = value;
    } else if (flag == "--peer") {
      peer = value;
    } else if (flag == "--lengths-out") {
      lengths_out = value;
    } else if (flag == "--profile" && absl::SimpleAtoi(value, &profile) && profile >= 0) {
    } else if (flag == "--fp8" && absl::SimpleAtoi(value, &fp8) && (fp8 == 0 || fp8 == 1)) {
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
  steps = (steps + turns - 1) / turns * turns;  // whole turns
  std::printf(
      "# %s, %d SMs; LibTorch %s; bf16; rows of %d tokens, %d packed rows per step (the "
      "peer: the same sequences, one per row, %d rows per micro-batch); per case %d warm-up "
      "steps, then %d timed steps in %d turns, the cases taking turns; lengths %s\n\n",
      facts->name.c_str(), facts->multiprocessors, TORCH_VERSION, kMaxLen, rows, rows, warmup,
      steps, turns, histogram.empty() ? "uniform in [32, 512]" : histogram_path.c_str());
  std::printf("| model | side | real tokens/s | sequences/s | model TFLOP/s | MFU (bf16 peak %.0f "
              "TFLOP/s) | peak GiB |\n|---|---|---|---|---|---|---|\n",
              peak / 1e12);
  const c10::Device device(c10::kCUDA, 0);
  auto communicator = pbert::distributed::Communicator::Single();
  size_t lever_count = kBf16Levers;
  if (fp8 == 1) {
    const absl::Status runs = pbert::model::CheckFp8({}, pbert::model::BertOptions(), device);
    if (runs.ok()) {
      lever_count = std::size(kLevers);
    } else {
      std::printf("# the fp8 lever is left out: %s\n\n", std::string(runs.message()).c_str());
    }
  }
  std::vector<std::string> ratios, profiles, levers, sweeps;
  for (const std::string& name : models) {
    const Shape* found = pbert::bench::FindModelSize(name);
    if (found == nullptr)
      return Usage("unknown model " + name + " (tiny, mini, medium, base, large)");
    const Shape& s = *found;
    // The cases: each lever at `rows`, then the last lever at each rows of
    // the sweep.
    std::vector<Case> cases;
    for (size_t k = 0; k < lever_count; ++k) {
      const Lever& lever = kLevers[k];
      Case c;
      c.label = lever.label;
      c.rows = rows;
      c.lever = lever;
      c.swept = &lever == &kLevers[kSweepLever];
      cases.push_back(std::move(c));
    }
    for (int r : sweep) {
      if (r == rows) continue;
      Case c;
      c.label = absl::StrCat(kLevers[kSweepLever].label, ", ", r, " rows");
      c.rows = r;
      c.lever = kLevers[kSweepLever];
      c.swept = true;
      cases.push_back(std::move(c));
    }
    // Enough sequences for every case's steps, packed by lp at depth 8.
    const int total_steps = warmup + steps;
    int most_rows = 0;
    for (const Case& c : cases) most_rows = std::max(most_rows, c.rows);
    std::vector<int> lengths =
        DrawLengths(histogram, static_cast<size_t>(most_rows) * 4 * total_steps, 7);
    std::vector<uint16_t> lengths16(lengths.begin(), lengths.end());
    auto packed = pbert::data::PackLengths("lp", lengths16, {kMaxLen, 8, 1});
    if (!packed.ok()) return Usage(std::string(packed.status().message()));
    std::vector<Instance> instances = MakeSequences(lengths, 11);
    json plan = json::array();  // per step of the first case: the lengths the peer trains on
    bool graphs_failed = false;
    for (Case& c : cases) {
      const bool first = &c == &cases.front();
      if (graphs_failed && c.lever.cuda_graphs) {
        c.lever.cuda_graphs = false;
        c.label += " (without CUDA graphs, which failed)";
      }
      for (int step = 0; step < total_steps; ++step) {
        std::vector<std::vector<const Instance*>> layout;
        json step_lengths = json::array();
        for (int r = 0; r < c.rows; ++r) {
          layout.emplace_back();
          for (uint32_t id : packed->index.Row(static_cast<uint64_t>(step) * c.rows + r)) {
            layout.back().push_back(&instances[id]);
            step_lengths.push_back(lengths[id]);
          }
        }
        auto batch = pbert::data::MakeBatch(layout, {kMaxLen, 8, 0});
        if (!batch.ok()) return Usage(std::string(batch.status().message()));
        c.batches.push_back(std::move(*batch));
        if (first) plan.push_back(step_lengths);
      }
      pbert::train::TraineeOptions options;
      options.bert = s.Options()
                         .attention(pbert::model::AttentionKind::kVarlen)
                         .vocab_padding(c.lever.vocab_padding)
                         .fused_qkv(c.lever.fused_qkv)
                         .fused_layers(c.lever.fused_layers)
                         .static_shapes(c.lever.static_shapes);
      options.cuda_graphs = c.lever.cuda_graphs;
      options.lamb = pbert::optim::LambOptions(1e-4);
      options.precision =
          c.lever.fp8 ? pbert::model::Precision::kFp8 : pbert::model::Precision::kBf16;
      options.device = device;
      options.seed = 1;
      options.master_weights = c.lever.master_weights;
      options.fused_optimizer = c.lever.fused_optimizer;
      const int64_t before = Allocated();
      // A droppable lever's failure leaves it out of the tables; any other
      // ends the run.
      std::string failed;
      int64_t weights = 0, with_inputs = 0;
      try {
        auto trainee = pbert::train::Trainee::Make(options, *communicator);
        if (!trainee.ok()) throw std::runtime_error(std::string(trainee.status().message()));
        c.trainee = std::move(*trainee);
        weights = Allocated() - before;
        // Every step's inputs on the GPU before the clock starts, as the
        // loader's threads make them ahead of the steps in a run.
        auto prepared = pbert::train::Prepare(c.batches, c.trainee->input_plan());
        if (!prepared.ok()) throw std::runtime_error(std::string(prepared.status().message()));
        c.steps = std::move(*prepared);
        with_inputs = Allocated();
        for (int step = 0; step < warmup; ++step) {
          auto result =
              pbert::train::TrainStep(*c.trainee, *communicator, {c.steps[step]}, 1e-4, {});
          if (!result.ok()) throw std::runtime_error(std::string(result.status().message()));
        }
        (void)pbert::gpu::Synchronize(0);
      } catch (const std::exception& e) {
        failed = e.what();
        failed = failed.substr(0, failed.find('\n'));
      }
      if (!failed.empty()) {
        if (!Droppable(c.lever)) return Usage(failed);
        std::printf("# %s: the lever \"%s\" is left out, it failed: %s\n\n", s.name.c_str(),
                    c.label.c_str(), failed.c_str());
        graphs_failed = graphs_failed || c.lever.cuda_graphs;
        c.trainee.reset();
        c.steps.clear();
        c.dropped = true;
        continue;
      }
      // What stays between steps: weights, gradients, optimizer state (the
      // inputs, made ahead here, are not the case's own).
      c.persistent_bytes = weights + (Allocated() - with_inputs);
    }
    // The levers left (the dropped ones come after kSweepLever).
    size_t model_levers = lever_count;
    for (size_t k = 0; k < lever_count; ++k) model_levers -= cases[k].dropped ? 1 : 0;
    cases.erase(std::remove_if(cases.begin(), cases.end(), [](const Case& c) { return c.dropped; }),
                cases.end());
    // The timed steps: each case in turn, `steps / turns` steps a turn.
    const int per_turn = steps / turns;
    for (int turn = 0; turn < turns; ++turn) {
      for (Case& c : cases) {
        (void)pbert::gpu::Synchronize(0);
        (void)pbert::gpu::ResetPeakMemory(0);
        const int64_t at_start = Allocated();
        const auto start = std::chrono::steady_clock::now();
        for (int k = 0; k < per_turn; ++k) {
          const int step = warmup + turn * per_turn + k;
          auto result =
              pbert::train::TrainStep(*c.trainee, *communicator, {c.steps[step]}, 1e-4, {});
          if (!result.ok()) return Usage(std::string(result.status().message()));
          c.side.tokens += static_cast<double>(c.batches[step].tokens);
          c.side.sequences += static_cast<double>(c.batches[step].sequences.size());
          c.side.flops +=
              pbert::model::TrainingFlops(c.trainee->model()->options, c.steps[step].work);
        }
        (void)pbert::gpu::Synchronize(0);
        c.side.seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        c.transient_peak =
            std::max(c.transient_peak, Memory().peak_allocated - at_start);
      }
    }
    for (Case& c : cases) {
      c.side.peak_bytes = static_cast<double>(c.persistent_bytes + c.transient_peak);
      Print(s.name, absl::StrCat("packed-bert (varlen), ", c.label), c.side, peak);
    }
    // Each lever's gain over the row above it, and the sweep.
    for (size_t k = 0; k < model_levers; ++k) {
      const Side& r = cases[k].side;
      levers.push_back(absl::StrFormat(
          "| %s | %s | %.0f | %s |", s.name, cases[k].label, r.tokens / r.seconds,
          k == 0 ? "-"
                 : absl::StrFormat("%.3f", (r.tokens / r.seconds) /
                                               (cases[k - 1].side.tokens / cases[k - 1].side.seconds))));
    }
    for (const Case& c : cases) {
      if (!c.swept) continue;
      sweeps.push_back(absl::StrFormat("| %s | %d | %.0f | %.1f |", s.name, c.rows,
                                       c.side.tokens / c.side.seconds, c.side.peak_bytes / (1 << 30)));
    }
    if (profile > 0) {
      // The first lever, the defaults and the last lever again, under the
      // profiler: the table of profile.md for each.
      for (size_t k : {size_t{0}, kSweepLever, model_levers - 1}) {
        Case& c = cases[k];
        pbert::train::StepProfiler profiler({1, profile}, "", device);
        for (int step = 1; step <= profile; ++step) {
          if (!profiler.Before(step).ok()) return Usage("the profiler did not start");
          const auto begin = std::chrono::steady_clock::now();
          auto result = pbert::train::TrainStep(*c.trainee, *communicator,
                                                {c.steps[(step - 1) % total_steps]}, 1e-4, {});
          if (!result.ok()) return Usage(std::string(result.status().message()));
          (void)pbert::gpu::Synchronize(0);
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          if (!profiler.After(step, seconds).ok()) return Usage("the profiler did not finish");
        }
        if (profiler.summary() != nullptr) {
          profiles.push_back(absl::StrCat("## ", s.name, ": ", c.label, ", ", c.rows, " rows\n\n",
                                          profiler.summary()->Markdown({1, profile})));
        }
      }
    }
    const Side ours = cases.front().side;
    const Side lean = cases[model_levers - 1].side;
    const std::string lean_label = cases[model_levers - 1].label;
    cases.clear();  // the trainees' memory back before the peer runs
    if (peer.empty()) continue;
    // The peer gets the GPU's whole memory: this process's cached blocks go
    // back to the driver first.
    (void)pbert::gpu::ReleaseCachedMemory(0);
    // The peer: the first case's sequences, one per row, from a file, in
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
    const double hf = theirs.tokens / theirs.seconds;
    ratios.push_back(absl::StrFormat(
        "%s: packed-bert / Hugging Face, real tokens/s: %.2f (%s), %.2f (%s)", s.name,
        (ours.tokens / ours.seconds) / hf, kLevers[0].label, (lean.tokens / lean.seconds) / hf,
        lean_label));
  }
  std::printf("\n");
  for (const std::string& line : ratios) std::printf("%s\n", line.c_str());
  std::printf("\n## Each lever's gain (real tokens/s, %d rows per step; the ratio to the row "
              "above)\n\n| model | lever | real tokens/s | gain |\n|---|---|---|---|\n",
              rows);
  for (const std::string& line : levers) std::printf("%s\n", line.c_str());
  if (!sweeps.empty()) {
    std::printf("\n## Rows per step (%s)\n\n| model | rows | real tokens/s | peak GiB |\n"
                "|---|---|---|---|\n",
                kLevers[kSweepLever].label);
    for (const std::string& line : sweeps) std::printf("%s\n", line.c_str());
  }
  for (const std::string& table : profiles) std::printf("\n%s", table.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
