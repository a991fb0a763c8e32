// SQuAD files (1.1 and 2.0, with or without answers), and the windows
// made of what they hold: a file's work must grow with its size alone.
#include "tasks/squad.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/small_tokenizer.h"

namespace pbert::fuzz::squad {

PBERT_FUZZ_TARGET(squad) {
  const int choice = TakeChoice(&input, 8);
  tasks::SquadReading reading;
  reading.version_2 = (choice & 1) != 0;
  reading.answers = (choice & 2) != 0;
  auto set = tasks::ReadSquad(WriteInput("train.json", input), reading);
  if (!set.ok()) return false;
  tasks::SquadOptions options;
  options.max_seq_length = 48;
  options.doc_stride = 16;
  options.max_query_length = 16;
  options.truncate_questions = (choice & 4) != 0;
  options.version_2_with_negative = reading.version_2;
  return tasks::MakeSquadFeatures(*set, SmallTokenizer(), options, reading.answers).ok();
}

}  // namespace pbert::fuzz::squad
