// Model weights as safetensors files with Hugging Face BertForPreTraining
// names, so weights move both ways; and the checkpoints other BERT trainers
// write (PyTorch's torch.save, TensorFlow's tensor bundles), read into the
// same names. Layouts: docs/formats.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pbert::model {

// Writes every parameter of `module` under its name (the tied MLM decoder
// is not a parameter, so it is written once, as the word embeddings, as
// Hugging Face does). `metadata` goes to the header's "__metadata__".
absl::Status SaveSafetensors(const torch::nn::Module& module, const std::string& path,
                             const std::map<std::string, std::string>& metadata = {});

// Writes `tensors` under their names, in name order.
absl::Status SaveSafetensors(const std::map<std::string, at::Tensor>& tensors,
                             const std::string& path,
                             const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file into name -> tensor (CPU, the file's dtype).
absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensors(const std::string& path);

// The weight file formats, told apart by their contents: "safetensors",
// "torch" (torch.save zip archives: a state dict, bare or under "model") and
// "tensorflow" (a tensor bundle, named by its prefix or its .index file).
std::vector<std::string> WeightFormatNames();

struct Weights {
  std::string format;                         // one of WeightFormatNames()
  std::map<std::string, at::Tensor> tensors;  // by our (Hugging Face) names
  std::vector<std::string> skipped;  // optimizer slots, counters, tied copies, non-tensors
  std::vector<std::string> unknown;  // names no mapping knows
};

// Reads any weight format into our names (model/weight_names.h), TensorFlow
// kernels transposed; a checkpoint folder of `train` stands for its
// model.safetensors. Two different tensors that map to one name are an
// error.
absl::StatusOr<Weights> ReadWeights(const std::string& path);

// Copies the tensors of `path` (any format) into the parameters of `module`,
// converting dtypes; skipped names are listed at debug level. Fails,
// changing nothing, with one message listing every missing, unexpected and
// mis-shaped tensor.
absl::Status LoadWeights(torch::nn::Module& module, const std::string& path);

}  // namespace pbert::model
