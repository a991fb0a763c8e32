// bench/gpu: training steps on a GPU, bf16: packed-bert on packed rows (the
// varlen layout: the model on the real tokens only, FlashAttention) against
// what users run otherwise, Hugging Face's BertForPreTraining with SDPA on
// the same sequences each padded to a row of 512, in micro-batches of as
// many rows as packed-bert's, gradients accumulated (bench/hf_peer.py,
// started by --peer), for BERT-base and BERT-large.
//
// packed-bert runs as cases that take turns, each case a lever added to the
// one before (autocast over fp32 weights with the _foreach LAMB; the fused
// LAMB; the vocabulary padded to 64; the one QKV product; the fused layers;
// bf16 weights with fp32 masters; static shapes; the captured step,
// run.cuda_graphs; cuDNN's fused attention for the varlen layout in place
// of FlashAttention's, model.varlen_kernel cudnn; with --fp8 1, the
// default, the encoder's products in fp8, model.precision fp8), then the
// fused-layers lever at each rows per step of --sweep. Every case's turn
// runs in a process of its own (this binary again, with --case): a lever
// that fails (a capture that leaves CUDA's state behind, an out-of-memory
// error, a crash, a hang past --case-timeout) cannot touch the others; it
// is left out of the tables with a line saying why. Before it builds its
// model a case estimates its memory (16 bytes a parameter; activations
// from the peaks measured in the rows sweep, twice over for a captured
// step, whose graph holds a pool of its own) and is refused with a line
// where the GPU's free memory cannot hold it.
//
// Prints per model and case real tokens/s, sequences/s, model TFLOP/s and
// MFU (the model's own FLOPs per real token, attention over each
// sequence's own length, against the GPU's dense bf16 peak), the peak GPU
// memory the case needs (its weights, gradients and optimizer state, and
// the most a step allocates above them), the ratios to the peer, each
// lever's gain and the rows sweep; last a line "[key] ..." with each
// model's best figure (scripts/gpu's summary reads the last such line).
// After each model's cases, its lever table and a key line so far are
// printed at once: a run cut short by its time limit keeps them.
//
//   build-gpu/bench/gpu [--models base,large] [--rows 32] [--steps 20] [--warmup 5]
//       [--histogram FILE] [--peer "python3 bench/hf_peer.py"] [--lengths-out FILE]
//       [--turns 4] [--sweep 16,32,48,64] [--profile N] [--fp8 1] [--case-timeout 240]
//       [--levers 0,4,9] [--alone 1]
//   build-gpu/bench/gpu --quick [--histogram FILE]
//
// --quick: BERT-large and BERT-base, every lever, 32 rows, 12 timed steps
// in one turn after 3 warm-up steps, one profile (BERT-large's last lever);
// about 3 minutes on an H100 or H200, within 80 GB.
// --levers: only these levers (0 the first, 8 cuDNN's attention, 9 fp8),
// and with --profile
// each profiled.
// --alone 1: also each lever alone, as cases taking turns with the others:
// the first lever with only what that lever adds (the captured step with
// the static shapes it needs), in a table of its own with each one's ratio
// to the first lever; with --levers 0,9 the table holds the first lever,
// each lever alone and all of them together.
// --profile N: after the timed steps, N more steps of the first lever,
// the fused layers' and the last lever under LibTorch's profiler, and for
// each the table that train.profile_steps writes to profile.md
// (train/profiler.h, docs/performance.md).
// --device cpu: the same cases on the CPU (in fp32 where a lever asks for
// bf16 weights the CPU keeps them), for a dry run of the processes and
// tables without a GPU (tests/scripts/gpu_dry_run.sh); --fail LEVER:KIND
// (repeatable) makes that lever's process crash, exit 2, hang or report
// running out of memory (KIND crash, exit, hang, oom), as the dry run checks.
//
// On a machine without a GPU it says so in one line (exit 2). It exits 1
// when a case other than the captured step's, cuDNN attention's and fp8's
// failed.
#include "gpu/gpu.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/model_sizes.h"
#include "common/config.h"
#include "bench/peer.h"
#include "bench/synthetic.h"
#include "data/batch.h"
#include "data/histogram.h"
#include "data/packing/pack.h"
#include "distributed/communicator.h"
#include "model/attention.h"
#include "model/bert.h"
#include "model/flops.h"
#include "nlohmann/json.hpp"
#include "train/peak_flops.h"
#include "train/profiler.h"
#include "train/step.h"
#include "train/trainee.h"
#include "train/training_plan.h"
#include "yaml-cpp/yaml.h"

namespace {

using pbert::bench::DrawLengths;
using pbert::bench::MakeSequences;
using pbert::data::Instance;
using json = nlohmann::json;

constexpr int kMaxLen = 512;

using Shape = pbert::bench::ModelSize;

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "bench/gpu: %s\nusage: gpu [--quick] [--models base,large] [--rows N] [--steps N] "
               "[--warmup N] [--turns N] [--sweep 16,32,48,64] [--histogram FILE] "
               "[--peer COMMAND] [--lengths-out FILE] [--profile N] [--fp8 0|1] [--alone 0|1] "
               "[--case-timeout SECONDS] [--levers 0,4,8] [--device cuda|cpu] "
               "[--fail LEVER:crash|exit|hang|oom]\n",
               why.c_str());
  return 2;
}

struct Side {
  double seconds = 0, tokens = 0, sequences = 0, flops = 0, peak_bytes = 0;
};

// The levers, each added to the one before (issue-style table: each row's
// gain over the row above), at the benchmark's rows per step. Each is the
// config settings, as --set takes them, that switch it on: a row is what a
// user's config gives, and the trainee is made from the config as `train`
// makes it (train::TraineeOptionsOf).
struct LeverSets {
  const char* label;
  std::array<const char*, 9> sets;  // then nullptr
};
constexpr LeverSets kLevers[] = {
    {"autocast over fp32 weights, _foreach LAMB",
     {"model.attention=varlen", "optim.fused=false", "model.vocab_padding=1",
      "model.fused_qkv=false", "model.fused_layers=false", "model.master_weights=false",
      "model.static_shapes=false", "run.cuda_graphs=false", "model.varlen_kernel=flash"}},
    {"+ fused LAMB", {"optim.fused=true"}},
    {"+ vocabulary padded to 64", {"model.vocab_padding=64"}},
    {"+ one QKV product", {"model.fused_qkv=true"}},
    {"+ fused bias-GELU, bias-dropout-residual-LayerNorm", {"model.fused_layers=true"}},
    {"+ bf16 weights, fp32 masters", {"model.master_weights=true"}},
    {"+ static shapes", {"model.static_shapes=true"}},
    // (Alone, the captured step brings the static shapes it needs.)
    {"+ captured step (CUDA graphs)", {"run.cuda_graphs=true", "model.static_shapes=true"}},
    {"+ cuDNN's fused attention (model.varlen_kernel cudnn)", {"model.varlen_kernel=cudnn"}},
    {"+ fp8 encoder products (e4m3 forward, e5m2 backward, delayed scaling)",
     {"model.precision=fp8"}},
};
constexpr int kLeverCount = static_cast<int>(std::size(kLevers));

// Lever k alone (--alone): the first lever with only what lever k adds to
// the one before it; case index kLeverCount + k - 1 for k = 1..kLeverCount-1.
constexpr int kAloneCount = kLeverCount - 1;
bool IsAlone(int index) { return index >= kLeverCount; }

// Case `index`'s settings: the device's precision (bf16 on a GPU, fp32 on
// the CPU), then every lever's up to it, or the first's and its own alone.
std::vector<std::string> SetsOf(int index, bool cuda) {
  std::vector<std::string> sets = {cuda ? "model.precision=bf16" : "model.precision=fp32"};
  const auto add = [&](const LeverSets& lever) {
    for (const char* set : lever.sets) {
      if (set != nullptr) sets.emplace_back(set);
    }
  };
  add(kLevers[0]);
  if (IsAlone(index)) {
    add(kLevers[index - kLeverCount + 1]);
  } else {
    for (int k = 1; k <= index; ++k) add(kLevers[k]);
  }
  return sets;
}

// A case's config (the defaults, the model's `shape` where given, its
// settings), and what of it the runs treat apart.
struct Lever {
  pbert::train::ExperimentConfig config;
  bool cuda_graphs() const { return config.run.cuda_graphs; }
  bool cudnn_attention() const {
    return config.model.bert.varlen_kernel() == pbert::model::VarlenKernel::kCudnn;
  }
  bool fp8() const { return config.model.precision == pbert::model::Precision::kFp8; }
};
absl::StatusOr<Lever> MakeLever(int index, bool cuda, const Shape* shape = nullptr) {
  pbert::train::ExperimentConfig base;
  if (shape != nullptr) base.model.bert = shape->Options();
  YAML::Node root = YAML::Load(pbert::config::Dump(base));
  pbert::config::Sources sources;
  const std::vector<std::string> sets = SetsOf(index, cuda);
  absl::Status read = pbert::config::ApplyOverrides(pbert::config::SetFlags(sets), &root, &sources);
  Lever lever;
  if (read.ok()) read = pbert::config::Read(root, sources, &lever.config);
  if (!read.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("lever ", index, " (", absl::StrJoin(sets, " "),
                                                   "): ", read.message()));
  }
  return lever;
}
// The levers' settings are the benchmark's own, read once at its start
// (CheckLevers): here they are known to be read.
Lever LeverOf(int index, bool cuda, const Shape* shape = nullptr) {
  return *MakeLever(index, cuda, shape);
}
absl::Status CheckLevers(bool cuda) {
  for (int k = 0; k < kLeverCount + kAloneCount; ++k) {
    if (absl::StatusOr<Lever> lever = MakeLever(k, cuda); !lever.ok()) return lever.status();
  }
  return absl::OkStatus();
}
std::string LabelOf(int index) {
  if (!IsAlone(index)) return kLevers[index].label;
  const std::string added = kLevers[index - kLeverCount + 1].label;
  return absl::StrCat(absl::StripPrefix(added, "+ "), " alone");
}
// The lever the rows sweep runs: every lever but the master weights.
constexpr int kSweepLever = 4;

// The newest paths, whose failure is expected to be possible on a new GPU
// or LibTorch: the captured step, cuDNN's attention and fp8 (the run's exit
// status ignores them). Where the captured step failed, or cuDNN's
// attention failed or was refused, the levers after it run without it.
bool Droppable(const Lever& lever) {
  return lever.cuda_graphs() || lever.fp8() || lever.cudnn_attention();
}

// Whether lever `k` is the one that adds `feature` (a failure is its
// addition's).
bool Adds(int k, bool cuda, bool (Lever::*feature)() const) {
  if (IsAlone(k)) return false;  // its failure says nothing of the levers added up
  return (LeverOf(k, cuda).*feature)() && (k == 0 || !(LeverOf(k - 1, cuda).*feature)());
}

struct Options {
  std::vector<std::string> models = {"base", "large"};
  int rows = 32, steps = 20, warmup = 5, profile = 0, turns = 4, fp8 = 1, alone = 0;
  int case_timeout = 240;
  bool quick = false;
  std::vector<int> sweep;
  std::string histogram_path, peer, lengths_out = "gpu-lengths.json";
  std::string device = "cuda";
  std::map<int, std::string> fail;  // lever -> how its process fails (--fail)
  std::vector<int> levers;           // the levers to run (--levers), else all
};

// One turn of one case, run in a process of its own: the model, the lever
// (index into kLevers), the rows per step, the turn, how many sequences
// the model's cases draw, and what else that process does.
struct Request {
  std::string model;
  int lever = 0, rows = 32, turn = 0, profile = 0;
  size_t draw = 0;
  bool no_graphs = false;  // the captured step failed: the levers after it run without it
  bool no_cudnn = false;   // so did cuDNN's attention (or it was refused)
};

// The arguments that make this binary run `r` (with the options that shape
// every case).
std::vector<std::string> CaseArguments(const Options& o, const Request& r) {
  std::vector<std::string> args = {
      "--case",     absl::StrCat(r.model, ":", r.lever, ":", r.rows, ":", r.turn, ":", r.draw),
      "--steps",    std::to_string(o.steps),
      "--warmup",   std::to_string(o.warmup),
      "--turns",    std::to_string(o.turns),
      "--profile",  std::to_string(r.profile),
      "--device",   o.device,
      "--no-graphs", r.no_graphs ? "1" : "0",
      "--no-cudnn", r.no_cudnn ? "1" : "0"};
  if (!o.histogram_path.empty()) args.insert(args.end(), {"--histogram", o.histogram_path});
  for (const auto& [lever, kind] : o.fail) {
    args.insert(args.end(), {"--fail", absl::StrCat(lever, ":", kind)});
  }
  return args;
}

// What a case's process returned: its JSON, or why there is none.
struct Outcome {
  json result;          // {"tokens", ...}, {"refused": why} or {"error": why}
  std::string failure;  // "" when the process ended with its JSON
};

std::string SignalName(int signal) {
  const char* name = strsignal(signal);
  return absl::StrCat("signal ", signal, name != nullptr ? absl::StrCat(", ", name) : "");
}

// Runs this binary with `args` in a process group of its own, its stdout
// read back (its last line is its JSON) and its stderr passed through; a
// process still running after `timeout` seconds is killed with its group.
Outcome Spawn(const std::vector<std::string>& args, int timeout) {
  Outcome outcome;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    outcome.failure = absl::StrCat("cannot make a pipe: ", std::strerror(errno));
    return outcome;
  }
  std::vector<char*> argv;
  static char self[] = "/proc/self/exe";
  argv.push_back(self);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    outcome.failure = absl::StrCat("cannot start a process: ", std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return outcome;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], STDOUT_FILENO);
    execv(self, argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // the process closed its stdout: it is ending
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    outcome.failure = absl::StrCat("did not end within ", timeout, " s (--case-timeout): killed");
    return outcome;
  }
  const size_t last = out.rfind("\n{");
  json result = json::parse(out.substr(last == std::string::npos ? 0 : last + 1), nullptr, false);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && result.is_object()) {
    outcome.result = std::move(result);
  } else if (result.is_object() && result.contains("error")) {
    outcome.result = std::move(result);
  } else {
    outcome.failure = WIFSIGNALED(status) ? absl::StrCat("crashed (", SignalName(WTERMSIG(status)), ")")
                                          : absl::StrCat("exited with status ", WEXITSTATUS(status),
                                                         " without a result");
  }
  return outcome;
}

// Why a case's result is not a measurement ("" where it is).
std::string Failure(const Outcome& o) {
  if (!o.failure.empty()) return o.failure;
  if (o.result.contains("error")) {
    const std::string why = o.result["error"].get<std::string>();
    if (absl::StrContains(absl::AsciiStrToLower(why), "out of memory")) {
      return absl::StrCat("out of memory: ", why);
    }
    return why;
  }
  return "";
}

// The parameters of BERT of this size (embeddings, encoder, pooler and the
// pretraining heads), for the memory estimate.
double Parameters(const Shape& s) {
  const double h = static_cast<double>(s.hidden), f = static_cast<double>(s.ffn);
  const double layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  return (30522 + 512 + 2) * h + 2 * h + s.layers * layer + (h * h + h) + (h * h + 3 * h) +
         30522 + 2 * h + 2;
}

// The GPU memory a case needs, estimated: 16 bytes a parameter (weights,
// gradients and LAMB's two moments, or bf16 weights and gradients with fp32
// masters), and 48 bytes per token, layer and hidden unit of activations
// (BERT-large: 38.8 GiB at 64 rows, 21.9 at 32, 13.5 at 16; BERT-base
// 15.6 at 64 and 5.2 at 16: 45-49 bytes), twice over for a captured step
// (its graph's pool beside the eager warm-up's cached blocks).
double EstimatedBytes(const Shape& s, int rows, const Lever& lever) {
  const double activations = 48.0 * static_cast<double>(s.layers * s.hidden) * rows * kMaxLen;
  return 16 * Parameters(s) + activations * (lever.cuda_graphs() ? 2 : 1);
}

// One case's turn, in this process: prints its result as one JSON line on
// stdout (all else goes to stderr); exit 0, or 3 with {"error": why}.
int RunCase(const Options& o, const Request& r) {
  auto report_error = [](const std::string& why) {
    std::printf("\n%s\n", json{{"error", why.substr(0, why.find('\n'))}}.dump().c_str());
    return 3;
  };
  const Shape* shape = pbert::bench::FindModelSize(r.model);
  if (shape == nullptr || r.lever < 0 || r.lever >= kLeverCount + kAloneCount) {
    return report_error("bad --case " + r.model);
  }
  const Shape& s = *shape;
  const bool cuda = o.device == "cuda";
  absl::StatusOr<Lever> made = MakeLever(r.lever, cuda, &s);
  if (!made.ok()) return report_error(std::string(made.status().message()));
  Lever& lever = *made;
  pbert::train::ExperimentConfig& config = lever.config;
  if (r.no_graphs) config.run.cuda_graphs = false;
  if (r.no_cudnn) config.model.bert.varlen_kernel(pbert::model::VarlenKernel::kFlash);
  const c10::Device device = cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  auto communicator = pbert::distributed::Communicator::Single();
  if (lever.fp8()) {
    const absl::Status runs =
        pbert::model::CheckFp8(config.model.fp8, config.model.bert, device);
    if (!runs.ok()) {
      std::printf("\n%s\n", json{{"refused", std::string(runs.message())}}.dump().c_str());
      return 0;
    }
  }
  // cuDNN's attention where this LibTorch or GPU has none: refused in the
  // lever that adds it; a lever after it, run without it (the profiles
  // stage runs the last lever alone), goes on with FlashAttention, as the
  // levers that follow a refused one do in a run of them all.
  std::string attention_fallback;
  if (lever.cudnn_attention()) {
    const absl::Status runs = pbert::model::CheckVarlenKernel(config.model.bert, device);
    if (!runs.ok() && (IsAlone(r.lever) || Adds(r.lever, cuda, &Lever::cudnn_attention))) {
      std::printf("\n%s\n", json{{"refused", std::string(runs.message())}}.dump().c_str());
      return 0;
    }
    if (!runs.ok()) {
      config.model.bert.varlen_kernel(pbert::model::VarlenKernel::kFlash);
      attention_fallback = std::string(runs.message());
    }
  }
  if (cuda) {
    auto memory = pbert::gpu::Memory(0);
    if (!memory.ok()) return report_error(std::string(memory.status().message()));
    const double need = EstimatedBytes(s, r.rows, lever);
    if (need > 0.95 * static_cast<double>(memory->device_free)) {
      std::printf("\n%s\n",
                  json{{"refused", absl::StrFormat("needs about %.1f GiB, the GPU has %.1f GiB free",
                                                   need / (1 << 30),
                                                   memory->device_free / double{1 << 30})}}
                      .dump()
                      .c_str());
      return 0;
    }
  }
  if (const auto fail = o.fail.find(r.lever); fail != o.fail.end()) {
    const std::string& kind = fail->second;
    std::fprintf(stderr, "bench/gpu: failing on purpose (--fail %d:%s)\n", r.lever, kind.c_str());
    if (kind == "crash") std::abort();
    if (kind == "exit") std::exit(2);
    if (kind == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    if (kind == "oom") {
      return report_error("CUDA out of memory. Tried to allocate 2.00 GiB (--fail)");
    }
  }
  // The sequences every case of this model draws, packed by lp at depth 8;
  // this case's steps: the warm-up's, then its turn's.
  const int per_turn = o.steps / o.turns;
  std::vector<int> step_ids;
  for (int k = 0; k < o.warmup; ++k) step_ids.push_back(k);
  for (int k = 0; k < per_turn; ++k) step_ids.push_back(o.warmup + r.turn * per_turn + k);
  std::vector<uint64_t> histogram;
  if (!o.histogram_path.empty()) {
    auto read = pbert::data::ReadHistogramFile(o.histogram_path, kMaxLen);
    if (!read.ok()) return report_error(std::string(read.status().message()));
    histogram = read->counts;
  }
  const std::vector<int> lengths = DrawLengths(histogram, r.draw, 7);
  const std::vector<uint16_t> lengths16(lengths.begin(), lengths.end());
  auto packed = pbert::data::PackLengths("lp", lengths16, {kMaxLen, 8, 1});
  if (!packed.ok()) return report_error(std::string(packed.status().message()));
  const std::vector<Instance> instances = MakeSequences(lengths, 11);
  std::vector<pbert::data::PackedBatch> batches;
  json plan = json::array();  // per step: the lengths of its sequences (the peer's steps)
  for (int step : step_ids) {
    std::vector<std::vector<const Instance*>> layout;
    json step_lengths = json::array();
    for (int row = 0; row < r.rows; ++row) {
      const uint64_t id = static_cast<uint64_t>(step) * r.rows + row;
      if (id >= packed->index.rows()) return report_error("too few sequences drawn");
      layout.emplace_back();
      for (uint32_t sequence : packed->index.Row(id)) {
        layout.back().push_back(&instances[sequence]);
        step_lengths.push_back(lengths[sequence]);
      }
    }
    auto batch = pbert::data::MakeBatch(layout, {kMaxLen, 8, 0});
    if (!batch.ok()) return report_error(std::string(batch.status().message()));
    batches.push_back(std::move(*batch));
    plan.push_back(step_lengths);
  }
  absl::StatusOr<pbert::model::Precision> precision =
      pbert::model::ResolvePrecision(config.model.precision, device);
  if (!precision.ok()) return report_error(std::string(precision.status().message()));
  config.run.seed = 1;
  pbert::train::TraineeOptions options =
      pbert::train::TraineeOptionsOf(config, *precision, device);
  options.lamb = pbert::optim::LambOptions(1e-4);
  auto allocated = [&]() -> int64_t {
    if (!cuda) return 0;
    auto m = pbert::gpu::Memory(0);
    return m.ok() ? m->allocated : 0;
  };
  Side side;
  int64_t persistent = 0, transient = 0;
  std::string profile_markdown;
  try {
    const int64_t before = allocated();
    auto trainee = pbert::train::Trainee::Make(options, *communicator);
    if (!trainee.ok()) return report_error(std::string(trainee.status().message()));
    const int64_t weights = allocated() - before;
    // Every step's inputs on the device before the clock starts, as the
    // loader's threads make them ahead of the steps in a run.
    auto steps = pbert::train::Prepare(batches, (*trainee)->input_plan(), {&(*trainee)->task()});
    if (!steps.ok()) return report_error(std::string(steps.status().message()));
    const int64_t with_inputs = allocated();
    auto step = [&](size_t k) -> absl::Status {
      auto result = pbert::train::TrainStep(**trainee, *communicator, {(*steps)[k]}, 1e-4, {});
      return result.status();
    };
    for (int k = 0; k < o.warmup; ++k) {
      if (absl::Status done = step(static_cast<size_t>(k)); !done.ok()) {
        return report_error(std::string(done.message()));
      }
    }
    if (cuda) (void)pbert::gpu::Synchronize(0);
    // What stays between steps: weights, gradients, optimizer state (the
    // inputs, made ahead here, are not the case's own).
    persistent = weights + (allocated() - with_inputs);
    if (cuda) (void)pbert::gpu::ResetPeakMemory(0);
    const int64_t at_start = allocated();
    const auto start = std::chrono::steady_clock::now();
    for (size_t k = static_cast<size_t>(o.warmup); k < batches.size(); ++k) {
      if (absl::Status done = step(k); !done.ok()) return report_error(std::string(done.message()));
      side.tokens += static_cast<double>(batches[k].tokens);
      side.sequences += static_cast<double>(batches[k].sequences.size());
      side.flops += (*trainee)->task().TrainingFlops((*trainee)->bert_options(), (*steps)[k].work,
                                                     (*steps)[k].totals);
    }
    if (cuda) (void)pbert::gpu::Synchronize(0);
    side.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (cuda) {
      auto m = pbert::gpu::Memory(0);
      if (m.ok()) transient = m->peak_allocated - at_start;
    }
    if (r.profile > 0) {
      pbert::train::StepProfiler profiler({1, r.profile}, "", device);
      for (int k = 1; k <= r.profile; ++k) {
        if (!profiler.Before(k).ok()) return report_error("the profiler did not start");
        const auto begin = std::chrono::steady_clock::now();
        if (absl::Status done = step(static_cast<size_t>(k - 1) % batches.size()); !done.ok()) {
          return report_error(std::string(done.message()));
        }
        if (cuda) (void)pbert::gpu::Synchronize(0);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        if (!profiler.After(k, seconds).ok()) return report_error("the profiler did not finish");
      }
      if (profiler.summary() != nullptr) profile_markdown = profiler.summary()->Markdown({1, r.profile});
    }
  } catch (const std::exception& e) {
    return report_error(e.what());
  }
  const json result = {{"seconds", side.seconds},
                       {"tokens", side.tokens},
                       {"sequences", side.sequences},
                       {"flops", side.flops},
                       {"peak_bytes", static_cast<double>(persistent + transient)},
                       {"profile", profile_markdown},
                       {"plan", plan},
                       {"attention_fallback", attention_fallback}};
  std::printf("\n%s\n", result.dump().c_str());
  return 0;
}

// One case of a model: its lever at its rows, and what its turns measured.
struct Case {
  std::string label;
  int lever = 0, rows = 32;
  bool swept = false;    // one of the rows sweep's (or the sweep lever's own)
  std::string left_out;  // why the case is out of the tables ("" while it is in)
  bool failed = false;   // left out by a failure (not by a memory estimate)
  Side side;
  std::string profile;
  json plan;  // the first case's steps' lengths (the peer's sequences)
};

// A number with thousands separators: 154,307.
std::string Grouped(double value) {
  std::string digits = absl::StrFormat("%.0f", value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && std::isdigit(static_cast<unsigned char>(digits[i - 1]))) {
      out += ',';
    }
    out += digits[i];
  }
  return out;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a table row as soon as it is known
  Options o;
  bool child = false;
  Request request;
  bool steps_given = false, warmup_given = false, turns_given = false, profile_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--quick") {
      o.quick = true;
      continue;
    }
    if (i + 1 >= argc) return Usage("flag " + flag + " needs a value");
    const std::string value = argv[++i];
    int n = 0;
    if (flag == "--models") {
      o.models = absl::StrSplit(value, ',');
    } else if (flag == "--rows" && absl::SimpleAtoi(value, &o.rows) && o.rows > 0) {
    } else if (flag == "--steps" && absl::SimpleAtoi(value, &o.steps) && o.steps > 0) {
      steps_given = true;
    } else if (flag == "--warmup" && absl::SimpleAtoi(value, &o.warmup) && o.warmup >= 0) {
      warmup_given = true;
    } else if (flag == "--turns" && absl::SimpleAtoi(value, &o.turns) && o.turns > 0) {
      turns_given = true;
    } else if (flag == "--case-timeout" && absl::SimpleAtoi(value, &o.case_timeout) &&
               o.case_timeout > 0) {
    } else if (flag == "--sweep") {
      for (absl::string_view r : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        if (!absl::SimpleAtoi(r, &n) || n <= 0) return Usage("bad --sweep " + value);
        o.sweep.push_back(n);
      }
    } else if (flag == "--histogram") {
      o.histogram_path = value;
    } else if (flag == "--peer") {
      o.peer = value;
    } else if (flag == "--lengths-out") {
      o.lengths_out = value;
    } else if (flag == "--profile" && absl::SimpleAtoi(value, &o.profile) && o.profile >= 0) {
      profile_given = true;
    } else if (flag == "--fp8" && absl::SimpleAtoi(value, &o.fp8) && (o.fp8 == 0 || o.fp8 == 1)) {
    } else if (flag == "--alone" && absl::SimpleAtoi(value, &o.alone) &&
               (o.alone == 0 || o.alone == 1)) {
    } else if (flag == "--device" && (value == "cuda" || value == "cpu")) {
      o.device = value;
    } else if (flag == "--fail") {
      std::vector<std::string> parts = absl::StrSplit(value, ':');
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &n) || n < 0 || n >= kLeverCount ||
          (parts[1] != "crash" && parts[1] != "exit" && parts[1] != "hang" && parts[1] != "oom")) {
        return Usage("bad --fail " + value + " (LEVER:crash|exit|hang|oom, LEVER 0-9)");
      }
      o.fail[n] = parts[1];
    } else if (flag == "--levers") {
      for (absl::string_view l : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        if (!absl::SimpleAtoi(l, &n) || n < 0 || n >= kLeverCount) {
          return Usage("bad --levers " + value + " (indices 0-9)");
        }
        o.levers.push_back(n);
      }
    } else if (flag == "--no-graphs") {
      request.no_graphs = value == "1";
    } else if (flag == "--no-cudnn") {
      request.no_cudnn = value == "1";
    } else if (flag == "--case") {
      std::vector<std::string> parts = absl::StrSplit(value, ':');
      if (parts.size() != 5 || !absl::SimpleAtoi(parts[1], &request.lever) ||
          !absl::SimpleAtoi(parts[2], &request.rows) || !absl::SimpleAtoi(parts[3], &request.turn) ||
          !absl::SimpleAtoi(parts[4], &request.draw)) {
        return Usage("bad --case " + value);
      }
      request.model = parts[0];
      child = true;
    } else {
      return Usage("bad flag or value: " + flag + " " + value);
    }
  }
  if (o.quick) {
    if (!steps_given) o.steps = 12;
    if (!warmup_given) o.warmup = 3;
    if (!turns_given) o.turns = 1;
    o.models = {"large", "base"};
  }
  o.steps = (o.steps + o.turns - 1) / o.turns * o.turns;  // whole turns
  if (child) {
    request.profile = o.profile;
    return RunCase(o, request);
  }
  const bool cuda = o.device == "cuda";
  if (cuda && (!pbert::gpu::Built() || torch::cuda::device_count() == 0)) {
    std::fprintf(stderr, "bench/gpu: no CUDA GPU here (%s); run it on a GPU machine "
                         "(scripts/gpu)\n",
                 pbert::gpu::Built() ? "none visible" : "this build has no CUDA");
    return 2;
  }
  if (!o.histogram_path.empty()) {
    auto read = pbert::data::ReadHistogramFile(o.histogram_path, kMaxLen);
    if (!read.ok()) return Usage(std::string(read.status().message()));
  }
  if (absl::Status levers = CheckLevers(cuda); !levers.ok()) {
    std::fprintf(stderr, "bench/gpu: %s\n", std::string(levers.message()).c_str());
    return 2;
  }
  std::string device_name = "the CPU (a dry run)";
  double peak = 0;
  if (cuda) {
    auto facts = pbert::gpu::Describe(0);
    if (!facts.ok()) return Usage(std::string(facts.status().message()));
    device_name = absl::StrCat(facts->name, ", ", facts->multiprocessors, " SMs, ",
                               absl::StrFormat("%.0f", facts->memory_bytes / double{1 << 30}),
                               " GiB");
    peak = pbert::train::GpuPeakFlops(facts->name, pbert::model::Precision::kBf16);
  }
  for (const std::string& name : o.models) {
    if (pbert::bench::FindModelSize(name) == nullptr) {
      return Usage("unknown model " + name + " (tiny, mini, medium, base, large)");
    }
  }
  std::printf(
      "# %s; LibTorch %s; %s; rows of %d tokens, %d packed rows per step (the peer: the same "
      "sequences, one per row, %d rows per micro-batch); per case %d warm-up steps, then %d "
      "timed steps in %d turns, the cases taking turns, each turn a process of its own; "
      "lengths %s\n\n",
      device_name.c_str(), TORCH_VERSION, cuda ? "bf16" : "fp32", kMaxLen, o.rows, o.rows,
      o.warmup, o.steps, o.turns,
      o.histogram_path.empty() ? "uniform in [32, 512]" : o.histogram_path.c_str());
  const int levers_run = o.fp8 == 1 ? kLeverCount : kLeverCount - 1;
  std::vector<std::string> notes, tables, ratios, levers, alone, sweeps, profiles, keys;
  bool failed = false;
  for (const std::string& name : o.models) {
    const Shape& s = *pbert::bench::FindModelSize(name);
    std::vector<Case> cases;
    for (int k = 0; k < levers_run; ++k) {
      if (!o.levers.empty() && std::find(o.levers.begin(), o.levers.end(), k) == o.levers.end()) {
        continue;
      }
      Case c;
      c.label = kLevers[k].label;
      c.lever = k;
      c.rows = o.rows;
      c.swept = k == kSweepLever;
      cases.push_back(std::move(c));
    }
    for (int k = 1; o.alone == 1 && k < levers_run; ++k) {
      Case c;
      c.lever = kLeverCount + k - 1;
      c.label = LabelOf(c.lever);
      c.rows = o.rows;
      cases.push_back(std::move(c));
    }
    for (int rows : o.sweep) {
      if (rows == o.rows) continue;
      Case c;
      c.label = absl::StrCat(kLevers[kSweepLever].label, ", ", rows, " rows");
      c.lever = kSweepLever;
      c.rows = rows;
      c.swept = true;
      cases.push_back(std::move(c));
    }
    // Enough sequences for every case's steps (every process draws the
    // same ones).
    int most_rows = 0;
    for (const Case& c : cases) most_rows = std::max(most_rows, c.rows);
    const size_t draw = static_cast<size_t>(most_rows) * 4 * (o.warmup + o.steps);
    // The profiled cases: the first lever, the fused layers' and the last
    // lever's (--quick: the last lever of the first model only).
    std::vector<int> profiled;
    if (o.quick) {
      if (&name == &o.models.front()) profiled = {levers_run - 1};
    } else if (o.profile > 0) {
      profiled = {0, kSweepLever, levers_run - 1};
      if (!o.levers.empty()) profiled = o.levers;
    }
    const int profile_steps = o.quick && !profile_given ? 3 : o.profile;
    bool graphs_failed = false, cudnn_dropped = false;
    for (int turn = 0; turn < o.turns; ++turn) {
      for (size_t k = 0; k < cases.size(); ++k) {
        Case& c = cases[k];
        if (!c.left_out.empty()) continue;
        Request r;
        r.model = name;
        r.lever = c.lever;
        r.rows = c.rows;
        r.turn = turn;
        r.draw = draw;
        r.no_graphs = graphs_failed && LeverOf(c.lever, cuda).cuda_graphs() && !IsAlone(c.lever);
        if (r.no_graphs && turn == 0) c.label += " (without the captured step, which failed)";
        r.no_cudnn =
            cudnn_dropped && LeverOf(c.lever, cuda).cudnn_attention() && !IsAlone(c.lever);
        if (r.no_cudnn && turn == 0) c.label += " (with FlashAttention: cuDNN's attention did not run)";
        const bool profile_here =
            turn == o.turns - 1 && c.rows == o.rows &&
            std::find(profiled.begin(), profiled.end(), c.lever) != profiled.end();
        r.profile = profile_here ? profile_steps : 0;
        const auto begin = std::chrono::steady_clock::now();
        const Outcome outcome = Spawn(CaseArguments(o, r), o.case_timeout);
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        const std::string why = Failure(outcome);
        if (!why.empty() || outcome.result.contains("refused")) {
          c.left_out = why.empty() ? outcome.result["refused"].get<std::string>() : why;
          c.failed = !why.empty();
          const bool droppable = Droppable(LeverOf(c.lever, cuda));
          failed = failed || (c.failed && !droppable);
          graphs_failed =
              graphs_failed || (c.failed && Adds(c.lever, cuda, &Lever::cuda_graphs));
          // cuDNN's attention failed or was refused (this LibTorch has none):
          // the levers after it go on with FlashAttention.
          cudnn_dropped = cudnn_dropped || Adds(c.lever, cuda, &Lever::cudnn_attention);
          notes.push_back(absl::StrCat("# ", name, ": \"", c.label, "\" at ", c.rows,
                                       " rows is left out, ", c.failed ? "it failed: " : "",
                                       c.left_out));
          std::printf("%s\n", notes.back().c_str());
          continue;
        }
        const json& j = outcome.result;
        if (turn == 0 && !j["attention_fallback"].get<std::string>().empty()) {
          c.label += " (with FlashAttention: cuDNN's attention is refused here)";
          cudnn_dropped = true;
        }
        c.side.seconds += j["seconds"].get<double>();
        c.side.tokens += j["tokens"].get<double>();
        c.side.sequences += j["sequences"].get<double>();
        c.side.flops += j["flops"].get<double>();
        c.side.peak_bytes = std::max(c.side.peak_bytes, j["peak_bytes"].get<double>());
        if (!j["profile"].get<std::string>().empty()) c.profile = j["profile"].get<std::string>();
        if (k == 0 && c.plan.is_null()) c.plan = j["plan"];
        std::printf("# %s, %s, %d rows, turn %d of %d: %s real tokens/s (the process took %.1f s)\n",
                    name.c_str(), c.label.c_str(), c.rows, turn + 1, o.turns,
                    Grouped(j["tokens"].get<double>() / j["seconds"].get<double>()).c_str(), took);
      }
    }
    std::vector<const Case*> in;
    for (const Case& c : cases) {
      if (c.left_out.empty()) in.push_back(&c);
    }
    for (const Case* c : in) {
      const Side& r = c->side;
      const double tflops = r.flops / r.seconds / 1e12;
      tables.push_back(absl::StrFormat(
          "| %s | packed-bert (varlen), %s | %.0f | %.1f | %.1f | %s | %.1f |", name, c->label,
          r.tokens / r.seconds, r.sequences / r.seconds, tflops,
          peak > 0 ? absl::StrCat(static_cast<int>(100 * tflops * 1e12 / peak + 0.5), "%") : "-",
          r.peak_bytes / (1 << 30)));
    }
    // Each lever's gain over the lever run before it; each lever alone's
    // over the first lever.
    const Case* previous = nullptr;
    const Case* best = nullptr;
    const Case* baseline = nullptr;  // the first lever's
    for (const Case* c : in) {
      if (c->lever == 0) baseline = c;
    }
    for (const Case* c : in) {
      if (c->swept && c->lever == kSweepLever && c->rows != o.rows) continue;
      if (IsAlone(c->lever)) {
        const double rate = c->side.tokens / c->side.seconds;
        alone.push_back(absl::StrFormat(
            "| %s | %s | %.0f | %s |", name, c->label, rate,
            baseline == nullptr ? "-"
                                : absl::StrFormat("%.3f", rate / (baseline->side.tokens /
                                                                  baseline->side.seconds))));
        if (best == nullptr || rate > best->side.tokens / best->side.seconds) best = c;
        continue;
      }
      const double rate = c->side.tokens / c->side.seconds;
      levers.push_back(absl::StrFormat(
          "| %s | %s | %.0f | %s |", name, c->label, rate,
          previous == nullptr
              ? "-"
              : absl::StrFormat("%.3f", rate / (previous->side.tokens / previous->side.seconds))));
      previous = c;
      if (best == nullptr || rate > best->side.tokens / best->side.seconds) best = c;
    }
    for (const Case* c : in) {
      if (!c->swept) continue;
      sweeps.push_back(absl::StrFormat("| %s | %d | %.0f | %.1f |", name, c->rows,
                                       c->side.tokens / c->side.seconds,
                                       c->side.peak_bytes / (1 << 30)));
    }
    for (const Case* c : in) {
      if (!c->profile.empty()) {
        profiles.push_back(
            absl::StrCat("## ", name, ": ", c->label, ", ", c->rows, " rows\n\n", c->profile));
      }
    }
    if (best != nullptr) {
      keys.push_back(absl::StrCat(name, " ", Grouped(best->side.tokens / best->side.seconds),
                                  " real tokens/s (", best->label, ")"));
    } else {
      keys.push_back(absl::StrCat(name, ": no case ran"));
    }
    // This model's levers now, should the run be cut before its end (the
    // whole tables follow there); a key line that the last one replaces.
    std::printf("\n# %s: each lever's gain (real tokens/s, %d rows per step)\n", name.c_str(),
                o.rows);
    for (const std::string& line : levers) {
      if (absl::StartsWith(line, absl::StrCat("| ", name, " |"))) std::printf("# %s\n", line.c_str());
    }
    std::printf("[key] %s (so far)\n", absl::StrJoin(keys, "; ").c_str());
    if (o.peer.empty() || in.empty() || cases.front().plan.is_null()) continue;
    // The peer: the first case's sequences (its warm-up and first turn), one
    // per row, from a file, in micro-batches of as many rows as packed-bert's.
    const Case& first = cases.front();
    const json plan = {{"hidden", s.hidden},   {"layers", s.layers}, {"heads", s.heads},
                       {"ffn", s.ffn},         {"max_len", kMaxLen}, {"warmup", o.warmup},
                       {"micro_rows", o.rows}, {"steps", first.plan}};
    const pbert::bench::PeerResult theirs = pbert::bench::RunPeer(o.peer, o.lengths_out, plan);
    if (!theirs.error.empty()) {
      tables.push_back(
          absl::StrFormat("| %s | Hugging Face BertForPreTraining (SDPA), padded | %s | | | | |",
                          name, theirs.error));
      continue;
    }
    // The same sequences: the same model FLOPs per real token.
    const double their_flops = first.side.flops / first.side.tokens * theirs.tokens;
    const double tflops = their_flops / theirs.seconds / 1e12;
    tables.push_back(absl::StrFormat(
        "| %s | Hugging Face BertForPreTraining (SDPA, torch %s), padded | %.0f | %.1f | %.1f | "
        "%s | %.1f |",
        name, theirs.torch, theirs.tokens / theirs.seconds, theirs.sequences / theirs.seconds,
        tflops,
        peak > 0 ? absl::StrCat(static_cast<int>(100 * tflops * 1e12 / peak + 0.5), "%") : "-",
        theirs.peak_bytes / (1 << 30)));
    const double hf = theirs.tokens / theirs.seconds;
    ratios.push_back(absl::StrFormat(
        "%s: packed-bert / Hugging Face, real tokens/s: %.2f (%s), %.2f (%s)", name,
        (first.side.tokens / first.side.seconds) / hf, first.label,
        (best->side.tokens / best->side.seconds) / hf, best->label));
  }
  std::printf("\n| model | side | real tokens/s | sequences/s | model TFLOP/s | MFU%s | peak GiB "
              "|\n|---|---|---|---|---|---|---|\n",
              peak > 0 ? absl::StrFormat(" (bf16 peak %.0f TFLOP/s)", peak / 1e12).c_str() : "");
  for (const std::string& line : tables) std::printf("%s\n", line.c_str());
  if (!notes.empty()) std::printf("\n");
  for (const std::string& line : notes) std::printf("%s\n", line.c_str());
  if (!ratios.empty()) std::printf("\n");
  for (const std::string& line : ratios) std::printf("%s\n", line.c_str());
  std::printf("\n## Each lever's gain (real tokens/s, %d rows per step; the ratio to the lever "
              "run before it)\n\n| model | lever | real tokens/s | gain |\n|---|---|---|---|\n",
              o.rows);
  for (const std::string& line : levers) std::printf("%s\n", line.c_str());
  if (!alone.empty()) {
    std::printf(
        "\n## Each lever alone (real tokens/s, %d rows per step; the ratio to the first "
        "lever, \"%s\")\n\n| model | lever | real tokens/s | gain |\n|---|---|---|---|\n",
        o.rows, kLevers[0].label);
    for (const std::string& line : alone) std::printf("%s\n", line.c_str());
  }
  if (!sweeps.empty() && !o.sweep.empty()) {
    std::printf("\n## Rows per step (%s)\n\n| model | rows | real tokens/s | peak GiB |\n"
                "|---|---|---|---|\n",
                kLevers[kSweepLever].label);
    for (const std::string& line : sweeps) std::printf("%s\n", line.c_str());
  }
  for (const std::string& table : profiles) std::printf("\n%s", table.c_str());
  std::printf("\n[key] %s\n", absl::StrJoin(keys, "; ").c_str());
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
