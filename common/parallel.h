// Work shared out over threads, the calling thread one of them, with what a
// thread throws (an allocation that fails under ulimit -v, say) returned as
// a status instead of ending the process.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace pbert {

// Runs work(w) for every w in [0, workers), each on a thread of its own
// where one can be started (pthread_create fails under ulimit -u or -v),
// else on the calling thread after the others. The first exception thrown
// becomes the result, naming `what` ("tokenizing"): ResourceExhausted for
// memory, with the process's limits, Internal otherwise; every started
// thread is joined first.
absl::Status RunWorkers(int workers, const std::function<void(int)>& work, const std::string& what);

}  // namespace pbert
