#include "app/hf_export.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "data/tokenizer.h"
#include "formats/safetensors.h"
#include "model/weights.h"
#include "nlohmann/json.hpp"

namespace pbert::app {
namespace {

// transformers' BertConfig, with the keys its from_pretrained reads.
nlohmann::ordered_json ConfigJson(const model::BertOptions& o, const HfExportOptions& e) {
  nlohmann::ordered_json c;
  c["architectures"] = {e.head.architecture};
  if (!e.task.empty()) c["finetuning_task"] = e.task;
  c["model_type"] = "bert";
  c["vocab_size"] = o.vocab_size();
  c["hidden_size"] = o.hidden_size();
  c["num_hidden_layers"] = o.num_layers();
  c["num_attention_heads"] = o.num_heads();
  c["intermediate_size"] = o.intermediate_size();
  c["hidden_act"] = "gelu";  // exact GELU, as the model computes it
  c["hidden_dropout_prob"] = o.hidden_dropout();
  c["attention_probs_dropout_prob"] = o.attention_dropout();
  c["max_position_embeddings"] = o.max_position_embeddings();
  c["type_vocab_size"] = o.type_vocab_size();
  c["initializer_range"] = o.initializer_range();
  c["layer_norm_eps"] = o.layer_norm_eps();
  c["pad_token_id"] = 0;
  c["position_embedding_type"] = "absolute";
  c["tie_word_embeddings"] = true;
  c["torch_dtype"] = "float32";
  if (e.head.problem_type == "regression") {
    c["num_labels"] = 1;
  } else if (!e.head.labels.empty()) {
    nlohmann::ordered_json id2label, label2id;
    for (size_t i = 0; i < e.head.labels.size(); ++i) {
      id2label[std::to_string(i)] = e.head.labels[i];
      label2id[e.head.labels[i]] = i;
    }
    c["id2label"] = id2label;
    c["label2id"] = label2id;
  }
  if (!e.head.problem_type.empty()) c["problem_type"] = e.head.problem_type;
  return c;
}

nlohmann::ordered_json TokenizerConfigJson(const model::BertOptions& o, bool lower_case) {
  nlohmann::ordered_json t;
  t["tokenizer_class"] = "BertTokenizer";
  t["do_lower_case"] = lower_case;
  t["strip_accents"] = nullptr;  // follows do_lower_case, as BERT's tokenization.py
  t["tokenize_chinese_chars"] = true;
  t["unk_token"] = "[UNK]";
  t["sep_token"] = "[SEP]";
  t["pad_token"] = "[PAD]";
  t["cls_token"] = "[CLS]";
  t["mask_token"] = "[MASK]";
  t["model_max_length"] = o.max_position_embeddings();
  return t;
}

}  // namespace

absl::Status ExportHuggingFace(const torch::nn::Module& bert, const model::BertOptions& options,
                               const HfExportOptions& export_options, const std::string& out) {
  ASSIGN_OR_RETURN(data::Vocabulary vocab, data::Vocabulary::Load(export_options.vocab));
  if (vocab.size() > options.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        export_options.vocab, " holds ", vocab.size(), " tokens, more than the model's ",
        "model.vocab_size ", options.vocab_size(), ": give the vocabulary it was trained with"));
  }
  if (vocab.size() < options.vocab_size()) {
    logging::Get("model")->warn(
        "{} holds {} tokens for a model of vocab_size {}: the tokenizer gives no id from {} up",
        export_options.vocab, vocab.size(), options.vocab_size(), vocab.size());
  }
  ASSIGN_OR_RETURN(std::string vocab_text, ReadFile(export_options.vocab));
  ASSIGN_OR_RETURN(AtomicFolderWriter folder, AtomicFolderWriter::Create(out));
  const std::string& dir = folder.temp_path();
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/config.json",
                                      ConfigJson(options, export_options).dump(2) + "\n"));
  // A class without a pooler (add_pooling_layer False): its weights are
  // left out, as save_pretrained leaves them.
  const bool no_pooler = !export_options.head.pooler;
  formats::NamedTensors named;
  for (auto& [name, view] : model::FileTensors(bert)) {
    if (no_pooler && absl::StartsWith(name, "bert.pooler.")) continue;
    named.emplace_back(name, view);
  }
  RETURN_IF_ERROR(formats::WriteSafetensors(named, dir + "/model.safetensors", {{"format", "pt"}}));
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/vocab.txt", vocab_text));
  RETURN_IF_ERROR(
      WriteFileAtomically(dir + "/tokenizer_config.json",
                          TokenizerConfigJson(options, export_options.lower_case).dump(2) + "\n"));
  return folder.Commit(export_options.existing);
}

}  // namespace pbert::app
