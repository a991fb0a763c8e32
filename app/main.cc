#include <sys/stat.h>

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
  // What the commands write (a run's folder and files, stores, exports) is
  // never writable by the group or other users, whatever the umask: a file
  // another user could change is one a run or a resume could be turned by.
  ::umask(::umask(0) | S_IWGRP | S_IWOTH);
  // Before any BLAS call and before LibTorch starts its threads.
  pbert::TuneMalloc();
  pbert::TuneOpenBlasKernels();
  return pbert::app::CommandLine(pbert::app::AllCommands()).Run(argc, argv);
}
