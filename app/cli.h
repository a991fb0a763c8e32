// The command line of `packed-bert`: one binary, subcommands, each with its
// own flags and `--help`.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "common/folders.h"
#include "common/outputs.h"

namespace pbert::app {

struct Flag {
  std::string name;        // without dashes, e.g. "max-len"
  std::string value_name;  // e.g. "N"; empty for a switch that takes no value
  std::string help;
  bool repeated = false;  // may be given several times (--set)
  bool required = false;  // the command cannot run without it
};

// Flags and positional arguments of one invocation.
class Args {
 public:
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  const std::vector<std::string>& GetAll(const std::string& name) const;
  // The flag's integer value, in [min, max], or `fallback` when absent.
  // Every integer flag has a range that a real run can use.
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback, int64_t min,
                                 int64_t max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend class CommandLine;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

struct Command {
  std::string name;
  std::string summary;  // one line, shown in `packed-bert --help`
  std::string usage;    // the synopsis after "packed-bert "
  std::string details;  // optional paragraphs after the synopsis
  std::vector<Flag> flags;
  std::function<absl::Status(const Args&)> run;
};

// The flags every config-driven command takes: --config, --set, --threads,
// --log-level.
std::vector<Flag> ConfigFlags();

// --overwrite, for commands that write files: it replaces only `replaces`
// (common/outputs.h, OutputKindName).
Flag OverwriteFlag(const std::string& replaces);

// Fails before the command's work if writing `path` as an output of `kind`
// would lose something (CheckOutputTarget, common/outputs.h): it lies in
// what a run keeps; it exists and the command line has no --overwrite;
// with --overwrite, it is not an output of `kind`; or it could not be
// written.
absl::Status CheckOutput(const Args& args, const std::string& path, OutputKind kind);
// What writing the output does to one that exists by then: replaced with
// --overwrite; else the write fails, so that of two commands writing one
// new path at once only one succeeds (the check above is not atomic).
Existing ExistingOutput(const Args& args);

class CommandLine {
 public:
  explicit CommandLine(std::vector<Command> commands) : commands_(std::move(commands)) {}

  // Runs the subcommand named by argv[1]; returns the process exit code:
  // 0 success, 1 failure while working, 2 bad usage, bad config or input
  // that the user must fix, or a subcommand that is not yet available.
  int Run(int argc, char** argv) const;

  std::string Help() const;
  static std::string Help(const Command& command);
  static absl::StatusOr<Args> Parse(const Command& command, const std::vector<std::string>& argv);

 private:
  // Open files a command may need at once: shards mapped while a store
  // opens, log files, the loader's threads, c10d's sockets.
  static constexpr int kFilesNeeded = 64;

  const Command* Find(const std::string& name) const;
  // Runs `command` with the arguments after its name: its status, with any
  // exception and exhausted process limit said in words.
  absl::Status RunCommand(const Command& command, const std::vector<std::string>& rest) const;

  std::vector<Command> commands_;
};

// "out of memory", with the process's memory limit if one is set, and what
// to change for `command`.
absl::Status OutOfMemory(const std::string& command);

// The exit code for a failed status (see CommandLine::Run).
int ExitCodeFor(const absl::Status& status);

// The flag that continues the running command's run ("--resume auto"),
// which the line written when the CPU-time limit ends the process names;
// set by a command that trains, before it does.
void SetResumeFlag(const std::string& flag);

}  // namespace pbert::app
