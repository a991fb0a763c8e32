#include "model/bert.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/linear.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "model/dropout.h"
#include "model/fused_layers.h"

namespace pbert::model {

namespace nn = torch::nn;

namespace {

// LayerNorm runs in its weights' precision (fp32): CUDA autocast does so by
// itself, but LibTorch 1.13's CPU autocast hands bf16 input to a kernel
// that rejects fp32 weights.
at::Tensor Normalize(nn::LayerNorm& norm, const at::Tensor& x) {
  return norm(x.to(norm->weight.scalar_type()));
}

}  // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertOptions& options) : options(options) { reset(); }

void BertEmbeddingsImpl::reset() {
  word_embeddings = register_module("word_embeddings",
                                    nn::Embedding(options.vocab_size(), options.hidden_size()));
  // The padding rows (options.vocab_padding) after the vocabulary's, zero;
  // made after the module's own draws, so a seed initialises as unpadded.
  if (options.padded_vocab_size() > options.vocab_size()) {
    at::NoGradGuard no_grad;
    const at::Tensor& words = word_embeddings->weight;
    at::Tensor padded = at::zeros({options.padded_vocab_size(), options.hidden_size()}, words.options());
    padded.narrow(0, 0, options.vocab_size()).copy_(words);
    word_embeddings->weight.set_data(padded);
  }
  position_embeddings =
      register_module("position_embeddings",
                      nn::Embedding(options.max_position_embeddings(), options.hidden_size()));
  token_type_embeddings = register_module(
      "token_type_embeddings", nn::Embedding(options.type_vocab_size(), options.hidden_size()));
  LayerNorm = register_module(
      "LayerNorm",
      nn::LayerNorm(nn::LayerNormOptions({options.hidden_size()}).eps(options.layer_norm_eps())));
}

at::Tensor BertEmbeddingsImpl::forward(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                       const at::Tensor& token_type_ids) {
  // A lookup, not a broadcast add of rows 0..S-1: positions restart in
  // every sequence of a packed row.
  auto x = word_embeddings(input_ids) + position_embeddings(position_ids) +
           token_type_embeddings(token_type_ids);
  return Dropout(Normalize(LayerNorm, x), options.hidden_dropout(), is_training());
}

namespace {

// x w^T + b: in fp8 where the layer has a scaling slot (weight_version:
// Fp8Linear's).
at::Tensor Product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                   const Fp8Slot* fp8, bool training, int64_t weight_version = -1) {
  return fp8 != nullptr ? Fp8Linear(x, weight, bias, *fp8, training, weight_version)
                        : at::linear(x, weight, bias);
}

}  // namespace

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertOptions& options) : options(options) {
  reset();
}

void BertSelfAttentionImpl::reset() {
  TORCH_CHECK(options.hidden_size() % options.num_heads() == 0, "hidden_size ",
              options.hidden_size(), " is not a multiple of num_heads ", options.num_heads());
  const int64_t h = options.hidden_size();
  query = register_module("query", nn::Linear(h, h));
  key = register_module("key", nn::Linear(h, h));
  value = register_module("value", nn::Linear(h, h));
  PackQkv();
}

void BertSelfAttentionImpl::PackQkv() {
  if (!options.fused_qkv()) return;
  PackRows({query->weight, key->weight, value->weight});
  PackRows({query->bias, key->bias, value->bias});
}

void BertSelfAttentionImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  PackQkv();
}

void BertSelfAttentionImpl::to(torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(dtype, non_blocking);
  PackQkv();
}

void BertSelfAttentionImpl::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  PackQkv();
}

at::Tensor BertSelfAttentionImpl::forward(const at::Tensor& hidden,
                                          const AttentionLayout& layout) {
  const double dropout = is_training() ? options.attention_dropout() : 0.0;
  const bool training = is_training();
  if (!options.fused_qkv()) {
    auto part = [&](const torch::nn::Linear& linear, size_t i) {
      return Product(hidden, linear->weight, linear->bias, fp8.empty() ? nullptr : &fp8[i],
                     training);
    };
    return Attend(part(query, 0), part(key, 1), part(value, 2), options.num_heads(), layout,
                  dropout);
  }
  // One [3h, h] product; Q, K and V are views of its output. The joined
  // weight is new in each call: its parts' versions say whether they changed.
  const int64_t version = static_cast<int64_t>(query->weight._version() + key->weight._version() +
                                               value->weight._version());
  const at::Tensor qkv = Product(hidden, JoinRows({query->weight, key->weight, value->weight}),
                                 JoinRows({query->bias, key->bias, value->bias}),
                                 fp8.empty() ? nullptr : &fp8[0], training, version);
  const auto parts = qkv.chunk(3, -1);
  return Attend(parts[0], parts[1], parts[2], options.num_heads(), layout, dropout);
}

BertResidualOutputImpl::BertResidualOutputImpl(const BertOptions& options, int64_t in_features)
    : options(options), in_features(in_features) {
  reset();
}

void BertResidualOutputImpl::reset() {
  dense = register_module("dense", nn::Linear(in_features, options.hidden_size()));
  LayerNorm = register_module(
      "LayerNorm",
      nn::LayerNorm(nn::LayerNormOptions({options.hidden_size()}).eps(options.layer_norm_eps())));
}

at::Tensor BertResidualOutputImpl::forward(const at::Tensor& x, const at::Tensor& residual) {
  const Fp8Slot* slot = fp8 ? &*fp8 : nullptr;
  const FusedPath path = IsOn(options.fused_layers(), x.is_cuda())
                             ? BiasDropoutAddNormPath(x, dense->bias, LayerNorm->weight)
                             : FusedPath::kUnfused;
  if (path != FusedPath::kUnfused) {
    const bool apart = path == FusedPath::kKernels;  // they add the bias; else the product (addmm)
    return BiasDropoutAddNorm(
        Product(x, dense->weight, apart ? at::Tensor() : dense->bias, slot, is_training()),
        apart ? dense->bias : at::Tensor(), residual, LayerNorm->weight, LayerNorm->bias,
        options.hidden_dropout(), options.layer_norm_eps(), is_training());
  }
  return Normalize(LayerNorm, Dropout(Product(x, dense->weight, dense->bias, slot, is_training()),
                                      options.hidden_dropout(), is_training()) +
                                  residual);
}

BertDenseActivationImpl::BertDenseActivationImpl(int64_t in_features, int64_t out_features,
                                                 Activation activation, Switch fused)
    : in_features(in_features), out_features(out_features), activation(activation), fused(fused) {
  reset();
}

void BertDenseActivationImpl::reset() {
  dense = register_module("dense", nn::Linear(in_features, out_features));
}

at::Tensor BertDenseActivationImpl::forward(const at::Tensor& x) {
  const Fp8Slot* slot = fp8 ? &*fp8 : nullptr;
  const FusedPath path = IsOn(fused, x.is_cuda()) && activation == Activation::kGelu
                             ? BiasGeluPath(x, dense->bias)
                             : FusedPath::kUnfused;
  if (path != FusedPath::kUnfused) {
    const bool apart = path == FusedPath::kKernels;  // they add the bias; else the product (addmm)
    return BiasGelu(Product(x, dense->weight, apart ? at::Tensor() : dense->bias, slot,
                            is_training()),
                    apart ? dense->bias : at::Tensor());
  }
  auto y = Product(x, dense->weight, dense->bias, slot, is_training());
  return activation == Activation::kGelu ? at::gelu(y) : at::tanh(y);
}

BertAttentionImpl::BertAttentionImpl(const BertOptions& options) : options(options) { reset(); }

void BertAttentionImpl::reset() {
  self = register_module("self", BertSelfAttention(options));
  output = register_module("output", BertResidualOutput(options, options.hidden_size()));
}

at::Tensor BertAttentionImpl::forward(const at::Tensor& hidden, const AttentionLayout& layout) {
  return output(self(hidden, layout), hidden);
}

BertLayerImpl::BertLayerImpl(const BertOptions& options) : options(options) { reset(); }

void BertLayerImpl::reset() {
  attention = register_module("attention", BertAttention(options));
  intermediate = register_module(
      "intermediate",
      BertDenseActivation(options.hidden_size(), options.intermediate_size(),
                          BertDenseActivationImpl::Activation::kGelu, options.fused_layers()));
  output = register_module("output", BertResidualOutput(options, options.intermediate_size()));
}

at::Tensor BertLayerImpl::forward(const at::Tensor& hidden, const AttentionLayout& layout) {
  auto attended = attention(hidden, layout);
  return output(intermediate(attended), attended);
}

BertEncoderImpl::BertEncoderImpl(const BertOptions& options) : options(options) { reset(); }

void BertEncoderImpl::reset() {
  layer = register_module("layer", nn::ModuleList());
  for (int64_t i = 0; i < options.num_layers(); ++i) layer->push_back(BertLayer(options));
}

at::Tensor BertEncoderImpl::forward(at::Tensor hidden, const AttentionLayout& layout) {
  for (const auto& module : *layer) hidden = module->as<BertLayer>()->forward(hidden, layout);
  return hidden;
}

BertModelImpl::BertModelImpl(const BertOptions& options) : options(options) { reset(); }

void BertModelImpl::reset() {
  embeddings = register_module("embeddings", BertEmbeddings(options));
  encoder = register_module("encoder", BertEncoder(options));
  pooler =
      register_module("pooler", BertDenseActivation(options.hidden_size(), options.hidden_size(),
                                                    BertDenseActivationImpl::Activation::kTanh));
}

at::Tensor BertModelImpl::forward(const Inputs& inputs) {
  return encoder(embeddings(inputs.input_ids, inputs.position_ids, inputs.token_type_ids),
                 inputs.attention);
}

int64_t BertModelImpl::Fp8Products(const BertOptions& options) {
  // QKV (or Q, K, V), attention output, intermediate, output.
  return options.num_layers() * (options.fused_qkv() ? 4 : 6);
}

void BertModelImpl::UseFp8(const Fp8Scaling& scaling) {
  TORCH_CHECK(scaling.products() == Fp8Products(options), "UseFp8: a scaling of ",
              scaling.products(), " products for a model of ", Fp8Products(options));
  int64_t next = 0;
  for (const auto& module : *encoder->layer) {
    auto& layer = *module->as<BertLayer>();
    auto& self = *layer.attention->self;
    self.fp8.clear();
    for (int i = 0; i < (options.fused_qkv() ? 1 : 3); ++i) self.fp8.push_back(scaling.Slot(next++));
    layer.attention->output->fp8 = scaling.Slot(next++);
    layer.intermediate->fp8 = scaling.Slot(next++);
    layer.output->fp8 = scaling.Slot(next++);
  }
}

BertPredictionTransformImpl::BertPredictionTransformImpl(const BertOptions& options)
    : options(options) {
  reset();
}

void BertPredictionTransformImpl::reset() {
  dense = register_module("dense", nn::Linear(options.hidden_size(), options.hidden_size()));
  LayerNorm = register_module(
      "LayerNorm",
      nn::LayerNorm(nn::LayerNormOptions({options.hidden_size()}).eps(options.layer_norm_eps())));
}

at::Tensor BertPredictionTransformImpl::forward(const at::Tensor& x) {
  return Normalize(LayerNorm, at::gelu(dense(x)));
}

BertLMPredictionHeadImpl::BertLMPredictionHeadImpl(const BertOptions& options) : options(options) {
  reset();
}

void BertLMPredictionHeadImpl::reset() {
  transform = register_module("transform", BertPredictionTransform(options));
  bias = register_parameter("bias", at::zeros({options.vocab_size()}));
}

at::Tensor BertLMPredictionHeadImpl::forward(const at::Tensor& hidden,
                                             const at::Tensor& word_embeddings) {
  const int64_t V = options.vocab_size();
  if (word_embeddings.size(0) == V) {
    return torch::nn::functional::linear(transform(hidden), word_embeddings, bias);
  }
  // The product over the padded rows (aligned), its padding columns cut
  // before the bias: they never reach a softmax, and the padding rows of the
  // word embeddings get no gradient from here.
  // In the product's dtype (bf16 under autocast, as the unpadded addmm's).
  const at::Tensor logits = at::linear(transform(hidden), word_embeddings).narrow(-1, 0, V);
  return logits + bias.to(logits.scalar_type());
}

BertPreTrainingHeadsImpl::BertPreTrainingHeadsImpl(const BertOptions& options) : options(options) {
  reset();
}

void BertPreTrainingHeadsImpl::reset() {
  predictions = register_module("predictions", BertLMPredictionHead(options));
  seq_relationship = register_module("seq_relationship", nn::Linear(options.hidden_size(), 2));
}

BertForPreTrainingImpl::BertForPreTrainingImpl(const BertOptions& options) : options(options) {
  reset();
}

void BertForPreTrainingImpl::reset() {
  bert = register_module("bert", BertModel(options));
  cls = register_module("cls", BertPreTrainingHeads(options));
  InitWeights();
}

void InitBertWeights(nn::Module& model, BertModel& bert) {
  at::NoGradGuard no_grad;
  const double range = bert->options.initializer_range();
  for (auto& module : model.modules(/*include_self=*/false)) {
    if (auto* linear = module->as<nn::Linear>()) {
      linear->weight.normal_(0.0, range);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = module->as<nn::Embedding>()) {
      // The vocabulary's rows only: the draws of an unpadded model.
      embedding->weight.narrow(0, 0, embedding->options.num_embeddings()).normal_(0.0, range);
    } else if (auto* norm = module->as<nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
  // The padding rows of the word embeddings are zero, and stay so: nothing
  // looks them up and their logits are cut, so no gradient reaches them and
  // LAMB moves them by 0 (zero moments, zero weight decay).
  at::Tensor& words = bert->embeddings->word_embeddings->weight;
  const int64_t v = bert->options.vocab_size();
  words.narrow(0, v, words.size(0) - v).zero_();
}

std::map<std::string, int64_t> PaddedFileRows(const BertOptions& options) {
  if (options.padded_vocab_size() == options.vocab_size()) return {};
  return {{"bert.embeddings.word_embeddings.weight", options.vocab_size()}};
}

void BertForPreTrainingImpl::InitWeights() {
  InitBertWeights(*this, bert);
  at::NoGradGuard no_grad;
  cls->predictions->bias.zero_();
}

std::map<std::string, int64_t> BertForPreTrainingImpl::FileRows() const {
  return PaddedFileRows(options);
}

PretrainingLogits BertForPreTrainingImpl::forward(const Inputs& inputs) {
  const int64_t H = options.hidden_size();
  // [B*S,H] over the padded rows, or [T,H] over the real tokens (varlen).
  const at::Tensor hidden = bert(inputs).reshape({-1, H});
  // The heads run only where they are needed: the masked tokens (not the
  // unused MLM slots: the decoder over the vocabulary is the costliest
  // matmul of a small model), and the [CLS] of every sequence slot.
  PretrainingLogits logits;
  logits.mlm = cls->predictions(hidden.index_select(0, inputs.mlm_token),
                                bert->embeddings->word_embeddings->weight);
  const at::Tensor cls_hidden = hidden.index_select(0, inputs.cls_token.reshape({-1}))
                                    .view({inputs.rows(), -1, H});  // [B,D,H]
  logits.nsp = cls->seq_relationship(bert->pooler(cls_hidden));
  return logits;
}

}  // namespace pbert::model
