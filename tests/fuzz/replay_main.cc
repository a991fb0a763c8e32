// fuzz_replay: the fuzz targets without libFuzzer, in every build, so that
// CI runs each one on its seed corpus (tests/fuzz/corpus/TARGET) and on
// seeded mutations of it. A crash, a sanitizer report or a hang fails the
// test, and so does a seed the target does not read whole (a seed that
// the reader refuses would test its first check alone). What scripts/fuzz
// found is replayed with --refused-too (tests/fuzz/findings/TARGET).
//
//   fuzz_replay TARGET FILE_OR_FOLDER... [--mutations N] [--refused-too]
//   fuzz_replay --list
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "spdlog/spdlog.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/mutate.h"

namespace {

namespace fs = std::filesystem;

int Usage() {
  std::fprintf(stderr,
               "usage: fuzz_replay TARGET FILE_OR_FOLDER... [--mutations N] [--refused-too]\n"
               "       fuzz_replay --list\n");
  return 2;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::off);
  const auto& targets = pbert::fuzz::Targets();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--list") {
    for (const auto& [name, target] : targets) std::printf("%s\n", name.c_str());
    return 0;
  }
  int mutations = 0;
  bool refused_too = false;
  std::vector<std::string> paths;
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k] == "--refused-too") {
      refused_too = true;
    } else if (args[k] == "--mutations" && k + 1 < args.size()) {
      mutations = std::atoi(args[++k].c_str());
    } else {
      paths.push_back(args[k]);
    }
  }
  if (paths.size() < 2) return Usage();
  auto found = std::find_if(targets.begin(), targets.end(),
                            [&](const auto& entry) { return entry.first == paths[0]; });
  if (found == targets.end()) {
    std::fprintf(stderr, "fuzz_replay: no target '%s' (--list names them)\n", paths[0].c_str());
    return 2;
  }
  std::vector<fs::path> files;
  for (size_t k = 1; k < paths.size(); ++k) {
    if (fs::is_directory(paths[k])) {
      for (const auto& entry : fs::directory_iterator(paths[k])) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(paths[k])) {
      files.push_back(paths[k]);
    } else {
      std::fprintf(stderr, "fuzz_replay: %s is neither a file nor a folder\n", paths[k].c_str());
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay: no input in the folders given\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  const auto start = std::chrono::steady_clock::now();
  // Seeded: a run fails the same way again.
  std::mt19937_64 rng(20261205);
  int64_t runs = 0, read = 0;
  for (const auto& file : files) {
    const std::string seed = ReadAll(file);
    if (!found->second(seed) && !refused_too) {
      std::fprintf(stderr, "fuzz_replay: %s: the %s target does not read this seed whole\n",
                   file.c_str(), found->first.c_str());
      return 1;
    }
    ++runs;
    std::string mutated = seed;
    for (int m = 0; m < mutations; ++m) {
      // Mutations pile up on one another, returning to the seed now and then.
      mutated = pbert::testing::Mutate(m % 8 == 0 ? seed : mutated, rng);
      read += found->second(mutated);
      ++runs;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu inputs, %lld runs in %.1f s (%lld mutations read whole), no crash\n",
              found->first.c_str(), files.size(), static_cast<long long>(runs), seconds,
              static_cast<long long>(read));
  return 0;
}
