// libFuzzer's entry points for a program of one target (scripts/fuzz).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "spdlog/spdlog.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The readers' warnings would bury the fuzzer's own lines.
  spdlog::set_level(spdlog::level::off);
  if (pbert::fuzz::Targets().size() != 1) {
    std::fprintf(stderr, "a fuzzer links exactly one target (%zu here)\n",
                 pbert::fuzz::Targets().size());
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pbert::fuzz::Targets()[0].second(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
