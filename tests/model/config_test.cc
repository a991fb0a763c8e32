#include "model/config.h"

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "model/bert.h"

namespace pbert::model {
namespace {

TEST(ModelConfigTest, TheParameterCountThatSizesTheMemoryCheckIsTheModels) {
  ModelConfig c;
  c.bert.vocab_size(1000).hidden_size(64).num_layers(3).num_heads(4).intermediate_size(96)
      .max_position_embeddings(80);
  BertForPreTraining bert(c.bert);
  int64_t parameters = 0;
  for (const auto& p : bert->parameters()) parameters += p.numel();
  EXPECT_EQ(c.bert.Parameters(), static_cast<double>(parameters));
  EXPECT_TRUE(c.Validate().ok());
  c.bert.hidden_size(1 << 20);  // ~16 TB of training state
  EXPECT_NE(c.Validate().message().find("make it smaller"), std::string::npos);
  c.bert.hidden_size(66);  // not a multiple of 4 heads
  EXPECT_NE(c.Validate().message().find("not a multiple of num_heads"), std::string::npos);
}

}  // namespace
}  // namespace pbert::model
