#include "model/bert_options.h"

#include "absl/strings/str_cat.h"

namespace pbert::model {

double BertOptions::Parameters() const {
  const double V = vocab_size(), H = hidden_size(), F = intermediate_size();
  const double layer = 4 * (H * H + H) + 2 * H + (H * F + F) + (F * H + H) + 2 * H;
  // The word embeddings with their padding rows, as the model holds them.
  return static_cast<double>(padded_vocab_size()) * H + (max_position_embeddings() + type_vocab_size()) * H + 2 * H +
         num_layers() * layer + (H * H + H) + (H * H + H + 2 * H) + V + (2 * H + 2);
}

absl::Status BertOptions::Validate() const {
  if (hidden_size() % num_heads() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hidden_size ", hidden_size(),
                                                   " is not a multiple of num_heads ", num_heads()));
  }
  return absl::OkStatus();
}

absl::Status CheckDataFits(const BertOptions& options, uint64_t vocab_size, uint64_t max_len,
                           const std::string& what) {
  if (vocab_size > static_cast<uint64_t>(options.vocab_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " uses a vocabulary of ", vocab_size, " tokens; the model has ", options.vocab_size(),
        " (model.vocab_size): use the vocabulary the model was made for"));
  }
  if (max_len > static_cast<uint64_t>(options.max_position_embeddings())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " holds sequences of up to ", max_len, " tokens; the model has ",
        options.max_position_embeddings(), " positions (model.max_position_embeddings)"));
  }
  return absl::OkStatus();
}

}  // namespace pbert::model
