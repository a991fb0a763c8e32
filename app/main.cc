#include <cstring>

#include "app/cli.h"
#include "app/commands.h"
#include "common/platform.h"

// Before LibTorch's, OpenBLAS's and libgomp's initialisers
// (common/platform.h).
__attribute__((section(".preinit_array"),
               used)) static void (*const kCheckStart)(int, char**,
                                                       char**) = pbert::CheckStartEnvironment;

int main(int argc, char** argv) {
  // The commands that run training or evaluation steps wait passively
  // between OpenMP regions (common/platform.h); the others start once.
  if (argc > 1 && (std::strcmp(argv[1], "train") == 0 || std::strcmp(argv[1], "finetune") == 0 ||
                   std::strcmp(argv[1], "score") == 0)) {
    pbert::UsePassiveOpenMpWait(argv);
  }
  // Before any BLAS call and before LibTorch starts its threads.
  pbert::TuneMalloc();
  pbert::TuneOpenBlasKernels();
  return pbert::app::CommandLine(pbert::app::AllCommands()).Run(argc, argv);
}
