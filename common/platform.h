// The platform under LibTorch, set up once at start-up: what the CPU can do
// (CPUID, and what the OS enables in XCR0), the OpenBLAS kernels that follow
// from it, and glibc malloc's treatment of large blocks.
//
// OpenBLAS picks its kernels once, when it is loaded, from the CPU's family
// and model. Releases older than the CPU (Debian 12 ships 0.3.21) fall back
// to SSE3 "Prescott" kernels on CPUs they don't know, such as 4th and 5th
// generation Xeon Scalable: matrix products then run 2-4x slower than with
// the AVX-512 kernels the CPU supports. TuneOpenBlasKernels() corrects that
// choice at start-up, before the first BLAS call.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pbert {

struct CpuFeatures {
  int family = 0, model = 0;  // display family and model
  bool avx2 = false;          // with FMA, and YMM state enabled by the OS
  bool avx512 = false;        // F, BW, DQ, VL, and ZMM state enabled by the OS
  bool avx512_bf16 = false;   // AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4)
  bool amx_bf16 = false;      // AMX-BF16, and tile state enabled by the OS
  // bf16 matrix products in hardware: AVX512_BF16 or AMX-BF16.
  bool bf16() const { return avx512_bf16 || amx_bf16; }
  // "family 6 model 207: AVX2 AVX-512 ..." for logs.
  std::string Describe() const;
};

// This CPU (x86-64; elsewhere all false).
const CpuFeatures& Cpu();

struct BlasKernels {
  std::string loaded;  // OpenBLAS's own choice ("" when the BLAS is not OpenBLAS)
  std::string chosen;  // the kernels in use after tuning
  std::string note;    // why it changed, or why not; "" when nothing was to do
  // The environment (OPENBLAS_CORETYPE) holds the kernels below what the CPU
  // runs faster: worth a warning.
  bool slower = false;
};

// If the BLAS is a dynamic-architecture OpenBLAS that chose kernels older
// than the CPU supports, and OPENBLAS_CORETYPE is not set, re-selects
// SkylakeX (AVX-512) or Haswell (AVX2) kernels. Call before any BLAS call and
// before other threads start; later calls return the first call's result.
const BlasKernels& TuneOpenBlasKernels();

// For benchmarks, whose sides must run the same kernels whatever the
// environment says: drops OPENBLAS_CORETYPE and lets OpenBLAS choose again
// as if it had not been set. Call before TuneOpenBlasKernels().
void IgnoreOpenBlasCoretype();

// OpenMP's wait policy. OpenMP's worker threads (LibTorch's intra-op pool
// and OpenBLAS's, both libgomp's) spin after each parallel region before
// they sleep: with another busy process on the cores they spin in its time
// slices, and a step took 3.7-4.6x its unloaded time (bench/step --load 1,
// 2 cores). Passive waiting keeps it at 1.5-2.4x, for 5-10% of the unloaded
// step. libgomp reads OMP_WAIT_POLICY once, when the program is loaded (a
// setenv even in an ELF pre-initialiser is undone by libc's start-up), so
// unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set this sets
// OMP_WAIT_POLICY=PASSIVE and re-executes the program with `argv` (about
// 0.5 s: LibTorch is loaded twice). OMP_WAIT_POLICY=ACTIVE is the faster
// choice on a machine the run has to itself. Call first in main().
void UsePassiveOpenMpWait(char** argv);

// Keeps freed memory for reuse instead of returning it to the kernel. glibc
// serves blocks above its mmap threshold (at most 32 MiB) with fresh mmap
// calls and unmaps them on free, and trims the heap top above 128 KiB: a
// training step, which allocates and frees the same large activations and
// gradients every time, then faults in tens of thousands of fresh pages per
// step. With no mmap and no trimming they are reused (bench/step shows the
// faults per step). Call first in main(), before any thread starts; a
// GLIBC_TUNABLES setting of the user's for malloc takes precedence.
void TuneMalloc();

// The variables the thread pools under LibTorch read (libgomp, OpenBLAS,
// MKL), checked once: OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
// MKL_NUM_THREADS each a count in [1, kMaxThreads] (OMP_NUM_THREADS may list
// one per nesting level: "4,2"), OMP_WAIT_POLICY ACTIVE or PASSIVE,
// GOMP_SPINCOUNT a count (suffix k, M, G or T) or INFINITE. The pools
// ignore a value they cannot read without a word; here it is one line
// naming the variable and what it takes (InvalidArgument).
inline constexpr int kMaxThreads = 1 << 16;
struct ThreadEnvironment {
  int omp_num_threads = 0;  // OMP_NUM_THREADS' first level; 0: unset
};
absl::StatusOr<ThreadEnvironment> ReadThreadEnvironment(
    const std::function<const char*(const char*)>& get = nullptr);

// What must be right before the libraries start, checked from the binary's
// ELF pre-initialiser, which runs before every library's initialiser: the
// address space (ulimit -v) must hold the libraries' start and a small
// command's work (LibTorch's initialisers abort, OpenBLAS retries its
// buffers' allocation for ever, and a thread's start may crash, in less):
// what the libraries mapped take already (the process's size then), plus
// kStartMiB, plus kStartMiBPerCpu for each CPU the process may use (a
// thread's OpenBLAS buffer of 128 MiB and its malloc arena of 64 MiB, and
// its stack); the stack (ulimit -s) must hold
// kStackKiB; a user other than root must be allowed kStartThreads plus two
// per CPU processes and threads (ulimit -u); a CPU-time limit (ulimit -t)
// whose hard limit equals its soft one gets its soft limit a second
// earlier, so that SIGXCPU (and its line) comes before the kernel's
// SIGKILL; and the thread pools' variables
// must read (ReadThreadEnvironment), before libgomp reads them its own way.
// Else one line naming the limit or the variable, to stderr, and exit code
// 2. `argv[1]` names the command in the line.
inline constexpr long kStartMiB = 384, kStartMiBPerCpu = 224;
// The least stack (ulimit -s) it starts with, in KiB, and the threads it
// may start besides two per CPU (ulimit -u).
inline constexpr long kStackKiB = 1024, kStartThreads = 16;
void CheckStartEnvironment(int argc, char** argv, char** envp);

// The one line SIGXCPU (the CPU-time limit, ulimit -t) writes before the
// process ends with exit code 1: "COMMAND: error: the CPU-time limit ...;
// raise it, or run the command again[ with RESUME_FLAG]". Installs the
// handler; a later call replaces the line (the command's, then its resume
// flag once it has a run to continue).
void SetCpuLimitLine(const std::string& command, const std::string& resume_flag);

// The process's resource limits, as they bear on a failure.
//
// The soft limit of open files raised to the hard one (as Python and most
// servers do): a store of many shards, the loader's threads and c10d's
// sockets take more than a shell's 1024 on large runs. Returns an error,
// naming `ulimit -n`, if even the hard limit is below `needed`. A write
// past the file-size limit (`ulimit -f`) fails with EFBIG instead of
// killing the process without a word (SIGXFSZ is ignored).
absl::Status PrepareResourceLimits(int needed_files);

// The process's address space in MiB (/proc's VmSize); 0 where /proc
// cannot tell. Safe in a pre-initialiser and in a forked child.
long MappedMiB();

// What an exhausted limit explains of a failure, "" if none is near:
// "61 of the 64 files this process may open were open (ulimit -n)", and
// for a failure to allocate, "the address space is limited to 2048 MiB
// (ulimit -v)".
std::string ExhaustedLimits(bool out_of_memory);

// Keeps what libraries write to stderr off the terminal while it lives
// (LibTorch's logs as a rendezvous is joined). The lines that must still
// reach the user at any moment, a worker thread's end or a crash
// (app/cli.cc), go to TerminalStderr(), stderr's own file kept aside, and
// name the work under way, `doing` (e.g. "joining the rendezvous at
// h:29500"), given by StderrDoing() ("" when none). One at a time.
class QuietStderr {
 public:
  explicit QuietStderr(const std::string& doing);
  ~QuietStderr();
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_;
};
int TerminalStderr();
const char* StderrDoing();

}  // namespace pbert
