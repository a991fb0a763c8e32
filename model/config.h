// The config's model section: the model's shape (BertOptions), the loss
// mode and the precision it computes in.
#pragma once

#include "absl/status/status.h"
#include "common/config_field.h"
#include "model/bert_options.h"
#include "model/fp8.h"
#include "model/losses.h"
#include "model/precision.h"

namespace pbert::model {

struct ModelConfig {
  BertOptions bert;
  MlmLossMode mlm_loss = MlmLossMode::kPerToken;
  // auto: the demo reached its target 1.3x sooner in bf16 than in fp32 on
  // a CPU with AVX512_BF16, after the same sequences (docs/config.md).
  Precision precision = Precision::kAuto;
  // In bf16 (or fp8): bf16 weights with fp32 masters in the optimizer. auto:
  // on a GPU (BERT-large on an H200: 1.105x autocast over fp32 weights,
  // docs/performance.md), off on the CPU, where LibTorch's bf16 kernels are
  // not the products' bottleneck.
  Switch master_weights = Switch::kAuto;
  // With precision fp8: its scales' history and margin, and its emulation.
  Fp8Options fp8;

  template <class V>
  void Visit(V& v) {
    v.Include(&bert);
    v.Field("mlm_loss", &mlm_loss,
            "per_token: canonical BERT; per_sequence: mean over sequences, the paper's 3.2.3");
    v.Field("precision", &precision,
            "autocast over fp32 weights; fp16 on CUDA only; fp8: the encoder's products in FP8 "
            "(GPUs of compute capability 8.9 and later, or model.fp8_emulation), the rest bf16; "
            "auto: bf16 where the CPU computes bf16 in hardware or the GPU has it (sm_80 and "
            "later), fp16 on older GPUs, else fp32");
    v.Field("master_weights", &master_weights,
            "in bf16 or fp8: the model computes with bf16 weights, LAMB updates fp32 master "
            "weights (what checkpoints keep); false: fp32 weights cast by autocast in each "
            "micro-batch; auto: true on a GPU, false on the CPU");
    v.Include(&fp8);
  }
  // This section's levers that cannot act in a training run in `precision`
  // (resolved) on a GPU or not, each with why.
  void Inactive(Precision precision, bool device_is_cuda, config::InactiveKeys* keys) const;
  // Those that cannot act in an evaluation (score, finetune --evaluate).
  static void InactiveInEvaluation(config::InactiveKeys* keys);

  // The shape's own checks, and whether its weights, gradients and LAMB's
  // two moments fit this machine's memory.
  absl::Status Validate() const;

  // Whether a training micro-batch of `rows` rows of `seq_len` tokens can
  // fit this machine's memory: a lower bound of the activations the
  // backward pass keeps (fp32, dropout masks and attention scores left out)
  // against the physical memory. Refuses (InvalidArgument) what cannot.
  absl::Status CheckMicroBatchFits(int64_t rows, int64_t seq_len) const;
};

}  // namespace pbert::model
