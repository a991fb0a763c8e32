// With model.fused_qkv, Q, K and V of each layer lie end to end in one
// buffer (BertSelfAttention::PackQkv), still three leaf parameters under
// their names, so that JoinRows of them is an alias of that buffer, not a
// copy: whichever head holds the encoder, after every move (dtype or
// device) and after optimizer steps. The check, for any module that holds
// an encoder (tests/train/fused_layers_test.cc on the CPU,
// tests/train/fine_tuning_test.cc through a trainee, tests/train/cuda_test.cc
// on the GPU).
#pragma once

#include <torch/torch.h>

#include <string>

#include "gtest/gtest.h"
#include "model/bert.h"
#include "model/fused_layers.h"

namespace pbert::model::testing {

// Every self-attention of `module` (`layers` of them) keeps its Q, K, V
// weights and biases end to end in one buffer; `what` names the case.
inline void ExpectOneQkvBuffer(torch::nn::Module& module, int64_t layers, const std::string& what) {
  int64_t seen = 0;
  for (const auto& child : module.modules(/*include_self=*/false)) {
    auto* self = child->as<BertSelfAttention>();
    if (self == nullptr) continue;
    ++seen;
    const at::Tensor &q = self->query->weight, &k = self->key->weight, &v = self->value->weight;
    ASSERT_TRUE(q.is_leaf() && q.requires_grad()) << what;
    EXPECT_TRUE(q.storage().is_alias_of(v.storage())) << what << ": Q and V apart";
    EXPECT_EQ(k.storage_offset(), q.storage_offset() + q.numel()) << what;
    EXPECT_EQ(v.storage_offset(), k.storage_offset() + k.numel()) << what;
    const at::Tensor joined = JoinRows({q, k, v});
    EXPECT_EQ(joined.data_ptr(), q.data_ptr()) << what << ": joined by a copy";
    EXPECT_TRUE(torch::equal(joined, at::cat({q, k, v}).detach())) << what;
    const at::Tensor &qb = self->query->bias, &kb = self->key->bias, &vb = self->value->bias;
    EXPECT_TRUE(qb.storage().is_alias_of(vb.storage())) << what << ": the biases apart";
    EXPECT_EQ(kb.storage_offset(), qb.storage_offset() + qb.numel()) << what;
    EXPECT_EQ(vb.storage_offset(), kb.storage_offset() + kb.numel()) << what;
  }
  EXPECT_EQ(seen, layers) << what << ": self-attentions found";
}

}  // namespace pbert::model::testing
