// common/platform.h against the kernel's own reading of the CPU
// (/proc/cpuinfo flags, which Linux lists only when the OS supports them)
// and against OpenBLAS's own report of the kernels in use; and which C++
// library this executable's std::filesystem comes from.
#include "common/platform.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace pbert {
namespace {

// As packed-bert's main() does: before any test makes a BLAS call.
const bool kTuned = (TuneOpenBlasKernels(), true);

std::set<std::string> CpuinfoFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  return flags;
}

TEST(PlatformTest, CpuFeaturesAgreeWithProcCpuinfo) {
  const auto flags = CpuinfoFlags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags here";
  auto has = [&](const char* f) { return flags.count(f) > 0; };
  const CpuFeatures& cpu = Cpu();
  EXPECT_EQ(cpu.avx2, has("avx2") && has("fma")) << cpu.Describe();
  EXPECT_EQ(cpu.avx512, has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl"))
      << cpu.Describe();
  EXPECT_EQ(cpu.avx512_bf16, cpu.avx512 && has("avx512_bf16")) << cpu.Describe();
  EXPECT_EQ(cpu.amx_bf16, has("amx_bf16")) << cpu.Describe();
}

TEST(PlatformTest, OpenBlasRunsKernelsForWhatTheCpuHas) {
  ASSERT_TRUE(kTuned);
  using CoreName = char* (*)();
  auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) GTEST_SKIP() << "LibTorch's BLAS here is not OpenBLAS";
  const BlasKernels& blas = TuneOpenBlasKernels();
  EXPECT_EQ(blas.chosen, core_name()) << "the report is OpenBLAS's own";
  const std::string core = core_name();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr && blas.loaded == blas.chosen) {
    GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user's choice stands (" << core << ")";
  }
  const std::set<std::string> avx512 = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  const std::set<std::string> avx2 = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                      "SapphireRapids"};
  if (Cpu().avx512) {
    EXPECT_TRUE(avx512.count(core)) << core << " on " << Cpu().Describe();
  } else if (Cpu().avx2) {
    EXPECT_TRUE(avx2.count(core)) << core << " on " << Cpu().Describe();
  }
  // And the products are right with the kernels in use.
  at::Tensor a = torch::randn({67, 129}, torch::kDouble), b = torch::randn({129, 35}, torch::kDouble);
  at::Tensor expected = (a.unsqueeze(2) * b.unsqueeze(0)).sum(1);
  EXPECT_TRUE(torch::allclose(torch::mm(a.to(torch::kFloat), b.to(torch::kFloat)).to(torch::kDouble),
                              expected, 1e-4, 1e-4));
}

// A PyTorch wheel's libtorch exports its own copies of std::filesystem's
// functions, which crash when called from here; the link (CMakeLists.txt)
// makes this executable bind to its own C++ library's instead: the copy in
// the executable where libstdc++ is static, else libstdc++.so's.
TEST(PlatformTest, StdFilesystemIsTheCompilersOwn) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(remove_all), &info), 0);
  const std::string from = std::filesystem::canonical(info.dli_fname).string();
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const std::string name = std::filesystem::path(from).filename().string();
  EXPECT_TRUE(from == self || name.rfind("libstdc++.so", 0) == 0)
      << "std::filesystem::remove_all comes from " << from;
  // And it works: a small tree goes.
  const auto root = std::filesystem::temp_directory_path() / "pbert_platform_remove_all";
  std::filesystem::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "file") << "x";
  EXPECT_EQ(std::filesystem::remove_all(root), 4u);
  EXPECT_FALSE(std::filesystem::exists(root));
}

}  // namespace
}  // namespace pbert
