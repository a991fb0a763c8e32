#include "data/instance.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pbert::data {

absl::Status ValidateInstance(const Instance& in, const InstanceLimits& limits) {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(what); };
  const int length = in.length();
  if (length < 1 || length > static_cast<int>(limits.max_len)) {
    return bad(absl::StrCat("length ", length, " outside 1..", limits.max_len));
  }
  if (in.segment_ids.size() != in.input_ids.size()) return bad("segment ids do not match tokens");
  int a_length = 0;
  while (a_length < length && in.segment_ids[a_length] == 0) ++a_length;
  for (int i = a_length; i < length; ++i) {
    if (in.segment_ids[i] != 1) return bad("segments are not [CLS] A [SEP] B [SEP] (0s then 1s)");
  }
  if (in.masked_positions.size() != in.masked_ids.size() ||
      in.masked_positions.size() > limits.max_predictions) {
    return bad(absl::StrCat(in.masked_positions.size(), " masked tokens; at most ",
                            limits.max_predictions, " allowed"));
  }
  for (size_t m = 0; m < in.masked_positions.size(); ++m) {
    if (in.masked_positions[m] <= (m == 0 ? -1 : in.masked_positions[m - 1]) ||
        in.masked_positions[m] >= length) {
      return bad("masked positions must increase and lie inside the sequence");
    }
  }
  auto valid_id = [&](int32_t id) {
    return id >= 0 && static_cast<uint32_t>(id) < limits.vocab_size;
  };
  if (!std::all_of(in.input_ids.begin(), in.input_ids.end(), valid_id) ||
      !std::all_of(in.masked_ids.begin(), in.masked_ids.end(), valid_id)) {
    return bad(absl::StrCat("a token id outside the vocabulary of ", limits.vocab_size));
  }
  if (in.next_sentence_label != 0 && in.next_sentence_label != 1) {
    return bad("next_sentence_label must be 0 or 1");
  }
  return absl::OkStatus();
}

}  // namespace pbert::data
