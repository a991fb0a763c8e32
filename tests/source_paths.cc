#include "tests/source_paths.h"

namespace pbert::testing {

const char* SourceDir() { return PBERT_SOURCE_DIR; }
const char* SharedDataDir() { return PBERT_SHARED_DATA_DIR; }
const char* BinaryPath() { return PBERT_BINARY; }

}  // namespace pbert::testing
