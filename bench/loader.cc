// bench/loader: the loader alone at MLPerf BERT phase-2 shapes, against what
// a node of 8 GPUs consumes. The best phase-2 submissions train about 970
// sequences/s per H100; the loader should make batches at 10 times that,
// 9,700 sequences/s per GPU, so that it never holds a step up. Each case
// makes a loader over synthetic sequences at Wikipedia's length histogram
// (the published one, or uniform in [32, 512] where ../shared/data is
// absent), packed by lp at the case's depth, with micro-batches of 48 rows
// of 512 (a phase-2 micro-batch per GPU), each made into the model's
// inputs in the case's attention layout on the loader's threads, as
// `train` does (train/inputs.h), and takes its steps as fast as it gives
// them: nothing else runs. The cases take turns over rounds (round 0 warms
// up and is not counted). Prints per case sequences/s, sequences/s per
// loader thread, and the threads one GPU needs for 9,700 sequences/s.
//
//   build/bench/loader [--sequences 100000] [--rows 48] [--depths 3,8]
//       [--layouts dense,varlen] [--threads 1,2] [--steps 100] [--rounds 3]
//       [--histogram FILE]
//
// On a CPU the inputs stay in host memory; on a GPU machine the loader's
// threads also page-lock them and start their copy, which this does not
// measure.
#include "data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/synthetic.h"
#include "common/choices.h"
#include "data/packing/pack.h"
#include "data/source.h"
#include "model/bert_options.h"
#include "model/inputs.h"
#include "tests/source_paths.h"
#include "train/inputs.h"

namespace {

constexpr int kMaxLen = 512;
constexpr double kNeededPerGpu = 10 * 970.0;  // sequences/s

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "bench/loader: %s\nusage: loader [--sequences N] [--rows N] [--depths 3,8] "
               "[--layouts dense,varlen] [--threads 1,2] [--steps N] [--rounds N] "
               "[--histogram FILE]\n",
               why.c_str());
  return 2;
}

bool ParseInts(const std::string& text, std::vector<int>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) return false;
    out->push_back(v);
  }
  return !out->empty();
}

struct Case {
  int depth;
  std::string layout;
  int threads;
  std::shared_ptr<const pbert::data::PackIndex> index;
  pbert::model::InputPlan plan;
  double seconds = 0, sequences = 0, batches = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int sequences = 100000, rows = 48, steps = 100, rounds = 3;
  std::vector<int> depths = {3, 8}, threads = {1, 2};
  std::vector<std::string> layouts = {"dense", "varlen"};
  std::string histogram;  // --histogram; default: bench/synthetic.h's
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--sequences" && absl::SimpleAtoi(value, &sequences) && sequences > 0) {
    } else if (flag == "--rows" && absl::SimpleAtoi(value, &rows) && rows > 0) {
    } else if (flag == "--steps" && absl::SimpleAtoi(value, &steps) && steps > 0) {
    } else if (flag == "--rounds" && absl::SimpleAtoi(value, &rounds) && rounds > 1) {
    } else if (flag == "--depths" && ParseInts(value, &depths)) {
    } else if (flag == "--threads" && ParseInts(value, &threads)) {
    } else if (flag == "--layouts") {
      layouts = absl::StrSplit(value, ',');
    } else if (flag == "--histogram") {
      histogram = value;
    } else {
      return Usage("bad argument " + flag + " " + value);
    }
  }
  auto chosen = pbert::bench::ChooseHistogram(histogram, kMaxLen);
  if (!chosen.ok()) return Usage(std::string(chosen.status().message()));
  const std::vector<uint64_t>& counts = chosen->counts;
  const std::string& lengths_from = chosen->described;
  const std::vector<int> lengths = pbert::bench::DrawLengths(counts, sequences, 7, kMaxLen);
  auto source = pbert::data::MemorySource::Create(
      "synthetic", pbert::bench::MakeSequences(lengths, 11), {30522, kMaxLen, 76});
  if (!source.ok()) return Usage(std::string(source.status().message()));
  const std::vector<uint16_t> lengths16(lengths.begin(), lengths.end());

  std::vector<Case> cases;
  std::map<int, std::shared_ptr<const pbert::data::PackIndex>> indexes;
  std::map<int, double> factors;
  for (int depth : depths) {
    auto packed = pbert::data::PackLengths("lp", lengths16, {kMaxLen, depth, 1});
    if (!packed.ok()) return Usage(std::string(packed.status().message()));
    factors[depth] = packed->run.report.packing_factor;
    indexes[depth] = std::make_shared<const pbert::data::PackIndex>(std::move(packed->index));
  }
  for (int depth : depths) {
    for (const std::string& layout : layouts) {
      auto kind = pbert::ParseChoice<pbert::model::AttentionKind>(layout, "--layouts");
      if (!kind.ok()) return Usage(std::string(kind.status().message()));
      pbert::model::BertOptions options;  // BERT-large's layout choice needs no sizes
      options.attention(*kind);
      for (int t : threads) {
        cases.push_back({depth, layout, t, indexes[depth],
                         pbert::model::InputPlan::For(options, c10::kCPU,
                                                      pbert::model::Precision::kFp32,
                                                      c10::kFloat)});
      }
    }
  }
  std::printf(
      "# the loader alone: %d sequences (lengths %s), lp packing; micro-batches of %d rows of "
      "%d, one per step; %d steps per turn, %d rounds (round 0 not counted)\n\n",
      sequences, lengths_from.c_str(), rows, kMaxLen, steps, rounds);
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < cases.size(); ++k) {
      Case& c = cases[k];
      pbert::data::LoaderOptions o;
      o.rows_per_batch = rows;
      o.shape = {kMaxLen, c.depth, 0};
      o.seed = static_cast<uint64_t>(round * 131 + k);
      o.threads = c.threads;
      o.prepare = pbert::train::Preparer(c.plan);
      // Each turn makes its loader anew (another shuffle), its queue empty:
      // the first step waits for the threads like every other.
      auto loader = pbert::data::Loader::Create(*source, c.index, o);
      if (!loader.ok()) return Usage(std::string(loader.status().message()));
      const auto start = std::chrono::steady_clock::now();
      double made = 0, batches = 0;
      for (int s = 0; s < steps; ++s) {
        auto step = (*loader)->Next();
        if (!step.ok()) return Usage(std::string(step.status().message()));
        made += static_cast<double>(step->sequences);
        batches += static_cast<double>(step->prepared.size());
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (round > 0) {
        c.seconds += seconds;
        c.sequences += made;
        c.batches += batches;
      }
    }
  }
  std::printf(
      "| depth (packing factor) | layout | loader threads | micro-batches/s | sequences/s | "
      "sequences/s per thread | threads per GPU for %.0f sequences/s |\n"
      "|---|---|---|---|---|---|---|\n",
      kNeededPerGpu);
  for (const Case& c : cases) {
    const double rate = c.sequences / c.seconds, per_thread = rate / c.threads;
    std::printf("| %d (%.3f) | %s | %d | %.1f | %.0f | %.0f | %.1f |\n", c.depth, factors[c.depth],
                c.layout.c_str(), c.threads, c.batches / c.seconds, rate, per_thread,
                kNeededPerGpu / per_thread);
  }
  std::printf("\nA node of 8 GPUs needs %.0f sequences/s.\n", 8 * kNeededPerGpu);
  return 0;
}
