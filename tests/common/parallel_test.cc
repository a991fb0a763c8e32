#include "common/parallel.h"

#include <atomic>
#include <new>
#include <stdexcept>
#include <vector>

#include "gtest/gtest.h"

namespace pbert {
namespace {

TEST(RunWorkersTest, EveryWorkerRunsOnce) {
  std::vector<std::atomic<int>> runs(5);
  ASSERT_TRUE(RunWorkers(5, [&](int w) { ++runs[w]; }, "counting").ok());
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

// What a worker throws is the result, not std::terminate: memory as
// ResourceExhausted, anything else as Internal; every other worker still
// ran and was joined.
TEST(RunWorkersTest, AWorkersExceptionIsTheResult) {
  std::atomic<int> done{0};
  const absl::Status memory = RunWorkers(
      4,
      [&](int w) {
        if (w == 2) throw std::bad_alloc();
        ++done;
      },
      "tokenizing");
  EXPECT_EQ(memory.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(memory.message().substr(0, 30), "out of memory while tokenizing");
  EXPECT_EQ(done.load(), 3);
  const absl::Status other =
      RunWorkers(2, [](int w) { if (w == 0) throw std::runtime_error("no luck"); }, "counting");
  EXPECT_EQ(other.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(other.message(), "counting failed: no luck (please report it with the command line)");
}

}  // namespace
}  // namespace pbert
