#include <ATen/Context.h>

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "app/commands.h"
#include "app/config.h"
#include "app/hf_export.h"
#include "common/config.h"
#include "common/folders.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/store.h"
#include "data/tokenizer.h"
#include "formats/safetensors.h"
#include "model/bert.h"
#include "model/weights.h"
#include "tasks/pretraining.h"
#include "tasks/tasks.h"
#include "train/checkpointer.h"

namespace pbert::app {
namespace {

// model convert IN OUT: any weight format to Hugging Face safetensors.
absl::Status Convert(const Args& args) {
  const std::string in = args.positional()[1], out = args.positional()[2];
  RETURN_IF_ERROR(CheckOutput(args, out, OutputKind::kWeightsFile));
  auto log = logging::Get("model");
  ASSIGN_OR_RETURN(model::Weights weights, model::ReadWeights(in));
  if (!weights.unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(in, ": tensors with names no BERT mapping knows (they would be lost): ",
                     NameList(weights.unknown), "; docs/formats.md lists the names read"));
  }
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"converted_from", NameOf(weights.format)}};
  if (args.Has("config")) {
    // Through the model: a file that does not fit the config is refused.
    ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, {}));
    model::BertForPreTraining bert(config.model.bert);
    RETURN_IF_ERROR(model::LoadWeights(*bert, in));
    metadata["packed_bert_config"] = config::Dump(config);
    RETURN_IF_ERROR(model::SaveWeights(*bert, out, metadata, ExistingOutput(args)));
  } else {
    RETURN_IF_ERROR(formats::WriteSafetensors(
        formats::NamedTensors(weights.tensors.begin(), weights.tensors.end()), out, metadata,
        ExistingOutput(args)));
  }
  int64_t parameters = 0;
  for (const auto& [name, t] : weights.tensors) parameters += t.numel();
  log->info(
      "{} ({}): {} tensors, {} parameters, {} skipped (optimizer state, counters, tied "
      "copies), written to {}",
      in, NameOf(weights.format), weights.tensors.size(), parameters, weights.skipped.size(), out);
  std::cout << out << "\n";
  return absl::OkStatus();
}

// The vocabulary `vocab` must be the one the run trained with: the same
// size is not enough (a cased vocabulary of BERT's size gives other ids).
// Where the run's store is at hand, its vocabulary checksum decides; else
// the vocabulary its config names, where that file is at hand.
absl::Status CheckVocabularyOfRun(const std::string& vocab, const ExperimentConfig& config) {
  ASSIGN_OR_RETURN(const data::Vocabulary given, data::Vocabulary::Load(vocab));
  std::error_code error;
  std::string source;
  uint64_t trained = 0;
  if (!config.data.store.empty() &&
      std::filesystem::exists(config.data.store + "/store.json", error)) {
    absl::StatusOr<data::InstanceStore> store = data::InstanceStore::Open(config.data.store);
    if (!store.ok()) return absl::OkStatus();  // nothing to compare with
    source = absl::StrCat("the store ", config.data.store, " it trained on");
    trained = store->info().vocab_checksum;
    if (trained == 0) return absl::OkStatus();  // a store that does not say
  } else if (!config.prepare.vocab.empty() &&
             std::filesystem::is_regular_file(config.prepare.vocab, error)) {
    absl::StatusOr<data::Vocabulary> own = data::Vocabulary::Load(config.prepare.vocab);
    if (!own.ok()) return absl::OkStatus();
    source = absl::StrCat("its config's prepare.vocab ", config.prepare.vocab);
    trained = own->checksum();
  } else {
    return absl::OkStatus();
  }
  if (trained == given.checksum()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the vocabulary ", vocab, " is not the one the model was trained with (", source,
                   " was made with another: checksum ", absl::StrFormat("%016x", trained),
                   ", this one ", absl::StrFormat("%016x", given.checksum()),
                   "); give the vocab.txt of its training, or the model's tokens get other ids"));
}

// model export-hf CHECKPOINT OUT: a Hugging Face model folder.
absl::Status ExportHf(const Args& args) {
  const std::string in = args.positional()[1], out = WithoutTrailingSlash(args.positional()[2]);
  // A checkpoint folder of train brings the config it was trained with; it
  // is held while it is read, so that its run's rotation leaves it.
  ASSIGN_OR_RETURN(const train::CheckpointHold hold, train::CheckpointHold::Take(in));
  std::error_code error;
  const std::string saved = in + "/config.yaml";
  const bool has_saved = std::filesystem::is_directory(in, error) && std::filesystem::exists(saved);
  if (!args.Has("config") && !has_saved) {
    return absl::InvalidArgumentError(absl::StrCat(
        in,
        " is no checkpoint folder of train (no config.yaml in it): give the model's shape "
        "with --config FILE"));
  }
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, {}, has_saved ? saved : ""));
  // A fine-tuning run's checkpoint holds a task model, which its run
  // exported itself when it finished (RUN_DIR/model).
  const std::unique_ptr<tasks::Task> pretraining = tasks::PretrainingOn({}, config.model.mlm_loss);
  if (const std::string task = train::TaskOfWeights(in);
      pretraining->OriginOf(task) == tasks::WeightsOrigin::kOtherTask) {
    return absl::InvalidArgumentError(absl::StrCat(
        in, " is a checkpoint of a ", task, " fine-tuning run: model export-hf exports "
        "pretraining checkpoints; a fine-tuning run writes its Hugging Face model itself, into "
        "RUN_DIR/model, when it finishes (finetune --resume makes it if it is missing)"));
  }
  HfExportOptions options;
  options.head = pretraining->Export();
  options.vocab = args.Get("vocab", config.prepare.vocab);
  options.lower_case = config.prepare.lower_case;
  options.existing = ExistingOutput(args);
  if (options.vocab.empty()) {
    return absl::InvalidArgumentError(
        "model export-hf needs the vocabulary the model was trained with: --vocab vocab.txt (or "
        "prepare.vocab in the config)");
  }
  RETURN_IF_ERROR(CheckVocabularyOfRun(options.vocab, config));
  RETURN_IF_ERROR(CheckOutput(args, out, OutputKind::kHfFolder));
  model::BertForPreTraining bert(config.model.bert);
  RETURN_IF_ERROR(train::LoadVerifiedWeights(in, *bert));
  RETURN_IF_ERROR(ExportHuggingFace(*bert, config.model.bert, options, out));
  logging::Get("model")->info(
      "{}: config.json, model.safetensors, vocab.txt and tokenizer_config.json for "
      "transformers' BertForPreTraining.from_pretrained and BertTokenizerFast.from_pretrained",
      out);
  std::cout << out << "\n";
  return absl::OkStatus();
}

absl::Status RunModel(const Args& args) {
  const auto& words = args.positional();
  if (words.size() == 3 && words[0] == "convert") return Convert(args);
  if (words.size() == 3 && words[0] == "export-hf") return ExportHf(args);
  if (words.size() != 1 || words[0] != "init") {
    return absl::InvalidArgumentError(
        "expected 'model init', 'model convert IN OUT' or 'model export-hf CHECKPOINT OUT'; see "
        "'packed-bert model --help'");
  }
  if (!args.Has("out")) return absl::InvalidArgumentError("model init needs --out FILE");
  ASSIGN_OR_RETURN(ExperimentConfig config, LoadConfig(args, {{"seed", "run.seed"}}));
  RETURN_IF_ERROR(CheckOutput(args, args.Get("out"), OutputKind::kWeightsFile));
  at::manual_seed(static_cast<uint64_t>(config.run.seed));
  model::BertForPreTraining bert(config.model.bert);
  int64_t parameters = 0;
  for (const auto& p : bert->parameters()) parameters += p.numel();
  const std::string out = args.Get("out");
  RETURN_IF_ERROR(model::SaveWeights(
      *bert, out, {{"format", "pt"}, {"packed_bert_config", config::Dump(config)}},
      ExistingOutput(args)));
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
      "       model convert IN OUT.safetensors [--config FILE]\n"
      "       model export-hf CHECKPOINT OUT [--vocab vocab.txt] [--config FILE]";
  command.details =
      "init writes a freshly initialised BertForPreTraining (normal(0, initializer_range)\n"
      "weights, zero biases, LayerNorm 1/0) as safetensors with Hugging Face parameter names;\n"
      "the effective config is kept in the file's metadata.\n"
      "convert reads weights in any format train.init_checkpoint and score --weights accept\n"
      "(safetensors; a torch.save state dict, bare or under 'model', with Hugging Face or\n"
      "NVIDIA names; a TensorFlow checkpoint PREFIX or PREFIX.index) and writes them as\n"
      "Hugging Face safetensors, skipping optimizer state; with --config it also checks that\n"
      "they fit that model.\n"
      "export-hf writes the folder OUT that transformers loads with\n"
      "BertForPreTraining.from_pretrained(OUT) and BertTokenizerFast.from_pretrained(OUT):\n"
      "config.json, model.safetensors, vocab.txt, tokenizer_config.json. CHECKPOINT is a\n"
      "checkpoint folder of train (its config.yaml gives the shape) or, with --config, any\n"
      "weights file.";
  command.flags = {
      {"out", "FILE", "init: where to write the weights (.safetensors)"},
      {"seed", "N", "initialisation seed (run.seed)"},
      {"vocab", "FILE", "export-hf: the vocab.txt the model was trained with (prepare.vocab)"},
      OverwriteFlag(absl::StrCat("(init, convert) ", OutputKindName(OutputKind::kWeightsFile),
                                 " or (export-hf) ", OutputKindName(OutputKind::kHfFolder))),
  };
  for (Flag f : ConfigFlags()) command.flags.push_back(f);
  command.run = RunModel;
  return command;
}

}  // namespace pbert::app
