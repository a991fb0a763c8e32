#include "train/metrics.h"

#include <ATen/ATen.h>

#include "model/inputs.h"

namespace pbert::train {

using M = PretrainingMetrics;

at::Tensor PretrainingMetrics::DeviceSums(const model::PretrainingSums& s, const at::Tensor& loss) {
  auto d = [](const at::Tensor& t) { return t.detach().to(at::kDouble); };
  // In kMetricFields order: loss, then the sums.
  return at::stack(
      {loss.defined() ? d(loss) : at::zeros({}, s.nsp_loss.options().dtype(at::kDouble)),
       d(s.mlm_loss), d(s.mlm_sequence_loss), d(s.mlm_tokens), d(s.mlm_sequences), d(s.mlm_correct),
       d(s.nsp_loss), d(s.nsp_sequences), d(s.nsp_correct)});
}

at::Tensor PretrainingMetrics::WithDeviceSums(const at::Tensor& device_sums,
                                              const c10::Device& device) const {
  const std::vector<double> all = ToVector();
  const std::vector<double> known(all.begin() + kDeviceFields, all.end());
  at::Tensor host = model::HostToDevice(at::tensor(known, at::kDouble), device);
  at::Tensor computed = device_sums.defined()
                            ? device_sums
                            : at::zeros({static_cast<int64_t>(kDeviceFields)},
                                        at::TensorOptions().dtype(at::kDouble).device(device));
  return at::cat({computed, host});
}

void PretrainingMetrics::Add(const PretrainingMetrics& o) {
  for (double M::*field : kMetricFields) this->*field += o.*field;
}

std::vector<double> PretrainingMetrics::ToVector() const {
  std::vector<double> out;
  for (double M::*field : kMetricFields) out.push_back(this->*field);
  return out;
}

PretrainingMetrics PretrainingMetrics::FromVector(const std::vector<double>& values) {
  PretrainingMetrics m;
  for (size_t i = 0; i < kMetricFields.size() && i < values.size(); ++i) {
    m.*kMetricFields[i] = values[i];
  }
  return m;
}

}  // namespace pbert::train
