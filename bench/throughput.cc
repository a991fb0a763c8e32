// bench/throughput: end-to-end training throughput (loader included) on a
// real corpus, for the ways of batching variable-length sequences:
//
//   padded   one sequence per row, padded to max length (what most trainers do)
//   dynamic  one sequence per row, padded to the longest of its micro-batch
//   smart    uniform-length batching (rows sorted by length into micro-batches,
//            micro-batches shuffled) with dynamic padding
//   spfhp, lpfhp, nnlshp, lp   packed rows of each packing algorithm
//
// Models: tiny (hidden 128, 2 layers), mini (256, 4), medium (512, 8), all
// with the 30,522-word vocabulary; dense attention (the block-diagonal mask)
// unless --attention names others (a list: each case runs in each, and the
// ratios between the first two are printed). --cases keeps some cases. One
// model per size, the same micro-batch rows and steps for every case;
// the cases take turns over rounds (round 0 warms up and is not counted).
// Each turn makes the case's loader anew at its stream position, so batches
// are built while the case's own steps wait for them, never during another
// case's turn. Prints one table per model and max length: real tokens/s,
// sequences/s, padding share, packing factor, speed-up over padding and over
// smart batching, and the speed-up over padding divided by the packing
// factor.
//
//   build/bench/throughput [--rounds 3] [--steps 4] [--threads 2]
//       [--models tiny,medium] [--lengths 128,512] [--attention dense,blocked,varlen]
//       [--cases padded,dynamic,smart,spfhp,lpfhp,nnlshp,lp] [--corpus FILE... --vocab FILE]
//
// The corpus defaults to ../shared/data/wiki_00 and wiki_01 (Wikipedia, in
// WikiExtractor form) with its BERT vocabulary; the stores it prepares
// (prepare's defaults: dupe factor 10, MLPerf's 76 masks at 512, 20 below)
// are kept in build/bench/throughput-data for the next run.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/model_sizes.h"
#include "common/platform.h"
#include "data/loader.h"
#include "data/packing/report.h"
#include "data/prepare.h"
#include "data/store.h"
#include "distributed/communicator.h"
#include "model/bert.h"
#include "optim/lamb.h"
#include "tests/source_paths.h"
#include "train/step.h"

namespace {

namespace fs = std::filesystem;
using pbert::data::PackIndex;

using ModelShape = pbert::bench::ModelSize;

struct Case {
  std::string name;
  pbert::model::AttentionKind attention = pbert::model::AttentionKind::kDense;
  std::shared_ptr<const PackIndex> index;
  double packing_factor = 1;
  bool fit_width = false, group_by_length = false;
  pbert::data::LoaderPosition position;
  // Counted rounds only.
  double seconds = 0, tokens = 0, sequences = 0, slots = 0;
};

template <class T>
int Fail(const T& status) {
  std::cerr << "bench/throughput: " << status << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  pbert::UsePassiveOpenMpWait(argv);  // as packed-bert train does
  int rounds = 3, steps = 4, threads = 2;
  std::vector<std::string> models = {"tiny", "medium"}, corpus;
  std::vector<int> lengths = {128, 512};
  std::string vocab, attention = "dense", case_names = "padded,dynamic,smart,spfhp,lpfhp,nnlshp,lp";
  const std::string shared = pbert::testing::SharedDataDir();
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--rounds") rounds = std::stoi(value);
    else if (flag == "--steps") steps = std::stoi(value);
    else if (flag == "--threads") threads = std::stoi(value);
    else if (flag == "--models") models = absl::StrSplit(value, ',');
    else if (flag == "--attention") attention = value;
    else if (flag == "--cases") case_names = value;
    else if (flag == "--vocab") vocab = value;
    else if (flag == "--lengths") {
      lengths.clear();
      for (auto part : absl::StrSplit(value, ',')) lengths.push_back(std::stoi(std::string(part)));
    } else if (flag == "--corpus") {
      while (i + 1 < argc && argv[i + 1][0] != '-') corpus.push_back(argv[++i]);
      continue;
    } else {
      std::cerr << "usage: bench/throughput [--rounds N] [--steps K] [--threads T] "
                   "[--models tiny,mini,medium] [--lengths 128,512] [--attention dense,blocked,varlen] "
                   "[--cases padded,...,lp] [--corpus FILE... --vocab FILE]\n";
      return 2;
    }
    ++i;
  }
  std::vector<pbert::model::AttentionKind> attentions;
  for (absl::string_view name : absl::StrSplit(attention, ',')) {
    auto kind = pbert::ParseChoice<pbert::model::AttentionKind>(name, "--attention");
    if (!kind.ok()) {
      std::cerr << "bench/throughput: " << kind.status().message() << "\n";
      return 2;
    }
    attentions.push_back(*kind);
  }
  const std::vector<std::string> wanted = absl::StrSplit(case_names, ',');
  if (corpus.empty()) corpus = {shared + "/wiki_00", shared + "/wiki_01"};
  if (vocab.empty()) vocab = shared + "/bert-base-uncased-vocab.txt";
  for (const std::string& f : corpus) {
    if (!fs::exists(f)) {
      std::cerr << "bench/throughput: " << f
                << " is missing; give --corpus FILE... --vocab FILE (a real corpus)\n";
      return 2;
    }
  }
  pbert::TuneMalloc();
  pbert::IgnoreOpenBlasCoretype();  // both sides get the same kernels
  const pbert::BlasKernels& blas = pbert::TuneOpenBlasKernels();
  at::set_num_threads(threads);
  std::printf("%d threads, OpenBLAS %s kernels, %s attention, %d rounds of %d steps per case\n",
              threads, blas.chosen.c_str(), attention.c_str(), rounds, steps);
  auto communicator = pbert::distributed::Communicator::Single();

  // Google's BERT miniature sizes: the cost of the MLM head (which runs on
  // the masked tokens only, so grows with the real tokens of a row) against
  // that of the encoder (which grows with the row) shrinks with the size.
  const std::vector<ModelShape>& all_models = pbert::bench::ModelSizes();
  const std::string cache = fs::path(argv[0]).parent_path() / "throughput-data";
  for (int S : lengths) {
    // The corpus prepared as MLPerf does at this length (20 or 76 masks).
    const std::string store_dir =
        absl::StrCat(cache, "/", fs::path(corpus[0]).stem().string(), "-", S);
    if (!pbert::data::InstanceStore::Open(store_dir).ok()) {
      pbert::data::PrepareOptions o;
      o.inputs = corpus;
      o.vocab = vocab;
      o.instances.max_seq_len = S;
      o.instances.max_predictions_per_seq = S >= 512 ? 76 : 20;
      o.instances.seed = 12345;
      o.threads = threads;
      o.output = store_dir;
      o.overwrite = true;
      fs::create_directories(cache);
      auto summary = pbert::data::Prepare(o);
      if (!summary.ok()) return Fail(summary.status());
    }
    auto opened = pbert::data::InstanceStore::Open(store_dir);
    if (!opened.ok()) return Fail(opened.status());
    auto store = std::make_shared<pbert::data::InstanceStore>(std::move(*opened));
    const std::vector<uint16_t> seq_lengths = store->Lengths();

    std::vector<Case> cases;
    auto unpacked = pbert::data::PackLengths("none", seq_lengths, {S, 1, 1});
    if (!unpacked.ok()) return Fail(unpacked.status());
    auto one_per_row = std::make_shared<const PackIndex>(std::move(unpacked->index));
    auto unpacked_case = [&](const char* name, bool fit_width, bool group_by_length) {
      Case c;
      c.name = name;
      c.index = one_per_row;
      c.fit_width = fit_width;
      c.group_by_length = group_by_length;
      return c;
    };
    cases.push_back(unpacked_case("padded", false, false));
    cases.push_back(unpacked_case("dynamic", true, false));
    cases.push_back(unpacked_case("smart", true, true));
    for (const char* algorithm : {"spfhp", "lpfhp", "nnlshp", "lp"}) {
      // nnlshp at depth 3, as published (its search grows with the depth).
      const int depth = std::string(algorithm) == "nnlshp" ? 3 : 8;
      auto packed = pbert::data::PackLengths(algorithm, seq_lengths, {S, depth, 1});
      if (!packed.ok()) return Fail(packed.status());
      Case c;
      c.name = algorithm;
      c.index = std::make_shared<const PackIndex>(std::move(packed->index));
      c.packing_factor = packed->run.report.packing_factor;
      cases.push_back(std::move(c));
    }
    // Each wanted case once per attention, the cases taking turns.
    std::vector<Case> all_cases;
    for (const Case& base : cases) {
      if (std::find(wanted.begin(), wanted.end(), base.name) == wanted.end()) continue;
      for (pbert::model::AttentionKind kind : attentions) {
        Case c = base;
        c.attention = kind;
        if (attentions.size() > 1) c.name += "/" + pbert::NameOf(kind);
        all_cases.push_back(std::move(c));
      }
    }
    cases = std::move(all_cases);
    if (cases.empty()) return Fail("--cases names none of the cases");
    const int rows = S >= 512 ? 8 : 32;
    std::printf("\n%s: %zu sequences of at most %d tokens (%.1f on average), %d rows per step\n",
                store_dir.c_str(), seq_lengths.size(), S,
                [&] {
                  double t = 0;
                  for (uint16_t l : seq_lengths) t += l;
                  return t / seq_lengths.size();
                }(),
                rows);

    for (const ModelShape& m : all_models) {
      if (std::find(models.begin(), models.end(), m.name) == models.end()) continue;
      pbert::train::TraineeOptions options;
      options.bert = m.Options().max_position_embeddings(S);
      options.lamb = pbert::optim::LambOptions(1e-4);
      options.seed = 1;
      auto trainee = pbert::train::Trainee::Make(options, *communicator);
      if (!trainee.ok()) return Fail(trainee.status());
      for (Case& c : cases) c.seconds = c.tokens = c.sequences = c.slots = 0;
      for (int round = 0; round <= rounds; ++round) {
        for (Case& c : cases) {
          pbert::data::LoaderOptions o;
          o.rows_per_batch = rows;
          o.shape = {S, c.index->plan().depth_used(), 0, c.fit_width};
          o.group_by_length = c.group_by_length;
          o.seed = 1;
          o.threads = 1;
          o.prefetch = 2;
          // The loader's threads make the inputs in the case's layout, as
          // in a run (train/inputs.h).
          pbert::model::BertOptions bert = (*trainee)->bert_options();
          bert.attention(c.attention);
          o.prepare = pbert::train::Preparer(pbert::model::InputPlan::For(
              bert, (*trainee)->device(), (*trainee)->precision(), torch::kFloat),
              {&(*trainee)->task()});
          auto start = std::chrono::steady_clock::now();
          auto loader = pbert::data::Loader::Create(store, c.index, o, c.position);
          if (!loader.ok()) return Fail(loader.status());
          double tokens = 0, sequences = 0, slots = 0;
          for (int s = 0; s < steps; ++s) {
            auto batches = (*loader)->Next();
            if (!batches.ok()) return Fail(batches.status());
            const std::vector<pbert::train::MicroBatch> micro = pbert::train::Prepared(*batches);
            for (const auto& b : micro) slots += static_cast<double>(b.rows * b.width);
            tokens += batches->tokens;
            sequences += batches->sequences;
            auto result = pbert::train::TrainStep(**trainee, *communicator, micro, 1e-4, {});
            if (!result.ok()) return Fail(result.status());
          }
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          c.position = (*loader)->position();
          if (round == 0) continue;
          c.seconds += seconds;
          c.tokens += tokens;
          c.sequences += sequences;
          c.slots += slots;
        }
      }
      // The first case of each name in the first attention is the reference.
      auto first = [&](const std::string& name) -> const Case& {
        for (const Case& c : cases) {
          if (c.name.compare(0, name.size(), name) == 0) return c;
        }
        return cases[0];
      };
      const Case& padded = first("padded");
      const Case& smart = first("smart");
      auto rate = [](const Case& c) { return c.tokens / c.seconds; };
      std::printf("\nmodel %s (hidden %ld, %ld layers), max length %d\n", m.name.c_str(),
                  m.hidden, m.layers, S);
      std::printf("%-8s %12s %10s %9s %8s %12s %10s %17s\n", "case", "real tok/s", "seq/s",
                  "padding", "packing", "vs padding", "vs smart", "vs padding/factor");
      for (const Case& c : cases) {
        const double vs_padded = rate(c) / rate(padded);
        std::printf("%-8s %12.0f %10.1f %8.1f%% %8.3f %11.2fx %9.2fx %17s\n", c.name.c_str(),
                    rate(c), c.sequences / c.seconds, 100.0 * (1 - c.tokens / c.slots),
                    c.packing_factor, vs_padded, rate(c) / rate(smart),
                    c.packing_factor > 1 ? absl::StrFormat("%.3f", vs_padded / c.packing_factor).c_str()
                                         : "-");
      }
      for (size_t i = 0; attentions.size() > 1 && i < cases.size(); i += attentions.size()) {
        std::printf("ratio %-16s %s / %s, real tokens/s: %.2f\n",
                    cases[i].name.substr(0, cases[i].name.find('/')).c_str(),
                    pbert::NameOf(attentions[1]).c_str(), pbert::NameOf(attentions[0]).c_str(),
                    rate(cases[i + 1]) / rate(cases[i]));
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
