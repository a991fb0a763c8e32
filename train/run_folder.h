// The run folder (run.output_dir) as one run's own: `Claim` takes it for
// this process, so that two runs never write into one folder, and refuses,
// before anything is written, a folder that cannot hold the run. A run that
// is refused later, while it checks its data, weights and model, leaves the
// folder as it found it (`Release` on the error path).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/folders.h"
#include "train/tensorboard.h"

namespace pbert::train {

// The logs a run appends to in its folder (docs/training.md, The run folder).
inline constexpr const char* kRunLogs[] = {"mllog.txt", "metrics.jsonl", kTensorBoardFile};

class RunFolder {
 public:
  // Takes `dir` (created if missing) for a run of `task` in this process:
  // locks RUN_DIR/run.lock and writes its pid and the task there. Refuses
  // (InvalidArgument or AlreadyExists, for exit 2), before anything is
  // written, a path that is a file or cannot be created, one that is or
  // lies in what a run keeps (a checkpoint, an instance store, a run
  // folder's checkpoints or logs) or is another command's output folder
  // (a store, a Hugging Face or evaluation folder), one whose checkpoints
  // path is a file, a folder that holds another task's run, and a folder
  // another run holds.
  static absl::StatusOr<RunFolder> Claim(const std::string& dir, const std::string& task);

  // Checks that a new run may start here: refuses a folder whose run has
  // checkpoints (AlreadyExists), naming `resume` (the flag that continues
  // it). A folder whose run stopped before its first checkpoint (killed,
  // out of memory, a failed step) holds nothing to continue: the new run
  // replaces its logs, with a warning.
  absl::Status AcceptNewRun(const std::string& resume) const;

  RunFolder(RunFolder&& other) noexcept;
  RunFolder& operator=(RunFolder&&) = delete;
  RunFolder(const RunFolder&) = delete;
  ~RunFolder();  // unlocks; the lock file stays for the next run

  // The run was refused before it wrote anything: removes the lock file
  // and the folders this claim created, if
  // they are empty.
  void Release();

  // Refuses (InvalidArgument) an input file `path` (named by `key`) that
  // is one of the run's outputs in this folder, which the run would
  // overwrite after reading it.
  absl::Status CheckInput(const std::string& key, const std::string& path) const;

  // After the run: Release if it wrote nothing into the folder (refused
  // when it started to train, or resumed from a run that had finished), so
  // that the folder is as it was; a run that wrote its logs keeps the lock
  // file, which marks the folder as a run's (common/outputs.h).
  void ReleaseIfUnused();

  // What Release would remove, in order (the lock file if this claim made
  // it, then the folders it made, deepest first): for a signal handler,
  // which may only unlink and rmdir.
  std::vector<std::string> ReleasePaths() const;

  const std::string& dir() const { return dir_; }

 private:
  RunFolder(std::string dir, int fd, CreatedFolders created, bool created_lock)
      : dir_(std::move(dir)), fd_(fd), created_(std::move(created)), created_lock_(created_lock) {}

  std::string dir_;
  int fd_ = -1;
  CreatedFolders created_;  // the folders this claim made
  bool created_lock_ = false;
};

// However a command ends (a status, or an exception on its way to the
// command line), leaves the folder it claimed (none on ranks other than 0)
// as a refused run must, Release, or, once the run began to write
// (Started), ReleaseIfUnused.
class RunFolderRelease {
 public:
  explicit RunFolderRelease(std::optional<RunFolder>& folder) : folder_(folder) {}
  RunFolderRelease(const RunFolderRelease&) = delete;
  RunFolderRelease& operator=(const RunFolderRelease&) = delete;
  ~RunFolderRelease() {
    if (!folder_) return;
    if (started_) {
      folder_->ReleaseIfUnused();
    } else {
      folder_->Release();
    }
  }
  void Started() { started_ = true; }

 private:
  std::optional<RunFolder>& folder_;
  bool started_ = false;
};

}  // namespace pbert::train
