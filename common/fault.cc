#include "common/fault.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace pbert {

void FaultPoint(const char* point, int64_t step, int rank) {
  static const char* spec = std::getenv("PBERT_FAULT");
  if (spec == nullptr || *spec == '\0') return;
  // Only the first attempt of a launch or torchrun job fails, so that a
  // restarted job can go on.
  static const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart != nullptr && std::string(restart) != "0") return;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  int64_t at_step = -1, at_rank = 0;
  if (parts.size() < 2 || parts[0] != point || !absl::SimpleAtoi(parts[1], &at_step)) return;
  if (parts.size() > 2 && !absl::SimpleAtoi(parts[2], &at_rank)) return;
  int signal = SIGKILL;
  if (parts.size() > 3) {
    signal = parts[3] == "TERM"   ? SIGTERM
             : parts[3] == "INT"  ? SIGINT
             : parts[3] == "STOP" ? SIGSTOP  // a hung process
             : parts[3] == "SEGV" ? SIGSEGV  // a crash
                                  : SIGKILL;
  }
  if (at_step == step && at_rank == rank) ::kill(::getpid(), signal);
}

}  // namespace pbert
