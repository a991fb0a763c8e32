// Where a training step's time goes: `train.profile_steps: "A:B"` profiles
// optimizer steps A to B (1-based, inclusive) with LibTorch's profiler
// (Kineto: CPU operators, and on CUDA the GPU's kernels and the runtime's
// calls) and writes RUN_DIR/profile/trace.json, which Perfetto
// (ui.perfetto.dev) and TensorBoard's profiler open, and RUN_DIR/profile.md:
// the time per kernel class, the device's idle share, the kernels launched
// and the device waits per step, and the 20 longest kernels
// (docs/performance.md reads it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace c10 {
struct Device;
}

namespace pbert::train {

// Optimizer steps `first` to `last`, inclusive; none when `last` < `first`.
struct ProfileSteps {
  int64_t first = 1, last = 0;
  bool empty() const { return last < first; }
  bool Has(int64_t step) const { return step >= first && step <= last; }
};

// "A:B" (1 <= A <= B), "A" (step A alone) or "" (none); an error says what
// it takes.
absl::StatusOr<ProfileSteps> ParseProfileSteps(const std::string& text);

// The classes of profile.md, in its order.
const std::vector<std::string>& KernelClasses();
// The class of an operator (CPU) or kernel (GPU) by its name: matrix
// products, attention, LayerNorm, dropout, optimizer, reductions, copies,
// else elementwise and casts.
std::string KernelClass(const std::string& name);

// One profiled interval: an operator on a host thread, or a kernel or a
// runtime call of the GPU.
struct ProfiledEvent {
  enum class Kind { kOperator, kKernel, kRuntime };
  std::string name;
  Kind kind = Kind::kOperator;
  uint64_t thread = 0;  // a host thread, or a GPU stream
  int64_t start_us = 0, duration_us = 0;
};

// What profile.md says of the profiled steps.
struct ProfileSummary {
  std::string device;         // "CPU" or the GPU's name
  bool gpu = false;           // kernels (GPU) or operators (CPU) are the work
  int64_t steps = 0;
  double wall_seconds = 0;    // the profiled steps' host time, in all
  int64_t host_reads = 0;     // ReadToHost calls in the profiled steps
  struct Class {
    std::string name;
    double seconds = 0;  // self time, in all
  };
  std::vector<Class> classes;  // KernelClasses() order
  double busy_seconds = 0;     // the union of the work's intervals
  int64_t launched = 0;        // kernels (GPU) or top-level operators (CPU)
  int64_t waits = 0;           // device synchronizations (GPU) or host reads (CPU)
  struct Kernel {
    std::string name, kernel_class;
    int64_t calls = 0;
    double seconds = 0;  // self time, in all
  };
  std::vector<Kernel> longest;  // the 20 longest, longest first

  double IdleShare() const;
  // profile.md's text.
  std::string Markdown(const ProfileSteps& steps) const;
};

// The summary of `events` (self times: an operator's time less that of the
// operators it called on its thread; a kernel's whole time).
ProfileSummary Summarize(const std::vector<ProfiledEvent>& events, bool gpu);

// Profiles the steps a run asks for, around the trainer's step.
class StepProfiler {
 public:
  // `run_dir`: where profile.md and profile/trace.json go ("" for none:
  // the summary only, as bench/gpu uses it).
  StepProfiler(ProfileSteps steps, std::string run_dir, const c10::Device& device);
  ~StepProfiler();

  // Around optimizer step `step` (1-based): Before starts the profiler at
  // the first profiled step (or, in a run resumed inside the range, at its
  // first step: the steps left are profiled), After (with the step's host
  // time) ends it after the last and writes the files.
  absl::Status Before(int64_t step);
  absl::Status After(int64_t step, double seconds);

  // At the end of a run whose last step was `last_step`: why the steps it
  // was asked to profile were not ("" when they were, or none were asked
  // for: docs/performance.md).
  std::string Unmet(int64_t last_step) const;

  // The summary once the last profiled step is done (else nullptr).
  const ProfileSummary* summary() const { return summary_.get(); }

 private:
  absl::Status Finish();

  ProfileSteps steps_;
  std::string run_dir_;
  bool gpu_ = false;
  int device_index_ = 0;
  bool started_ = false;  // Before saw the first step to profile
  ProfileSteps profiled_;  // the steps profiled: steps_, or a resume's steps left of it
  bool active_ = false;
  std::string unavailable_;  // why LibTorch's profiler could not run ("" if it ran)
  double seconds_ = 0;
  uint64_t reads_before_ = 0;
  std::unique_ptr<ProfileSummary> summary_;
};

}  // namespace pbert::train
