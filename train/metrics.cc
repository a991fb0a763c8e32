#include "train/metrics.h"

#include <ATen/ATen.h>

namespace pbert::train {

at::Tensor PretrainingMetrics::SumsTensor(const model::PretrainingSums& s) {
  auto d = [](const at::Tensor& t) { return t.detach().to(at::kDouble); };
  return at::stack({d(s.mlm_loss), d(s.mlm_sequence_loss), d(s.mlm_tokens), d(s.mlm_sequences),
                    d(s.mlm_correct), d(s.nsp_loss), d(s.nsp_sequences), d(s.nsp_correct)});
}

void PretrainingMetrics::AddSums(const at::Tensor& sums) {
  // One copy to the host for all eight, not eight.
  at::Tensor all = sums.to(at::kCPU);
  auto v = all.accessor<double, 1>();
  mlm_loss += v[0];
  mlm_sequence_loss += v[1];
  mlm_tokens += v[2];
  mlm_sequences += v[3];
  mlm_correct += v[4];
  nsp_loss += v[5];
  nsp_sequences += v[6];
  nsp_correct += v[7];
}

void PretrainingMetrics::Add(const PretrainingMetrics& o) {
  std::vector<double> mine = ToVector(), theirs = o.ToVector();
  for (size_t i = 0; i < mine.size(); ++i) mine[i] += theirs[i];
  *this = FromVector(mine);
}

std::vector<double> PretrainingMetrics::ToVector() const {
  return {loss,          mlm_loss, mlm_sequence_loss, mlm_tokens,  mlm_sequences, mlm_correct,
          nsp_loss,      nsp_sequences, nsp_correct,  tokens,      rows,          flops};
}

PretrainingMetrics PretrainingMetrics::FromVector(const std::vector<double>& v) {
  PretrainingMetrics m;
  m.loss = v[0];
  m.mlm_loss = v[1];
  m.mlm_sequence_loss = v[2];
  m.mlm_tokens = v[3];
  m.mlm_sequences = v[4];
  m.mlm_correct = v[5];
  m.nsp_loss = v[6];
  m.nsp_sequences = v[7];
  m.nsp_correct = v[8];
  m.tokens = v[9];
  m.rows = v[10];
  m.flops = v[11];
  return m;
}

}  // namespace pbert::train
