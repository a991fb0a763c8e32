// bench/finetune: fine-tuning steps on packed features against the same
// features padded, one sequence per row at the task's length (as Google's
// run_squad.py and run_classifier.py, NVIDIA's and Hugging Face's
// run_squad pad them), at SQuAD-384's length distribution (the published
// histogram, ../shared/data/histogram_squad_384.txt) and at GLUE-128's
// (sentence pairs of Wikipedia, tokenized, as MRPC and RTE pair sentences;
// uniform lengths where ../shared/data is absent). Every case runs what
// `packed-bert finetune` runs: the task (tasks/fine_tuning.h: the span head
// for SQuAD, the classifier for GLUE), its trainee, the loader with its
// threads making each micro-batch's inputs and task tensors ahead, and the
// one training step; a step's time is what the command pays for it, the
// wait for the loader included. A step takes --sequences sequences on
// average (packed: the rows that hold as many). Cases: "padded" attends
// over the padded rows (dense, as those scripts do); "packed dense" over
// the packed rows with the block-diagonal mask (the packing factor at
// work); "packed" in the run's default layout (auto). The cases take turns
// over rounds (round 0 warms up and is not counted). Prints per case the
// rows per step, the median step time, sequences and real tokens per
// second, and packed over padded against the packing factor (the speed-up
// if a step's time were its rows').
//
//   build/bench/finetune [--model tiny] [--rounds 3] [--steps 4] [--threads 2]
//                        [--sequences 32] [--device cpu|cuda] [--precision auto|fp32|bf16]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/model_sizes.h"
#include "bench/synthetic.h"
#include "common/platform.h"
#include "data/packing/pack.h"
#include "data/tokenizer.h"
#include "data/random.h"
#include "tests/source_paths.h"
#include "train/device.h"
#include "data/loader.h"
#include "tasks/fine_tuning.h"
#include "train/inputs.h"
#include "train/step.h"
#include "train/trainee.h"

namespace {

namespace fs = std::filesystem;
using pbert::tasks::Feature;
using pbert::tasks::HeadKind;

struct Distribution {
  std::string name, source;
  int max_len;
  HeadKind head;
  std::vector<int> lengths;
};

// Sentence pairs of a Wikipedia file (consecutive sentences of a
// paragraph), tokenized, cut to `max_len` as run_classifier.py cuts pairs.
std::vector<int> PairLengths(const std::string& corpus, const std::string& vocab, int max_len,
                             size_t count) {
  auto vocabulary = pbert::data::Vocabulary::Load(vocab);
  if (!vocabulary.ok()) return {};
  pbert::data::Tokenizer tokenizer(
      std::make_shared<pbert::data::Vocabulary>(std::move(*vocabulary)), true);
  std::ifstream in(corpus);
  std::vector<int> out;
  for (std::string line; out.size() < count && std::getline(in, line);) {
    if (line.empty() || line[0] == '<') continue;
    std::vector<std::string> sentences = absl::StrSplit(line, ". ");
    for (size_t i = 0; i + 1 < sentences.size() && out.size() < count; i += 2) {
      const size_t a = tokenizer.Encode(sentences[i]).size();
      const size_t b = tokenizer.Encode(sentences[i + 1]).size();
      out.push_back(static_cast<int>(std::min<size_t>(a + b + 3, static_cast<size_t>(max_len))));
    }
  }
  return out;
}

std::vector<Feature> FeaturesOf(const std::vector<int>& lengths, uint32_t seed) {
  pbert::data::Rng random(seed, 0);
  std::vector<Feature> out;
  for (pbert::data::Instance& sequence : pbert::bench::MakeSequences(lengths, seed)) {
    Feature f;
    sequence.masked_positions.clear();
    sequence.masked_ids.clear();
    f.sequence = std::move(sequence);
    const int n = f.sequence.length();
    f.start = static_cast<int32_t>(random.Int(0, n - 1));
    f.end = std::min(n - 1, f.start + static_cast<int32_t>(random.Int(0, 4)));
    f.label = static_cast<float>(random.Int(0, 1));
    out.push_back(std::move(f));
  }
  return out;
}

struct Case {
  std::string name;
  int depth;
  pbert::model::AttentionKind attention;
  std::shared_ptr<const pbert::tasks::Task> task;  // its features, packed
  int64_t rows_per_step = 0;
  double packing_factor = 1;
  std::vector<double> step_seconds;  // counted rounds
  double sequences = 0, tokens = 0;
};

// The fine-tuning task of `d`'s features, packed with `algorithm` into rows
// of at most `depth`.
absl::StatusOr<std::shared_ptr<const pbert::tasks::Task>> TaskOf(
    const Distribution& d, const std::vector<Feature>& features, const std::string& algorithm,
    int depth, const pbert::model::BertOptions& options) {
  pbert::data::DataConfig data;
  pbert::data::PrepareOptions prepare;
  pbert::data::PackingConfig packing;
  packing.algorithm = algorithm;
  packing.options.max_depth = depth;
  pbert::model::ModelConfig model;
  model.bert = options;
  pbert::tasks::FinetuneConfig finetune;
  finetune.max_seq_length = d.max_len;
  const pbert::tasks::TaskSetup setup{data, prepare, packing, model, finetune, 1, true, {}, true};
  auto set = pbert::tasks::PackFeatures("train", "bench", d.name, features, setup);
  if (!set.ok()) return set.status();
  pbert::tasks::FineTuning parts;
  parts.head = d.head;
  parts.evaluate = [](const pbert::tasks::PackedSet&, const c10::Device&) {
    return std::unique_ptr<pbert::tasks::SetEvaluation>();
  };
  return std::shared_ptr<const pbert::tasks::Task>(pbert::tasks::MakeFineTuningTask(
      d.name, std::make_unique<pbert::tasks::PackedSet>(std::move(*set)), {}, std::move(parts)));
}

int Fail(const std::string& message) {
  std::cerr << "bench/finetune: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  pbert::UsePassiveOpenMpWait(argv);  // as packed-bert does
  int rounds = 3, steps = 4, threads = 2;
  int64_t sequences = 32;
  std::string model_name = "tiny", device_name = "cpu", precision_name = "auto";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--rounds") rounds = std::stoi(value);
    else if (flag == "--steps") steps = std::stoi(value);
    else if (flag == "--threads") threads = std::stoi(value);
    else if (flag == "--sequences") sequences = std::stoll(value);
    else if (flag == "--model") model_name = value;
    else if (flag == "--device") device_name = value;
    else if (flag == "--precision") precision_name = value;
    else {
      std::cerr << "usage: bench/finetune [--model tiny|mini|medium|base|large] [--rounds N] "
                   "[--steps K] [--threads T] [--sequences N] [--device cpu|cuda] "
                   "[--precision auto|fp32|bf16]\n";
      return 2;
    }
    ++i;
  }
  const pbert::bench::ModelSize* size = pbert::bench::FindModelSize(model_name);
  if (size == nullptr) return Fail("no model size " + model_name);
  auto choice = pbert::ParseChoice<pbert::train::DeviceChoice>(device_name, "--device");
  if (!choice.ok()) return Fail(std::string(choice.status().message()));
  auto device = pbert::train::ResolveDevice(*choice, 0);
  if (!device.ok()) return Fail(std::string(device.status().message()));
  auto wanted = pbert::ParseChoice<pbert::model::Precision>(precision_name, "--precision");
  if (!wanted.ok()) return Fail(std::string(wanted.status().message()));
  auto precision = pbert::model::ResolvePrecision(*wanted, *device);
  if (!precision.ok()) return Fail(std::string(precision.status().message()));
  pbert::TuneMalloc();
  const pbert::BlasKernels& blas = pbert::TuneOpenBlasKernels();
  at::set_num_threads(threads);

  // The two length distributions.
  const std::string shared = pbert::testing::SharedDataDir();
  std::vector<Distribution> distributions;
  {
    Distribution squad{"squad-384", "", 384, HeadKind::kSpan, {}};
    auto histogram = pbert::bench::ChooseHistogram(shared + "/histogram_squad_384.txt", 384);
    std::vector<uint64_t> counts;
    if (histogram.ok()) {
      counts = histogram->counts;
      squad.source = "histogram_squad_384.txt";
    } else {
      squad.source = "uniform in [32, 384] (no ../shared/data)";
    }
    squad.lengths = pbert::bench::DrawLengths(counts, 4096, 1, 384);
    distributions.push_back(std::move(squad));
    Distribution glue{"glue-128", "", 128, HeadKind::kClasses, {}};
    glue.lengths = PairLengths(shared + "/wiki_00", shared + "/bert-base-uncased-vocab.txt", 128,
                               4096);
    if (glue.lengths.size() < 1024) {
      glue.lengths = pbert::bench::DrawLengths({}, 4096, 2, 128);
      glue.source = "uniform in [32, 128] (no ../shared/data)";
    } else {
      glue.source = "Wikipedia sentence pairs (wiki_00)";
    }
    distributions.push_back(std::move(glue));
  }
  std::printf("model %s (%lld wide, %lld layers), %s, %s, %d threads, OpenBLAS %s kernels\n",
              size->name.c_str(), static_cast<long long>(size->hidden),
              static_cast<long long>(size->layers), device->str().c_str(),
              std::string(pbert::NameOf(*precision)).c_str(), threads, blas.chosen.c_str());
  std::printf("%d rounds of %d steps per case, %lld sequences per step on average\n", rounds,
              steps, static_cast<long long>(sequences));

  const pbert::model::BertOptions base = size->Options().max_position_embeddings(512);
  auto communicator = pbert::distributed::Communicator::Single();
  std::vector<Case> cases;
  for (const Distribution& d : distributions) {
    const std::vector<Feature> features = FeaturesOf(d.lengths, 3);
    using pbert::model::AttentionKind;
    for (const auto& [depth, attention, what] :
         {std::tuple{1, AttentionKind::kDense, " padded"},
          std::tuple{8, AttentionKind::kDense, " packed dense"},
          std::tuple{8, AttentionKind::kAuto, " packed"}}) {
      Case c;
      c.name = d.name + what;
      c.depth = depth;
      c.attention = attention;
      auto task = TaskOf(d, features, depth == 1 ? "none" : "lp", depth, base);
      if (!task.ok()) return Fail(std::string(task.status().message()));
      c.task = *task;
      c.packing_factor = c.task->train()->packing_factor();
      c.rows_per_step = std::max<int64_t>(
          1, std::llround(static_cast<double>(sequences) / c.packing_factor));
      cases.push_back(std::move(c));
    }
    std::printf("%s: %s, mean length %.1f, packing factor %.3f (lp, depth 8)\n", d.name.c_str(),
                d.source.c_str(),
                std::accumulate(d.lengths.begin(), d.lengths.end(), 0.0) / d.lengths.size(),
                cases.back().packing_factor);
  }

  for (int round = 0; round <= rounds; ++round) {
    // Alternate the order of the cases round by round.
    std::vector<size_t> order(cases.size());
    std::iota(order.begin(), order.end(), 0);
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    for (size_t k : order) {
      Case& c = cases[k];
      const pbert::tasks::PackedSet& set = *c.task->train();
      // A fresh model, optimizer and loader per case and round, at the
      // round's place in the rows: the same work each time.
      pbert::train::TraineeOptions options;
      options.task = c.task;
      options.bert = base;
      options.bert.attention(c.attention);
      options.lamb = pbert::optim::LambOptions(3e-5).trust_ratio(false);  // AdamW
      options.precision = *precision;
      options.device = *device;
      options.seed = 1;
      auto trainee = pbert::train::Trainee::Make(options, *communicator);
      if (!trainee.ok()) return Fail(std::string(trainee.status().message()));
      pbert::data::LoaderOptions loader;
      loader.rows_per_batch = c.rows_per_step;
      loader.shape = set.shape;
      loader.seed = 4;
      loader.threads = 1;
      loader.prepare = pbert::train::Preparer((*trainee)->input_plan(), {c.task.get(), &set});
      auto made = pbert::data::Loader::Create(
          set.sequences, set.rows, loader,
          {static_cast<uint64_t>(round * steps * c.rows_per_step)});
      if (!made.ok()) return Fail(std::string(made.status().message()));
      for (int s = 0; s < steps; ++s) {
        const auto start = std::chrono::steady_clock::now();
        auto batches = (*made)->Next();
        if (!batches.ok()) return Fail(std::string(batches.status().message()));
        auto stepped = pbert::train::TrainStep(**trainee, *communicator,
                                               pbert::train::Prepared(*batches), 3e-5, {});
        if (!stepped.ok()) return Fail(std::string(stepped.status().message()));
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (round == 0) continue;
        c.step_seconds.push_back(seconds);
        c.sequences += stepped->metrics.sequences;
        c.tokens += stepped->metrics.tokens;
      }
    }
  }

  std::printf("\n%-24s %9s %10s %12s %14s %12s %14s\n", "case", "rows/step", "step ms",
              "sequences/s", "real tokens/s", "vs padded", "packing factor");
  for (size_t k = 0; k < cases.size(); ++k) {
    Case& c = cases[k];
    std::vector<double> sorted = c.step_seconds;
    std::sort(sorted.begin(), sorted.end());
    const double total = std::accumulate(sorted.begin(), sorted.end(), 0.0);
    const double rate = c.sequences / total;
    std::string ratio = "", factor = "";
    if (c.depth > 1) {
      const Case& padded = cases[k - (c.attention == pbert::model::AttentionKind::kDense ? 1 : 2)];
      const double padded_rate =
          padded.sequences / std::accumulate(padded.step_seconds.begin(),
                                             padded.step_seconds.end(), 0.0);
      ratio = absl::StrFormat("%.2fx", rate / padded_rate);
      factor = absl::StrFormat("%.2fx", c.packing_factor);
    }
    std::printf("%-24s %9lld %10.1f %12.1f %14.0f %12s %14s\n", c.name.c_str(),
                static_cast<long long>(c.rows_per_step), 1e3 * sorted[sorted.size() / 2], rate,
                c.tokens / total, ratio.c_str(), factor.c_str());
  }
  return 0;
}
