#include "model/task_heads.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>

#include <limits>

#include "model/dropout.h"

namespace pbert::model {

namespace nn = torch::nn;

void InitBertWeights(nn::Module& module, double initializer_range) {
  at::NoGradGuard no_grad;
  for (auto& m : module.modules(/*include_self=*/false)) {
    if (auto* linear = m->as<nn::Linear>()) {
      linear->weight.normal_(0.0, initializer_range);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = m->as<nn::Embedding>()) {
      embedding->weight.narrow(0, 0, embedding->options.num_embeddings())
          .normal_(0.0, initializer_range);
    } else if (auto* norm = m->as<nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
}

namespace {

// The padding rows of the word embeddings (options.vocab_padding) zero.
void ZeroPaddingRows(BertModel& bert) {
  at::NoGradGuard no_grad;
  at::Tensor& words = bert->embeddings->word_embeddings->weight;
  const int64_t v = bert->options.vocab_size();
  words.narrow(0, v, words.size(0) - v).zero_();
}

std::map<std::string, int64_t> WordRows(const BertOptions& options) {
  if (options.padded_vocab_size() == options.vocab_size()) return {};
  return {{"bert.embeddings.word_embeddings.weight", options.vocab_size()}};
}

}  // namespace

BertForQuestionAnsweringImpl::BertForQuestionAnsweringImpl(const BertOptions& options)
    : options(options) {
  reset();
}

void BertForQuestionAnsweringImpl::reset() {
  bert = register_module("bert", BertModel(options));
  qa_outputs = register_module("qa_outputs", nn::Linear(options.hidden_size(), 2));
  InitBertWeights(*this, options.initializer_range());
  ZeroPaddingRows(bert);
}

std::map<std::string, int64_t> BertForQuestionAnsweringImpl::FileRows() const {
  return WordRows(options);
}

SpanLogitsTensor BertForQuestionAnsweringImpl::forward(const Inputs& inputs) {
  const at::Tensor hidden = bert(inputs).reshape({-1, options.hidden_size()});
  // The head on each sequence's own tokens only: [N,L,2].
  const at::Tensor& tokens = inputs.sequence_token;
  const at::Tensor logits = qa_outputs(hidden.index_select(0, tokens.reshape({-1})))
                                .view({tokens.size(0), tokens.size(1), 2})
                                .to(at::kFloat);
  const at::Tensor masked =
      logits.masked_fill(inputs.sequence_valid.logical_not().unsqueeze(-1),
                         -std::numeric_limits<float>::infinity());
  return {masked.select(-1, 0), masked.select(-1, 1)};
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertOptions& options,
                                                                     int64_t labels)
    : options(options), labels(labels) {
  reset();
}

void BertForSequenceClassificationImpl::reset() {
  bert = register_module("bert", BertModel(options));
  classifier = register_module("classifier", nn::Linear(options.hidden_size(), labels));
  InitBertWeights(*this, options.initializer_range());
  ZeroPaddingRows(bert);
}

std::map<std::string, int64_t> BertForSequenceClassificationImpl::FileRows() const {
  return WordRows(options);
}

at::Tensor BertForSequenceClassificationImpl::forward(const Inputs& inputs) {
  const int64_t h = options.hidden_size();
  const at::Tensor hidden = bert(inputs).reshape({-1, h});
  const at::Tensor cls = hidden.index_select(0, inputs.cls_token.reshape({-1}))
                             .view({inputs.rows(), -1, h});  // [B,D,H]
  // Hugging Face's classifier dropout is the hidden dropout.
  return classifier(Dropout(bert->pooler(cls), options.hidden_dropout(), is_training()))
      .to(at::kFloat);
}

void CopyEncoder(const BertModel& from, BertModel& to) {
  at::NoGradGuard no_grad;
  const auto source = from->named_parameters();
  for (auto& p : to->named_parameters()) p.value().copy_(source[p.key()]);
}

}  // namespace pbert::model
