#include <ATen/Context.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "app/commands.h"
#include "app/config.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/status.h"
#include "formats/safetensors.h"
#include "model/bert.h"
#include "model/weights.h"

namespace pbert::app {
namespace {

// model convert IN OUT: any weight format to Hugging Face safetensors.
absl::Status Convert(const Args& args) {
  const std::string in = args.positional()[1], out = args.positional()[2];
  RETURN_IF_ERROR(CheckOutput(args, out));
  auto log = logging::Get("model");
  ASSIGN_OR_RETURN(model::Weights weights, model::ReadWeights(in));
  if (!weights.unknown.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        in, ": tensors with names no BERT mapping knows (they would be lost): ",
        absl::StrJoin(weights.unknown, ", "), "; docs/formats.md lists the names read"));
  }
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"converted_from", NameOf(weights.format)}};
  if (args.Has("config")) {
    // Through the model: a file that does not fit the config is refused.
    ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, {}));
    model::BertForPreTraining bert(config.model.bert);
    RETURN_IF_ERROR(model::LoadWeights(*bert, in));
    metadata["packed_bert_config"] = config::Dump(config);
    RETURN_IF_ERROR(model::SaveWeights(*bert, out, metadata));
  } else {
    RETURN_IF_ERROR(formats::WriteSafetensors(
        formats::NamedTensors(weights.tensors.begin(), weights.tensors.end()), out, metadata));
  }
  int64_t parameters = 0;
  for (const auto& [name, t] : weights.tensors) parameters += t.numel();
  log->info("{} ({}): {} tensors, {} parameters, {} skipped (optimizer state, counters, tied "
            "copies), written to {}",
            in, NameOf(weights.format), weights.tensors.size(), parameters, weights.skipped.size(), out);
  std::cout << out << "\n";
  return absl::OkStatus();
}

absl::Status RunModel(const Args& args) {
  const auto& words = args.positional();
  if (words.size() == 3 && words[0] == "convert") return Convert(args);
  if (words.size() != 1 || words[0] != "init") {
    return absl::InvalidArgumentError(
        "expected 'model init' or 'model convert IN OUT'; see 'packed-bert model --help'");
  }
  if (!args.Has("out")) return absl::InvalidArgumentError("model init needs --out FILE");
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, {{"seed", "run.seed"}}));
  RETURN_IF_ERROR(CheckOutput(args, args.Get("out")));
  at::manual_seed(static_cast<uint64_t>(config.run.seed));
  model::BertForPreTraining bert(config.model.bert);
  int64_t parameters = 0;
  for (const auto& p : bert->parameters()) parameters += p.numel();
  const std::string out = args.Get("out");
  RETURN_IF_ERROR(model::SaveWeights(
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
  command.summary = "create or convert model weights";
  command.usage =
      "model init --config FILE [--seed N] --out W.safetensors\n"
      "       model convert IN OUT.safetensors [--config FILE]";
  command.details =
      "init writes a freshly initialised BertForPreTraining (normal(0, initializer_range)\n"
      "weights, zero biases, LayerNorm 1/0) as safetensors with Hugging Face parameter names;\n"
      "the effective config is kept in the file's metadata.\n"
      "convert reads weights in any format train.init_checkpoint and score --weights accept\n"
      "(safetensors; a torch.save state dict, bare or under 'model', with Hugging Face or\n"
      "NVIDIA names; a TensorFlow checkpoint PREFIX or PREFIX.index) and writes them as\n"
      "Hugging Face safetensors, skipping optimizer state; with --config it also checks that\n"
      "they fit that model.";
  command.flags = {
      {"out", "FILE", "init: where to write the weights (.safetensors)"},
      {"seed", "N", "initialisation seed (run.seed)"},
      OverwriteFlag(),
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunModel;
  return command;
}

}  // namespace pbert::app
