// BERT's weights in files: read from any tensor file format (formats/) into
// our parameter names, which are Hugging Face BertForPreTraining's, through
// the one name table (model/weight_names.h); written as safetensors under
// those names, so weights move both ways. docs/formats.md lists the names.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/named_tensors.h"
#include "formats/tensor_file.h"

namespace torch::nn {
class Module;
}

namespace pbert::model {

struct Weights {
  formats::TensorFormat format = formats::TensorFormat::kSafetensors;
  std::map<std::string, at::Tensor> tensors;  // by our (Hugging Face) names
  std::vector<std::string> skipped;           // optimizer slots, counters, tied copies, non-tensors
  std::vector<std::string> unknown;           // names no mapping knows
};

// Reads any weight file into our names, TensorFlow kernels transposed; a
// checkpoint folder of `train` stands for its model.safetensors. Two
// different tensors that map to one name are an error.
absl::StatusOr<Weights> ReadWeights(const std::string& path);

// Copies the tensors of `path` (any format) into the parameters of `module`
// (FileTensors: padding rows are set to 0), converting floating dtypes;
// skipped names are listed at debug level.
// Fails, changing nothing, with one message listing every missing,
// unexpected, mis-shaped and non-floating tensor. With `take`, only the
// names it takes are loaded and looked for (the file's other tensors and
// the module's other parameters are left as they are).
absl::Status LoadWeights(torch::nn::Module& module, const std::string& path,
                         const std::function<bool(const std::string&)>& take = {});

// OK if every parameter of `module` is finite; else an error naming the
// first that holds inf or NaN, and `path`, where it came from.
absl::Status CheckFiniteWeights(const torch::nn::Module& module, const std::string& path);

// Every parameter of `module` under its name as files hold it: the word
// embeddings of a BertForPreTraining with a padded vocabulary
// (model.vocab_padding) without their padding rows (a view); the others as
// they are. What SaveWeights writes and LoadWeights fills.
formats::NamedTensors FileTensors(const torch::nn::Module& module);

// Writes every parameter of `module` under its name as safetensors (the
// tied MLM decoder is not a parameter, so it is written once, as the word
// embeddings, as Hugging Face does). `metadata` goes to "__metadata__".
absl::Status SaveWeights(const torch::nn::Module& module, const std::string& path,
                         const std::map<std::string, std::string>& metadata = {},
                         Existing existing = Existing::kReplace);

}  // namespace pbert::model
