#include "distributed/communicator.h"

#include <torch/torch.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "distributed/gradient_reducer.h"
#include "gtest/gtest.h"
#include "tests/spawn_ranks.h"

namespace pbert::distributed {
namespace {

Environment Parse(const std::map<std::string, std::string>& vars) {
  auto env = EnvironmentFrom([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  EXPECT_TRUE(env.ok()) << env.status();
  return env.ok() ? *env : Environment{};
}

TEST(EnvironmentTest, TorchrunVariables) {
  Environment alone = Parse({});
  EXPECT_FALSE(alone.distributed());
  EXPECT_EQ(alone.world_size, 1);
  Environment env = Parse({{"RANK", "3"},
                           {"WORLD_SIZE", "4"},
                           {"LOCAL_RANK", "1"},
                           {"LOCAL_WORLD_SIZE", "2"},
                           {"MASTER_ADDR", "node0"},
                           {"MASTER_PORT", "29400"}});
  EXPECT_TRUE(env.distributed());
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29400);
}

TEST(EnvironmentTest, OpenMpiAndSlurmVariables) {
  Environment mpi = Parse({{"OMPI_COMM_WORLD_RANK", "5"},
                           {"OMPI_COMM_WORLD_SIZE", "8"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                           {"MASTER_ADDR", "head"}});
  EXPECT_EQ(mpi.source, "Open MPI");
  EXPECT_EQ(mpi.rank, 5);
  EXPECT_EQ(mpi.world_size, 8);
  EXPECT_EQ(mpi.local_rank, 1);
  EXPECT_EQ(mpi.local_world_size, 4);
  EXPECT_EQ(mpi.node_rank, 1);
  EXPECT_EQ(mpi.master_addr, "head");
  Environment slurm = Parse({{"SLURM_PROCID", "6"},
                             {"SLURM_NTASKS", "8"},
                             {"SLURM_LOCALID", "2"},
                             {"SLURM_NODEID", "1"},
                             {"SLURM_NNODES", "2"},
                             {"SLURM_JOB_NODELIST", "gpu[007-008]"}});
  EXPECT_EQ(slurm.source, "Slurm");
  EXPECT_EQ(slurm.rank, 6);
  EXPECT_EQ(slurm.local_rank, 2);
  EXPECT_EQ(slurm.local_world_size, 4) << "8 tasks over 2 nodes";
  EXPECT_EQ(slurm.node_rank, 1);
  EXPECT_EQ(slurm.master_addr, "gpu007");
  EXPECT_EQ(slurm.master_port, 29500);
}

TEST(EnvironmentTest, TheInnermostLauncherWins) {
  // torchrun started by srun (one task per node): RANK describes the worker.
  Environment env = Parse({{"SLURM_PROCID", "1"},
                           {"SLURM_NTASKS", "2"},
                           {"SLURM_JOB_NODELIST", "n[1-2]"},
                           {"RANK", "5"},
                           {"WORLD_SIZE", "8"},
                           {"LOCAL_RANK", "1"},
                           {"LOCAL_WORLD_SIZE", "4"},
                           {"GROUP_RANK", "1"},
                           {"MASTER_ADDR", "n1"},
                           {"MASTER_PORT", "29400"},
                           {"TORCHELASTIC_RESTART_COUNT", "2"},
                           {"TORCHELASTIC_MAX_RESTARTS", "3"},
                           {"TORCHELASTIC_RUN_ID", "job"},
                           {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.node_rank, 1);
  EXPECT_EQ(env.restart_count, 2);
  EXPECT_EQ(env.max_restarts, 3);
  EXPECT_EQ(env.run_id, "job");
  EXPECT_TRUE(env.use_agent_store);
}

// Every variable a launcher sets is checked, once, here: out of range, or
// two launchers (or a leftover variable) that disagree, is one line naming
// the variables.
TEST(EnvironmentTest, OutOfRangeOrDisagreeingVariablesAreNamed) {
  auto refusal = [](std::map<std::string, std::string> vars) {
    const auto env = EnvironmentFrom([vars](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument) << env.status();
    return std::string(env.status().message());
  };
  EXPECT_EQ(refusal({{"RANK", "0"},
                     {"WORLD_SIZE", "1"},
                     {"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"}}),
            "torchrun's WORLD_SIZE=1 and Open MPI's OMPI_COMM_WORLD_SIZE=2 disagree: the inner "
            "launcher's world must share out the outer one's (a multiple of it); unset the "
            "variables of the launcher that did not start this process");
  EXPECT_EQ(
      refusal({{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}),
      "torchrun's WORLD_SIZE=3 and Slurm's SLURM_NTASKS=2 disagree: the inner launcher's "
      "world must share out the outer one's (a multiple of it); unset the variables of "
      "the launcher that did not start this process");
  EXPECT_EQ(refusal({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "-5"}}),
            "environment variable GROUP_RANK=-5 is out of range: it must be 0 or more");
  EXPECT_EQ(
      refusal({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"GROUP_RANK", "2"}, {"GROUP_WORLD_SIZE", "2"}}),
      "GROUP_RANK=2 and GROUP_WORLD_SIZE=2 do not fit: need GROUP_RANK < GROUP_WORLD_SIZE");
  EXPECT_EQ(refusal({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "7"}}),
            "GROUP_RANK=7 and WORLD_SIZE=2 do not fit: need GROUP_RANK < WORLD_SIZE");
  EXPECT_EQ(refusal({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
            "environment variable WORLD_SIZE=0 is out of range: it must be 1 or more");
  EXPECT_EQ(refusal({{"LOCAL_RANK", "1"}}),
            "LOCAL_RANK is set but RANK and WORLD_SIZE are not; a launcher sets all of them (or "
            "unset LOCAL_RANK for a single process)");
  EXPECT_EQ(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "yes"}}),
            "environment variable TORCHELASTIC_USE_AGENT_STORE='yes' is not True or False (as "
            "torchrun sets it); unset it");
  EXPECT_EQ(refusal({{"RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"TORCHELASTIC_RESTART_COUNT", "4"},
                     {"TORCHELASTIC_MAX_RESTARTS", "3"}}),
            "TORCHELASTIC_RESTART_COUNT=4 and TORCHELASTIC_MAX_RESTARTS=3 do not fit: a launcher "
            "restarts its workers at most that often");
  EXPECT_EQ(refusal({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "4"},
                     {"SLURM_NODEID", "2"},
                     {"SLURM_NNODES", "2"}}),
            "SLURM_NODEID=2 and SLURM_NNODES=2 do not fit: need SLURM_NODEID < SLURM_NNODES");
}

TEST(EnvironmentTest, FirstSlurmHost) {
  EXPECT_EQ(FirstSlurmHost("node17"), "node17");
  EXPECT_EQ(FirstSlurmHost("gpu[07-09,12],cpu3"), "gpu07");
  EXPECT_EQ(FirstSlurmHost("a,b"), "a");
  EXPECT_EQ(FirstSlurmHost("rack1-n[3,5]"), "rack1-n3");
}

TEST(EnvironmentTest, BadValuesNameTheVariable) {
  auto from = [](std::map<std::string, std::string> vars) {
    return EnvironmentFrom([vars](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(std::string(from({{"RANK", "one"}}).status().message()),
            "environment variable RANK='one' is not an integer");
  EXPECT_EQ(std::string(from({{"WORLD_SIZE", "99999999999"}}).status().message()),
            "environment variable WORLD_SIZE='99999999999' is out of range: it must be at most "
            "2147483647");
  EXPECT_EQ(std::string(from({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).status().message()),
            "RANK=2 and WORLD_SIZE=2 do not fit: need 0 <= RANK < WORLD_SIZE");
  EXPECT_FALSE(from({{"MASTER_PORT", "70000"}}).ok());
  EXPECT_EQ(std::string(from({{"RANK", "1"}}).status().message()),
            "RANK is set but WORLD_SIZE is not; a launcher sets both (or unset both for a single "
            "process)");
  EXPECT_EQ(std::string(from({{"SLURM_PROCID", "0"},
                              {"SLURM_NTASKS", "2"},
                              {"SLURM_LOCALID", "2"},
                              {"SLURM_NTASKS_PER_NODE", "2"}})
                            .status()
                            .message()),
            "SLURM_LOCALID=2 and SLURM_NTASKS_PER_NODE=2 do not fit: need 0 <= local rank < "
            "local size <= world size 2");
  // A local size the launcher left unset is named as what it was taken for.
  EXPECT_EQ(std::string(
                from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "5"}}).status().message()),
            "LOCAL_RANK=5 and LOCAL_WORLD_SIZE (unset: taken as WORLD_SIZE=2, one node) do not "
            "fit: need 0 <= local rank < local size <= world size 2");
}

TEST(CommunicatorTest, OneProcessIsTheIdentity) {
  auto c = Communicator::Create(Environment{}, Backend::kGloo);
  ASSERT_TRUE(c.ok());
  auto w = torch::zeros({2}).set_requires_grad(true);
  GradientReducer reducer(**c, {w}, 1 << 20, /*overlap=*/true);
  EXPECT_EQ(reducer.buckets(), 0);
  w.mutable_grad() = torch::tensor({1.0f, 2.0f});
  reducer.Finish();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({1.0f, 2.0f})));
  EXPECT_EQ((*c)->Sum({1.5, 2.0}), (std::vector<double>{1.5, 2.0}));
  auto m = torch::tensor({1.0f, 2.0f});
  (*c)->MaxInPlace(m);
  EXPECT_TRUE(torch::equal(m, torch::tensor({1.0f, 2.0f})));
  // Checked before any rendezvous, so it fails at once.
  EXPECT_EQ(Communicator::Create(Parse({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), Backend::kAuto)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// One process lets go of the gradients between steps: the step's first
// backward takes each as autograd made it (no zeroing, no addition), later
// micro-batches add to it. With fixed gradients (a captured step) they are
// zeroed where they are.
TEST(CommunicatorTest, OneProcessTakesAStepsFirstGradients) {
  auto c = Communicator::Create(Environment{}, Backend::kGloo);
  ASSERT_TRUE(c.ok());
  for (bool fixed : {false, true}) {
    auto w = torch::tensor({1.0f, -2.0f}).set_requires_grad(true);
    GradientReducer reducer(**c, {w}, 1 << 20, /*overlap=*/false, fixed);
    auto micro_batch = [&](float x) { (w * torch::tensor({x, 2 * x})).sum().backward(); };
    micro_batch(1);
    const void* first = w.grad().data_ptr();
    reducer.ZeroGrad();
    EXPECT_EQ(w.grad().defined(), fixed) << "fixed " << fixed;
    if (fixed) {
      EXPECT_EQ(w.grad().data_ptr(), first);
      EXPECT_TRUE(torch::equal(w.grad(), torch::zeros({2})));
    }
    micro_batch(3);
    micro_batch(0.5f);
    reducer.Finish();
    EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({3.5f, 7.0f}))) << "fixed " << fixed;
    if (fixed) EXPECT_EQ(w.grad().data_ptr(), first);
  }
}

// Runs inside the processes CommunicatorTest.TwoProcessesOverGloo starts.
TEST(CommunicatorWorker, SumAndBroadcast) {
  if (std::getenv("PBERT_DIST_WORKER") == nullptr) {
    GTEST_SKIP() << "runs only as a worker of CommunicatorTest.TwoProcessesOverGloo";
  }
  auto env = EnvironmentFrom();
  ASSERT_TRUE(env.ok()) << env.status();
  auto c = Communicator::Create(*env, Backend::kGloo, std::chrono::seconds(60));
  ASSERT_TRUE(c.ok()) << c.status();
  const float r = static_cast<float>(env->rank);
  auto a = torch::zeros({3}).set_requires_grad(true);
  auto b = torch::zeros({2, 2}).set_requires_grad(true);
  // Buckets of 16 bytes: b (16 bytes) alone, then a (12), in reverse order.
  GradientReducer reducer(**c, {a, b}, 16, /*overlap=*/false);
  EXPECT_EQ(reducer.buckets(), 2);
  reducer.ZeroGrad();
  a.mutable_grad().fill_(r + 1);   // 1 and 2: sum 3
  b.mutable_grad().fill_(10 * r);  // 0 and 10: sum 10
  reducer.Finish();
  EXPECT_TRUE(torch::equal(a.grad(), torch::full({3}, 3.0f)));
  EXPECT_TRUE(torch::equal(b.grad(), torch::full({2, 2}, 10.0f)));
  // A sum started and waited for by hand.
  auto x = torch::full({5}, r);
  (*c)->StartSum(x);
  (*c)->WaitForSums();
  EXPECT_TRUE(torch::equal(x, torch::ones({5})));
  EXPECT_EQ((*c)->Sum({r, 1.0}), (std::vector<double>{1.0, 2.0}));
  auto w = torch::full({4}, 7 * r + 1);  // rank 0 holds 1s
  (*c)->Broadcast({w});
  EXPECT_TRUE(torch::equal(w, torch::ones({4})));
  // Element-wise maxima (fp8's largest magnitudes), in place.
  auto m = r == 0 ? torch::tensor({1.0f, 5.0f, 0.0f}) : torch::tensor({3.0f, 2.0f, 0.0f});
  (*c)->MaxInPlace(m);
  EXPECT_TRUE(torch::equal(m, torch::tensor({3.0f, 5.0f, 0.0f}))) << m;
  auto s = torch::full({2}, r + 1, torch::kDouble);
  (*c)->SumInPlace(s);
  EXPECT_TRUE(torch::equal(s, torch::full({2}, 3.0, torch::kDouble))) << s;
  (*c)->Barrier();
}

TEST(CommunicatorTest, TwoProcessesOverGloo) {
  testing::RunRanks("CommunicatorWorker.SumAndBroadcast", "PBERT_DIST_WORKER", 2);
}

// Runs inside the processes CommunicatorTest.APeerThatDiesIsAnErrorNotASignal
// starts: rank 1 leaves at once after the rendezvous; rank 0's sums, whose
// writes go to a socket its peer closed, fail with an exception (the
// trainer's "lost contact"), rather than SIGPIPE ending the process
// without a word.
TEST(CommunicatorWorker, APeerDies) {
  if (std::getenv("PBERT_DIST_PEER_DIES") == nullptr) {
    GTEST_SKIP() << "runs only as a worker of CommunicatorTest.APeerThatDiesIsAnErrorNotASignal";
  }
  auto env = EnvironmentFrom();
  ASSERT_TRUE(env.ok()) << env.status();
  auto c = Communicator::Create(*env, Backend::kGloo, std::chrono::seconds(20));
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->Barrier();
  if (env->rank == 1) std::_Exit(0);  // as a killed rank: no goodbye
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  bool failed = false;
  for (int i = 0; i < 20 && !failed; ++i) {
    try {
      (*c)->SumInPlace(torch::ones({4 << 20}));  // 16 MB
    } catch (const std::exception&) {
      failed = true;
    }
  }
  EXPECT_TRUE(failed) << "sums with a peer that is gone succeeded";
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);  // the communicator's threads wait on the peer
}

TEST(CommunicatorTest, APeerThatDiesIsAnErrorNotASignal) {
  testing::RunRanks("CommunicatorWorker.APeerDies", "PBERT_DIST_PEER_DIES", 2,
                    std::chrono::seconds(60));
}

}  // namespace
}  // namespace pbert::distributed
