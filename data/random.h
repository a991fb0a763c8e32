// A small, fast, portable random generator (xoshiro256**), so that data
// preparation gives the same result on every platform and thread count:
// each independent piece of work draws from its own (seed, stream).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace pbert::data {

class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull);
    for (uint64_t& s : state_) s = SplitMix(x);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [lo, hi], without modulo bias (Lemire's method).
  int64_t Int(int64_t lo, int64_t hi) {
    const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
    if (range == 0) return static_cast<int64_t>(Next());  // the full 64-bit range
    __uint128_t m = static_cast<__uint128_t>(Next()) * range;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < range) {
      const uint64_t threshold = -range % range;
      while (low < threshold) {
        m = static_cast<__uint128_t>(Next()) * range;
        low = static_cast<uint64_t>(m);
      }
    }
    return lo + static_cast<int64_t>(m >> 64);
  }

  // Fisher-Yates from the back, as Python's random.shuffle.
  template <class T>
  void Shuffle(std::vector<T>& items) {
    Shuffle(items.begin(), items.end());
  }
  // The same on [first, last) of random-access iterators.
  template <class It>
  void Shuffle(It first, It last) {
    for (auto i = last - first; i > 1; --i) {
      std::swap(first[i - 1], first[Int(0, static_cast<int64_t>(i) - 1)]);
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t state_[4];
};

}  // namespace pbert::data
