#include "train/profiler.h"

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scratch_folder.h"
#include "train/host_read.h"

namespace pbert::train {
namespace {

TEST(ProfilerTest, StepsAreARangeFromOne) {
  EXPECT_TRUE(ParseProfileSteps("")->empty());
  auto range = ParseProfileSteps("3:5");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->first, 3);
  EXPECT_EQ(range->last, 5);
  EXPECT_TRUE(range->Has(5));
  EXPECT_FALSE(range->Has(6));
  EXPECT_EQ(ParseProfileSteps("7")->last, 7);
  for (const char* bad : {"0:3", "5:3", "a:b", "1:2:3", ":4", "-1"}) {
    EXPECT_EQ(ParseProfileSteps(bad).status().message(),
              std::string("'") + bad +
                  "' is not a range of steps; give \"A:B\" with 1 <= A <= B (steps A to B), "
                  "\"A\" (step A alone) or \"\" (none)")
        << bad;
  }
}

TEST(ProfilerTest, KernelsAndOperatorsFallIntoTheirClasses) {
  const std::pair<const char*, const char*> cases[] = {
      {"aten::addmm", "matrix products"},
      {"aten::mm", "matrix products"},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matrix products"},
      {"ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", "matrix products"},
      {"void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>", "attention"},
      {"aten::_softmax", "attention"},
      {"aten::native_layer_norm", "LayerNorm"},
      {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>",
       "LayerNorm"},
      {"aten::native_dropout", "dropout"},
      {"aten::_foreach_addcmul_", "optimizer"},
      {"void at::native::multi_tensor_apply_kernel<...>", "optimizer"},
      {"aten::sum", "reductions"},
      {"void at::native::reduce_kernel<512, 1>", "reductions"},
      {"aten::cross_entropy_loss", "reductions"},
      {"Memcpy HtoD (Pinned -> Device)", "copies"},
      {"aten::copy_", "elementwise and casts"},
      {"aten::_log_softmax", "reductions"},
      {"aten::cat", "copies"},
      {"aten::index_select", "copies"},
      {"aten::gelu", "elementwise and casts"},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
       "elementwise and casts"},
      // Names read off an H200 (LibTorch 2.11, CUDA 13): cuBLAS's nvjet
      // kernels are matrix products; a functor's "{lambda()#1}" is no LAMB.
      {"nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "matrix products"},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::GeluBackwardCUDAKernelImpl("
       "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const>",
       "elementwise and casts"},
      {"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
       "at::TensorIteratorBase&)::{lambda()#3}::operator()() const>",
       "elementwise and casts"},
      {"void pbert::kernels::(anonymous namespace)::LambDirectionKernel<__nv_bfloat16>(Launch)",
       "optimizer"},
      {"void pbert::kernels::(anonymous namespace)::SquaredNormsKernel<float>", "optimizer"},
  };
  for (const auto& [name, expected] : cases) EXPECT_EQ(KernelClass(name), expected) << name;
}

// Self times by hand: on thread 1, A [0,100) calls B [10,40) and C [50,60),
// then D [200,250); on thread 2, E [0,30). Self: A 60, B 30, C 10, D 50,
// E 30 (us); top level: A, D, E; busy: the union [0,100) u [200,250).
TEST(ProfilerTest, SelfTimesIdleShareAndCountsFromTheEvents) {
  using K = ProfiledEvent::Kind;
  const std::vector<ProfiledEvent> events = {
      {"aten::linear", K::kOperator, 1, 0, 100}, {"aten::addmm", K::kOperator, 1, 10, 30},
      {"aten::gelu", K::kOperator, 1, 50, 10},   {"aten::sum", K::kOperator, 1, 200, 50},
      {"aten::cat", K::kOperator, 2, 0, 30},
  };
  ProfileSummary s = Summarize(events, /*gpu=*/false);
  s.steps = 2;
  s.wall_seconds = 300e-6;
  EXPECT_EQ(s.launched, 3);
  EXPECT_DOUBLE_EQ(s.busy_seconds, 150e-6);
  EXPECT_DOUBLE_EQ(s.IdleShare(), 0.5);
  std::map<std::string, double> self;
  for (const auto& k : s.longest) self[k.name] = k.seconds;
  EXPECT_DOUBLE_EQ(self["aten::linear"], 60e-6);
  EXPECT_DOUBLE_EQ(self["aten::addmm"], 30e-6);
  EXPECT_DOUBLE_EQ(self["aten::gelu"], 10e-6);
  std::map<std::string, double> classes;
  for (const auto& c : s.classes) classes[c.name] = c.seconds;
  EXPECT_DOUBLE_EQ(classes["matrix products"], 90e-6);  // linear and addmm
  EXPECT_DOUBLE_EQ(classes["reductions"], 50e-6);
  EXPECT_DOUBLE_EQ(classes["copies"], 30e-6);
  EXPECT_EQ(s.longest.front().name, "aten::linear");
  const std::string table = s.Markdown({1, 2});
  EXPECT_NE(table.find("| matrix products | 0.045 | 50.0% |"), std::string::npos) << table;
  EXPECT_NE(table.find("- CPU idle: 50.0% of the step"), std::string::npos) << table;
  EXPECT_NE(table.find("- operators called (top level) per step: 1.5"), std::string::npos)
      << table;
  // On a GPU the kernels are the work, the runtime's waits are counted.
  const std::vector<ProfiledEvent> gpu = {
      {"sm90_xmma_gemm", K::kKernel, 7, 0, 40},      {"flash_fwd_kernel", K::kKernel, 7, 50, 20},
      {"cudaLaunchKernel", K::kRuntime, 1, 0, 5},    {"cudaStreamSynchronize", K::kRuntime, 1, 90, 2},
      {"aten::mm", K::kOperator, 1, 0, 8},
  };
  ProfileSummary g = Summarize(gpu, /*gpu=*/true);
  EXPECT_EQ(g.launched, 2);
  EXPECT_EQ(g.waits, 1);
  EXPECT_DOUBLE_EQ(g.busy_seconds, 60e-6);
}

// LibTorch's own profiler around two "steps" of matrix products on the CPU:
// profile.md and a trace that Perfetto reads (JSON with traceEvents), each
// step's products counted and classed, the one host read of each step
// counted as its wait.
TEST(ProfilerTest, ProfilesStepsOnTheCpu) {
  const auto dir = pbert::testing::ScratchFolder();
  StepProfiler profiler(*ParseProfileSteps("2:3"), dir.string(), c10::Device(c10::kCPU));
  const at::Tensor a = at::randn({64, 64});
  for (int64_t step = 1; step <= 4; ++step) {
    ASSERT_TRUE(profiler.Before(step).ok());
    at::Tensor b = a;
    for (int i = 0; i < 5; ++i) b = at::mm(b, a);
    ReadToHost(b.sum().reshape({1}));
    ASSERT_TRUE(profiler.After(step, 0.001).ok());
  }
  const ProfileSummary* s = profiler.summary();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->steps, 2);
  EXPECT_EQ(s->waits, 2);
  EXPECT_DOUBLE_EQ(s->wall_seconds, 0.002);
  std::ifstream md_file(dir / "profile.md");
  const std::string md((std::istreambuf_iterator<char>(md_file)), {});
  EXPECT_NE(md.find("# Profile of steps 2 to 3"), std::string::npos) << md;
  if (md.find("not available in this build") != std::string::npos) {
    GTEST_SKIP() << "this LibTorch has no Kineto profiler: " << md;
  }
  int mm_calls = 0;
  for (const auto& k : s->longest) {
    if (k.name == "aten::mm") mm_calls = static_cast<int>(k.calls);
  }
  EXPECT_EQ(mm_calls, 10);  // 5 a step, steps 2 and 3
  EXPECT_GT(s->classes[0].seconds, 0);  // matrix products
  EXPECT_NE(md.find("- device waits per step: 1.0"), std::string::npos) << md;
  std::ifstream trace(dir / "profile" / "trace.json");
  nlohmann::json json = nlohmann::json::parse(trace, nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  EXPECT_GT(json["traceEvents"].size(), 10u);
  std::filesystem::remove_all(dir);
}

// A run that ends before the steps it was asked to profile says so at its
// end (the trainer warns with Unmet); one that profiled them, or has no
// range, says nothing.
TEST(ProfilerTest, ARangeTheRunNeverReachesIsNamedAtItsEnd) {
  const auto dir = pbert::testing::ScratchFolder();
  StepProfiler late(*ParseProfileSteps("5:8"), dir.string(), c10::Device(c10::kCPU));
  for (int64_t step = 1; step <= 6; ++step) {
    ASSERT_TRUE(late.Before(step).ok());
    ASSERT_TRUE(late.After(step, 0.001).ok());
  }
  EXPECT_EQ(late.Unmet(6),
            "train.profile_steps 5:8 wrote no profile: the run ended at step 6 (its target, "
            "train.max_samples or too many bad steps); profile steps up to 6");
  EXPECT_FALSE(std::filesystem::exists(dir / "profile.md"));
  StepProfiler none(ProfileSteps{}, dir.string(), c10::Device(c10::kCPU));
  EXPECT_EQ(none.Unmet(6), "");
  StepProfiler done(*ParseProfileSteps("1:2"), dir.string(), c10::Device(c10::kCPU));
  for (int64_t step = 1; step <= 2; ++step) {
    ASSERT_TRUE(done.Before(step).ok());
    ASSERT_TRUE(done.After(step, 0.001).ok());
  }
  EXPECT_EQ(done.Unmet(2), "");
  std::filesystem::remove_all(dir);
}

// A run resumed inside the range (from a checkpoint of step 6 of 5:8)
// profiles the steps left, and says which.
TEST(ProfilerTest, ARunResumedInsideTheRangeProfilesTheStepsLeft) {
  const auto dir = pbert::testing::ScratchFolder();
  StepProfiler resumed(*ParseProfileSteps("5:8"), dir.string(), c10::Device(c10::kCPU));
  for (int64_t step = 7; step <= 9; ++step) {
    ASSERT_TRUE(resumed.Before(step).ok());
    at::mm(at::ones({16, 16}), at::ones({16, 16}));
    ASSERT_TRUE(resumed.After(step, 0.001).ok());
  }
  ASSERT_NE(resumed.summary(), nullptr);
  EXPECT_EQ(resumed.summary()->steps, 2);
  EXPECT_EQ(resumed.Unmet(9), "");
  std::ifstream in(dir / "profile.md");
  const std::string profile((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(profile.find("# Profile of steps 7 to 8"), std::string::npos) << profile;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pbert::train
