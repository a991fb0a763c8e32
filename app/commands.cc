#include "app/commands.h"

namespace pbert::app {
std::vector<Command> AllCommands() {
  return {
      PrepareCommand(),
      TokenizeCommand(),
      VerifyCommand(),
      ExportCommand(),
      PackCommand(),
      TrainCommand(),
      FinetuneCommand(),
      ScoreCommand(),
      ModelCommand(),
      LaunchCommand(),
      MlperfSummaryCommand(),
      PlotCommand(),
      ConfigCommand(),
  };
}

}  // namespace pbert::app
