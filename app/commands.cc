#include "app/commands.h"

namespace pbert::app {
namespace {

// A subcommand whose issue has not landed yet: listed in --help, and running
// it says so with exit code 2.
Command Planned(std::string name, std::string summary, std::string usage) {
  return Command{std::move(name), std::move(summary), std::move(usage), "", {}, nullptr};
}

}  // namespace

std::vector<Command> AllCommands() {
  return {
      PrepareCommand(),
      TokenizeCommand(),
      VerifyCommand(),
      ExportCommand(),
      PackCommand(),
      TrainCommand(),
      ScoreCommand(),
      ModelCommand(),
      Planned("launch", "start N local training processes", "launch --nproc N -- train ..."),
      PlotCommand(),
      ConfigCommand(),
  };
}

}  // namespace pbert::app
