#include "common/parallel.h"

#include <exception>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/platform.h"
#include "common/status.h"

namespace pbert {
namespace {

absl::Status StatusOf(std::exception_ptr thrown, const std::string& what) {
  try {
    std::rethrow_exception(thrown);
  } catch (const std::exception& e) {
    if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr || IsOutOfMemory(e)) {
      const std::string limits = ExhaustedLimits(/*out_of_memory=*/true);
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of memory while ", what, limits.empty() ? "" : absl::StrCat(" (", limits, ")"),
          "; give the process more memory, or fewer threads (run.threads)"));
    }
    return absl::InternalError(absl::StrCat(what, " failed: ", FirstLine(e),
                                            " (please report it with the command line)"));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, " failed (please report it)"));
  }
}

}  // namespace

absl::Status RunWorkers(int workers, const std::function<void(int)>& work,
                        const std::string& what) {
  std::mutex mu;
  std::exception_ptr first;
  auto run = [&](int w) {
    try {
      work(w);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!first) first = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  std::vector<int> left;  // the workers no thread could be started for
  for (int w = 1; w < workers; ++w) {
    try {
      pool.emplace_back(run, w);
    } catch (const std::exception&) {  // std::system_error, or std::bad_alloc
      left.push_back(w);
    }
  }
  if (workers > 0) run(0);
  for (int w : left) run(w);
  for (std::thread& t : pool) t.join();
  return first ? StatusOf(first, what) : absl::OkStatus();
}

}  // namespace pbert
