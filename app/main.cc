#include "app/cli.h"
#include "app/commands.h"
#include "common/platform.h"

int main(int argc, char** argv) {
  // Before any BLAS call and before LibTorch starts its threads.
  pbert::TuneMalloc();
  pbert::TuneOpenBlasKernels();
  return pbert::app::CommandLine(pbert::app::AllCommands()).Run(argc, argv);
}
