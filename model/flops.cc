#include "model/flops.h"

namespace pbert::model {

double EncoderMacs(const BertOptions& o, const BatchWork& w) {
  const double h = static_cast<double>(o.hidden_size());
  const double f = static_cast<double>(o.intermediate_size());
  const double layers = static_cast<double>(o.num_layers());
  double macs = w.tokens * layers * (4 * h * h + 2 * h * f);  // Q, K, V, output; feed-forward
  macs += w.squared_lengths * layers * 2 * h;  // scores Q·K and context P·V, over all heads
  return macs;
}

double PretrainingFlops(const BertOptions& o, const BatchWork& w, double masked_tokens) {
  const double h = static_cast<double>(o.hidden_size());
  const double vocab = static_cast<double>(o.vocab_size());
  double macs = EncoderMacs(o, w);
  macs += w.sequences * (h * h + 2 * h);          // pooler, NSP classifier
  macs += masked_tokens * (h * h + h * vocab);  // MLM transform, decoder
  return TrainingFlopsOf(macs);
}

}  // namespace pbert::model
