// bench/allreduce: the gradient all-reduce of data-parallel training on Gloo
// with 2 local processes (loopback), for the parameter counts of the tiny,
// BERT-base and BERT-large models: in one flat tensor against buckets of
// dist.bucket_mb (25 MiB), taking turns; and for tiny and base, the share of
// a whole 2-rank training step it takes.
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

#include "common/platform.h"
#include "data/batch.h"
#include "distributed/communicator.h"
#include "model/bert.h"
#include "optim/lamb.h"
#include "train/step.h"

namespace {

struct Shape {
  const char* name;
  int64_t hidden, layers, heads, ffn;
  bool time_step;  // also time a whole training step
};

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

int Worker(int rounds) {
  pbert::TuneMalloc();
  pbert::IgnoreOpenBlasCoretype();  // both sides get the same kernels
  pbert::TuneOpenBlasKernels();
  at::set_num_threads(1);
  auto env = pbert::distributed::EnvironmentFrom();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", std::string(env.status().message()).c_str());
    return 2;
  }
  auto comm = pbert::distributed::Communicator::Create(*env, pbert::distributed::Backend::kGloo,
                                                        std::chrono::minutes(10));
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", std::string(comm.status().message()).c_str());
    return 1;
  }
  const bool rank0 = env->rank == 0;
  if (rank0) {
    std::printf("%-6s %12s %9s %12s %14s %10s %14s\n", "model", "parameters", "grad MB",
                "one flat s", "25 MiB bkts s", "step s", "all-reduce %");
  }
  const std::vector<Shape> shapes = {{"tiny", 128, 2, 2, 512, true},
                                     {"base", 768, 12, 12, 3072, true},
                                     {"large", 1024, 24, 16, 4096, false}};
  for (const Shape& s : shapes) {
    torch::manual_seed(1);
    pbert::model::BertForPreTraining model(pbert::model::BertOptions()
                                               .hidden_size(s.hidden)
                                               .num_layers(s.layers)
                                               .num_heads(s.heads)
                                               .intermediate_size(s.ffn));
    std::vector<at::Tensor> params = model->parameters();
    int64_t count = 0;
    for (auto& p : params) {
      p.mutable_grad() = torch::ones_like(p);
      count += p.numel();
    }
    std::vector<double> flat, bucketed;
    for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
      (*comm)->Barrier();
      auto start = std::chrono::steady_clock::now();
      (*comm)->SumGradients(params, std::numeric_limits<int64_t>::max());
      if (r > 0) flat.push_back(Seconds(start));
      (*comm)->Barrier();
      start = std::chrono::steady_clock::now();
      (*comm)->SumGradients(params, int64_t{25} << 20);
      if (r > 0) bucketed.push_back(Seconds(start));
    }
    double step = 0;
    if (s.time_step) {
      // One micro-batch of 2 rows of 128 per rank, as in a 2-rank run.
      auto instances = Sequences(2, 7 + env->rank);
      std::vector<std::vector<const pbert::data::Instance*>> rows = {{&instances[0]},
                                                                      {&instances[1]}};
      auto batch = pbert::data::MakeBatch(rows, {128, 1, 0});
      if (!batch.ok()) {
        std::fprintf(stderr, "%s\n", std::string(batch.status().message()).c_str());
        return 1;
      }
      pbert::optim::Lamb lamb(pbert::optim::BertParamGroups(model->named_parameters(),
                                                            pbert::optim::LambOptions(1e-4), true),
                              pbert::optim::LambOptions(1e-4));
      std::vector<double> steps;
      for (int r = 0; r <= rounds; ++r) {
        (*comm)->Barrier();
        auto start = std::chrono::steady_clock::now();
        auto result = pbert::train::TrainStep(model, lamb, **comm, {*batch}, 1e-4, {});
        if (!result.ok()) {
          std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
          return 1;
        }
        if (r > 0) steps.push_back(Seconds(start));
      }
      step = Median(steps);
    }
    if (rank0) {
      const double mb = count * 4.0 / (1 << 20);
      std::printf("%-6s %12lld %9.0f %12.3f %14.3f %10s %14s\n", s.name,
                  static_cast<long long>(count), mb, Median(flat), Median(bucketed),
                  step > 0 ? std::to_string(step).substr(0, 6).c_str() : "-",
                  step > 0 ? std::to_string(100 * Median(bucketed) / step).substr(0, 5).c_str()
                           : "-");
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
  std::printf("# gradient all-reduce, Gloo, 2 processes on this machine (loopback), "
              "medians of %d rounds\n",
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
