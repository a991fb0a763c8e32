#include "train/mllog.h"

#include <chrono>

#include "common/logging.h"

namespace pbert::train {

std::string MlLog::Line(int64_t time_ms, const std::string& event_type, const std::string& key,
                        const nlohmann::json& value, const nlohmann::json& metadata) {
  nlohmann::ordered_json line;
  line["namespace"] = "";
  line["time_ms"] = time_ms;
  line["event_type"] = event_type;
  line["key"] = key;
  line["value"] = value;
  line["metadata"] = metadata;
  return ":::MLLOG " + line.dump();
}

absl::Status MlLog::Write(const std::string& event_type, const std::string& key,
                          const nlohmann::json& value, const nlohmann::json& metadata) {
  if (!file_) return absl::OkStatus();
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::string line = Line(now, event_type, key, value, metadata);
  logging::Get("mllog")->debug("{}", line);
  return file_->Append(line);
}

absl::Status MlLog::Event(const std::string& key, const nlohmann::json& value,
                          const nlohmann::json& metadata) {
  return Write("POINT_IN_TIME", key, value, metadata);
}

absl::Status MlLog::Start(const std::string& key, const nlohmann::json& value,
                          const nlohmann::json& metadata) {
  return Write("INTERVAL_START", key, value, metadata);
}

absl::Status MlLog::End(const std::string& key, const nlohmann::json& value,
                        const nlohmann::json& metadata) {
  return Write("INTERVAL_END", key, value, metadata);
}

}  // namespace pbert::train
