// bench/step: one training step (forward, losses, backward, clipping, LAMB)
// of packed-bert against the same step in Python PyTorch (bench/peer_step.py
// under Debian's python3-torch), same shapes, same data, same threads, the
// cases taking turns over rounds. Prints per case the median and min step
// time, real tokens per second, minor page faults per step, and the ratios.
//
//   build/bench/step [--rounds 5] [--steps 3] [--threads 2] [--models tiny,mid]
//
// Cases: for each model (tiny: 128 wide, 2 layers; mid: 256 wide, 4 layers,
// 4 heads, FFN 1024) and shape (16x128, 4x512): the padded batch (one
// sequence per row) on both sides, and packed-bert on packed rows of
// sequences of the same lengths (Wikipedia's, from the published histogram
// when ../shared/data is there). Peak RSS is reported per side.
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "data/batch.h"
#include "data/histogram.h"
#include "data/packing/report.h"
#include "dist/communicator.h"
#include "nlohmann/json.hpp"
#include "optim/lamb.h"
#include "train/step.h"

namespace {

using pbert::data::Instance;
using json = nlohmann::json;

struct ModelShape {
  std::string name;
  int64_t hidden, layers, heads, ffn;
};

struct Case {
  std::string name;
  ModelShape model;
  int rows, max_len;
  bool packed;
  pbert::data::PackedBatch batch;
  double tokens = 0;     // real tokens in the batch
  double sequences = 0;  // sequences in the batch
};

// Sequence lengths like Wikipedia's at 512 (the published histogram, cut at
// max_len), or uniform if ../shared/data is absent.
std::vector<int> Lengths(int count, int max_len, std::mt19937& rng) {
  std::vector<int> out;
  auto histogram = pbert::data::ReadHistogramFile(
      std::string(PBERT_SHARED_DATA_DIR) + "/histogram_wikipedia_512.txt", 512);
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
  double faults = 0;  // minor page faults, summed
  int steps = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

long MinorFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Our side of one case: a model and optimizer kept across rounds.
struct Ours {
  pbert::model::BertForPreTraining model{nullptr};
  std::unique_ptr<pbert::optim::Lamb> optimizer;
};

int Main(int argc, char** argv) {
  int rounds = 5, steps = 3, threads = 2;
  std::vector<std::string> models = {"tiny", "mid"};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds") rounds = std::stoi(value);
    else if (flag == "--steps") steps = std::stoi(value);
    else if (flag == "--threads") threads = std::stoi(value);
    else if (flag == "--models") models = absl::StrSplit(value, ',');
    else {
      std::cerr << "usage: bench/step [--rounds N] [--steps K] [--threads T] [--models tiny,mid]\n";
      return 2;
    }
  }
  at::set_num_threads(threads);
  const std::vector<ModelShape> all_models = {{"tiny", 128, 2, 2, 512}, {"mid", 256, 4, 4, 1024}};
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
      for (bool is_packed : {false, true}) {
        Case c;
        c.model = m;
        c.rows = rows;
        c.max_len = max_len;
        c.packed = is_packed;
        c.name = absl::StrCat(m.name, "-", rows, "x", max_len, is_packed ? "-packed" : "-padded");
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

  // The peer: one persistent process, so both sides take turns.
  const std::string peer_script = std::string(PBERT_SOURCE_DIR) + "/bench/peer_step.py";
  const std::string to_peer = dir + "/to_peer", from_peer = dir + "/from_peer";
  std::filesystem::remove(to_peer);
  std::filesystem::remove(from_peer);
  const bool have_peer = std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0;
  FILE* peer = nullptr;
  std::ifstream peer_out;
  if (have_peer) {
    std::system(absl::StrCat("mkfifo ", to_peer, " ", from_peer).c_str());
    std::system(absl::StrCat("/usr/bin/python3 ", peer_script, " ", cases_path, " ", threads,
                             " <", to_peer, " >", from_peer, " &")
                    .c_str());
    peer = std::fopen(to_peer.c_str(), "w");
    peer_out.open(from_peer);
  } else {
    std::cerr << "python3-torch not installed: packed-bert's side only "
                 "(apt-get install python3-torch for the peer)\n";
  }
  auto ask_peer = [&](const std::string& command) {
    std::fprintf(peer, "%s\n", command.c_str());
    std::fflush(peer);
    std::string line;
    std::getline(peer_out, line);
    return json::parse(line);
  };

  auto communicator =
      *pbert::dist::Communicator::Create(pbert::dist::Environment{}, "gloo");
  std::vector<Ours> ours(cases.size());
  std::vector<Timing> our_timing(cases.size()), peer_timing(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    torch::manual_seed(1);
    const ModelShape& m = cases[i].model;
    ours[i].model = pbert::model::BertForPreTraining(pbert::model::BertOptions()
                                                         .hidden_size(m.hidden)
                                                         .num_layers(m.layers)
                                                         .num_heads(m.heads)
                                                         .intermediate_size(m.ffn));
    ours[i].optimizer = std::make_unique<pbert::optim::Lamb>(
        pbert::optim::BertParamGroups(ours[i].model->named_parameters(),
                                      pbert::optim::LambOptions(1e-4), true),
        pbert::optim::LambOptions(1e-4));
  }
  // Round 0 warms both sides up and is not counted.
  for (int round = 0; round <= rounds; ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      Case& c = cases[i];
      long faults = MinorFaults();
      for (int s = 0; s < steps; ++s) {
        auto start = std::chrono::steady_clock::now();
        auto result = pbert::train::TrainStep(ours[i].model, *ours[i].optimizer, *communicator,
                                              {c.batch}, 1e-4, pbert::train::StepOptions());
        if (!result.ok()) {
          std::cerr << result.status() << "\n";
          return 1;
        }
        if (round > 0) {
          our_timing[i].seconds.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
      }
      if (round > 0) {
        our_timing[i].faults += static_cast<double>(MinorFaults() - faults);
        our_timing[i].steps += steps;
      }
      if (peer != nullptr && !c.packed) {
        json r = ask_peer(absl::StrCat("run ", c.name, " ", steps));
        if (round > 0) {
          for (double s : r["seconds"]) peer_timing[i].seconds.push_back(s);
          peer_timing[i].faults += r["minflt"].get<double>();
          peer_timing[i].steps += steps;
        }
      }
    }
  }

  std::printf("%-22s %-12s %9s %9s %12s %11s\n", "case", "side", "median s", "min s",
              "real tok/s", "faults/step");
  auto row = [&](const Case& c, const char* side, const Timing& t) {
    std::printf("%-22s %-12s %9.4f %9.4f %12.0f %11.0f\n", c.name.c_str(), side,
                Median(t.seconds), *std::min_element(t.seconds.begin(), t.seconds.end()),
                c.tokens / Median(t.seconds), t.faults / std::max(1, t.steps));
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    row(cases[i], "packed-bert", our_timing[i]);
    if (!peer_timing[i].seconds.empty()) row(cases[i], "peer", peer_timing[i]);
  }
  std::printf("\n");
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (!c.packed && !peer_timing[i].seconds.empty()) {
      std::printf("ratio %-28s packed-bert / peer step speed, same padded batch: %.2f\n",
                  c.name.c_str(), Median(peer_timing[i].seconds) / Median(our_timing[i].seconds));
    }
    if (c.packed && i > 0 && !peer_timing[i - 1].seconds.empty()) {
      const Case& padded = cases[i - 1];
      const double ours_rate = c.tokens / Median(our_timing[i].seconds);
      const double peer_rate = padded.tokens / Median(peer_timing[i - 1].seconds);
      std::printf(
          "ratio %-28s packed-bert on packed rows / peer on padded rows, real tokens/s: %.2f "
          "(packing factor %.2f)\n",
          c.name.c_str(), ours_rate / peer_rate, c.sequences / c.rows);
    }
  }
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf("\npeak RSS: packed-bert %.0f MB", usage.ru_maxrss / 1024.0);
  if (peer != nullptr) {
    std::printf(", peer %.0f MB", ask_peer("rss")["maxrss_kb"].get<double>() / 1024.0);
    std::fprintf(peer, "quit\n");
    std::fclose(peer);
  }
  std::printf(" (each side's whole process, all cases)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
