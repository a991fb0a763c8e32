// Two runs' exported weights against each other and their start: the
// check that two ranks train as one process accumulating
// (FinetuneTest.TwoRanksEqualOneProcessAccumulating, TokenTasksTest's):
// each tensor loaded from `start` changes in both runs alike, within
// `relative` of its change (the micro-batch's tokens times fp32's epsilon,
// per step: the rounding of sums taken in another order) plus 1e-6 of the
// largest change (a tensor whose exact gradient is 0 changes by rounding
// alone). The heads, drawn rather than loaded, are left out.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <string>

#include "formats/safetensors.h"
#include "gtest/gtest.h"

namespace pbert::testing {

inline std::map<std::string, at::Tensor> ReadWeightsFile(const std::string& path) {
  auto w = formats::ReadSafetensors(path);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? std::map<std::string, at::Tensor>(w->begin(), w->end())
                : std::map<std::string, at::Tensor>{};
}

inline void ExpectTrainedAlike(const std::string& start_path, const std::string& one_path,
                               const std::string& two_path, double relative) {
  const auto start = ReadWeightsFile(start_path);
  const auto x = ReadWeightsFile(one_path), y = ReadWeightsFile(two_path);
  ASSERT_EQ(x.size(), y.size());
  double largest = 0;
  for (const auto& [name, w] : x) {
    if (start.count(name)) {
      largest = std::max(largest, (w - start.at(name)).abs().max().item<double>());
    }
  }
  ASSERT_GT(largest, 0);
  int compared = 0;
  for (const auto& [name, w] : x) {
    if (!start.count(name)) continue;  // a head: drawn, not loaded
    const double change = (w - start.at(name)).abs().max().item<double>();
    EXPECT_LE((w - y.at(name)).abs().max().item<double>(), relative * change + 1e-6 * largest)
        << name;
    ++compared;
  }
  EXPECT_GT(compared, 30);
}

}  // namespace pbert::testing
