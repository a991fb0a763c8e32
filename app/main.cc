#include "app/cli.h"
#include "app/commands.h"

int main(int argc, char** argv) {
  return pbert::app::CommandLine(pbert::app::AllCommands()).Run(argc, argv);
}
