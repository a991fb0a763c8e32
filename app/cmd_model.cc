#include <torch/torch.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/options.h"
#include "common/logging.h"
#include "common/status.h"
#include "model/checkpoint.h"

namespace pbert::app {
namespace {

absl::Status RunModel(const Args& args) {
  if (args.positional().size() != 1 || args.positional()[0] != "init") {
    return absl::InvalidArgumentError("expected 'model init'; see 'packed-bert model --help'");
  }
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, {{"seed", "run.seed"}}));
  RETURN_IF_ERROR(RefuseToOverwrite(args, args.Get("out")));
  torch::manual_seed(static_cast<uint64_t>(config.run.seed));
  model::BertForPreTraining bert(ToBertOptions(config.model));
  int64_t parameters = 0;
  for (const auto& p : bert->parameters()) parameters += p.numel();
  const std::string out = args.Get("out");
  RETURN_IF_ERROR(model::SaveSafetensors(
      *bert, out, {{"format", "pt"}, {"packed_bert_config", config::Dump(config)}}));
  logging::Get("model")->info("{} parameters, seed {}, written to {}", parameters, config.run.seed,
                              out);
  std::cout << out << "\n";
  return absl::OkStatus();
}

}  // namespace

Command ModelCommand() {
  Command command;
  command.name = "model";
  command.summary = "create model weights";
  command.usage = "model init --config FILE [--seed N] --out W.safetensors";
  command.details =
      "Writes a freshly initialised BertForPreTraining (normal(0, initializer_range) weights,\n"
      "zero biases, LayerNorm 1/0) as safetensors with Hugging Face parameter names; the\n"
      "effective config is kept in the file's metadata.";
  command.flags = {
      {"out", "FILE", "where to write the weights (.safetensors)", false, true},
      {"seed", "N", "initialisation seed (run.seed)"},
      OverwriteFlag(),
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunModel;
  return command;
}

}  // namespace pbert::app
