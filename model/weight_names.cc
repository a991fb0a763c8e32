#include "model/weight_names.h"

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"

namespace pbert::model {
namespace {

// TensorFlow BERT names and ours; '#' stands for a layer number.
struct TensorFlowName {
  const char* tensorflow;
  const char* ours;
  bool transpose;
};

constexpr TensorFlowName kTensorFlowNames[] = {
    {"bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", false},
    {"bert/embeddings/position_embeddings", "bert.embeddings.position_embeddings.weight", false},
    {"bert/embeddings/token_type_embeddings", "bert.embeddings.token_type_embeddings.weight",
     false},
    {"bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", false},
    {"bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", false},
    {"bert/encoder/layer_#/attention/self/query/kernel",
     "bert.encoder.layer.#.attention.self.query.weight", true},
    {"bert/encoder/layer_#/attention/self/query/bias",
     "bert.encoder.layer.#.attention.self.query.bias", false},
    {"bert/encoder/layer_#/attention/self/key/kernel",
     "bert.encoder.layer.#.attention.self.key.weight", true},
    {"bert/encoder/layer_#/attention/self/key/bias", "bert.encoder.layer.#.attention.self.key.bias",
     false},
    {"bert/encoder/layer_#/attention/self/value/kernel",
     "bert.encoder.layer.#.attention.self.value.weight", true},
    {"bert/encoder/layer_#/attention/self/value/bias",
     "bert.encoder.layer.#.attention.self.value.bias", false},
    {"bert/encoder/layer_#/attention/output/dense/kernel",
     "bert.encoder.layer.#.attention.output.dense.weight", true},
    {"bert/encoder/layer_#/attention/output/dense/bias",
     "bert.encoder.layer.#.attention.output.dense.bias", false},
    {"bert/encoder/layer_#/attention/output/LayerNorm/gamma",
     "bert.encoder.layer.#.attention.output.LayerNorm.weight", false},
    {"bert/encoder/layer_#/attention/output/LayerNorm/beta",
     "bert.encoder.layer.#.attention.output.LayerNorm.bias", false},
    {"bert/encoder/layer_#/intermediate/dense/kernel",
     "bert.encoder.layer.#.intermediate.dense.weight", true},
    {"bert/encoder/layer_#/intermediate/dense/bias", "bert.encoder.layer.#.intermediate.dense.bias",
     false},
    {"bert/encoder/layer_#/output/dense/kernel", "bert.encoder.layer.#.output.dense.weight", true},
    {"bert/encoder/layer_#/output/dense/bias", "bert.encoder.layer.#.output.dense.bias", false},
    {"bert/encoder/layer_#/output/LayerNorm/gamma", "bert.encoder.layer.#.output.LayerNorm.weight",
     false},
    {"bert/encoder/layer_#/output/LayerNorm/beta", "bert.encoder.layer.#.output.LayerNorm.bias",
     false},
    {"bert/pooler/dense/kernel", "bert.pooler.dense.weight", true},
    {"bert/pooler/dense/bias", "bert.pooler.dense.bias", false},
    {"cls/predictions/output_bias", "cls.predictions.bias", false},
    {"cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", true},
    {"cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias", false},
    {"cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight",
     false},
    {"cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias", false},
    // Already [out, in]: the NSP head is a bare matmul with a transposed b.
    {"cls/seq_relationship/output_weights", "cls.seq_relationship.weight", false},
    {"cls/seq_relationship/output_bias", "cls.seq_relationship.bias", false},
};

// Optimizer slots and counters of TensorFlow's BERT trainers (Adam and LAMB
// name their moments adam_m/adam_v), and the object graph of TF2 checkpoints.
bool IsTensorFlowTrainingState(const std::string& name) {
  return absl::EndsWith(name, "/adam_m") || absl::EndsWith(name, "/adam_v") ||
         name == "global_step" || name == "_CHECKPOINTABLE_OBJECT_GRAPH";
}

// Replaces the digits after the first "layer_" with '#'; returns them.
std::string TakeLayerNumber(std::string* name) {
  size_t at = name->find("layer_");
  if (at == std::string::npos) return "";
  size_t begin = at + 6, end = begin;
  while (end < name->size() && std::isdigit(static_cast<unsigned char>((*name)[end]))) ++end;
  if (end == begin) return "";
  std::string number = name->substr(begin, end - begin);
  name->replace(begin, end - begin, "#");
  return number;
}

}  // namespace

MappedName MapTorchName(const std::string& name) {
  std::string out = name;
  if (absl::StartsWith(out, "module.")) out = out.substr(7);
  // NVIDIA's LinearActivation layers (intermediate, pooler, head transform).
  out = absl::StrReplaceAll(out, {{".dense_act.", ".dense."}});
  if (absl::EndsWith(out, "LayerNorm.gamma")) out.replace(out.size() - 5, 5, "weight");
  if (absl::EndsWith(out, "LayerNorm.beta")) out.replace(out.size() - 4, 4, "bias");
  if (out == "cls.predictions.decoder.bias") out = "cls.predictions.bias";
  // The decoder is tied to the word embeddings; position ids are a buffer.
  if (out == "cls.predictions.decoder.weight" || out == "bert.embeddings.position_ids") {
    return {NameFate::kSkipped, name, false};
  }
  return {NameFate::kMapped, out, false};
}

MappedName MapTensorFlowName(const std::string& name) {
  if (IsTensorFlowTrainingState(name)) return {NameFate::kSkipped, name, false};
  std::string pattern = name;
  std::string layer = TakeLayerNumber(&pattern);
  for (const TensorFlowName& entry : kTensorFlowNames) {
    if (pattern == entry.tensorflow) {
      return {NameFate::kMapped, absl::StrReplaceAll(entry.ours, {{"#", layer}}), entry.transpose};
    }
  }
  return {NameFate::kUnknown, name, false};
}

}  // namespace pbert::model
