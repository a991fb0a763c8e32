// The Hugging Face peer of bench/gpu and bench/finetune (bench/hf_peer.py,
// or any command given by --peer): its plan written to a file, the command
// run with that file's path as its last argument, and the one JSON object
// it prints last read back.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace pbert::bench {

// The peer's figures over its timed steps, or why there are none.
struct PeerResult {
  std::string error;  // "" when it ran and printed its figures
  double seconds = 0, tokens = 0, sequences = 0, peak_bytes = 0;
  std::string torch = "?", model = "?";
};

// Writes `plan` to `plan_path`, runs `command plan_path` and reads the last
// JSON object it prints: {"seconds", "tokens", "sequences", and optionally
// "peak_bytes", "torch", "model"}.
inline PeerResult RunPeer(const std::string& command, const std::string& plan_path,
                          const nlohmann::json& plan) {
  PeerResult r;
  {
    std::ofstream out(plan_path);
    out << plan.dump();
    if (!out) {
      r.error = "cannot write " + plan_path;
      return r;
    }
  }
  const std::string line = command + " " + plan_path;
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) {
    r.error = "cannot start: " + line;
    return r;
  }
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) {
    r.error = status == -1 ? "failed: " + line
              : WIFSIGNALED(status)
                  ? absl::StrFormat("failed (signal %d): %s", WTERMSIG(status), line)
                  : absl::StrFormat("failed (exit %d): %s", WEXITSTATUS(status), line);
    return r;
  }
  const size_t brace = out.rfind('{');
  const nlohmann::json j =
      nlohmann::json::parse(brace == std::string::npos ? out : out.substr(brace), nullptr, false);
  try {
    if (j.is_discarded() || !j.is_object()) throw std::invalid_argument("no JSON object");
    r.seconds = j.at("seconds").get<double>();
    r.tokens = j.at("tokens").get<double>();
    r.sequences = j.at("sequences").get<double>();
    r.peak_bytes = j.value("peak_bytes", 0.0);
    r.torch = j.value("torch", r.torch);
    r.model = j.value("model", r.model);
  } catch (const std::exception& e) {
    r.error = absl::StrCat("printed no figures (", e.what(), "): ", line);
    return r;
  }
  if (!(r.seconds > 0 && r.tokens > 0)) r.error = "timed no step: " + line;
  return r;
}

}  // namespace pbert::bench
