// Model weights as safetensors files with Hugging Face BertForPreTraining
// names, so weights move both ways. Layout: docs/formats.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace pbert::model {

// Writes every parameter of `module` under its name (the tied MLM decoder
// is not a parameter, so it is written once, as the word embeddings, as
// Hugging Face does). `metadata` goes to the header's "__metadata__".
absl::Status SaveSafetensors(const torch::nn::Module& module, const std::string& path,
                             const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file into name -> tensor (CPU, the file's dtype).
absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensors(const std::string& path);

// Copies the tensors of `path` into the parameters of `module`, converting
// dtypes. Accepts Hugging Face's spellings: tied "cls.predictions.decoder.*"
// copies, the "bert.embeddings.position_ids" buffer, and old "gamma"/"beta"
// LayerNorm names. Fails, changing nothing, with one message listing every
// missing, unexpected and mis-shaped tensor.
absl::Status LoadSafetensors(torch::nn::Module& module, const std::string& path);

}  // namespace pbert::model
