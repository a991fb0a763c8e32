#include "train/profiler.h"

#include <c10/core/Device.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/status.h"
#include "gpu/gpu.h"
#include "nlohmann/json.hpp"
#include "train/host_read.h"

namespace pbert::train {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

constexpr char kKey[] = "train.profile_steps";

bool ContainsAny(const std::string& name, std::initializer_list<const char*> parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](const char* part) { return name.find(part) != std::string::npos; });
}

// The GPU runtime's calls that wait for the device.
bool IsWait(const std::string& name) {
  return ContainsAny(name, {"cudaStreamSynchronize", "cudaDeviceSynchronize",
                            "cudaEventSynchronize", "cudaStreamWaitEvent"}) ||
         name == "cudaMemcpy";
}

// An event's start and duration in us: LibTorch 2.x counts them in ns
// (startNs, durationNs), 1.13 in us (startUs, durationUs). The overload
// taking `int` is chosen where the ns members exist.
template <typename Event>
auto StartUs(const Event& e, int) -> decltype(static_cast<int64_t>(e.startNs())) {
  return static_cast<int64_t>(e.startNs()) / 1000;
}
template <typename Event>
int64_t StartUs(const Event& e, long) {
  return static_cast<int64_t>(e.startUs());
}
template <typename Event>
auto DurationUs(const Event& e, int) -> decltype(static_cast<int64_t>(e.durationNs())) {
  return static_cast<int64_t>(e.durationNs()) / 1000;
}
template <typename Event>
int64_t DurationUs(const Event& e, long) {
  return static_cast<int64_t>(e.durationUs());
}

// Seconds of the union of `intervals` ([start, end) in us).
double UnionSeconds(std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t covered = 0, end = INT64_MIN;
  for (const auto& [s, e] : intervals) {
    if (e <= end) continue;
    covered += e - std::max(s, end);
    end = e;
  }
  return static_cast<double>(covered) * 1e-6;
}

std::string Percent(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%.1f%%", 100 * part / whole) : "-";
}

}  // namespace

absl::StatusOr<ProfileSteps> ParseProfileSteps(const std::string& text) {
  ProfileSteps steps;
  if (text.empty()) return steps;
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  int64_t first = 0, last = 0;
  bool ok = parts.size() <= 2 && absl::SimpleAtoi(parts[0], &first);
  last = first;
  if (ok && parts.size() == 2) ok = absl::SimpleAtoi(parts[1], &last);
  if (!ok || first < 1 || last < first) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text,
                     "' is not a range of steps; give \"A:B\" with 1 <= A <= B (steps A to B), "
                     "\"A\" (step A alone) or \"\" (none)"));
  }
  steps.first = first;
  steps.last = last;
  return steps;
}

const std::vector<std::string>& KernelClasses() {
  static const std::vector<std::string> kClasses = {
      "matrix products", "attention", "elementwise and casts", "LayerNorm", "dropout",
      "reductions",      "optimizer", "copies"};
  return kClasses;
}

std::string KernelClass(const std::string& given) {
  std::string name = given;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // A CUDA kernel's name holds its functor's: "{lambda()#1}" is no LAMB.
  for (size_t at = name.find("lambda"); at != std::string::npos; at = name.find("lambda", at)) {
    name.replace(at, 6, "");
  }
  // In this order: an attention kernel may hold "gemm"; a multi-tensor
  // kernel "norm" or "mul".
  if (ContainsAny(name, {"_foreach", "multi_tensor", "lamb", "adam", "squarednorms"})) {
    return "optimizer";
  }
  // The losses' softmax over the vocabulary is a reduction, not attention.
  if (ContainsAny(name, {"log_softmax", "cross_entropy", "nll_loss"})) return "reductions";
  if (ContainsAny(name, {"attention", "flash", "fmha", "softmax", "sdpa"})) return "attention";
  if (ContainsAny(name, {"layer_norm", "layernorm"})) return "LayerNorm";
  if (ContainsAny(name, {"dropout", "bernoulli"})) return "dropout";
  if (ContainsAny(name, {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear",
                         "addmm_activation", "gemm", "cutlass", "xmma", "cublas", "wgmma",
                         "nvjet", "_scaled_mm"})) {
    return "matrix products";
  }
  // A copy between dtypes is a cast (autocast's, most of them; ATen's CUDA
  // copy kernels: direct_copy converts any pair of dtypes, bfloat16_copy
  // fp32 to bf16); copies move bytes as they are.
  if (ContainsAny(name, {"aten::copy_", "aten::_to_copy", "aten::to", "direct_copy",
                         "bfloat16_copy", "copy_kernel"})) {
    return "elementwise and casts";
  }
  if (ContainsAny(name, {"memcpy", "memset", "aten::cat", "aten::stack", "aten::clone",
                         "aten::contiguous", "aten::index", "embedding", "gather", "scatter",
                         "catarraybatched"})) {
    return "copies";
  }
  if (ContainsAny(name, {"reduce", "aten::sum", "aten::mean", "aten::norm", "linalg_vector_norm",
                         "aten::argmax", "aten::max"})) {
    return "reductions";
  }
  return "elementwise and casts";
}

double ProfileSummary::IdleShare() const {
  return wall_seconds > 0 ? std::clamp(1 - busy_seconds / wall_seconds, 0.0, 1.0) : 0.0;
}

std::string ProfileSummary::Markdown(const ProfileSteps& range) const {
  const double per_step = steps > 0 ? 1e3 / static_cast<double>(steps) : 0;
  double work = 0;
  for (const Class& c : classes) work += c.seconds;
  std::string out = absl::StrFormat(
      "# Profile of steps %d to %d\n\n"
      "%s; %d steps, %.3f ms per step (host clock).\n\n"
      "| class | ms per step | share of the %s time |\n|---|---:|---:|\n",
      range.first, range.last, device, steps, wall_seconds * per_step,
      gpu ? "kernels'" : "operators' (self)");
  for (const Class& c : classes) {
    absl::StrAppend(&out, absl::StrFormat("| %s | %.3f | %s |\n", c.name, c.seconds * per_step,
                                          Percent(c.seconds, work)));
  }
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "\n- %s idle: %.1f%% of the step (no %s running)\n"
          "- %s per step: %.1f\n"
          "- device waits per step: %.1f (%s)\n",
          gpu ? "GPU" : "CPU", 100 * IdleShare(), gpu ? "kernel" : "operator",
          gpu ? "kernels launched" : "operators called (top level)",
          steps > 0 ? static_cast<double>(launched) / static_cast<double>(steps) : 0.0,
          steps > 0 ? static_cast<double>(waits) / static_cast<double>(steps) : 0.0,
          gpu ? "runtime calls that wait for the GPU: stream, device and event synchronizes, "
                "blocking copies"
              : "reads of values by the host, train::ReadToHost"));
  absl::StrAppend(&out, "\n## The ", longest.size(), " longest ", gpu ? "kernels" : "operators",
                  " (self time)\n\n| name | class | calls per step | ms per step | share |\n"
                  "|---|---|---:|---:|---:|\n");
  for (const Kernel& k : longest) {
    std::string name = k.name.size() > 120 ? k.name.substr(0, 117) + "..." : k.name;
    absl::StrAppend(&out, absl::StrFormat("| `%s` | %s | %.1f | %.3f | %s |\n", name,
                                          k.kernel_class,
                                          static_cast<double>(k.calls) / std::max<int64_t>(steps, 1),
                                          k.seconds * per_step, Percent(k.seconds, work)));
  }
  return out;
}

namespace {

// The self times of one thread's (stream's) `events` added to `kernels`,
// each less the time of the events nested in it; the outermost ones
// counted as launched and their spans added to `busy`.
void AddSelfTimes(std::vector<const ProfiledEvent*>& events,
                  std::map<std::string, ProfileSummary::Kernel>* kernels,
                  std::vector<std::pair<int64_t, int64_t>>* busy, int64_t* launched) {
  std::sort(events.begin(), events.end(), [](const ProfiledEvent* a, const ProfiledEvent* b) {
    return a->start_us != b->start_us ? a->start_us < b->start_us
                                      : a->duration_us > b->duration_us;
  });
  struct Open {
    const ProfiledEvent* event;
    int64_t children_us;
  };
  std::vector<Open> stack;
  auto close = [&](const Open& o) {
    const double self = static_cast<double>(o.event->duration_us - o.children_us) * 1e-6;
    ProfileSummary::Kernel& k = (*kernels)[o.event->name];
    k.name = o.event->name;
    k.calls += 1;
    k.seconds += std::max(self, 0.0);
  };
  for (const ProfiledEvent* e : events) {
    while (!stack.empty() &&
           stack.back().event->start_us + stack.back().event->duration_us <= e->start_us) {
      close(stack.back());
      stack.pop_back();
    }
    if (stack.empty()) {
      ++*launched;
      busy->emplace_back(e->start_us, e->start_us + e->duration_us);
    } else {
      stack.back().children_us += e->duration_us;
    }
    stack.push_back({e, 0});
  }
  while (!stack.empty()) {
    close(stack.back());
    stack.pop_back();
  }
}

}  // namespace

ProfileSummary Summarize(const std::vector<ProfiledEvent>& events, bool gpu) {
  ProfileSummary s;
  s.gpu = gpu;
  // Self times: the work's events by thread (stream), each less the time of
  // the events nested in it.
  std::map<uint64_t, std::vector<const ProfiledEvent*>> by_thread;
  const ProfiledEvent::Kind work = gpu ? ProfiledEvent::Kind::kKernel : ProfiledEvent::Kind::kOperator;
  for (const ProfiledEvent& e : events) {
    if (e.kind == work) by_thread[e.thread].push_back(&e);
    if (gpu && e.kind == ProfiledEvent::Kind::kRuntime && IsWait(e.name)) ++s.waits;
  }
  std::map<std::string, ProfileSummary::Kernel> kernels;
  std::map<std::string, double> classes;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (auto& [thread, list] : by_thread) AddSelfTimes(list, &kernels, &busy, &s.launched);
  s.busy_seconds = UnionSeconds(std::move(busy));
  for (auto& [name, k] : kernels) {
    k.kernel_class = KernelClass(name);
    classes[k.kernel_class] += k.seconds;
    s.longest.push_back(k);
  }
  for (const std::string& name : KernelClasses()) s.classes.push_back({name, classes[name]});
  std::sort(s.longest.begin(), s.longest.end(),
            [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  if (s.longest.size() > 20) s.longest.resize(20);
  return s;
}

StepProfiler::StepProfiler(ProfileSteps steps, std::string run_dir, const c10::Device& device)
    : steps_(steps),
      run_dir_(std::move(run_dir)),
      gpu_(device.is_cuda()),
      device_index_(device.has_index() ? device.index() : 0) {}

StepProfiler::~StepProfiler() {
  if (active_) {
    try {
      kineto::disableProfiler();
    } catch (const std::exception&) {
    }
  }
}

std::string StepProfiler::Unmet(int64_t last_step) const {
  if (steps_.empty() || summary_ != nullptr || last_step >= steps_.last) return "";
  return absl::StrCat("train.profile_steps ", steps_.first, ":", steps_.last,
                      " wrote no profile: the run ended at step ", last_step,
                      " (its target, train.max_samples or too many bad steps); profile steps up "
                      "to ",
                      last_step);
}

absl::Status StepProfiler::Before(int64_t step) {
  // The first profiled step, or a resume's first step inside the range
  // (which profiles the steps left).
  if (started_ || !steps_.Has(step)) return absl::OkStatus();
  profiled_ = {step, steps_.last};
  std::set<ActivityType> activities = {ActivityType::CPU};
  if (gpu_) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO);
  try {
    kineto::prepareProfiler(config, activities);
    kineto::enableProfiler(config, activities);
    active_ = true;
  } catch (const std::exception& e) {
    // The fallback: each step's host time (and on a GPU its time by CUDA
    // events, in the trainer's figures) without the table of kernels.
    unavailable_ = FirstLine(e);
    logging::Get("train")->warn("{}: LibTorch's profiler is not available here ({}); "
                                "profile.md gives the steps' times only",
                                kKey, unavailable_);
  }
  started_ = true;
  seconds_ = 0;
  reads_before_ = HostReads();
  logging::Get("train")->info("profiling steps {} to {}{}", profiled_.first, profiled_.last,
                              step > steps_.first
                                  ? absl::StrCat(" (the run resumed inside train.profile_steps ",
                                                 steps_.first, ":", steps_.last, ")")
                                  : "");
  return absl::OkStatus();
}

absl::Status StepProfiler::After(int64_t step, double seconds) {
  if (!started_ || !steps_.Has(step)) return absl::OkStatus();
  seconds_ += seconds;
  if (step != steps_.last) return absl::OkStatus();
  return Finish();
}

absl::Status StepProfiler::Finish() {
  std::vector<ProfiledEvent> events;
  std::unique_ptr<kineto::ProfilerResult> result;
  if (active_) {
    if (gpu_) RETURN_IF_ERROR(gpu::Synchronize(device_index_));  // the last kernels end
    try {
      result = kineto::disableProfiler();
    } catch (const std::exception& e) {
      unavailable_ = FirstLine(e);
    }
    active_ = false;
  }
  if (result != nullptr) {
    for (const kineto::KinetoEvent& e : result->events()) {
      ProfiledEvent p;
      p.name = e.name();
      p.start_us = StartUs(e, 0);
      p.duration_us = DurationUs(e, 0);
      if (e.deviceType() == c10::DeviceType::CUDA) {
        p.kind = ProfiledEvent::Kind::kKernel;
        p.thread = static_cast<uint64_t>(e.deviceResourceId());
      } else {
        p.kind = absl::StartsWith(p.name, "cuda") ? ProfiledEvent::Kind::kRuntime
                                                   : ProfiledEvent::Kind::kOperator;
        p.thread = e.startThreadId();
      }
      events.push_back(std::move(p));
    }
  }
  summary_ = std::make_unique<ProfileSummary>(Summarize(events, gpu_));
  ProfileSummary& s = *summary_;
  s.steps = profiled_.last - profiled_.first + 1;
  s.wall_seconds = seconds_;
  s.host_reads = static_cast<int64_t>(HostReads() - reads_before_);
  if (!gpu_) s.waits = s.host_reads;
  s.device = "CPU";
  if (gpu_) {
    auto facts = gpu::Describe(device_index_);
    s.device = facts.ok() ? facts->name : "GPU";
  }
  if (run_dir_.empty()) return absl::OkStatus();
  std::string markdown = s.Markdown(profiled_);
  if (!unavailable_.empty()) {
    markdown = absl::StrCat("# Profile of steps ", profiled_.first, " to ", profiled_.last, "\n\n",
                            s.device, "; ", s.steps, " steps, ",
                            absl::StrFormat("%.3f", s.wall_seconds * 1e3 / s.steps),
                            " ms per step (host clock). LibTorch's profiler is not available in "
                            "this build (",
                            unavailable_, "): no table of kernels.\n");
  }
  RETURN_IF_ERROR(WriteFileAtomically(run_dir_ + "/profile.md", markdown));
  if (result == nullptr) return absl::OkStatus();
  // Kineto's Chrome trace where this LibTorch writes one; else the same
  // format from the events (Perfetto and TensorBoard read both).
  const std::string folder = run_dir_ + "/profile";
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  const std::string trace = folder + "/trace.json";
  try {
    result->save(trace);
  } catch (const std::exception&) {
  }
  if (!std::filesystem::exists(trace, error) || std::filesystem::file_size(trace, error) == 0) {
    nlohmann::json out = {{"traceEvents", nlohmann::json::array()}, {"displayTimeUnit", "ms"}};
    for (const ProfiledEvent& e : events) {
      out["traceEvents"].push_back({{"name", e.name},
                                    {"ph", "X"},
                                    {"ts", e.start_us},
                                    {"dur", e.duration_us},
                                    {"pid", e.kind == ProfiledEvent::Kind::kKernel ? 1 : 0},
                                    {"tid", e.thread}});
    }
    RETURN_IF_ERROR(WriteFileAtomically(trace, out.dump()));
  }
  logging::Get("train")->info("profile of steps {} to {}: {}/profile.md, {}", steps_.first,
                              steps_.last, run_dir_, trace);
  return absl::OkStatus();
}

}  // namespace pbert::train
