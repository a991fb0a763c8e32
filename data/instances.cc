#include "data/instances.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "common/parallel.h"
#include "common/status.h"
#include "data/random.h"

namespace pbert::data {
namespace {

constexpr uint64_t kShuffleStream = ~0ull;

void TruncatePair(std::vector<int32_t>& a, std::vector<int32_t>& b, size_t max_tokens, Rng& rng) {
  // Token by token from the longer segment, from the front or the back to
  // avoid biasing towards either end, as create_pretraining_data.py does;
  // counted first and cut once, so that a segment of millions of tokens (a
  // huge one-line input) costs linear time, not quadratic.
  size_t a_size = a.size(), b_size = b.size();
  size_t a_front = 0, a_back = 0, b_front = 0, b_back = 0;
  while (a_size + b_size > max_tokens) {
    const bool from_a = a_size > b_size;
    const bool front = rng.Uniform() < 0.5;
    (from_a ? (front ? a_front : a_back) : (front ? b_front : b_back)) += 1;
    (from_a ? a_size : b_size) -= 1;
  }
  a.erase(a.end() - a_back, a.end());
  a.erase(a.begin(), a.begin() + a_front);
  b.erase(b.end() - b_back, b.end());
  b.erase(b.begin(), b.begin() + b_front);
}

void MaskTokens(Instance& in, const Tokenizer& tokenizer, const InstanceOptions& o, Rng& rng) {
  const SpecialTokens& special = tokenizer.vocabulary().special();
  // Candidate groups (one token, or a whole word) as slices of `positions`;
  // a piece continues the latest group, as in the reference.
  std::vector<int32_t> positions;
  std::vector<std::pair<uint32_t, uint32_t>> groups;  // (first, count) in positions
  positions.reserve(in.length());
  groups.reserve(in.length());
  for (int i = 0; i < in.length(); ++i) {
    int32_t id = in.input_ids[i];
    if (id == special.cls || id == special.sep) continue;
    if (o.whole_word_mask && !groups.empty() && !tokenizer.StartsWord(id)) {
      ++groups.back().second;
    } else {
      groups.push_back({static_cast<uint32_t>(positions.size()), 1});
    }
    positions.push_back(i);
  }
  rng.Shuffle(groups);
  // Python's round(): halves to even, as std::nearbyint in the default mode.
  const int to_predict =
      std::min(o.max_predictions_per_seq,
               std::max(1, static_cast<int>(std::nearbyint(in.length() * o.masked_lm_prob))));
  std::vector<std::pair<int32_t, int32_t>> masked;  // (position, true id)
  std::vector<bool> covered(in.length(), false);
  for (const auto& [first, count] : groups) {
    if (static_cast<int>(masked.size()) >= to_predict) break;
    if (static_cast<int>(masked.size() + count) > to_predict) continue;
    const int32_t* group = positions.data() + first;
    if (std::any_of(group, group + count, [&](int32_t i) { return covered[i]; })) continue;
    for (uint32_t k = 0; k < count; ++k) {
      const int32_t i = group[k];
      covered[i] = true;
      const int32_t original = in.input_ids[i];
      if (rng.Uniform() < 0.8) {
        in.input_ids[i] = special.mask;
      } else if (rng.Uniform() >= 0.5) {
        in.input_ids[i] = static_cast<int32_t>(rng.Int(0, tokenizer.vocabulary().size() - 1));
      }
      masked.push_back({i, original});
    }
  }
  std::sort(masked.begin(), masked.end());
  for (const auto& [position, id] : masked) {
    in.masked_positions.push_back(position);
    in.masked_ids.push_back(id);
  }
}

void FromDocument(const std::vector<const TokenizedDocument*>& documents, size_t index,
                  const Tokenizer& tokenizer, const InstanceOptions& o, Rng& rng,
                  std::vector<Instance>* out) {
  const TokenizedDocument& document = *documents[index];
  const SpecialTokens& special = tokenizer.vocabulary().special();
  const int max_tokens = o.max_seq_len - 3;  // [CLS], [SEP], [SEP]
  int target = max_tokens;
  if (rng.Uniform() < o.short_seq_prob) target = static_cast<int>(rng.Int(2, max_tokens));

  std::vector<const std::vector<int32_t>*> chunk;
  int chunk_length = 0;
  for (size_t i = 0; i < document.size(); ++i) {
    chunk.push_back(&document[i]);
    chunk_length += static_cast<int>(document[i].size());
    if (i + 1 != document.size() && chunk_length < target) continue;
    size_t a_end = chunk.size() >= 2 ? static_cast<size_t>(rng.Int(1, chunk.size() - 1)) : 1;
    std::vector<int32_t> a, b;
    for (size_t j = 0; j < a_end; ++j) a.insert(a.end(), chunk[j]->begin(), chunk[j]->end());
    bool random_next = chunk.size() == 1 || rng.Uniform() < 0.5;
    if (random_next) {
      const int b_target = target - static_cast<int>(a.size());
      size_t other = index;
      for (int tries = 0; tries < 10 && other == index; ++tries) {
        other = static_cast<size_t>(rng.Int(0, documents.size() - 1));
      }
      const TokenizedDocument& source = *documents[other];
      for (size_t j = static_cast<size_t>(rng.Int(0, source.size() - 1)); j < source.size(); ++j) {
        b.insert(b.end(), source[j].begin(), source[j].end());
        if (static_cast<int>(b.size()) >= b_target) break;
      }
      // The sentences not used as A go back to the document.
      i -= chunk.size() - a_end;
    } else {
      for (size_t j = a_end; j < chunk.size(); ++j) {
        b.insert(b.end(), chunk[j]->begin(), chunk[j]->end());
      }
    }
    TruncatePair(a, b, max_tokens, rng);
    chunk.clear();
    chunk_length = 0;
    if (a.empty() || b.empty()) continue;
    Instance in;
    in.input_ids.reserve(a.size() + b.size() + 3);
    in.input_ids.push_back(special.cls);
    in.input_ids.insert(in.input_ids.end(), a.begin(), a.end());
    in.input_ids.push_back(special.sep);
    in.segment_ids.assign(in.input_ids.size(), 0);
    in.input_ids.insert(in.input_ids.end(), b.begin(), b.end());
    in.input_ids.push_back(special.sep);
    in.segment_ids.resize(in.input_ids.size(), 1);
    in.next_sentence_label = random_next ? 1 : 0;
    MaskTokens(in, tokenizer, o, rng);
    out->push_back(std::move(in));
  }
}

}  // namespace

absl::StatusOr<std::vector<Instance>> CreateInstances(const std::vector<TokenizedDocument>& all,
                                                      const Tokenizer& tokenizer,
                                                      const InstanceOptions& options, int threads) {
  std::vector<const TokenizedDocument*> documents;
  for (const auto& d : all) {
    if (!d.empty()) documents.push_back(&d);
  }
  if (documents.empty()) return std::vector<Instance>();
  const size_t n = documents.size();
  const size_t jobs = static_cast<size_t>(options.dupe_factor) * n;
  std::vector<std::vector<Instance>> per_job(jobs);
  const size_t workers = std::max<size_t>(1, std::min<size_t>(threads, jobs));
  RETURN_IF_ERROR(RunWorkers(
      static_cast<int>(workers),
      [&](int w) {
        for (size_t job = jobs * w / workers; job < jobs * (w + 1) / workers; ++job) {
          Rng rng(options.seed, job);
          FromDocument(documents, job % n, tokenizer, options, rng, &per_job[job]);
        }
      },
      "making instances"));
  std::vector<Instance> instances;
  for (auto& v : per_job) {
    for (auto& in : v) instances.push_back(std::move(in));
  }
  Rng rng(options.seed, kShuffleStream);
  rng.Shuffle(instances);
  return instances;
}

}  // namespace pbert::data
