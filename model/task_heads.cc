#include "model/task_heads.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <limits>

#include "model/dropout.h"

namespace pbert::model {

namespace nn = torch::nn;

at::Tensor Fp32Linear(const nn::Linear& linear, const at::Tensor& x) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const at::ScalarType dtype = at::promote_types(
      at::promote_types(x.scalar_type(), linear->weight.scalar_type()), at::kFloat);
  return at::linear(x.to(dtype), linear->weight.to(dtype), linear->bias.to(dtype));
}

BertForQuestionAnsweringImpl::BertForQuestionAnsweringImpl(const BertOptions& options)
    : options(options) {
  reset();
}

void BertForQuestionAnsweringImpl::reset() {
  bert = register_module("bert", BertModel(options));
  qa_outputs = register_module("qa_outputs", nn::Linear(options.hidden_size(), 2));
  InitBertWeights(*this, bert);
}

std::map<std::string, int64_t> BertForQuestionAnsweringImpl::FileRows() const {
  return PaddedFileRows(options);
}

SpanLogitsTensor BertForQuestionAnsweringImpl::forward(const Inputs& inputs) {
  const at::Tensor hidden = bert(inputs).reshape({-1, options.hidden_size()});
  // The head on each sequence's own tokens only: [N,L,2].
  const at::Tensor& tokens = inputs.sequence_token;
  const at::Tensor logits = Fp32Linear(qa_outputs, hidden.index_select(0, tokens.reshape({-1})))
                                .view({tokens.size(0), tokens.size(1), 2});
  const at::Tensor masked = logits.masked_fill(inputs.sequence_valid.logical_not().unsqueeze(-1),
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
  InitBertWeights(*this, bert);
}

std::map<std::string, int64_t> BertForSequenceClassificationImpl::FileRows() const {
  return PaddedFileRows(options);
}

at::Tensor BertForSequenceClassificationImpl::forward(const Inputs& inputs) {
  const int64_t h = options.hidden_size();
  const at::Tensor hidden = bert(inputs).reshape({-1, h});
  const at::Tensor cls = hidden.index_select(0, inputs.cls_token.reshape({-1}))
                             .view({inputs.rows(), -1, h});  // [B,D,H]
  // Hugging Face's classifier dropout is the hidden dropout.
  return Fp32Linear(classifier,
                    Dropout(bert->pooler(cls), options.hidden_dropout(), is_training()));
}

void CopyEncoder(const BertModel& from, BertModel& to) {
  at::NoGradGuard no_grad;
  const auto source = from->named_parameters();
  for (auto& p : to->named_parameters()) p.value().copy_(source[p.key()]);
}

}  // namespace pbert::model
