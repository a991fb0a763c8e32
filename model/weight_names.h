// Where the tensor names of each checkpoint format lead among our parameter
// names (Hugging Face BertForPreTraining's). Every mapping lives in the one
// table of weight_names.cc; docs/formats.md lists it.
#pragma once

#include <string>

namespace pbert::model {

enum class NameFate {
  kMapped,   // `name` is one of our parameters
  kSkipped,  // optimizer state, a step counter, a tied copy or a buffer
  kUnknown,  // none of the above: the loader reports it as unexpected
};

struct MappedName {
  NameFate fate = NameFate::kUnknown;
  std::string name;        // our name when kMapped; the input name otherwise
  bool transpose = false;  // TensorFlow dense kernels are [in, out]; ours [out, in]
};

// A name from a PyTorch state dict: Hugging Face's, or NVIDIA's MLPerf
// spelling (`dense_act` for the fused dense + activation layers, a
// `module.` prefix from DistributedDataParallel, LayerNorm gamma/beta).
MappedName MapTorchName(const std::string& name);

// A name from Google's TensorFlow BERT checkpoints (as MLCommons publishes
// the phase-1 checkpoint), e.g. bert/encoder/layer_3/attention/self/query/kernel.
MappedName MapTensorFlowName(const std::string& name);

}  // namespace pbert::model
