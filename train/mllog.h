// `:::MLLOG` lines as MLPerf's mllog package writes them, for the compliance
// checker and result summarisers: one JSON object per line with namespace,
// time_ms, event_type, key, value and metadata. Written by rank 0 only, to
// RUN_DIR/mllog.txt and to the log. docs/mlperf.md lists the keys.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/append_log.h"
#include "nlohmann/json.hpp"

namespace pbert::train {

class MlLog {
 public:
  // `file` may be null (ranks other than 0): then nothing is written.
  explicit MlLog(std::unique_ptr<AppendLog> file) : file_(std::move(file)) {}

  absl::Status Event(const std::string& key, const nlohmann::json& value = nullptr,
                     const nlohmann::json& metadata = nlohmann::json::object());
  absl::Status Start(const std::string& key, const nlohmann::json& value = nullptr,
                     const nlohmann::json& metadata = nlohmann::json::object());
  absl::Status End(const std::string& key, const nlohmann::json& value = nullptr,
                   const nlohmann::json& metadata = nlohmann::json::object());

  // Bytes of the file so far (0 without one), for checkpoints.
  uint64_t bytes() const { return file_ ? file_->bytes() : 0; }
  absl::Status Sync() { return file_ ? file_->Sync() : absl::OkStatus(); }

  // One line, as written (exposed for tests).
  static std::string Line(int64_t time_ms, const std::string& event_type, const std::string& key,
                          const nlohmann::json& value, const nlohmann::json& metadata);

 private:
  absl::Status Write(const std::string& event_type, const std::string& key,
                     const nlohmann::json& value, const nlohmann::json& metadata);
  std::unique_ptr<AppendLog> file_;
};

}  // namespace pbert::train
