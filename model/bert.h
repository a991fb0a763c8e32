// BERT for packed pretraining: position embeddings looked up per token (so
// they restart in every sequence of a row), attention kept within each
// sequence (model/attention.h: on the padded rows, or on the real tokens
// alone), and pretraining heads evaluated only at the masked positions and
// at each sequence's [CLS]. Parameter names are
// those of Hugging Face's BertForPreTraining, so checkpoints move both ways.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/attention.h"
#include "model/bert_options.h"
#include "model/fp8.h"
#include "model/inputs.h"
#include "model/losses.h"

namespace pbert::model {

// Every module below is named and nested as in Hugging Face's
// BertForPreTraining, so named_parameters() yields its state-dict names.

class BertEmbeddingsImpl : public torch::nn::Cloneable<BertEmbeddingsImpl> {
 public:
  explicit BertEmbeddingsImpl(const BertOptions& options);
  void reset() override;
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& position_ids,
                     const at::Tensor& token_type_ids);

  BertOptions options;
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr},
      token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
};
TORCH_MODULE(BertEmbeddings);

// Scaled dot-product attention over all heads ("attention.self").
class BertSelfAttentionImpl : public torch::nn::Cloneable<BertSelfAttentionImpl> {
 public:
  explicit BertSelfAttentionImpl(const BertOptions& options);
  void reset() override;
  at::Tensor forward(const at::Tensor& hidden, const AttentionLayout& layout);
  // With options.fused_qkv: lays the Q, K, V weights (and biases) end to
  // end in one buffer (model/fused_layers.h, PackRows), for one product.
  void PackQkv();
  // Moves as Module::to, then lays Q, K and V end to end again in the new
  // storage (PackQkv): whichever model holds the encoder, its one QKV
  // buffer outlives a move.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

  BertOptions options;
  // Dropout on the attention probabilities (options.attention_dropout)
  // happens inside Attend.
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  // In fp8 (BertModel::UseFp8): the QKV product's scaling, or
  // Q's, K's and V's without fused_qkv; empty otherwise.
  std::vector<Fp8Slot> fp8;
};
TORCH_MODULE(BertSelfAttention);

// LayerNorm(dropout(dense(x)) + residual): "attention.output" and "output";
// one operation after the product with options.fused_layers
// (model/fused_layers.h).
class BertResidualOutputImpl : public torch::nn::Cloneable<BertResidualOutputImpl> {
 public:
  BertResidualOutputImpl(const BertOptions& options, int64_t in_features);
  void reset() override;
  at::Tensor forward(const at::Tensor& x, const at::Tensor& residual);

  BertOptions options;
  int64_t in_features;
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
  std::optional<Fp8Slot> fp8;  // dense in fp8 (BertModel::UseFp8)
};
TORCH_MODULE(BertResidualOutput);

// activation(dense(x)): "intermediate" (exact GELU) and "pooler" (tanh);
// `fused`: the GELU with the bias as one operation (model/fused_layers.h),
// as BertOptions::fused_layers says.
class BertDenseActivationImpl : public torch::nn::Cloneable<BertDenseActivationImpl> {
 public:
  enum class Activation { kGelu, kTanh };
  BertDenseActivationImpl(int64_t in_features, int64_t out_features, Activation activation,
                          Switch fused = Switch::kOff);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  int64_t in_features, out_features;
  Activation activation;
  Switch fused;
  torch::nn::Linear dense{nullptr};
  std::optional<Fp8Slot> fp8;  // dense in fp8 (BertModel::UseFp8)
};
TORCH_MODULE(BertDenseActivation);

class BertAttentionImpl : public torch::nn::Cloneable<BertAttentionImpl> {
 public:
  explicit BertAttentionImpl(const BertOptions& options);
  void reset() override;
  at::Tensor forward(const at::Tensor& hidden, const AttentionLayout& layout);

  BertOptions options;
  BertSelfAttention self{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertAttention);

// One post-LayerNorm transformer layer.
class BertLayerImpl : public torch::nn::Cloneable<BertLayerImpl> {
 public:
  explicit BertLayerImpl(const BertOptions& options);
  void reset() override;
  at::Tensor forward(const at::Tensor& hidden, const AttentionLayout& layout);

  BertOptions options;
  BertAttention attention{nullptr};
  BertDenseActivation intermediate{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertLayer);

class BertEncoderImpl : public torch::nn::Cloneable<BertEncoderImpl> {
 public:
  explicit BertEncoderImpl(const BertOptions& options);
  void reset() override;
  at::Tensor forward(at::Tensor hidden, const AttentionLayout& layout);

  BertOptions options;
  torch::nn::ModuleList layer{nullptr};
};
TORCH_MODULE(BertEncoder);

class BertModelImpl : public torch::nn::Cloneable<BertModelImpl> {
 public:
  explicit BertModelImpl(const BertOptions& options);
  void reset() override;
  // The final hidden states: [B,S,H] over the padded rows, or [T,H] over
  // the real tokens in the varlen layouts.
  at::Tensor forward(const Inputs& inputs);

  // The encoder's linear layers in fp8 (model/fp8.h), each with its rows of
  // `scaling`, which has Fp8Products(options) products (on the model's
  // device; the model keeps views of it). Amaxes are recorded in training.
  // Every head over this encoder computes its products so.
  void UseFp8(const Fp8Scaling& scaling);
  static int64_t Fp8Products(const BertOptions& options);

  BertOptions options;
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
  BertDenseActivation pooler{nullptr};
};
TORCH_MODULE(BertModel);

// LayerNorm(gelu(dense(x))) before the MLM decoder.
class BertPredictionTransformImpl : public torch::nn::Cloneable<BertPredictionTransformImpl> {
 public:
  explicit BertPredictionTransformImpl(const BertOptions& options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  BertOptions options;
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
};
TORCH_MODULE(BertPredictionTransform);

// The masked-LM head: the transform, then the decoder tied to the word
// embeddings, plus a bias.
class BertLMPredictionHeadImpl : public torch::nn::Cloneable<BertLMPredictionHeadImpl> {
 public:
  explicit BertLMPredictionHeadImpl(const BertOptions& options);
  void reset() override;
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& word_embeddings);

  BertOptions options;
  BertPredictionTransform transform{nullptr};
  at::Tensor bias;
};
TORCH_MODULE(BertLMPredictionHead);

class BertPreTrainingHeadsImpl : public torch::nn::Cloneable<BertPreTrainingHeadsImpl> {
 public:
  explicit BertPreTrainingHeadsImpl(const BertOptions& options);
  void reset() override;

  BertOptions options;
  BertLMPredictionHead predictions{nullptr};
  torch::nn::Linear seq_relationship{nullptr};
};
TORCH_MODULE(BertPreTrainingHeads);

// BERT's initialization of every parameter of `model`, whose encoder is
// `bert`: linear weights and embeddings normal(0, initializer_range), biases
// 0, LayerNorm 1 and 0, the word embeddings' padding rows
// (options.vocab_padding) 0.
void InitBertWeights(torch::nn::Module& model, BertModel& bert);

// The parameters whose files hold fewer rows than a model of `options`:
// the padded word embeddings, by name, with the rows their files hold.
std::map<std::string, int64_t> PaddedFileRows(const BertOptions& options);

class BertForPreTrainingImpl : public torch::nn::Cloneable<BertForPreTrainingImpl> {
 public:
  explicit BertForPreTrainingImpl(const BertOptions& options);
  void reset() override;
  // Re-draws every parameter as BERT initialises (InitBertWeights; the MLM
  // bias 0).
  void InitWeights();
  std::map<std::string, int64_t> FileRows() const;  // PaddedFileRows

  // The heads' logits for `inputs` (model/inputs.h), on the model's
  // device, in the layout they were made for: device work only.
  PretrainingLogits forward(const Inputs& inputs);

  BertOptions options;
  BertModel bert{nullptr};
  BertPreTrainingHeads cls{nullptr};
};
TORCH_MODULE(BertForPreTraining);

}  // namespace pbert::model
