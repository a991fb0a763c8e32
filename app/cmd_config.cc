#include <iostream>

#include "app/commands.h"
#include "app/config.h"
#include "common/config.h"
#include "common/status.h"

namespace pbert::app {

Command ConfigCommand() {
  Command command;
  command.name = "config";
  command.summary = "print the effective config (defaults < --config file < --set)";
  command.usage = "config dump [--config FILE] [--set SECTION.KEY=VALUE ...]";
  command.flags = ConfigFlags();
  command.run = [](const Args& args) -> absl::Status {
    if (args.positional().size() != 1 || args.positional()[0] != "dump") {
      return absl::InvalidArgumentError("expected 'config dump'; see 'packed-bert config --help'");
    }
    ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args));
    std::cout << config::Dump(config);
    return absl::OkStatus();
  };
  return command;
}

}  // namespace pbert::app
