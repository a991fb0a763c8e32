#include "common/platform.h"

#include <dirent.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace pbert {
namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t EnabledStates() {  // XCR0: which register states the OS saves
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const unsigned base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
  f.family = static_cast<int>(base_family + (base_family == 0xf ? (a >> 20) & 0xff : 0));
  f.model = static_cast<int>(
      base_model | ((base_family == 6 || base_family == 0xf) ? ((a >> 16) & 0xf) << 4 : 0));
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12);
  if (!osxsave) return f;
  const uint64_t xcr0 = EnabledStates();
  const bool ymm = (xcr0 & 0x6) == 0x6;            // SSE and AVX state
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;   // opmask, ZMM_Hi256, Hi16_ZMM
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b & (1u << 5), f512 = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30),
             vl = b & (1u << 31), amx_bf16 = d & (1u << 22);
  f.avx2 = ymm && avx2 && fma;
  f.avx512 = zmm && f512 && dq && bw && vl;
  f.amx_bf16 = tiles && amx_bf16;
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512_bf16 = f.avx512 && (a & (1u << 5));
  return f;
}
#else
CpuFeatures Detect() { return {}; }
#endif

// OpenBLAS cores at least as capable as each instruction set.
bool AtLeastAvx512Kernels(const std::string& core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}
bool AtLeastAvx2Kernels(const std::string& core) {
  return AtLeastAvx512Kernels(core) || core == "Haswell" || core == "Zen";
}

}  // namespace

std::string CpuFeatures::Describe() const {
  std::string out = absl::StrCat("family ", family, " model ", model, ":");
  if (avx2) absl::StrAppend(&out, " AVX2");
  if (avx512) absl::StrAppend(&out, " AVX-512");
  if (avx512_bf16) absl::StrAppend(&out, " AVX512_BF16");
  if (amx_bf16) absl::StrAppend(&out, " AMX-BF16");
  if (!avx2 && !avx512) absl::StrAppend(&out, " no AVX2");
  return out;
}

const CpuFeatures& Cpu() {
  static const CpuFeatures features = Detect();
  return features;
}

namespace {

// Makes a dynamic-architecture OpenBLAS choose its kernels again, as it does
// when loaded (reading OPENBLAS_CORETYPE); false for a single-architecture
// build or another BLAS.
bool ReselectOpenBlasKernels() {
  using Init = void (*)();
  auto quit = reinterpret_cast<Init>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<Init>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return false;
  quit();
  init();
  return true;
}

BlasKernels Tune() {
  using CoreName = char* (*)();
  BlasKernels out;
  auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) return out;  // not OpenBLAS
  out.loaded = out.chosen = core_name();
  const CpuFeatures& cpu = Cpu();
  std::string wanted;
  if (cpu.avx512 && !AtLeastAvx512Kernels(out.loaded)) {
    wanted = "SkylakeX";
  } else if (cpu.avx2 && !AtLeastAvx2Kernels(out.loaded)) {
    wanted = "Haswell";
  }
  if (wanted.empty()) return out;
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced != nullptr) {
    out.note =
        absl::StrCat("OPENBLAS_CORETYPE=", forced, " in the environment holds OpenBLAS to its ",
                     out.loaded, " kernels, but this CPU (", cpu.Describe(), ") runs faster ",
                     wanted == "SkylakeX" ? "AVX-512 (SkylakeX or newer)" : "AVX2 (Haswell)",
                     " kernels: unset OPENBLAS_CORETYPE to let packed-bert choose them");
    out.slower = true;
    return out;
  }
  setenv("OPENBLAS_CORETYPE", wanted.c_str(), /*overwrite=*/1);
  if (!ReselectOpenBlasKernels()) {
    unsetenv("OPENBLAS_CORETYPE");
    out.note =
        absl::StrCat("OpenBLAS was built for ", out.loaded, " only; this CPU has ", cpu.Describe());
    return out;
  }
  out.chosen = core_name();
  out.note = absl::StrCat("OpenBLAS chose ", out.loaded, " kernels for this CPU (", cpu.Describe(),
                          "); using ", out.chosen);
  return out;
}

}  // namespace

void UsePassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) {
    return;  // the user's choice
  }
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
  execv("/proc/self/exe", argv);
  // Not re-executed (no /proc): the process goes on with OpenMP's default.
}

void TuneMalloc() {
  if (const char* tunables = std::getenv("GLIBC_TUNABLES");
      tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) {
    return;
  }
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

void IgnoreOpenBlasCoretype() {
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) return;
  unsetenv("OPENBLAS_CORETYPE");
  ReselectOpenBlasKernels();
}

const BlasKernels& TuneOpenBlasKernels() {
  static const BlasKernels kernels = Tune();
  return kernels;
}

absl::StatusOr<ThreadEnvironment> ReadThreadEnvironment(
    const std::function<const char*(const char*)>& get_or_null) {
  const auto get =
      get_or_null ? get_or_null : [](const char* name) -> const char* { return std::getenv(name); };
  ThreadEnvironment out;
  auto bad = [](const char* name, const char* value, absl::string_view takes) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, "='", value,
                                                   "' is not ", takes, "; set it so or unset it"));
  };
  const std::string count = absl::StrCat("a thread count in [1, ", kMaxThreads, "]");
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
    const char* value = get(name);
    if (value == nullptr) continue;
    const bool levels = std::string(name) == "OMP_NUM_THREADS";
    const std::vector<absl::string_view> parts =
        levels ? absl::StrSplit(value, ',') : std::vector<absl::string_view>{value};
    for (size_t i = 0; i < parts.size(); ++i) {
      int threads = 0;
      if (!absl::SimpleAtoi(parts[i], &threads) || threads < 1 || threads > kMaxThreads) {
        return bad(name, value,
                   levels ? absl::StrCat(count, ", or such counts separated by commas") : count);
      }
      if (levels && i == 0) out.omp_num_threads = threads;
    }
  }
  if (const char* policy = get("OMP_WAIT_POLICY"); policy != nullptr &&
                                                   !absl::EqualsIgnoreCase(policy, "active") &&
                                                   !absl::EqualsIgnoreCase(policy, "passive")) {
    return bad("OMP_WAIT_POLICY", policy, "ACTIVE or PASSIVE");
  }
  if (const char* spin = get("GOMP_SPINCOUNT"); spin != nullptr) {
    absl::string_view digits = spin;
    if (!digits.empty() && absl::StrContains("kKmMgGtT", digits.back())) digits.remove_suffix(1);
    uint64_t spins = 0;
    if (!absl::EqualsIgnoreCase(spin, "infinite") && !absl::EqualsIgnoreCase(spin, "infinity") &&
        !absl::SimpleAtoi(digits, &spins)) {
      return bad("GOMP_SPINCOUNT", spin,
                 "a count of spins (with an optional suffix k, M, G or T) or INFINITE");
    }
  }
  return out;
}

// The CPU-time limit's one line, made before the signal comes (the
// handler only writes it): two buffers, the one in effect named by
// cpu_line, so that a new line is never read half made.
static char cpu_lines[2][512];
static std::atomic<const char*> cpu_line{""};
static void OnCpuLimit(int) {
  const char* line = cpu_line.load();
  const ssize_t ignored = ::write(2, line, std::strlen(line));
  (void)ignored;
  _exit(1);
}

void SetCpuLimitLine(const std::string& command, const std::string& resume_flag) {
  char* next = cpu_lines[cpu_line.load() == cpu_lines[0] ? 1 : 0];
  std::snprintf(next, sizeof(cpu_lines[0]),
                "%.80s: error: the CPU-time limit of this process (ulimit -t) is reached; "
                "raise it, or run the command again%s%.200s\n",
                command.c_str(), resume_flag.empty() ? "" : " with ", resume_flag.c_str());
  cpu_line.store(next);
  std::signal(SIGXCPU, OnCpuLimit);
}

// Read with the calls a pre-initialiser may make.
long MappedMiB() {
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[4096];
  const ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* line = std::strstr(text, "VmSize:");
  return line == nullptr ? 0 : std::strtol(line + 7, nullptr, 10) >> 10;  // kB
}

void CheckStartEnvironment(int argc, char** argv, char** envp) {
  const std::string command =
      argc > 1 && argv[1][0] != '-' ? absl::StrCat("packed-bert ", argv[1]) : "packed-bert";
  auto refuse = [&](const std::string& why) {
    const std::string line = absl::StrCat(command, ": error: ", why, "\n");
    const ssize_t ignored = ::write(2, line.data(), line.size());
    (void)ignored;
    _exit(2);
  };
  struct rlimit limit {};
  cpu_set_t set;
  CPU_ZERO(&set);
  const long cpus = std::max(1, sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1);
  // A stack too small for LibTorch's and the parsers' depth ends in a crash
  // that cannot even say so (the crash line needs a stack); the threads'
  // stacks take the same size.
  if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      static_cast<long>(limit.rlim_cur >> 10) < kStackKiB) {
    refuse(absl::StrCat("the stack is limited to ", limit.rlim_cur >> 10,
                        " KiB (ulimit -s), and packed-bert needs at least ", kStackKiB,
                        " KiB; raise the limit (ulimit -s 8192)"));
  }
  // Threads are processes to this limit: too few, and a thread pool waits
  // for workers that never start. (It does not bind root.)
  const long threads = kStartThreads + 2 * cpus;
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      static_cast<long>(limit.rlim_cur) < threads) {
    refuse(absl::StrCat("this user may run only ", limit.rlim_cur,
                        " processes and threads (ulimit -u), and packed-bert starts up to ",
                        threads, " threads with this process's ", cpus,
                        " CPUs; raise the limit (ulimit -u ", threads * 4, ")"));
  }
  // ulimit -t sets the hard limit with the soft one: the kernel's SIGKILL at
  // the hard limit would come with the SIGXCPU that lets the process say
  // why it ends. One second earlier, SIGXCPU comes alone.
  if (getrlimit(RLIMIT_CPU, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      limit.rlim_cur == limit.rlim_max && limit.rlim_max > 1) {
    limit.rlim_cur = limit.rlim_max - 1;
    setrlimit(RLIMIT_CPU, &limit);
  }
  // Its line from now on: loading LibTorch can take the second left.
  if (getrlimit(RLIMIT_CPU, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    SetCpuLimitLine(command, "");
  }
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const long need = MappedMiB() + kStartMiB + kStartMiBPerCpu * cpus;
    const long have = static_cast<long>(limit.rlim_cur >> 20);
    if (have < need) {
      refuse(absl::StrCat("the address space is limited to ", have,
                          " MiB (ulimit -v), and packed-bert needs at least ", need,
                          " MiB to run with this process's ", cpus, cpus == 1 ? " CPU" : " CPUs",
                          " (its libraries, and a buffer, a heap and a stack per CPU's "
                          "thread); raise the limit (ulimit -v ",
                          need << 10, ")"));
    }
  }
  const auto from_envp = [envp](const char* name) -> const char* {
    const size_t n = std::strlen(name);
    for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    }
    return nullptr;
  };
  if (absl::StatusOr<ThreadEnvironment> read = ReadThreadEnvironment(from_envp); !read.ok()) {
    refuse(std::string(read.status().message()));
  }
}

absl::Status PrepareResourceLimits(int needed_files) {
  std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit files {};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return absl::OkStatus();
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_NOFILE, &files);
  }
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < static_cast<rlim_t>(needed_files)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this process may open only ", files.rlim_cur, " files (ulimit -n), and packed-bert needs ",
        needed_files, ": raise the limit (ulimit -n ", needed_files, ")"));
  }
  return absl::OkStatus();
}

std::string ExhaustedLimits(bool out_of_memory) {
  std::string out;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    int open_files = 0;
    if (DIR* dir = opendir("/proc/self/fd"); dir != nullptr) {
      while (readdir(dir) != nullptr) ++open_files;
      closedir(dir);
      open_files -= 3;  // ".", "..", and the folder's own descriptor
    }
    if (open_files + 8 >= static_cast<int>(limit.rlim_cur)) {
      absl::StrAppend(&out, open_files, " of the ", limit.rlim_cur,
                      " files this process may open were open (ulimit -n)");
    }
  }
  if (out_of_memory && getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", "the address space is limited to ",
                    limit.rlim_cur >> 20, " MiB (ulimit -v)");
  }
  return out;
}

namespace {
std::atomic<int> terminal_stderr{STDERR_FILENO};
char stderr_doing[512] = "";
}  // namespace

QuietStderr::QuietStderr(const std::string& doing) : saved_(::dup(STDERR_FILENO)) {
  std::snprintf(stderr_doing, sizeof(stderr_doing), "%s", doing.c_str());
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved_ >= 0 && null >= 0) {
    terminal_stderr = saved_;
    ::dup2(null, STDERR_FILENO);
  }
  if (null >= 0) ::close(null);
}

QuietStderr::~QuietStderr() {
  if (saved_ >= 0) {
    ::dup2(saved_, STDERR_FILENO);
    terminal_stderr = STDERR_FILENO;
    ::close(saved_);
  }
  stderr_doing[0] = '\0';
}

int TerminalStderr() { return terminal_stderr; }
const char* StderrDoing() { return stderr_doing; }

}  // namespace pbert
