#include "tests/fuzz/fuzz_target.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace pbert::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<std::pair<std::string, Target>>& MutableTargets() {
  static auto* targets = new std::vector<std::pair<std::string, Target>>();
  return *targets;
}

// The scratch folder, made at the first write and removed at exit: on
// /dev/shm where it exists (a fuzzer writes a file per run).
struct Scratch {
  Scratch() {
    std::error_code ec;
    fs::path base =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    path = base / absl::StrCat("pbert-fuzz-", getpid());
    fs::create_directories(path, ec);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

}  // namespace

Registration::Registration(const char* name, Target target) {
  MutableTargets().emplace_back(name, target);
}

const std::vector<std::pair<std::string, Target>>& Targets() { return MutableTargets(); }

std::string WriteInput(absl::string_view name, absl::string_view bytes) {
  static Scratch scratch;
  const fs::path path = scratch.path / std::string(name);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    // A target that cannot write its input would test nothing.
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path.string();
}

std::vector<absl::string_view> Parts(absl::string_view input, int count) {
  std::vector<absl::string_view> parts;
  for (int k = 0; k + 1 < count; ++k) {
    uint32_t length = 0;
    for (int b = 0; b < 4 && !input.empty(); ++b) {
      length |= uint32_t{static_cast<uint8_t>(input.front())} << (8 * b);
      input.remove_prefix(1);
    }
    const size_t take = std::min<size_t>(length, input.size());
    parts.push_back(input.substr(0, take));
    input.remove_prefix(take);
  }
  parts.push_back(input);
  return parts;
}

std::string JoinParts(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k + 1 < parts.size()) {
      const uint32_t length = static_cast<uint32_t>(parts[k].size());
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>(length >> (8 * b)));
    }
    out += parts[k];
  }
  return out;
}

int TakeChoice(absl::string_view* input, int count) {
  if (input->empty()) return 0;
  const int choice = static_cast<uint8_t>(input->front()) % count;
  input->remove_prefix(1);
  return choice;
}

}  // namespace pbert::fuzz
