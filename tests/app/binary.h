// Runs the real `packed-bert` binary as a user would, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/source_paths.h"

namespace pbert::app::testing {

struct Result {
  int exit_code;  // -1 if killed by a signal
  std::string out;
  std::string err;
};

// Runs a shell command; its stdout, stderr (the whole command's) and exit code.
inline Result RunShell(const std::string& shell_command) {
  // ctest runs tests in parallel processes: one stderr file per test.
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("pbert_cli_") + test->test_suite_name() + "_" + test->name();
  std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests
  const std::string err_path = std::filesystem::temp_directory_path() / (name + ".stderr");
  // The CLI's tests are the CPU's: on a GPU machine the GPU is hidden, so
  // that run.device auto means the CPU there too (tests/train/cuda_test.cc
  // covers the GPU). A command may still set CUDA_VISIBLE_DEVICES itself.
  std::string command =
      "{ export CUDA_VISIBLE_DEVICES=; " + shell_command + "; } 2>" + err_path + " </dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  int status = pclose(pipe);
  std::stringstream err;
  {
    std::ifstream err_file(err_path);
    err << err_file.rdbuf();
  }
  std::error_code ignored;
  std::filesystem::remove(err_path, ignored);  // nothing left in the temporary folder
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err.str()};
}

// `arguments` go to the binary through the shell; `prefix` (e.g. an
// environment assignment) comes before it. A binary killed by a signal
// gives exit code -1.
inline Result RunBinary(const std::string& arguments, const std::string& prefix = "") {
  // exec: the shell's status is the binary's, signals included.
  return RunShell(prefix + " exec " + std::string(pbert::testing::BinaryPath()) + " " + arguments);
}

inline std::string WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace pbert::app::testing
