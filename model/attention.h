// How self-attention sees a packed batch, computed once per batch and shared
// by every layer. Two layouts give the same result for every real token:
//
// dense:   scores over the whole row [B,heads,S,S] plus the block-diagonal
//          mask (-inf between different sequences), as the paper does;
// blocked: each sequence attends within its own block only: sequences are
//          gathered into buckets of similar length ([n,heads,L,L] each, L a
//          multiple of 32), so a row of k sequences costs about 1/k of the
//          dense scores. What the mask would have zeroed is never computed.
//
// Padding tokens get zero attention output in the blocked layout (they
// attend only padding in the dense one); no real token ever sees them.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "model/bert_options.h"

namespace pbert::model {

struct AttentionLayout {
  // Dense: the additive mask, broadcastable to [B,heads,S,S].
  at::Tensor mask;
  // Blocked: one entry per bucket of sequences.
  struct Bucket {
    int64_t length = 0;  // L
    at::Tensor tokens;   // [n*L] indices into the flattened [B*S] tokens; padding slots -> B*S
    at::Tensor key_mask;  // [n,1,1,L] additive: 0 for a sequence's keys, -inf for padding slots
  };
  std::vector<Bucket> buckets;

  bool blocked() const { return !mask.defined(); }
};

// The additive attention mask for `sequence_ids` [B,S]: 0 where token i may
// attend token j (same sequence id), -inf elsewhere; shape [B,1,S,S].
// Padding tokens (id 0) attend only padding, so no row is all -inf.
at::Tensor BlockDiagonalMask(const at::Tensor& sequence_ids, at::ScalarType dtype);

AttentionLayout DenseLayout(const at::Tensor& sequence_ids, at::ScalarType dtype);
// `sequence_ids` is read on the host; the indices go to its device.
AttentionLayout BlockedLayout(const at::Tensor& sequence_ids, at::ScalarType dtype,
                              int64_t granularity = 32);

// Scaled dot-product attention of q, k, v [B,S,hidden] split into `heads`,
// in `layout`, with dropout of probability `dropout_p` on the attention
// probabilities (0 in evaluation). Computed by LibTorch's
// _scaled_dot_product_attention, the fastest exact path on CPU in 1.13
// (build/bench/attention).
at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                  const AttentionLayout& layout, double dropout_p);

}  // namespace pbert::model
