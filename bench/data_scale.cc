// bench/data_scale: the data path of an MLPerf phase-2 run at growing sizes,
// from NVIDIA's variable-length HDF5 shards to a first training step, and
// how each cost grows. For each size it writes shards of synthetic
// sequences at Wikipedia-512's length histogram (the published one, or
// uniform in [32, 512] where ../shared/data is absent) in NVIDIA's layout
// (HDF5 vlen rows of int16 input_ids, int8 segment_ids, int16
// masked_lm_positions and masked_lm_ids, an int8 next_sentence_labels),
// with its own writer, then runs the packed-bert binary as a user would:
//
//   prepare --input-format hdf5   the shards into a store
//   verify                         the store's checksums
//   pack --store                   lp at depth 8 into a pack index
//   train                          a tiny BERT, one step: start-up (store,
//                                  index, loader) and the first step
//
// measuring each one's wall time and peak RSS (the child's, from wait4);
// prepare imports on all CPUs (run.threads' default). Between pack and
// train, the loader alone (in this process, one thread) makes phase-2
// micro-batches from the store and the pack index.
// Prints a table, the exponent of each cost between the smallest and the
// largest size (time ~ sequences^b), and each cost extrapolated to the
// 156.7M sequences of NVIDIA's preparation of the MLPerf data, by that
// exponent and linearly from the largest size. Peak RSS counts the pages
// of the store that a command has mapped and touched (verify reads them
// all), which are the page cache's. The loader at phase-2 shapes with the
// model's input layouts and several threads is bench/loader's.
//
//   build/bench/data_scale [--sizes 100000,1000000] [--per-shard 34000]
//       [--dir DIR] [--histogram FILE] [--keep]
//
// Everything goes into a new folder of its own, DIR/pbert_data_scale.XXXXXX
// (DIR: the temporary folder by default); nothing else in DIR is touched.
// The shards and stores take about 1.2 KB per sequence on disk (1.2 GB at
// 10^6); --sizes 10000000 needs about 12 GB. Each size's shards are removed
// once it is measured, and the folder at the end, unless --keep.
#include <H5Cpp.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/synthetic.h"
#include "data/loader.h"
#include "data/packing/pack_index.h"
#include "data/store.h"
#include "tests/source_paths.h"

namespace {

namespace fs = std::filesystem;
constexpr int kMaxLen = 512;
constexpr double kMlperfSequences = 156.7e6;

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "bench/data_scale: %s\nusage: data_scale [--sizes N,N...] [--per-shard N] "
               "[--dir DIR] [--histogram FILE] [--keep]\n",
               why.c_str());
  return 2;
}

// One shard in NVIDIA's variable-length layout.
void WriteShard(const std::string& path, const std::vector<pbert::data::Instance>& sequences) {
  const hsize_t n = sequences.size();
  H5::H5File file(path, H5F_ACC_TRUNC);
  H5::DataSpace space(1, &n);
  std::vector<std::vector<int16_t>> ids(n), positions(n), masked(n);
  std::vector<std::vector<int8_t>> segments(n);
  std::vector<int8_t> labels(n);
  for (hsize_t r = 0; r < n; ++r) {
    const pbert::data::Instance& in = sequences[r];
    ids[r].assign(in.input_ids.begin(), in.input_ids.end());
    segments[r].assign(in.segment_ids.begin(), in.segment_ids.end());
    positions[r].assign(in.masked_positions.begin(), in.masked_positions.end());
    masked[r].assign(in.masked_ids.begin(), in.masked_ids.end());
    labels[r] = static_cast<int8_t>(in.next_sentence_label);
  }
  auto write = [&](const char* name, auto& rows, const H5::PredType& file_type,
                   const H5::PredType& memory_type) {
    std::vector<hvl_t> vl(n);
    for (hsize_t r = 0; r < n; ++r) vl[r] = {rows[r].size(), rows[r].data()};
    H5::DataSet set = file.createDataSet(name, H5::VarLenType(file_type), space);
    set.write(vl.data(), H5::VarLenType(memory_type));
  };
  write("input_ids", ids, H5::PredType::STD_I16LE, H5::PredType::NATIVE_INT16);
  write("segment_ids", segments, H5::PredType::STD_I8LE, H5::PredType::NATIVE_INT8);
  write("masked_lm_positions", positions, H5::PredType::STD_I16LE, H5::PredType::NATIVE_INT16);
  write("masked_lm_ids", masked, H5::PredType::STD_I16LE, H5::PredType::NATIVE_INT16);
  file.createDataSet("next_sentence_labels", H5::PredType::STD_I8LE, space)
      .write(labels.data(), H5::PredType::NATIVE_INT8);
}

// BERT's special tokens at their usual ids, other words made up: 30,522.
void WriteVocabulary(const std::string& path) {
  std::ofstream out(path);
  for (int i = 0; i < 30522; ++i) {
    if (i == 0)
      out << "[PAD]\n";
    else if (i == 100)
      out << "[UNK]\n";
    else if (i == 101)
      out << "[CLS]\n";
    else if (i == 102)
      out << "[SEP]\n";
    else if (i == 103)
      out << "[MASK]\n";
    else if (i < 1000)
      out << "[unused" << i << "]\n";
    else
      out << "w" << i << "\n";
  }
}

struct Cost {
  double seconds = 0, peak_mb = 0;
};

// Runs `args` (the binary first), its output into `log`; its wall time and
// peak RSS. Exits the benchmark, naming the log, if it fails.
Cost Run(const std::vector<std::string>& args, const std::string& log) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Cost c;
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c.peak_mb = static_cast<double>(usage.ru_maxrss) / 1024;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench/data_scale: %s failed; its output is in %s\n", args[1].c_str(),
                 log.c_str());
    std::exit(1);
  }
  return c;
}

uint64_t FolderBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

struct Size {
  int64_t sequences = 0;
  std::map<std::string, Cost> costs;
  double shard_bytes = 0, store_bytes = 0, index_bytes = 0;
  double loader = 0;  // sequences/s
};

// The loader alone on one thread, in this process, over the store and its
// pack index: micro-batches of 48 rows of 512 at depth 8 (a phase-2
// micro-batch per GPU), as fast as it makes them, in sequences/s. The
// model's input layouts on top of these batches are bench/loader's.
double LoaderAlone(const std::string& store_dir, const std::string& pack) {
  auto store = pbert::data::InstanceStore::Open(store_dir);
  auto index = pbert::data::PackIndex::Read(pack);
  if (!store.ok() || !index.ok()) {
    std::fprintf(stderr, "bench/data_scale: %s %s\n", std::string(store.status().message()).c_str(),
                 std::string(index.status().message()).c_str());
    std::exit(1);
  }
  pbert::data::LoaderOptions o;
  o.rows_per_batch = 48;
  o.shape = {kMaxLen, 8, 0};
  o.threads = 1;
  auto loader = pbert::data::Loader::Create(
      std::make_shared<pbert::data::InstanceStore>(std::move(*store)),
      std::make_shared<const pbert::data::PackIndex>(std::move(*index)), o);
  if (!loader.ok()) {
    std::fprintf(stderr, "bench/data_scale: %s\n", std::string(loader.status().message()).c_str());
    std::exit(1);
  }
  const auto start = std::chrono::steady_clock::now();
  double sequences = 0;
  for (int step = 0; step < 300; ++step) {
    auto batches = (*loader)->Next();
    if (!batches.ok() || batches->batches.empty()) break;
    sequences += static_cast<double>(batches->sequences);
  }
  return sequences /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {100000, 1000000};
  int64_t per_shard = 34000;
  std::string parent = fs::temp_directory_path().string();
  std::string histogram;  // --histogram; default: bench/synthetic.h's
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--keep") {
      keep = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--sizes") {
      sizes.clear();
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        int64_t n = 0;
        if (!absl::SimpleAtoi(part, &n) || n <= 0) return Usage("bad size " + std::string(part));
        sizes.push_back(n);
      }
    } else if (flag == "--per-shard" && absl::SimpleAtoi(value, &per_shard) && per_shard > 0) {
    } else if (flag == "--dir") {
      parent = value;
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
  const std::string binary = pbert::testing::BinaryPath();
  const std::string config = std::string(pbert::testing::SourceDir()) + "/configs/bert-tiny.yaml";
  auto made = pbert::bench::NewBenchFolder(parent, "data_scale");
  if (!made.ok()) return Usage(std::string(made.status().message()));
  const std::string dir = *made;
  const std::string vocab = dir + "/vocab.txt";
  WriteVocabulary(vocab);
  std::printf(
      "# NVIDIA variable-length shards of %lld sequences (lengths %s) through packed-bert (%s), "
      "max length %d\n\n",
      static_cast<long long>(per_shard), lengths_from.c_str(), binary.c_str(), kMaxLen);
  std::vector<Size> results;
  for (int64_t n : sizes) {
    Size size;
    size.sequences = n;
    const std::string base = absl::StrCat(dir, "/", n);
    fs::create_directories(base + "/shards");
    std::vector<std::string> shards;
    for (int64_t begin = 0, k = 0; begin < n; begin += per_shard, ++k) {
      const int64_t count = std::min(per_shard, n - begin);
      const auto lengths =
          pbert::bench::DrawLengths(counts, count, static_cast<uint32_t>(k), kMaxLen);
      shards.push_back(absl::StrCat(base, "/shards/part-", k, ".hdf5"));
      WriteShard(shards.back(), pbert::bench::MakeSequences(lengths, static_cast<uint32_t>(k)));
    }
    size.shard_bytes = static_cast<double>(FolderBytes(base + "/shards"));
    const std::string store = base + "/store", pack = base + "/pack.pbpack";
    std::vector<std::string> prepare = {binary,      "prepare", "--input-format", "hdf5",
                                        "--vocab",   vocab,     "--out",          store,
                                        "--max-len", "512",     "--log-level",    "warn"};
    prepare.insert(prepare.end(), shards.begin(), shards.end());
    size.costs["prepare"] = Run(prepare, base + "/prepare.log");
    size.store_bytes = static_cast<double>(FolderBytes(store));
    size.costs["verify"] = Run({binary, "verify", store}, base + "/verify.log");
    size.costs["pack"] = Run({binary, "pack", "--store", store, "--max-len", "512", "--algorithm",
                              "lp", "--out", pack, "--log-level", "warn"},
                             base + "/pack.log");
    size.index_bytes = static_cast<double>(fs::file_size(pack));
    size.loader = LoaderAlone(store, pack);
    size.costs["train"] = Run({binary,        "train",
                               "--config",    config,
                               "--set",       "data.store=" + store,
                               "--set",       "data.pack_index=" + pack,
                               "--set",       "data.eval=",
                               "--set",       "data.max_seq_len=512",
                               "--set",       "model.max_position_embeddings=512",
                               "--set",       "run.output_dir=" + base + "/train",
                               "--set",       "optim.total_steps=1",
                               "--set",       "optim.warmup_steps=0",
                               "--set",       "train.checkpoint_every_steps=0",
                               "--log-level", "warn"},
                              base + "/train.log");
    results.push_back(size);
    if (!keep) fs::remove_all(base + "/shards");  // the next size's room
  }
  std::printf(
      "| sequences | shards GB | prepare s | prepare seq/s | prepare peak MB | store bytes/seq | "
      "verify s | pack s | pack peak MB | index bytes/seq | loader alone seq/s | train: start + 1 "
      "step s | train peak MB |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Size& s : results) {
    const auto& c = s.costs;
    std::printf(
        "| %lld | %.2f | %.1f | %.0f | %.0f | %.0f | %.1f | %.1f | %.0f | %.2f | %.0f | %.1f | "
        "%.0f |\n",
        static_cast<long long>(s.sequences), s.shard_bytes / 1e9, c.at("prepare").seconds,
        s.sequences / c.at("prepare").seconds, c.at("prepare").peak_mb, s.store_bytes / s.sequences,
        c.at("verify").seconds, c.at("pack").seconds, c.at("pack").peak_mb,
        s.index_bytes / s.sequences, s.loader, c.at("train").seconds, c.at("train").peak_mb);
  }
  if (results.size() >= 2) {
    const Size& a = results.front();
    const Size& b = results.back();
    const double span = std::log(static_cast<double>(b.sequences) / a.sequences);
    std::printf(
        "\nGrowth between %lld and %lld sequences (cost ~ sequences^b), and the cost at 156.7M "
        "sequences if it goes on so, or if the time grows linearly from the largest size (fixed "
        "costs make b small between small sizes):\n\n| cost | b (time) | at 156.7M | linear | "
        "b (peak RSS) | at 156.7M |\n|---|---|---|---|---|---|\n",
        static_cast<long long>(a.sequences), static_cast<long long>(b.sequences));
    const double scale = kMlperfSequences / static_cast<double>(b.sequences);
    for (const char* name : {"prepare", "verify", "pack", "train"}) {
      const Cost& x = a.costs.at(name);
      const Cost& y = b.costs.at(name);
      const double bt = std::log(y.seconds / x.seconds) / span;
      const double bm = std::log(y.peak_mb / x.peak_mb) / span;
      std::printf("| %s | %.2f | %.0f s | %.0f s | %.2f | %.0f MB |\n", name, bt,
                  y.seconds * std::pow(scale, bt), y.seconds * scale, bm,
                  y.peak_mb * std::pow(scale, bm));
    }
  }
  if (keep) std::printf("\nkept: %s\n", dir.c_str());
  if (!keep) fs::remove_all(dir);
  return 0;
}
