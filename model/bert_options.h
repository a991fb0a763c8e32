// The shape of a packed BERT and the choices of its packed attention: what
// the config's model section sets (model/config.h), light enough for any
// header; the modules are in model/bert.h.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/choices.h"
#include "common/config_field.h"

namespace pbert::model {

// How attention skips the other sequences of a packed row; the results are
// the same (model/attention.h).
enum class AttentionKind {
  kAuto,     // the faster of the others on the device (ResolveAttention)
  kDense,    // scores over the whole row, block-diagonal mask
  kBlocked,  // each sequence attends within its own block: no masked scores computed
  kVarlen,   // the model runs on the real tokens only; attention per sequence
};
inline constexpr Choice<AttentionKind> kAttentionKinds[] = {{"auto", AttentionKind::kAuto},
                                                            {"dense", AttentionKind::kDense},
                                                            {"blocked", AttentionKind::kBlocked},
                                                            {"varlen", AttentionKind::kVarlen}};
constexpr ChoiceList<AttentionKind> ChoicesOf(AttentionKind) { return kAttentionKinds; }

// The kernel of the varlen layout's attention on a GPU where one runs
// (InputPlan::flash, model/inputs.h: sm_80 or later, bf16 or fp16, a head
// width that is a multiple of 8, up to 256 for FlashAttention and 128 for
// cuDNN); elsewhere the varlen layout attends in buckets whatever this says.
enum class VarlenKernel {
  kFlash,  // FlashAttention-2's variable-length kernel (LibTorch 2.6 or later)
  kCudnn,  // cuDNN's fused attention over sequence offsets (LibTorch 2.15 or later)
};
inline constexpr Choice<VarlenKernel> kVarlenKernels[] = {{"flash", VarlenKernel::kFlash},
                                                          {"cudnn", VarlenKernel::kCudnn}};
constexpr ChoiceList<VarlenKernel> ChoicesOf(VarlenKernel) { return kVarlenKernels; }

// Packing's two model changes, each of which an ablation leaves out:
// kNoBlockMask lets every token of a row attend to the row's other
// sequences (only the padding is masked); kNoPositionReset numbers the
// positions 0..S-1 along the row instead of restarting them in each
// sequence. Training with either is not BERT: experiments only.
enum class Ablation { kNone, kNoBlockMask, kNoPositionReset };
inline constexpr Choice<Ablation> kAblations[] = {{"none", Ablation::kNone},
                                                  {"no_block_mask", Ablation::kNoBlockMask},
                                                  {"no_position_reset", Ablation::kNoPositionReset}};
constexpr ChoiceList<Ablation> ChoicesOf(Ablation) { return kAblations; }

struct BertOptions {
  /// Tokens in the vocabulary (30522 for bert-base-uncased).
  TORCH_ARG(int64_t, vocab_size) = 30522;
  /// Width of every token representation.
  TORCH_ARG(int64_t, hidden_size) = 768;
  /// Transformer layers.
  TORCH_ARG(int64_t, num_layers) = 12;
  /// Attention heads per layer; must divide hidden_size.
  TORCH_ARG(int64_t, num_heads) = 12;
  /// Width of the feed-forward block.
  TORCH_ARG(int64_t, intermediate_size) = 3072;
  /// Rows of the position embedding: the longest sequence.
  TORCH_ARG(int64_t, max_position_embeddings) = 512;
  /// Segment types (A and B).
  TORCH_ARG(int64_t, type_vocab_size) = 2;
  /// Dropout after embeddings, attention output and feed-forward.
  TORCH_ARG(double, hidden_dropout) = 0.1;
  /// Dropout on the attention probabilities.
  TORCH_ARG(double, attention_dropout) = 0.1;
  /// LayerNorm epsilon.
  TORCH_ARG(double, layer_norm_eps) = 1e-12;
  /// Standard deviation of the normal initialisation.
  TORCH_ARG(double, initializer_range) = 0.02;
  /// How attention skips other sequences of a row.
  TORCH_ARG(AttentionKind, attention) = AttentionKind::kAuto;
  /// On a GPU, the varlen layout's attention kernel; the same results.
  TORCH_ARG(VarlenKernel, varlen_kernel) = VarlenKernel::kFlash;
  /// The paper's ablations (its Figure 4), for experiments only.
  TORCH_ARG(Ablation, ablation) = Ablation::kNone;
  /// Bias-GELU and bias-dropout-residual-LayerNorm as fused operations
  /// (model/fused_layers.h); off: the unfused modules. The same results.
  /// auto: on where the layer's input is on a GPU (2.4% faster on an H200,
  /// docs/performance.md), off on the CPU, where it gains nothing.
  TORCH_ARG(Switch, fused_layers) = Switch::kAuto;

 public:
  /// fused_layers on or off outright.
  BertOptions& fused_layers(bool on) {
    fused_layers_ = on ? Switch::kOn : Switch::kOff;
    return *this;
  }
  /// Q, K and V of a layer as one [3h, h] product: their weights (and
  /// biases) laid end to end in one buffer, the output split into views.
  TORCH_ARG(bool, fused_qkv) = true;
  /// The word embeddings (and the tied MLM decoder) padded inside the model
  /// to a multiple of this many rows, zero, never looked up, their logits
  /// cut before the losses; files and exports keep vocab_size rows. 1: none,
  /// the default: on the CPU the cut logits cost a pass (2-7% of a step).
  TORCH_ARG(int64_t, vocab_padding) = 1;
  /// Every micro-batch of one shape (model/inputs.h, InputPlan): padding
  /// tokens, sequences and masked-LM slots that carry no loss.
  TORCH_ARG(bool, static_shapes) = false;

 public:
  // The parameter count of BertForPreTraining of this shape.
  double Parameters() const;
  // The word embeddings' rows inside the model: vocab_size rounded up to a
  // multiple of vocab_padding.
  int64_t padded_vocab_size() const {
    return (vocab_size() + vocab_padding() - 1) / vocab_padding() * vocab_padding();
  }

  template <class V>
  void Visit(V& v) {
    using config::InRange;
    v.Field("vocab_size", &vocab_size_, "tokens in the vocabulary",
            InRange<int64_t>(8, 1 << 24));
    v.Field("hidden_size", &hidden_size_, "width of token representations",
            InRange<int64_t>(2, 1 << 16));
    v.Field("num_layers", &num_layers_, "transformer layers", InRange<int64_t>(1, 1024));
    v.Field("num_heads", &num_heads_, "attention heads; must divide hidden_size",
            InRange<int64_t>(1, 1 << 16));
    v.Field("intermediate_size", &intermediate_size_, "feed-forward width",
            InRange<int64_t>(1, 1 << 20));
    v.Field("max_position_embeddings", &max_position_embeddings_,
            "position embedding rows: the longest sequence", InRange<int64_t>(8, 1 << 16));
    v.Field("type_vocab_size", &type_vocab_size_, "segment types", InRange<int64_t>(1, 1024));
    v.Field("hidden_dropout", &hidden_dropout_, "dropout after embeddings and sublayers",
            InRange(0.0, 0.99));
    v.Field("attention_dropout", &attention_dropout_, "dropout on attention probabilities",
            InRange(0.0, 0.99));
    v.Field("initializer_range", &initializer_range_, "std of the normal initialisation",
            InRange(0.0, 10.0));
    v.Field("attention", &attention_,
            "dense: scores over the row with the block-diagonal mask; blocked: each sequence "
            "within its own block; varlen: the model on the real tokens only, FlashAttention on "
            "a GPU; auto: the fastest on the device; the same results");
    v.Field("varlen_kernel", &varlen_kernel_,
            "on a GPU, the varlen layout's attention: flash (FlashAttention-2's variable-length "
            "kernel) or cudnn (cuDNN's fused attention over sequence offsets, LibTorch 2.15 or "
            "later, cuDNN 9.18 or later, compute capability 9.x or 10.x, for the batches whose "
            "longest sequence is longer than 128); the same results; the CPU attends in buckets "
            "either way");
    v.Field("fused_layers", &fused_layers_,
            "bias-GELU and bias-dropout-residual-LayerNorm as one operation each: CUDA kernels on "
            "a GPU, the same ATen operations on the CPU; false: the unfused modules; auto: on a "
            "GPU only (the same results; on the CPU they gain nothing)");
    v.Field("fused_qkv", &fused_qkv_,
            "Q, K and V as one [3h, h] product over their weights laid end to end in one "
            "buffer (still three parameters: query, key, value); false: three products");
    v.Field("vocab_padding", &vocab_padding_,
            "the word embeddings and the MLM decoder padded inside the model to a multiple of "
            "this many rows (aligned GPU products); files and exports keep vocab_size rows; 1: none",
            InRange<int64_t>(1, 4096));
    v.Field("static_shapes", &static_shapes_,
            "every micro-batch of one shape: varlen's tokens padded to rows x max length, "
            "FlashAttention's sequence boundaries to a fixed count, the masked-LM slots to rows x "
            "max predictions; the padding carries no loss; the same results");
    v.Field("ablation", &ablation_,
            "leave out one of packing's model changes; experiments only, refused with "
            "mlperf.division closed");
  }
  // hidden_size a multiple of num_heads.
  absl::Status Validate() const;
};

// OK iff data of `vocab_size` tokens and sequences of at most `max_len`
// fits a model of `options`: token ids below vocab_size, sequences no
// longer than max_position_embeddings. `what` names the data in the error.
absl::Status CheckDataFits(const BertOptions& options, uint64_t vocab_size, uint64_t max_len,
                           const std::string& what);

}  // namespace pbert::model
