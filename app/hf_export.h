// A trained model as a Hugging Face model folder: what
// BertForPreTraining.from_pretrained(OUT) and
// BertTokenizerFast.from_pretrained(OUT) load (docs/model.md, Hugging Face
// export).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/atomic_file.h"
#include "model/bert_options.h"
#include "tasks/task.h"

namespace torch::nn {
class Module;
}

namespace pbert::app {

struct HfExportOptions {
  std::string vocab;                      // the vocab.txt the model was trained with
  bool lower_case = true;                 // the tokenizer's do_lower_case (prepare.lower_case)
  Existing existing = Existing::kRefuse;  // an existing OUT
  // Hugging Face's model class (config.json "architectures"), its labels
  // in class order (id2label), its problem_type and whether it has a
  // pooler (whose weights are left out where it has none, as
  // save_pretrained leaves them): the task's (Task::Export).
  tasks::ExportHead head;
  // The fine-tuning task (config.json "finetuning_task", as transformers'
  // run_glue.py writes it); "" for none.
  std::string task;
};

// Writes the folder `out` whole or not at all: config.json (the shape of
// `options`, GELU, float32, the architecture and labels), model.safetensors
// (every parameter of `bert`, a BertForPreTraining of `options` or a
// fine-tuned model, under Hugging Face's names; the MLM
// decoder tied to the word embeddings is written once, as save_pretrained
// writes it), vocab.txt and tokenizer_config.json. The vocabulary must hold
// BERT's special tokens and at most options.vocab_size() tokens.
absl::Status ExportHuggingFace(const torch::nn::Module& bert, const model::BertOptions& options,
                               const HfExportOptions& export_options, const std::string& out);

}  // namespace pbert::app
