// The config's finetune section: which task, its files, its features and
// the fine-tuning run's length (docs/finetuning.md). The optimizer's rate,
// decay and moments are the optim section's; the packing is the packing
// section's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/choices.h"
#include "common/config_field.h"
#include "tasks/squad.h"

namespace pbert::tasks {

// "squad", "ner", "multilabel", then the GLUE tasks (tasks/glue.h).
std::vector<std::string> TaskNames();

enum class FinetuneOptimizer {
  kAdamW,  // Adam with decoupled weight decay (Google's and Hugging Face's fine-tuning)
  kLamb,   // the same with LAMB's trust ratio per layer
};
inline constexpr Choice<FinetuneOptimizer> kFinetuneOptimizers[] = {
    {"adamw", FinetuneOptimizer::kAdamW}, {"lamb", FinetuneOptimizer::kLamb}};
constexpr ChoiceList<FinetuneOptimizer> ChoicesOf(FinetuneOptimizer) { return kFinetuneOptimizers; }

struct FinetuneConfig {
  std::string task = "squad";
  std::string train_file;  // train-v1.1.json, a GLUE task's train.tsv, CoNLL's train.txt, ...
  std::string eval_file;                // dev-v1.1.json, or dev.tsv (MNLI: dev_matched.tsv)
  std::string eval_mismatched_file;     // MNLI: dev_mismatched.tsv, scored beside it
  std::string predict_file;             // a file without labels to predict (test.tsv)
  std::string predict_mismatched_file;  // MNLI: test_mismatched.tsv
  std::string init_checkpoint;          // the pretrained weights (any format `train` reads)
  int max_seq_length = 0;               // 0: the task's (384 for SQuAD, 128 for GLUE)
  double epochs = 2;
  int64_t batch_size = 32;  // sequences per optimizer step (rows: this over the packing factor)
  int64_t micro_batch_rows = 0;  // rows per forward pass; 0: the step's rows, shared by the ranks
  int64_t eval_batch_rows = 64;  // rows per forward pass in evaluation
  double warmup_proportion = 0.1;
  FinetuneOptimizer optimizer = FinetuneOptimizer::kAdamW;
  int64_t log_every_steps = 20;
  int64_t checkpoint_every_steps = 0;  // 0: at the end of each epoch only
  std::string labels;      // ner, multilabel: the label names, comma-separated, in class order
  double threshold = 0.5;  // multilabel: the probability from which a label is predicted
  SquadOptions squad;

  template <class V>
  void Visit(V& v) {
    v.Field("task", &task,
            "squad; ner (CoNLL files); multilabel (GoEmotions files); or a GLUE task: cola, sst2, "
            "mrpc, stsb, qqp, mnli, qnli, rte or wnli",
            config::OneOf(TaskNames()));
    v.Field("train_file", &train_file, "the task's training file as distributed");
    v.Field("eval_file", &eval_file,
            "the task's dev file as distributed (MNLI: dev_matched.tsv), scored after each epoch");
    v.Field("eval_mismatched_file", &eval_mismatched_file,
            "MNLI: dev_mismatched.tsv, scored beside eval_file (its metrics named mismatched_*)");
    v.Field("predict_file", &predict_file,
            "a file without labels (SQuAD questions, a GLUE test.tsv) that the finished model "
            "predicts into RUN_DIR/predict/ (--evaluate: into --output's predict/): SQuAD's "
            "predictions.json and nbest_predictions.json, GLUE's submission file");
    v.Field("predict_mismatched_file", &predict_mismatched_file,
            "MNLI: test_mismatched.tsv, predicted beside predict_file (MNLI-mm.tsv)");
    v.Field("init_checkpoint", &init_checkpoint,
            "pretrained weights: a train checkpoint, .safetensors, Hugging Face .bin/.pt, "
            "TensorFlow checkpoint");
    v.Field("max_seq_length", &max_seq_length,
            "tokens per sequence; 0 = 384 (SQuAD), 128 (the others)",
            config::InRange(0, 4096));
    v.Field("epochs", &epochs, "passes over the training features", config::InRange(1e-6, 1e4));
    v.Field("batch_size", &batch_size, "sequences per optimizer step",
            config::InRange<int64_t>(1, 1 << 20));
    v.Field("micro_batch_rows", &micro_batch_rows,
            "rows per forward and backward pass, the step's micro-batches taken by the ranks in "
            "turn; 0 = the step's rows shared evenly by the ranks, one pass each",
            config::InRange<int64_t>(0, 1 << 20));
    v.Field("eval_batch_rows", &eval_batch_rows, "rows per forward pass in evaluation",
            config::InRange<int64_t>(1, 1 << 20));
    v.Field("warmup_proportion", &warmup_proportion,
            "share of the steps that warms the rate up linearly (it then decays linearly to 0)",
            config::InRange(0.0, 1.0));
    v.Field("optimizer", &optimizer,
            "adamw: Adam with decoupled weight decay; lamb: with LAMB's trust ratio");
    v.Field("log_every_steps", &log_every_steps, "steps between progress lines",
            config::InRange<int64_t>(1, int64_t{1} << 30));
    v.Field("checkpoint_every_steps", &checkpoint_every_steps,
            "steps between checkpoints; 0 = at the end of each epoch",
            config::InRange<int64_t>(0, int64_t{1} << 30));
    v.Field("labels", &labels,
            "ner and multilabel: the label names in class order, comma-separated; empty = ner: "
            "the training file's tags (CoNLL-2003's nine in their usual order where they are "
            "among them); multilabel: labels.txt or emotions.txt beside the files");
    v.Field("threshold", &threshold,
            "multilabel: the probability from which a label is predicted (F1 and predictions)",
            config::InRange(0.0, 1.0));
    v.Include(&squad);
  }

  bool is_squad() const { return task == "squad"; }
  int SequenceLength() const {
    return max_seq_length > 0 ? max_seq_length : (is_squad() ? 384 : 128);
  }
};

}  // namespace pbert::tasks
