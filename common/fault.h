// Failure points for recovery tests: with PBERT_FAULT=POINT:STEP[:RANK[:SIG]]
// in the environment, the process sends itself signal SIG (KILL by
// default; TERM, INT, SEGV, or STOP to hang) when it reaches POINT at
// optimizer step STEP on rank RANK (0 by default), so that tests can check
// what a crash or a stop request at that moment leaves behind. Points:
// "checks" (step 0: the run folder is claimed, the checks before training
// are under way), "after-step" (a step has been applied, nothing saved
// yet), "checkpoint-write" (a checkpoint's files are half written),
// "run-end" (the last checkpoint is saved, the export and the predictions
// not yet made) and "hdf5-apart" (step 0: in the child process that reads
// an HDF5 file's metadata or rows, data/hdf5.cc, as libhdf5 dies or hangs
// on a damaged file). Only the first attempt of a launch or torchrun job
// (TORCHELASTIC_RESTART_COUNT unset or 0) fails, so that a restarted job
// can go on. Unset, it costs one comparison. docs/training.md lists them.
#pragma once

#include <cstdint>

namespace pbert {

void FaultPoint(const char* point, int64_t step, int rank = 0);

}  // namespace pbert
