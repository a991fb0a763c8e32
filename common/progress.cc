#include "common/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace pbert {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kTtyIntervalNs = 100'000'000;     // 10 redraws per second
constexpr int64_t kLogIntervalNs = 10'000'000'000;  // a log line every 10 s


std::string HumanDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

int64_t NanosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

}  // namespace

std::string HumanCount(double value) {
  const char* suffix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (std::fabs(value) >= 1000.0 && i < 4) {
    value /= 1000.0;
    ++i;
  }
  if (i > 0) return absl::StrFormat("%.1f%s", value, suffix[i]);
  // Small rates (steps per second) keep two significant digits.
  return std::fabs(value) < 10 && value != std::floor(value) ? absl::StrFormat("%.2g", value)
                                                             : absl::StrFormat("%.0f", value);
}

std::string FormatProgress(const std::string& label, uint64_t done, uint64_t total,
                           const std::string& unit, double seconds, int width, uint64_t initial) {
  double rate = seconds > 0 ? static_cast<double>(done - std::min(done, initial)) / seconds : 0.0;
  std::string line = label;
  if (total > 0) {
    double fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    if (width > 0) {
      int filled = static_cast<int>(fraction * width);
      absl::StrAppend(&line, "  [", std::string(filled, '#'), std::string(width - filled, '-'),
                      "]");
    }
    absl::StrAppend(&line, absl::StrFormat("  %5.1f%%  %s/%s %s", 100.0 * fraction,
                                           HumanCount(done), HumanCount(total), unit));
  } else {
    absl::StrAppend(&line, "  ", HumanCount(done), " ", unit);
  }
  absl::StrAppend(&line, "  ", HumanCount(rate), " ", unit, "/s");
  if (total > 0 && done < total) {
    double eta = rate > 0 ? static_cast<double>(total - done) / rate : -1.0;
    absl::StrAppend(&line, "  ETA ", HumanDuration(eta));
  } else {
    absl::StrAppend(&line, "  in ", HumanDuration(seconds));
  }
  return line;
}

Progress::Progress(std::string label, uint64_t total, std::string unit, uint64_t initial)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      initial_(initial),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(Clock::now()) {
  done_ = initial;
  next_report_ns_ = tty_ ? kTtyIntervalNs : kLogIntervalNs;
}

void Progress::SetStatus(std::string status) {
  std::lock_guard<std::mutex> lock(report_mu_);
  status_ = std::move(status);
}

Progress::~Progress() { Finish(); }

void Progress::Add(uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  int64_t now = NanosSince(start_);
  int64_t due = next_report_ns_.load(std::memory_order_relaxed);
  if (now < due) return;
  // Only the thread that moves the deadline reports.
  if (next_report_ns_.compare_exchange_strong(due,
                                              now + (tty_ ? kTtyIntervalNs : kLogIntervalNs))) {
    Report(false);
  }
}

void Progress::Finish() { Report(true); }

void Progress::Report(bool final) {
  std::lock_guard<std::mutex> lock(report_mu_);
  if (finished_) return;
  finished_ = final;
  double seconds = NanosSince(start_) * 1e-9;
  std::string line =
      FormatProgress(label_, done(), total_, unit_, seconds, tty_ ? 30 : 0, initial_);
  if (!status_.empty()) absl::StrAppend(&line, "  ", status_);
  if (tty_) {
    std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
    std::fflush(stderr);
  } else {
    logging::Get("progress")->info("{}", line);
  }
}

}  // namespace pbert
