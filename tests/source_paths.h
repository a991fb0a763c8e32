// Where the checkout, ../shared/data and the packed-bert binary lie, for the
// tests and benchmarks. Only tests/source_paths.cc is compiled with these
// absolute paths: every other file compiles to the same object in any
// clone, so ccache serves another clone's build (docs/building.md).
#pragma once

namespace pbert::testing {

const char* SourceDir();      // the checkout
const char* SharedDataDir();  // ../shared/data beside it (may not exist)
const char* BinaryPath();     // the packed-bert binary of this build

}  // namespace pbert::testing
