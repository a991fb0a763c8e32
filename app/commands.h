// The subcommands of `packed-bert`, one factory per file.
#pragma once

#include <vector>

#include "app/cli.h"

namespace pbert::app {

Command ConfigCommand();
Command PackCommand();
Command ModelCommand();
Command ScoreCommand();
Command TokenizeCommand();
Command PrepareCommand();
Command VerifyCommand();
Command ExportCommand();
Command TrainCommand();
Command FinetuneCommand();
Command PlotCommand();
Command LaunchCommand();
Command MlperfSummaryCommand();

// Every subcommand, in the order `packed-bert --help` lists them.
std::vector<Command> AllCommands();

}  // namespace pbert::app
