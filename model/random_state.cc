#include "model/random_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>

#include <cstring>
#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pbert::model {
namespace {

// SplitMix64 of the step's number and the micro-batch's place in the step.
uint64_t MicroBatchSeed(uint64_t step_seed, uint64_t micro) {
  uint64_t z = step_seed + (micro + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

at::Generator CpuGenerator() { return at::detail::getDefaultCPUGenerator(); }

// The training device's CUDA generator, through the device-independent
// interface (a CPU build never asks for it).
at::Generator CudaGenerator(const c10::Device& device) {
  return at::globalContext().defaultGenerator(device);
}

std::string StateOf(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  at::Tensor state = generator.get_state();
  return std::string(static_cast<const char*>(state.data_ptr()), state.numel());
}

void SetState(at::Generator generator, const std::string& bytes) {
  at::Tensor state = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

void SetSeed(at::Generator generator, uint64_t seed) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(seed);
}

absl::Status RestoreHex(at::Generator generator, const std::string& hex, const char* which) {
  const std::string current = StateOf(generator);
  if (hex.size() != 2 * current.size()) {
    return absl::DataLossError(absl::StrCat("the checkpoint's ", which,
                                            " random generator state has the wrong size"));
  }
  std::string bytes(current.size(), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    // absl::HexStringToBytes changed its signature after Debian 12's Abseil.
    int byte = 0;
    if (!absl::SimpleHexAtoi(absl::string_view(hex).substr(2 * i, 2), &byte)) {
      return absl::DataLossError(absl::StrCat("the checkpoint's ", which,
                                              " random generator state is not hexadecimal"));
    }
    bytes[i] = static_cast<char>(byte);
  }
  SetState(generator, bytes);
  return absl::OkStatus();
}

}  // namespace

void Randomness::Seed(uint64_t seed) { at::manual_seed(seed); }

Randomness::Step::Step(const Randomness& randomness) : randomness_(randomness) {
  at::Generator cpu = CpuGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    step_seed_ = cpu.get<at::CPUGeneratorImpl>()->random64();
  }
  cpu_after_ = StateOf(cpu);
  if (randomness_.device().is_cuda()) cuda_after_ = StateOf(CudaGenerator(randomness_.device()));
}

Randomness::Step::~Step() {
  SetState(CpuGenerator(), cpu_after_);
  if (randomness_.device().is_cuda()) SetState(CudaGenerator(randomness_.device()), cuda_after_);
}

void Randomness::Step::MicroBatch(uint64_t g) {
  const uint64_t seed = MicroBatchSeed(step_seed_, g);
  SetSeed(CpuGenerator(), seed);
  if (randomness_.device().is_cuda()) SetSeed(CudaGenerator(randomness_.device()), seed);
}

SavedRandomState Randomness::Save() const {
  SavedRandomState saved;
  saved.cpu = absl::BytesToHexString(StateOf(CpuGenerator()));
  if (device_.is_cuda()) saved.cuda = absl::BytesToHexString(StateOf(CudaGenerator(device_)));
  return saved;
}

absl::Status Randomness::Restore(const SavedRandomState& state) const {
  if (absl::Status cpu = RestoreHex(CpuGenerator(), state.cpu, "CPU"); !cpu.ok()) return cpu;
  if (device_.is_cuda() && !state.cuda.empty()) {
    return RestoreHex(CudaGenerator(device_), state.cuda, "CUDA");
  }
  return absl::OkStatus();
}

}  // namespace pbert::model
