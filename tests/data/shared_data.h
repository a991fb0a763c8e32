// Locates ../shared/data for tests, which skip with a clear message when it
// is absent.
#pragma once

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/source_paths.h"

namespace pbert::testing {

inline std::string SharedData(const std::string& name) {
  return std::string(pbert::testing::SharedDataDir()) + "/" + name;
}

#define PBERT_REQUIRE_SHARED(name)                                      \
  do {                                                                  \
    if (!std::filesystem::exists(::pbert::testing::SharedData(name))) { \
      GTEST_SKIP() << "needs " << ::pbert::testing::SharedData(name)    \
                   << " (the shared data folder beside the checkout)";  \
    }                                                                   \
  } while (false)

}  // namespace pbert::testing
