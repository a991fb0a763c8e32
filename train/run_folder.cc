#include "train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/append_log.h"
#include "common/folders.h"
#include "common/logging.h"
#include "common/status.h"
#include "train/checkpointer.h"

namespace pbert::train {
namespace {

namespace fs = std::filesystem;

constexpr char kLockName[] = "run.lock";

// The pid the holder of `fd`'s lock wrote, "" if there is none.
std::string HolderPid(int fd) {
  char text[32] = {};
  const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  const std::string pid(absl::StripAsciiWhitespace(std::string(text, n > 0 ? n : 0)));
  const bool digits = !pid.empty() && std::all_of(pid.begin(), pid.end(), absl::ascii_isdigit);
  return digits ? pid : "";
}

}  // namespace

absl::StatusOr<RunFolder> RunFolder::Claim(const std::string& dir) {
  CreatedFolders created(dir);  // removed again if the claim fails
  RETURN_IF_ERROR(CreateFolder(dir, "run.output_dir"));
  // Checkpoints go to RUN_DIR/checkpoints: a file there would fail the first
  // save, after the training it was to keep.
  std::error_code error;
  const std::string checkpoints = absl::StrCat(dir, "/checkpoints");
  if (fs::exists(checkpoints, error) && !fs::is_directory(checkpoints, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(checkpoints,
                     " is a file, where the run's checkpoints go; move it away, or choose "
                     "another run.output_dir"));
  }
  // The logs are appended to: anything but a file in their place (a named
  // pipe would hold the run) fails before anything is written.
  for (const char* name : kRunLogs) {
    RETURN_IF_ERROR(AppendLog::CheckPath(absl::StrCat(dir, "/", name)));
  }
  const std::string lock = absl::StrCat(dir, "/", kLockName);
  bool created_lock = true;
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    created_lock = false;
    fd = open(lock.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", lock, ": ", why,
                                                   "; choose a run.output_dir you can write"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string pid = HolderPid(fd);
    close(fd);  // the lock file, and so the folder, are the other run's
    created.Keep();
    return absl::AlreadyExistsError(absl::StrCat(
        "run.output_dir '", dir, "' is in use by another packed-bert run",
        pid.empty() ? "" : absl::StrCat(" (pid ", pid, ")"),
        "; wait for it to end, or choose another run.output_dir"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    logging::Get("train")->debug("could not write the pid into {}", lock);
  }
  return RunFolder(dir, fd, std::move(created), created_lock);
}

absl::Status RunFolder::AcceptNewRun(const std::string& resume) const {
  if (const std::string newest = LatestCheckpoint(dir_); !newest.empty()) {
    return absl::AlreadyExistsError(
        absl::StrCat(dir_, " holds a run with checkpoints (newest ", newest, "); continue it with ",
                     resume, ", or choose another run.output_dir"));
  }
  std::error_code error;
  for (const char* name : kRunLogs) {
    if (fs::exists(absl::StrCat(dir_, "/", name), error)) {
      logging::Get("train")->warn(
          "{} holds the logs of a run that stopped before its first checkpoint, with nothing "
          "to continue: this new run replaces them",
          dir_);
      break;
    }
  }
  return absl::OkStatus();
}

void RunFolder::ReleaseIfUnused() {
  std::error_code error;
  const fs::path dir(dir_);
  for (const char* name : kRunLogs) {
    if (fs::exists(dir / name, error)) return;
  }
  for (const char* name : {"checkpoints", "config.yaml", "pack.pbpack"}) {
    if (fs::exists(dir / name, error)) return;
  }
  Release();
}

RunFolder::RunFolder(RunFolder&& other) noexcept
    : dir_(std::move(other.dir_)),
      fd_(other.fd_),
      created_(std::move(other.created_)),
      created_lock_(other.created_lock_) {
  other.fd_ = -1;
}

RunFolder::~RunFolder() {
  created_.Keep();  // the run's: only Release removes
  if (fd_ >= 0) close(fd_);
}

std::vector<std::string> RunFolder::ReleasePaths() const {
  std::vector<std::string> paths;
  if (fd_ < 0) return paths;
  if (created_lock_) paths.push_back(absl::StrCat(dir_, "/", kLockName));
  for (const fs::path& folder : created_.folders()) paths.push_back(folder.string());
  return paths;
}

void RunFolder::Release() {
  if (fd_ < 0) return;
  std::error_code error;
  // Removed while still locked, so that no other run can take the old file.
  if (created_lock_) fs::remove(absl::StrCat(dir_, "/", kLockName), error);
  close(fd_);
  fd_ = -1;
  created_.RemoveIfEmpty();
}

}  // namespace pbert::train
