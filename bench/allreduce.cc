// bench/allreduce: data-parallel training's gradient all-reduce on Gloo
// with 2 local processes (loopback), for the tiny and BERT-base models: the
// all-reduce of all gradients in dist.bucket_mb buckets alone, and a whole
// training step (one micro-batch of 2 rows of 128 per rank) with the buckets
// reduced after backward ("plain") and while backward runs ("overlapped",
// the default: dist.overlap), the two taking turns in every round.
//
//   build/bench/allreduce [--rounds 3] [--port 29650]
//
// The command starts its two ranks itself (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, as launch would); each uses one intra-op thread, so that the
// two share this machine's cores as two workers on one node would.
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench/model_sizes.h"
#include "common/platform.h"
#include "data/batch.h"
#include "distributed/communicator.h"
#include "model/bert.h"
#include "optim/lamb.h"
#include "train/step.h"
#include "train/trainee.h"

namespace {

using Shape = pbert::bench::ModelSize;

// Sequences of 20-126 random tokens, [CLS] A [SEP] B [SEP], 15% masked.
std::vector<pbert::data::Instance> Sequences(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> length(20, 126), token(1000, 30000);
  std::bernoulli_distribution mask(0.15);
  std::vector<pbert::data::Instance> out(count);
  for (auto& in : out) {
    const int n = length(rng), split = n / 2;
    for (int i = 0; i < n; ++i) {
      const bool special = i == 0 || i == split || i == n - 1;
      in.input_ids.push_back(i == 0 ? 101 : special ? 102 : token(rng));
      in.segment_ids.push_back(i <= split ? 0 : 1);
      if (!special && mask(rng)) {
        in.masked_positions.push_back(i);
        in.masked_ids.push_back(token(rng));
      }
    }
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
  return 1;
}

int Worker(int rounds) {
  pbert::TuneMalloc();
  pbert::IgnoreOpenBlasCoretype();  // both sides get the same kernels
  pbert::TuneOpenBlasKernels();
  at::set_num_threads(1);
  auto env = pbert::distributed::EnvironmentFrom();
  if (!env.ok()) return Fail(env.status());
  auto comm = pbert::distributed::Communicator::Create(*env, pbert::distributed::Backend::kGloo,
                                                        std::chrono::minutes(10));
  if (!comm.ok()) return Fail(comm.status());
  const bool rank0 = env->rank == 0;
  if (rank0) {
    std::printf("%-6s %12s %9s %8s %14s %10s %14s %18s\n", "model", "parameters", "grad MB",
                "buckets", "all-reduce s", "plain s", "overlapped s", "overlapped/plain");
  }
  const std::vector<Shape> shapes = {*pbert::bench::FindModelSize("tiny"),
                                     *pbert::bench::FindModelSize("base")};
  // One micro-batch of 2 rows of 128 per rank, as in a 2-rank run.
  auto instances = Sequences(2, 7 + env->rank);
  std::vector<std::vector<const pbert::data::Instance*>> rows = {{&instances[0]},
                                                                  {&instances[1]}};
  auto batch = pbert::data::MakeBatch(rows, {128, 1, 0});
  if (!batch.ok()) return Fail(batch.status());
  for (const Shape& s : shapes) {
    std::vector<std::unique_ptr<pbert::train::Trainee>> sides;
    for (bool overlap : {false, true}) {
      pbert::train::TraineeOptions o;
      o.bert = s.Options();
      o.lamb = pbert::optim::LambOptions(1e-4);
      o.seed = 1;
      o.overlap = overlap;
      auto made = pbert::train::Trainee::Make(o, **comm);
      if (!made.ok()) return Fail(made.status());
      sides.push_back(std::move(*made));
    }
    int64_t count = 0;
    for (const auto& p : sides[0]->model().parameters()) count += p.numel();
    std::vector<double> reduce, plain, overlapped;
    for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
      // The all-reduce alone: every bucket after a (skipped) backward.
      (*comm)->Barrier();
      sides[0]->reducer().ZeroGrad();
      auto start = std::chrono::steady_clock::now();
      sides[0]->reducer().Finish();
      if (r > 0) reduce.push_back(Seconds(start));
      for (size_t k = 0; k < sides.size(); ++k) {
        (*comm)->Barrier();
        start = std::chrono::steady_clock::now();
        auto result = pbert::train::TrainStep(*sides[k], **comm, {*batch}, 1e-4, {});
        if (!result.ok()) return Fail(result.status());
        if (r > 0) (k == 0 ? plain : overlapped).push_back(Seconds(start));
      }
    }
    if (rank0) {
      std::printf("%-6s %12lld %9.0f %8d %14.3f %10.3f %14.3f %18.2f\n", s.name.c_str(),
                  static_cast<long long>(count), count * 4.0 / (1 << 20),
                  sides[0]->reducer().buckets(), Median(reduce), Median(plain), Median(overlapped),
                  Median(overlapped) / Median(plain));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3, port = 29650;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (flag == "--port") port = std::atoi(argv[i + 1]);
  }
  if (std::getenv("PBERT_BENCH_WORKER") != nullptr) return Worker(rounds);
  std::printf("# gradient all-reduce, Gloo, 2 processes on this machine (loopback), 25 MiB "
              "buckets, medians of %d rounds\n",
              rounds);
  std::fflush(stdout);
  std::vector<pid_t> workers;
  for (int rank = 0; rank < 2; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("PBERT_BENCH_WORKER", "1", 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::execv("/proc/self/exe", argv);
      ::_exit(127);
    }
    workers.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : workers) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed == 0 ? 0 : 1;
}
