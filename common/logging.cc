#include "common/logging.h"

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/printable.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace pbert::logging {
namespace {

struct State {
  std::mutex mu;
  spdlog::level::level_enum level = spdlog::level::info;
  int rank = 0;
  spdlog::sink_ptr sink;
};

State& GetState() {
  static State* state = [] {
    auto* s = new State;
    // Logs go to stderr so that stdout stays machine-readable (JSON, ids).
    s->sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    return s;
  }();
  return *state;
}

// A line's message as Printable makes it: names and values read from files
// go into messages, and none of them may forge a line or drive the terminal.
class PrintableMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string text =
        Printable(absl::string_view(msg.payload.data(), msg.payload.size()), kMaxLogLineBytes);
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PrintableMessage>();
  }

 private:
  // Longer than an error line's bound: a log line may list a run's plan.
  static constexpr size_t kMaxLogLineBytes = 8 * kMaxPrintedBytes;
};

void Configure(const State& s, spdlog::logger& logger) {
  std::string rank_tag = s.rank == 0 ? "" : absl::StrCat(" [rank ", s.rank, "]");
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<PrintableMessage>('*').set_pattern(
      absl::StrCat("[%H:%M:%S.%e] [%l]", rank_tag, " [%n] %*"));
  logger.set_formatter(std::move(formatter));
  logger.set_level(s.rank == 0 ? s.level : std::max(s.level, spdlog::level::warn));
}

spdlog::level::level_enum SpdlogLevel(Level level) {
  switch (level) {
    case Level::kTrace:
      return spdlog::level::trace;
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      break;
  }
  return spdlog::level::off;
}

}  // namespace

void Init(Level level, int rank) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.level = SpdlogLevel(level);
  s.rank = rank;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& logger) { Configure(s, *logger); });
}

std::shared_ptr<spdlog::logger> Get(absl::string_view component) {
  State& s = GetState();
  std::string name(component);
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, s.sink);
  Configure(s, *logger);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace pbert::logging
