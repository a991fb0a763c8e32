// bench/step: one training step (forward, losses, backward, clipping, LAMB)
// of packed-bert against the same step in Python PyTorch (bench/peer_step.py
// under Debian's python3-torch), same shapes, same data, same threads, the
// cases taking turns over rounds. Prints per case the median and min step
// time, real tokens per second, minor page faults per step, and the ratios.
// packed-bert's step is timed as a run's training thread does it, from the
// model's inputs (train/inputs.h); making them, which the loader's threads
// do ahead of the step in a run, is timed apart ("inputs ms").
//
//   build/bench/step [--rounds 5] [--steps 3] [--threads 2] [--models tiny,mini]
//
//   build/bench/step [--precision fp32|bf16|auto] [--peers all|eager|none]
//   build/bench/step --precision bf16 --master-weights both  # and with bf16 weights, fp32
//                                                           # masters ("pb-masters"), in turns
//   build/bench/step --fused both  # and with the unfused modules ("pb-unfused"): three QKV
//                                  # products, no fused layers (model.fused_qkv and
//                                  # model.fused_layers off), in turns: before and after
//   build/bench/step --load 1     # beside one busy process (CPU contention)
//
// The OpenMP wait policy in force (OMP_WAIT_POLICY, GOMP_SPINCOUNT, or
// packed-bert's default) is printed; both sides run under it.
//
// Peers: "peer" runs as a user starts it; "peer-tuned" (when packed-bert
// re-selected OpenBLAS's kernels) with the same kernels as packed-bert; on
// PyTorch 2.x "peer-compile" runs the model under torch.compile (with
// packed-bert's kernels), compiling in the uncounted warm-up round.
//
// Cases: for each model (bench/model_sizes.h; by default tiny: 128 wide, 2
// layers; mini: 256 wide, 4 layers, 4 heads, FFN 1024) and shape (16x128,
// 4x512): the padded batch (one sequence per row) on both sides, and packed-bert on packed rows of
// sequences of the same lengths (Wikipedia's, from the published histogram
// when ../shared/data is there), attending with the dense block-diagonal
// mask and with blocked attention (the config's default). Each side keeps one
// model and optimizer per model size, so peak RSS compares like with like.
#include "train/step.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/model_sizes.h"
#include "common/platform.h"
#include "common/torch_compat.h"
#include "data/batch.h"
#include "data/histogram.h"
#include "data/packing/report.h"
#include "distributed/communicator.h"
#include "model/bert.h"
#include "nlohmann/json.hpp"
#include "optim/lamb.h"
#include "tests/source_paths.h"

namespace {

using pbert::data::Instance;
using json = nlohmann::json;

using ModelShape = pbert::bench::ModelSize;

struct Case {
  std::string name;
  ModelShape model;
  int rows, max_len;
  bool packed;
  pbert::model::AttentionKind attention;
  pbert::data::PackedBatch batch;
  double tokens = 0;     // real tokens in the batch
  double sequences = 0;  // sequences in the batch
};

// Sequence lengths like Wikipedia's at 512 (the published histogram, cut at
// max_len), or uniform if ../shared/data is absent.
std::vector<int> Lengths(int count, int max_len, std::mt19937& rng) {
  std::vector<int> out;
  auto histogram = pbert::data::ReadHistogramFile(
      std::string(pbert::testing::SharedDataDir()) + "/histogram_wikipedia_512.txt", 512);
  if (histogram.ok()) {
    std::discrete_distribution<int> pick(histogram->counts.begin(), histogram->counts.end());
    for (int i = 0; i < count; ++i) out.push_back(std::clamp(pick(rng), 8, max_len));
  } else {
    std::uniform_int_distribution<int> pick(16, max_len);
    for (int i = 0; i < count; ++i) out.push_back(pick(rng));
  }
  return out;
}

std::vector<Instance> MakeSequences(const std::vector<int>& lengths, int max_predictions,
                                    std::mt19937& rng) {
  std::uniform_int_distribution<int> token(1000, 30000), coin(0, 1);
  std::bernoulli_distribution mask(0.15);
  std::vector<Instance> out(lengths.size());
  for (size_t n = 0; n < lengths.size(); ++n) {
    Instance& in = out[n];
    const int len = lengths[n];
    for (int i = 0; i < len; ++i) {
      in.input_ids.push_back(i == 0 ? 101 : (i == len - 1 ? 102 : token(rng)));
      in.segment_ids.push_back(i < len / 2 ? 0 : 1);
      if (i > 0 && i < len - 1 && static_cast<int>(in.masked_positions.size()) < max_predictions &&
          mask(rng)) {
        in.masked_positions.push_back(i);
        in.masked_ids.push_back(token(rng));
      }
    }
    in.next_sentence_label = coin(rng);
  }
  return out;
}

void WriteInt64(const std::string& path, const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  std::ofstream(path, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), c.numel() * sizeof(int64_t));
}

// The padded batch as the peer reads it: raw int64 files and a description.
json PeerCase(const Case& c, const std::vector<Instance>& sequences, const std::string& dir) {
  const int B = c.rows, S = c.max_len;
  int M = 0;
  for (const auto& in : sequences) M = std::max<int>(M, in.masked_positions.size());
  auto ids = torch::zeros({B, S}, torch::kLong), types = torch::zeros({B, S}, torch::kLong),
       mask = torch::zeros({B, S}, torch::kLong), positions = torch::zeros({B, M}, torch::kLong),
       labels = torch::full({B, M}, -1, torch::kLong), nsp = torch::zeros({B}, torch::kLong);
  for (int b = 0; b < B; ++b) {
    const Instance& in = sequences[b];
    for (int i = 0; i < in.length(); ++i) {
      ids[b][i] = in.input_ids[i];
      types[b][i] = in.segment_ids[i];
      mask[b][i] = 1;
    }
    for (size_t m = 0; m < in.masked_positions.size(); ++m) {
      positions[b][m] = in.masked_positions[m];
      labels[b][m] = in.masked_ids[m];
    }
    nsp[b] = in.next_sentence_label;
  }
  json tensors;
  for (auto [name, tensor] : std::vector<std::pair<std::string, at::Tensor>>{
           {"input_ids", ids},
           {"token_type_ids", types},
           {"attention_mask", mask},
           {"masked_positions", positions},
           {"masked_labels", labels},
           {"next_sentence_labels", nsp}}) {
    std::string file = absl::StrCat(dir, "/", c.name, ".", name, ".bin");
    WriteInt64(file, tensor);
    tensors[name] = {{"file", file}, {"shape", tensor.sizes().vec()}};
  }
  return {{"name", c.name},
          {"model",
           {{"vocab_size", 30522},
            {"hidden_size", c.model.hidden},
            {"num_layers", c.model.layers},
            {"num_heads", c.model.heads},
            {"intermediate_size", c.model.ffn},
            {"max_position_embeddings", 512},
            {"dropout", 0.1}}},
          {"tensors", tensors}};
}

struct Timing {
  std::vector<double> seconds;
  std::vector<double> prepare_seconds;  // packed-bert: making the step's inputs
  double faults = 0;  // minor page faults, summed
  int steps = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// How a case's batches become the trainee's inputs: its model in the case's
// attention layout (the weights are shared by the cases of a model size).
pbert::model::InputPlan PlanOf(const pbert::train::Trainee& trainee,
                               pbert::model::AttentionKind attention) {
  pbert::model::BertOptions options = trainee.bert_options();
  options.attention(attention);
  return pbert::model::InputPlan::For(options, trainee.device(), trainee.precision(),
                                      torch::kFloat);
}

long MinorFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The top operators by self CPU time over `run()`, from LibTorch's profiler:
// per thread, a pop closes the latest push; an operator's self time is its
// time less that of the operators it called.
void PrintTopOperators(const std::string& title, const std::function<void()>& run, int top) {
  namespace prof = torch::autograd::profiler;
  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  run();
  auto threads = prof::disableProfilerLegacy();
  struct Total {
    double self_us = 0, total_us = 0;
    long calls = 0;
  };
  std::map<std::string, Total> totals;
  double all_us = 0;
  for (auto& events : threads) {
    struct Open {
      const prof::LegacyEvent* push;
      double children_us = 0;
    };
    std::vector<Open> stack;
    for (const auto& event : events) {
      if (event.kind() == prof::EventKind::PushRange) {
        stack.push_back({&event});
      } else if (event.kind() == prof::EventKind::PopRange && !stack.empty()) {
        Open open = stack.back();
        stack.pop_back();
        const double us = open.push->cpuElapsedUs(event);
        Total& t = totals[open.push->name()];
        t.self_us += us - open.children_us;
        t.total_us += us;
        ++t.calls;
        all_us += us - open.children_us;
        if (!stack.empty()) stack.back().children_us += us;
      }
    }
  }
  std::vector<std::pair<std::string, Total>> sorted(totals.begin(), totals.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  std::printf("\ntop operators by self CPU time: %s\n%-44s %10s %7s %10s %7s\n", title.c_str(),
              "operator", "self ms", "self %", "total ms", "calls");
  for (int i = 0; i < top && i < static_cast<int>(sorted.size()); ++i) {
    const auto& [name, t] = sorted[i];
    std::printf("%-44s %10.1f %6.1f%% %10.1f %7ld\n", name.substr(0, 44).c_str(), t.self_us / 1e3,
                100.0 * t.self_us / all_us, t.total_us / 1e3, t.calls);
  }
}

// Our side: one trainee (model, optimizer) per model size, kept across
// rounds.
using Ours = std::unique_ptr<pbert::train::Trainee>;

int Main(int argc, char** argv) {
  int rounds = 5, steps = 3, threads = 2;
  std::string precision_name = "fp32", profile, master_weights_name = "0", fused_name = "1";
  std::string peer_set = "all";
  int load = 0;
  bool tune_malloc = true;
  std::vector<std::string> models = {"tiny", "mini"};
  const char* usage =
      "usage: bench/step [--rounds N] [--steps K] [--threads T] [--models tiny,mini] "
      "[--precision fp32|bf16|auto] [--master-weights 0|1|both] [--fused 0|1|both] "
      "[--profile CASE] "
      "[--peers all|eager|none] "
      "[--malloc tuned|glibc] [--load N]\n";
  // A whole number in [low, high], or the usage line and exit 2.
  auto number = [&](const std::string& flag, const std::string& value, int low, int high) {
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < low || n > high) {
      std::cerr << "bench/step: " << flag << " must be a whole number in [" << low << ", "
                << high << "], got '" << value << "'\n" << usage;
      std::exit(2);
    }
    return n;
  };
  if (argc % 2 == 0) {
    std::cerr << usage;
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds") rounds = number(flag, value, 1, 1000);
    else if (flag == "--steps") steps = number(flag, value, 1, 1000);
    else if (flag == "--threads") threads = number(flag, value, 1, 1024);
    else if (flag == "--models") models = absl::StrSplit(value, ',');
    else if (flag == "--precision") precision_name = value;
    else if (flag == "--master-weights") master_weights_name = value;
    else if (flag == "--fused") fused_name = value;
    else if (flag == "--profile") profile = value;
    else if (flag == "--peers" && (value == "all" || value == "eager" || value == "none")) {
      peer_set = value;
    } else if (flag == "--load") load = number(flag, value, 0, 64);
    else if (flag == "--malloc" && (value == "tuned" || value == "glibc")) {
      tune_malloc = value == "tuned";
    } else {
      std::cerr << "bench/step: unknown flag or value: " << flag << " " << value << "\n" << usage;
      return 2;
    }
  }
  auto choice = pbert::ParseChoice<pbert::model::Precision>(precision_name, "--precision");
  auto parsed = choice.ok() ? pbert::model::ResolvePrecision(*choice, c10::Device(c10::kCPU))
                            : choice;
  if (!parsed.ok()) {
    std::cerr << parsed.status() << "\n";
    return 2;
  }
  const pbert::model::Precision precision = *parsed;
  const bool bf16 = precision == pbert::model::Precision::kBf16;
  for (const auto& [flag, value] : {std::pair{"--master-weights", &master_weights_name},
                                    std::pair{"--fused", &fused_name}}) {
    if (*value != "0" && *value != "1" && *value != "both") {
      std::cerr << "bench/step: " << flag << " is 0, 1 or both, not " << *value << "\n";
      return 2;
    }
  }
  if (master_weights_name == "both" && fused_name == "both") {
    std::cerr << "bench/step: one of --master-weights and --fused may be both\n";
    return 2;
  }
  // both: packed-bert's step with and without the option, as two sides
  // taking turns; the second side ("pb-masters" or "pb-unfused") is the
  // first with one option changed.
  const bool master_weights = master_weights_name == "1";
  const bool fused = fused_name != "0";  // fused layers and one QKV product
  struct Second {
    const char* side;
    const char* ratio;       // what the ratio compares: the newer over the older
    bool newer;              // whether the second side is the newer
    bool master_weights, fused;
  };
  std::optional<Second> second;
  if (bf16 && master_weights_name == "both") {
    second = Second{"pb-masters", "bf16 weights with fp32 masters / autocast over fp32 weights",
                    true, true, fused};
  } else if (fused_name == "both") {
    second = Second{"pb-unfused", "fused layers and QKV / unfused modules", false,
                    master_weights, false};
  }
  const bool both = second.has_value();
  std::printf("LibTorch %s; precision %s (%s on both sides%s%s), %d threads\n",
              pbert::torch_compat::Version().c_str(), bf16 ? "bf16" : "fp32",
              bf16 ? "autocast" : "no autocast",
              bf16 && master_weights ? "; packed-bert: bf16 weights, fp32 masters" : "",
              both ? absl::StrCat("; packed-bert also as ", second->side).c_str()
                   : fused ? "" : "; packed-bert: unfused modules",
              threads);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin_count = std::getenv("GOMP_SPINCOUNT");
  std::printf("OpenMP wait policy %s, GOMP_SPINCOUNT %s; %d busy processes beside the bench\n",
              wait_policy ? wait_policy : "(unset)", spin_count ? spin_count : "(unset)", load);
  // --load N: processes that spin on the CPU for the whole run, started
  // before any thread, killed at exit.
  std::vector<pid_t> busy;
  for (int i = 0; i < load; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // also when the bench exits early
      for (volatile uint64_t n = 0;; n = n + 1) {
      }
    }
    busy.push_back(pid);
  }
  struct KillBusy {
    std::vector<pid_t>* pids;
    ~KillBusy() {
      for (pid_t pid : *pids) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } kill_busy{&busy};
  // As packed-bert's main() does (common/platform.h); --malloc glibc keeps
  // glibc's defaults, to measure what the tuning does.
  if (tune_malloc) pbert::TuneMalloc();
  pbert::IgnoreOpenBlasCoretype();  // both sides get the same kernels
  const pbert::BlasKernels& blas = pbert::TuneOpenBlasKernels();
  std::printf("packed-bert: OpenBLAS %s kernels%s\n", blas.chosen.c_str(),
              blas.chosen != blas.loaded ? absl::StrCat(" (OpenBLAS chose ", blas.loaded, ")").c_str()
                                         : "");
  at::set_num_threads(threads);
  const std::vector<ModelShape>& all_models = pbert::bench::ModelSizes();
  const std::string dir = std::filesystem::temp_directory_path() / "pbert_bench_step";
  std::filesystem::create_directories(dir);

  std::vector<Case> cases;
  json peer_cases = json::array();
  std::mt19937 rng(7);
  for (const ModelShape& m : all_models) {
    if (std::find(models.begin(), models.end(), m.name) == models.end()) continue;
    for (auto [rows, max_len] : {std::pair{16, 128}, std::pair{4, 512}}) {
      const int max_predictions = max_len == 512 ? 76 : 20;
      // A pool of sequences to pack; the padded batch is its first `rows`.
      auto sequences = MakeSequences(Lengths(rows * 64, max_len, rng), max_predictions, rng);
      std::vector<std::vector<const Instance*>> padded;
      for (int b = 0; b < rows; ++b) padded.push_back({&sequences[b]});
      std::vector<uint16_t> lengths;
      for (const auto& in : sequences) lengths.push_back(static_cast<uint16_t>(in.length()));
      auto packing = pbert::data::PackLengths("lp", lengths, {max_len, 8, 1});
      if (!packing.ok()) {
        std::cerr << packing.status() << "\n";
        return 1;
      }
      // Rows spread evenly over the index, which lists them by shape: the
      // batch's packing factor is then close to the whole pool's.
      std::vector<std::vector<const Instance*>> packed;
      const uint64_t stride = packing->index.rows() / rows;
      for (int r = 0; r < rows; ++r) {
        packed.emplace_back();
        for (uint32_t id : packing->index.Row(r * stride + stride / 2)) {
          packed.back().push_back(&sequences[id]);
        }
      }
      using pbert::model::AttentionKind;
      for (auto [is_packed, attention] :
           {std::pair{false, AttentionKind::kDense}, std::pair{true, AttentionKind::kDense},
            std::pair{true, AttentionKind::kBlocked}}) {
        Case c;
        c.model = m;
        c.rows = rows;
        c.max_len = max_len;
        c.packed = is_packed;
        c.attention = attention;
        c.name = absl::StrCat(m.name, "-", rows, "x", max_len,
                              !is_packed                             ? "-padded"
                              : attention == AttentionKind::kDense ? "-packed-dense"
                                                                     : "-packed-blocked");
        const auto& layout = is_packed ? packed : padded;
        c.batch = *pbert::data::MakeBatch(layout, {max_len, is_packed ? 8 : 1, 0});
        for (const auto& row : layout) {
          for (const Instance* in : row) c.tokens += in->length();
          c.sequences += row.size();
        }
        if (!is_packed) peer_cases.push_back(PeerCase(c, sequences, dir));
        cases.push_back(std::move(c));
      }
    }
  }
  const std::string cases_path = dir + "/cases.json";
  std::ofstream(cases_path) << peer_cases.dump();

  // The peers: persistent processes, so that all sides take turns. "peer"
  // runs as a user would start it; when packed-bert re-selected OpenBLAS's
  // kernels, "peer-tuned" runs with the same kernels (OPENBLAS_CORETYPE), so
  // that the comparison is also made on equal matrix products.
  struct Peer {
    std::string name, env, mode = "eager";
    FILE* in = nullptr;
    std::ifstream out;
    std::vector<Timing> timing;
    json Ask(const std::string& command) {
      std::fprintf(in, "%s\n", command.c_str());
      std::fflush(in);
      std::string line;
      std::getline(out, line);
      json reply = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (reply.is_discarded()) {
        std::fprintf(stderr, "%s failed on '%s' (its error is above)\n", name.c_str(),
                     command.c_str());
        std::exit(1);
      }
      return reply;
    }
  };
  std::vector<std::unique_ptr<Peer>> peers;
  const std::string peer_script = std::string(pbert::testing::SourceDir()) + "/bench/peer_step.py";
  auto add_peer = [&](const char* name, std::string env, const char* mode) {
    peers.push_back(std::make_unique<Peer>());
    peers.back()->name = name;
    peers.back()->env = std::move(env);
    peers.back()->mode = mode;
  };
  const std::string user_env = "env -u OPENBLAS_CORETYPE -u LD_PRELOAD -u GLIBC_TUNABLES";
  const std::string tuned_env =
      blas.chosen == blas.loaded
          ? user_env
          : absl::StrCat("env -u LD_PRELOAD -u GLIBC_TUNABLES OPENBLAS_CORETYPE=", blas.chosen);
  if (peer_set == "none") {
  } else if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0) {
    add_peer("peer", user_env, "eager");
    if (blas.chosen != blas.loaded) add_peer("peer-tuned", tuned_env, "eager");
    if (peer_set == "all" &&
        std::system("/usr/bin/python3 -c 'import torch; torch.compile' 2>/dev/null") == 0) {
      add_peer("peer-compile", tuned_env, "compile");
    }
  } else {
    std::cerr << "python3-torch not installed: packed-bert's side only "
                 "(apt-get install python3-torch for the peer)\n";
  }
  for (auto& peer : peers) {
    const std::string to_peer = absl::StrCat(dir, "/to_", peer->name),
                      from_peer = absl::StrCat(dir, "/from_", peer->name);
    std::filesystem::remove(to_peer);
    std::filesystem::remove(from_peer);
    std::system(absl::StrCat("mkfifo ", to_peer, " ", from_peer).c_str());
    std::system(absl::StrCat(peer->env, " /usr/bin/python3 ", peer_script, " ", cases_path, " ",
                             threads, bf16 ? " bf16" : " fp32", " ", peer->mode, " <", to_peer,
                             " >", from_peer,
                             " &")
                    .c_str());
    peer->in = std::fopen(to_peer.c_str(), "w");
    peer->out.open(from_peer);
    peer->timing.resize(cases.size());
    const json version = peer->Ask("version");
    std::printf("%s: PyTorch %s, %s, OpenBLAS %s kernels\n", peer->name.c_str(),
                version["torch"].get<std::string>().c_str(),
                version["mode"].get<std::string>().c_str(),
                peer->Ask("blas")["core"].get<std::string>().c_str());
  }

  auto communicator =
      pbert::distributed::Communicator::Single();
  std::map<std::string, Ours> ours, ours_second;  // by model size
  std::vector<Timing> our_timing(cases.size()), second_timing(cases.size());
  for (const Case& c : cases) {
    const ModelShape& m = c.model;
    if (ours.count(m.name)) continue;
    pbert::train::TraineeOptions o;
    o.bert = m.Options();
    o.lamb = pbert::optim::LambOptions(1e-4);
    o.precision = precision;
    o.seed = 1;
    for (bool other : {false, true}) {
      if (other && !both) continue;
      o.master_weights = other ? second->master_weights : master_weights;
      const bool f = other ? second->fused : fused;
      o.bert.fused_layers(f).fused_qkv(f);
      auto made = pbert::train::Trainee::Make(o, *communicator);
      if (!made.ok()) {
        std::cerr << made.status() << "\n";
        return 1;
      }
      (other ? ours_second : ours)[m.name] = std::move(*made);
    }
  }
  const pbert::train::StepOptions step_options;
  // Round 0 warms both sides up and is not counted.
  for (int round = 0; round <= rounds; ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      Case& c = cases[i];
      for (bool other : {false, true}) {
        if (other && !both) continue;
        pbert::train::Trainee& o = *(other ? ours_second : ours)[c.model.name];
        std::vector<Timing>& timing = other ? second_timing : our_timing;
        const pbert::model::InputPlan plan = PlanOf(o, c.attention);
        long faults = MinorFaults();
        for (int s = 0; s < steps; ++s) {
          // What the loader's threads do ahead of the step in a run, timed
          // apart: the host work that is off the training thread.
          auto start = std::chrono::steady_clock::now();
          auto prepared =
              pbert::train::Prepare(std::vector<pbert::data::PackedBatch>{c.batch}, plan, {&o.task()});
          auto prepared_at = std::chrono::steady_clock::now();
          if (!prepared.ok()) {
            std::cerr << prepared.status() << "\n";
            return 1;
          }
          auto result = pbert::train::TrainStep(o, *communicator, *prepared, 1e-4, step_options);
          if (!result.ok()) {
            std::cerr << result.status() << "\n";
            return 1;
          }
          if (round > 0) {
            timing[i].seconds.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - prepared_at)
                    .count());
            timing[i].prepare_seconds.push_back(
                std::chrono::duration<double>(prepared_at - start).count());
          }
        }
        if (round > 0) {
          timing[i].faults += static_cast<double>(MinorFaults() - faults);
          timing[i].steps += steps;
        }
      }
      for (auto& peer : peers) {
        if (c.packed) continue;
        json r = peer->Ask(absl::StrCat("run ", c.name, " ", steps));
        if (round > 0) {
          Timing& t = peer->timing[i];
          for (double s : r["seconds"]) t.seconds.push_back(s);
          t.faults += r["minflt"].get<double>();
          t.steps += steps;
        }
      }
    }
  }

  if (!profile.empty()) {
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].name != profile) continue;
      pbert::train::Trainee& o = *ours[cases[i].model.name];
      auto prepared = pbert::train::Prepare(std::vector<pbert::data::PackedBatch>{cases[i].batch},
                                            PlanOf(o, cases[i].attention), {&o.task()});
      if (!prepared.ok()) {
        std::cerr << prepared.status() << "\n";
        return 1;
      }
      PrintTopOperators(
          absl::StrCat(profile, ", packed-bert, ", steps, " steps"),
          [&] {
            for (int s = 0; s < steps; ++s) {
              (void)pbert::train::TrainStep(o, *communicator, *prepared, 1e-4, step_options);
            }
          },
          25);
    }
  }
  std::printf("%-28s %-12s %9s %9s %12s %11s %11s\n", "case", "side", "median s", "min s",
              "real tok/s", "faults/step", "inputs ms");
  auto row = [&](const Case& c, const char* side, const Timing& t) {
    const std::string inputs =
        t.prepare_seconds.empty() ? "" : absl::StrFormat("%.2f", 1e3 * Median(t.prepare_seconds));
    std::printf("%-28s %-12s %9.4f %9.4f %12.0f %11.0f %11s\n", c.name.c_str(), side,
                Median(t.seconds), *std::min_element(t.seconds.begin(), t.seconds.end()),
                c.tokens / Median(t.seconds), t.faults / std::max(1, t.steps), inputs.c_str());
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    row(cases[i], "packed-bert", our_timing[i]);
    if (both) row(cases[i], second->side, second_timing[i]);
    for (auto& peer : peers) {
      if (!peer->timing[i].seconds.empty()) row(cases[i], peer->name.c_str(), peer->timing[i]);
    }
  }
  std::printf("\n");
  for (auto& peer : peers) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      // The padded case of the same model and shape comes first of its three.
      const Timing& theirs = peer->timing[i - i % 3];
      if (theirs.seconds.empty()) continue;
      if (!c.packed) {
        std::printf("ratio %-28s packed-bert / %s step speed, same padded batch: %.2f\n",
                    c.name.c_str(), peer->name.c_str(),
                    Median(theirs.seconds) / Median(our_timing[i].seconds));
      } else {
        const double ours_rate = c.tokens / Median(our_timing[i].seconds);
        const double peer_rate = cases[i - i % 3].tokens / Median(theirs.seconds);
        std::printf(
            "ratio %-28s packed-bert on packed rows / %s on padded rows, real tokens/s: %.2f "
            "(packing factor %.2f: x%.2f of it)\n",
            c.name.c_str(), peer->name.c_str(), ours_rate / peer_rate, c.sequences / c.rows,
            ours_rate / peer_rate / (c.sequences / c.rows));
      }
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (c.packed && c.attention == pbert::model::AttentionKind::kBlocked) {
      std::printf("ratio %-28s blocked / dense attention, packed-bert step speed: %.2f\n",
                  c.name.c_str(), Median(our_timing[i - 1].seconds) / Median(our_timing[i].seconds));
    }
  }
  for (size_t i = 0; both && i < cases.size(); ++i) {
    const double first = Median(our_timing[i].seconds), other = Median(second_timing[i].seconds);
    std::printf("ratio %-28s %s, packed-bert step speed: %.2f\n", cases[i].name.c_str(),
                second->ratio, second->newer ? first / other : other / first);
  }
  rusage self_usage;
  getrusage(RUSAGE_SELF, &self_usage);
  std::printf("\npeak RSS: packed-bert %.0f MB", self_usage.ru_maxrss / 1024.0);
  for (auto& peer : peers) {
    std::printf(", %s %.0f MB", peer->name.c_str(),
                peer->Ask("rss")["maxrss_kb"].get<double>() / 1024.0);
    std::fprintf(peer->in, "quit\n");
    std::fclose(peer->in);
  }
  std::printf(" (each side's whole process, all cases)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pbert::UsePassiveOpenMpWait(argv);  // as packed-bert train does; the peers inherit it
  return Main(argc, argv);
}
