// The fine-tuning heads over a packed BERT, named and nested as Hugging
// Face's BertForQuestionAnswering and BertForSequenceClassification, so
// their weights move both ways: a span head (start and end logits over
// each sequence's own tokens) and a classifier on each sequence's [CLS]
// through the pooler. A packed row gives each of its sequences the logits
// it gets alone (tests/model/task_heads_test.cc).
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <string>

#include "model/bert.h"

namespace pbert::model {

// A head's product in fp32 (or the model's wider type) whatever autocast
// runs (in bf16 a score or a logit would keep three significant digits): a
// product of a few columns beside the encoder's.
at::Tensor Fp32Linear(const torch::nn::Linear& linear, const at::Tensor& x);

// Start and end logits of each sequence's tokens, -inf at padding slots.
struct SpanLogitsTensor {
  at::Tensor start, end;  // [N,L]
};

class BertForQuestionAnsweringImpl : public torch::nn::Cloneable<BertForQuestionAnsweringImpl> {
 public:
  explicit BertForQuestionAnsweringImpl(const BertOptions& options);
  void reset() override;
  // Over each sequence's own tokens (Inputs::sequence_token).
  SpanLogitsTensor forward(const Inputs& inputs);
  std::map<std::string, int64_t> FileRows() const;

  BertOptions options;
  BertModel bert{nullptr};
  torch::nn::Linear qa_outputs{nullptr};
};
TORCH_MODULE(BertForQuestionAnswering);

class BertForSequenceClassificationImpl
    : public torch::nn::Cloneable<BertForSequenceClassificationImpl> {
 public:
  // `labels`: classes, or 1 for a regression (STS-B).
  BertForSequenceClassificationImpl(const BertOptions& options, int64_t labels);
  void reset() override;
  // [B,D,labels]: each sequence slot's logits (or score), from its [CLS].
  at::Tensor forward(const Inputs& inputs);
  std::map<std::string, int64_t> FileRows() const;

  BertOptions options;
  int64_t labels;
  BertModel bert{nullptr};
  torch::nn::Linear classifier{nullptr};
};
TORCH_MODULE(BertForSequenceClassification);

// Copies the encoder of one model into another's `bert` (same options):
// every parameter under the same name.
void CopyEncoder(const BertModel& from, BertModel& to);

}  // namespace pbert::model
