// The random numbers of training, owned in one place: the run's seed, the
// generators dropout draws from (LibTorch's default CPU generator, which
// model/dropout.h draws its seeds from, and the default CUDA generator of the
// training device, which dropout and FlashAttention draw from on a GPU),
// their seeding for each micro-batch of a step, and their saved state.
//
// Micro-batch g of a step over all ranks (g = rank * A + k for A
// micro-batches per rank) draws its masks from generators seeded with a
// hash of (a number drawn once per step, g): two ranks with a micro-batch
// each draw exactly the masks of one rank accumulating both, and every
// rank's generators stay in step, on either device.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace pbert::model {

// What checkpoints save (trainer state part "random"), as hex.
struct SavedRandomState {
  std::string cpu;   // LibTorch's default CPU generator
  std::string cuda;  // the training device's CUDA generator; "" when training on the CPU
  NLOHMANN_DEFINE_TYPE_INTRUSIVE_WITH_DEFAULT(SavedRandomState, cpu, cuda)
};

class Randomness {
 public:
  // `device`: where training runs (its CUDA generator is used on a GPU).
  explicit Randomness(c10::Device device) : device_(device) {}

  // Seeds every generator of the process (CPU and each GPU's) with `seed`.
  static void Seed(uint64_t seed);

  // The generators of one step: seeded for each micro-batch, and put back
  // where one draw per step leaves them when the step ends.
  class Step {
   public:
    explicit Step(const Randomness& randomness);
    ~Step();
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;
    // Before micro-batch `g` (over all ranks) runs forward.
    void MicroBatch(uint64_t g);

   private:
    const Randomness& randomness_;
    uint64_t step_seed_ = 0;
    std::string cpu_after_, cuda_after_;  // the states the step ends with
  };

  SavedRandomState Save() const;
  // Fails (DataLoss) on a state of the wrong size or not hex. A saved CUDA
  // state is restored only when training on a GPU; a GPU run resumed from a
  // CPU checkpoint starts its CUDA generator from the seed (it is reseeded
  // for every micro-batch anyway).
  absl::Status Restore(const SavedRandomState& state) const;

  const c10::Device& device() const { return device_; }

 private:
  c10::Device device_;
};

}  // namespace pbert::model
