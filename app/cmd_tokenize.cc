#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "common/status.h"
#include "common/text_lines.h"
#include "data/corpus.h"
#include "data/tokenizer.h"

namespace pbert::app {
namespace {

absl::Status RunTokenize(const Args& args) {
  if (args.positional().size() > 1) {
    return absl::InvalidArgumentError("tokenize reads one FILE (or standard input)");
  }
  ASSIGN_OR_RETURN(data::Vocabulary vocabulary, data::Vocabulary::Load(args.Get("vocab")));
  ASSIGN_OR_RETURN(
      int64_t max_chars,
      args.GetInt("max-chars-per-word", data::Tokenizer::kDefaultMaxCharsPerWord, 1, 1 << 20));
  data::Tokenizer tokenizer(std::make_shared<const data::Vocabulary>(std::move(vocabulary)),
                            !args.Has("cased"), static_cast<int>(max_chars));
  std::optional<TextLines> lines;
  if (args.positional().empty()) {
    lines.emplace(TextLines::StandardInput());
  } else {
    ASSIGN_OR_RETURN(TextLines file,
                     TextLines::Open(args.positional()[0], "input", Readable::kStream));
    lines.emplace(std::move(file));
  }
  const bool as_tokens = args.Has("tokens");
  std::string line, out;
  std::vector<int32_t> ids;
  while (lines->Next(&line)) {
    RETURN_IF_ERROR(data::CheckUtf8(line, lines->name(), lines->line_number()));
    ids.clear();
    tokenizer.Encode(line, &ids);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out.push_back(' ');
      if (as_tokens) {
        out += tokenizer.vocabulary().token(ids[i]);
      } else {
        absl::StrAppend(&out, ids[i]);
      }
    }
    out.push_back('\n');
    if (out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  RETURN_IF_ERROR(lines->status());
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0) return ErrnoError("cannot write standard output", errno);
  return absl::OkStatus();
}

}  // namespace

Command TokenizeCommand() {
  Command command;
  command.name = "tokenize";
  command.summary = "print the WordPiece ids of text lines";
  command.usage = "tokenize --vocab V.txt [--tokens] [--cased] [FILE]";
  command.details =
      "Reads lines from FILE (standard input by default) and prints, for each, one line of\n"
      "token ids separated by spaces, with the tokenizer prepare uses.";
  command.flags = {
      {"vocab", "FILE", "BERT vocab.txt", false, true},
      {"tokens", "", "print the WordPiece strings instead of ids"},
      {"cased", "", "keep case and accents (for cased vocabularies)"},
      {"max-chars-per-word", "N", "longer words become [UNK] (default 200, as prepare)"},
  };
  command.run = RunTokenize;
  return command;
}

}  // namespace pbert::app
