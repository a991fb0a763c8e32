#include "tasks/token_classification.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/printable.h"
#include "common/status.h"
#include "common/text_lines.h"
#include "model/dropout.h"
#include "model/task_heads.h"

namespace pbert::tasks {
namespace {

namespace nn = torch::nn;

// The tensors of Inputs::task, over the [N,L] sequence slots
// (Inputs::sequence_token): each token's class (0 where it has none), its
// weight (1 where it has one) and each sequence's feature.
enum TokenTensor { kTokenLabel, kTokenWeight, kTokenFeature };

const std::vector<std::string>& Conll2003Tags() {
  static const std::vector<std::string> tags = {"O",     "B-PER", "I-PER",  "B-ORG", "I-ORG",
                                                "B-LOC", "I-LOC", "B-MISC", "I-MISC"};
  return tags;
}

// BERT with a classifier on every token, named and nested as Hugging Face's
// BertForTokenClassification (whose encoder has no pooler: ours is left
// untrained and unexported).
class TokenClassifierImpl : public nn::Cloneable<TokenClassifierImpl> {
 public:
  TokenClassifierImpl(const model::BertOptions& options, int64_t labels)
      : options(options), labels(labels) {
    reset();
  }
  void reset() override {
    bert = register_module("bert", model::BertModel(options));
    classifier = register_module("classifier", nn::Linear(options.hidden_size(), labels));
    model::InitBertWeights(*this, bert);
  }
  // [N,L,labels]: the logits of each sequence's own tokens
  // (Inputs::sequence_token; finite at its padding slots, which weigh 0).
  at::Tensor forward(const model::Inputs& inputs) {
    const at::Tensor hidden = bert(inputs).reshape({-1, options.hidden_size()});
    const at::Tensor& tokens = inputs.sequence_token;
    const at::Tensor mine = hidden.index_select(0, tokens.reshape({-1}));
    return model::Fp32Linear(classifier,
                             model::Dropout(mine, options.hidden_dropout(), is_training()))
        .view({tokens.size(0), tokens.size(1), labels});
  }

  model::BertOptions options;
  int64_t labels;
  model::BertModel bert{nullptr};
  nn::Linear classifier{nullptr};
};
TORCH_MODULE(TokenClassifier);

const std::vector<std::string>& TokenSumNames() {
  static const std::vector<std::string> names = {"labeled_tokens", "correct"};
  return names;
}

class TokenClassTask : public FineTuningTask {
 public:
  TokenClassTask(std::string name, std::unique_ptr<PackedSet> train,
                 std::vector<PackedSet> evaluation, FineTuning parts, int64_t labels)
      : FineTuningTask(std::move(name), std::move(train), std::move(evaluation), std::move(parts)),
        labels_(labels) {}

  TaskModel MakeModel(const model::BertOptions& options) const override {
    auto impl = std::make_shared<TokenClassifierImpl>(options, labels_);
    return {impl, impl->bert};
  }
  absl::StatusOr<Totals> AddInputs(const PackedSet& set, const data::PackedBatch& batch,
                                   const model::InputPlan& plan,
                                   model::Inputs* inputs) const override {
    ASSIGN_OR_RETURN(const std::vector<Feature>* features, FeaturesOf(set));
    ASSIGN_OR_RETURN(const std::vector<int64_t> records, RecordsOf(*features, batch));
    const int64_t n = AddSequenceTokens(batch, plan, inputs);
    const int64_t L = inputs->sequence_token.size(1);
    at::Tensor label = at::zeros({n, L}, at::kLong);
    at::Tensor weight = at::zeros({n, L}, at::kDouble);
    at::Tensor feature = at::full({n}, static_cast<int64_t>(features->size()), at::kLong);
    auto labels = label.accessor<int64_t, 2>();
    auto weights = weight.accessor<double, 2>();
    auto owners = feature.accessor<int64_t, 1>();
    double labeled = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      const std::vector<int32_t>& tags = (*features)[records[i]].token_labels;
      for (size_t j = 0; j < tags.size() && static_cast<int64_t>(j) < L; ++j) {
        if (tags[j] < 0) continue;
        labels[i][j] = tags[j];
        weights[i][j] = 1.0;
        labeled += 1;
      }
      owners[static_cast<int64_t>(i)] = records[i];
    }
    inputs->task = {label, weight, feature};
    return Totals{labeled};
  }
  const std::vector<std::string>& TotalNames() const override {
    static const std::vector<std::string> names = {"labeled_tokens"};
    return names;
  }
  Outputs Forward(torch::nn::Module& model, const model::Inputs& inputs) const override {
    return {ModuleAs<TokenClassifierImpl>(model).forward(inputs)};
  }
  // Each labeled token's cross-entropy over the step's labeled tokens (the
  // mean run_ner.py's loss takes over a batch, here over the whole step).
  MicroBatchSums Sums(const Outputs& outputs, const model::Inputs& inputs,
                      const at::Tensor& totals) const override {
    const at::Tensor& label = inputs.task[kTokenLabel];
    const at::Tensor& weight = inputs.task[kTokenWeight];
    const at::Tensor picked =
        at::log_softmax(outputs[0].to(at::kDouble), -1).gather(-1, label.unsqueeze(-1)).squeeze(-1);
    const at::Tensor sum = (picked.neg() * weight).sum();
    const at::Tensor correct = (outputs[0].argmax(-1).eq(label).to(at::kDouble) * weight).sum();
    const at::Tensor loss = sum / totals[0].clamp_min(1.0).to(sum.scalar_type());
    return {loss, at::stack({weight.sum().detach(), correct.detach()})};
  }
  const std::vector<std::string>& SumNames() const override { return TokenSumNames(); }
  Metrics TrainMetrics(const std::vector<double>& sums) const override {
    return {{"token_accuracy", sums[0] > 0 ? sums[1] / sums[0] : 0.0}};
  }
  double TrainingFlops(const model::BertOptions& options, const model::BatchWork& work,
                       const Totals&) const override {
    // The classifier over every token.
    const double h = static_cast<double>(options.hidden_size());
    return model::TrainingFlopsOf(model::EncoderMacs(options, work) +
                                  work.tokens * h * static_cast<double>(labels_));
  }

 private:
  int64_t labels_;
};

// A CoNLL file of the task: its sentences, each word's first token in its
// feature (-1: none, the word cut or of no token) and whether it has tags.
struct ConllFile {
  std::string path;
  std::vector<TaggedSentence> sentences;
  std::vector<std::vector<int32_t>> first_tokens;
  bool labeled = true;
};

// Each sentence's feature: [CLS], the words' pieces, [SEP], at most
// `max_len` tokens (the pieces past it cut, as run_ner.py truncates); each
// word's tag on its first piece. An unknown tag or a sentence of no token
// is an error naming the file and line.
absl::StatusOr<std::vector<Feature>> TokenFeatures(ConllFile* file,
                                                   const std::vector<std::string>& tags,
                                                   const data::Tokenizer& tokenizer, int max_len,
                                                   uint64_t* cut) {
  std::map<std::string, int32_t> classes;
  for (size_t i = 0; i < tags.size(); ++i) classes[tags[i]] = static_cast<int32_t>(i);
  const data::SpecialTokens& special = tokenizer.vocabulary().special();
  std::vector<Feature> features;
  features.reserve(file->sentences.size());
  file->first_tokens.clear();
  for (const TaggedSentence& s : file->sentences) {
    Feature f;
    std::vector<int32_t>& ids = f.sequence.input_ids;
    ids.push_back(special.cls);
    f.token_labels.push_back(-1);
    std::vector<int32_t>& first = file->first_tokens.emplace_back(s.words.size(), -1);
    for (size_t w = 0; w < s.words.size(); ++w) {
      int32_t label = -1;
      if (file->labeled) {
        const auto known = classes.find(s.tags[w]);
        if (known == classes.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(file->path, ":", s.line + w, ": the tag \"", Printable(s.tags[w]),
                           "\" is not one of the task's (", absl::StrJoin(tags, " "),
                           "); give every tag in finetune.labels, or train on a file that has it"));
        }
        label = known->second;
      }
      const std::vector<int32_t> pieces = tokenizer.Encode(s.words[w]);
      for (size_t p = 0; p < pieces.size(); ++p) {
        if (static_cast<int>(ids.size()) >= max_len - 1) {
          *cut += p == 0 ? 1 : 0;
          break;
        }
        if (p == 0) first[w] = static_cast<int32_t>(ids.size());
        ids.push_back(pieces[p]);
        f.token_labels.push_back(p == 0 ? label : -1);
      }
    }
    if (ids.size() == 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          file->path, ":", s.line, ": a sentence whose words give no token (",
          Printable(absl::StrJoin(s.words, " ")), "); remove it or give words of text"));
    }
    ids.push_back(special.sep);
    f.token_labels.push_back(-1);
    f.sequence.segment_ids.assign(ids.size(), 0);
    features.push_back(std::move(f));
  }
  return features;
}

// Each sentence's predicted class at each token, gathered into its
// feature's row of an [F+1, max_len] tensor (the last row takes the
// padding sequences); scored as conlleval scores, or written in CoNLL's
// layout.
class TokenEvaluation : public SetEvaluation {
 public:
  TokenEvaluation(std::shared_ptr<const ConllFile> file, std::vector<std::string> tags,
                  int64_t max_len, const c10::Device& device)
      : file_(std::move(file)),
        tags_(std::move(tags)),
        gathered_(at::zeros({static_cast<int64_t>(file_->sentences.size()) + 1, max_len},
                            at::TensorOptions().dtype(at::kFloat).device(device))) {}

  void Add(const Outputs& outputs, const model::Inputs& inputs) override {
    const at::Tensor predicted = outputs[0].argmax(-1).to(at::kFloat);  // [N,L]
    const int64_t room = gathered_.size(1) - predicted.size(1);
    gathered_.index_copy_(0, inputs.task[kTokenFeature],
                          at::constant_pad_nd(predicted, {0, room}, 0));
  }
  const at::Tensor& Shared() const override { return gathered_; }
  absl::StatusOr<Scored> Score(const at::Tensor& summed) override {
    const at::Tensor host = summed.to(at::kCPU, at::kFloat).contiguous();
    const auto rows = host.accessor<float, 2>();
    std::vector<std::vector<std::string>> predicted(file_->sentences.size());
    std::string conll;
    for (size_t s = 0; s < file_->sentences.size(); ++s) {
      const TaggedSentence& sentence = file_->sentences[s];
      for (size_t w = 0; w < sentence.words.size(); ++w) {
        const int32_t token = file_->first_tokens[s][w];
        // A word cut from its sentence (or of no token) is predicted O.
        const auto k = token < 0 ? 0 : static_cast<size_t>(rows[s][token]);
        predicted[s].push_back(token < 0 || k >= tags_.size() ? "O" : tags_[k]);
        absl::StrAppend(&conll, sentence.words[w], " ",
                        file_->labeled ? absl::StrCat(sentence.tags[w], " ") : "",
                        predicted[s].back(), "\n");
      }
      conll += "\n";
    }
    Scored scored;
    scored.counts = {{"sentences", static_cast<double>(file_->sentences.size())}};
    scored.files = {{"predictions.txt", std::move(conll)}};
    if (!file_->labeled) return scored;
    std::vector<std::vector<std::string>> gold;
    for (const TaggedSentence& sentence : file_->sentences) gold.push_back(sentence.tags);
    const EntityScores e = ScoreEntities(gold, predicted);
    scored.metrics = {{"f1", e.f1()},
                      {"precision", e.precision()},
                      {"recall", e.recall()},
                      {"accuracy", e.accuracy()}};
    scored.counts.emplace_back("entities", static_cast<double>(e.gold));
    return scored;
  }

 private:
  std::shared_ptr<const ConllFile> file_;
  std::vector<std::string> tags_;
  at::Tensor gathered_;
};

// A tag's prefix and type as seqeval splits it: "B-PER" is B and PER, "O"
// is O (of type "_").
std::pair<char, std::string> SplitTag(const std::string& tag) {
  if (tag.empty()) return {'O', "_"};
  const size_t dash = tag.find('-', 1);
  std::string type = dash == std::string::npos ? tag.substr(1) : tag.substr(dash + 1);
  return {tag[0], type.empty() ? "_" : type};
}

bool EndOfChunk(char prev, char tag, const std::string& prev_type, const std::string& type) {
  return prev == 'E' || prev == 'S' || (prev == 'B' && (tag == 'B' || tag == 'S' || tag == 'O')) ||
         (prev == 'I' && (tag == 'B' || tag == 'S' || tag == 'O')) ||
         (prev != 'O' && prev != '.' && prev_type != type);
}

bool StartOfChunk(char prev, char tag, const std::string& prev_type, const std::string& type) {
  return tag == 'B' || tag == 'S' ||
         ((prev == 'E' || prev == 'S' || prev == 'O') && (tag == 'E' || tag == 'I')) ||
         (tag != 'O' && tag != '.' && prev_type != type);
}

}  // namespace

absl::StatusOr<std::vector<TaggedSentence>> ReadConll(const std::string& path, bool labeled) {
  ASSIGN_OR_RETURN(TextLines lines, TextLines::Open(path, "CoNLL file"));
  std::vector<TaggedSentence> out;
  TaggedSentence current;
  const auto end = [&] {
    if (!current.words.empty()) out.push_back(std::move(current));
    current = TaggedSentence();
  };
  for (std::string line; lines.Next(&line);) {
    if (lines.line_number() == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty() || fields[0] == "-DOCSTART-") {
      end();
      continue;
    }
    if (labeled && fields.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", lines.line_number(), ": one column (\"", Printable(line),
          "\"); a line of a labeled CoNLL file holds the word first and its tag last, separated "
          "by spaces"));
    }
    if (current.words.empty()) current.line = lines.line_number();
    current.words.emplace_back(fields.front());
    if (labeled) current.tags.emplace_back(fields.back());
  }
  RETURN_IF_ERROR(lines.status());
  end();
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no sentence; a CoNLL file holds a word a line, a blank line between sentences"));
  }
  return out;
}

std::vector<std::string> TagSet(const std::vector<TaggedSentence>& sentences) {
  std::set<std::string> found;
  for (const TaggedSentence& s : sentences) found.insert(s.tags.begin(), s.tags.end());
  const std::vector<std::string>& conll = Conll2003Tags();
  const bool standard = std::all_of(found.begin(), found.end(), [&](const std::string& tag) {
    return std::find(conll.begin(), conll.end(), tag) != conll.end();
  });
  return standard ? conll : std::vector<std::string>(found.begin(), found.end());
}

std::vector<Entity> Entities(const std::vector<std::string>& tags) {
  std::vector<Entity> out;
  char prev = 'O';
  std::string prev_type = "_";
  size_t begin = 0;
  for (size_t i = 0; i <= tags.size(); ++i) {
    const auto [tag, type] = SplitTag(i < tags.size() ? tags[i] : "O");
    if (EndOfChunk(prev, tag, prev_type, type)) out.push_back({prev_type, begin, i - 1});
    if (StartOfChunk(prev, tag, prev_type, type)) begin = i;
    prev = tag;
    prev_type = type;
  }
  return out;
}

EntityScores ScoreEntities(const std::vector<std::vector<std::string>>& gold,
                           const std::vector<std::vector<std::string>>& predicted) {
  EntityScores scores;
  for (size_t s = 0; s < gold.size() && s < predicted.size(); ++s) {
    const std::vector<Entity> want = Entities(gold[s]), got = Entities(predicted[s]);
    scores.gold += want.size();
    scores.predicted += got.size();
    for (const Entity& e : got) {
      scores.correct += std::find(want.begin(), want.end(), e) != want.end() ? 1 : 0;
    }
    for (size_t w = 0; w < gold[s].size() && w < predicted[s].size(); ++w) {
      scores.words += 1;
      scores.words_right += gold[s][w] == predicted[s][w] ? 1 : 0;
    }
  }
  return scores;
}

absl::StatusOr<std::unique_ptr<Task>> MakeTokenClassification(const TaskSetup& setup) {
  const FinetuneConfig& c = setup.finetune;
  RETURN_IF_ERROR(CheckOneFileOfEach(setup));
  ASSIGN_OR_RETURN(std::shared_ptr<const data::Tokenizer> tokenizer, FineTuningTokenizer(setup));
  const int length = c.SequenceLength();
  // The files read, then the tags: the config's, or the first labeled
  // file's (the training file's where the run trains).
  std::vector<std::tuple<const char*, const char*, std::shared_ptr<ConllFile>>> files;
  for (const auto& [name, key, path, labeled] :
       {std::tuple{"train", "finetune.train_file", c.train_file, true},
        std::tuple{"dev", "finetune.eval_file", c.eval_file, true},
        std::tuple{"predict", "finetune.predict_file", c.predict_file, false}}) {
    if (path.empty() || (std::string(name) == "train" && !setup.training)) continue;
    auto file = std::make_shared<ConllFile>();
    file->path = path;
    file->labeled = labeled;
    ASSIGN_OR_RETURN(file->sentences, ReadConll(path, labeled));
    files.emplace_back(name, key, std::move(file));
  }
  std::vector<std::string> tags = ListOfLabels(c.labels);
  if (tags.empty() && std::get<2>(files.front())->labeled) {
    tags = TagSet(std::get<2>(files.front())->sentences);
  }
  if (tags.empty()) {
    return absl::InvalidArgumentError(
        "ner predicts the tags of finetune.labels (the training file's, in class order); give "
        "them, comma-separated");
  }
  std::unique_ptr<PackedSet> train_set;
  std::vector<PackedSet> evaluation;
  std::map<std::string, std::shared_ptr<const ConllFile>> by_set;
  for (const auto& [name, key, file] : files) {
    uint64_t cut = 0;
    ASSIGN_OR_RETURN(std::vector<Feature> features,
                     TokenFeatures(file.get(), tags, *tokenizer, length, &cut));
    logging::Get("finetune")
        ->info("{}: {} sentences{}", file->path, file->sentences.size(),
               cut > 0 ? absl::StrCat(", ", cut, " words cut at finetune.max_seq_length ", length,
                                      " (predicted O)")
                       : "");
    ASSIGN_OR_RETURN(PackedSet set,
                     PackFeatures(name, key, file->path, std::move(features), setup));
    set.labeled = file->labeled;
    if (std::string(name) == "train") {
      train_set = std::make_unique<PackedSet>(std::move(set));
      continue;
    }
    by_set[name] = file;
    evaluation.push_back(std::move(set));
  }
  FineTuning parts;
  parts.export_head = {"BertForTokenClassification", tags, "", /*pooler=*/false};
  parts.evaluate = [by_set, tags, length](const PackedSet& set, const c10::Device& device) {
    return std::make_unique<TokenEvaluation>(by_set.at(set.name), tags, length, device);
  };
  return MakeTokenClassTask(c.task, std::move(train_set), std::move(evaluation), std::move(parts),
                            static_cast<int64_t>(tags.size()));
}

std::unique_ptr<Task> MakeTokenClassTask(std::string name, std::unique_ptr<PackedSet> train,
                                         std::vector<PackedSet> evaluation, FineTuning parts,
                                         int64_t labels) {
  return std::make_unique<TokenClassTask>(std::move(name), std::move(train), std::move(evaluation),
                                          std::move(parts), labels);
}

}  // namespace pbert::tasks
