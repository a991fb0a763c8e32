#include "model/weights.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "formats/safetensors.h"
#include "model/bert.h"
#include "model/task_heads.h"
#include "model/weight_names.h"

namespace pbert::model {
namespace {

std::string ShapeText(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// The weights file `given` stands for: itself, or a checkpoint folder's
// model.safetensors; a folder without one is named for what it is.
absl::StatusOr<std::string> WeightsPath(const std::string& given) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(given, error)) return given;
  const fs::path dir(given);
  if (fs::is_regular_file(dir / "model.safetensors", error))
    return (dir / "model.safetensors").string();
  if (fs::exists(dir / "model.safetensors", error)) {
    return absl::InvalidArgumentError(
        absl::StrCat((dir / "model.safetensors").string(), " is not a file"));
  }
  if (fs::exists(dir / "trainer_state.json", error)) {
    return absl::NotFoundError(absl::StrCat("the checkpoint ", given,
                                            " has no model.safetensors (removed or lost); take an ",
                                            "earlier checkpoint of its run"));
  }
  if (fs::is_directory(dir / "checkpoints", error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(given, " is a run folder; give one of its checkpoints (", given,
                     "/checkpoints/step-N) or a weights file"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(given,
                   " is a folder without model.safetensors; give a weights file (safetensors, "
                   "torch.save or TensorFlow checkpoint) or a checkpoint folder"));
}

// The rows each padded parameter has in files (BertForPreTraining::FileRows).
std::map<std::string, int64_t> FileRowsOf(const torch::nn::Module& module) {
  if (const auto* bert = module.as<BertForPreTrainingImpl>()) return bert->FileRows();
  // A task's head over BERT's encoder, named "bert" as Hugging Face names it.
  for (const auto& child : module.named_children()) {
    if (child.key() != "bert") continue;
    if (const auto* bert = child.value()->as<BertModelImpl>()) return PaddedFileRows(bert->options);
  }
  return {};
}

}  // namespace

formats::NamedTensors FileTensors(const torch::nn::Module& module) {
  const std::map<std::string, int64_t> rows = FileRowsOf(module);
  formats::NamedTensors out;
  for (const auto& item : module.named_parameters()) {
    const auto found = rows.find(item.key());
    out.emplace_back(item.key(),
                     found == rows.end() ? item.value() : item.value().narrow(0, 0, found->second));
  }
  return out;
}

absl::StatusOr<Weights> ReadWeights(const std::string& given) {
  // A checkpoint folder of ours stands for its weights.
  ASSIGN_OR_RETURN(const std::string path, WeightsPath(given));
  ASSIGN_OR_RETURN(formats::TensorFile file, formats::ReadTensorFile(path));
  Weights out;
  out.format = file.format;
  out.skipped = std::move(file.skipped);
  const std::function<MappedName(const std::string&)> map_name =
      file.format == formats::TensorFormat::kTensorBundle ? MapTensorFlowName : MapTorchName;
  for (auto& [name, tensor] : file.tensors) {
    MappedName mapped = map_name(name);
    if (mapped.fate == NameFate::kSkipped) {
      out.skipped.push_back(name);
    } else if (mapped.fate == NameFate::kUnknown) {
      out.unknown.push_back(name);
    } else {
      at::Tensor value = mapped.transpose && tensor.dim() == 2 ? tensor.t().contiguous() : tensor;
      auto [it, added] = out.tensors.emplace(mapped.name, value);
      if (added) continue;
      // Hugging Face state dicts hold the tied MLM bias twice, equal.
      if (!it->second.sizes().equals(value.sizes()) || !at::equal(it->second, value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": two different tensors are both read as '", mapped.name, "'"));
      }
      out.skipped.push_back(name);
    }
  }
  return out;
}

namespace {

// What of `path` does not fit the model, named in one line; OK where
// nothing is missing, unexpected, of another shape or not floating-point.
absl::Status Mismatch(const std::string& path, const std::vector<std::string>& missing,
                      const std::vector<std::string>& unexpected,
                      const std::vector<std::string>& misshaped,
                      const std::vector<std::string>& mistyped) {
  std::vector<std::string> parts;
  for (const auto& [what, list] : {std::pair{"missing", &missing},
                                   {"unexpected", &unexpected},
                                   {"mis-shaped", &misshaped},
                                   {"not floating-point", &mistyped}}) {
    if (!list->empty()) parts.push_back(absl::StrCat(what, ": ", NameList(*list)));
  }
  if (parts.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, " does not match the model config (", absl::StrJoin(parts, "; "),
                   "); check the model section and the vocabulary"));
}

}  // namespace

absl::Status LoadWeights(torch::nn::Module& module, const std::string& path,
                         const std::function<bool(const std::string&)>& take) {
  ASSIGN_OR_RETURN(Weights weights, ReadWeights(path));
  if (!weights.skipped.empty()) {
    logging::Get("model")->debug("{}: skipped {}", path, NameList(weights.skipped, 50));
  }
  // The parameters as files hold them: a padded one's file rows are a view.
  auto views = FileTensors(module);
  if (take) {
    views.erase(std::remove_if(views.begin(), views.end(),
                               [&](const auto& view) { return !take(view.first); }),
                views.end());
  }
  const std::map<std::string, at::Tensor> params(views.begin(), views.end());
  std::map<std::string, at::Tensor> found;
  std::vector<std::string> unexpected = weights.unknown, misshaped, mistyped, missing;
  for (const auto& [name, tensor] : weights.tensors) {
    if (take && !take(name)) continue;
    const auto at_name = params.find(name);
    const at::Tensor* target = at_name == params.end() ? nullptr : &at_name->second;
    if (target == nullptr) {
      unexpected.push_back(name);
    } else if (!target->sizes().equals(tensor.sizes())) {
      misshaped.push_back(absl::StrCat(name, " (file ", ShapeText(tensor.sizes()), ", model ",
                                       ShapeText(target->sizes()), ")"));
    } else if (!at::isFloatingType(tensor.scalar_type())) {
      // Integers relabelled as weights would load as nonsense numbers.
      mistyped.push_back(absl::StrCat(name, " (", c10::toString(tensor.scalar_type()), ")"));
    } else {
      found[name] = tensor;
    }
  }
  auto named_in = [](const std::vector<std::string>& list, const std::string& name) {
    return std::any_of(list.begin(), list.end(),
                       [&](const std::string& m) { return absl::StartsWith(m, name + " "); });
  };
  for (const auto& [name, view] : views) {
    if (found.count(name) == 0 && !named_in(misshaped, name) && !named_in(mistyped, name)) {
      missing.push_back(name);
    }
  }
  RETURN_IF_ERROR(Mismatch(path, missing, unexpected, misshaped, mistyped));
  at::NoGradGuard no_grad;
  for (auto& [name, view] : views) view.copy_(found.at(name));
  auto all = module.named_parameters();
  for (const auto& [name, rows] : FileRowsOf(module)) {
    if (take && !take(name)) continue;
    at::Tensor& padded = all[name];
    padded.narrow(0, rows, padded.size(0) - rows).zero_();
  }
  return absl::OkStatus();
}

absl::Status CheckFiniteWeights(const torch::nn::Module& module, const std::string& path) {
  for (const auto& item : module.named_parameters()) {
    if (!item.value().isfinite().all().item<bool>()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", item.key(),
                       " holds inf or NaN; these weights come from a run that "
                       "diverged: take an earlier checkpoint"));
    }
  }
  return absl::OkStatus();
}

absl::Status SaveWeights(const torch::nn::Module& module, const std::string& path,
                         const std::map<std::string, std::string>& metadata, Existing existing) {
  formats::NamedTensors named;
  for (auto& [name, view] : FileTensors(module)) named.emplace_back(name, view);
  return formats::WriteSafetensors(named, path, metadata, existing);
}

}  // namespace pbert::model
