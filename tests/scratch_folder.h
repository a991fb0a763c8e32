// A fresh, empty folder for the running test. ctest runs every test as its
// own process, in parallel, so tests that shared a folder would remove each
// other's files: the folder is named after the test's suite and name.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace pbert::testing {

// TEMP/pbert_SUITE_TEST, emptied and made; the fixture removes it in
// TearDown.
inline std::filesystem::path ScratchFolder() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("pbert_") + test->test_suite_name() + "_" + test->name();
  std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace pbert::testing
