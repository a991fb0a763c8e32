// Progress of long work: a bar with rate and ETA when stderr is a terminal,
// a log line every few seconds otherwise (CI logs, files).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace pbert {

class Progress {
 public:
  // `total` = 0 when the amount of work is not known in advance; `initial`:
  // units done before this process started (a resumed run), counted in the
  // position but not in the rate.
  Progress(std::string label, uint64_t total, std::string unit, uint64_t initial = 0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Records `n` more units of work done; safe to call from several threads.
  void Add(uint64_t n);
  // Text shown after the counts (e.g. the latest loss); thread-safe.
  void SetStatus(std::string status);
  // Draws the final state once; called by the destructor if not before.
  void Finish();

  uint64_t done() const { return done_.load(std::memory_order_relaxed); }

 private:
  void Report(bool final);

  const std::string label_;
  const uint64_t total_;
  const std::string unit_;
  const uint64_t initial_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::atomic<int64_t> next_report_ns_{0};
  std::mutex report_mu_;
  std::string status_;
  bool finished_ = false;
};

// 1234 -> "1.2k", 5e6 -> "5.0M".
std::string HumanCount(double value);

// One line of progress, e.g. "pack  [#####-----]  50.0%  5.0M/10.0M seq
// 1.2M seq/s  ETA 4s". `width` = 0 leaves out the bar; the rate counts the
// units after `initial`. Exposed for tests.
std::string FormatProgress(const std::string& label, uint64_t done, uint64_t total,
                           const std::string& unit, double seconds, int width,
                           uint64_t initial = 0);

}  // namespace pbert
