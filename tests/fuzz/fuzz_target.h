// The readers' fuzz targets: each one feeds any bytes to a reader of files
// that come from outside (docs/building.md, "Fuzzing"). The property: a
// status or a value, never a crash, a hang, an allocation past the limit or
// a sanitizer report. A target file says
//
//   PBERT_FUZZ_TARGET(squad) { ... input ...; return read_whole; }
//
// and is linked two ways: with libFuzzer (scripts/fuzz: clang, coverage
// guided, tests/fuzz/libfuzzer_main.cc) and into fuzz_replay (every build:
// the seed corpus and seeded mutations of it, tests/fuzz/replay_main.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace pbert::fuzz {

// True when the input was read whole (a seed must be; fuzz_replay checks).
using Target = bool (*)(absl::string_view input);

struct Registration {
  Registration(const char* name, Target target);
};

// Every target linked into this program, by name.
const std::vector<std::pair<std::string, Target>>& Targets();

// Writes `bytes` to `name` in this process's scratch folder (made once,
// removed at exit) and returns its path: the readers read files.
std::string WriteInput(absl::string_view name, absl::string_view bytes);

// The parts of an input that stands for several files: each part but the
// last is a 4-byte little-endian length and that many bytes (cut at the
// input's end); the last part is the rest. Always `count` parts.
std::vector<absl::string_view> Parts(absl::string_view input, int count);

// The inverse of Parts, for seeds (tests/fuzz/make_seeds.py writes the same).
std::string JoinParts(const std::vector<std::string>& parts);

// The first byte of an input as a choice among `count` (0 for an empty
// input), and the input without it.
int TakeChoice(absl::string_view* input, int count);

}  // namespace pbert::fuzz

#define PBERT_FUZZ_TARGET(name)                                                               \
  static bool PbertFuzz_##name(absl::string_view input);                                      \
  static const ::pbert::fuzz::Registration pbert_fuzz_registration_##name(#name,              \
                                                                          &PbertFuzz_##name); \
  static bool PbertFuzz_##name(absl::string_view input)
