// bench/finetune: fine-tuning steps on packed features against the same
// features padded, one sequence per row at the task's length (as Google's
// run_squad.py and run_classifier.py, NVIDIA's and Hugging Face's
// run_squad pad them), at SQuAD-384's length distribution (the published
// histogram, ../shared/data/histogram_squad_384.txt), at GLUE-128's
// (sentence pairs of Wikipedia, tokenized, as MRPC and RTE pair sentences;
// uniform lengths where ../shared/data is absent), and at the short
// sentences of named entities (ner-128) and multi-label texts
// (multilabel-128), their lengths drawn (3 + an exponential of mean 22 and
// 18 tokens). Every case runs what `packed-bert finetune` runs: the task
// (tasks/fine_tuning.h: the span head for SQuAD, the classifier for GLUE,
// the token classifier, the multi-label classifier), its trainee, the loader with its
// threads making each micro-batch's inputs and task tensors ahead, and the
// one training step; a step's time is what the command pays for it, the
// wait for the loader included. A step takes --sequences sequences on
// average (packed: the rows that hold as many). Cases: "padded" attends
// over the padded rows (dense, as those scripts do); "packed dense" over
// the packed rows with the block-diagonal mask (the packing factor at
// work); "packed" in the run's default layout (auto). The cases take turns
// over rounds (round 0 warms up and is not counted). Prints per case the
// rows per step, the median step time, sequences and real tokens per
// second, the peak GPU memory on a GPU, and packed over padded against the
// packing factor (the speed-up if a step's time were its rows').
//
// --peer COMMAND: the Hugging Face peer (bench/hf_peer.py) trains on the
// padded case's sequences of its first two rounds (the first one warms up
// and is not timed), each padded to the task's length as run_squad.py and
// run_glue.py pad them, with the same sequences per step: SQuAD-384 with
// BertForQuestionAnswering, GLUE-128 with BertForSequenceClassification;
// COMMAND gets the plan's path (--plan-out's, the task's name added:
// finetune-plan-squad-384.json) as its last argument. Its row follows the
// task's cases, and a line gives packed-bert's packed case over it.
//
//   build/bench/finetune [--model tiny] [--rounds 3] [--steps 4] [--threads 2]
//                        [--sequences 32] [--features 4096] [--device cpu|cuda]
//                        [--precision auto|fp32|bf16]
//                        [--tasks squad-384,glue-128,ner-128,multilabel-128]
//                        [--histogram histogram_squad_384.txt]
//                        [--peer "python3 bench/hf_peer.py"] [--plan-out finetune-plan.json]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <numeric>
#include <random>
#include <tuple>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/model_sizes.h"
#include "bench/peer.h"
#include "bench/synthetic.h"
#include "common/platform.h"
#include "data/loader.h"
#include "data/packing/pack.h"
#include "data/random.h"
#include "data/tokenizer.h"
#include "gpu/gpu.h"
#include "tasks/fine_tuning.h"
#include "tasks/multi_label.h"
#include "tasks/token_classification.h"
#include "tests/source_paths.h"
#include "train/device.h"
#include "train/inputs.h"
#include "train/step.h"
#include "train/trainee.h"

namespace {

namespace fs = std::filesystem;
using pbert::tasks::Feature;
// The task type a case runs.
enum class HeadKind { kSpan, kClasses, kTokens, kMultiLabel };

struct Distribution {
  std::string name, source;
  int max_len;
  HeadKind head;
  std::string peer_task;  // bench/hf_peer.py's name of the task ("": no peer)
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
    // A tag on about two tokens in three (a word's first piece), none on
    // [CLS] and [SEP]; one or two of 28 labels (GoEmotions' count).
    for (int t = 0; t < n; ++t) {
      const bool tagged = t > 0 && t + 1 < n && random.Int(0, 2) > 0;
      f.token_labels.push_back(tagged ? static_cast<int32_t>(random.Int(0, 8)) : -1);
    }
    f.label_set.push_back(static_cast<int32_t>(random.Int(0, 27)));
    if (random.Int(0, 3) == 0) f.label_set.push_back(static_cast<int32_t>(random.Int(0, 27)));
    out.push_back(std::move(f));
  }
  return out;
}

struct Case {
  std::string name;
  const Distribution* distribution = nullptr;
  int depth;
  pbert::model::AttentionKind attention;
  std::shared_ptr<const pbert::tasks::Task> task;  // its features, packed
  int64_t rows_per_step = 0;
  double packing_factor = 1;
  std::vector<double> step_seconds;  // counted rounds
  double sequences = 0, tokens = 0;
  int64_t peak_bytes = 0;  // on a GPU, the most allocated in a round
  // The padded case's sequences' lengths, step by step, of rounds 0 and 1:
  // the peer's steps.
  std::vector<std::vector<int64_t>> plan;
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
  parts.evaluate = [](const pbert::tasks::PackedSet&, const c10::Device&) {
    return std::unique_ptr<pbert::tasks::SetEvaluation>();
  };
  auto train = std::make_unique<pbert::tasks::PackedSet>(std::move(*set));
  switch (d.head) {
    case HeadKind::kSpan:
      parts.export_head.pooler = false;
      return pbert::tasks::MakeSpanTask(d.name, std::move(train), {}, std::move(parts));
    case HeadKind::kClasses:
      return pbert::tasks::MakeClassTask(d.name, std::move(train), {}, std::move(parts), 2);
    case HeadKind::kTokens:
      parts.export_head.pooler = false;
      return pbert::tasks::MakeTokenClassTask(d.name, std::move(train), {}, std::move(parts), 9);
    case HeadKind::kMultiLabel:
      return pbert::tasks::MakeMultiLabelTask(d.name, std::move(train), {}, std::move(parts), 28);
  }
  return absl::InternalError("no such head");
}

// A failure (exit 1), or with `code` 2 what this machine or the flags
// cannot give.
int Fail(const std::string& message, int code = 1) {
  std::cerr << "bench/finetune: " << message << "\n";
  return code;
}

// A flag or its value that cannot be taken: one line naming it, exit 2.
int Usage(const std::string& why) {
  std::cerr << "bench/finetune: " << why
            << "; usage: bench/finetune [--model tiny|mini|medium|base|large] [--rounds N] "
               "[--steps K] [--threads T] [--sequences N] [--features N] [--device cpu|cuda] "
               "[--precision auto|fp32|bf16] [--tasks squad-384,glue-128,ner-128,multilabel-128] "
               "[--histogram FILE] [--peer COMMAND] [--plan-out FILE]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  pbert::UsePassiveOpenMpWait(argv);  // as packed-bert does
  int rounds = 3, steps = 4, threads = 2;
  int64_t sequences = 32, feature_count = 4096;
  std::string model_name = "tiny", device_name = "cpu", precision_name = "auto";
  std::string tasks = "squad-384,glue-128,ner-128,multilabel-128", peer, plan_out = "finetune-plan.json", histogram;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    // A whole number of at least `least` for `flag`.
    auto number = [&](auto* out, long long least) {
      long long n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < least) return false;
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(n);
      return true;
    };
    bool taken = true;
    // clang-format off
    if (flag == "--rounds") taken = number(&rounds, 1);
    else if (flag == "--steps") taken = number(&steps, 1);
    else if (flag == "--threads") taken = number(&threads, 1);
    else if (flag == "--sequences") taken = number(&sequences, 1);
    else if (flag == "--features") taken = number(&feature_count, 64);
    else if (flag == "--model") model_name = value;
    else if (flag == "--device") device_name = value;
    else if (flag == "--precision") precision_name = value;
    else if (flag == "--tasks") tasks = value;
    else if (flag == "--histogram") histogram = value;
    else if (flag == "--peer") peer = value;
    else if (flag == "--plan-out") plan_out = value;
    else return Usage("no flag " + flag);
    // clang-format on
    if (!taken) {
      return Usage(absl::StrCat(flag, " ", value, ": not a whole number of at least ",
                                flag == "--features" ? 64 : 1));
    }
  }
  const pbert::bench::ModelSize* size = pbert::bench::FindModelSize(model_name);
  if (size == nullptr) return Usage("--model " + model_name + ": no such model size");
  const std::vector<std::string> wanted_tasks = absl::StrSplit(tasks, ',');
  const std::vector<std::string> known = {"squad-384", "glue-128", "ner-128", "multilabel-128"};
  for (const std::string& name : wanted_tasks) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Usage("--tasks names '" + name + "', which is none of " + absl::StrJoin(known, ", "));
    }
  }
  auto wants = [&](const std::string& name) {
    return std::find(wanted_tasks.begin(), wanted_tasks.end(), name) != wanted_tasks.end();
  };
  // The plans go beside --plan-out's name, in a folder that must be there
  // (before the cases run, not after).
  const fs::path plan_folder = fs::path(plan_out).parent_path();
  if (!peer.empty() && (plan_out.empty() || fs::is_directory(plan_out) ||
                        !fs::is_directory(plan_folder.empty() ? "." : plan_folder))) {
    return Usage("--plan-out " + plan_out + ": not a file name in a folder that exists");
  }
  auto choice = pbert::ParseChoice<pbert::train::DeviceChoice>(device_name, "--device");
  if (!choice.ok()) return Usage(std::string(choice.status().message()));
  auto device = pbert::train::ResolveDevice(*choice, 0);
  if (!device.ok()) return Fail(std::string(device.status().message()), 2);
  auto wanted = pbert::ParseChoice<pbert::model::Precision>(precision_name, "--precision");
  if (!wanted.ok()) return Usage(std::string(wanted.status().message()));
  auto precision = pbert::model::ResolvePrecision(*wanted, *device);
  if (!precision.ok()) return Fail(std::string(precision.status().message()), 2);
  pbert::TuneMalloc();
  const pbert::BlasKernels& blas = pbert::TuneOpenBlasKernels();
  at::set_num_threads(threads);

  // The two length distributions.
  const std::string shared = pbert::testing::SharedDataDir();
  std::vector<Distribution> distributions;
  if (wants("squad-384")) {
    Distribution squad{"squad-384", "", 384, HeadKind::kSpan, "squad", {}};
    auto chosen = pbert::bench::ChooseHistogram(
        histogram.empty() ? shared + "/histogram_squad_384.txt" : histogram, 384);
    if (!chosen.ok() && !histogram.empty()) {
      return Usage(absl::StrCat("--histogram ", histogram, ": ", chosen.status().message()));
    }
    std::vector<uint64_t> counts;
    if (chosen.ok()) {
      counts = chosen->counts;
      squad.source = fs::path(chosen->described).filename().string();
    } else {
      squad.source = "uniform in [32, 384] (no ../shared/data)";
    }
    squad.lengths = pbert::bench::DrawLengths(counts, static_cast<size_t>(feature_count), 1, 384);
    distributions.push_back(std::move(squad));
  }
  if (wants("glue-128")) {
    Distribution glue{"glue-128", "", 128, HeadKind::kClasses, "classifier", {}};
    glue.lengths = PairLengths(shared + "/wiki_00", shared + "/bert-base-uncased-vocab.txt", 128,
                               static_cast<size_t>(feature_count));
    if (glue.lengths.size() < static_cast<size_t>(feature_count) / 4) {
      glue.lengths = pbert::bench::DrawLengths({}, static_cast<size_t>(feature_count), 2, 128);
      glue.source = "uniform in [32, 128] (no ../shared/data)";
    } else {
      glue.source = "Wikipedia sentence pairs (wiki_00)";
    }
    distributions.push_back(std::move(glue));
  }
  // Short sentences: CoNLL-2003's average 14 words, GoEmotions' Reddit
  // comments 13 (no copy of either here: drawn).
  for (const auto& [name, head, mean] : {std::tuple{"ner-128", HeadKind::kTokens, 22.0},
                                         std::tuple{"multilabel-128", HeadKind::kMultiLabel, 18.0}}) {
    if (!wants(name)) continue;
    Distribution d{name, "", 128, head, "", {}};
    std::mt19937 rng(5);
    std::exponential_distribution<double> draw(1.0 / mean);
    for (int64_t i = 0; i < feature_count; ++i) {
      d.lengths.push_back(std::min(128, 3 + static_cast<int>(draw(rng))));
    }
    d.source = absl::StrFormat("drawn: 3 + an exponential of mean %.0f tokens", mean);
    distributions.push_back(std::move(d));
  }
  std::printf("model %s (%lld wide, %lld layers), %s, %s, %d threads, OpenBLAS %s kernels\n",
              size->name.c_str(), static_cast<long long>(size->hidden),
              static_cast<long long>(size->layers), device->str().c_str(),
              std::string(pbert::NameOf(*precision)).c_str(), threads, blas.chosen.c_str());
  std::printf("%d rounds of %d steps per case, %lld sequences per step on average\n", rounds, steps,
              static_cast<long long>(sequences));

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
      c.distribution = &d;
      c.depth = depth;
      c.attention = attention;
      auto task = TaskOf(d, features, depth == 1 ? "none" : "lp", depth, base);
      if (!task.ok()) return Fail(std::string(task.status().message()));
      c.task = *task;
      c.packing_factor = c.task->train()->packing_factor();
      c.rows_per_step =
          std::max<int64_t>(1, std::llround(static_cast<double>(sequences) / c.packing_factor));
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
      // The padded case's sequences of rounds 0 and 1, for the peer: each
      // micro-batch's lengths as the loader builds them (one a step, in
      // order: one thread), checked against the steps' tokens below.
      const bool recording = !peer.empty() && c.depth == 1 && round <= 1;
      auto recorded = std::make_shared<std::vector<std::vector<int64_t>>>();
      auto recorded_mutex = std::make_shared<std::mutex>();
      if (recording) {
        loader.prepare = [prepare = loader.prepare, recorded,
                          recorded_mutex](const pbert::data::PackedBatch& batch) {
          std::vector<int64_t> lengths;
          for (const auto& sequence : batch.sequences) lengths.push_back(sequence.length);
          {
            std::lock_guard<std::mutex> lock(*recorded_mutex);
            recorded->push_back(std::move(lengths));
          }
          return prepare(batch);
        };
      }
      const bool cuda = device->is_cuda();
      if (cuda) (void)pbert::gpu::ResetPeakMemory(device->index() < 0 ? 0 : device->index());
      auto made =
          pbert::data::Loader::Create(set.sequences, set.rows, loader,
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
        if (recording) {
          std::lock_guard<std::mutex> lock(*recorded_mutex);
          if (recorded->size() <= static_cast<size_t>(s) ||
              std::accumulate((*recorded)[s].begin(), (*recorded)[s].end(), int64_t{0}) !=
                  static_cast<int64_t>(stepped->metrics.tokens)) {
            return Fail(c.name + ": the lengths recorded for the peer are not step " +
                        std::to_string(s) + "'s");
          }
          c.plan.push_back((*recorded)[s]);
        }
        if (round == 0) continue;
        c.step_seconds.push_back(seconds);
        c.sequences += stepped->metrics.sequences;
        c.tokens += stepped->metrics.tokens;
      }
      if (cuda) {
        auto memory = pbert::gpu::Memory(device->index() < 0 ? 0 : device->index());
        if (memory.ok()) c.peak_bytes = std::max(c.peak_bytes, memory->peak_allocated);
      }
    }
  }

  // The peer on each task's padded sequences.
  const bool cuda = device->is_cuda();
  std::vector<pbert::bench::PeerResult> peers(distributions.size());
  for (size_t t = 0; t < distributions.size() && !peer.empty(); ++t) {
    const Distribution& d = distributions[t];
    if (d.peer_task.empty()) continue;
    const Case& padded = cases[3 * t];
    nlohmann::json plan = {
        {"task", d.peer_task},
        {"hidden", size->hidden},
        {"layers", size->layers},
        {"heads", size->heads},
        {"ffn", size->ffn},
        {"vocab", base.vocab_size()},
        {"max_len", d.max_len},
        {"warmup", steps},
        {"micro_rows", padded.rows_per_step},
        {"device", cuda ? "cuda" : "cpu"},
        {"precision", std::string(pbert::NameOf(*precision)) == "bf16" ? "bf16" : "fp32"},
        {"steps", padded.plan}};
    std::printf("the peer on %s: %zu steps of the padded case's sequences (%d timed)\n",
                d.name.c_str(), padded.plan.size(), steps);
    std::fflush(stdout);
    // PLAN_OUT's name with the task's before its extension: one plan a task.
    const fs::path given(plan_out);
    const std::string path =
        (given.parent_path() / (given.stem().string() + "-" + d.name + given.extension().string()))
            .string();
    peers[t] = pbert::bench::RunPeer(peer, path, plan);
  }

  auto total_of = [](const std::vector<double>& seconds) {
    return std::accumulate(seconds.begin(), seconds.end(), 0.0);
  };
  const std::string memory_head = cuda ? absl::StrFormat(" %9s", "peak GiB") : "";
  std::printf("\n%-40s %9s %10s %12s %14s %10s %14s%s\n", "case", "rows/step", "step ms",
              "sequences/s", "real tokens/s", "vs padded", "packing factor", memory_head.c_str());
  std::vector<std::string> keys, ratios;
  for (size_t k = 0; k < cases.size(); ++k) {
    Case& c = cases[k];
    std::vector<double> sorted = c.step_seconds;
    std::sort(sorted.begin(), sorted.end());
    const double total = total_of(sorted);
    const double rate = c.sequences / total;
    const Case& padded = cases[k - k % 3];
    const double padded_rate = padded.sequences / total_of(padded.step_seconds);
    std::string ratio = "", factor = "";
    if (c.depth > 1) {
      ratio = absl::StrFormat("%.2fx", rate / padded_rate);
      factor = absl::StrFormat("%.2fx", c.packing_factor);
    }
    const std::string memory =
        cuda ? absl::StrFormat(" %9.2f", c.peak_bytes / double(1 << 30)) : "";
    std::printf("%-40s %9lld %10.1f %12.1f %14.0f %10s %14s%s\n", c.name.c_str(),
                static_cast<long long>(c.rows_per_step), 1e3 * sorted[sorted.size() / 2], rate,
                c.tokens / total, ratio.c_str(), factor.c_str(), memory.c_str());
    if (k % 3 != 2) continue;
    // The task's last case: its peer, and the key figures.
    const Distribution& d = *c.distribution;
    const pbert::bench::PeerResult& p = peers[k / 3];
    std::string key = absl::StrFormat("%s packed %.0f real tokens/s", d.name, c.tokens / total);
    const bool peered = !peer.empty() && !d.peer_task.empty();  // the new tasks have none
    if (peered && !p.error.empty()) {
      std::printf("%-40s %s\n", (d.name + " Hugging Face, padded").c_str(), p.error.c_str());
      key += ", the peer failed";
    } else if (peered) {
      const double timed_steps = static_cast<double>(padded.plan.size()) - steps;
      const std::string name = d.name + " Hugging Face, padded";
      const std::string peer_memory =
          cuda ? absl::StrFormat(" %9.2f", p.peak_bytes / double(1 << 30)) : "";
      const double peer_rate = p.sequences / p.seconds;
      std::printf("%-40s %9lld %10.1f %12.1f %14.0f %10s %14s%s\n", name.c_str(),
                  static_cast<long long>(padded.rows_per_step),
                  timed_steps > 0 ? 1e3 * p.seconds / timed_steps : 0.0, peer_rate,
                  p.tokens / p.seconds, absl::StrFormat("%.2fx", peer_rate / padded_rate).c_str(),
                  "", peer_memory.c_str());
      const double ours = c.tokens / total, theirs = p.tokens / p.seconds;
      ratios.push_back(absl::StrFormat(
          "%s: packed-bert packed / Hugging Face %s (SDPA, torch %s) padded, real tokens/s: "
          "%.2fx (%.0f / %.0f); packed-bert padded / Hugging Face padded: %.2fx",
          d.name, p.model, p.torch, ours / theirs, ours, theirs,
          (padded.tokens / total_of(padded.step_seconds)) / theirs));
      key += absl::StrFormat(", %.2fx Hugging Face's", ours / theirs);
    }
    keys.push_back(key);
  }
  if (!ratios.empty()) std::printf("\n%s\n", absl::StrJoin(ratios, "\n").c_str());
  std::printf("[key] %s\n", absl::StrJoin(keys, "; ").c_str());
  bool peer_failed = false;
  for (const pbert::bench::PeerResult& p : peers) peer_failed = peer_failed || !p.error.empty();
  return peer.empty() || !peer_failed ? 0 : 1;
}
