// How self-attention sees a batch: its layout (model/inputs.h), made with
// the batch's other inputs before the step and shared by every layer.
// Three layouts give the same result for every real token (docs/model.md):
//
// dense:   the model runs on the padded rows [B,S,H]; scores over the whole
//          row [B,heads,S,S] plus the block-diagonal mask (-inf between
//          different sequences), as the paper does;
// blocked: the model runs on the padded rows; each sequence attends within
//          its own block only: sequences are gathered into buckets of
//          similar length ([n,heads,L,L] each, L a multiple of 32), so a row
//          of k sequences costs about 1/k of the dense scores;
// varlen:  the model runs on the T real tokens only ([T,H]: no padding in
//          any layer); attention per sequence from cu_seqlens, through
//          FlashAttention's variable-length kernel on a GPU (fp16/bf16) or
//          cuDNN's fused attention (model.varlen_kernel), elsewhere through
//          the buckets of blocked over the T tokens.
//
// Padding tokens get zero attention output in the blocked layout (they
// attend only padding in the dense one); no real token ever sees them.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/status.h"

#include "model/bert_options.h"
#include "model/inputs.h"

namespace pbert::model {

// What `kind` means: kAuto is varlen on either device. On a GPU it runs
// FlashAttention's varlen kernel; on the CPU it trained 1.8-2.0x faster
// than blocked on unpacked and dynamically padded batches of a medium BERT,
// and 1.05x on packed rows (docs/model.md, Speed).
AttentionKind ResolveAttention(AttentionKind kind);

// Whether this LibTorch has cuDNN's fused attention over sequence offsets
// that trains: aten::_cudnn_attention_forward with cum_seq_q (2.8 and
// later), differentiable through its backward, in a LibTorch that carries
// the fixes of that path known so far (2.15 and later: before 2.14 the
// backward reads the head width where the longest sequence belongs, sizes
// a buffer by it and writes past it, pytorch/pytorch#186142; 2.14 was cut
// before the fixes of silent wrong results and crashes that fuzzing found
// in it, #194818). Looked up by name in the dispatcher, so every LibTorch
// builds the call; whether it runs is this.
bool CudnnVarlenAttentionAvailable();

// cuDNN attends a batch (model.varlen_kernel cudnn) only where its longest
// sequence is longer than this; shorter ones go to FlashAttention. PyTorch's
// own torch.nn.attention.varlen_attn draws the same line ("max_q must be
// greater than 128") before it chooses cuDNN.
inline constexpr int64_t kCudnnVarlenLongerThan = 128;

// OK where cuDNN's varlen attention may run on a GPU of compute capability
// `major`.`minor` with the cuDNN of version `cudnn_version` loaded (0:
// none), as PyTorch's varlen_attn decides it (cuDNN 9.18 or later on
// compute capability 9.x or 10.x); else why not, in one line.
absl::Status CheckCudnnVarlenRuntime(int major, int minor, int64_t cudnn_version);

// OK unless `options` ask for cuDNN's varlen kernel (model.varlen_kernel
// cudnn) on a GPU `device` where it cannot run: a LibTorch without it
// (CudnnVarlenAttentionAvailable), heads wider than 128 or not a multiple
// of 8, or a GPU and cuDNN that CheckCudnnVarlenRuntime refuses.
absl::Status CheckVarlenKernel(const BertOptions& options, const c10::Device& device);

// The additive attention mask for `sequence_ids` [B,S]: 0 where token i may
// attend token j (same sequence id), -inf elsewhere; shape [B,1,S,S].
// Padding tokens (id 0) attend only padding, so no row is all -inf.
at::Tensor BlockDiagonalMask(const at::Tensor& sequence_ids, at::ScalarType dtype);

// Scaled dot-product attention of q, k, v ([B,S,hidden] in the dense and
// blocked layouts, [T,hidden] in the varlen ones) split into `heads`, in
// `layout` (model/inputs.h), with dropout of probability `dropout_p` on the
// attention probabilities (0 in evaluation). Device work only.
at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                  const AttentionLayout& layout, double dropout_p);

}  // namespace pbert::model
