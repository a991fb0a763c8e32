// JSON as every reader of ours takes it (a store's manifest, a trainer's
// state, Hugging Face's config.json): bounded in size and nesting, then
// parsed.
#include "common/structured_text.h"
#include "tests/fuzz/fuzz_target.h"

namespace pbert::fuzz::json {

PBERT_FUZZ_TARGET(json) {
  auto parsed = ParseJson(input, "fuzz.json", size_t{1} << 20);
  return parsed.ok() && !parsed->dump().empty();
}

}  // namespace pbert::fuzz::json
